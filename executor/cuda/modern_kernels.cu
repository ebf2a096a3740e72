// The kernels of modern_kernels.h. As small_kernels.cu: grid-stride loops over 64-bit indices and
// no atomics. This file is compiled with --fmad=false (executor/CMakeLists.txt): the activation
// formulas come from executor/cpu/activation.h, which nvcc would otherwise contract into FMAs
// (hardsigmoid's a x + b, GELU-tanh's x + 0.044715 x^3), so the rule "round the product, then the
// sum, as the CPU does" holds for every expression here without __fmul_rn/__fadd_rn on each.
//
// Every thread's work is a __host__ __device__ function (..._at, and the Row types of the plane
// reductions), so the host namespace at the end runs exactly what the kernels run, thread after
// thread, with the warp reductions in the device's order: a machine without a GPU can check the
// arithmetic against the CPU reference.
//
// Activations and gradients are elements of the context's type T (storage_type.h): loaded with
// to_float, stored with from_float<T>, around the FP32 kernel's arithmetic; what is FP32 at every
// precision (gamma, beta, layer norm's statistics, dgamma, the double partial sums) stays so. No
// thread reads back an element it stored (an accumulation reads the caller's earlier value), so at
// 16 bits a kernel gives widen -> FP32 kernel -> narrow, the CPU emulation's bits, and at float
// exactly the FP32 kernel.
#include "executor/cuda/modern_kernels.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "executor/cpu/activation.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/storage_type.h"

