#include "core/status.h"

#include <gtest/gtest.h>

namespace zen {
namespace {

Result<int> half(int x) {
  ZEN_CHECK_ARG(x % 2 == 0, "{} is odd", x);
  return x / 2;
}

Result<int> quarter(int x) {
  ZEN_ASSIGN_OR_RETURN(int h, half(x));
  ZEN_ASSIGN_OR_RETURN(int q, half(h));
  return q;
}

TEST(Status, OkAndErrorCarryCodeMessageAndLocation) {
  EXPECT_TRUE(Status::ok().isOk());
  const Status s = ZEN_ERROR(StatusCode::kTimeout, "rank {} silent", 3);
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.message(), "rank 3 silent");
  EXPECT_NE(s.toString().find("Timeout: rank 3 silent [core/status_test.cc:"), std::string::npos)
      << s.toString();
}

TEST(Status, ResultPropagatesTheFirstError) {
  EXPECT_EQ(quarter(8).value(), 2);
  const auto r = quarter(6);
  ASSERT_FALSE(r.isOk());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "3 is odd");
}

}  // namespace
}  // namespace zen
