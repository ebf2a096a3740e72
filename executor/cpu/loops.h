// Reductions shared by the CPU kernels. Float addition is not associative, so the compiler only
// vectorises a reduction written with independent partial sums (kLanes of them); each call sums
// at most one row or plane in float, and callers add the results up in double.
#pragma once

#include <cstdint>

namespace ucplan::cpu {

inline constexpr int kLanes = 8;

// sum over e of a[e] * b[e * stride_b]
inline float dot(const float* __restrict a, const float* __restrict b, std::int64_t stride_b, std::int64_t count) {
  float lane[kLanes] = {};
  std::int64_t e = 0;
  if (stride_b == 1) {
    for (; e + kLanes <= count; e += kLanes)
      for (int l = 0; l < kLanes; ++l) lane[l] += a[e + l] * b[e + l];
  } else {
    for (; e + kLanes <= count; e += kLanes)
      for (int l = 0; l < kLanes; ++l) lane[l] += a[e + l] * b[(e + l) * stride_b];
  }
  float s = 0;
  for (; e < count; ++e) s += a[e] * b[e * stride_b];
  for (float v : lane) s += v;
  return s;
}

// sum over e of a[e] * (b[e] - b_mean)
inline float dot_centered(const float* a, const float* b, float b_mean, std::int64_t count) {
  float lane[kLanes] = {};
  std::int64_t e = 0;
  for (; e + kLanes <= count; e += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += a[e + l] * (b[e + l] - b_mean);
  float s = 0;
  for (; e < count; ++e) s += a[e] * (b[e] - b_mean);
  for (float v : lane) s += v;
  return s;
}

// sum over e of (a[e] - mean)^2
inline float squared_deviation(const float* a, float mean, std::int64_t count) {
  float lane[kLanes] = {};
  std::int64_t e = 0;
  for (; e + kLanes <= count; e += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += (a[e + l] - mean) * (a[e + l] - mean);
  float s = 0;
  for (; e < count; ++e) s += (a[e] - mean) * (a[e] - mean);
  for (float v : lane) s += v;
  return s;
}

inline float sum(const float* a, std::int64_t count) {
  float lane[kLanes] = {};
  std::int64_t e = 0;
  for (; e + kLanes <= count; e += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] += a[e + l];
  float s = 0;
  for (; e < count; ++e) s += a[e];
  for (float v : lane) s += v;
  return s;
}

}  // namespace ucplan::cpu