namespace ucplan::cuda {
namespace {

using i64 = std::int64_t;

constexpr int kThreads = 256;
constexpr int kWarp = 32;

unsigned blocks_for(i64 n) {
  const i64 b = (n + kThreads - 1) / kThreads;
  const i64 cap = i64{1} << 20;  // grid-stride loops cover the rest
  return static_cast<unsigned>(b < cap ? b : cap);
}

#define UCPLAN_GRID_LOOP(i, n)                                                                     \
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<std::int64_t>(blockDim.x) * gridDim.x)

// ---- element functions: thread i's whole work ----

template <typename T>
__host__ __device__ inline void activation_forward_at(const ActivationDims& d, const T* x, T* y, i64 i) {
  y[i] = from_float<T>(cpu::activation_value(d, to_float(x[i])));
}

template <typename T>
__host__ __device__ inline void activation_backward_at(const ActivationDims& d, const T* v, const T* dy, T* dx,
                                                       bool accumulate, i64 i) {
  const float g = to_float(dy[i]) * cpu::activation_derivative(d, to_float(v[i]));
  dx[i] = from_float<T>(accumulate ? to_float(dx[i]) + g : g);
}

__host__ __device__ inline i64 mul_s_index(const MulDims& d, i64 i) { return d.per_channel ? i / d.plane : i; }

template <typename T>
__host__ __device__ inline void mul_forward_at(const MulDims& d, const T* x, const T* s, T* y, i64 i) {
  y[i] = from_float<T>(to_float(x[i]) * to_float(s[mul_s_index(d, i)]));
}

template <typename T>
__host__ __device__ inline void mul_dx_at(const MulDims& d, const T* s, const T* dy, T* dx, bool accumulate, i64 i) {
  const float g = to_float(dy[i]) * to_float(s[mul_s_index(d, i)]);
  dx[i] = from_float<T>(accumulate ? to_float(dx[i]) + g : g);
}

// s of x's shape: ds (+)= dy * x element by element.
template <typename T>
__host__ __device__ inline void mul_ds_at(const T* x, const T* dy, T* ds, bool accumulate, i64 i) {
  const float g = to_float(dy[i]) * to_float(x[i]);
  ds[i] = from_float<T>(accumulate ? to_float(ds[i]) + g : g);
}

template <typename T>
__host__ __device__ inline void scale_forward_at(i64 c, i64 plane, const T* x, const float* gamma, T* y, i64 i) {
  y[i] = from_float<T>(to_float(x[i]) * gamma[(i / plane) % c]);
}

template <typename T>
__host__ __device__ inline void scale_dx_at(i64 c, i64 plane, const float* gamma, const T* dy, T* dx, bool accumulate,
                                            i64 i) {
  const float g = to_float(dy[i]) * gamma[(i / plane) % c];
  dx[i] = from_float<T>(accumulate ? to_float(dx[i]) + g : g);
}

// Layer norm statistics of pixel t (over n * plane): the CPU's sums (double, channel by channel),
// so the CPU's mean and inverse std to the bit.
template <typename T>
__host__ __device__ inline void ln_stats_at(const LnDims& d, const T* x, float* saved, i64 t) {
  const i64 plane = d.h * d.w, i = t / plane, p = t % plane;
  const T* xs = x + i * d.c * plane + p;
  double s = 0;
  for (i64 k = 0; k < d.c; ++k) s += to_float(xs[k * plane]);
  const float mean = static_cast<float>(s / static_cast<double>(d.c));
  double sq = 0;
  for (i64 k = 0; k < d.c; ++k) {
    const double dev = static_cast<double>(to_float(xs[k * plane])) - mean;
    sq += dev * dev;
  }
  saved[t] = mean;
  saved[d.n * plane + t] = static_cast<float>(1.0 / sqrt(sq / static_cast<double>(d.c) + d.eps));
}

// y at element e: the CPU's expression, left to right, no FMA.
template <typename T>
__host__ __device__ inline void ln_forward_saved_at(const LnDims& d, const T* x, const float* gamma, const float* beta,
                                                    const float* saved, T* y, i64 e) {
  const i64 plane = d.h * d.w, p = e % plane, k = (e / plane) % d.c, i = e / (plane * d.c);
  const i64 t = i * plane + p;
  y[e] = from_float<T>((to_float(x[e]) - saved[t]) * saved[d.n * plane + t] * gamma[k] + beta[k]);
}

// dx over the channels of pixel t: dx = inv_std (g - mean(g) - xhat mean(g xhat)), g = dy gamma,
// in double as the CPU computes it, in its order.
template <typename T>
__host__ __device__ inline void ln_dx_at(const LnDims& d, const T* x, const float* gamma, const float* saved,
                                         const T* dy, T* dx, bool accumulate, i64 t) {
  const i64 plane = d.h * d.w, i = t / plane, p = t % plane;
  const i64 base = i * d.c * plane + p;
  const float mean = saved[t], inv_std = saved[d.n * plane + t];
  double mg = 0, mgx = 0;
  for (i64 k = 0; k < d.c; ++k) {
    const double xhat = (static_cast<double>(to_float(x[base + k * plane])) - mean) * inv_std;
    const double g = static_cast<double>(to_float(dy[base + k * plane])) * gamma[k];
    mg += g;
    mgx += g * xhat;
  }
  for (i64 k = 0; k < d.c; ++k) {
    const i64 e = base + k * plane;
    const double xhat = (static_cast<double>(to_float(x[e])) - mean) * inv_std;
    const double g = static_cast<double>(to_float(dy[e])) * gamma[k];
    const float v =
        static_cast<float>(inv_std * (g - mg / static_cast<double>(d.c) - xhat * mgx / static_cast<double>(d.c)));
    dx[e] = from_float<T>(accumulate ? to_float(dx[e]) + v : v);
  }
}

// A moved gradient g stored into dx[e], or added to it.
template <typename T>
__host__ __device__ inline void move_into(T* dx, i64 e, T g, bool accumulate) {
  dx[e] = accumulate ? from_float<T>(to_float(dx[e]) + to_float(g)) : g;
}

// Gathers (each thread writes its own element). y's channel k * groups + j is x's j * per + k.
template <typename T>
__host__ __device__ inline void shuffle_forward_at(i64 c, i64 plane, i64 groups, const T* x, T* y, i64 e) {
  const i64 p = e % plane, oc = (e / plane) % c, i = e / (plane * c), per = c / groups;
  y[e] = x[(i * c + (oc % groups) * per + oc / groups) * plane + p];
}

template <typename T>
__host__ __device__ inline void shuffle_backward_at(i64 c, i64 plane, i64 groups, const T* dy, T* dx, bool accumulate,
                                                    i64 e) {
  const i64 p = e % plane, ic = (e / plane) % c, i = e / (plane * c), per = c / groups;
  move_into(dx, e, dy[(i * c + (ic % per) * groups + ic / per) * plane + p], accumulate);
}

template <typename T>
__host__ __device__ inline void slice_forward_at(i64 c, i64 plane, i64 begin, i64 width, const T* x, T* y, i64 e) {
  y[e] = x[((e / width) * c + begin) * plane + e % width];
}

template <typename T>
__host__ __device__ inline void slice_backward_at(i64 c, i64 plane, i64 begin, i64 end, const T* dy, T* dx,
                                                  bool accumulate, i64 e) {
  const i64 p = e % plane, ch = (e / plane) % c, i = e / (plane * c);
  if (ch < begin || ch >= end) {
    if (!accumulate) dx[e] = from_float<T>(0.0f);
    return;
  }
  move_into(dx, e, dy[(i * (end - begin) + ch - begin) * plane + p], accumulate);
}

// ---- plane reductions: one warp per row of `plane` elements ----
// Lane l sums the row's elements l, l + 32, ... in double; the warp then adds lane l + off into
// lane l for off = 16, 8, 4, 2, 1 (lane 0 ends with the row's sum), and lane 0 finishes the row.
// The order depends on nothing but the row's length: the same bits every run.

struct Sum2 {
  double a = 0, b = 0;
};

// mul with s per (sample, channel): ds[r] (+)= sum over the plane of dy * x.
template <typename T>
struct MulDsRow {
  const T* x;
  const T* dy;
  T* ds;
  i64 plane;
  bool accumulate;
  __host__ __device__ Sum2 partial(i64 r, int lane) const {
    Sum2 s;
    for (i64 p = lane; p < plane; p += kWarp)
      s.a += static_cast<double>(to_float(dy[r * plane + p])) * to_float(x[r * plane + p]);
    return s;
  }
  __host__ __device__ void finish(i64 r, Sum2 s) const {
    const auto g = static_cast<float>(s.a);
    ds[r] = from_float<T>(accumulate ? to_float(ds[r]) + g : g);
  }
};

// scale's first pass: out[r] = sum over the plane of dy * x, r = sample * c + channel.
template <typename T>
struct ScaleRow {
  const T* x;
  const T* dy;
  double* out;
  i64 plane;
  __host__ __device__ Sum2 partial(i64 r, int lane) const {
    Sum2 s;
    for (i64 p = lane; p < plane; p += kWarp)
      s.a += static_cast<double>(to_float(dy[r * plane + p])) * to_float(x[r * plane + p]);
    return s;
  }
  __host__ __device__ void finish(i64 r, Sum2 s) const { out[r] = s.a; }
};

// layer norm's first pass: out[2r] = sum of dy * xhat, out[2r + 1] = sum of dy over the plane.
template <typename T>
struct LnRow {
  LnDims d;
  const T* x;
  const float* saved;
  const T* dy;
  double* out;
  __host__ __device__ Sum2 partial(i64 r, int lane) const {
    const i64 plane = d.h * d.w, i = r / d.c;
    const float* mean = saved + i * plane;
    const float* inv_std = saved + d.n * plane + i * plane;
    Sum2 s;
    for (i64 p = lane; p < plane; p += kWarp) {
      const double xhat = (static_cast<double>(to_float(x[r * plane + p])) - mean[p]) * inv_std[p];
      const float g = to_float(dy[r * plane + p]);
      s.a += g * xhat;
      s.b += g;
    }
    return s;
  }
  __host__ __device__ void finish(i64 r, Sum2 s) const {
    out[2 * r] = s.a;
    out[2 * r + 1] = s.b;
  }
};

template <class Row>
__global__ void rows_kernel(i64 rows, Row row) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const i64 first = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  const i64 warps = static_cast<i64>(gridDim.x) * blockDim.x / kWarp;
  for (i64 r = first; r < rows; r += warps) {  // the same trip count for the whole warp
    Sum2 s = row.partial(r, lane);
    for (int off = kWarp / 2; off > 0; off /= 2) {
      s.a += __shfl_down_sync(0xffffffffu, s.a, off);
      s.b += __shfl_down_sync(0xffffffffu, s.b, off);
    }
    if (lane == 0) row.finish(r, s);
  }
}

