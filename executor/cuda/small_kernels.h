// Internal to the CUDA backend: launchers for the small CUDA kernels (small_kernels.cu) that
// cuDNN and cuBLAS do not provide. Every launcher enqueues on `stream` and checks the launch;
// none synchronizes. Element counts are 64-bit (grid-stride loops), pointers are device pointers.
// Use kernels_cuda.h instead: it states the contracts and matches the CPU reference.
// Storage: a launcher that takes a DataType reads and writes the activations and gradients it is
// given (void pointers) as elements of that type (storage_type.h: loaded exactly, computed as the
// FP32 kernel computes, rounded to nearest even on store); what is FP32 at every precision (batch
// norm's parameters and statistics, the loss's probabilities, weights) stays float.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "executor/cuda/storage_type.h"

namespace ucplan::cuda::detail {

// The dropout hash, identical to cpu::dropout_keep_hash (executor/cpu/layers.cpp): the
// index-th output of the SplitMix64 generator started at `seed` (Steele, Lea and Flood, OOPSLA
// 2014; constants from Vigna's splitmix64.c), a pure function of (seed, index), so any sub-range
// of the batch draws the same mask on either backend.
UCPLAN_HOST_DEVICE inline std::uint64_t dropout_hash(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The CPU's keep rule: hash / 2^64 >= ratio, on the top 53 bits so the comparison is exact in
// double (a NaN ratio keeps nothing, ratio >= 1 keeps nothing, ratio <= 0 keeps everything).
UCPLAN_HOST_DEVICE inline bool dropout_keep(std::uint64_t seed, std::uint64_t index, double ratio) {
  return static_cast<double>(dropout_hash(seed, index) >> 11) * 0x1.0p-53 >= ratio;
}

constexpr int kMaxSumInputs = 8;
struct SumInputs {
  const void* p[kMaxSumInputs];  // elements of the launch's `in` type
  int count;
};

// y = (accumulate_into_y ? y : 0) + in.p[0] + ... + in.p[count-1], summed left to right in float.
// The inputs are `in` elements, y is `out` elements: `in`, or Float to keep a partial sum exact
// across launches (kernels_cuda.cpp add_forward).
void launch_sum(cudaStream_t s, DataType in, DataType out, std::int64_t n, SumInputs inputs, bool accumulate_into_y,
                void* y);
// dst[i] += src[i]
void launch_add_inplace(cudaStream_t s, DataType t, std::int64_t n, const void* src, void* dst);
// dst[r * dst_stride + j] (+)= src[r * src_stride + j] for r < rows, j < width (strides in elements).
void launch_copy_rows(cudaStream_t s, DataType t, std::int64_t rows, std::int64_t width, const void* src,
                      std::int64_t src_stride, void* dst, std::int64_t dst_stride, bool accumulate);

// Dropout: element e (0 <= e < n) has global index first_index + e; mask = dropout_keep(...);
// y = x * (mask ? scale : 0) (a multiplication, so a NaN in a dropped element stays NaN, as on
// the CPU).
void launch_dropout_forward(cudaStream_t s, DataType t, std::int64_t n, std::uint64_t first_index, std::uint64_t seed,
                            double ratio, float scale, const void* x, void* y, std::uint8_t* mask);
// y (+)= x * (mask ? scale : 0)
void launch_dropout_apply(cudaStream_t s, DataType t, std::int64_t n, float scale, const std::uint8_t* mask,
                          const void* x, void* y, bool accumulate);

// y = (x - mean[c]) * (gamma[c] * inv_std[c]) + beta[c], saved = [mean[c], inv_std[c]]; the CPU's
// operations in the CPU's order, without FMA contraction, so both give the same bits. x and y are
// `t` elements; gamma, beta and saved are FP32.
void launch_bn_forward_saved(cudaStream_t s, DataType t, std::int64_t n, std::int64_t c, std::int64_t hw, const void* x,
                             const float* gamma, const float* beta, const float* saved, void* y);

// As the CPU: per sample, in double, log(sum_j exp(x_j - top)) - (x_label - top) (no rounding of
// prob first); per_sample[i] gets it, then *loss = their sum in a fixed order (deterministic). A
// label outside [0, k) makes that sample's loss NaN (the CPU aborts). x is `t` elements. prob, when
// not null, gets the CPU's float(exp(x_j - top) / sum) (FP32 at every precision; kernels_cuda.cpp
// leaves it to cuDNN at FP32).
void launch_softmax_loss_sum(cudaStream_t s, DataType t, std::int64_t n, std::int64_t k, const void* x,
                             const std::int32_t* labels, double* per_sample, double* loss, float* prob);
// dx (+)= float(scale * (prob - onehot(label))) computed in double, as the CPU; a label outside
// [0, k) contributes no one-hot. prob is FP32, dx `t` elements.
void launch_softmax_loss_backward(cudaStream_t s, DataType t, std::int64_t n, std::int64_t k, const float* prob,
                                  const std::int32_t* labels, double scale, void* dx, bool accumulate);

// w -= lr * dw (no FMA contraction: the CPU's bits)
void launch_sgd(cudaStream_t s, std::int64_t n, float lr, const float* dw, float* w);

// 16-bit storage (t is Half or BFloat16): dst = src rounded to nearest even (__float2bfloat16_rn,
// __float2half_rn), as the CPU's executor/cpu/half.h: the weights' 16-bit copy, fc's ones, the
// FP32 partial sums of a long add.
void launch_narrow(cudaStream_t s, DataType t, std::int64_t n, const float* src, void* dst);
// dst[i] += widen(src[i]): a 16-bit gradient added into an FP32 one.
void launch_accumulate_widened(cudaStream_t s, DataType t, std::int64_t n, const void* src, float* dst);
// db[ch] = (accumulate ? db[ch] : 0) + sum over samples and positions of dy[., ch, .] (NCHW, `t`
// elements), summed in float in a fixed order and rounded once: a conv's bias gradient at 16
// bits, which cuDNN 9's cudnnConvolutionBackwardBias refuses (NOT_SUPPORTED, seen on an H100).
void launch_bias_gradient(cudaStream_t s, DataType t, std::int64_t n, std::int64_t c, std::int64_t hw, const void* dy,
                          void* db, bool accumulate);

// p[i] = lo + (hi - lo) * u(seed, i), u uniform in [0, 1); labels[i] = uniform in [0, k).
void launch_fill_uniform(cudaStream_t s, std::int64_t n, std::uint64_t seed, float lo, float hi, float* p);
void launch_fill_labels(cudaStream_t s, std::int64_t n, std::uint64_t seed, std::int32_t k, std::int32_t* labels);

// Pooling for output sizes cuDNN's floor formula does not produce (ceil mode), as the CPU
// reference computes it: windows start at o * stride - pad and are clipped to the input; average
// divisor as PyTorch (include_pad: the window clipped to the padded input; else: to the input),
// sums in double; max propagates NaN; an empty window gives 0. Max backward sends the gradient to
// the first position (row-major) in the window whose x equals y. x, y, dy, dx are `t` elements.
struct PoolShape {
  std::int64_t nc, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
  bool max, include_pad;
};
void launch_pool_forward(cudaStream_t s, DataType t, const PoolShape& p, const void* x, void* y);
void launch_pool_backward(cudaStream_t s, DataType t, const PoolShape& p, const void* x, const void* y, const void* dy,
                          void* dx, bool accumulate);

// Cross-channel LRN as the CPU reference (PyTorch's window [c - size/2, c + (size-1)/2]), for
// what cuDNN cannot match: even sizes (cuDNN's window is [c - (size-1)/2, c + size/2]), sizes
// above 16, k < 1e-5 or beta < 0.01, and 16-bit data (kernels_cuda.cpp says why). x, y, dy, dx
// are `t` elements.
struct LrnShape {
  std::int64_t n, c, plane, size;
  float alpha_over_size, beta, k, coef;  // coef = 2 alpha beta / size
};
// The shape of an LRN over n x c planes of `plane` elements, its constants rounded to float as
// the CPU reference rounds them (executor/cpu/layers.cpp).
inline LrnShape lrn_shape(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t size, double alpha,
                          double beta, double k) {
  return {n,
          c,
          plane,
          size,
          static_cast<float>(alpha / static_cast<double>(size)),
          static_cast<float>(beta),
          static_cast<float>(k),
          static_cast<float>(2.0 * alpha * beta / static_cast<double>(size))};
}
void launch_lrn_forward(cudaStream_t s, DataType t, const LrnShape& l, const void* x, void* y);
void launch_lrn_backward(cudaStream_t s, DataType t, const LrnShape& l, const void* x, const void* y, const void* dy,
                         void* dx, bool accumulate);

// The same element functions run on the host, one element after another: lets the index
// arithmetic of the pooling and LRN kernels, and their 16-bit loads and stores, be checked against
// the CPU reference and its emulation without a GPU (tests/test_cuda_storage_host.cpp). T is float,
// __nv_bfloat16 or __half (instantiated in small_kernels.cu).
namespace host {
template <typename T>
void pool_forward(const PoolShape& p, const T* x, T* y);
template <typename T>
void pool_backward(const PoolShape& p, const T* x, const T* y, const T* dy, T* dx, bool accumulate);
template <typename T>
void lrn_forward(const LrnShape& l, const T* x, T* y);
template <typename T>
void lrn_backward(const LrnShape& l, const T* x, const T* y, const T* dy, T* dx, bool accumulate);
}  // namespace host

}  // namespace ucplan::cuda::detail
