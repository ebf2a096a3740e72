// Convolution kernels: direct, gemm (Caffe con Troll lowering type 1) and gemm_lift (type 3).
//
// Two plane walks carry the index arithmetic of the lowering algorithms: lower() gathers the
// windows of a plane into rows (im2col) and scatter_add() adds such rows back onto a plane
// (col2im). A Window says where tap (i, j) of grid position (oy, ox) lands on the plane:
// row oy * stride_y + i * step_y + base_y, and likewise for columns. The convolution's own window
// is (stride, dilation, -pad). CcT's type-3 lifting, y[o][p] = sum over taps of R[(o, tap)][p - pad
// + tap * dilation], is the same sum seen from the input grid, window (1, -dilation, +pad): the
// lifting is a scatter_add and its adjoint (gathering dy for the backward passes) is a lower.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "executor/cpu/kernel_check.h"
#include "executor/cpu/kernels.h"
#include "executor/cpu/loops.h"

namespace ucplan::cpu {
namespace {

using i64 = std::int64_t;

struct Plane {
  i64 h, w;
  i64 size() const { return h * w; }
};

struct Window {
  i64 kh, kw;
  i64 stride_y, stride_x;
  i64 step_y, step_x;
  i64 base_y, base_x;
  i64 shift_y(i64 i) const { return i * step_y + base_y; }
  i64 shift_x(i64 j) const { return j * step_x + base_x; }
};

Window conv_window(const ConvDims& d) { return {d.kh, d.kw, d.sh, d.sw, d.dh, d.dw, -d.ph, -d.pw}; }
Window lift_window(const ConvDims& d) { return {d.kh, d.kw, 1, 1, -d.dh, -d.dw, d.ph, d.pw}; }

// Per-group sizes.
struct Shape {
  i64 cg, kg;  // input and output channels per group
  i64 taps;    // kh * kw
  i64 rows;    // cg * taps: rows of the type-1 lowered matrix, columns of one filter
  Plane in, out;
};

Shape shape_of(const ConvDims& d) {
  return {d.c / d.groups, d.k / d.groups, d.kh * d.kw, d.c / d.groups * d.kh * d.kw, {d.h, d.w}, {d.ho(), d.wo()}};
}

// A 1x1 stride-1 unpadded convolution's lowered matrix is the input itself, so gemm uses the
// input in place and needs no workspace.
bool lowering_is_identity(const ConvDims& d) {
  return d.kh == 1 && d.kw == 1 && d.sh == 1 && d.sw == 1 && d.ph == 0 && d.pw == 0;
}

// The positions o in [0, count) with o * stride + shift inside [0, size); always lo <= hi.
struct Range {
  i64 lo, hi;
};
Range inside(i64 count, i64 stride, i64 shift, i64 size) {
  const i64 lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  const i64 last = size - 1 - shift;
  const i64 hi = std::min(count, last < 0 ? 0 : last / stride + 1);
  return {std::min(lo, hi), hi};
}

// Column ranges of every kernel column j, the same for every row: computed once per call so
// the row loops carry no bounds checks.
std::vector<Range> column_ranges(const Window& win, Plane grid, Plane plane) {
  std::vector<Range> r(static_cast<std::size_t>(win.kw));
  for (i64 j = 0; j < win.kw; ++j)
    r[static_cast<std::size_t>(j)] = inside(grid.w, win.stride_x, win.shift_x(j), plane.w);
  return r;
}

// The innermost loops. Unit stride has its own loop in each so that the compiler vectorises it.
void axpy_gather(float a, const float* __restrict x, i64 stride, float* __restrict y, i64 count) {
  if (stride == 1) {
    for (i64 e = 0; e < count; ++e) y[e] += a * x[e];
  } else {
    for (i64 e = 0; e < count; ++e) y[e] += a * x[e * stride];
  }
}

void axpy_scatter(float a, const float* __restrict x, float* __restrict y, i64 stride, i64 count) {
  if (stride == 1) {
    for (i64 e = 0; e < count; ++e) y[e] += a * x[e];
  } else {
    for (i64 e = 0; e < count; ++e) y[e * stride] += a * x[e];
  }
}

// dst[(c * kh + i) * kw + j][oy][ox] = src[c][oy * stride_y + shift_y(i)][ox * stride_x + shift_x(j)],
// 0 where that falls outside the plane. Every element of dst is written exactly once: there is
// no clearing pass over what is the largest buffer of the lowering algorithms.
void lower(const float* src, i64 channels, Plane plane, const Window& win, Plane grid, float* dst) {
  const std::vector<Range> cols = column_ranges(win, grid, plane);
  for (i64 c = 0; c < channels; ++c) {
    for (i64 i = 0; i < win.kh; ++i) {
      const Range rows = inside(grid.h, win.stride_y, win.shift_y(i), plane.h);
      for (i64 j = 0; j < win.kw; ++j) {
        const Range cr = cols[static_cast<std::size_t>(j)];
        float* out = dst + ((c * win.kh + i) * win.kw + j) * grid.size();
        std::fill(out, out + rows.lo * grid.w, 0.0f);
        for (i64 oy = rows.lo; oy < rows.hi; ++oy) {
          const float* s = src + (c * plane.h + oy * win.stride_y + win.shift_y(i)) * plane.w + cr.lo * win.stride_x +
                           win.shift_x(j);
          float* o = out + oy * grid.w;
          std::fill(o, o + cr.lo, 0.0f);
          if (win.stride_x == 1) {
            std::copy(s, s + (cr.hi - cr.lo), o + cr.lo);
          } else {
            for (i64 e = 0; e < cr.hi - cr.lo; ++e) o[cr.lo + e] = s[e * win.stride_x];
          }
          std::fill(o + cr.hi, o + grid.w, 0.0f);
        }
        std::fill(out + rows.hi * grid.w, out + grid.size(), 0.0f);
      }
    }
  }
}

// The adjoint of lower(): dst[c][oy * stride_y + shift_y(i)][ox * stride_x + shift_x(j)] +=
// col[(c * kh + i) * kw + j][oy][ox] wherever that lands inside the plane.
void scatter_add(const float* col, i64 channels, Plane grid, const Window& win, Plane plane, float* dst) {
  const std::vector<Range> cols = column_ranges(win, grid, plane);
  for (i64 c = 0; c < channels; ++c) {
    for (i64 i = 0; i < win.kh; ++i) {
      const Range rows = inside(grid.h, win.stride_y, win.shift_y(i), plane.h);
      for (i64 j = 0; j < win.kw; ++j) {
        const Range cr = cols[static_cast<std::size_t>(j)];
        const float* in = col + ((c * win.kh + i) * win.kw + j) * grid.size();
        for (i64 oy = rows.lo; oy < rows.hi; ++oy) {
          float* o = dst + (c * plane.h + oy * win.stride_y + win.shift_y(i)) * plane.w + cr.lo * win.stride_x +
                     win.shift_x(j);
          axpy_scatter(1.0f, in + oy * grid.w + cr.lo, o, win.stride_x, cr.hi - cr.lo);
        }
      }
    }
  }
}

void sgemm(bool trans_a, bool trans_b, i64 m, i64 n, i64 k, const float* a, i64 lda, const float* b, i64 ldb,
           float beta, float* c, i64 ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a,
              static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

// y = bias (or 0) everywhere: the starting value of the kernels that accumulate into y.
void fill_bias(const ConvDims& d, const float* bias, float* y) {
  const i64 plane = d.ho() * d.wo();
  for (i64 n = 0; n < d.n; ++n)
    for (i64 k = 0; k < d.k; ++k) {
      float* p = y + (n * d.k + k) * plane;
      std::fill(p, p + plane, d.bias ? bias[k] : 0.0f);
    }
}

void add_bias_gradient(const ConvDims& d, const float* dy, float* dbias) {
  if (!d.bias) return;
  const i64 plane = d.ho() * d.wo();
  for (i64 k = 0; k < d.k; ++k) {
    double s = 0;
    for (i64 n = 0; n < d.n; ++n) s += sum(dy + (n * d.k + k) * plane, plane);
    dbias[k] += static_cast<float>(s);
  }
}

// ---- direct: loops over the definition; no workspace ----
//
// Each (input channel, tap) adds one scaled input row segment to one output row; the segment's
// bounds come from column_ranges(), so the inner loop is a plain axpy over output columns.

void direct_forward(const ConvDims& d, const float* x, const float* w, const float* bias, float* y) {
  const Shape s = shape_of(d);
  const Window win = conv_window(d);
  const std::vector<Range> cols = column_ranges(win, s.out, s.in);
  fill_bias(d, bias, y);
  for (i64 n = 0; n < d.n; ++n)
    for (i64 k = 0; k < d.k; ++k) {
      const i64 g = k / s.kg;
      float* yp = y + (n * d.k + k) * s.out.size();
      for (i64 c = 0; c < s.cg; ++c) {
        const float* xp = x + (n * d.c + g * s.cg + c) * s.in.size();
        const float* wp = w + (k * s.cg + c) * s.taps;
        for (i64 i = 0; i < d.kh; ++i) {
          const Range rows = inside(s.out.h, d.sh, win.shift_y(i), s.in.h);
          for (i64 oy = rows.lo; oy < rows.hi; ++oy) {
            const float* xr = xp + (oy * d.sh + win.shift_y(i)) * s.in.w;
            float* yr = yp + oy * s.out.w;
            for (i64 j = 0; j < d.kw; ++j) {
              const Range cr = cols[static_cast<std::size_t>(j)];
              axpy_gather(wp[i * d.kw + j], xr + cr.lo * d.sw + win.shift_x(j), d.sw, yr + cr.lo, cr.hi - cr.lo);
            }
          }
        }
      }
    }
}

void direct_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, bool accumulate) {
  const Shape s = shape_of(d);
  const Window win = conv_window(d);
  const std::vector<Range> cols = column_ranges(win, s.out, s.in);
  if (!accumulate) std::fill(dx, dx + d.n * d.c * s.in.size(), 0.0f);
  for (i64 n = 0; n < d.n; ++n)
    for (i64 ci = 0; ci < d.c; ++ci) {
      const i64 g = ci / s.cg;
      const i64 c = ci % s.cg;
      float* dxp = dx + (n * d.c + ci) * s.in.size();
      for (i64 k = g * s.kg; k < (g + 1) * s.kg; ++k) {
        const float* dyp = dy + (n * d.k + k) * s.out.size();
        const float* wp = w + (k * s.cg + c) * s.taps;
        for (i64 i = 0; i < d.kh; ++i) {
          const Range rows = inside(s.out.h, d.sh, win.shift_y(i), s.in.h);
          for (i64 oy = rows.lo; oy < rows.hi; ++oy) {
            float* dxr = dxp + (oy * d.sh + win.shift_y(i)) * s.in.w;
            const float* dyr = dyp + oy * s.out.w;
            for (i64 j = 0; j < d.kw; ++j) {
              const Range cr = cols[static_cast<std::size_t>(j)];
              axpy_scatter(wp[i * d.kw + j], dyr + cr.lo, dxr + cr.lo * d.sw + win.shift_x(j), d.sw, cr.hi - cr.lo);
            }
          }
        }
      }
    }
}

void direct_backward_filter(const ConvDims& d, const float* x, const float* dy, float* dw, float* dbias) {
  const Shape s = shape_of(d);
  const Window win = conv_window(d);
  const std::vector<Range> cols = column_ranges(win, s.out, s.in);
  for (i64 n = 0; n < d.n; ++n)
    for (i64 k = 0; k < d.k; ++k) {
      const i64 g = k / s.kg;
      const float* dyp = dy + (n * d.k + k) * s.out.size();
      for (i64 c = 0; c < s.cg; ++c) {
        const float* xp = x + (n * d.c + g * s.cg + c) * s.in.size();
        float* dwp = dw + (k * s.cg + c) * s.taps;
        for (i64 i = 0; i < d.kh; ++i) {
          const Range rows = inside(s.out.h, d.sh, win.shift_y(i), s.in.h);
          for (i64 j = 0; j < d.kw; ++j) {
            const Range cr = cols[static_cast<std::size_t>(j)];
            // Rows are summed in double: a plane holds thousands of products.
            double acc = 0;
            for (i64 oy = rows.lo; oy < rows.hi; ++oy) {
              const float* xr = xp + (oy * d.sh + win.shift_y(i)) * s.in.w + cr.lo * d.sw + win.shift_x(j);
              acc += dot(dyp + oy * s.out.w + cr.lo, xr, d.sw, cr.hi - cr.lo);
            }
            dwp[i * d.kw + j] += static_cast<float>(acc);
          }
        }
      }
    }
  add_bias_gradient(d, dy, dbias);
}

// ---- gemm: CcT lowering type 1 ----
//
// The whole micro-batch of one group is lowered into the workspace (sample n's matrix of
// rows x out-plane at offset n * rows * out-plane), as CcT lowers a batch. The sgemm is issued
// per sample because in NCHW one group's outputs are not a single matrix across samples.

void gemm_forward(const ConvDims& d, const float* x, const float* w, const float* bias, float* y, float* ws) {
  const Shape s = shape_of(d);
  const bool identity = lowering_is_identity(d);
  const i64 lowered = s.rows * s.out.size();
  if (d.bias) fill_bias(d, bias, y);
  for (i64 g = 0; g < d.groups; ++g) {
    if (!identity)
      for (i64 n = 0; n < d.n; ++n)
        lower(x + (n * d.c + g * s.cg) * s.in.size(), s.cg, s.in, conv_window(d), s.out, ws + n * lowered);
    for (i64 n = 0; n < d.n; ++n) {
      const float* b = identity ? x + (n * d.c + g * s.cg) * s.in.size() : ws + n * lowered;
      sgemm(false, false, s.kg, s.out.size(), s.rows, w + g * s.kg * s.rows, s.rows, b, s.out.size(),
            d.bias ? 1.0f : 0.0f, y + (n * d.k + g * s.kg) * s.out.size(), s.out.size());
    }
  }
}

void gemm_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, bool accumulate, float* ws) {
  const Shape s = shape_of(d);
  const bool identity = lowering_is_identity(d);
  const i64 lowered = s.rows * s.out.size();
  for (i64 g = 0; g < d.groups; ++g) {
    for (i64 n = 0; n < d.n; ++n) {
      float* dxp = dx + (n * d.c + g * s.cg) * s.in.size();
      const float* dyp = dy + (n * d.k + g * s.kg) * s.out.size();
      if (identity) {
        sgemm(true, false, s.cg, s.out.size(), s.kg, w + g * s.kg * s.rows, s.rows, dyp, s.out.size(),
              accumulate ? 1.0f : 0.0f, dxp, s.in.size());
      } else {
        sgemm(true, false, s.rows, s.out.size(), s.kg, w + g * s.kg * s.rows, s.rows, dyp, s.out.size(), 0.0f,
              ws + n * lowered, s.out.size());
      }
    }
    if (!identity)
      for (i64 n = 0; n < d.n; ++n) {
        float* dxp = dx + (n * d.c + g * s.cg) * s.in.size();
        if (!accumulate) std::fill(dxp, dxp + s.cg * s.in.size(), 0.0f);
        scatter_add(ws + n * lowered, s.cg, s.out, conv_window(d), s.in, dxp);
      }
  }
}

void gemm_backward_filter(const ConvDims& d, const float* x, const float* dy, float* dw, float* dbias, float* ws) {
  const Shape s = shape_of(d);
  const bool identity = lowering_is_identity(d);
  const i64 lowered = s.rows * s.out.size();
  for (i64 g = 0; g < d.groups; ++g) {
    if (!identity)
      for (i64 n = 0; n < d.n; ++n)
        lower(x + (n * d.c + g * s.cg) * s.in.size(), s.cg, s.in, conv_window(d), s.out, ws + n * lowered);
    for (i64 n = 0; n < d.n; ++n) {
      const float* b = identity ? x + (n * d.c + g * s.cg) * s.in.size() : ws + n * lowered;
      sgemm(false, true, s.kg, s.rows, s.out.size(), dy + (n * d.k + g * s.kg) * s.out.size(), s.out.size(), b,
            s.out.size(), 1.0f, dw + g * s.kg * s.rows, s.rows);
    }
  }
  add_bias_gradient(d, dy, dbias);
}

// ---- gemm_lift: CcT lowering type 3 (stride 1) ----
//
// Workspace: the lowered kernel K^ (kg * taps rows of cg: K^[(o, tap)][c] = w[o][c][tap], which
// no stride arrangement of w can present to sgemm) followed by the micro-batch's R^ matrices
// (kg * taps rows of one input plane per sample). Forward: R^ = K^ x (no input lowering), then
// the k^2 lifting sum. Backward data gathers dy into R^'s shape (the adjoint of the lifting)
// and one sgemm with K^ transposed writes dx directly; backward filter multiplies that gathered
// dy by x^T into dK^, which is then added onto dw in w's layout.

void lower_kernel(const Shape& s, const float* wg, float* khat) {
  for (i64 o = 0; o < s.kg; ++o)
    for (i64 c = 0; c < s.cg; ++c)
      for (i64 t = 0; t < s.taps; ++t) khat[(o * s.taps + t) * s.cg + c] = wg[(o * s.cg + c) * s.taps + t];
}

void lift_forward(const ConvDims& d, const float* x, const float* w, const float* bias, float* y, float* ws) {
  const Shape s = shape_of(d);
  float* khat = ws;
  float* rhat = ws + s.kg * s.taps * s.cg;
  const i64 lifted = s.kg * s.taps * s.in.size();
  fill_bias(d, bias, y);
  for (i64 g = 0; g < d.groups; ++g) {
    lower_kernel(s, w + g * s.kg * s.rows, khat);
    for (i64 n = 0; n < d.n; ++n)
      sgemm(false, false, s.kg * s.taps, s.in.size(), s.cg, khat, s.cg, x + (n * d.c + g * s.cg) * s.in.size(),
            s.in.size(), 0.0f, rhat + n * lifted, s.in.size());
    for (i64 n = 0; n < d.n; ++n)
      scatter_add(rhat + n * lifted, s.kg, s.in, lift_window(d), s.out, y + (n * d.k + g * s.kg) * s.out.size());
  }
}

void lift_backward_data(const ConvDims& d, const float* dy, const float* w, float* dx, bool accumulate, float* ws) {
  const Shape s = shape_of(d);
  float* khat = ws;
  float* rhat = ws + s.kg * s.taps * s.cg;
  const i64 lifted = s.kg * s.taps * s.in.size();
  for (i64 g = 0; g < d.groups; ++g) {
    lower_kernel(s, w + g * s.kg * s.rows, khat);
    for (i64 n = 0; n < d.n; ++n)
      lower(dy + (n * d.k + g * s.kg) * s.out.size(), s.kg, s.out, lift_window(d), s.in, rhat + n * lifted);
    for (i64 n = 0; n < d.n; ++n)
      sgemm(true, false, s.cg, s.in.size(), s.kg * s.taps, khat, s.cg, rhat + n * lifted, s.in.size(),
            accumulate ? 1.0f : 0.0f, dx + (n * d.c + g * s.cg) * s.in.size(), s.in.size());
  }
}

void lift_backward_filter(const ConvDims& d, const float* x, const float* dy, float* dw, float* dbias, float* ws) {
  const Shape s = shape_of(d);
  float* dkhat = ws;
  float* rhat = ws + s.kg * s.taps * s.cg;
  const i64 lifted = s.kg * s.taps * s.in.size();
  for (i64 g = 0; g < d.groups; ++g) {
    for (i64 n = 0; n < d.n; ++n)
      lower(dy + (n * d.k + g * s.kg) * s.out.size(), s.kg, s.out, lift_window(d), s.in, rhat + n * lifted);
    for (i64 n = 0; n < d.n; ++n)
      sgemm(false, true, s.kg * s.taps, s.cg, s.in.size(), rhat + n * lifted, s.in.size(),
            x + (n * d.c + g * s.cg) * s.in.size(), s.in.size(), n == 0 ? 0.0f : 1.0f, dkhat, s.cg);
    float* dwg = dw + g * s.kg * s.rows;
    for (i64 o = 0; o < s.kg; ++o)
      for (i64 c = 0; c < s.cg; ++c)
        for (i64 t = 0; t < s.taps; ++t) dwg[(o * s.cg + c) * s.taps + t] += dkhat[(o * s.taps + t) * s.cg + c];
  }
  add_bias_gradient(d, dy, dbias);
}

void check_runnable(const ConvDims& d, ConvOp op, ConvAlgo a) {
  UCPLAN_KERNEL_CHECK(d.n > 0, "empty micro-batch");
  UCPLAN_KERNEL_CHECK(d.groups > 0 && d.c % d.groups == 0 && d.k % d.groups == 0, "channels not divisible by groups");
  UCPLAN_KERNEL_CHECK(conv_supported(d, op, a), "convolution algorithm does not support these dimensions");
}

}  // namespace

