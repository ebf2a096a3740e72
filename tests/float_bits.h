// Bit-for-bit comparison of FP32 results, shared by the kernel tests that hold a mirror to its
// reference (a NaN equals any NaN: kernels need not agree on the payload).
#pragma once

#include <cmath>
#include <cstring>
#include <vector>

namespace ucplan::test {

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  }
  return true;
}

}  // namespace ucplan::test