template <class Row>
void launch_rows(cudaStream_t st, i64 rows, const Row& row) {
  if (rows <= 0) return;
  rows_kernel<<<blocks_for(rows * kWarp), kThreads, 0, st>>>(rows, row);
  UCPLAN_CUDA(cudaGetLastError());
}

template <class Row>
void host_rows(i64 rows, const Row& row) {
  for (i64 r = 0; r < rows; ++r) {
    Sum2 lanes[kWarp];
    for (int l = 0; l < kWarp; ++l) lanes[l] = row.partial(r, l);
    for (int off = kWarp / 2; off > 0; off /= 2)
      for (int l = 0; l < off; ++l) {
        lanes[l].a += lanes[l + off].a;
        lanes[l].b += lanes[l + off].b;
      }
    row.finish(r, lanes[0]);
  }
}

// Second passes, one thread per channel: the rows of the samples in sample order.
__host__ __device__ inline void scale_channel_at(i64 n, i64 c, const double* part, float* dgamma, i64 k) {
  double s = 0;
  for (i64 i = 0; i < n; ++i) s += part[i * c + k];
  dgamma[k] += static_cast<float>(s);
}

__host__ __device__ inline void ln_channel_at(i64 n, i64 c, const double* part, float* dgamma_dbeta, i64 k) {
  double g = 0, b = 0;
  for (i64 i = 0; i < n; ++i) {
    g += part[2 * (i * c + k)];
    b += part[2 * (i * c + k) + 1];
  }
  dgamma_dbeta[k] += static_cast<float>(g);
  dgamma_dbeta[c + k] += static_cast<float>(b);
}

