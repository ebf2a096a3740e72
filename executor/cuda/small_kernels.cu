// The small kernels cuDNN and cuBLAS lack (small_kernels.h). Grid-stride loops over 64-bit
// indices; no atomics anywhere, so every result is deterministic run to run. Where the CPU
// reference does a multiply then an add, __fmul_rn/__fadd_rn keep nvcc from fusing them into an
// FMA, so element-wise results match the CPU's bit for bit (powf and exp/log may differ by ulps).
// Kernels on activations and gradients are templates on their element type T (storage_type.h):
// every load goes through to_float and every store through from_float<T>, around the float
// arithmetic of the FP32 kernel; none reads back an element it stored (accumulation reads the
// caller's earlier value, as the CPU's emulation widens it), so the 16-bit instantiations give
// the emulation's bits wherever the FP32 one gives the CPU's.
#include "executor/cuda/small_kernels.h"

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>

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

// y's type Out is T, or float for a partial sum kept exact across launches (launch_sum).
template <typename T, typename Out>
__global__ void sum_kernel(std::int64_t n, SumInputs in, bool accumulate_into_y, Out* y) {
  auto x = [&](int j, std::int64_t i) { return to_float(static_cast<const T*>(in.p[j])[i]); };
  UCPLAN_GRID_LOOP(i, n) {
    float v = accumulate_into_y ? to_float(y[i]) + x(0, i) : x(0, i);
    for (int j = 1; j < in.count; ++j) v += x(j, i);
    y[i] = from_float<Out>(v);
  }
}

template <typename T>
__global__ void add_inplace_kernel(std::int64_t n, const T* src, T* dst) {
  UCPLAN_GRID_LOOP(i, n) dst[i] = from_float<T>(to_float(dst[i]) + to_float(src[i]));
}

template <typename T>
__global__ void copy_rows_kernel(std::int64_t rows, std::int64_t width, const T* src, std::int64_t src_stride, T* dst,
                                 std::int64_t dst_stride, bool accumulate) {
  UCPLAN_GRID_LOOP(i, rows * width) {
    std::int64_t r = i / width, j = i % width;
    const T v = src[r * src_stride + j];
    T* d = dst + r * dst_stride + j;
    *d = accumulate ? from_float<T>(to_float(*d) + to_float(v)) : v;
  }
}

template <typename T>
__global__ void dropout_forward_kernel(std::int64_t n, std::uint64_t first_index, std::uint64_t seed, double ratio,
                                       float scale, const T* x, T* y, std::uint8_t* mask) {
  UCPLAN_GRID_LOOP(i, n) {
    bool keep = dropout_keep(seed, first_index + static_cast<std::uint64_t>(i), ratio);
    mask[i] = keep ? 1 : 0;
    y[i] = from_float<T>(to_float(x[i]) * (keep ? scale : 0.0f));
  }
}

template <typename T>
__global__ void dropout_apply_kernel(std::int64_t n, float scale, const std::uint8_t* mask, const T* x, T* y,
                                     bool accumulate) {
  UCPLAN_GRID_LOOP(i, n) {
    float v = __fmul_rn(to_float(x[i]), mask[i] ? scale : 0.0f);  // no FMA with the add: the CPU's bits
    y[i] = from_float<T>(accumulate ? to_float(y[i]) + v : v);
  }
}

template <typename T>
__global__ void bn_forward_saved_kernel(std::int64_t n, std::int64_t c, std::int64_t hw, const T* x, const float* gamma,
                                        const float* beta, const float* saved, T* y) {
  UCPLAN_GRID_LOOP(i, n * c * hw) {
    std::int64_t ch = (i / hw) % c;
    float scale = __fmul_rn(gamma[ch], saved[c + ch]);
    y[i] = from_float<T>(__fadd_rn(__fmul_rn(to_float(x[i]) - saved[ch], scale), beta[ch]));
  }
}

// One block per sample: max, then the sum of exponentials in double, reduced in a fixed order;
// then, where prob is given, the CPU's probabilities from that sum.
template <typename T>
__global__ void softmax_loss_sample_kernel(std::int64_t k, const T* x, const std::int32_t* labels, double* per_sample,
                                           float* prob) {
  __shared__ double part[kThreads];
  const std::int64_t s = blockIdx.x;
  const T* xs = x + s * k;
  float top = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) top = fmaxf(top, to_float(xs[j]));
  part[threadIdx.x] = top;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] = fmax(part[threadIdx.x], part[threadIdx.x + half]);
    __syncthreads();
  }
  const double t = part[0];
  __syncthreads();
  double acc = 0;
  for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x) acc += exp(static_cast<double>(to_float(xs[j])) - t);
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const std::int32_t l = labels[s];
    per_sample[s] = (l < 0 || l >= k) ? nan("") : log(part[0]) - (static_cast<double>(to_float(xs[l])) - t);
  }
  if (prob)
    for (std::int64_t j = threadIdx.x; j < k; j += blockDim.x)
      prob[s * k + j] = static_cast<float>(exp(static_cast<double>(to_float(xs[j])) - t) / part[0]);
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

