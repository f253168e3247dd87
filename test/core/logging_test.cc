#include "core/logging.h"

#include <gtest/gtest.h>

namespace zen {
namespace {

TEST(Logging, EveryLineCarriesTheRankAndRespectsTheLevel) {
  ::testing::internal::CaptureStderr();
  auto logger = makeLogger(3, "info");
  logger->info("bucket {} ready", 7);
  logger->debug("not shown");
  logger->flush();
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("[zen 3] [info] bucket 7 ready"), std::string::npos) << out;
  EXPECT_EQ(out.find("not shown"), std::string::npos);
}

TEST(Logging, TheTimeOfDayCanBeLeftOut) {
  ::testing::internal::CaptureStderr();
  makeLogger(1, "info")->info("with");
  makeLogger(2, "info", /*withTime=*/false)->info("without");
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("] [zen 1] [info] with\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("[zen 1]"), 15u) << out;  // after "[HH:MM:SS.mmm] "
  EXPECT_NE(out.find("\n[zen 2] [info] without\n"), std::string::npos) << out;
}

TEST(Logging, LevelsParse) {
  EXPECT_TRUE(parseLogLevel("trace").isOk());
  EXPECT_EQ(parseLogLevel("off").value(), spdlog::level::off);
  EXPECT_FALSE(parseLogLevel("chatty").isOk());
}

}  // namespace
}  // namespace zen
