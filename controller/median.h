#pragma once

// The median of a few scores: a point's samples and the confirmation's pair ratios
// (controller/parameter_manager.h), the mean of the middle two for an even count. A median,
// not a mean, so one slow sample (a checkpoint, a straggler) does not sink a point.

#include <algorithm>
#include <vector>

namespace zen::controller {

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace zen::controller