template <typename T>
__global__ void softmax_loss_backward_kernel(std::int64_t n, std::int64_t k, const float* prob,
                                             const std::int32_t* labels, double scale, T* dx, bool accumulate) {
  UCPLAN_GRID_LOOP(i, n * k) {
    std::int64_t s = i / k, j = i % k;
    double onehot = labels[s] == j ? 1.0 : 0.0;
    float v = static_cast<float>(__dmul_rn(scale, static_cast<double>(prob[i]) - onehot));
    dx[i] = from_float<T>(accumulate ? to_float(dx[i]) + v : v);
  }
}

__global__ void sgd_kernel(std::int64_t n, float lr, const float* dw, float* w) {
  UCPLAN_GRID_LOOP(i, n) w[i] = w[i] - __fmul_rn(lr, dw[i]);
}

template <typename T>
__global__ void narrow_kernel(std::int64_t n, const float* src, T* dst) {
  UCPLAN_GRID_LOOP(i, n) dst[i] = from_float<T>(src[i]);
}

template <typename T>
__global__ void accumulate_widened_kernel(std::int64_t n, const T* src, float* dst) {
  UCPLAN_GRID_LOOP(i, n) dst[i] += to_float(src[i]);
}

// One block per channel: the channel's n * hw elements summed in float, each thread a strided
// share, then a fixed-order tree in shared memory (deterministic), rounded once on store.
template <typename T>
__global__ void bias_gradient_kernel(std::int64_t n, std::int64_t c, std::int64_t hw, const T* dy, T* db,
                                     bool accumulate) {
  __shared__ float part[kThreads];
  const std::int64_t ch = blockIdx.x;
  float s = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n * hw; i += blockDim.x)
    s += to_float(dy[(i / hw) * c * hw + ch * hw + i % hw]);
  part[threadIdx.x] = s;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[ch] = from_float<T>(accumulate ? to_float(db[ch]) + part[0] : part[0]);
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
template <typename T>
__host__ __device__ inline float pool_forward_at(const PoolShape& p, const T* x, std::int64_t i) {
  const std::int64_t ow = i % p.wo, oh = (i / p.wo) % p.ho, plane = i / (p.wo * p.ho);
  const Window w = pool_window(p, oh, ow);
  const T* xp = x + plane * p.h * p.w;
  if (w.empty()) return 0.0f;  // as the CPU: only possible with inconsistent ceil-mode sizes
  if (p.max) {
    float out = -INFINITY;
    for (std::int64_t ih = w.h0; ih < w.h1; ++ih)
      for (std::int64_t iw = w.w0; iw < w.w1; ++iw) {
        const float v = to_float(xp[ih * p.w + iw]);
        if (v > out || isnan(v)) out = v;
      }
    return out;
  }
  double s = 0;
  for (std::int64_t ih = w.h0; ih < w.h1; ++ih)
    for (std::int64_t iw = w.w0; iw < w.w1; ++iw) s += to_float(xp[ih * p.w + iw]);
  return static_cast<float>(s / w.divisor);
}

