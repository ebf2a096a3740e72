// The CPU reference kernels (executor/cpu/kernels.h, blas.h) against independent truth:
//  - naive float64 loops written here from the definitions, sharing nothing with the kernels;
//  - central finite differences of those loops, which check every naive backward (so the
//    kernels' backward passes are tied to their forward definitions, not to each other);
//  - values derived by hand, with the arithmetic beside them;
//  - the kernels' own contracts: the conv algorithms agree, micro-batching by pointer offset is
//    exact, accumulate adds and overwrite never reads, workspace sizes are exact, dropout masks
//    do not depend on how the batch is split, recomputed batch-norm equals the training forward.
#include <doctest/doctest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "executor/cpu/blas.h"
#include "planner/model/blas_env.h"
#include "executor/cpu/kernels.h"

extern char** environ;

namespace {

using namespace ucplan::cpu;
using i64 = std::int64_t;
using Floats = std::vector<float>;
using Doubles = std::vector<double>;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- helpers ----

Floats random_floats(i64 count, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Floats v(static_cast<std::size_t>(count));
  for (float& e : v) e = u(rng);
  return v;
}

// Distinct values at least 0.01 apart, shuffled: no ties and no kinks within a finite-difference
// step, for max pooling.
Floats distinct_floats(i64 count, unsigned seed) {
  Floats v(static_cast<std::size_t>(count));
  for (std::size_t e = 0; e < v.size(); ++e) v[e] = 0.01f * static_cast<float>(e) - 0.5f;
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  return v;
}

Doubles widen(const Floats& v) { return Doubles(v.begin(), v.end()); }

template <class A, class B>
Doubles plus(const A& a, const B& b) {
  Doubles s(a.size());
  for (std::size_t e = 0; e < a.size(); ++e) s[e] = static_cast<double>(a[e]) + static_cast<double>(b[e]);
  return s;
}

// Normwise error: the largest |got - want| relative to the largest |want| (at least 1), so a sum
// of many terms is judged at the scale of its terms, not of a result that happens to cancel.
template <class A, class B>
double error(const A& got, const B& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0, scale = 1;
  for (std::size_t e = 0; e < got.size(); ++e) {
    const double g = got[e], w = want[e];
    worst = std::max(worst, std::isnan(g) != std::isnan(w) ? INFINITY : std::fabs(g - w));
    scale = std::max(scale, std::fabs(w));
  }
  return worst / scale;
}

// Float kernels against float64 truth: sums of up to a few hundred products of values in [-1, 1]
// round to a few 1e-7 relative in float.
constexpr double kFloatTol = 2e-5;
// Finite differences in float64 with step 1e-5: truncation ~h^2 = 1e-10, rounding ~1e-16 / h.
constexpr double kFdTol = 1e-6;

template <class A, class B>
void expect_close(const A& got, const B& want, double tol, const std::string& what) {
  INFO(what);
  const double e = error(got, want);
  CHECK_MESSAGE(e <= tol, "normwise error " << e << " > " << tol);
}

// Central differences of L(v) = sum_e r[e] * f(v)[e] with respect to every element of v.
Doubles numeric_gradient(const std::function<Doubles(const Doubles&)>& f, Doubles v, const Doubles& r) {
  const double h = 1e-5;
  auto loss = [&](const Doubles& at) {
    const Doubles y = f(at);
    return std::inner_product(y.begin(), y.end(), r.begin(), 0.0);
  };
  Doubles g(v.size());
  for (std::size_t e = 0; e < v.size(); ++e) {
    const double saved = v[e];
    v[e] = saved + h;
    const double up = loss(v);
    v[e] = saved - h;
    const double down = loss(v);
    v[e] = saved;
    g[e] = (up - down) / (2 * h);
  }
  return g;
}

// Runs a backward kernel whose `accumulate` flag chooses between overwrite and add, twice: onto a
// NaN-filled gradient (overwrite must not read it) and onto random values (accumulate must add
// to them). Returns the fresh gradient.
Floats backward_result(i64 count, const std::function<void(float*, bool)>& run, const std::string& what) {
  Floats fresh(static_cast<std::size_t>(count), kNaN);
  run(fresh.data(), false);
  const Floats base = random_floats(count, 4242);
  Floats added = base;
  run(added.data(), true);
  expect_close(added, plus(base, fresh), kFloatTol, what + " (accumulate = true adds to dx)");
  return fresh;
}

// The same for gradients that always accumulate (dw, dbias, dgamma/dbeta): onto zeros, then onto
// random values.
Floats accumulated_result(i64 count, const std::function<void(float*)>& run, const std::string& what) {
  Floats fresh(static_cast<std::size_t>(count), 0.0f);
  run(fresh.data());
  const Floats base = random_floats(count, 2424);
  Floats added = base;
  run(added.data());
  expect_close(added, plus(base, fresh), kFloatTol, what + " (accumulates onto existing values)");
  return fresh;
}

// ---- naive convolution ----

i64 naive_out_size(i64 in, i64 kernel, i64 stride, i64 pad, i64 dilation) {
  const i64 reach = dilation * (kernel - 1) + 1;  // extent of the dilated kernel
  return (in + 2 * pad - reach) / stride + 1;
}

// Calls term(y index, x index, w index) for every product w * x in the convolution sum whose
// input position lies inside the image (padding contributes zeros).
template <class F>
void for_each_conv_term(const ConvDims& d, F term) {
  const i64 ho = naive_out_size(d.h, d.kh, d.sh, d.ph, d.dh), wo = naive_out_size(d.w, d.kw, d.sw, d.pw, d.dw);
  const i64 cg = d.c / d.groups, kg = d.k / d.groups;
  for (i64 n = 0; n < d.n; ++n)
    for (i64 k = 0; k < d.k; ++k)
      for (i64 oy = 0; oy < ho; ++oy)
        for (i64 ox = 0; ox < wo; ++ox)
          for (i64 c = 0; c < cg; ++c)
            for (i64 i = 0; i < d.kh; ++i)
              for (i64 j = 0; j < d.kw; ++j) {
                const i64 iy = oy * d.sh - d.ph + i * d.dh, ix = ox * d.sw - d.pw + j * d.dw;
                if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) continue;
                const i64 ci = (k / kg) * cg + c;  // input channel of group k / kg
                term(((n * d.k + k) * ho + oy) * wo + ox, ((n * d.c + ci) * d.h + iy) * d.w + ix,
                     ((k * cg + c) * d.kh + i) * d.kw + j);
              }
}

i64 conv_x_size(const ConvDims& d) { return d.n * d.c * d.h * d.w; }
i64 conv_y_size(const ConvDims& d) {
  return d.n * d.k * naive_out_size(d.h, d.kh, d.sh, d.ph, d.dh) * naive_out_size(d.w, d.kw, d.sw, d.pw, d.dw);
}
i64 conv_w_size(const ConvDims& d) { return d.k * (d.c / d.groups) * d.kh * d.kw; }

Doubles naive_conv_forward(const ConvDims& d, const Doubles& x, const Doubles& w, const Doubles& b) {
  Doubles y(static_cast<std::size_t>(conv_y_size(d)), 0.0);
  const i64 plane = conv_y_size(d) / (d.n * d.k);
  if (d.bias)
    for (std::size_t e = 0; e < y.size(); ++e)
      y[e] = b[(e / static_cast<std::size_t>(plane)) % static_cast<std::size_t>(d.k)];
  for_each_conv_term(d, [&](i64 yi, i64 xi, i64 wi) { y[yi] += w[wi] * x[xi]; });
  return y;
}

Doubles naive_conv_backward_data(const ConvDims& d, const Doubles& dy, const Doubles& w) {
  Doubles dx(static_cast<std::size_t>(conv_x_size(d)), 0.0);
  for_each_conv_term(d, [&](i64 yi, i64 xi, i64 wi) { dx[xi] += w[wi] * dy[yi]; });
  return dx;
}

// dw followed by dbias (k values, present only with bias).
Doubles naive_conv_backward_filter(const ConvDims& d, const Doubles& x, const Doubles& dy) {
  Doubles g(static_cast<std::size_t>(conv_w_size(d) + (d.bias ? d.k : 0)), 0.0);
  for_each_conv_term(d, [&](i64 yi, i64 xi, i64 wi) { g[wi] += x[xi] * dy[yi]; });
  const i64 plane = conv_y_size(d) / (d.n * d.k);
  if (d.bias)
    for (i64 e = 0; e < conv_y_size(d); ++e) g[conv_w_size(d) + (e / plane) % d.k] += dy[e];
  return g;
}

std::string describe(const ConvDims& d) {
  auto pair = [](i64 a, i64 b) { return std::to_string(a) + "x" + std::to_string(b); };
  return "n " + std::to_string(d.n) + ", c " + std::to_string(d.c) + ", input " + pair(d.h, d.w) + ", k " +
         std::to_string(d.k) + ", kernel " + pair(d.kh, d.kw) + ", stride " + pair(d.sh, d.sw) + ", pad " +
         pair(d.ph, d.pw) + ", dilation " + pair(d.dh, d.dw) + ", groups " + std::to_string(d.groups) +
         (d.bias ? ", bias" : "");
}

struct ConvCase {
  const char* name;
  ConvDims d;
};

// Groups (incl. depthwise), strides, padding, dilation, non-square kernels and inputs, 1x1, bias
// on and off, and the corners of the valid-range arithmetic.
const std::vector<ConvCase> kConvCases = {
    {"3x3, pad 1, bias", {.n = 2, .c = 3, .h = 6, .w = 7, .k = 4, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .bias = true}},
    {"3x3, stride 2, pad 1",
     {.n = 2, .c = 4, .h = 7, .w = 8, .k = 6, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}},
    {"groups 2, 3x2 kernel, 5x8 input, bias",
     {.n = 2, .c = 4, .h = 5, .w = 8, .k = 6, .kh = 3, .kw = 2, .ph = 1, .groups = 2, .bias = true}},
    {"depthwise 3x3", {.n = 2, .c = 4, .h = 6, .w = 5, .k = 4, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .groups = 4}},
    {"depthwise x2 (two outputs per channel), stride 2, bias",
     {.n = 2,
      .c = 3,
      .h = 7,
      .w = 7,
      .k = 6,
      .kh = 3,
      .kw = 3,
      .sh = 2,
      .sw = 2,
      .ph = 1,
      .pw = 1,
      .groups = 3,
      .bias = true}},
    {"dilation 2, bias",
     {.n = 2, .c = 3, .h = 7, .w = 7, .k = 2, .kh = 3, .kw = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 2, .bias = true}},
    {"1x1 (gemm needs no lowering), bias", {.n = 2, .c = 5, .h = 4, .w = 6, .k = 3, .bias = true}},
    {"1x1, stride 2", {.n = 2, .c = 4, .h = 5, .w = 6, .k = 4, .sh = 2, .sw = 2}},
    {"2x3 kernel, stride (1, 2), dilation (2, 1), pad (0, 1), groups 3",
     {.n = 2,
      .c = 6,
      .h = 6,
      .w = 7,
      .k = 3,
      .kh = 2,
      .kw = 3,
      .sh = 1,
      .sw = 2,
      .ph = 0,
      .pw = 1,
      .dh = 2,
      .dw = 1,
      .groups = 3}},
    // ho = 4 + 2*3 - 3 + 1 = 8: output rows 0 and 7 see only padding, so they are the bias.
    {"pad 3 with a 3x3 kernel: rows of padding only, bias",
     {.n = 1, .c = 2, .h = 4, .w = 5, .k = 2, .kh = 3, .kw = 3, .ph = 3, .pw = 3, .bias = true}},
    {"5x5 kernel on a 3x3 input, pad 2", {.n = 2, .c = 2, .h = 3, .w = 3, .k = 3, .kh = 5, .kw = 5, .ph = 2, .pw = 2}},
    // ho = (8 - 2) / 3 + 1 = 3 reads rows 0-1, 3-4, 6-7; rows 2 and 5 get no gradient.
    {"2x2 kernel, stride 3: pixels no window reads",
     {.n = 2, .c = 2, .h = 8, .w = 7, .k = 2, .kh = 2, .kw = 2, .sh = 3, .sw = 3}},
};

