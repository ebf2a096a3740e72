#include "substitute.h"

namespace ucplan {

std::string choose_conv_algo(const AlgoFit& planned, const std::vector<AlgoFit>& ranked, std::int64_t given) {
  auto fits = [&](const AlgoFit& a) { return a.workspace && *a.workspace <= given; };
  if (fits(planned)) return planned.name;
  for (const AlgoFit& a : ranked)
    if (fits(a)) return a.name;
  return "";
}

}  // namespace ucplan
