// Every layer kernel but convolution (see kernels.h for the contract).
//
// The check mode of the CPU backend poisons freed buffers with NaN so that a scheduling bug
// shows up in the gradients; the kernels therefore never turn a NaN input into a clean number
// (a relu or a dropped element passes the NaN on, a max pool selects it).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "executor/cpu/kernel_check.h"
#include "executor/cpu/kernels.h"
#include "executor/cpu/loops.h"

namespace ucplan::cpu {
namespace {

using i64 = std::int64_t;

// dst = src (accumulate false) or dst += src.
void store(i64 count, const float* src, float* dst, bool accumulate) {
  if (accumulate) {
    for (i64 e = 0; e < count; ++e) dst[e] += src[e];
  } else {
    std::copy(src, src + count, dst);
  }
}

// The pooling window of output (oy, ox), clipped to the input, and the divisor of average
// pooling, both as PyTorch's avg_pool2d computes them (the window is first clipped to the padded
// input, which only matters in ceil mode).
struct PoolWindow {
  i64 y0, y1, x0, x1;
  i64 divisor;
  bool empty() const { return y0 >= y1 || x0 >= x1; }
};

PoolWindow pool_window(const PoolDims& d, i64 oy, i64 ox) {
  PoolWindow p{};
  p.y0 = oy * d.sh - d.ph;
  p.x0 = ox * d.sw - d.pw;
  p.y1 = std::min(p.y0 + d.kh, d.h + d.ph);
  p.x1 = std::min(p.x0 + d.kw, d.w + d.pw);
  const i64 padded = (p.y1 - p.y0) * (p.x1 - p.x0);
  p.y0 = std::max<i64>(p.y0, 0);
  p.x0 = std::max<i64>(p.x0, 0);
  p.y1 = std::min(p.y1, d.h);
  p.x1 = std::min(p.x1, d.w);
  p.divisor = d.count_include_pad ? padded : (p.y1 - p.y0) * (p.x1 - p.x0);
  return p;
}

// Index within the plane of the first position of the window whose x equals y, or -1.
i64 argmax(const PoolDims& d, const PoolWindow& p, const float* xp, float y) {
  for (i64 iy = p.y0; iy < p.y1; ++iy)
    for (i64 ix = p.x0; ix < p.x1; ++ix)
      if (xp[iy * d.w + ix] == y) return iy * d.w + ix;
  return -1;
}

// Per-channel mean and inverse standard deviation, at the precision they are saved in.
struct BnStats {
  float mean, inv_std;
};

BnStats bn_stats(const BnDims& d, const float* saved, i64 c) { return {saved[c], saved[d.c + c]}; }

// PyTorch's LocalResponseNorm pads size / 2 channels before and (size - 1) / 2 after, so the
// window of channel c is [c - size / 2, c + (size - 1) / 2], clipped to the channels.
i64 lrn_first(const LrnDims& d, i64 c) { return std::max<i64>(0, c - d.size / 2); }
i64 lrn_last(const LrnDims& d, i64 c) { return std::min(d.c - 1, c + (d.size - 1) / 2); }

// scale[c][p] = k + alpha / size * (sum of x^2 over the window of channel c), one sample.
void lrn_scale(const LrnDims& d, const float* x, float* scale) {
  const i64 plane = d.h * d.w;
  const float a = static_cast<float>(d.alpha / static_cast<double>(d.size));
  const float k = static_cast<float>(d.k);
  for (i64 c = 0; c < d.c; ++c) {
    float* s = scale + c * plane;
    std::fill(s, s + plane, 0.0f);
    for (i64 cc = lrn_first(d, c); cc <= lrn_last(d, c); ++cc) {
      const float* xc = x + cc * plane;
      for (i64 p = 0; p < plane; ++p) s[p] += xc[p] * xc[p];
    }
    for (i64 p = 0; p < plane; ++p) s[p] = k + a * s[p];
  }
}

float dropout_scale(double ratio) { return ratio < 1.0 ? static_cast<float>(1.0 / (1.0 - ratio)) : 0.0f; }

// Multiplying (rather than selecting 0) keeps a NaN in a dropped element.
float dropout_factor(std::uint8_t kept, float scale) { return kept ? scale : 0.0f; }

}  // namespace

// ---- pooling ----

void pool_forward(const PoolDims& d, const float* x, float* y) {
  const i64 in_plane = d.h * d.w;
  for (i64 nc = 0; nc < d.n * d.c; ++nc) {
    const float* xp = x + nc * in_plane;
    float* yp = y + nc * d.ho * d.wo;
    for (i64 oy = 0; oy < d.ho; ++oy)
      for (i64 ox = 0; ox < d.wo; ++ox) {
        const PoolWindow p = pool_window(d, oy, ox);
        // An empty window (only possible with inconsistent ceil-mode sizes) yields 0.
        float out = 0;
        if (!p.empty() && d.max) {
          out = -std::numeric_limits<float>::infinity();
          for (i64 iy = p.y0; iy < p.y1; ++iy)
            for (i64 ix = p.x0; ix < p.x1; ++ix) {
              const float v = xp[iy * d.w + ix];
              if (v > out || std::isnan(v)) out = v;
            }
        } else if (!p.empty()) {
          double s = 0;
          for (i64 iy = p.y0; iy < p.y1; ++iy)
            for (i64 ix = p.x0; ix < p.x1; ++ix) s += xp[iy * d.w + ix];
          out = static_cast<float>(s / static_cast<double>(p.divisor));
        }
        yp[oy * d.wo + ox] = out;
      }
  }
}

void pool_backward(const PoolDims& d, const float* x, const float* y, const float* dy, float* dx, bool accumulate) {
  const i64 in_plane = d.h * d.w;
  if (!accumulate) std::fill(dx, dx + d.n * d.c * in_plane, 0.0f);
  for (i64 nc = 0; nc < d.n * d.c; ++nc) {
    float* dxp = dx + nc * in_plane;
    const float* dyp = dy + nc * d.ho * d.wo;
    for (i64 oy = 0; oy < d.ho; ++oy)
      for (i64 ox = 0; ox < d.wo; ++ox) {
        const PoolWindow p = pool_window(d, oy, ox);
        if (p.empty()) continue;
        const float g = dyp[oy * d.wo + ox];
        if (d.max) {
          const i64 at = argmax(d, p, x + nc * in_plane, y[nc * d.ho * d.wo + oy * d.wo + ox]);
          if (at >= 0) dxp[at] += g;
        } else {
          const float share = static_cast<float>(g / static_cast<double>(p.divisor));
          for (i64 iy = p.y0; iy < p.y1; ++iy)
            for (i64 ix = p.x0; ix < p.x1; ++ix) dxp[iy * d.w + ix] += share;
        }
      }
  }
}

// ---- relu ----

void relu_forward(std::int64_t count, const float* x, float* y) {
  for (i64 e = 0; e < count; ++e) y[e] = x[e] < 0 ? 0.0f : x[e];
}

void relu_backward(std::int64_t count, const float* y, const float* dy, float* dx, bool accumulate) {
  // y is never negative, so "not positive" is 0 or a NaN to pass on (v != v: a NaN). Written as
  // selects in two loops, which the compiler vectorises: with std::isnan and the accumulate test
  // inside one loop it did not, and this took 17 times relu_forward's time.
  auto grad = [](float v, float d) { return v > 0 ? d : (v != v ? v : 0.0f); };
  if (accumulate)
    for (i64 e = 0; e < count; ++e) dx[e] += grad(y[e], dy[e]);
  else
    for (i64 e = 0; e < count; ++e) dx[e] = grad(y[e], dy[e]);
}

// ---- batch normalisation ----

void bn_forward_training(const BnDims& d, const float* x, const float* gamma, const float* beta, float* y,
                         float* saved) {
  const i64 plane = d.h * d.w;
  const double count = static_cast<double>(d.n * plane);
  for (i64 c = 0; c < d.c; ++c) {
    double s = 0;
    for (i64 n = 0; n < d.n; ++n) s += sum(x + (n * d.c + c) * plane, plane);
    const double mean = s / count;
    // Two passes (deviations from the mean) rather than E[x^2] - E[x]^2, which cancels badly.
    double sq = 0;
    for (i64 n = 0; n < d.n; ++n) sq += squared_deviation(x + (n * d.c + c) * plane, static_cast<float>(mean), plane);
    saved[c] = static_cast<float>(mean);
    saved[d.c + c] = static_cast<float>(1.0 / std::sqrt(sq / count + d.eps));
  }
  // y from the saved (float) statistics, exactly as the recomputation computes it.
  bn_forward_saved(d, x, gamma, beta, saved, y);
}

void bn_forward_saved(const BnDims& d, const float* x, const float* gamma, const float* beta, const float* saved,
                      float* y) {
  const i64 plane = d.h * d.w;
  for (i64 c = 0; c < d.c; ++c) {
    const BnStats st = bn_stats(d, saved, c);
    const float scale = gamma[c] * st.inv_std;
    for (i64 n = 0; n < d.n; ++n) {
      const float* xp = x + (n * d.c + c) * plane;
      float* yp = y + (n * d.c + c) * plane;
      for (i64 p = 0; p < plane; ++p) yp[p] = (xp[p] - st.mean) * scale + beta[c];
    }
  }
}

void bn_backward(const BnDims& d, const float* x, const float* gamma, const float* saved, const float* dy, float* dx,
                 float* dgamma_dbeta, bool accumulate) {
  const i64 plane = d.h * d.w;
  const double count = static_cast<double>(d.n * plane);
  for (i64 c = 0; c < d.c; ++c) {
    const BnStats st = bn_stats(d, saved, c);
    double dbeta = 0, dy_xc = 0;  // sum dy, sum dy * (x - mean)
    for (i64 n = 0; n < d.n; ++n) {
      const float* dyp = dy + (n * d.c + c) * plane;
      dbeta += sum(dyp, plane);
      dy_xc += dot_centered(dyp, x + (n * d.c + c) * plane, st.mean, plane);
    }
    const double dgamma = dy_xc * st.inv_std;
    dgamma_dbeta[c] += static_cast<float>(dgamma);
    dgamma_dbeta[d.c + c] += static_cast<float>(dbeta);
    // dx = gamma * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - mean) * inv_std,
    // with this call's sums (dgamma_dbeta may hold earlier rounds' too).
    const float a = gamma[c] * st.inv_std;
    const float mean_dy = static_cast<float>(dbeta / count);
    const float b = static_cast<float>(dgamma / count * st.inv_std);  // multiplies (x - mean)
    for (i64 n = 0; n < d.n; ++n) {
      const float* xp = x + (n * d.c + c) * plane;
      const float* dyp = dy + (n * d.c + c) * plane;
      float* dxp = dx + (n * d.c + c) * plane;
      for (i64 p = 0; p < plane; ++p) {
        const float g = a * (dyp[p] - mean_dy - (xp[p] - st.mean) * b);
        dxp[p] = accumulate ? dxp[p] + g : g;
      }
    }
  }
}

// ---- local response normalisation ----

void lrn_forward(const LrnDims& d, const float* x, float* y) {
  const i64 sample = d.c * d.h * d.w;
  const float beta = static_cast<float>(d.beta);
  std::vector<float> scratch(static_cast<std::size_t>(sample));
  float* scale = scratch.data();
  for (i64 n = 0; n < d.n; ++n) {
    const float* xs = x + n * sample;
    float* ys = y + n * sample;
    lrn_scale(d, xs, scale);
    for (i64 e = 0; e < sample; ++e) ys[e] = xs[e] * std::pow(scale[e], -beta);
  }
}

// dx[c] = dy[c] * scale[c]^-beta
//         - 2 alpha beta / size * x[c] * sum over c' whose window holds c of dy[c'] * y[c'] / scale[c'],
// and the windows holding c are those of c' in [c - (size - 1) / 2, c + size / 2].
void lrn_backward(const LrnDims& d, const float* x, const float* y, const float* dy, float* dx, bool accumulate) {
  const i64 plane = d.h * d.w;
  const i64 sample = d.c * plane;
  const float beta = static_cast<float>(d.beta);
  const float coef = static_cast<float>(2.0 * d.alpha * d.beta / static_cast<double>(d.size));
  std::vector<float> scratch(static_cast<std::size_t>(2 * sample + plane));
  float* scale = scratch.data();
  float* ratio = scale + sample;   // dy * y / scale
  float* window = ratio + sample;  // one channel's sum of ratio over the windows holding it
  for (i64 n = 0; n < d.n; ++n) {
    const float* xs = x + n * sample;
    const float* ys = y + n * sample;
    const float* dys = dy + n * sample;
    float* dxs = dx + n * sample;
    lrn_scale(d, xs, scale);
    for (i64 e = 0; e < sample; ++e) ratio[e] = dys[e] * ys[e] / scale[e];
    for (i64 c = 0; c < d.c; ++c) {
      std::fill(window, window + plane, 0.0f);
      for (i64 cc = std::max<i64>(0, c - (d.size - 1) / 2); cc <= std::min(d.c - 1, c + d.size / 2); ++cc)
        for (i64 p = 0; p < plane; ++p) window[p] += ratio[cc * plane + p];
      for (i64 p = 0; p < plane; ++p) {
        const i64 e = c * plane + p;
        const float g = dys[e] * std::pow(scale[e], -beta) - coef * xs[e] * window[p];
        dxs[e] = accumulate ? dxs[e] + g : g;
      }
    }
  }
}

// ---- fully connected ----

void fc_forward(const FcDims& d, const float* x, const float* w, const float* bias, float* y) {
  if (d.bias)
    for (i64 n = 0; n < d.n; ++n) std::copy(bias, bias + d.out, y + n * d.out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<blasint>(d.n), static_cast<blasint>(d.out),
              static_cast<blasint>(d.in), 1.0f, x, static_cast<blasint>(d.in), w, static_cast<blasint>(d.in),
              d.bias ? 1.0f : 0.0f, y, static_cast<blasint>(d.out));
}

void fc_backward_data(const FcDims& d, const float* dy, const float* w, float* dx, bool accumulate) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<blasint>(d.n), static_cast<blasint>(d.in),
              static_cast<blasint>(d.out), 1.0f, dy, static_cast<blasint>(d.out), w, static_cast<blasint>(d.in),
              accumulate ? 1.0f : 0.0f, dx, static_cast<blasint>(d.in));
}