// A workspace of exactly conv_workspace_bytes, then a guard zone, all filled with a pattern no
// kernel computes (a NaN payload): after a run, every word of the workspace must have been
// written (the size is not over-reported) and none of the guard (it is not under-reported).
class GuardedWorkspace {
 public:
  explicit GuardedWorkspace(i64 bytes)
      : words_(static_cast<std::size_t>(bytes) / 4), buffer_(words_ + kGuardWords, kPattern) {
    REQUIRE(bytes % 4 == 0);
  }
  void* data() { return buffer_.data(); }
  void check(const std::string& what) const {
    INFO(what);
    std::size_t unwritten = 0, overrun = 0;
    for (std::size_t e = 0; e < words_; ++e) unwritten += buffer_[e] == kPattern;
    for (std::size_t e = words_; e < buffer_.size(); ++e) overrun += buffer_[e] != kPattern;
    CHECK_MESSAGE(unwritten == 0, unwritten << " of " << words_ << " workspace words never written");
    CHECK_MESSAGE(overrun == 0, overrun << " words written past the reported workspace");
  }

 private:
  static constexpr std::uint32_t kPattern = 0x7FBADBADu;
  static constexpr std::size_t kGuardWords = 1024;
  std::size_t words_;
  std::vector<std::uint32_t> buffer_;
};

std::string label(const ConvCase& c, ConvAlgo a, const char* op) {
  return std::string(c.name) + " / " + conv_algo_name(a) + " / " + op;
}

// The three ops of one algorithm on one case, each checked against its workspace guard.
struct ConvResult {
  Floats y, dx, dw_db;
};

ConvResult run_conv(const ConvCase& cc, ConvAlgo a, const Floats& x, const Floats& w, const Floats& b,
                    const Floats& dy) {
  const ConvDims& d = cc.d;
  ConvResult r;
  {
    GuardedWorkspace ws(conv_workspace_bytes(d, ConvOp::Forward, a));
    r.y.assign(static_cast<std::size_t>(conv_y_size(d)), kNaN);
    conv_forward(d, a, x.data(), w.data(), d.bias ? b.data() : nullptr, r.y.data(), ws.data());
    ws.check(label(cc, a, "forward workspace"));
  }
  r.dx = backward_result(
      conv_x_size(d),
      [&](float* dx, bool accumulate) {
        GuardedWorkspace ws(conv_workspace_bytes(d, ConvOp::BackwardData, a));
        conv_backward_data(d, a, dy.data(), w.data(), dx, accumulate, ws.data());
        ws.check(label(cc, a, "backward-data workspace"));
      },
      label(cc, a, "backward data"));
  r.dw_db = accumulated_result(
      conv_w_size(d) + (d.bias ? d.k : 0),
      [&](float* g) {
        GuardedWorkspace ws(conv_workspace_bytes(d, ConvOp::BackwardFilter, a));
        conv_backward_filter(d, a, x.data(), dy.data(), g, d.bias ? g + conv_w_size(d) : nullptr, ws.data());
        ws.check(label(cc, a, "backward-filter workspace"));
      },
      label(cc, a, "backward filter"));
  return r;
}

std::vector<ConvAlgo> supported_algorithms(const ConvDims& d) {
  std::vector<ConvAlgo> out;
  for (ConvAlgo a : conv_algorithms()) {
    const bool fwd = conv_supported(d, ConvOp::Forward, a);
    // One answer for the three ops: a profile that could run forward but not backward would
    // leave the planner a configuration it cannot complete.
    CHECK(conv_supported(d, ConvOp::BackwardData, a) == fwd);
    CHECK(conv_supported(d, ConvOp::BackwardFilter, a) == fwd);
    if (fwd) out.push_back(a);
  }
  return out;
}

// ---- naive versions of the other layers ----

i64 pool_out_size(i64 in, i64 kernel, i64 stride, i64 pad, bool ceil_mode) {
  const i64 span = in + 2 * pad - kernel;
  i64 out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;  // PyTorch: the last window starts inside
  return out;
}

PoolDims pool_dims(i64 n, i64 c, i64 h, i64 w, i64 kh, i64 kw, i64 sh, i64 sw, i64 ph, i64 pw, bool max,
                   bool include_pad, bool ceil_mode) {
  PoolDims d;
  d.n = n, d.c = c, d.h = h, d.w = w, d.kh = kh, d.kw = kw, d.sh = sh, d.sw = sw, d.ph = ph, d.pw = pw;
  d.ho = pool_out_size(h, kh, sh, ph, ceil_mode);
  d.wo = pool_out_size(w, kw, sw, pw, ceil_mode);
  d.max = max;
  d.count_include_pad = include_pad;
  return d;
}

// Calls visit(y index, x index or -1 for a padding position inside the padded input) for every
// position of every window; positions past the padded input (ceil mode) are not visited.
template <class F>
void for_each_pool_position(const PoolDims& d, F visit) {
  for (i64 nc = 0; nc < d.n * d.c; ++nc)
    for (i64 oy = 0; oy < d.ho; ++oy)
      for (i64 ox = 0; ox < d.wo; ++ox)
        for (i64 i = 0; i < d.kh; ++i)
          for (i64 j = 0; j < d.kw; ++j) {
            const i64 iy = oy * d.sh - d.ph + i, ix = ox * d.sw - d.pw + j;
            if (iy >= d.h + d.ph || ix >= d.w + d.pw) continue;
            const bool inside = iy >= 0 && iy < d.h && ix >= 0 && ix < d.w;
            visit((nc * d.ho + oy) * d.wo + ox, inside ? (nc * d.h + iy) * d.w + ix : -1);
          }
}

// Average pooling divisor per output: padding positions count only with count_include_pad.
std::vector<i64> naive_pool_divisors(const PoolDims& d) {
  std::vector<i64> count(static_cast<std::size_t>(d.n * d.c * d.ho * d.wo), 0);
  for_each_pool_position(d, [&](i64 yi, i64 xi) { count[yi] += xi >= 0 || d.count_include_pad; });
  return count;
}

// For max pooling, the x index each output takes (first maximum in scan order).
std::vector<i64> naive_pool_argmax(const PoolDims& d, const Doubles& x) {
  std::vector<i64> at(static_cast<std::size_t>(d.n * d.c * d.ho * d.wo), -1);
  for_each_pool_position(d, [&](i64 yi, i64 xi) {
    if (xi >= 0 && (at[yi] < 0 || x[xi] > x[at[yi]])) at[yi] = xi;
  });
  return at;
}

Doubles naive_pool_forward(const PoolDims& d, const Doubles& x) {
  Doubles y(static_cast<std::size_t>(d.n * d.c * d.ho * d.wo), 0.0);
  if (d.max) {
    const std::vector<i64> at = naive_pool_argmax(d, x);
    for (std::size_t e = 0; e < y.size(); ++e) y[e] = x[at[e]];
  } else {
    const std::vector<i64> div = naive_pool_divisors(d);
    for_each_pool_position(d, [&](i64 yi, i64 xi) {
      if (xi >= 0) y[yi] += x[xi] / static_cast<double>(div[yi]);
    });
  }
  return y;
}

Doubles naive_pool_backward(const PoolDims& d, const Doubles& x, const Doubles& dy) {
  Doubles dx(static_cast<std::size_t>(d.n * d.c * d.h * d.w), 0.0);
  if (d.max) {
    const std::vector<i64> at = naive_pool_argmax(d, x);
    for (std::size_t e = 0; e < dy.size(); ++e) dx[at[e]] += dy[e];
  } else {
    const std::vector<i64> div = naive_pool_divisors(d);
    for_each_pool_position(d, [&](i64 yi, i64 xi) {
      if (xi >= 0) dx[xi] += dy[yi] / static_cast<double>(div[yi]);
    });
  }
  return dx;
}

// Batch norm over (n, h, w) per channel, biased variance.
struct NaiveBn {
  Doubles y, mean, inv_std;
};

NaiveBn naive_bn_forward(const BnDims& d, const Doubles& x, const Doubles& gamma, const Doubles& beta) {
  const i64 plane = d.h * d.w;
  const double m = static_cast<double>(d.n * plane);
  NaiveBn r{Doubles(x.size()), Doubles(static_cast<std::size_t>(d.c)), Doubles(static_cast<std::size_t>(d.c))};
  for (i64 c = 0; c < d.c; ++c) {
    double s = 0, sq = 0;
    for (i64 n = 0; n < d.n; ++n)
      for (i64 p = 0; p < plane; ++p) s += x[(n * d.c + c) * plane + p];
    const double mean = s / m;
    for (i64 n = 0; n < d.n; ++n)
      for (i64 p = 0; p < plane; ++p) sq += std::pow(x[(n * d.c + c) * plane + p] - mean, 2);
    r.mean[c] = mean;
    r.inv_std[c] = 1 / std::sqrt(sq / m + d.eps);
    for (i64 n = 0; n < d.n; ++n)
      for (i64 p = 0; p < plane; ++p) {
        const i64 e = (n * d.c + c) * plane + p;
        r.y[e] = gamma[c] * (x[e] - mean) * r.inv_std[c] + beta[c];
      }
  }
  return r;
}

// dx, then dgamma (c values), then dbeta (c values).
Doubles naive_bn_backward(const BnDims& d, const Doubles& x, const Doubles& gamma, const Doubles& dy) {
  const i64 plane = d.h * d.w;
  const double m = static_cast<double>(d.n * plane);
  const NaiveBn f = naive_bn_forward(d, x, gamma, Doubles(static_cast<std::size_t>(d.c), 0.0));
  Doubles g(x.size() + 2 * static_cast<std::size_t>(d.c), 0.0);
  for (i64 c = 0; c < d.c; ++c) {
    double dgamma = 0, dbeta = 0;
    for (i64 n = 0; n < d.n; ++n)
      for (i64 p = 0; p < plane; ++p) {
        const i64 e = (n * d.c + c) * plane + p;
        dgamma += dy[e] * (x[e] - f.mean[c]) * f.inv_std[c];
        dbeta += dy[e];
      }
    for (i64 n = 0; n < d.n; ++n)
      for (i64 p = 0; p < plane; ++p) {
        const i64 e = (n * d.c + c) * plane + p;
        const double xhat = (x[e] - f.mean[c]) * f.inv_std[c];
        g[e] = gamma[c] * f.inv_std[c] / m * (m * dy[e] - dbeta - xhat * dgamma);
      }
    g[x.size() + c] = dgamma;
    g[x.size() + d.c + c] = dbeta;
  }
  return g;
}

// PyTorch LocalResponseNorm: channel c sums x^2 over [c - size/2, c + (size-1)/2].
bool lrn_in_window(const LrnDims& d, i64 c, i64 other) {
  return other >= c - d.size / 2 && other <= c + (d.size - 1) / 2;
}

double naive_lrn_scale(const LrnDims& d, const Doubles& x, i64 n, i64 c, i64 p) {
  const i64 plane = d.h * d.w;
  double s = 0;
  for (i64 o = 0; o < d.c; ++o)
    if (lrn_in_window(d, c, o)) s += std::pow(x[(n * d.c + o) * plane + p], 2);
  return d.k + d.alpha / static_cast<double>(d.size) * s;
}

