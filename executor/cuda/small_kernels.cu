// The small kernels cuDNN and cuBLAS lack (small_kernels.h). Grid-stride loops over 64-bit
// indices; no atomics anywhere, so every result is deterministic run to run. Where the CPU
// reference does a multiply then an add, __fmul_rn/__fadd_rn keep nvcc from fusing them into an
// FMA, so element-wise results match the CPU's bit for bit (powf and exp/log may differ by ulps).
#include "executor/cuda/small_kernels.h"

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "executor/cuda/cuda_check.h"

namespace ucplan::cuda::detail {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(std::int64_t n) {
  std::int64_t b = (n + kThreads - 1) / kThreads;
  const std::int64_t cap = std::int64_t{1} << 20;  // grid-stride loops cover the rest
  return static_cast<unsigned>(b < cap ? b : cap);
}

#define UCPLAN_GRID_LOOP(i, n)                                                                     \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)

__global__ void sum_kernel(std::int64_t n, SumInputs in, bool accumulate_into_y, float* y) {
  UCPLAN_GRID_LOOP(i, n) {
    float v = accumulate_into_y ? y[i] + in.p[0][i] : in.p[0][i];
    for (int j = 1; j < in.count; ++j) v += in.p[j][i];
    y[i] = v;
  }
}

__global__ void add_inplace_kernel(std::int64_t n, const float* src, float* dst) {
  UCPLAN_GRID_LOOP(i, n) dst[i] += src[i];
}

__global__ void copy_rows_kernel(std::int64_t rows, std::int64_t width, const float* src, std::int64_t src_stride,
                                 float* dst, std::int64_t dst_stride, bool accumulate) {
  UCPLAN_GRID_LOOP(i, rows * width) {
    std::int64_t r = i / width, j = i % width;
    float v = src[r * src_stride + j];
    float* d = dst + r * dst_stride + j;
    *d = accumulate ? *d + v : v;
  }
}

__global__ void dropout_forward_kernel(std::int64_t n, std::uint64_t first_index, std::uint64_t seed, double ratio,
                                       float scale, const float* x, float* y, std::uint8_t* mask) {
  UCPLAN_GRID_LOOP(i, n) {
    bool keep = dropout_keep(seed, first_index + static_cast<std::uint64_t>(i), ratio);
    mask[i] = keep ? 1 : 0;
    y[i] = x[i] * (keep ? scale : 0.0f);
  }
}

__global__ void dropout_apply_kernel(std::int64_t n, float scale, const std::uint8_t* mask, const float* x, float* y,
                                     bool accumulate) {
  UCPLAN_GRID_LOOP(i, n) {
    float v = __fmul_rn(x[i], mask[i] ? scale : 0.0f);  // no FMA with the add: the CPU's bits
    y[i] = accumulate ? y[i] + v : v;
  }
}

__global__ void bn_forward_saved_kernel(std::int64_t n, std::int64_t c, std::int64_t hw, const float* x,
                                        const float* gamma, const float* beta, const float* saved, float* y) {
  UCPLAN_GRID_LOOP(i, n * c * hw) {
    std::int64_t ch = (i / hw) % c;
    float scale = __fmul_rn(gamma[ch], saved[c + ch]);
    y[i] = __fadd_rn(__fmul_rn(x[i] - saved[ch], scale), beta[ch]);
  }
}

// One block per sample: max, then the sum of exponentials in double, reduced in a fixed order.
__global__ void softmax_loss_sample_kernel(std::int64_t k, const float* x, const std::int32_t* labels,
                                           double* per_sample) {
  __shared__ double part[kThreads];
  const std::int64_t s = blockIdx.x;
  const float* xs = x + s * k;
  float top = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) top = fmaxf(top, xs[j]);
  part[threadIdx.x] = top;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] = fmax(part[threadIdx.x], part[threadIdx.x + half]);
    __syncthreads();
  }
  const double t = part[0];
  __syncthreads();
  double acc = 0;
  for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) acc += exp(static_cast<double>(xs[j]) - t);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const std::int32_t l = labels[s];
    per_sample[s] = (l < 0 || l >= k) ? nan("") : log(part[0]) - (static_cast<double>(xs[l]) - t);
  }
}