void fc_backward_filter(const FcDims& d, const float* x, const float* dy, float* dw, float* dbias) {
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<blasint>(d.out), static_cast<blasint>(d.in),
              static_cast<blasint>(d.n), 1.0f, dy, static_cast<blasint>(d.out), x, static_cast<blasint>(d.in), 1.0f, dw,
              static_cast<blasint>(d.in));
  if (!d.bias || dbias == nullptr) return;
  for (i64 o = 0; o < d.out; ++o) {
    double s = 0;
    for (i64 n = 0; n < d.n; ++n) s += dy[n * d.out + o];
    dbias[o] += static_cast<float>(s);
  }
}

// ---- dropout ----

// The index-th output of the SplitMix64 generator started at `seed` (Steele, Lea and Flood,
// OOPSLA 2014; constants from Vigna's splitmix64.c): a pure function of (seed, index), so any
// sub-range of the batch draws the same mask.
std::uint64_t dropout_keep_hash(std::uint64_t seed, std::uint64_t index) {
  std::uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

void dropout_forward(std::int64_t n, std::int64_t per_sample, std::int64_t first_sample, double ratio,
                     std::uint64_t seed, const float* x, float* y, std::uint8_t* mask) {
  const float scale = dropout_scale(ratio);
  for (i64 e = 0; e < n * per_sample; ++e) {
    const auto index = static_cast<std::uint64_t>(first_sample * per_sample + e);
    // hash / 2^64 >= ratio, on the top 53 bits so that the comparison is exact in double.
    const double u = static_cast<double>(dropout_keep_hash(seed, index) >> 11) * 0x1.0p-53;
    mask[e] = u >= ratio ? 1 : 0;
    y[e] = x[e] * dropout_factor(mask[e], scale);
  }
}

void dropout_apply(std::int64_t count, double ratio, const std::uint8_t* mask, const float* x, float* y) {
  const float scale = dropout_scale(ratio);
  for (i64 e = 0; e < count; ++e) y[e] = x[e] * dropout_factor(mask[e], scale);
}

void dropout_backward(std::int64_t count, double ratio, const std::uint8_t* mask, const float* dy, float* dx,
                      bool accumulate) {
  const float scale = dropout_scale(ratio);
  for (i64 e = 0; e < count; ++e) {
    const float g = dy[e] * dropout_factor(mask[e], scale);
    dx[e] = accumulate ? dx[e] + g : g;
  }
}

// ---- add, concat ----

void add_forward(std::int64_t count, const std::vector<const float*>& xs, float* y) {
  if (xs.empty()) {
    std::fill(y, y + count, 0.0f);
    return;
  }
  std::copy(xs[0], xs[0] + count, y);
  for (std::size_t i = 1; i < xs.size(); ++i)
    for (i64 e = 0; e < count; ++e) y[e] += xs[i][e];
}

void add_backward(std::int64_t count, const float* dy, float* dx, bool accumulate) { store(count, dy, dx, accumulate); }

void concat_forward(std::int64_t n, std::int64_t hw, const std::vector<std::int64_t>& cs,
                    const std::vector<const float*>& xs, float* y) {
  UCPLAN_KERNEL_CHECK(cs.size() == xs.size(), "concat: one channel count per input");
  i64 total = 0;
  for (i64 c : cs) total += c;
  for (i64 s = 0; s < n; ++s) {
    i64 offset = 0;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const i64 block = cs[i] * hw;
      std::copy(xs[i] + s * block, xs[i] + (s + 1) * block, y + (s * total + offset) * hw);
      offset += cs[i];
    }
  }
}