Doubles naive_lrn_forward(const LrnDims& d, const Doubles& x) {
  const i64 plane = d.h * d.w;
  Doubles y(x.size());
  for (i64 n = 0; n < d.n; ++n)
    for (i64 c = 0; c < d.c; ++c)
      for (i64 p = 0; p < plane; ++p)
        y[(n * d.c + c) * plane + p] = x[(n * d.c + c) * plane + p] * std::pow(naive_lrn_scale(d, x, n, c, p), -d.beta);
  return y;
}

// dx[o] = sum over c of dy[c] * dy_c/dx_o, with
// dy_c/dx_o = [c == o] scale_c^-beta - beta * x_c * scale_c^(-beta-1) * alpha/size * 2 x_o [o in window(c)].
Doubles naive_lrn_backward(const LrnDims& d, const Doubles& x, const Doubles& dy) {
  const i64 plane = d.h * d.w;
  Doubles dx(x.size(), 0.0);
  for (i64 n = 0; n < d.n; ++n)
    for (i64 p = 0; p < plane; ++p)
      for (i64 c = 0; c < d.c; ++c) {
        const double s = naive_lrn_scale(d, x, n, c, p);
        const i64 ec = (n * d.c + c) * plane + p;
        for (i64 o = 0; o < d.c; ++o) {
          const i64 eo = (n * d.c + o) * plane + p;
          double partial = o == c ? std::pow(s, -d.beta) : 0.0;
          if (lrn_in_window(d, c, o))
            partial -= d.beta * x[ec] * std::pow(s, -d.beta - 1) * d.alpha / static_cast<double>(d.size) * 2 * x[eo];
          dx[eo] += dy[ec] * partial;
        }
      }
  return dx;
}

Doubles naive_fc_forward(const FcDims& d, const Doubles& x, const Doubles& w, const Doubles& b) {
  Doubles y(static_cast<std::size_t>(d.n * d.out));
  for (i64 n = 0; n < d.n; ++n)
    for (i64 o = 0; o < d.out; ++o) {
      double s = d.bias ? b[o] : 0.0;
      for (i64 i = 0; i < d.in; ++i) s += x[n * d.in + i] * w[o * d.in + i];
      y[n * d.out + o] = s;
    }
  return y;
}

// dx, then dw, then dbias.
Doubles naive_fc_backward(const FcDims& d, const Doubles& x, const Doubles& w, const Doubles& dy) {
  const i64 nx = d.n * d.in, nw = d.out * d.in;
  Doubles g(static_cast<std::size_t>(nx + nw + d.out), 0.0);
  for (i64 n = 0; n < d.n; ++n)
    for (i64 o = 0; o < d.out; ++o) {
      for (i64 i = 0; i < d.in; ++i) {
        g[n * d.in + i] += dy[n * d.out + o] * w[o * d.in + i];
        g[nx + o * d.in + i] += dy[n * d.out + o] * x[n * d.in + i];
      }
      if (d.bias) g[nx + nw + o] += dy[n * d.out + o];
    }
  return g;
}

// Softmax probabilities of each row.
Doubles naive_softmax(i64 n, i64 k, const Doubles& x) {
  Doubles p(x.size());
  for (i64 s = 0; s < n; ++s) {
    double total = 0;
    for (i64 j = 0; j < k; ++j) total += std::exp(x[s * k + j]);
    for (i64 j = 0; j < k; ++j) p[s * k + j] = std::exp(x[s * k + j]) / total;
  }
  return p;
}

Doubles slice(const Doubles& v, std::size_t from, std::size_t count) {
  return Doubles(v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(from + count));
}

// ============================================================================================
// convolution

TEST_CASE("conv: output sizes and algorithm names") {
  // ResNet's stem: (224 + 2*3 - 7) / 2 + 1 = 112.
  CHECK(ConvDims{.h = 224, .w = 224, .kh = 7, .kw = 7, .sh = 2, .sw = 2, .ph = 3, .pw = 3}.ho() == 112);
  // CIFAR ResNet 3x3 pad 1: (32 + 2 - 3) / 1 + 1 = 32; stride 2: (32 + 2 - 3) / 2 + 1 = 16.
  CHECK(ConvDims{.h = 32, .w = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1}.wo() == 32);
  CHECK(ConvDims{.h = 32, .w = 32, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}.ho() == 16);
  // Dilation 2 stretches a 3x3 kernel to 5x5: (7 + 2*2 - 5) / 1 + 1 = 7; non-square 2x3: w = (9 - 3) / 2 + 1 = 4.
  CHECK(ConvDims{.h = 7, .kh = 3, .ph = 2, .dh = 2}.ho() == 7);
  CHECK(ConvDims{.w = 9, .kh = 2, .kw = 3, .sw = 2}.wo() == 4);

  std::vector<std::string> names;
  for (ConvAlgo a : conv_algorithms()) {
    names.emplace_back(conv_algo_name(a));
    ConvAlgo parsed = ConvAlgo::Direct;
    CHECK(parse_conv_algo(conv_algo_name(a), &parsed));
    CHECK(parsed == a);
  }
  CHECK(names == std::vector<std::string>{"direct", "gemm", "gemm_lift"});
  ConvAlgo untouched = ConvAlgo::Gemm;
  CHECK_FALSE(parse_conv_algo("winograd", &untouched));
  CHECK(untouched == ConvAlgo::Gemm);
}

TEST_CASE("conv: a hand-computed convolution") {
  // x = 1 2 3    w = 1 0    one channel, 2x2 kernel, no padding: y is 2x2,
  //     4 5 6        0 -1   y[oy][ox] = x[oy][ox] - x[oy+1][ox+1] = -4 everywhere, + bias 0.5.
  //     7 8 9
  const ConvDims d{.h = 3, .w = 3, .kh = 2, .kw = 2, .bias = true};
  const Floats x = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w = {1, 0, 0, -1}, b = {0.5f};
  for (ConvAlgo a : supported_algorithms(d)) {
    INFO(conv_algo_name(a));
    GuardedWorkspace ws(conv_workspace_bytes(d, ConvOp::Forward, a));
    Floats y(4, kNaN);
    conv_forward(d, a, x.data(), w.data(), b.data(), y.data(), ws.data());
    CHECK(y == Floats{-3.5f, -3.5f, -3.5f, -3.5f});
    // dy = 1 everywhere: dx[p] = sum of w over the taps that read p: +1 at the 2x2 top-left
    // block (tap (0,0)), -1 at the bottom-right block (tap (1,1)); the centre gets both = 0.
    const Floats dy = {1, 1, 1, 1};
    Floats dx(9, kNaN);
    conv_backward_data(d, a, dy.data(), w.data(), dx.data(), false, ws.data());
    CHECK(dx == Floats{1, 1, 0, 1, 0, -1, 0, -1, -1});
    // dw[i][j] = sum of the 2x2 block of x at (i, j): 1+2+4+5 = 12, 2+3+5+6 = 16, 4+5+7+8 = 24,
    // 5+6+8+9 = 28; dbias = sum dy = 4.
    Floats dw(4, 0.0f), db(1, 0.0f);
    conv_backward_filter(d, a, x.data(), dy.data(), dw.data(), db.data(), ws.data());
    CHECK(dw == Floats{12, 16, 24, 28});
    CHECK(db == Floats{4});
  }
}

TEST_CASE("conv: the naive backward passes match finite differences of the naive forward") {
  for (const ConvCase& cc : kConvCases) {
    const ConvDims& d = cc.d;
    INFO(cc.name);
    const Doubles x = widen(random_floats(conv_x_size(d), 1)), w = widen(random_floats(conv_w_size(d), 2));
    const Doubles b = widen(random_floats(d.k, 3)), r = widen(random_floats(conv_y_size(d), 4));
    const Doubles dx = naive_conv_backward_data(d, r, w);
    const Doubles dw_db = naive_conv_backward_filter(d, x, r);
    expect_close(dx, numeric_gradient([&](const Doubles& v) { return naive_conv_forward(d, v, w, b); }, x, r), kFdTol,
                 "dx");
    expect_close(slice(dw_db, 0, w.size()),
                 numeric_gradient([&](const Doubles& v) { return naive_conv_forward(d, x, v, b); }, w, r), kFdTol,
                 "dw");
    if (d.bias)
      expect_close(slice(dw_db, w.size(), b.size()),
                   numeric_gradient([&](const Doubles& v) { return naive_conv_forward(d, x, w, v); }, b, r), kFdTol,
                   "dbias");
  }
}

// Every supported algorithm's three ops against the naive convolution, and against each other.
void check_algorithms(const ConvCase& cc, unsigned seed) {
  const ConvDims& d = cc.d;
  INFO(cc.name);
  const Floats x = random_floats(conv_x_size(d), seed), w = random_floats(conv_w_size(d), seed + 1);
  const Floats b = random_floats(d.k, seed + 2), dy = random_floats(conv_y_size(d), seed + 3);
  const Doubles want_y = naive_conv_forward(d, widen(x), widen(w), widen(b));
  const Doubles want_dx = naive_conv_backward_data(d, widen(dy), widen(w));
  const Doubles want_dw = naive_conv_backward_filter(d, widen(x), widen(dy));

  const std::vector<ConvAlgo> algos = supported_algorithms(d);
  std::vector<ConvResult> results;
  for (ConvAlgo a : algos) {
    results.push_back(run_conv(cc, a, x, w, b, dy));
    expect_close(results.back().y, want_y, kFloatTol, label(cc, a, "forward"));
    expect_close(results.back().dx, want_dx, kFloatTol, label(cc, a, "backward data"));
    expect_close(results.back().dw_db, want_dw, kFloatTol, label(cc, a, "backward filter"));
  }
  for (std::size_t i = 0; i < algos.size(); ++i)
    for (std::size_t j = i + 1; j < algos.size(); ++j) {
      const std::string pair = std::string(conv_algo_name(algos[i])) + " vs " + conv_algo_name(algos[j]);
      expect_close(results[i].y, results[j].y, kFloatTol, pair + " forward");
      expect_close(results[i].dx, results[j].dx, kFloatTol, pair + " backward data");
      expect_close(results[i].dw_db, results[j].dw_db, kFloatTol, pair + " backward filter");
    }
}

TEST_CASE("conv: every algorithm matches the naive convolution and every other algorithm") {
  for (const ConvCase& cc : kConvCases) check_algorithms(cc, 11);
}

TEST_CASE("conv: network-sized layers (longer rows, deeper sgemm)") {
  // Too big for finite differences, but where the sgemm blocks and the vectorised row loops
  // run at length: ResNet-20's middle stage (32 channels, 16x16), its stride-2 entry, and a
  // MobileNet-style depthwise + pointwise pair.
  const std::vector<ConvCase> cases = {
      {"ResNet-20 32 -> 32, 3x3 pad 1, 16x16",
       {.n = 2, .c = 32, .h = 16, .w = 16, .k = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1}},
      {"ResNet-20 16 -> 32, 3x3 stride 2 pad 1, 32x32",
       {.n = 2, .c = 16, .h = 32, .w = 32, .k = 32, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1}},
      {"depthwise 32, 3x3 pad 1, 24x24",
       {.n = 2, .c = 32, .h = 24, .w = 24, .k = 32, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .groups = 32}},
      {"pointwise 32 -> 64, 24x24, bias", {.n = 2, .c = 32, .h = 24, .w = 24, .k = 64, .bias = true}},
  };
  for (const ConvCase& cc : cases) check_algorithms(cc, 17);
}

