// CUDA kernels of the layer types of today's CNNs (planner/model/layer_types.def: the point-wise
// activations sigmoid, hardsigmoid, hardswish, SiLU, clip, GELU; mul, scale, layer norm over
// channels, channel shuffle, slice), with the contracts of their CPU reference in
// executor/cpu/kernels.h, whose dims structs they take: `accumulate` false overwrites, true adds;
// dgamma/dbeta always accumulate; the pointers the CPU tolerates as null (mul's dx and ds,
// scale's and layer norm's dx) may be null here too, and then nothing reads what only they need
// (scale's gamma without dx, mul's s without dx or x without ds). NaN passes on as on the CPU.
//
// Storage: activations and gradients (x, s, y, v, dy, dx, ds) are elements of the Context's data
// type (kernels_cuda.h), FP32 or 16-bit; gamma, beta, layer norm's saved statistics and dgamma,
// dgamma_dbeta are FP32 at every precision. A 16-bit element is loaded exactly, the FP32 kernel's
// arithmetic runs on it, and what is stored is rounded to nearest even once (storage_type.h): the
// CPU emulation's bits wherever the FP32 kernel gives the CPU's.
//
// All are custom kernels (modern_kernels.cu; cuDNN has none of these as a training op). They
// enqueue on the Context's stream and never synchronize, except that scale_backward and
// ln_backward use the Context's scratch (scratch_bytes below), whose first growth synchronizes the
// stream once. No atomics: the same inputs give the same bits run to run.
//
// Numerics against the CPU: the activations evaluate executor/cpu/activation.h itself and the
// file is compiled without FMA contraction, so where the CPU multiplies then adds the GPU rounds
// the same way: the piecewise-linear activations (hardsigmoid, hardswish, clip), mul, scale,
// channel shuffle and slice give the CPU's bits; sigmoid, SiLU and GELU differ by the ulps of
// CUDA's expf/erff/tanhf. Layer norm's statistics are summed per pixel in double, channel after
// channel as the CPU sums them, so the saved mean and inverse std are the CPU's; its forward from
// saved statistics is the CPU's expression in the CPU's order, and the training forward is the
// statistics then that same kernel, so a recomputation is bit-identical to its forward. The
// reductions over planes (mul's per-channel ds, scale's dgamma, layer norm's dgamma/dbeta) sum in
// double in a fixed order (one warp per row, then rows in sample order), more exactly than the
// CPU's float lanes, so they agree with it to float rounding.
#pragma once

#include <cstddef>
#include <cstdint>

#include "executor/cpu/kernels.h"
#include "executor/cuda/kernels_cuda.h"

namespace ucplan::cuda {

using cpu::ActivationDims;
using cpu::LnDims;
using cpu::MulDims;

// y = f(x); dx (+)= dy * f'(v), v = y or x as cpu::activation_backward_reads_y() says.
void activation_forward(Context& ctx, const ActivationDims& d, std::int64_t count, const float* x, float* y);
void activation_backward(Context& ctx, const ActivationDims& d, std::int64_t count, const float* v, const float* dy,
                         float* dx, bool accumulate);

// y = x * s (s of x's shape, or n x c x 1 when d.per_channel); backward as cpu::mul_backward.
void mul_forward(Context& ctx, const MulDims& d, const float* x, const float* s, float* y);
void mul_backward(Context& ctx, const MulDims& d, const float* x, const float* s, const float* dy, float* dx,
                  bool accumulate_dx, float* ds, bool accumulate_ds);

// y = x * gamma[c]; dgamma += sum of dy * x (two passes: per sample and channel, then per
// channel over the samples, through scratch_bytes of the Context's scratch); dx (+)= dy * gamma
// where dx is given.
void scale_forward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, const float* x, const float* gamma,
                   float* y);
void scale_backward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, const float* x,
                    const float* gamma, const float* dy, float* dx, bool accumulate, float* dgamma);
std::size_t scale_backward_scratch_bytes(std::int64_t n, std::int64_t c);

// Layer norm over the channels of each pixel; saved = n*h*w means, then n*h*w inverse stds.
// dgamma_dbeta (gamma's c, then beta's c) accumulates; dx may be null.
void ln_forward_training(Context& ctx, const LnDims& d, const float* x, const float* gamma, const float* beta, float* y,
                         float* saved);
void ln_forward_saved(Context& ctx, const LnDims& d, const float* x, const float* gamma, const float* beta,
                      const float* saved, float* y);
void ln_backward(Context& ctx, const LnDims& d, const float* x, const float* gamma, const float* saved, const float* dy,
                 float* dx, float* dgamma_dbeta, bool accumulate);
std::size_t ln_backward_scratch_bytes(const LnDims& d);

// Output channel k * groups + j is input channel j * (c / groups) + k.
void channel_shuffle_forward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups,
                             const float* x, float* y);
void channel_shuffle_backward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups,
                              const float* dy, float* dx, bool accumulate);

// Channels [begin, end) of c; backward: outside the range an overwrite writes zeros and an
// accumulation adds nothing.
void slice_forward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin,
                   std::int64_t end, const float* x, float* y);
void slice_backward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin,
                    std::int64_t end, const float* dy, float* dx, bool accumulate);

// The same per-thread functions, run on the host one thread after another with the warp
// reductions emulated in the device's order: lets tests without a GPU compare the kernels'
// index arithmetic, null-pointer handling, reduction order and 16-bit loads and stores with the
// CPU reference and its emulation (tests/test_cuda_modern_host.cpp, test_cuda_storage_host.cpp).
// Host pointers; same contracts as above, with activations and gradients of type T (float,
// __nv_bfloat16 or __half, instantiated in modern_kernels.cu; the 16-bit conversions are
// executor/cpu/half.h's, storage_type.h) and gamma, beta, saved statistics and dgamma in FP32.
namespace host {
template <typename T>
void activation_forward(const ActivationDims& d, std::int64_t count, const T* x, T* y);
template <typename T>
void activation_backward(const ActivationDims& d, std::int64_t count, const T* v, const T* dy, T* dx, bool accumulate);
template <typename T>
void mul_forward(const MulDims& d, const T* x, const T* s, T* y);
template <typename T>
void mul_backward(const MulDims& d, const T* x, const T* s, const T* dy, T* dx, bool accumulate_dx, T* ds,
                  bool accumulate_ds);
template <typename T>
void scale_forward(std::int64_t n, std::int64_t c, std::int64_t plane, const T* x, const float* gamma, T* y);
template <typename T>
void scale_backward(std::int64_t n, std::int64_t c, std::int64_t plane, const T* x, const float* gamma, const T* dy,
                    T* dx, bool accumulate, float* dgamma);
template <typename T>
void ln_forward_training(const LnDims& d, const T* x, const float* gamma, const float* beta, T* y, float* saved);
template <typename T>
void ln_forward_saved(const LnDims& d, const T* x, const float* gamma, const float* beta, const float* saved, T* y);
template <typename T>
void ln_backward(const LnDims& d, const T* x, const float* gamma, const float* saved, const T* dy, T* dx,
                 float* dgamma_dbeta, bool accumulate);
template <typename T>
void channel_shuffle_forward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups, const T* x, T* y);
template <typename T>
void channel_shuffle_backward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups, const T* dy,
                              T* dx, bool accumulate);
template <typename T>
void slice_forward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin, std::int64_t end, const T* x,
                   T* y);
template <typename T>
void slice_backward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin, std::int64_t end,
                    const T* dy, T* dx, bool accumulate);
}  // namespace host

}  // namespace ucplan::cuda