void concat_backward(std::int64_t n, std::int64_t hw, const std::vector<std::int64_t>& cs, std::size_t i,
                     const float* dy, float* dx, bool accumulate) {
  UCPLAN_KERNEL_CHECK(i < cs.size(), "concat: input index out of range");
  i64 total = 0, offset = 0;
  for (std::size_t j = 0; j < cs.size(); ++j) {
    if (j < i) offset += cs[j];
    total += cs[j];
  }
  const i64 block = cs[i] * hw;
  for (i64 s = 0; s < n; ++s) store(block, dy + (s * total + offset) * hw, dx + s * block, accumulate);
}

// ---- softmax + cross-entropy ----

double softmax_loss_forward(std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels, float* prob) {
  double loss = 0;
  for (i64 s = 0; s < n; ++s) {
    const float* xs = x + s * k;
    float* ps = prob + s * k;
    UCPLAN_KERNEL_CHECK(labels[s] >= 0 && labels[s] < k, "softmax_loss: label out of range");
    const float top = *std::max_element(xs, xs + k);
    double total = 0;
    for (i64 j = 0; j < k; ++j) total += std::exp(static_cast<double>(xs[j]) - top);
    for (i64 j = 0; j < k; ++j) ps[j] = static_cast<float>(std::exp(static_cast<double>(xs[j]) - top) / total);
    // -log(prob[label]) without rounding prob first: log(sum exp(x - top)) - (x[label] - top).
    loss += std::log(total) - (static_cast<double>(xs[labels[s]]) - top);
  }
  return loss;
}