TEST_CASE("conv: random shapes, every algorithm against the naive convolution") {
  // Shapes drawn from a fixed seed: up to 3 groups of up to 4 channels in and out, kernels up to
  // 4x4, strides up to 3, dilation up to 2, padding up to the dilated kernel's reach, inputs
  // just big enough for one output up to 9x9.
  std::mt19937 rng(2024);
  auto pick = [&](i64 lo, i64 hi) { return std::uniform_int_distribution<i64>(lo, hi)(rng); };
  for (int t = 0; t < 150; ++t) {
    ConvDims d;
    d.groups = pick(1, 3);
    d.c = d.groups * pick(1, 4);
    d.k = d.groups * pick(1, 4);
    d.n = pick(1, 3);
    d.kh = pick(1, 4), d.kw = pick(1, 4);
    d.sh = pick(1, 3), d.sw = pick(1, 3);
    d.dh = pick(1, 2), d.dw = pick(1, 2);
    d.ph = pick(0, d.dh * (d.kh - 1)), d.pw = pick(0, d.dw * (d.kw - 1));
    d.h = pick(std::max<i64>(1, d.dh * (d.kh - 1) + 1 - 2 * d.ph), 9);
    d.w = pick(std::max<i64>(1, d.dw * (d.kw - 1) + 1 - 2 * d.pw), 9);
    d.bias = pick(0, 1) == 1;
    const std::string name = "random shape " + std::to_string(t) + ": " + describe(d);
    const ConvCase cc{name.c_str(), d};
    REQUIRE(d.ho() >= 1);
    REQUIRE(d.wo() >= 1);
    check_algorithms(cc, 300 + 4 * static_cast<unsigned>(t));
  }
}

TEST_CASE("conv: which algorithms support which shapes") {
  const ConvDims resnet{.n = 64, .c = 16, .h = 32, .w = 32, .k = 16, .kh = 3, .kw = 3, .ph = 1, .pw = 1};
  ConvDims strided = resnet;
  strided.sh = strided.sw = 2;
  const ConvDims pointwise{.n = 64, .c = 16, .h = 32, .w = 32, .k = 32};
  ConvDims dilated = resnet;
  dilated.dh = dilated.dw = 2;
  for (ConvOp op : {ConvOp::Forward, ConvOp::BackwardData, ConvOp::BackwardFilter}) {
    for (const ConvDims& d : {resnet, strided, pointwise, dilated}) {
      CHECK(conv_supported(d, op, ConvAlgo::Direct));
      CHECK(conv_supported(d, op, ConvAlgo::Gemm));
    }
    CHECK(conv_supported(resnet, op, ConvAlgo::GemmLift));
    CHECK(conv_supported(dilated, op, ConvAlgo::GemmLift));  // the lifting just reads further away
    CHECK_FALSE(conv_supported(strided, op, ConvAlgo::GemmLift));
    CHECK_FALSE(conv_supported(pointwise, op, ConvAlgo::GemmLift));
  }
}

