// The point-wise activations, one definition of each value and derivative for the CPU kernels
// (layers.cpp) and the CUDA kernels (executor/cuda/modern_kernels.cu), so both backends compute
// the same function in the same float operations. The formulas are PyTorch's (torch.nn
// Sigmoid, Hardsigmoid, Hardswish, SiLU, Hardtanh/ReLU6, GELU), including its choices at the
// kinks; tests/test_kernels_cpu.cpp checks them against float64 code and finite differences.
//
// The backward of each reads what its derivative is a function of, and nothing else
// (planner/ir/tasks.cpp lists the same read sets): sigmoid's derivative is y (1 - y);
// hardsigmoid's and clip's are nonzero exactly where y lies strictly inside the clamp (there y
// equals the unclamped value, so y decides as x would); hardswish, SiLU and GELU need x.
//
// NaN passes on (check mode poisons freed buffers with it): a NaN x or y gives a NaN value and
// a NaN derivative, never a clean 0 or 1 from a comparison.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define UCPLAN_HD __host__ __device__
#else
#define UCPLAN_HD
#endif

namespace ucplan::cpu {

enum class Activation : int { Sigmoid, HardSigmoid, HardSwish, Silu, Clip, Gelu, GeluTanh };

// a, b: hardsigmoid's alpha and beta (y = clamp(a x + b, 0, 1)); clip's min and max.
struct ActivationDims {
  Activation f = Activation::Sigmoid;
  float a = 0;
  float b = 0;
};

// Whether the backward reads y (else x).
UCPLAN_HD inline bool activation_backward_reads_y(Activation f) {
  return f == Activation::Sigmoid || f == Activation::HardSigmoid || f == Activation::Clip;
}

UCPLAN_HD inline float activation_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// sqrt(2 / pi) and 1 / sqrt(2), as float.
constexpr float kGeluTanhScale = 0.7978845608028654f;
constexpr float kInvSqrt2 = 0.7071067811865476f;

UCPLAN_HD inline float activation_value(const ActivationDims& d, float x) {
  switch (d.f) {
    case Activation::Sigmoid:
      return activation_sigmoid(x);
    case Activation::HardSigmoid: {
      const float v = d.a * x + d.b;
      return v <= 0.0f ? 0.0f : v >= 1.0f ? 1.0f : v;  // a NaN falls through
    }
    case Activation::HardSwish: {  // x * relu6(x + 3) / 6
      if (x <= -3.0f) return 0.0f;
      if (x >= 3.0f) return x;
      return x * (x + 3.0f) / 6.0f;
    }
    case Activation::Silu:
      return x * activation_sigmoid(x);
    case Activation::Clip:
      return x <= d.a ? d.a : x >= d.b ? d.b : x;
    case Activation::Gelu:
      return 0.5f * x * (1.0f + erff(x * kInvSqrt2));
    case Activation::GeluTanh: {
      const float inner = kGeluTanhScale * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(inner));
    }
  }
  return x;
}

// dy/dx at v, where v is y for the activations that read y, else x.
UCPLAN_HD inline float activation_derivative(const ActivationDims& d, float v) {
  if (v != v) return v;  // NaN
  switch (d.f) {
    case Activation::Sigmoid:
      return v * (1.0f - v);
    case Activation::HardSigmoid:
      return v > 0.0f && v < 1.0f ? d.a : 0.0f;
    case Activation::HardSwish:  // PyTorch: 0 below -3, x / 3 + 1/2 up to 3 inclusive, 1 above
      return v < -3.0f ? 0.0f : v <= 3.0f ? v / 3.0f + 0.5f : 1.0f;
    case Activation::Silu: {
      const float s = activation_sigmoid(v);
      return s * (1.0f + v * (1.0f - s));
    }
    case Activation::Clip:
      return v > d.a && v < d.b ? 1.0f : 0.0f;
    case Activation::Gelu: {  // Phi(x) + x phi(x)
      const float cdf = 0.5f * (1.0f + erff(v * kInvSqrt2));
      const float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
      return cdf + v * pdf;
    }
    case Activation::GeluTanh: {
      const float x2 = v * v;
      const float t = tanhf(kGeluTanhScale * (v + 0.044715f * x2 * v));
      return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * kGeluTanhScale * (1.0f + 3.0f * 0.044715f * x2);
    }
  }
  return 1.0f;
}

}  // namespace ucplan::cpu