void softmax_loss_backward(std::int64_t n, std::int64_t k, const float* prob, const std::int32_t* labels, double scale,
                           float* dx, bool accumulate) {
  for (i64 s = 0; s < n; ++s) {
    UCPLAN_KERNEL_CHECK(labels[s] >= 0 && labels[s] < k, "softmax_loss: label out of range");
    for (i64 j = 0; j < k; ++j) {
      const double onehot = j == labels[s] ? 1.0 : 0.0;
      const auto g = static_cast<float>(scale * (prob[s * k + j] - onehot));
      dx[s * k + j] = accumulate ? dx[s * k + j] + g : g;
    }
  }
}

// ---- update ----

// ---- point-wise activations ----

void activation_forward(const ActivationDims& d, std::int64_t count, const float* x, float* y) {
  for (i64 e = 0; e < count; ++e) y[e] = activation_value(d, x[e]);
}

void activation_backward(const ActivationDims& d, std::int64_t count, const float* v, const float* dy, float* dx,
                         bool accumulate) {
  for (i64 e = 0; e < count; ++e) {
    const float g = dy[e] * activation_derivative(d, v[e]);
    dx[e] = accumulate ? dx[e] + g : g;
  }
}

// ---- multiply (x of shape n x c x plane by s of the same shape or n x c x 1) ----