// ---- kernels ----

template <typename T>
__global__ void activation_forward_kernel(ActivationDims d, i64 n, const T* x, T* y) {
  UCPLAN_GRID_LOOP(i, n) activation_forward_at(d, x, y, i);
}
template <typename T>
__global__ void activation_backward_kernel(ActivationDims d, i64 n, const T* v, const T* dy, T* dx, bool accumulate) {
  UCPLAN_GRID_LOOP(i, n) activation_backward_at(d, v, dy, dx, accumulate, i);
}
template <typename T>
__global__ void mul_forward_kernel(MulDims d, const T* x, const T* s, T* y) {
  UCPLAN_GRID_LOOP(i, d.n * d.c * d.plane) mul_forward_at(d, x, s, y, i);
}
template <typename T>
__global__ void mul_dx_kernel(MulDims d, const T* s, const T* dy, T* dx, bool accumulate) {
  UCPLAN_GRID_LOOP(i, d.n * d.c * d.plane) mul_dx_at(d, s, dy, dx, accumulate, i);
}
template <typename T>
__global__ void mul_ds_kernel(i64 n, const T* x, const T* dy, T* ds, bool accumulate) {
  UCPLAN_GRID_LOOP(i, n) mul_ds_at(x, dy, ds, accumulate, i);
}
template <typename T>
__global__ void scale_forward_kernel(i64 count, i64 c, i64 plane, const T* x, const float* gamma, T* y) {
  UCPLAN_GRID_LOOP(i, count) scale_forward_at(c, plane, x, gamma, y, i);
}
template <typename T>
__global__ void scale_dx_kernel(i64 count, i64 c, i64 plane, const float* gamma, const T* dy, T* dx, bool accumulate) {
  UCPLAN_GRID_LOOP(i, count) scale_dx_at(c, plane, gamma, dy, dx, accumulate, i);
}
__global__ void scale_channel_kernel(i64 n, i64 c, const double* part, float* dgamma) {
  UCPLAN_GRID_LOOP(k, c) scale_channel_at(n, c, part, dgamma, k);
}
template <typename T>
__global__ void ln_stats_kernel(LnDims d, const T* x, float* saved) {
  UCPLAN_GRID_LOOP(t, d.n * d.h * d.w) ln_stats_at(d, x, saved, t);
}
template <typename T>
__global__ void ln_forward_saved_kernel(LnDims d, const T* x, const float* gamma, const float* beta, const float* saved,
                                        T* y) {
  UCPLAN_GRID_LOOP(e, d.n * d.c * d.h * d.w) ln_forward_saved_at(d, x, gamma, beta, saved, y, e);
}
template <typename T>
__global__ void ln_dx_kernel(LnDims d, const T* x, const float* gamma, const float* saved, const T* dy, T* dx,
                             bool accumulate) {
  UCPLAN_GRID_LOOP(t, d.n * d.h * d.w) ln_dx_at(d, x, gamma, saved, dy, dx, accumulate, t);
}
__global__ void ln_channel_kernel(i64 n, i64 c, const double* part, float* dgamma_dbeta) {
  UCPLAN_GRID_LOOP(k, c) ln_channel_at(n, c, part, dgamma_dbeta, k);
}
template <typename T>
__global__ void shuffle_forward_kernel(i64 count, i64 c, i64 plane, i64 groups, const T* x, T* y) {
  UCPLAN_GRID_LOOP(e, count) shuffle_forward_at(c, plane, groups, x, y, e);
}
template <typename T>
__global__ void shuffle_backward_kernel(i64 count, i64 c, i64 plane, i64 groups, const T* dy, T* dx, bool accumulate) {
  UCPLAN_GRID_LOOP(e, count) shuffle_backward_at(c, plane, groups, dy, dx, accumulate, e);
}
template <typename T>
__global__ void slice_forward_kernel(i64 count, i64 c, i64 plane, i64 begin, i64 width, const T* x, T* y) {
  UCPLAN_GRID_LOOP(e, count) slice_forward_at(c, plane, begin, width, x, y, e);
}
template <typename T>
__global__ void slice_backward_kernel(i64 count, i64 c, i64 plane, i64 begin, i64 end, const T* dy, T* dx,
                                      bool accumulate) {
  UCPLAN_GRID_LOOP(e, count) slice_backward_at(c, plane, begin, end, dy, dx, accumulate, e);
}