__global__ void sum_doubles_kernel(std::int64_t n, const double* v, double* out) {
  __shared__ double part[kThreads];
  double acc = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += v[i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}

__global__ void softmax_loss_backward_kernel(std::int64_t n, std::int64_t k, const float* prob,
                                             const std::int32_t* labels, double scale, float* dx, bool accumulate) {
  UCPLAN_GRID_LOOP(i, n * k) {
    std::int64_t s = i / k, j = i % k;
    double onehot = labels[s] == j ? 1.0 : 0.0;
    float v = static_cast<float>(__dmul_rn(scale, static_cast<double>(prob[i]) - onehot));
    dx[i] = accumulate ? dx[i] + v : v;
  }
}

__global__ void sgd_kernel(std::int64_t n, float lr, const float* dw, float* w) {
  UCPLAN_GRID_LOOP(i, n) w[i] = w[i] - __fmul_rn(lr, dw[i]);
}

__device__ float to_float(__half h) { return __half2float(h); }
__device__ float to_float(__nv_bfloat16 h) { return __bfloat162float(h); }
template <typename T>
__device__ T from_float(float x);
template <>
__device__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename T>
__global__ void widen_kernel(std::int64_t n, const T* src, float* dst) {
  UCPLAN_GRID_LOOP(i, n) dst[i] = to_float(src[i]);
}

template <typename T>
__global__ void narrow_kernel(std::int64_t n, const float* src, T* dst) {
  UCPLAN_GRID_LOOP(i, n) dst[i] = from_float<T>(src[i]);
}

template <typename T>
__global__ void accumulate_widened_kernel(std::int64_t n, const T* src, float* dst) {
  UCPLAN_GRID_LOOP(i, n) dst[i] += to_float(src[i]);
}

__device__ std::uint64_t fill_hash(std::uint64_t seed, std::int64_t i) {
  return dropout_hash(seed ^ 0x5DEECE66DULL, static_cast<std::uint64_t>(i));
}

__global__ void fill_uniform_kernel(std::int64_t n, std::uint64_t seed, float lo, float hi, float* p) {
  UCPLAN_GRID_LOOP(i, n) {
    float u = static_cast<float>(fill_hash(seed, i) >> 40) * (1.0f / 16777216.0f);  // 24 bits: exact in float
    p[i] = lo + (hi - lo) * u;
  }
}

__global__ void fill_labels_kernel(std::int64_t n, std::uint64_t seed, std::int32_t k, std::int32_t* labels) {
  UCPLAN_GRID_LOOP(i, n) labels[i] = static_cast<std::int32_t>(fill_hash(seed, i) % static_cast<std::uint64_t>(k));
}

// Element functions shared by the kernels below and by the host loops in detail::host (so the
// index arithmetic can be checked against the CPU reference on a machine without a GPU). On the
// device, mul/add round each operation (no FMA contraction), as the CPU computes.
__host__ __device__ inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
__host__ __device__ inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
__host__ __device__ inline std::int64_t min64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }
__host__ __device__ inline std::int64_t max64(std::int64_t a, std::int64_t b) { return a > b ? a : b; }

// The CPU's pool_window (executor/cpu/layers.cpp): the window of output (oh, ow) clipped first
// to the padded input (that size is include-pad's divisor), then to the input.
struct Window {
  std::int64_t h0, h1, w0, w1;
  double divisor;
  __host__ __device__ bool empty() const { return h0 >= h1 || w0 >= w1; }
};
__host__ __device__ inline Window pool_window(const PoolShape& p, std::int64_t oh, std::int64_t ow) {
  Window w;
  w.h0 = oh * p.sh - p.ph;
  w.w0 = ow * p.sw - p.pw;
  w.h1 = min64(w.h0 + p.kh, p.h + p.ph);
  w.w1 = min64(w.w0 + p.kw, p.w + p.pw);
  const std::int64_t padded = (w.h1 - w.h0) * (w.w1 - w.w0);
  w.h0 = max64(w.h0, 0);
  w.w0 = max64(w.w0, 0);
  w.h1 = min64(w.h1, p.h);
  w.w1 = min64(w.w1, p.w);
  w.divisor = static_cast<double>(p.include_pad ? padded : (w.h1 - w.h0) * (w.w1 - w.w0));
  return w;
}