void mul_forward(const MulDims& d, const float* x, const float* s, float* y) {
  const i64 count = d.n * d.c * d.plane;
  if (!d.per_channel) {
    for (i64 e = 0; e < count; ++e) y[e] = x[e] * s[e];
    return;
  }
  for (i64 nc = 0; nc < d.n * d.c; ++nc)
    for (i64 p = 0; p < d.plane; ++p) y[nc * d.plane + p] = x[nc * d.plane + p] * s[nc];
}

void mul_backward(const MulDims& d, const float* x, const float* s, const float* dy, float* dx, bool accumulate_dx,
                  float* ds, bool accumulate_ds) {
  const i64 rows = d.n * d.c;
  for (i64 nc = 0; nc < rows; ++nc) {
    const float* dyp = dy + nc * d.plane;
    if (dx) {
      float* dxp = dx + nc * d.plane;
      for (i64 p = 0; p < d.plane; ++p) {
        const float g = dyp[p] * (d.per_channel ? s[nc] : s[nc * d.plane + p]);
        dxp[p] = accumulate_dx ? dxp[p] + g : g;
      }
    }
    if (!ds) continue;
    const float* xp = x + nc * d.plane;
    if (d.per_channel) {
      const float g = dot(dyp, xp, 1, d.plane);
      ds[nc] = accumulate_ds ? ds[nc] + g : g;
    } else {
      float* dsp = ds + nc * d.plane;
      for (i64 p = 0; p < d.plane; ++p) dsp[p] = accumulate_ds ? dsp[p] + dyp[p] * xp[p] : dyp[p] * xp[p];
    }
  }
}