TEST_CASE("conv: workspace sizes") {
  // ResNet-20 CIFAR layer, micro-batch 64, 16 -> 16 channels, 3x3, pad 1, 32x32.
  const ConvDims d{.n = 64, .c = 16, .h = 32, .w = 32, .k = 16, .kh = 3, .kw = 3, .ph = 1, .pw = 1};
  for (ConvOp op : {ConvOp::Forward, ConvOp::BackwardData, ConvOp::BackwardFilter}) {
    CHECK(conv_workspace_bytes(d, op, ConvAlgo::Direct) == 0);
    // gemm: the lowered micro-batch, n * (c * 3 * 3) rows x (32 * 32) outputs:
    // 64 * 144 * 1024 * 4 bytes = 37,748,736.
    CHECK(conv_workspace_bytes(d, op, ConvAlgo::Gemm) == 37'748'736);
    // gemm_lift: K^ (k * 9 rows x c) + n R^ (k * 9 rows x 32 * 32 input pixels):
    // (16 * 9 * 16 + 64 * 144 * 1024) * 4 = (2,304 + 9,437,184) * 4 = 37,757,952.
    CHECK(conv_workspace_bytes(d, op, ConvAlgo::GemmLift) == 37'757'952);
    // Halving the micro-batch halves the lowered matrix: 32 * 144 * 1024 * 4 = 18,874,368.
    ConvDims half = d;
    half.n = 32;
    CHECK(conv_workspace_bytes(half, op, ConvAlgo::Gemm) == 18'874'368);
    CHECK(conv_workspace_bytes(half, op, ConvAlgo::GemmLift) == (2'304 + 32 * 144 * 1024) * 4);
    // Depthwise, groups 16: one group's matrices at a time (rows 1 * 9, K^ 1 * 9 x 1):
    // gemm 64 * 9 * 1024 * 4 = 2,359,296; gemm_lift (9 + 64 * 9 * 1024) * 4 = 2,359,332.
    ConvDims depthwise = d;
    depthwise.groups = 16;
    CHECK(conv_workspace_bytes(depthwise, op, ConvAlgo::Gemm) == 2'359'296);
    CHECK(conv_workspace_bytes(depthwise, op, ConvAlgo::GemmLift) == 2'359'332);
    // A 1x1 stride-1 unpadded convolution multiplies the input in place.
    const ConvDims pointwise{.n = 64, .c = 16, .h = 32, .w = 32, .k = 32};
    CHECK(conv_workspace_bytes(pointwise, op, ConvAlgo::Gemm) == 0);
  }
}

TEST_CASE("conv: micro-batches by pointer offset equal the undivided batch") {
  // Shapes with groups, stride, padding, a non-square kernel and bias; n = 5 split as 2+3 and 1+1+3.
  const std::vector<ConvCase> cases = {
      {"groups 2, stride 2, 3x2 kernel, bias",
       {.n = 5,
        .c = 4,
        .h = 7,
        .w = 6,
        .k = 6,
        .kh = 3,
        .kw = 2,
        .sh = 2,
        .sw = 2,
        .ph = 1,
        .pw = 1,
        .groups = 2,
        .bias = true}},
      {"3x3, pad 1, dilation 2",
       {.n = 5, .c = 3, .h = 6, .w = 6, .k = 4, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .dh = 2, .dw = 2}},
      {"1x1", {.n = 5, .c = 3, .h = 4, .w = 4, .k = 5}},
  };
  const std::vector<std::vector<i64>> splits = {{2, 3}, {1, 1, 3}};
  for (const ConvCase& cc : cases) {
    const ConvDims& whole = cc.d;
    const i64 x_sample = conv_x_size(whole) / whole.n, y_sample = conv_y_size(whole) / whole.n;
    const Floats x = random_floats(conv_x_size(whole), 21), w = random_floats(conv_w_size(whole), 22);
    const Floats b = random_floats(whole.k, 23), dy = random_floats(conv_y_size(whole), 24);
    for (ConvAlgo a : supported_algorithms(whole)) {
      const ConvResult undivided = run_conv(cc, a, x, w, b, dy);
      for (const std::vector<i64>& pieces : splits) {
        INFO(label(cc, a, "micro-batches"), " split into ", pieces.size(), " pieces");
        Floats y(undivided.y.size(), kNaN), dx(undivided.dx.size(), kNaN), dw_db(undivided.dw_db.size(), 0.0f);
        i64 first = 0;
        for (i64 m : pieces) {
          ConvDims d = whole;
          d.n = m;
          // One workspace sized for the piece, reused by its three ops.
          i64 bytes = 0;
          for (ConvOp op : {ConvOp::Forward, ConvOp::BackwardData, ConvOp::BackwardFilter})
            bytes = std::max(bytes, conv_workspace_bytes(d, op, a));
          std::vector<float> ws(static_cast<std::size_t>(bytes) / 4 + 1);
          conv_forward(d, a, x.data() + first * x_sample, w.data(), b.data(), y.data() + first * y_sample, ws.data());
          conv_backward_data(d, a, dy.data() + first * y_sample, w.data(), dx.data() + first * x_sample, false,
                             ws.data());
          conv_backward_filter(d, a, x.data() + first * x_sample, dy.data() + first * y_sample, dw_db.data(),
                               d.bias ? dw_db.data() + conv_w_size(d) : nullptr, ws.data());
          first += m;
        }
        expect_close(y, undivided.y, kFloatTol, "forward");
        expect_close(dx, undivided.dx, kFloatTol, "backward data");
        expect_close(dw_db, undivided.dw_db, kFloatTol, "backward filter accumulated over the pieces");
      }
    }
  }
}

// ============================================================================================
// pooling

TEST_CASE("pool: hand-computed average pooling, with and without the padding in the count") {
  // x = 1 2 3, 2x2 windows, stride 2, pad 1: ho = wo = (3 + 2 - 2) / 2 + 1 = 2. Windows (rows,
  //     4 5 6  cols) and their input values: (-1..0, -1..0) = {1}, (-1..0, 1..2) = {2, 3},
  //     7 8 9  (1..2, -1..0) = {4, 7}, (1..2, 1..2) = {5, 6, 8, 9}.
  const Floats x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  PoolDims d = pool_dims(1, 1, 3, 3, 2, 2, 2, 2, 1, 1, false, true, false);
  REQUIRE(d.ho == 2);
  Floats y(4, kNaN);
  pool_forward(d, x.data(), y.data());
  CHECK(y == Floats{1 / 4.0f, 5 / 4.0f, 11 / 4.0f, 28 / 4.0f});  // every window counts 4
  d.count_include_pad = false;
  pool_forward(d, x.data(), y.data());
  CHECK(y == Floats{1 / 1.0f, 5 / 2.0f, 11 / 2.0f, 28 / 4.0f});  // only the pixels inside
  // Backward without padding in the count: window (0, 1) = {2, 3} hands each dy / 2 = 1; the
  // centre 5 is only in window (1, 1), dy / 4 = 1; x[0] gets 4 from its own window of one.
  const Floats dy = {4, 2, 2, 4};
  Floats dx(9, kNaN);
  pool_backward(d, x.data(), y.data(), dy.data(), dx.data(), false);
  CHECK(dx == Floats{4, 1, 1, 1, 1, 1, 1, 1, 1});
}

TEST_CASE("pool: ceil mode clips the average window to the padded input, as PyTorch does") {
  // One row x = [1 2 3 4], windows of 3, stride 2, pad 1. Ceil mode: wo = ceil((4 + 2 - 3) / 2) + 1 = 3.
  // Window 0: cols -1..1, all inside the padded row [-1, 5): {1, 2}, divisor 3 (or 2 inside).
  // Window 1: cols 1..3: {2, 3, 4} / 3.
  // Window 2: cols 3..5, clipped to the padded row: cols 3..4, divisor 2 (not 3); inside: {4} / 1.
  const Floats x = {1, 2, 3, 4};
  PoolDims d = pool_dims(1, 1, 1, 4, 1, 3, 1, 2, 0, 1, false, true, true);
  REQUIRE(d.wo == 3);
  Floats y(3, kNaN);
  pool_forward(d, x.data(), y.data());
  CHECK(y == Floats{3 / 3.0f, 9 / 3.0f, 4 / 2.0f});
  d.count_include_pad = false;
  pool_forward(d, x.data(), y.data());
  CHECK(y == Floats{3 / 2.0f, 9 / 3.0f, 4 / 1.0f});
}

TEST_CASE("pool: max pooling sends the gradient to the first maximum") {
  // A tie: x = 5 5 in one 2x2 window; y = 5 and the gradient goes to the first 5 (index 0).
  //            1 2
  {
    const PoolDims d = pool_dims(1, 1, 2, 2, 2, 2, 2, 2, 0, 0, true, true, false);
    const Floats x = {5, 5, 1, 2}, dy = {3};
    Floats y(1), dx(4, kNaN);
    pool_forward(d, x.data(), y.data());
    CHECK(y == Floats{5});
    pool_backward(d, x.data(), y.data(), dy.data(), dx.data(), false);
    CHECK(dx == Floats{3, 0, 0, 0});
  }
  // Overlapping windows: x = [1 3 2], windows of 2, stride 1: y = [3, 3]; both gradients land on
  // the 3: dx = [0, 1 + 10, 0].
  {
    const PoolDims d = pool_dims(1, 1, 1, 3, 1, 2, 1, 1, 0, 0, true, true, false);
    const Floats x = {1, 3, 2}, dy = {1, 10};
    Floats y(2), dx(3, kNaN);
    pool_forward(d, x.data(), y.data());
    CHECK(y == Floats{3, 3});
    pool_backward(d, x.data(), y.data(), dy.data(), dx.data(), false);
    CHECK(dx == Floats{0, 11, 0});
  }
}

TEST_CASE("pool: max and average against the naive version and finite differences") {
  struct Case {
    const char* name;
    PoolDims d;
  };
  const std::vector<Case> cases = {
      {"max 3x3 stride 2 pad 1 (ceil)", pool_dims(2, 3, 7, 8, 3, 3, 2, 2, 1, 1, true, true, true)},
      {"max 2x2 stride 2", pool_dims(2, 2, 6, 6, 2, 2, 2, 2, 0, 0, true, true, false)},
      {"max 2x3 stride (1, 2) pad (1, 1)", pool_dims(1, 2, 5, 7, 2, 3, 1, 2, 1, 1, true, true, false)},
      {"avg 3x3 stride 1 pad 1, padding counted", pool_dims(2, 2, 5, 6, 3, 3, 1, 1, 1, 1, false, true, false)},
      {"avg 3x3 stride 2 pad 1 (ceil), padding not counted",
       pool_dims(2, 2, 6, 7, 3, 3, 2, 2, 1, 1, false, false, true)},
      {"avg 2x3 stride (2, 1) pad (0, 1), padding counted (ceil)",
       pool_dims(1, 3, 5, 5, 2, 3, 2, 1, 0, 1, false, true, true)},
  };
  for (const Case& c : cases) {
    const PoolDims& d = c.d;
    INFO(c.name);
    const i64 nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.ho * d.wo;
    const Floats x = distinct_floats(nx, 31), dy = random_floats(ny, 32);
    const Doubles r = widen(dy);
    const Doubles want_dx = naive_pool_backward(d, widen(x), r);
    expect_close(want_dx, numeric_gradient([&](const Doubles& v) { return naive_pool_forward(d, v); }, widen(x), r),
                 kFdTol, "naive backward vs finite differences");
    Floats y(static_cast<std::size_t>(ny), kNaN);
    pool_forward(d, x.data(), y.data());
    expect_close(y, naive_pool_forward(d, widen(x)), kFloatTol, "forward");
    const Floats dx = backward_result(
        nx, [&](float* g, bool acc) { pool_backward(d, x.data(), y.data(), dy.data(), g, acc); }, "backward");
    expect_close(dx, want_dx, kFloatTol, "backward");
  }
}

// ============================================================================================
// relu

TEST_CASE("relu: hand values, naive version, finite differences") {
  // Forward clamps at 0; the gradient passes where y > 0 only (at x = 0 it is 0).
  const Floats x = {-1, 0, 2}, dy = {5, 6, 7};
  Floats y(3), dx(3, kNaN);
  relu_forward(3, x.data(), y.data());
  CHECK(y == Floats{0, 0, 2});
  relu_backward(3, y.data(), dy.data(), dx.data(), false);
  CHECK(dx == Floats{0, 0, 7});

  // Values kept at least 0.05 from the kink so that no difference step crosses it.
  Floats xr = random_floats(40, 41, 0.05f, 1.0f);
  for (std::size_t e = 0; e < xr.size(); e += 2) xr[e] = -xr[e];
  const Doubles r = widen(random_floats(40, 42));
  auto naive = [](const Doubles& v) {
    Doubles out(v.size());
    for (std::size_t e = 0; e < v.size(); ++e) out[e] = v[e] > 0 ? v[e] : 0.0;
    return out;
  };
  Doubles want(r.size());
  for (std::size_t e = 0; e < r.size(); ++e) want[e] = xr[e] > 0 ? r[e] : 0.0;
  expect_close(want, numeric_gradient(naive, widen(xr), r), kFdTol, "naive backward vs finite differences");
  Floats yr(40);
  relu_forward(40, xr.data(), yr.data());
  expect_close(yr, naive(widen(xr)), 0, "forward");
  const Floats dy_r(r.begin(), r.end());
  expect_close(backward_result(
                   40, [&](float* g, bool acc) { relu_backward(40, yr.data(), dy_r.data(), g, acc); }, "relu"),
               want, 0, "backward");
}

// ============================================================================================
// batch normalisation

TEST_CASE("bn: hand-computed training forward uses the biased variance") {
  // One channel, x = [1 3 5 7] (n = 4): mean 4, deviations -3 -1 1 3, biased variance
  // (9 + 1 + 1 + 9) / 4 = 5 (the unbiased one would be 20 / 3). With eps = 0, gamma 2, beta 1:
  // y = 2 (x - 4) / sqrt(5) + 1 = 1 -+ 6 / sqrt(5), 1 -+ 2 / sqrt(5).
  BnDims d;
  d.n = 4;
  d.eps = 0;
  const Floats x = {1, 3, 5, 7}, gamma = {2}, beta = {1};
  Floats y(4), saved(2);
  bn_forward_training(d, x.data(), gamma.data(), beta.data(), y.data(), saved.data());
  const double s5 = std::sqrt(5.0);
  expect_close(saved, Doubles{4, 1 / s5}, 1e-7, "mean, inv_std");
  expect_close(y, Doubles{1 - 6 / s5, 1 - 2 / s5, 1 + 2 / s5, 1 + 6 / s5}, 1e-6, "y");
}

TEST_CASE("bn: training forward, recomputation and backward against the naive version") {
  std::vector<BnDims> cases(3);
  cases[0].n = 3, cases[0].c = 4, cases[0].h = 3, cases[0].w = 5;
  cases[1].n = 5, cases[1].c = 2;  // planes of one value (after an fc)
  cases[2].n = 2, cases[2].c = 3, cases[2].h = 6, cases[2].w = 7, cases[2].eps = 1e-3;
  for (const BnDims& d : cases) {
    CAPTURE(d.n);
    CAPTURE(d.c);
    CAPTURE(d.h);
    CAPTURE(d.w);
    const i64 count = d.n * d.c * d.h * d.w;
    // An offset mean, so that a variance formula that cancels would show.
    const Floats x = random_floats(count, 51, 2.0f, 4.0f), gamma = random_floats(d.c, 52, 0.5f, 1.5f);
    const Floats beta = random_floats(d.c, 53), dy = random_floats(count, 54);
    const Doubles r = widen(dy);

    const NaiveBn want = naive_bn_forward(d, widen(x), widen(gamma), widen(beta));
    const Doubles want_g = naive_bn_backward(d, widen(x), widen(gamma), r);
    const std::size_t nx = x.size(), nc = gamma.size();
    expect_close(slice(want_g, 0, nx),
                 numeric_gradient([&](const Doubles& v) { return naive_bn_forward(d, v, widen(gamma), widen(beta)).y; },
                                  widen(x), r),
                 kFdTol, "naive dx vs finite differences");
    expect_close(slice(want_g, nx, nc),
                 numeric_gradient([&](const Doubles& v) { return naive_bn_forward(d, widen(x), v, widen(beta)).y; },
                                  widen(gamma), r),
                 kFdTol, "naive dgamma vs finite differences");
    expect_close(slice(want_g, nx + nc, nc),
                 numeric_gradient([&](const Doubles& v) { return naive_bn_forward(d, widen(x), widen(gamma), v).y; },
                                  widen(beta), r),
                 kFdTol, "naive dbeta vs finite differences");

    Floats y(x.size(), kNaN), saved(2 * nc, kNaN);
    bn_forward_training(d, x.data(), gamma.data(), beta.data(), y.data(), saved.data());
    expect_close(y, want.y, kFloatTol, "forward");
    expect_close(slice(widen(saved), 0, nc), want.mean, kFloatTol, "saved mean");
    expect_close(slice(widen(saved), nc, nc), want.inv_std, kFloatTol, "saved inv_std");

    // Recomputation from the saved statistics must reproduce the training forward exactly.
    Floats again(x.size(), kNaN);
    bn_forward_saved(d, x.data(), gamma.data(), beta.data(), saved.data(), again.data());
    CHECK(std::memcmp(again.data(), y.data(), y.size() * sizeof(float)) == 0);

    const Floats dx = backward_result(
        count,
        [&](float* g, bool acc) {
          // Earlier rounds' sums in dgamma/dbeta must not leak into dx.
          Floats dgamma_dbeta = random_floats(2 * static_cast<i64>(nc), 55);
          bn_backward(d, x.data(), gamma.data(), saved.data(), dy.data(), g, dgamma_dbeta.data(), acc);
        },
        "bn dx");
    expect_close(dx, slice(want_g, 0, nx), kFloatTol, "dx");
    const Floats dgb = accumulated_result(
        2 * static_cast<i64>(nc),
        [&](float* g) {
          Floats scratch(x.size());
          bn_backward(d, x.data(), gamma.data(), saved.data(), dy.data(), scratch.data(), g, false);
        },
        "bn dgamma/dbeta");
    expect_close(dgb, slice(want_g, nx, 2 * nc), kFloatTol, "dgamma, dbeta");
  }
}

// ============================================================================================
// local response normalisation

TEST_CASE("lrn: hand-computed PyTorch window (size 2 looks one channel back)") {
  // PyTorch pads size/2 = 1 channel before and (size-1)/2 = 0 after, so channel c sums x^2 over
  // {c-1, c}. x = [1 2 3] (one pixel), alpha 0.5, beta 1, k 1: scale = 1 + 0.5/2 * sum:
  // c0: 1 + 0.25 * 1 = 1.25 -> y = 1 / 1.25 = 0.8; c1: 1 + 0.25 * (1 + 4) = 2.25 -> 2 / 2.25;
  // c2: 1 + 0.25 * (4 + 9) = 4.25 -> 3 / 4.25.
  LrnDims d;
  d.c = 3, d.size = 2, d.alpha = 0.5, d.beta = 1, d.k = 1;
  const Floats x = {1, 2, 3};
  Floats y(3);
  lrn_forward(d, x.data(), y.data());
  expect_close(y, Doubles{0.8, 2 / 2.25, 3 / 4.25}, 1e-6, "y");
}

TEST_CASE("lrn: forward and backward against the naive version and finite differences") {
  std::vector<LrnDims> cases(3);
  cases[0].n = 2, cases[0].c = 7, cases[0].h = 3, cases[0].w = 4;                     // AlexNet's size 5
  cases[1].n = 1, cases[1].c = 6, cases[1].h = 2, cases[1].w = 5, cases[1].size = 4;  // even: asymmetric window
  cases[2].n = 2, cases[2].c = 2, cases[2].h = 3, cases[2].w = 3, cases[2].size = 3;  // window wider than the channels
  for (LrnDims& d : cases) {
    // Larger alpha than AlexNet's 1e-4 so the cross-channel term is not lost in the tolerance.
    d.alpha = 0.3, d.beta = 0.75, d.k = 2;
    CAPTURE(d.c);
    CAPTURE(d.size);
    const i64 count = d.n * d.c * d.h * d.w;
    const Floats x = random_floats(count, 61, -2, 2), dy = random_floats(count, 62);
    const Doubles r = widen(dy);
    const Doubles want_dx = naive_lrn_backward(d, widen(x), r);
    expect_close(want_dx, numeric_gradient([&](const Doubles& v) { return naive_lrn_forward(d, v); }, widen(x), r),
                 kFdTol, "naive backward vs finite differences");
    Floats y(x.size(), kNaN);
    lrn_forward(d, x.data(), y.data());
    expect_close(y, naive_lrn_forward(d, widen(x)), kFloatTol, "forward");
    const Floats dx = backward_result(
        count, [&](float* g, bool acc) { lrn_backward(d, x.data(), y.data(), dy.data(), g, acc); }, "lrn");
    expect_close(dx, want_dx, kFloatTol, "backward");
  }
}

// ============================================================================================
// fully connected

TEST_CASE("fc: hand values, naive version, finite differences") {
  // x = [1 2], w = [[1 0], [2 -1]], bias [0.5 -1]: y = [1 + 0.5, 2 - 2 - 1] = [1.5, -1].
  {
    const FcDims d{1, 2, 2, true};
    const Floats x = {1, 2}, w = {1, 0, 2, -1}, b = {0.5f, -1};
    Floats y(2);
    fc_forward(d, x.data(), w.data(), b.data(), y.data());
    CHECK(y == Floats{1.5f, -1});
  }
  for (bool bias : {true, false}) {
    const FcDims d{3, 7, 5, bias};
    CAPTURE(bias);
    const Floats x = random_floats(d.n * d.in, 71), w = random_floats(d.out * d.in, 72), b = random_floats(d.out, 73);
    const Floats dy = random_floats(d.n * d.out, 74);
    const Doubles r = widen(dy);
    const Doubles want = naive_fc_backward(d, widen(x), widen(w), r);
    const std::size_t nx = x.size(), nw = w.size(), nb = b.size();
    expect_close(
        slice(want, 0, nx),
        numeric_gradient([&](const Doubles& v) { return naive_fc_forward(d, v, widen(w), widen(b)); }, widen(x), r),
        kFdTol, "naive dx vs finite differences");
    expect_close(
        slice(want, nx, nw),
        numeric_gradient([&](const Doubles& v) { return naive_fc_forward(d, widen(x), v, widen(b)); }, widen(w), r),
        kFdTol, "naive dw vs finite differences");
    expect_close(
        slice(want, nx + nw, nb),
        numeric_gradient([&](const Doubles& v) { return naive_fc_forward(d, widen(x), widen(w), v); }, widen(b), r),
        kFdTol, "naive dbias vs finite differences");

    Floats y(dy.size(), kNaN);
    fc_forward(d, x.data(), w.data(), bias ? b.data() : nullptr, y.data());
    expect_close(y, naive_fc_forward(d, widen(x), widen(w), widen(b)), kFloatTol, "forward");
    const Floats dx = backward_result(
        d.n * d.in, [&](float* g, bool acc) { fc_backward_data(d, dy.data(), w.data(), g, acc); }, "fc dx");
    expect_close(dx, slice(want, 0, nx), kFloatTol, "backward data");
    const Floats dw_db = accumulated_result(
        d.out * d.in + d.out, [&](float* g) { fc_backward_filter(d, x.data(), dy.data(), g, bias ? g + nw : nullptr); },
        "fc dw");
    expect_close(slice(widen(dw_db), 0, nw), slice(want, nx, nw), kFloatTol, "dw");
    expect_close(slice(widen(dw_db), nw, nb), slice(want, nx + nw, nb), kFloatTol, "dbias (untouched without bias)");
  }
}

// ============================================================================================
// dropout

TEST_CASE("dropout: the hash is SplitMix64") {
  // Vigna's splitmix64.c started at 0 outputs e220a8397b1dcdaf, 6e789e6aa1b965f4, 06c45d188009454f.
  CHECK(dropout_keep_hash(0, 0) == 0xe220a8397b1dcdafULL);
  CHECK(dropout_keep_hash(0, 1) == 0x6e789e6aa1b965f4ULL);
  CHECK(dropout_keep_hash(0, 2) == 0x06c45d188009454fULL);
}

TEST_CASE("dropout: mask and scaling follow the definition, whatever the split of the batch") {
  const i64 n = 5, per = 37;
  const double ratio = 0.3;
  const std::uint64_t seed = 0x5eed;
  const Floats x = random_floats(n * per, 81);
  Floats y(x.size(), kNaN);
  std::vector<std::uint8_t> mask(x.size(), 7);
  dropout_forward(n, per, 0, ratio, seed, x.data(), y.data(), mask.data());
  Doubles want(x.size());
  for (std::size_t e = 0; e < x.size(); ++e) {
    const bool keep = static_cast<long double>(dropout_keep_hash(seed, e)) / 0x1p64L >= ratio;
    CHECK(mask[e] == (keep ? 1 : 0));
    want[e] = keep ? x[e] / (1 - ratio) : 0.0;
  }
  expect_close(y, want, 1e-6, "y = x * keep / (1 - ratio)");

  // Samples 0-1 and 2-4 drawn separately (first_sample 0 and 2) give the same bytes.
  Floats y_parts(x.size(), kNaN);
  std::vector<std::uint8_t> mask_parts(x.size(), 7);
  dropout_forward(2, per, 0, ratio, seed, x.data(), y_parts.data(), mask_parts.data());
  dropout_forward(3, per, 2, ratio, seed, x.data() + 2 * per, y_parts.data() + 2 * per, mask_parts.data() + 2 * per);
  CHECK(mask_parts == mask);
  CHECK(std::memcmp(y_parts.data(), y.data(), y.size() * sizeof(float)) == 0);

  // Recomputation from the mask reproduces y exactly.
  Floats again(x.size(), kNaN);
  dropout_apply(n * per, ratio, mask.data(), x.data(), again.data());
  CHECK(std::memcmp(again.data(), y.data(), y.size() * sizeof(float)) == 0);

  // y is linear in x with slope keep / (1 - ratio): the backward against differences of that.
  const Floats dy = random_floats(n * per, 82);
  const Doubles r = widen(dy);
  auto naive = [&](const Doubles& v) {
    Doubles out(v.size());
    for (std::size_t e = 0; e < v.size(); ++e) out[e] = v[e] * mask[e] / (1 - ratio);
    return out;
  };
  const Floats dx = backward_result(
      n * per, [&](float* g, bool acc) { dropout_backward(n * per, ratio, mask.data(), dy.data(), g, acc); },
      "dropout");
  expect_close(dx, numeric_gradient(naive, widen(x), r), kFloatTol, "backward vs finite differences");
}

TEST_CASE("dropout: keep rate and the extreme ratios") {
  // 100,000 draws at ratio 0.25: the kept fraction has standard deviation
  // sqrt(0.25 * 0.75 / 1e5) = 0.0014, so +-0.01 is seven of them.
  const i64 count = 100'000;
  const Floats x(static_cast<std::size_t>(count), 1.0f);
  Floats y(x.size());
  std::vector<std::uint8_t> mask(x.size());
  dropout_forward(1, count, 0, 0.25, 99, x.data(), y.data(), mask.data());
  const double kept = static_cast<double>(std::count(mask.begin(), mask.end(), 1)) / static_cast<double>(count);
  CHECK(kept == doctest::Approx(0.75).epsilon(0.01 / 0.75));

  dropout_forward(1, count, 0, 0.0, 99, x.data(), y.data(), mask.data());  // ratio 0 keeps all, scale 1
  CHECK(std::count(mask.begin(), mask.end(), 1) == count);
  CHECK(y == x);
  dropout_forward(1, count, 0, 1.0, 99, x.data(), y.data(), mask.data());  // ratio 1 drops all
  CHECK(std::count(mask.begin(), mask.end(), 0) == count);
  CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 0; }));
}

