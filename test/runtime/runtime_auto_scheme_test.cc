// ZEN_SCHEME=auto through the runtime and the CPU executor (ops/auto_scheme.h) on in-process
// ranks: every call's result, the profiling calls' included, equals the dense reference; the
// profiling calls run the candidates of ZEN_AUTO_SCHEMES in turn; afterwards every rank runs the
// one scheme they agreed on.
#include <algorithm>
#include <set>

#include "test/runtime/runtime_test_util.h"

namespace zen::testing {
namespace {

constexpr int kRanks = 3;  // not a power of two: hc folds a rank in
constexpr int kProfileCalls = 2;

struct AutoCase {
  const char* schemes;  // ZEN_AUTO_SCHEMES; empty: the default
  std::vector<std::string> candidates;
};

class RuntimeAutoScheme : public ::testing::TestWithParam<AutoCase> {};

// The rows any rank sent: the sparse output keeps them all (a row summing to zero included).
std::vector<int64_t> unionOfRows(const std::vector<SparseInput>& inputs) {
  std::set<int64_t> rows;
  for (const SparseInput& in : inputs) rows.insert(in.indices.begin(), in.indices.end());
  return {rows.begin(), rows.end()};
}

// Three sparse tensors in two buckets ({a, c} summed, c with a dense output; {b} averaged), nnz
// changing every step, through profiling and beyond.
TEST_P(RuntimeAutoScheme, EveryCallMatchesTheDenseReferenceAndRanksAgree) {
  const AutoCase& c = GetParam();
  std::map<std::string, std::string> env = {
      {"ZEN_SCHEME", "auto"}, {"ZEN_AUTO_PROFILE_CALLS", std::to_string(kProfileCalls)}};
  if (*c.schemes != '\0') env.emplace("ZEN_AUTO_SCHEMES", c.schemes);
  Job job(kRanks, testConfig(env));
  const int profiling = static_cast<int>(c.candidates.size()) * kProfileCalls;
  const int steps = profiling + 4;
  constexpr int64_t kRows[3] = {300, 17, 1000};
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> chosen(kRanks);  // per rank: sum, average
  job.onEachRank([&](int r, Runtime& rt) {
    for (int s = 0; s < steps; ++s) {
      std::vector<std::vector<SparseInput>> in(3);
      for (int t = 0; t < 3; ++t) {
        for (int p = 0; p < kRanks; ++p) {
          // b (17 rows) dense enough that some rank always sends a row: a call that exchanges
          // none is not a profiling sample.
          const double density = t == 1 ? 0.3 : 0.02 + 0.03 * (s % 3);
          in[t].push_back(makeSparse(s * 100 + t * 10 + p, kRows[t], 2, density));
        }
      }
      std::vector<float> dense(static_cast<size_t>(kRows[2] * 2));
      std::vector<TensorOp> ops;
      ops.push_back(TensorOp::sparseAllreduce("a", in[0][r].view(), ReduceOp::kSum));
      ops.push_back(TensorOp::sparseAllreduce("b", in[1][r].view(), ReduceOp::kAverage));
      ops.push_back(TensorOp::sparseAllreduce("c", in[2][r].view(), ReduceOp::kSum,
                                              denseView(dense, {kRows[2], 2})));
      auto hs = rt.enqueueGroup(std::move(ops));
      ASSERT_TRUE(hs.isOk()) << hs.status().toString();
      for (const Handle& h : hs.value()) ASSERT_TRUE(waitFor(h).isOk()) << "step " << s;
      const SparseTensor& a = hs.value()[0].result().sparse;
      const SparseTensor& b = hs.value()[1].result().sparse;
      EXPECT_EQ(densify(a), denseSum(in[0])) << "rank " << r << " step " << s;
      EXPECT_EQ(a.indices, unionOfRows(in[0])) << "rank " << r << " step " << s;
      EXPECT_EQ(densify(b), scaled(denseSum(in[1]), 1.0f / kRanks)) << "step " << s;
      EXPECT_EQ(b.indices, unionOfRows(in[1])) << "rank " << r << " step " << s;
      EXPECT_EQ(dense, denseSum(in[2])) << "rank " << r << " step " << s;

      // Which scheme ran each bucket ({a, c} summed, {b} averaged): the profiling plan, then
      // the one the ranks agreed on for that bucket.
      const RuntimeStats stats = rt.stats();
      const std::string sum = stats.tensors.at("a").lastScheme;
      const std::string average = stats.tensors.at("b").lastScheme;
      EXPECT_EQ(stats.tensors.at("c").lastScheme, sum) << "step " << s;
      if (s < profiling) {
        const std::string& planned = c.candidates[static_cast<size_t>(s) % c.candidates.size()];
        EXPECT_EQ(sum, planned) << "rank " << r << " step " << s;
        EXPECT_EQ(average, planned) << "rank " << r << " step " << s;
        continue;
      }
      for (const std::string& ran : {sum, average}) {
        EXPECT_NE(std::find(c.candidates.begin(), c.candidates.end(), ran), c.candidates.end())
            << ran;
      }
      std::lock_guard<std::mutex> lock(mu);
      if (s == profiling) {
        chosen[static_cast<size_t>(r)] = {sum, average};
      } else {
        EXPECT_EQ(chosen[static_cast<size_t>(r)], (std::pair{sum, average})) << "step " << s;
      }
    }
    EXPECT_EQ(rt.stats().bucketsExecuted, static_cast<uint64_t>(2 * steps)) << "rank " << r;
  });
  for (int r = 1; r < kRanks; ++r) EXPECT_EQ(chosen[r], chosen[0]) << "rank " << r << " disagrees";
}

INSTANTIATE_TEST_SUITE_P(Candidates,
                         RuntimeAutoScheme,
                         ::testing::Values(AutoCase{"", {"zen", "hc", "agsparse"}},
                                           AutoCase{"agsparse,hc", {"agsparse", "hc"}},
                                           AutoCase{"hc,agsparse,zen", {"hc", "agsparse", "zen"}},
                                           AutoCase{"agsparse", {"agsparse"}}),
                         [](const ::testing::TestParamInfo<AutoCase>& info) {
                           std::string name = *info.param.schemes ? info.param.schemes : "default";
                           std::replace(name.begin(), name.end(), ',', '_');
                           return name;
                         });

}  // namespace
}  // namespace zen::testing