// ---- per-channel scale ----

void scale_forward(std::int64_t n, std::int64_t c, std::int64_t plane, const float* x, const float* gamma, float* y) {
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < c; ++k) {
      const float* xp = x + (i * c + k) * plane;
      float* yp = y + (i * c + k) * plane;
      for (i64 p = 0; p < plane; ++p) yp[p] = xp[p] * gamma[k];
    }
}

void scale_backward(std::int64_t n, std::int64_t c, std::int64_t plane, const float* x, const float* gamma,
                    const float* dy, float* dx, bool accumulate, float* dgamma) {
  for (i64 k = 0; k < c; ++k) {
    double g = 0;
    for (i64 i = 0; i < n; ++i) g += dot(dy + (i * c + k) * plane, x + (i * c + k) * plane, 1, plane);
    dgamma[k] += static_cast<float>(g);
  }
  if (!dx) return;
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < c; ++k) {
      const float* dyp = dy + (i * c + k) * plane;
      float* dxp = dx + (i * c + k) * plane;
      for (i64 p = 0; p < plane; ++p) dxp[p] = accumulate ? dxp[p] + dyp[p] * gamma[k] : dyp[p] * gamma[k];
    }
}

// ---- layer norm over channels ----

void ln_forward_training(const LnDims& d, const float* x, const float* gamma, const float* beta, float* y,
                         float* saved) {
  const i64 plane = d.h * d.w;
  std::vector<double> s(static_cast<std::size_t>(plane)), sq(static_cast<std::size_t>(plane));
  for (i64 i = 0; i < d.n; ++i) {
    const float* xs = x + i * d.c * plane;
    std::fill(s.begin(), s.end(), 0.0);
    for (i64 k = 0; k < d.c; ++k)
      for (i64 p = 0; p < plane; ++p) s[p] += xs[k * plane + p];
    float* mean = saved + i * plane;
    float* inv_std = saved + d.n * plane + i * plane;
    for (i64 p = 0; p < plane; ++p) mean[p] = static_cast<float>(s[p] / static_cast<double>(d.c));
    // Deviations from the (float) mean, as bn: no E[x^2] - E[x]^2 cancellation.
    std::fill(sq.begin(), sq.end(), 0.0);
    for (i64 k = 0; k < d.c; ++k)
      for (i64 p = 0; p < plane; ++p) {
        const double dev = static_cast<double>(xs[k * plane + p]) - mean[p];
        sq[p] += dev * dev;
      }
    for (i64 p = 0; p < plane; ++p)
      inv_std[p] = static_cast<float>(1.0 / std::sqrt(sq[p] / static_cast<double>(d.c) + d.eps));
  }
  ln_forward_saved(d, x, gamma, beta, saved, y);
}

void ln_forward_saved(const LnDims& d, const float* x, const float* gamma, const float* beta, const float* saved,
                      float* y) {
  const i64 plane = d.h * d.w;
  for (i64 i = 0; i < d.n; ++i) {
    const float* mean = saved + i * plane;
    const float* inv_std = saved + d.n * plane + i * plane;
    for (i64 k = 0; k < d.c; ++k) {
      const float* xp = x + (i * d.c + k) * plane;
      float* yp = y + (i * d.c + k) * plane;
      for (i64 p = 0; p < plane; ++p) yp[p] = (xp[p] - mean[p]) * inv_std[p] * gamma[k] + beta[k];
    }
  }
}