void check_launch() { UCPLAN_CUDA(cudaGetLastError()); }

// The public functions' float pointers to activations and gradients point to elements of the
// context's data type (kernels_cuda.h): each launcher runs the instantiation of that type.
template <typename T>
const T* as(const float* p) {
  return reinterpret_cast<const T*>(p);
}
template <typename T>
T* as(float* p) {
  return reinterpret_cast<T*>(p);
}

}  // namespace

// ---- launchers ----

void activation_forward(Context& ctx, const ActivationDims& d, std::int64_t count, const float* x, float* y) {
  if (count <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    activation_forward_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(d, count, as<T>(x), as<T>(y));
  });
  check_launch();
}

void activation_backward(Context& ctx, const ActivationDims& d, std::int64_t count, const float* v, const float* dy,
                         float* dx, bool accumulate) {
  if (count <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    activation_backward_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(d, count, as<T>(v), as<T>(dy),
                                                                                 as<T>(dx), accumulate);
  });
  check_launch();
}

void mul_forward(Context& ctx, const MulDims& d, const float* x, const float* s, float* y) {
  const i64 count = d.n * d.c * d.plane;
  if (count <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    mul_forward_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(d, as<T>(x), as<T>(s), as<T>(y));
  });
  check_launch();
}

void mul_backward(Context& ctx, const MulDims& d, const float* x, const float* s, const float* dy, float* dx,
                  bool accumulate_dx, float* ds, bool accumulate_ds) {
  const i64 count = d.n * d.c * d.plane;
  if (count <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    if (dx) {
      mul_dx_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(d, as<T>(s), as<T>(dy), as<T>(dx), accumulate_dx);
      check_launch();
    }
    if (!ds) return;
    if (d.per_channel) {
      launch_rows(ctx.stream(), d.n * d.c, MulDsRow<T>{as<T>(x), as<T>(dy), as<T>(ds), d.plane, accumulate_ds});
    } else {
      mul_ds_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(count, as<T>(x), as<T>(dy), as<T>(ds),
                                                                      accumulate_ds);
      check_launch();
    }
  });
}