// ============================================================================================
// point-wise activations (activation.h), against float64 definitions written here from
// PyTorch's documentation and against finite differences of those definitions

struct NaiveActivation {
  const char* name;
  ActivationDims dims;
  std::function<double(double)> f;
  std::function<double(double)> df;  // dy/dx at x
  std::vector<double> kinks;         // finite differences must not straddle these
};

std::vector<NaiveActivation> naive_activations() {
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  auto phi = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  const double pi = std::acos(-1.0);
  auto tanh_inner = [pi](double x) { return std::sqrt(2 / pi) * (x + 0.044715 * x * x * x); };
  return {
      {"sigmoid", {Activation::Sigmoid}, sigmoid, [=](double x) { return sigmoid(x) * (1 - sigmoid(x)); }, {}},
      {"hardsigmoid",
       {Activation::HardSigmoid, 1.0f / 6, 0.5f},
       [](double x) { return std::clamp(x / 6 + 0.5, 0.0, 1.0); },
       [](double x) { return x > -3 && x < 3 ? 1.0 / 6 : 0.0; },
       {-3, 3}},
      {"hardswish",
       {Activation::HardSwish},
       [](double x) { return x * std::clamp(x + 3, 0.0, 6.0) / 6; },
       [](double x) { return x < -3  ? 0.0
                             : x > 3 ? 1.0
                                     : (2 * x + 3) / 6; },
       {-3, 3}},
      {"silu",
       {Activation::Silu},
       [=](double x) { return x * sigmoid(x); },
       [=](double x) { return sigmoid(x) + x * sigmoid(x) * (1 - sigmoid(x)); },
       {}},
      {"relu6 (clip 0 6)",
       {Activation::Clip, 0, 6},
       [](double x) { return std::clamp(x, 0.0, 6.0); },
       [](double x) { return x > 0 && x < 6 ? 1.0 : 0.0; },
       {0, 6}},
      {"gelu",
       {Activation::Gelu},
       [=](double x) { return x * phi(x); },
       [=](double x) { return phi(x) + x * std::exp(-x * x / 2) / std::sqrt(2 * pi); },
       {}},
      {"gelu tanh",
       {Activation::GeluTanh},
       [=](double x) { return 0.5 * x * (1 + std::tanh(tanh_inner(x))); },
       [=](double x) {
         const double t = std::tanh(tanh_inner(x));
         return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * std::sqrt(2 / pi) * (1 + 3 * 0.044715 * x * x);
       },
       {}},
  };
}

TEST_CASE("activations: hand values and PyTorch's choices at the kinks") {
  auto value = [](ActivationDims d, float x) {
    float y = 0;
    activation_forward(d, 1, &x, &y);
    return y;
  };
  auto derivative = [](ActivationDims d, float x) {  // through the kernel, from what it reads
    float y = 0, dy = 1, dx = 0;
    activation_forward(d, 1, &x, &y);
    activation_backward(d, 1, activation_backward_reads_y(d.f) ? &y : &x, &dy, &dx, false);
    return dx;
  };
  // Phi(1) = 0.841344746..., sigmoid(1) = 0.731058578..., tanh(sqrt(2/pi) * 1.044715) = 0.682383...
  CHECK(value({Activation::Gelu}, 1) == doctest::Approx(0.8413447460685429).epsilon(1e-6));
  CHECK(value({Activation::Silu}, 1) == doctest::Approx(0.7310585786300049).epsilon(1e-6));
  CHECK(value({Activation::GeluTanh}, 1) == doctest::Approx(0.8411919906082768).epsilon(1e-6));
  CHECK(value({Activation::Sigmoid}, 0) == 0.5f);
  CHECK(value({Activation::HardSwish}, 1) == doctest::Approx(4.0 / 6).epsilon(1e-6));  // 1 * (1 + 3) / 6
  CHECK(value({Activation::HardSigmoid, 1.0f / 6, 0.5f}, 1.5f) == doctest::Approx(0.75).epsilon(1e-6));
  CHECK(value({Activation::Clip, 0, 6}, 7) == 6);
  // PyTorch's hardswish_backward: 0 below -3, x / 3 + 1/2 on [-3, 3] (both ends included), 1 above.
  CHECK(derivative({Activation::HardSwish}, -3) == doctest::Approx(-0.5));
  CHECK(derivative({Activation::HardSwish}, 3) == doctest::Approx(1.5));
  CHECK(derivative({Activation::HardSwish}, -3.5f) == 0);
  CHECK(derivative({Activation::HardSwish}, 3.5f) == 1);
  // Hardtanh/ReLU6 and hardsigmoid: no gradient at the clamp's ends (open interval).
  CHECK(derivative({Activation::Clip, 0, 6}, 0) == 0);
  CHECK(derivative({Activation::Clip, 0, 6}, 6) == 0);
  CHECK(derivative({Activation::Clip, 0, 6}, 3) == 1);
  CHECK(derivative({Activation::HardSigmoid, 1.0f / 6, 0.5f}, -3) == 0);
  CHECK(derivative({Activation::HardSigmoid, 1.0f / 6, 0.5f}, 3) == 0);
  CHECK(derivative({Activation::HardSigmoid, 1.0f / 6, 0.5f}, 0) == doctest::Approx(1.0 / 6));
  CHECK(derivative({Activation::Gelu}, 0) == doctest::Approx(0.5));
  // NaN passes on, forward and backward (check mode's poison).
  for (const auto& a : naive_activations()) {
    CAPTURE(a.name);
    CHECK(std::isnan(value(a.dims, kNaN)));
    float v = kNaN, dy = 1, dx = 0;
    activation_backward(a.dims, 1, &v, &dy, &dx, false);
    CHECK(std::isnan(dx));
  }
}

