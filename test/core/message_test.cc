// core/message.h's classifications: which requests and responses move tensor data.

#include "core/message.h"

#include <gtest/gtest.h>

namespace zen {
namespace {

TEST(Message, AResponseCarriesTensorsExactlyWhenItsRequestDoes) {
  for (int i = 0; i < kNumOpTypes; ++i) {
    const auto op = static_cast<OpType>(i);
    EXPECT_EQ(carriesTensors(responseTypeFor(op)), carriesTensors(op)) << opTypeName(op);
  }
}

TEST(Message, OnlyCollectivesOverDataCarryTensors) {
  int carrying = 0;
  for (int i = 0; i < kNumResponseTypes; ++i) {
    carrying += carriesTensors(static_cast<ResponseType>(i)) ? 1 : 0;
  }
  // sparse allreduce, allreduce, allgather, broadcast, alltoall, reducescatter
  EXPECT_EQ(carrying, 6);
  EXPECT_FALSE(carriesTensors(ResponseType::kError));
  EXPECT_FALSE(carriesTensors(ResponseType::kJoin));
  EXPECT_FALSE(carriesTensors(ResponseType::kAddProcessSet));
  EXPECT_TRUE(carriesTensors(ResponseType::kReducescatter));
}

}  // namespace
}  // namespace zen