std::int64_t ConvDims::ho() const { return (h + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
std::int64_t ConvDims::wo() const { return (w + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }

const char* conv_algo_name(ConvAlgo a) {
  switch (a) {
    case ConvAlgo::Direct:
      return "direct";
    case ConvAlgo::Gemm:
      return "gemm";
    case ConvAlgo::GemmLift:
      return "gemm_lift";
  }
  return "?";
}

bool parse_conv_algo(const std::string& name, ConvAlgo* out) {
  for (ConvAlgo a : conv_algorithms())
    if (name == conv_algo_name(a)) {
      *out = a;
      return true;
    }
  return false;
}

std::vector<ConvAlgo> conv_algorithms() { return {ConvAlgo::Direct, ConvAlgo::Gemm, ConvAlgo::GemmLift}; }

bool conv_supported(const ConvDims& d, ConvOp, ConvAlgo a) {
  // Type 3 computes every tap at every input pixel: a stride s would waste all but 1/s^2 of
  // that, and with one tap there is nothing to lift (it is gemm without lowering).
  if (a == ConvAlgo::GemmLift) return d.sh == 1 && d.sw == 1 && d.kh * d.kw > 1;
  return true;
}

std::int64_t conv_workspace_bytes(const ConvDims& d, ConvOp op, ConvAlgo a) {
  if (!conv_supported(d, op, a)) return 0;
  const Shape s = shape_of(d);
  const i64 floats = [&]() -> i64 {
    switch (a) {
      case ConvAlgo::Direct:
        return 0;
      case ConvAlgo::Gemm:
        return lowering_is_identity(d) ? 0 : d.n * s.rows * s.out.size();
      case ConvAlgo::GemmLift:
        return s.kg * s.taps * s.cg + d.n * s.kg * s.taps * s.in.size();
    }
    return 0;
  }();
  return floats * static_cast<i64>(sizeof(float));
}

void conv_forward(const ConvDims& d, ConvAlgo a, const float* x, const float* w, const float* bias, float* y,
                  void* workspace) {
  check_runnable(d, ConvOp::Forward, a);
  float* ws = static_cast<float*>(workspace);
  switch (a) {
    case ConvAlgo::Direct:
      return direct_forward(d, x, w, bias, y);
    case ConvAlgo::Gemm:
      return gemm_forward(d, x, w, bias, y, ws);
    case ConvAlgo::GemmLift:
      return lift_forward(d, x, w, bias, y, ws);
  }
}

void conv_backward_data(const ConvDims& d, ConvAlgo a, const float* dy, const float* w, float* dx, bool accumulate,
                        void* workspace) {
  check_runnable(d, ConvOp::BackwardData, a);
  float* ws = static_cast<float*>(workspace);
  switch (a) {
    case ConvAlgo::Direct:
      return direct_backward_data(d, dy, w, dx, accumulate);
    case ConvAlgo::Gemm:
      return gemm_backward_data(d, dy, w, dx, accumulate, ws);
    case ConvAlgo::GemmLift:
      return lift_backward_data(d, dy, w, dx, accumulate, ws);
  }
}

void conv_backward_filter(const ConvDims& d, ConvAlgo a, const float* x, const float* dy, float* dw, float* dbias,
                          void* workspace) {
  check_runnable(d, ConvOp::BackwardFilter, a);
  float* ws = static_cast<float*>(workspace);
  switch (a) {
    case ConvAlgo::Direct:
      return direct_backward_filter(d, x, dy, dw, dbias);
    case ConvAlgo::Gemm:
      return gemm_backward_filter(d, x, dy, dw, dbias, ws);
    case ConvAlgo::GemmLift:
      return lift_backward_filter(d, x, dy, dw, dbias, ws);
  }
}

}  // namespace ucplan::cpu
