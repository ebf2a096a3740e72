#include "half.h"

#include <bit>

namespace ucplan::cpu {

std::uint16_t float_to_bf16(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  // Round to nearest even on the 16 bits dropped; a carry into the exponent is the right result
  // (up to infinity).
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

std::uint16_t float_to_fp16(float x) {
  std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (f >> 16) & 0x8000u;
  f &= 0x7fffffffu;
  if (f >= 0x7f800000u) return static_cast<std::uint16_t>(sign | (f > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (f >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: infinity
  if (f < 0x38800000u) {
    // Below 2^-14: a subnormal (or zero). Adding 0.5 aligns the value so that the FPU's own round
    // to nearest even drops exactly the bits fp16 cannot hold (2^-24 is then the last place).
    const float shifted = std::bit_cast<float>(f) + 0.5f;
    return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(shifted) - 0x3f000000u));
  }
  const std::uint32_t odd = (f >> 13) & 1u;
  f += ((15u - 127u) << 23) + 0xfffu + odd;  // rebias the exponent, round to nearest even
  return static_cast<std::uint16_t>(sign | (f >> 13));
}

float fp16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in FP32
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

float round_to_tf32(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
  return std::bit_cast<float>((u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u);
}

float round_to(Half t, float x) {
  return t == Half::BF16 ? bf16_to_float(float_to_bf16(x)) : fp16_to_float(float_to_fp16(x));
}

void narrow(Half t, const float* src, std::uint16_t* dst, std::int64_t n) {
  if (t == Half::BF16)
    for (std::int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
  else
    for (std::int64_t i = 0; i < n; ++i) dst[i] = float_to_fp16(src[i]);
}

void widen(Half t, const std::uint16_t* src, float* dst, std::int64_t n) {
  if (t == Half::BF16)
    for (std::int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
  else
    for (std::int64_t i = 0; i < n; ++i) dst[i] = fp16_to_float(src[i]);
}

}  // namespace ucplan::cpu
