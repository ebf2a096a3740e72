// Internal to the CUDA backend: launchers for the small CUDA kernels (small_kernels.cu) that
// cuDNN and cuBLAS do not provide. Every launcher enqueues on `stream` and checks the launch;
// none synchronizes. Element counts are 64-bit (grid-stride loops), pointers are device pointers.
// Use kernels_cuda.h instead: it states the contracts and matches the CPU reference.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#if defined(__CUDACC__)
#define UCPLAN_HOST_DEVICE __host__ __device__
#else
#define UCPLAN_HOST_DEVICE
#endif

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
  const float* p[kMaxSumInputs];
  int count;
};

// y = (accumulate_into_y ? y : 0) + in.p[0] + ... + in.p[count-1], summed left to right.
void launch_sum(cudaStream_t s, std::int64_t n, SumInputs in, bool accumulate_into_y, float* y);
// dst[i] += src[i]
void launch_add_inplace(cudaStream_t s, std::int64_t n, const float* src, float* dst);
// dst[r * dst_stride + j] (+)= src[r * src_stride + j] for r < rows, j < width.
void launch_copy_rows(cudaStream_t s, std::int64_t rows, std::int64_t width, const float* src, std::int64_t src_stride,
                      float* dst, std::int64_t dst_stride, bool accumulate);

// Dropout: element e (0 <= e < n) has global index first_index + e; mask = dropout_keep(...);
// y = x * (mask ? scale : 0) (a multiplication, so a NaN in a dropped element stays NaN, as on
// the CPU).
void launch_dropout_forward(cudaStream_t s, std::int64_t n, std::uint64_t first_index, std::uint64_t seed, double ratio,
                            float scale, const float* x, float* y, std::uint8_t* mask);
// y (+)= x * (mask ? scale : 0)
void launch_dropout_apply(cudaStream_t s, std::int64_t n, float scale, const std::uint8_t* mask, const float* x,
                          float* y, bool accumulate);

// y = (x - mean[c]) * (gamma[c] * inv_std[c]) + beta[c], saved = [mean[c], inv_std[c]]; the CPU's
// operations in the CPU's order, without FMA contraction, so both give the same bits.
void launch_bn_forward_saved(cudaStream_t s, std::int64_t n, std::int64_t c, std::int64_t hw, const float* x,
                             const float* gamma, const float* beta, const float* saved, float* y);

// As the CPU: per sample, in double, log(sum_j exp(x_j - top)) - (x_label - top) (no rounding of
// prob first); per_sample[i] gets it, then *loss = their sum in a fixed order (deterministic). A
// label outside [0, k) makes that sample's loss NaN (the CPU aborts).
void launch_softmax_loss_sum(cudaStream_t s, std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels,
                             double* per_sample, double* loss);
// dx (+)= float(scale * (prob - onehot(label))) computed in double, as the CPU; a label outside
// [0, k) contributes no one-hot.
void launch_softmax_loss_backward(cudaStream_t s, std::int64_t n, std::int64_t k, const float* prob,
                                  const std::int32_t* labels, double scale, float* dx, bool accumulate);

// w -= lr * dw (no FMA contraction: the CPU's bits)
void launch_sgd(cudaStream_t s, std::int64_t n, float lr, const float* dw, float* w);

// 16-bit storage (planner/model/precision.h): kind 0 bfloat16, 1 half. widen: exact; narrow:
// round to nearest even (__float2bfloat16_rn, __float2half_rn), as the CPU's executor/cpu/half.h.
// The kernels are templates on the storage type (__nv_bfloat16, __half).
void launch_widen(cudaStream_t s, int kind, std::int64_t n, const void* src, float* dst);
void launch_narrow(cudaStream_t s, int kind, std::int64_t n, const float* src, void* dst);
// dst[i] += widen(src[i]): a 16-bit gradient added into an FP32 one.
void launch_accumulate_widened(cudaStream_t s, int kind, std::int64_t n, const void* src, float* dst);

// p[i] = lo + (hi - lo) * u(seed, i), u uniform in [0, 1); labels[i] = uniform in [0, k).
void launch_fill_uniform(cudaStream_t s, std::int64_t n, std::uint64_t seed, float lo, float hi, float* p);
void launch_fill_labels(cudaStream_t s, std::int64_t n, std::uint64_t seed, std::int32_t k, std::int32_t* labels);

// Pooling for output sizes cuDNN's floor formula does not produce (ceil mode), as the CPU
// reference computes it: windows start at o * stride - pad and are clipped to the input; average
// divisor as PyTorch (include_pad: the window clipped to the padded input; else: to the input),
// sums in double; max propagates NaN; an empty window gives 0. Max backward sends the gradient to
// the first position (row-major) in the window whose x equals y.
struct PoolShape {
  std::int64_t nc, h, w, ho, wo, kh, kw, sh, sw, ph, pw;
  bool max, include_pad;
};
void launch_pool_forward(cudaStream_t s, const PoolShape& p, const float* x, float* y);
void launch_pool_backward(cudaStream_t s, const PoolShape& p, const float* x, const float* y, const float* dy,
                          float* dx, bool accumulate);

// Cross-channel LRN as the CPU reference (PyTorch's window [c - size/2, c + (size-1)/2]), for
// what cuDNN cannot match: even sizes (cuDNN's window is [c - (size-1)/2, c + size/2]), sizes
// above 16, k < 1e-5 or beta < 0.01.
struct LrnShape {
  std::int64_t n, c, plane, size;
  float alpha_over_size, beta, k, coef;  // coef = 2 alpha beta / size
};
void launch_lrn_forward(cudaStream_t s, const LrnShape& l, const float* x, float* y);
void launch_lrn_backward(cudaStream_t s, const LrnShape& l, const float* x, const float* y, const float* dy, float* dx,
                         bool accumulate);

// The same element functions run on the host, one element after another: lets the index
// arithmetic of the pooling and LRN kernels be checked against the CPU reference without a GPU.
namespace host {
void pool_forward(const PoolShape& p, const float* x, float* y);
void pool_backward(const PoolShape& p, const float* x, const float* y, const float* dy, float* dx, bool accumulate);
void lrn_forward(const LrnShape& l, const float* x, float* y);
void lrn_backward(const LrnShape& l, const float* x, const float* y, const float* dy, float* dx, bool accumulate);
}  // namespace host

}  // namespace ucplan::cuda::detail