// Input element i (over nc * h * w), gather form (no atomics): dx_in plus the gradients of the
// windows that contain this element, in output order.
template <typename T>
__host__ __device__ inline float pool_backward_at(const PoolShape& p, const T* x, const T* y, const T* dy, float dx_in,
                                                  std::int64_t i) {
  const std::int64_t iw = i % p.w, ih = (i / p.w) % p.h, plane = i / (p.w * p.h);
  // Output rows whose window [oh*sh - ph, oh*sh - ph + kh) contains ih, likewise columns.
  const std::int64_t oh0 = ih + p.ph - p.kh < 0 ? 0 : (ih + p.ph - p.kh) / p.sh + 1;
  const std::int64_t oh1 = min64((ih + p.ph) / p.sh, p.ho - 1);
  const std::int64_t ow0 = iw + p.pw - p.kw < 0 ? 0 : (iw + p.pw - p.kw) / p.sw + 1;
  const std::int64_t ow1 = min64((iw + p.pw) / p.sw, p.wo - 1);
  const T* xp = p.max ? x + plane * p.h * p.w : nullptr;
  float g = dx_in;
  for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
    for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
      const std::int64_t o = (plane * p.ho + oh) * p.wo + ow;
      const Window w = pool_window(p, oh, ow);
      if (w.empty()) continue;
      if (p.max) {
        // The first position of the window (row-major) whose x equals y gets the gradient.
        const float m = to_float(y[o]);
        std::int64_t first = -1;
        for (std::int64_t r = w.h0; r < w.h1 && first < 0; ++r)
          for (std::int64_t c = w.w0; c < w.w1; ++c)
            if (to_float(xp[r * p.w + c]) == m) {
              first = r * p.w + c;
              break;
            }
        if (first == ih * p.w + iw) g += to_float(dy[o]);
      } else {
        g += static_cast<float>(static_cast<double>(to_float(dy[o])) / w.divisor);
      }
    }
  }
  return g;
}

// LRN as the CPU computes it: scale = k + alpha/size * (sum of x^2 over [c - size/2, c + (size-1)/2]).
template <typename T>
__host__ __device__ inline float lrn_scale(const LrnShape& l, const T* xs, std::int64_t c, std::int64_t p) {
  const std::int64_t c0 = max64(0, c - l.size / 2), c1 = min64(l.c - 1, c + (l.size - 1) / 2);
  float s = 0;
  for (std::int64_t cc = c0; cc <= c1; ++cc) {
    const float v = to_float(xs[cc * l.plane + p]);
    s = add_rn(s, mul_rn(v, v));
  }
  return add_rn(l.k, mul_rn(l.alpha_over_size, s));
}

template <typename T>
__host__ __device__ inline float lrn_forward_at(const LrnShape& l, const T* x, std::int64_t i) {
  const std::int64_t p = i % l.plane, c = (i / l.plane) % l.c, s = i / (l.plane * l.c);
  return to_float(x[i]) * powf(lrn_scale(l, x + s * l.c * l.plane, c, p), -l.beta);
}

// dx[c] = dy[c] scale[c]^-beta - coef x[c] sum over c' in [c - (size-1)/2, c + size/2] of
// dy[c'] y[c'] / scale[c'] (the channels whose window holds c); returns the gradient alone.
template <typename T>
__host__ __device__ inline float lrn_backward_at(const LrnShape& l, const T* x, const T* y, const T* dy,
                                                 std::int64_t i) {
  const std::int64_t p = i % l.plane, c = (i / l.plane) % l.c, s = i / (l.plane * l.c);
  const std::int64_t base = s * l.c * l.plane;
  const T* xs = x + base;
  float window = 0;
  const std::int64_t c0 = max64(0, c - (l.size - 1) / 2), c1 = min64(l.c - 1, c + l.size / 2);
  for (std::int64_t cc = c0; cc <= c1; ++cc) {
    const std::int64_t e = base + cc * l.plane + p;
    window = add_rn(window, mul_rn(to_float(dy[e]), to_float(y[e])) / lrn_scale(l, xs, cc, p));
  }
  return mul_rn(to_float(dy[i]), powf(lrn_scale(l, xs, c, p), -l.beta)) -
         mul_rn(mul_rn(l.coef, to_float(x[i])), window);
}

// Element i of each op, stored: what the kernels below and host:: run.
template <typename T>
__host__ __device__ inline void pool_forward_store(const PoolShape& p, const T* x, T* y, std::int64_t i) {
  y[i] = from_float<T>(pool_forward_at(p, x, i));
}
template <typename T>
__host__ __device__ inline void pool_backward_store(const PoolShape& p, const T* x, const T* y, const T* dy, T* dx,
                                                    bool accumulate, std::int64_t i) {
  dx[i] = from_float<T>(pool_backward_at(p, x, y, dy, accumulate ? to_float(dx[i]) : 0.0f, i));
}
template <typename T>
__host__ __device__ inline void lrn_forward_store(const LrnShape& l, const T* x, T* y, std::int64_t i) {
  y[i] = from_float<T>(lrn_forward_at(l, x, i));
}
template <typename T>
__host__ __device__ inline void lrn_backward_store(const LrnShape& l, const T* x, const T* y, const T* dy, T* dx,
                                                   bool accumulate, std::int64_t i) {
  const float g = lrn_backward_at(l, x, y, dy, i);
  dx[i] = from_float<T>(accumulate ? to_float(dx[i]) + g : g);
}