void scale_forward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, const float* x, const float* gamma,
                   float* y) {
  const i64 count = n * c * plane;
  if (count <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    scale_forward_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(count, c, plane, as<T>(x), gamma, as<T>(y));
  });
  check_launch();
}

std::size_t scale_backward_scratch_bytes(std::int64_t n, std::int64_t c) {
  return static_cast<std::size_t>(n > 0 && c > 0 ? n * c : 0) * sizeof(double);
}

void scale_backward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, const float* x,
                    const float* gamma, const float* dy, float* dx, bool accumulate, float* dgamma) {
  const i64 count = n * c * plane;
  if (count <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    if (dgamma) {
      auto* part = static_cast<double*>(ctx.scratch(scale_backward_scratch_bytes(n, c)));
      launch_rows(ctx.stream(), n * c, ScaleRow<T>{as<T>(x), as<T>(dy), part, plane});
      scale_channel_kernel<<<blocks_for(c), kThreads, 0, ctx.stream()>>>(n, c, part, dgamma);
      check_launch();
    }
    if (dx) {
      scale_dx_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(count, c, plane, gamma, as<T>(dy), as<T>(dx),
                                                                        accumulate);
      check_launch();
    }
  });
}

void ln_forward_training(Context& ctx, const LnDims& d, const float* x, const float* gamma, const float* beta, float* y,
                         float* saved) {
  const i64 pixels = d.n * d.h * d.w;
  if (pixels <= 0 || d.c <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    ln_stats_kernel<<<blocks_for(pixels), kThreads, 0, ctx.stream()>>>(d, as<T>(x), saved);
  });
  check_launch();
  // y from the saved (float) statistics by the recomputation's own kernel: the same bits.
  ln_forward_saved(ctx, d, x, gamma, beta, saved, y);
}

void ln_forward_saved(Context& ctx, const LnDims& d, const float* x, const float* gamma, const float* beta,
                      const float* saved, float* y) {
  const i64 count = d.n * d.c * d.h * d.w;
  if (count <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    ln_forward_saved_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(d, as<T>(x), gamma, beta, saved,
                                                                              as<T>(y));
  });
  check_launch();
}

std::size_t ln_backward_scratch_bytes(const LnDims& d) { return 2 * scale_backward_scratch_bytes(d.n, d.c); }

void ln_backward(Context& ctx, const LnDims& d, const float* x, const float* gamma, const float* saved, const float* dy,
                 float* dx, float* dgamma_dbeta, bool accumulate) {
  const i64 pixels = d.n * d.h * d.w;
  if (pixels <= 0 || d.c <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    if (dgamma_dbeta) {
      auto* part = static_cast<double*>(ctx.scratch(ln_backward_scratch_bytes(d)));
      launch_rows(ctx.stream(), d.n * d.c, LnRow<T>{d, as<T>(x), saved, as<T>(dy), part});
      ln_channel_kernel<<<blocks_for(d.c), kThreads, 0, ctx.stream()>>>(d.n, d.c, part, dgamma_dbeta);
      check_launch();
    }
    if (dx) {
      ln_dx_kernel<<<blocks_for(pixels), kThreads, 0, ctx.stream()>>>(d, as<T>(x), gamma, saved, as<T>(dy), as<T>(dx),
                                                                      accumulate);
      check_launch();
    }
  });
}