// Output element i (over nc * ho * wo).
__host__ __device__ inline float pool_forward_at(const PoolShape& p, const float* x, std::int64_t i) {
  const std::int64_t ow = i % p.wo, oh = (i / p.wo) % p.ho, plane = i / (p.wo * p.ho);
  const Window w = pool_window(p, oh, ow);
  const float* xp = x + plane * p.h * p.w;
  if (w.empty()) return 0.0f;  // as the CPU: only possible with inconsistent ceil-mode sizes
  if (p.max) {
    float out = -INFINITY;
    for (std::int64_t ih = w.h0; ih < w.h1; ++ih)
      for (std::int64_t iw = w.w0; iw < w.w1; ++iw) {
        const float v = xp[ih * p.w + iw];
        if (v > out || isnan(v)) out = v;
      }
    return out;
  }
  double s = 0;
  for (std::int64_t ih = w.h0; ih < w.h1; ++ih)
    for (std::int64_t iw = w.w0; iw < w.w1; ++iw) s += xp[ih * p.w + iw];
  return static_cast<float>(s / w.divisor);
}

// Input element i (over nc * h * w), gather form (no atomics): dx_in plus the gradients of the
// windows that contain this element, in output order.
__host__ __device__ inline float pool_backward_at(const PoolShape& p, const float* x, const float* y, const float* dy,
                                                  float dx_in, std::int64_t i) {
  const std::int64_t iw = i % p.w, ih = (i / p.w) % p.h, plane = i / (p.w * p.h);
  // Output rows whose window [oh*sh - ph, oh*sh - ph + kh) contains ih, likewise columns.
  const std::int64_t oh0 = ih + p.ph - p.kh < 0 ? 0 : (ih + p.ph - p.kh) / p.sh + 1;
  const std::int64_t oh1 = min64((ih + p.ph) / p.sh, p.ho - 1);
  const std::int64_t ow0 = iw + p.pw - p.kw < 0 ? 0 : (iw + p.pw - p.kw) / p.sw + 1;
  const std::int64_t ow1 = min64((iw + p.pw) / p.sw, p.wo - 1);
  const float* xp = p.max ? x + plane * p.h * p.w : nullptr;
  float g = dx_in;
  for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
    for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
      const std::int64_t o = (plane * p.ho + oh) * p.wo + ow;
      const Window w = pool_window(p, oh, ow);
      if (w.empty()) continue;
      if (p.max) {
        // The first position of the window (row-major) whose x equals y gets the gradient.
        const float m = y[o];
        std::int64_t first = -1;
        for (std::int64_t r = w.h0; r < w.h1 && first < 0; ++r)
          for (std::int64_t c = w.w0; c < w.w1; ++c)
            if (xp[r * p.w + c] == m) {
              first = r * p.w + c;
              break;
            }
        if (first == ih * p.w + iw) g += dy[o];
      } else {
        g += static_cast<float>(static_cast<double>(dy[o]) / w.divisor);
      }
    }
  }
  return g;
}

// LRN as the CPU computes it: scale = k + alpha/size * (sum of x^2 over [c - size/2, c + (size-1)/2]).
__host__ __device__ inline float lrn_scale(const LrnShape& l, const float* xs, std::int64_t c, std::int64_t p) {
  const std::int64_t c0 = max64(0, c - l.size / 2), c1 = min64(l.c - 1, c + (l.size - 1) / 2);
  float s = 0;
  for (std::int64_t cc = c0; cc <= c1; ++cc) {
    const float v = xs[cc * l.plane + p];
    s = add_rn(s, mul_rn(v, v));
  }
  return add_rn(l.k, mul_rn(l.alpha_over_size, s));
}

__host__ __device__ inline float lrn_forward_at(const LrnShape& l, const float* x, std::int64_t i) {
  const std::int64_t p = i % l.plane, c = (i / l.plane) % l.c, s = i / (l.plane * l.c);
  return x[i] * powf(lrn_scale(l, x + s * l.c * l.plane, c, p), -l.beta);
}

