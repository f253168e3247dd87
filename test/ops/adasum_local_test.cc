// ops::adasum on in-process ranks only: closed forms at 2 ranks and the reference check of
// adasum_test.cc at 8 ranks (beyond the TransportTest instantiations' world sizes).
#include <gtest/gtest.h>

#include <vector>

#include "ops/adasum.h"
#include "test/ops/transport_harness.h"

namespace zen::ops::testing {

void checkAdasumEveryDtypeOrRefusal(Transport& t);  // adasum_test.cc

namespace {

// Two vectors in closed form, one tensor each in a fused bucket: orthogonal ones add up (both
// coefficients 1); equal ones give the vector itself (both 1/2); opposite ones cancel (both
// 3/2).
TEST(Adasum, TwoRanksInClosedForm) {
  runRanks({Backend::kInProcess, 2}, {}, [](Transport& t) {
    const int me = t.rank();
    std::vector<double> orthogonal =
        me == 0 ? std::vector<double>{3, 0} : std::vector<double>{0, 4};
    std::vector<double> equal = {1.5, -2, 0.25};
    std::vector<double> opposite = {me == 0 ? 2.0 : -2.0};
    AdasumOptions o;
    o.transport = &t;
    o.dtype = DataType::kFloat64;
    for (auto* v : {&orthogonal, &equal, &opposite})
      o.tensors.push_back({v->data(), v->data(), v->size()});
    ASSERT_TRUE(adasum(o).isOk());
    EXPECT_EQ(orthogonal, (std::vector<double>{3, 4}));
    EXPECT_EQ(equal, (std::vector<double>{1.5, -2, 0.25}));
    EXPECT_EQ(opposite, (std::vector<double>{0}));
  });
}

TEST(Adasum, EightInProcessRanks) {
  runRanks({Backend::kInProcess, 8}, {}, checkAdasumEveryDtypeOrRefusal);
}

}  // namespace
}  // namespace zen::ops::testing
