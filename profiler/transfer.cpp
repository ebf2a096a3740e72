#include <algorithm>

#include "planner/model/errors.h"
#include "profile_network.h"

namespace ucplan {

TransferCosts fit_transfers(const std::vector<TransferPoint>& points) {
  UCPLAN_CHECK(points.size() >= 2, "a transfer fit needs two points");
  // Ordinary least squares of seconds on bytes; slope = 1 / bandwidth, intercept = latency.
  double n = static_cast<double>(points.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& p : points) {
    const double x = static_cast<double>(p.bytes);
    sx += x;
    sy += p.seconds;
    sxx += x * x;
    sxy += x * p.seconds;
  }
  double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  double intercept = (sy - slope * sx) / n;
  if (!(slope > 0)) {  // degenerate measurements: fall back to the largest point alone
    const auto& big =
        *std::max_element(points.begin(), points.end(), [](auto& a, auto& b) { return a.bytes < b.bytes; });
    slope = big.seconds / static_cast<double>(big.bytes);
    intercept = 0;
  }
  TransferCosts t;
  t.latency_seconds = std::max(0.0, intercept);
  t.bytes_per_second = 1.0 / slope;
  t.points = points;
  return t;
}

void median_and_spread(std::vector<double> s, double* median, double* spread) {
  UCPLAN_CHECK(!s.empty(), "at least one timing");
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  *spread = *median > 0 ? (s.back() - s.front()) / *median : 0;
}

}  // namespace ucplan