// dx[c] = dy[c] scale[c]^-beta - coef x[c] sum over c' in [c - (size-1)/2, c + size/2] of
// dy[c'] y[c'] / scale[c'] (the channels whose window holds c); returns the gradient alone.
__host__ __device__ inline float lrn_backward_at(const LrnShape& l, const float* x, const float* y, const float* dy,
                                                 std::int64_t i) {
  const std::int64_t p = i % l.plane, c = (i / l.plane) % l.c, s = i / (l.plane * l.c);
  const std::int64_t base = s * l.c * l.plane;
  const float* xs = x + base;
  float window = 0;
  const std::int64_t c0 = max64(0, c - (l.size - 1) / 2), c1 = min64(l.c - 1, c + l.size / 2);
  for (std::int64_t cc = c0; cc <= c1; ++cc) {
    const std::int64_t e = base + cc * l.plane + p;
    window = add_rn(window, mul_rn(dy[e], y[e]) / lrn_scale(l, xs, cc, p));
  }
  return mul_rn(dy[i], powf(lrn_scale(l, xs, c, p), -l.beta)) - mul_rn(mul_rn(l.coef, x[i]), window);
}

__global__ void pool_forward_kernel(PoolShape p, const float* x, float* y) {
  UCPLAN_GRID_LOOP(i, p.nc * p.ho * p.wo) y[i] = pool_forward_at(p, x, i);
}

__global__ void pool_backward_kernel(PoolShape p, const float* x, const float* y, const float* dy, float* dx,
                                     bool accumulate) {
  UCPLAN_GRID_LOOP(i, p.nc * p.h * p.w) dx[i] = pool_backward_at(p, x, y, dy, accumulate ? dx[i] : 0.0f, i);
}

__global__ void lrn_forward_kernel(LrnShape l, const float* x, float* y) {
  UCPLAN_GRID_LOOP(i, l.n * l.c * l.plane) y[i] = lrn_forward_at(l, x, i);
}

__global__ void lrn_backward_kernel(LrnShape l, const float* x, const float* y, const float* dy, float* dx,
                                    bool accumulate) {
  UCPLAN_GRID_LOOP(i, l.n * l.c * l.plane) {
    const float g = lrn_backward_at(l, x, y, dy, i);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}

}  // namespace