template <typename T>
__global__ void pool_forward_kernel(PoolShape p, const T* x, T* y) {
  UCPLAN_GRID_LOOP(i, p.nc * p.ho * p.wo) pool_forward_store(p, x, y, i);
}

template <typename T>
__global__ void pool_backward_kernel(PoolShape p, const T* x, const T* y, const T* dy, T* dx, bool accumulate) {
  UCPLAN_GRID_LOOP(i, p.nc * p.h * p.w) pool_backward_store(p, x, y, dy, dx, accumulate, i);
}

template <typename T>
__global__ void lrn_forward_kernel(LrnShape l, const T* x, T* y) {
  UCPLAN_GRID_LOOP(i, l.n * l.c * l.plane) lrn_forward_store(l, x, y, i);
}

template <typename T>
__global__ void lrn_backward_kernel(LrnShape l, const T* x, const T* y, const T* dy, T* dx, bool accumulate) {
  UCPLAN_GRID_LOOP(i, l.n * l.c * l.plane) lrn_backward_store(l, x, y, dy, dx, accumulate, i);
}

template <typename T>
const T* as(const void* p) {
  return static_cast<const T*>(p);
}
template <typename T>
T* as(void* p) {
  return static_cast<T*>(p);
}

}  // namespace

void launch_sum(cudaStream_t s, DataType in, DataType out, std::int64_t n, SumInputs inputs, bool accumulate_into_y,
                void* y) {
  if (n <= 0 || inputs.count <= 0) return;
  with_element_type(in, [&](auto t) {
    using T = typename decltype(t)::type;
    if (out == DataType::Float)
      sum_kernel<T, float><<<blocks_for(n), kThreads, 0, s>>>(n, inputs, accumulate_into_y, as<float>(y));
    else
      sum_kernel<T, T><<<blocks_for(n), kThreads, 0, s>>>(n, inputs, accumulate_into_y, as<T>(y));
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_add_inplace(cudaStream_t s, DataType t, std::int64_t n, const void* src, void* dst) {
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    add_inplace_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, as<T>(src), as<T>(dst));
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_copy_rows(cudaStream_t s, DataType t, std::int64_t rows, std::int64_t width, const void* src,
                      std::int64_t src_stride, void* dst, std::int64_t dst_stride, bool accumulate) {
  if (rows <= 0 || width <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    copy_rows_kernel<<<blocks_for(rows * width), kThreads, 0, s>>>(rows, width, as<T>(src), src_stride, as<T>(dst),
                                                                   dst_stride, accumulate);
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_dropout_forward(cudaStream_t s, DataType t, std::int64_t n, std::uint64_t first_index, std::uint64_t seed,
                            double ratio, float scale, const void* x, void* y, std::uint8_t* mask) {
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    dropout_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, first_index, seed, ratio, scale, as<T>(x), as<T>(y),
                                                              mask);
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_dropout_apply(cudaStream_t s, DataType t, std::int64_t n, float scale, const std::uint8_t* mask,
                          const void* x, void* y, bool accumulate) {
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    dropout_apply_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, scale, mask, as<T>(x), as<T>(y), accumulate);
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_bn_forward_saved(cudaStream_t s, DataType t, std::int64_t n, std::int64_t c, std::int64_t hw, const void* x,
                             const float* gamma, const float* beta, const float* saved, void* y) {
  if (n * c * hw <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    bn_forward_saved_kernel<<<blocks_for(n * c * hw), kThreads, 0, s>>>(n, c, hw, as<T>(x), gamma, beta, saved,
                                                                        as<T>(y));
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_softmax_loss_sum(cudaStream_t s, DataType t, std::int64_t n, std::int64_t k, const void* x,
                             const std::int32_t* labels, double* per_sample, double* loss, float* prob) {
  if (n > 0) {
    if (n > INT_MAX) throw_error("softmax_loss: more than 2^31 samples");
    with_element_type(t, [&](auto e) {
      using T = typename decltype(e)::type;
      softmax_loss_sample_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(k, as<T>(x), labels, per_sample, prob);
    });
    UCPLAN_CUDA(cudaGetLastError());
  }
  sum_doubles_kernel<<<1, kThreads, 0, s>>>(n, per_sample, loss);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_softmax_loss_backward(cudaStream_t s, DataType t, std::int64_t n, std::int64_t k, const float* prob,
                                  const std::int32_t* labels, double scale, void* dx, bool accumulate) {
  if (n * k <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    softmax_loss_backward_kernel<<<blocks_for(n * k), kThreads, 0, s>>>(n, k, prob, labels, scale, as<T>(dx),
                                                                        accumulate);
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_sgd(cudaStream_t s, std::int64_t n, float lr, const float* dw, float* w) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, lr, dw, w);
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_narrow(cudaStream_t s, DataType t, std::int64_t n, const float* src, void* dst) {
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    narrow_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, src, as<T>(dst));
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_accumulate_widened(cudaStream_t s, DataType t, std::int64_t n, const void* src, float* dst) {
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    accumulate_widened_kernel<<<blocks_for(n), kThreads, 0, s>>>(n, as<T>(src), dst);
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_bias_gradient(cudaStream_t s, DataType t, std::int64_t n, std::int64_t c, std::int64_t hw, const void* dy,
                          void* db, bool accumulate) {
  if (c <= 0) return;
  if (c > INT_MAX) throw_error("bias gradient: more than 2^31 - 1 channels");
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    bias_gradient_kernel<<<static_cast<unsigned>(c), kThreads, 0, s>>>(n, c, hw, as<T>(dy), as<T>(db), accumulate);
  });
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

void launch_pool_forward(cudaStream_t s, DataType t, const PoolShape& p, const void* x, void* y) {
  std::int64_t n = p.nc * p.ho * p.wo;
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    pool_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, as<T>(x), as<T>(y));
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_pool_backward(cudaStream_t s, DataType t, const PoolShape& p, const void* x, const void* y, const void* dy,
                          void* dx, bool accumulate) {
  std::int64_t n = p.nc * p.h * p.w;
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    pool_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, as<T>(x), as<T>(y), as<T>(dy), as<T>(dx), accumulate);
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_lrn_forward(cudaStream_t s, DataType t, const LrnShape& l, const void* x, void* y) {
  std::int64_t n = l.n * l.c * l.plane;
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    lrn_forward_kernel<<<blocks_for(n), kThreads, 0, s>>>(l, as<T>(x), as<T>(y));
  });
  UCPLAN_CUDA(cudaGetLastError());
}

void launch_lrn_backward(cudaStream_t s, DataType t, const LrnShape& l, const void* x, const void* y, const void* dy,
                         void* dx, bool accumulate) {
  std::int64_t n = l.n * l.c * l.plane;
  if (n <= 0) return;
  with_element_type(t, [&](auto e) {
    using T = typename decltype(e)::type;
    lrn_backward_kernel<<<blocks_for(n), kThreads, 0, s>>>(l, as<T>(x), as<T>(y), as<T>(dy), as<T>(dx), accumulate);
  });
  UCPLAN_CUDA(cudaGetLastError());
}

namespace host {
template <typename T>
void pool_forward(const PoolShape& p, const T* x, T* y) {
  for (std::int64_t i = 0; i < p.nc * p.ho * p.wo; ++i) pool_forward_store(p, x, y, i);
}
template <typename T>
void pool_backward(const PoolShape& p, const T* x, const T* y, const T* dy, T* dx, bool accumulate) {
  for (std::int64_t i = 0; i < p.nc * p.h * p.w; ++i) pool_backward_store(p, x, y, dy, dx, accumulate, i);
}
template <typename T>
void lrn_forward(const LrnShape& l, const T* x, T* y) {
  for (std::int64_t i = 0; i < l.n * l.c * l.plane; ++i) lrn_forward_store(l, x, y, i);
}
template <typename T>
void lrn_backward(const LrnShape& l, const T* x, const T* y, const T* dy, T* dx, bool accumulate) {
  for (std::int64_t i = 0; i < l.n * l.c * l.plane; ++i) lrn_backward_store(l, x, y, dy, dx, accumulate, i);
}

#define UCPLAN_HOST_MIRRORS(T)                                                              \
  template void pool_forward<T>(const PoolShape&, const T*, T*);                            \
  template void pool_backward<T>(const PoolShape&, const T*, const T*, const T*, T*, bool); \
  template void lrn_forward<T>(const LrnShape&, const T*, T*);                              \
  template void lrn_backward<T>(const LrnShape&, const T*, const T*, const T*, T*, bool);
UCPLAN_HOST_MIRRORS(float)
UCPLAN_HOST_MIRRORS(__nv_bfloat16)
UCPLAN_HOST_MIRRORS(__half)
#undef UCPLAN_HOST_MIRRORS
}  // namespace host

}  // namespace ucplan::cuda::detail
