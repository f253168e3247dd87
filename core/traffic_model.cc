// Closed-form traffic per rank (ALGORITHMS.md §2, §4, §6). No steps and nothing on the wire:
// these are the formulas the measured bytes of the schemes are checked against (bp_round
// and the benchmarks), and that the scheme choice (BP vs HC) compares.
#include "core/traffic_model.h"

#include <algorithm>
#include <cmath>

namespace zen {
namespace {

double share(int n) {
  return n <= 0 ? 0.0 : static_cast<double>(n - 1) / static_cast<double>(n);
}

}  // namespace

TrafficEstimate denseAllreduceTraffic(int n, int64_t numRows, size_t rowBytes) {
  const double m = static_cast<double>(numRows) * static_cast<double>(rowBytes);
  return TrafficEstimate{share(n) * m, share(n) * m};
}

TrafficEstimate bpCooTraffic(const TrafficInputs& in) {
  const double entry = static_cast<double>(in.indexBytes + in.rowBytes);
  return TrafficEstimate{share(in.n) * in.rankNnz * entry, share(in.n) * in.aggregatedNnz * entry};
}

TrafficEstimate bpHashBitmapTraffic(const TrafficInputs& in) {
  const double push = share(in.n) * in.rankNnz * static_cast<double>(in.indexBytes + in.rowBytes);
  const double pull = share(in.n) * (static_cast<double>(in.numRows) / 8.0 +
                                     in.aggregatedNnz * static_cast<double>(in.rowBytes));
  return TrafficEstimate{push, pull};
}

TrafficEstimate bpZenTraffic(const TrafficInputs& in) {
  const TrafficEstimate withBitmap = bpHashBitmapTraffic(in);
  if (in.n <= 0 || in.numRows <= 0) return withBitmap;
  const double u = static_cast<double>(in.numRows) / in.n;  // positions of a part
  const double a = in.aggregatedNnz / in.n;                 // its rows
  const double rows = a * static_cast<double>(in.rowBytes);
  double part = rows + u / 8.0;                                          // bitmap
  part = std::min(part, rows + a * static_cast<double>(in.indexBytes));  // COO
  if (a >= u) part = rows;                                               // dense
  if (a >= 1 && a < u) {
    const double low = std::floor(std::log2(u / a));
    part = std::min(part, rows + (a * (low + 1) + u / std::exp2(low)) / 8.0);  // Elias-Fano
  }
  return TrafficEstimate{withBitmap.push, static_cast<double>(in.n - 1) * part};
}

TrafficEstimate agSparseTraffic(const TrafficInputs& in) {
  return TrafficEstimate{0.0, static_cast<double>(in.n - 1) * in.rankNnz *
                                  static_cast<double>(in.indexBytes + in.rowBytes)};
}

TrafficEstimate hcTraffic(const std::vector<double>& mergedNnz,
                          int64_t numRows,
                          size_t indexBytes,
                          size_t rowBytes) {
  const double dense = static_cast<double>(numRows) * static_cast<double>(rowBytes);
  double bytes = 0;
  for (double m : mergedNnz) {
    bytes += std::min(m * static_cast<double>(indexBytes + rowBytes), dense);
  }
  return TrafficEstimate{bytes, 0.0};
}

double bitmapBreakEvenDensity(size_t indexBytes) {
  return 1.0 / (8.0 * static_cast<double>(indexBytes));
}

}  // namespace zen