void channel_shuffle_forward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups,
                             const float* x, float* y) {
  const i64 count = n * c * plane;
  if (count <= 0 || groups <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    shuffle_forward_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(count, c, plane, groups, as<T>(x),
                                                                             as<T>(y));
  });
  check_launch();
}

void channel_shuffle_backward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups,
                              const float* dy, float* dx, bool accumulate) {
  const i64 count = n * c * plane;
  if (count <= 0 || groups <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    shuffle_backward_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(count, c, plane, groups, as<T>(dy),
                                                                              as<T>(dx), accumulate);
  });
  check_launch();
}

void slice_forward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin,
                   std::int64_t end, const float* x, float* y) {
  const i64 width = (end - begin) * plane;
  if (n * width <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    slice_forward_kernel<<<blocks_for(n * width), kThreads, 0, ctx.stream()>>>(n * width, c, plane, begin, width,
                                                                               as<T>(x), as<T>(y));
  });
  check_launch();
}

void slice_backward(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin,
                    std::int64_t end, const float* dy, float* dx, bool accumulate) {
  const i64 count = n * c * plane;
  if (count <= 0) return;
  with_element_type(ctx.data_type(), [&](auto e) {
    using T = typename decltype(e)::type;
    slice_backward_kernel<<<blocks_for(count), kThreads, 0, ctx.stream()>>>(count, c, plane, begin, end, as<T>(dy),
                                                                            as<T>(dx), accumulate);
  });
  check_launch();
}

// ---- the same threads on the host ----

namespace host {

template <typename T>
void activation_forward(const ActivationDims& d, std::int64_t count, const T* x, T* y) {
  for (i64 i = 0; i < count; ++i) activation_forward_at(d, x, y, i);
}

template <typename T>
void activation_backward(const ActivationDims& d, std::int64_t count, const T* v, const T* dy, T* dx, bool accumulate) {
  for (i64 i = 0; i < count; ++i) activation_backward_at(d, v, dy, dx, accumulate, i);
}

template <typename T>
void mul_forward(const MulDims& d, const T* x, const T* s, T* y) {
  for (i64 i = 0; i < d.n * d.c * d.plane; ++i) mul_forward_at(d, x, s, y, i);
}

template <typename T>
void mul_backward(const MulDims& d, const T* x, const T* s, const T* dy, T* dx, bool accumulate_dx, T* ds,
                  bool accumulate_ds) {
  const i64 count = d.n * d.c * d.plane;
  if (dx)
    for (i64 i = 0; i < count; ++i) mul_dx_at(d, s, dy, dx, accumulate_dx, i);
  if (!ds) return;
  if (d.per_channel)
    host_rows(d.n * d.c, MulDsRow<T>{x, dy, ds, d.plane, accumulate_ds});
  else
    for (i64 i = 0; i < count; ++i) mul_ds_at(x, dy, ds, accumulate_ds, i);
}

template <typename T>
void scale_forward(std::int64_t n, std::int64_t c, std::int64_t plane, const T* x, const float* gamma, T* y) {
  for (i64 i = 0; i < n * c * plane; ++i) scale_forward_at(c, plane, x, gamma, y, i);
}

template <typename T>
void scale_backward(std::int64_t n, std::int64_t c, std::int64_t plane, const T* x, const float* gamma, const T* dy,
                    T* dx, bool accumulate, float* dgamma) {
  if (dgamma) {
    std::vector<double> part(static_cast<std::size_t>(n * c));
    host_rows(n * c, ScaleRow<T>{x, dy, part.data(), plane});
    for (i64 k = 0; k < c; ++k) scale_channel_at(n, c, part.data(), dgamma, k);
  }
  if (dx)
    for (i64 i = 0; i < n * c * plane; ++i) scale_dx_at(c, plane, gamma, dy, dx, accumulate, i);
}

template <typename T>
void ln_forward_training(const LnDims& d, const T* x, const float* gamma, const float* beta, T* y, float* saved) {
  for (i64 t = 0; t < d.n * d.h * d.w; ++t) ln_stats_at(d, x, saved, t);
  host::ln_forward_saved(d, x, gamma, beta, saved, y);
}

template <typename T>
void ln_forward_saved(const LnDims& d, const T* x, const float* gamma, const float* beta, const float* saved, T* y) {
  for (i64 e = 0; e < d.n * d.c * d.h * d.w; ++e) ln_forward_saved_at(d, x, gamma, beta, saved, y, e);
}

template <typename T>
void ln_backward(const LnDims& d, const T* x, const float* gamma, const float* saved, const T* dy, T* dx,
                 float* dgamma_dbeta, bool accumulate) {
  if (dgamma_dbeta) {
    std::vector<double> part(static_cast<std::size_t>(2 * d.n * d.c));
    host_rows(d.n * d.c, LnRow<T>{d, x, saved, dy, part.data()});
    for (i64 k = 0; k < d.c; ++k) ln_channel_at(d.n, d.c, part.data(), dgamma_dbeta, k);
  }
  if (dx)
    for (i64 t = 0; t < d.n * d.h * d.w; ++t) ln_dx_at(d, x, gamma, saved, dy, dx, accumulate, t);
}

template <typename T>
void channel_shuffle_forward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups, const T* x,
                             T* y) {
  for (i64 e = 0; e < n * c * plane; ++e) shuffle_forward_at(c, plane, groups, x, y, e);
}

