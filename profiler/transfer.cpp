#include <algorithm>

#include "planner/model/errors.h"
#include "profile_network.h"

namespace ucplan {

void median_and_spread(std::vector<double> s, double* median, double* spread) {
  UCPLAN_CHECK(!s.empty(), "at least one timing");
  std::sort(s.begin(), s.end());
  const std::size_t n = s.size();
  *median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  *spread = *median > 0 ? (s.back() - s.front()) / *median : 0;
}

}  // namespace ucplan