TEST_CASE("activations: forward and backward against float64 and finite differences") {
  for (const auto& a : naive_activations()) {
    CAPTURE(a.name);
    // Values in [-8, 8], none within 0.01 of a kink, so no difference step crosses one.
    Floats x = random_floats(200, 71, -8, 8);
    for (float& v : x)
      for (double k : a.kinks)
        if (std::fabs(v - k) < 0.01) v = static_cast<float>(k + 0.05);
    const Floats dy = random_floats(200, 72);
    const Doubles r = widen(dy);
    auto naive = [&](const Doubles& v) {
      Doubles out(v.size());
      for (std::size_t e = 0; e < v.size(); ++e) out[e] = a.f(v[e]);
      return out;
    };
    Doubles want_dx(x.size());
    for (std::size_t e = 0; e < x.size(); ++e) want_dx[e] = r[e] * a.df(x[e]);
    expect_close(want_dx, numeric_gradient(naive, widen(x), r), kFdTol, "naive derivative vs finite differences");
    Floats y(x.size(), kNaN);
    activation_forward(a.dims, 200, x.data(), y.data());
    expect_close(y, naive(widen(x)), 1e-6, "forward");
    const float* v = activation_backward_reads_y(a.dims.f) ? y.data() : x.data();
    const Floats dx = backward_result(
        200, [&](float* g, bool acc) { activation_backward(a.dims, 200, v, dy.data(), g, acc); }, a.name);
    expect_close(dx, want_dx, 1e-6, "backward");
  }
}

// ============================================================================================
// multiply (squeeze-and-excitation) and per-channel scale

TEST_CASE("mul: x * s, per channel and element-wise, against float64 and finite differences") {
  for (bool per_channel : {true, false}) {
    CAPTURE(per_channel);
    const MulDims d{2, 3, 5, per_channel};
    const i64 nx = d.n * d.c * d.plane, ns = per_channel ? d.n * d.c : nx;
    const Floats x = random_floats(nx, 81), s = random_floats(ns, 82), dy = random_floats(nx, 83);
    const Doubles r = widen(dy);
    auto naive = [&](const Doubles& xv, const Doubles& sv) {
      Doubles y(static_cast<std::size_t>(nx));
      for (i64 e = 0; e < nx; ++e) y[e] = xv[e] * sv[per_channel ? e / d.plane : e];
      return y;
    };
    Floats y(static_cast<std::size_t>(nx), kNaN);
    mul_forward(d, x.data(), s.data(), y.data());
    expect_close(y, naive(widen(x), widen(s)), 1e-7, "forward");
    const Doubles want_dx = numeric_gradient([&](const Doubles& v) { return naive(v, widen(s)); }, widen(x), r);
    const Doubles want_ds = numeric_gradient([&](const Doubles& v) { return naive(widen(x), v); }, widen(s), r);
    const Floats dx = backward_result(
        nx, [&](float* g, bool acc) { mul_backward(d, nullptr, s.data(), dy.data(), g, acc, nullptr, false); },
        "mul dx (reads s only)");
    expect_close(dx, want_dx, kFloatTol, "dx");
    const Floats ds = backward_result(
        ns, [&](float* g, bool acc) { mul_backward(d, x.data(), nullptr, dy.data(), nullptr, false, g, acc); },
        "mul ds (reads x only)");
    expect_close(ds, want_ds, kFloatTol, "ds");
  }
}

TEST_CASE("scale: y = x * gamma[c], dgamma accumulates, dx only where asked") {
  const i64 n = 2, c = 3, plane = 4, nx = n * c * plane;
  const Floats x = random_floats(nx, 91), gamma = random_floats(c, 92), dy = random_floats(nx, 93);
  const Doubles r = widen(dy);
  auto naive = [&](const Doubles& xv, const Doubles& gv) {
    Doubles y(static_cast<std::size_t>(nx));
    for (i64 e = 0; e < nx; ++e) y[e] = xv[e] * gv[(e / plane) % c];
    return y;
  };
  Floats y(static_cast<std::size_t>(nx), kNaN);
  scale_forward(n, c, plane, x.data(), gamma.data(), y.data());
  expect_close(y, naive(widen(x), widen(gamma)), 1e-7, "forward");
  Floats scratch(static_cast<std::size_t>(c));
  const Floats dx = backward_result(
      nx,
      [&](float* g, bool acc) {
        scale_backward(n, c, plane, x.data(), gamma.data(), dy.data(), g, acc, scratch.data());
      },
      "scale dx");
  expect_close(dx, numeric_gradient([&](const Doubles& v) { return naive(v, widen(gamma)); }, widen(x), r), kFloatTol,
               "dx");
  const Floats dgamma = accumulated_result(
      c, [&](float* g) { scale_backward(n, c, plane, x.data(), nullptr, dy.data(), nullptr, false, g); },
      "scale dgamma (no dx: gamma is not read)");
  expect_close(dgamma, numeric_gradient([&](const Doubles& v) { return naive(widen(x), v); }, widen(gamma), r),
               kFloatTol, "dgamma");
}

// ============================================================================================
// layer norm over channels

Doubles naive_ln_forward(const LnDims& d, const Doubles& x, const Doubles& gamma, const Doubles& beta) {
  const i64 plane = d.h * d.w;
  Doubles y(x.size());
  for (i64 n = 0; n < d.n; ++n)
    for (i64 p = 0; p < plane; ++p) {
      double mean = 0, var = 0;
      for (i64 c = 0; c < d.c; ++c) mean += x[(n * d.c + c) * plane + p] / static_cast<double>(d.c);
      for (i64 c = 0; c < d.c; ++c) var += std::pow(x[(n * d.c + c) * plane + p] - mean, 2) / static_cast<double>(d.c);
      for (i64 c = 0; c < d.c; ++c) {
        const i64 e = (n * d.c + c) * plane + p;
        y[e] = (x[e] - mean) / std::sqrt(var + d.eps) * gamma[c] + beta[c];
      }
    }
  return y;
}

TEST_CASE("layer norm: forward, recomputation and backward against float64 and finite differences") {
  std::vector<LnDims> cases(2);
  cases[0].n = 2, cases[0].c = 5, cases[0].h = 3, cases[0].w = 2;
  cases[1].n = 3, cases[1].c = 8, cases[1].eps = 1e-6;  // one pixel (ConvNeXt's head, after pooling)
  for (const LnDims& d : cases) {
    CAPTURE(d.c);
    const i64 count = d.n * d.c * d.h * d.w, pixels = d.n * d.h * d.w;
    const Floats x = random_floats(count, 101, 1.0f, 3.0f), gamma = random_floats(d.c, 102, 0.5f, 1.5f);
    const Floats beta = random_floats(d.c, 103), dy = random_floats(count, 104);
    const Doubles r = widen(dy);
    Floats y(static_cast<std::size_t>(count), kNaN), saved(static_cast<std::size_t>(2 * pixels), kNaN);
    ln_forward_training(d, x.data(), gamma.data(), beta.data(), y.data(), saved.data());
    expect_close(y, naive_ln_forward(d, widen(x), widen(gamma), widen(beta)), kFloatTol, "forward");
    Floats again(y.size(), kNaN);
    ln_forward_saved(d, x.data(), gamma.data(), beta.data(), saved.data(), again.data());
    CHECK(std::memcmp(again.data(), y.data(), y.size() * sizeof(float)) == 0);

    auto fx = [&](const Doubles& v) { return naive_ln_forward(d, v, widen(gamma), widen(beta)); };
    auto fg = [&](const Doubles& v) { return naive_ln_forward(d, widen(x), v, widen(beta)); };
    auto fb = [&](const Doubles& v) { return naive_ln_forward(d, widen(x), widen(gamma), v); };
    Floats dgb_scratch(static_cast<std::size_t>(2 * d.c));
    const Floats dx = backward_result(
        count,
        [&](float* g, bool acc) {
          ln_backward(d, x.data(), gamma.data(), saved.data(), dy.data(), g, dgb_scratch.data(), acc);
        },
        "ln dx");
    expect_close(dx, numeric_gradient(fx, widen(x), r), kFloatTol, "dx");
    const Floats dgb = accumulated_result(
        2 * d.c, [&](float* g) { ln_backward(d, x.data(), gamma.data(), saved.data(), dy.data(), nullptr, g, false); },
        "ln dgamma/dbeta (without dx)");
    expect_close(slice(widen(dgb), 0, static_cast<std::size_t>(d.c)), numeric_gradient(fg, widen(gamma), r), kFloatTol,
                 "dgamma");
    expect_close(slice(widen(dgb), static_cast<std::size_t>(d.c), static_cast<std::size_t>(d.c)),
                 numeric_gradient(fb, widen(beta), r), kFloatTol, "dbeta");
  }
}

// ============================================================================================
// channel shuffle and slice: data movement, checked element by element and by the adjoint
// identity <forward(x), r> = <x, backward(r)>

TEST_CASE("channel shuffle: torch's view(n, g, c/g, h, w).transpose(1, 2), and its adjoint") {
  const i64 n = 2, c = 6, plane = 3, g = 3, count = n * c * plane;
  const Floats x = random_floats(count, 111), r = random_floats(count, 112);
  Floats y(static_cast<std::size_t>(count), kNaN);
  channel_shuffle_forward(n, c, plane, g, x.data(), y.data());
  // y[i, k, j] (viewed as n x c/g x g) = x[i, j, k] (viewed as n x g x c/g).
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < g; ++j)
      for (i64 k = 0; k < c / g; ++k)
        for (i64 p = 0; p < plane; ++p)
          CHECK(y[((i * c) + k * g + j) * plane + p] == x[((i * c) + j * (c / g) + k) * plane + p]);
  const Floats dx = backward_result(
      count, [&](float* d, bool acc) { channel_shuffle_backward(n, c, plane, g, r.data(), d, acc); }, "shuffle");
  CHECK(std::inner_product(y.begin(), y.end(), r.begin(), 0.0) ==
        doctest::Approx(std::inner_product(x.begin(), x.end(), dx.begin(), 0.0)));
}

TEST_CASE("slice: channels from begin to end, zero gradient outside, and its adjoint") {
  const i64 n = 2, c = 5, plane = 3, begin = 1, end = 4, nx = n * c * plane, ny = n * (end - begin) * plane;
  const Floats x = random_floats(nx, 121), r = random_floats(ny, 122);
  Floats y(static_cast<std::size_t>(ny), kNaN);
  slice_forward(n, c, plane, begin, end, x.data(), y.data());
  for (i64 i = 0; i < n; ++i)
    for (i64 k = begin; k < end; ++k)
      for (i64 p = 0; p < plane; ++p)
        CHECK(y[(i * (end - begin) + k - begin) * plane + p] == x[(i * c + k) * plane + p]);
  const Floats dx = backward_result(
      nx, [&](float* d, bool acc) { slice_backward(n, c, plane, begin, end, r.data(), d, acc); }, "slice");
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < c; ++k)
      if (k < begin || k >= end)
        for (i64 p = 0; p < plane; ++p) CHECK(dx[(i * c + k) * plane + p] == 0);
  CHECK(std::inner_product(y.begin(), y.end(), r.begin(), 0.0) ==
        doctest::Approx(std::inner_product(x.begin(), x.end(), dx.begin(), 0.0)));
}