template <typename T>
void channel_shuffle_backward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups, const T* dy,
                              T* dx, bool accumulate) {
  for (i64 e = 0; e < n * c * plane; ++e) shuffle_backward_at(c, plane, groups, dy, dx, accumulate, e);
}

template <typename T>
void slice_forward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin, std::int64_t end, const T* x,
                   T* y) {
  const i64 width = (end - begin) * plane;
  for (i64 e = 0; e < n * width; ++e) slice_forward_at(c, plane, begin, width, x, y, e);
}

template <typename T>
void slice_backward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin, std::int64_t end,
                    const T* dy, T* dx, bool accumulate) {
  for (i64 e = 0; e < n * c * plane; ++e) slice_backward_at(c, plane, begin, end, dy, dx, accumulate, e);
}

#define UCPLAN_HOST_MIRRORS(T)                                                                                        \
  template void activation_forward<T>(const ActivationDims&, std::int64_t, const T*, T*);                             \
  template void activation_backward<T>(const ActivationDims&, std::int64_t, const T*, const T*, T*, bool);            \
  template void mul_forward<T>(const MulDims&, const T*, const T*, T*);                                               \
  template void mul_backward<T>(const MulDims&, const T*, const T*, const T*, T*, bool, T*, bool);                    \
  template void scale_forward<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const float*, T*);               \
  template void scale_backward<T>(std::int64_t, std::int64_t, std::int64_t, const T*, const float*, const T*, T*,     \
                                  bool, float*);                                                                      \
  template void ln_forward_training<T>(const LnDims&, const T*, const float*, const float*, T*, float*);              \
  template void ln_forward_saved<T>(const LnDims&, const T*, const float*, const float*, const float*, T*);           \
  template void ln_backward<T>(const LnDims&, const T*, const float*, const float*, const T*, T*, float*, bool);      \
  template void channel_shuffle_forward<T>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, const T*, T*);     \
  template void channel_shuffle_backward<T>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, const T*, T*,     \
                                            bool);                                                                    \
  template void slice_forward<T>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, const T*, T*); \
  template void slice_backward<T>(std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t, const T*, T*, \
                                  bool);
UCPLAN_HOST_MIRRORS(float)
UCPLAN_HOST_MIRRORS(__nv_bfloat16)
UCPLAN_HOST_MIRRORS(__half)
#undef UCPLAN_HOST_MIRRORS

}  // namespace host

}  // namespace ucplan::cuda