void ln_backward(const LnDims& d, const float* x, const float* gamma, const float* saved, const float* dy, float* dx,
                 float* dgamma_dbeta, bool accumulate) {
  // With xhat = (x - mean) inv_std and g = dy gamma over the channels of one pixel:
  // dx = inv_std (g - mean(g) - xhat mean(g xhat)); dgamma = sum dy xhat; dbeta = sum dy.
  const i64 plane = d.h * d.w;
  std::vector<double> mg(static_cast<std::size_t>(plane)), mgx(static_cast<std::size_t>(plane));
  std::vector<double> dgamma(static_cast<std::size_t>(d.c), 0.0), dbeta(static_cast<std::size_t>(d.c), 0.0);
  for (i64 i = 0; i < d.n; ++i) {
    const float* mean = saved + i * plane;
    const float* inv_std = saved + d.n * plane + i * plane;
    std::fill(mg.begin(), mg.end(), 0.0);
    std::fill(mgx.begin(), mgx.end(), 0.0);
    for (i64 k = 0; k < d.c; ++k) {
      const float* xp = x + (i * d.c + k) * plane;
      const float* dyp = dy + (i * d.c + k) * plane;
      double dg = 0, db = 0;
      for (i64 p = 0; p < plane; ++p) {
        const double xhat = (static_cast<double>(xp[p]) - mean[p]) * inv_std[p];
        const double g = static_cast<double>(dyp[p]) * gamma[k];
        mg[p] += g;
        mgx[p] += g * xhat;
        dg += dyp[p] * xhat;
        db += dyp[p];
      }
      dgamma[k] += dg;
      dbeta[k] += db;
    }
    if (!dx) continue;
    for (i64 k = 0; k < d.c; ++k) {
      const float* xp = x + (i * d.c + k) * plane;
      const float* dyp = dy + (i * d.c + k) * plane;
      float* dxp = dx + (i * d.c + k) * plane;
      for (i64 p = 0; p < plane; ++p) {
        const double xhat = (static_cast<double>(xp[p]) - mean[p]) * inv_std[p];
        const double g = static_cast<double>(dyp[p]) * gamma[k];
        const float v = static_cast<float>(
            inv_std[p] * (g - mg[p] / static_cast<double>(d.c) - xhat * mgx[p] / static_cast<double>(d.c)));
        dxp[p] = accumulate ? dxp[p] + v : v;
      }
    }
  }
  for (i64 k = 0; k < d.c; ++k) {
    dgamma_dbeta[k] += static_cast<float>(dgamma[k]);
    dgamma_dbeta[d.c + k] += static_cast<float>(dbeta[k]);
  }
}

// ---- channel shuffle and slice ----

void channel_shuffle_forward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups, const float* x,
                             float* y) {
  const i64 per = c / groups;
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < groups; ++j)
      for (i64 k = 0; k < per; ++k)
        std::copy_n(x + (i * c + j * per + k) * plane, plane, y + (i * c + k * groups + j) * plane);
}

void channel_shuffle_backward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups, const float* dy,
                              float* dx, bool accumulate) {
  const i64 per = c / groups;
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < groups; ++j)
      for (i64 k = 0; k < per; ++k)
        store(plane, dy + (i * c + k * groups + j) * plane, dx + (i * c + j * per + k) * plane, accumulate);
}

void slice_forward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin, std::int64_t end,
                   const float* x, float* y) {
  const i64 width = (end - begin) * plane;
  for (i64 i = 0; i < n; ++i) std::copy_n(x + (i * c + begin) * plane, width, y + i * width);
}

void slice_backward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin, std::int64_t end,
                    const float* dy, float* dx, bool accumulate) {
  const i64 width = (end - begin) * plane;
  for (i64 i = 0; i < n; ++i) {
    float* dxs = dx + i * c * plane;
    if (!accumulate) {
      std::fill(dxs, dxs + begin * plane, 0.0f);
      std::fill(dxs + end * plane, dxs + c * plane, 0.0f);
    }
    store(width, dy + i * width, dxs + begin * plane, accumulate);
  }
}

void sgd_update(std::int64_t count, double lr, const float* dw, float* w) {
  const auto rate = static_cast<float>(lr);
  for (i64 e = 0; e < count; ++e) w[e] -= rate * dw[e];
}

}  // namespace ucplan::cpu