// ============================================================================================
// add, concat, softmax loss, sgd

TEST_CASE("add: sum of the inputs, and dy to each input backward") {
  const i64 count = 23;
  const Floats a = random_floats(count, 91), b = random_floats(count, 92), c = random_floats(count, 93);
  Floats y(a.size(), kNaN);
  add_forward(count, {a.data(), b.data(), c.data()}, y.data());
  Doubles want(a.size());
  for (std::size_t e = 0; e < a.size(); ++e) want[e] = double(a[e]) + b[e] + c[e];
  expect_close(y, want, 1e-6, "forward");
  const Floats dy = random_floats(count, 94);
  const Doubles r = widen(dy);
  // dL/db for L = sum r * (a + b + c) is r.
  auto naive = [&](const Doubles& v) { return plus(plus(widen(a), v), widen(c)); };
  const Floats dx = backward_result(
      count, [&](float* g, bool acc) { add_backward(count, dy.data(), g, acc); }, "add");
  expect_close(dx, numeric_gradient(naive, widen(b), r), kFloatTol, "backward vs finite differences");
}

TEST_CASE("concat: channel blocks in order, and their slices backward") {
  // n = 2, planes of 3, channels {2, 1, 3}: sample s of y holds a's 2 channels, then b's, then c's.
  const i64 n = 2, hw = 3;
  const std::vector<i64> cs = {2, 1, 3};
  std::vector<Floats> xs;
  for (std::size_t i = 0; i < cs.size(); ++i)
    xs.push_back(random_floats(n * cs[i] * hw, 100 + static_cast<unsigned>(i)));
  Floats y(static_cast<std::size_t>(n * 6 * hw), kNaN);
  concat_forward(n, hw, cs, {xs[0].data(), xs[1].data(), xs[2].data()}, y.data());
  Floats want;
  for (i64 s = 0; s < n; ++s)
    for (std::size_t i = 0; i < cs.size(); ++i)
      want.insert(want.end(), xs[i].begin() + s * cs[i] * hw, xs[i].begin() + (s + 1) * cs[i] * hw);
  CHECK(y == want);

  const Floats dy = random_floats(static_cast<i64>(y.size()), 110);
  for (std::size_t i = 0; i < cs.size(); ++i) {
    CAPTURE(i);
    // Input i's part of L = sum r * concat(...) as a function of x_i alone.
    auto naive = [&](const Doubles& v) {
      Doubles out;
      for (i64 s = 0; s < n; ++s)
        for (std::size_t j = 0; j < cs.size(); ++j) {
          const Doubles src = j == i ? v : widen(xs[j]);
          out.insert(out.end(), src.begin() + s * cs[j] * hw, src.begin() + (s + 1) * cs[j] * hw);
        }
      return out;
    };
    const Floats dx = backward_result(
        n * cs[i] * hw, [&](float* g, bool acc) { concat_backward(n, hw, cs, i, dy.data(), g, acc); }, "concat");
    expect_close(dx, numeric_gradient(naive, widen(xs[i]), widen(dy)), kFloatTol, "backward vs finite differences");
  }
}

TEST_CASE("softmax loss: hand values, naive version, finite differences, sub-batch scale") {
  // Sample 0: x = [0 0], label 0: p = [1/2 1/2], loss ln 2. Sample 1: x = [0 ln 3], label 1:
  // p = [1/4 3/4], loss -ln(3/4) = ln 4 - ln 3. Sum: ln 2 + ln 4 - ln 3 = ln(8/3) = 0.980829.
  {
    const Floats x = {0, 0, 0, static_cast<float>(std::log(3.0))};
    const std::vector<std::int32_t> labels = {0, 1};
    Floats prob(4);
    CHECK(softmax_loss_forward(2, 2, x.data(), labels.data(), prob.data()) == doctest::Approx(std::log(8.0 / 3.0)));
    expect_close(prob, Doubles{0.5, 0.5, 0.25, 0.75}, 1e-6, "prob");
    // Backward with scale 1/2 (mean over 2): (p - onehot) / 2 = [-1/4 1/4 1/8 -1/8].
    Floats dx(4, kNaN);
    softmax_loss_backward(2, 2, prob.data(), labels.data(), 0.5, dx.data(), false);
    expect_close(dx, Doubles{-0.25, 0.25, 0.125, -0.125}, 1e-6, "dx");
  }
  const i64 n = 4, k = 6;
  const Floats x = random_floats(n * k, 121, -3, 3);
  const std::vector<std::int32_t> labels = {5, 0, 2, 2};
  Floats prob(x.size(), kNaN);
  const double loss = softmax_loss_forward(n, k, x.data(), labels.data(), prob.data());
  const Doubles p = naive_softmax(n, k, widen(x));
  expect_close(prob, p, 1e-6, "prob");
  double want_loss = 0;
  for (i64 s = 0; s < n; ++s) want_loss -= std::log(p[s * k + labels[s]]);
  CHECK(loss == doctest::Approx(want_loss).epsilon(1e-6));

  // d(mean loss)/dx against differences of the naive mean loss (one output, r = 1).
  auto mean_loss = [&](const Doubles& v) {
    const Doubles q = naive_softmax(n, k, v);
    double l = 0;
    for (i64 s = 0; s < n; ++s) l -= std::log(q[s * k + labels[s]]);
    return Doubles{l / static_cast<double>(n)};
  };
  const Doubles fd = numeric_gradient(mean_loss, widen(x), Doubles{1.0});
  const double scale = 1.0 / static_cast<double>(n);
  const Floats dx = backward_result(
      n * k, [&](float* g, bool acc) { softmax_loss_backward(n, k, prob.data(), labels.data(), scale, g, acc); },
      "softmax");
  expect_close(dx, fd, 1e-6, "backward vs finite differences");

  // Two sub-batch rounds of 2 samples, each with the whole batch's scale 1/4, give the same.
  Floats rounds(x.size(), kNaN);
  for (i64 first : {0, 2})
    softmax_loss_backward(2, k, prob.data() + first * k, labels.data() + first, scale, rounds.data() + first * k,
                          false);
  CHECK(rounds == dx);
}

TEST_CASE("sgd: w -= lr * dw") {
  // 1 - 0.1 * 0.5 = 0.95; -2 - 0.1 * (-10) = -1.
  const Floats dw = {0.5f, -10};
  Floats w = {1, -2};
  sgd_update(2, 0.1, dw.data(), w.data());
  expect_close(w, Doubles{0.95, -1}, 1e-6, "w");
}

TEST_CASE("kernels pass NaN on (check mode poisons free buffers with it)") {
  const Floats x = {kNaN, -1, 2, 0};
  Floats y(4);
  relu_forward(4, x.data(), y.data());
  CHECK(std::isnan(y[0]));
  const Floats y_poisoned = {kNaN, 0, 2, 0}, dy = {1, 1, 1, 1};
  Floats dx(4);
  relu_backward(4, y_poisoned.data(), dy.data(), dx.data(), false);
  CHECK(std::isnan(dx[0]));
  CHECK(dx[1] == 0);

  // A NaN anywhere in a max window wins, whatever comes after it.
  const PoolDims d = pool_dims(1, 1, 2, 2, 2, 2, 2, 2, 0, 0, true, true, false);
  for (std::size_t at = 0; at < 4; ++at) {
    Floats xp = {1, 2, 3, 4};
    xp[at] = kNaN;
    Floats yp(1);
    pool_forward(d, xp.data(), yp.data());
    CHECK(std::isnan(yp[0]));
  }

  // A dropped element stays NaN.
  std::vector<std::uint8_t> mask = {0, 1};
  const Floats xd = {kNaN, kNaN};
  Floats yd(2);
  dropout_apply(2, 0.5, mask.data(), xd.data(), yd.data());
  CHECK(std::isnan(yd[0]));
  CHECK(std::isnan(yd[1]));
}

// ============================================================================================
// OpenBLAS set-up

TEST_CASE("blas: description, version, threads, sgemm throughput") {
  const std::string version = blas_version();
  REQUIRE_FALSE(version.empty());
  CHECK(std::isdigit(static_cast<unsigned char>(version[0])));
  CHECK(version.find('.') != std::string::npos);
  CHECK(blas_threads() >= 1);
  CHECK(blas_description().rfind("OpenBLAS " + version + " (", 0) == 0);
  CHECK(measure_sgemm_gflops(128, 3) > 0.1);
}

// The probe's environment variable holds the file it writes its findings to.
constexpr const char* kProbeVariable = "UCPLAN_TEST_BLAS_PROBE";

const char* core_type_for_this_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  return __builtin_cpu_supports("avx2") ? "Haswell" : nullptr;
}

// Does its work only in the child that the next test starts: there it calls
// ensure_blas_environment, which must re-execute the binary (and so this test) once, with
// OPENBLAS_CORETYPE chosen from the CPU flags; the re-executed probe reports what it finds.
TEST_CASE("blas: core type probe (does its work in a child process)") {
  const char* report = std::getenv(kProbeVariable);
  if (report == nullptr) return;
  if (std::getenv("UCPLAN_BLAS_REEXECUTED") == nullptr) {
    static char name[] = "test_kernels", filter[] = "--test-case=blas: core type probe*", quiet[] = "--minimal";
    char* argv[] = {name, filter, quiet, nullptr};
    ucplan::ensure_blas_environment(argv, blas_core_type_for_this_cpu());
    CHECK_MESSAGE(core_type_for_this_cpu() == nullptr,
                  "ensure_blas_environment returned although this CPU has a core type");
    return;
  }
  const char* chosen = std::getenv("OPENBLAS_CORETYPE");
  std::FILE* f = std::fopen(report, "w");
  REQUIRE(f != nullptr);
  std::fprintf(f, "%s\n%s\n", chosen != nullptr ? chosen : "(unset)", blas_description().c_str());
  std::fclose(f);
}

TEST_CASE("blas: ensure_blas_environment re-executes once with OPENBLAS_CORETYPE set") {
  const std::string report = "/tmp/ucplan_test_blas_probe_" + std::to_string(getpid());
  std::remove(report.c_str());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string s = *e;
    if (s.rfind("OPENBLAS_CORETYPE=", 0) != 0 && s.rfind("UCPLAN_BLAS_REEXECUTED=", 0) != 0) env.push_back(s);
  }
  env.push_back(std::string(kProbeVariable) + "=" + report);
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string name = "test_kernels", filter = "--test-case=blas: core type probe*", quiet = "--minimal";
  char* argv[] = {name.data(), filter.data(), quiet.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv, envp.data()) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  const char* expected = core_type_for_this_cpu();
  std::FILE* f = std::fopen(report.c_str(), "r");
  if (expected == nullptr) {
    CHECK(f == nullptr);  // no core type to choose: no re-execution, no report
    if (f != nullptr) std::fclose(f);
    return;
  }
  REQUIRE(f != nullptr);
  char chosen[64] = {}, description[256] = {};
  CHECK(std::fgets(chosen, sizeof chosen, f) != nullptr);
  CHECK(std::fgets(description, sizeof description, f) != nullptr);
  std::fclose(f);
  std::remove(report.c_str());
  // The re-executed process sees the variable, and OpenBLAS, initialised after it, uses that core.
  CHECK(std::string(chosen) == std::string(expected) + "\n");
  CHECK(std::string(description).find(std::string("(") + expected + ",") != std::string::npos);
}

}  // namespace