void launch_sum(cudaStream_t s, std::int64_t n, SumInputs in, bool accumulate_into_y, float* y) {
  if (n <= 0 || in.count <= 0) return;
  sum_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, in, accumulate_into_y, y);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_add_inplace(cudaStream_t s, std::int64_t n, const float* src, float* dst) {
  if (n <= 0) return;
  add_inplace_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, src, dst);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_copy_rows(cudaStream_t s, std::int64_t rows, std::int64_t width, const float* src, std::int64_t src_stride,
                      float* dst, std::int64_t dst_stride, bool accumulate) {
  if (rows <= 0 || width <= 0) return;
  copy_rows_kernel<<<blocks_for(rows * width), kThreads, 0, s>>>(rows, width, src, src_stride, dst, dst_stride,
                                                                 accumulate);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_dropout_forward(cudaStream_t s, std::int64_t n, std::uint64_t first_index, std::uint64_t seed, double ratio,
                            float scale, const float* x, float* y, std::uint8_t* mask) {
  if (n <= 0) return;
  dropout_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, first_index, seed, ratio, scale, x, y, mask);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_dropout_apply(cudaStream_t s, std::int64_t n, float scale, const std::uint8_t* mask, const float* x,
                          float* y, bool accumulate) {
  if (n <= 0) return;
  dropout_apply_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, scale, mask, x, y, accumulate);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_bn_forward_saved(cudaStream_t s, std::int64_t n, std::int64_t c, std::int64_t hw, const float* x,
                             const float* gamma, const float* beta, const float* saved, float* y) {
  if (n * c * hw <= 0) return;
  bn_forward_saved_kernel<<<blocks_for(n * c * hw), kThreads, 0, s>>>(n, c, hw, x, gamma, beta, saved, y);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_softmax_loss_sum(cudaStream_t s, std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels,
                             double* per_sample, double* loss) {
  if (n > 0) {
    if (n > INT_MAX) throw_error("softmax_loss: more than 2^31 samples");
    softmax_loss_sample_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(k, x, labels, per_sample);
    UCPLAN_CUDA(cudaGetLastError());
  }
  sum_doubles_kernel<<<1, kThreads, 0, s>>>(n, per_sample, loss);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_softmax_loss_backward(cudaStream_t s, std::int64_t n, std::int64_t k, const float* prob,
                                  const std::int32_t* labels, double scale, float* dx, bool accumulate) {
  if (n * k <= 0) return;
  softmax_loss_backward_kernel<<<blocks_for(n * k), kThreads, 0, s>>>(n, k, prob, labels, scale, dx, accumulate);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_sgd(cudaStream_t s, std::int64_t n, float lr, const float* dw, float* w) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, lr, dw, w);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_widen(cudaStream_t s, int kind, std::int64_t n, const void* src, float* dst) {
  if (n <= 0) return;
  if (kind == 0)
    widen_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, static_cast<const __nv_bfloat16*>(src), dst);
  else
    widen_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, static_cast<const __half*>(src), dst);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_narrow(cudaStream_t s, int kind, std::int64_t n, const float* src, void* dst) {
  if (n <= 0) return;
  if (kind == 0)
    narrow_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, src, static_cast<__nv_bfloat16*>(dst));
  else
    narrow_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, src, static_cast<__half*>(dst));
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_accumulate_widened(cudaStream_t s, int kind, std::int64_t n, const void* src, float* dst) {
  if (n <= 0) return;
  if (kind == 0)
    accumulate_widened_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, static_cast<const __nv_bfloat16*>(src), dst);
  else
    accumulate_widened_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, static_cast<const __half*>(src), dst);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_fill_uniform(cudaStream_t s, std::int64_t n, std::uint64_t seed, float lo, float hi, float* p) {
  if (n <= 0) return;
  fill_uniform_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, seed, lo, hi, p);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_fill_labels(cudaStream_t s, std::int64_t n, std::uint64_t seed, std::int32_t k, std::int32_t* labels) {
  if (n <= 0 || k <= 0) return;
  fill_labels_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, seed, k, labels);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_pool_forward(cudaStream_t s, const PoolShape& p, const float* x, float* y) {
  std::int64_t n = p.nc * p.ho * p.wo;
  if (n <= 0) return;
  pool_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, x, y);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_pool_backward(cudaStream_t s, const PoolShape& p, const float* x, const float* y, const float* dy,
                          float* dx, bool accumulate) {
  std::int64_t n = p.nc * p.h * p.w;
  if (n <= 0) return;
  pool_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, x, y, dy, dx, accumulate);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_lrn_forward(cudaStream_t s, const LrnShape& l, const float* x, float* y) {
  std::int64_t n = l.n * l.c * l.plane;
  if (n <= 0) return;
  lrn_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(l, x, y);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_lrn_backward(cudaStream_t s, const LrnShape& l, const float* x, const float* y, const float* dy, float* dx,
                         bool accumulate) {
  std::int64_t n = l.n * l.c * l.plane;
  if (n <= 0) return;
  lrn_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(l, x, y, dy, dx, accumulate);
  UCPLAN_CUDA(cudaGetLastError());
}

namespace host {
void pool_forward(const PoolShape& p, const float* x, float* y) {
  for (std::int64_t i = 0; i < p.nc * p.ho * p.wo; ++i) y[i] = pool_forward_at(p, x, i);
}
void pool_backward(const PoolShape& p, const float* x, const float* y, const float* dy, float* dx, bool accumulate) {
  for (std::int64_t i = 0; i < p.nc * p.h * p.w; ++i)
    dx[i] = pool_backward_at(p, x, y, dy, accumulate ? dx[i] : 0.0f, i);
}
void lrn_forward(const LrnShape& l, const float* x, float* y) {
  for (std::int64_t i = 0; i < l.n * l.c * l.plane; ++i) y[i] = lrn_forward_at(l, x, i);
}
void lrn_backward(const LrnShape& l, const float* x, const float* y, const float* dy, float* dx, bool accumulate) {
  for (std::int64_t i = 0; i < l.n * l.c * l.plane; ++i) {
    const float g = lrn_backward_at(l, x, y, dy, i);
    dx[i] = accumulate ? dx[i] + g : g;
  }
}
}  // namespace host

}  // namespace ucplan::cuda::detail
