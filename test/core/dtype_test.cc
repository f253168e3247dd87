#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace zen {
namespace {

TEST(DataType, SizesAndNamesRoundTrip) {
  for (DataType d : {DataType::kFloat32, DataType::kFloat16, DataType::kBFloat16,
                     DataType::kFloat64, DataType::kInt32, DataType::kInt64}) {
    auto parsed = parseDataType(dataTypeName(d));
    ASSERT_TRUE(parsed.isOk());
    EXPECT_EQ(parsed.value(), d);
  }
  EXPECT_EQ(dataTypeSize(DataType::kBFloat16), 2u);
  EXPECT_EQ(dataTypeSize(DataType::kInt64), 8u);
  EXPECT_FALSE(parseDataType("float8").isOk());
}

TEST(Half, EveryHalfValueRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const Half h{static_cast<uint16_t>(bits)};
    const float f = toFloat(h);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(toFloat(toHalf(f))));
      continue;
    }
    EXPECT_EQ(toHalf(f).bits, h.bits) << "bits " << bits << " value " << f;
  }
}

TEST(Half, RoundsToNearestEvenAndSaturatesToInfinity) {
  EXPECT_EQ(toFloat(toHalf(1.0f + 1.0f / 2048)), 1.0f);               // tie, rounds to even
  EXPECT_EQ(toFloat(toHalf(1.0f + 3.0f / 2048)), 1.0f + 1.0f / 512);  // tie, rounds up to even
  EXPECT_EQ(toFloat(toHalf(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(toFloat(toHalf(65520.0f))));
  EXPECT_EQ(toFloat(toHalf(5.9604644775390625e-8f)), 5.9604644775390625e-8f);  // min subnormal
  EXPECT_EQ(toFloat(toHalf(2.0e-8f)), 0.0f);
}

TEST(BFloat16, RoundTripsAndRoundsToNearestEven) {
  for (uint32_t bits = 0; bits <= 0xffff; bits += 7) {
    const BFloat16 b{static_cast<uint16_t>(bits)};
    const float f = toFloat(b);
    if (!std::isnan(f)) {
      EXPECT_EQ(toBFloat16(f).bits, b.bits);
    }
  }
  EXPECT_EQ(toFloat(toBFloat16(1.0f + 1.0f / 256)), 1.0f);  // tie to even
  EXPECT_EQ(toFloat(toBFloat16(3.0f)), 3.0f);
  EXPECT_TRUE(std::isnan(toFloat(toBFloat16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Accumulator, SixteenBitFloatsAccumulateInFloat) {
  static_assert(std::is_same_v<AccumulatorT<Half>, float>);
  static_assert(std::is_same_v<AccumulatorT<BFloat16>, float>);
  static_assert(std::is_same_v<AccumulatorT<double>, double>);
  static_assert(std::is_same_v<AccumulatorT<int32_t>, int64_t>);
  // 2048 + 1 is not a bf16 value; summing 256 halves of 1/256 in bf16 would stall at 1.
  float acc = 0;
  for (int i = 0; i < 4096; ++i) acc += toAccumulator<float>(toBFloat16(1.0f));
  EXPECT_EQ(acc, 4096.0f);
}

}  // namespace
}  // namespace zen
