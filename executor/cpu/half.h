// 16-bit floating-point storage for the CPU reference backend's emulation of bf16 and fp16
// (planner/model/precision.h): exact conversions, rounding to nearest even on every store as
// the GPU's conversion instructions do (__float2bfloat16_rn, __float2half_rn). bf16: 8 exponent
// bits, 7 stored mantissa bits; fp16 (IEEE binary16): 5 and 10, largest finite 65504,
// subnormals down to 2^-24; values at or above 65520 round to infinity. NaN stays NaN.
#pragma once

#include <cstdint>

namespace ucplan::cpu {

enum class Half { BF16, FP16 };

std::uint16_t float_to_bf16(float x);
float bf16_to_float(std::uint16_t h);
std::uint16_t float_to_fp16(float x);
float fp16_to_float(std::uint16_t h);
// x rounded to the nearest tf32 value (10 stored mantissa bits, FP32's exponent), as tensor
// cores read FP32 operands at tf32 math.
float round_to_tf32(float x);
// x rounded to the nearest value of the 16-bit type, as a float (exact).
float round_to(Half t, float x);

// n elements: FP32 -> 16-bit (rounded to nearest even) and back (exact).
void narrow(Half t, const float* src, std::uint16_t* dst, std::int64_t n);
void widen(Half t, const std::uint16_t* src, float* dst, std::int64_t n);

}  // namespace ucplan::cpu
