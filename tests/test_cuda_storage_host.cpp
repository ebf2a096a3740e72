// The CUDA kernels' 16-bit instantiations without a GPU: their host mirrors (namespace host of
// small_kernels.h and modern_kernels.h: the kernels' own per-thread functions, templated on the
// storage type) at bf16 and fp16, against
//   - the CPU backend's emulation of that storage (cpu_ops.h run_emulated): the FP32 CPU kernel on
//     widened copies, what it writes rounded to nearest even; bit for bit wherever the kernel's
//     FP32 threads give the CPU's bits (tests/test_cuda_modern_host.cpp, and the pool and LRN
//     cases here at FP32);
//   - the kernel's own FP32 threads on widened copies, then rounded (what the CUDA backend did
//     before the kernels were templated: widen, the FP32 kernel, narrow); bit for bit everywhere,
//     reductions included.
// Inputs are random 16-bit values with NaN, infinities, -0, values whose products or sums overflow
// fp16, and pairs whose sums and products fall exactly halfway between two 16-bit values; every
// case counts the stores that were such ties and requires some (round to nearest even is where a
// conversion most easily goes wrong). On a GPU, ucplan-gpu-check compares the device's
// conversions with executor/cpu/half.h's, which these mirrors use.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "float_bits.h"
#include "executor/cpu/half.h"
#include "executor/cpu/kernels.h"
#include "executor/cuda/modern_kernels.h"
#include "executor/cuda/small_kernels.h"

using namespace ucplan;
namespace host = ucplan::cuda::host;
namespace dhost = ucplan::cuda::detail::host;

namespace {

using ucplan::test::same_bits;

template <typename T>
cpu::Half half_of() {
  return std::is_same_v<T, __nv_bfloat16> ? cpu::Half::BF16 : cpu::Half::FP16;
}
template <typename T>
const char* name_of() {
  return std::is_same_v<T, __nv_bfloat16> ? "bf16" : "fp16";
}
// Stored mantissa bits: 1 + 2^-m is the value after 1.
template <typename T>
int mantissa_bits() {
  return std::is_same_v<T, __nv_bfloat16> ? 7 : 10;
}

std::uint16_t bits_of(__nv_bfloat16 v) { return __bfloat16_as_ushort(v); }
std::uint16_t bits_of(__half v) { return __half_as_ushort(v); }
template <typename T>
T from_bits(std::uint16_t b) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __ushort_as_bfloat16(b);
  else
    return __ushort_as_half(b);
}

// 16-bit values from floats, rounded as the CPU emulation stores them, and back.
template <typename T>
std::vector<T> stored(const std::vector<float>& v) {
  std::vector<std::uint16_t> bits(v.size());
  cpu::narrow(half_of<T>(), v.data(), bits.data(), static_cast<std::int64_t>(v.size()));
  std::vector<T> out;
  for (std::uint16_t b : bits) out.push_back(from_bits<T>(b));
  return out;
}
template <typename T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<std::uint16_t> bits;
  for (const T& e : v) bits.push_back(bits_of(e));
  std::vector<float> out(v.size());
  cpu::widen(half_of<T>(), bits.data(), out.data(), static_cast<std::int64_t>(v.size()));
  return out;
}

// Whether `v` lies exactly halfway between two neighbouring values of the type (normal range):
// the bits below the type's last place are 1 followed by zeros.
bool tie(float v, cpu::Half t) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(v) & 0x7fffffffu;
  if (u >= 0x7f800000u || u == 0) return false;
  if (t == cpu::Half::BF16) return (u & 0xffffu) == 0x8000u;
  return u >= 0x38800000u && u < 0x477ff000u && (u & 0x1fffu) == 0x1000u;  // fp16 normals
}

// Compares what the mirror stored (got) with FP32 results rounded as the emulation rounds them:
// the same bits, or NaN on both sides (a NaN's payload depends on the operations that made it).
// Counts the ties among the FP32 results into *ties.
template <typename T>
bool same_as_rounded(const std::vector<T>& got, const std::vector<float>& fp32, int* ties) {
  const std::vector<T> want = stored<T>(fp32);
  const std::vector<float> g = widened(got), w = widened(want);
  bool same = got.size() == fp32.size();
  for (std::size_t i = 0; same && i < got.size(); ++i) {
    if (tie(fp32[i], half_of<T>())) ++*ties;
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (bits_of(got[i]) != bits_of(want[i])) {
      MESSAGE(name_of<T>(), ": element ", i, " stored ", g[i], ", the emulation ", w[i], " (FP32 ", fp32[i], ")");
      same = false;
    }
  }
  return same;
}

// n random 16-bit values in [lo, hi); the first ones are special: NaN, an infinity, -0, a value
// near fp16's largest, and, at positions that differ with the seed (so that two inputs pair them
// differently), 1 + 2^-m, 1.5 and 2^-(m+1), whose sums and products are ties of the type.
template <typename T>
std::vector<T> values(std::size_t n, unsigned seed, float lo = -1, float hi = 1, bool specials = true) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  const float m = std::ldexp(1.0f, -mantissa_bits<T>());
  const std::vector<float> ties{1 + m, 1.5f, m / 2, 1.0f, -(1 + m), 3 * m / 2, 1 + 2 * m};
  for (std::size_t i = 0; i < 32 && 8 + i < n; ++i) v[8 + i] = ties[(i + seed) % ties.size()];
  if (specials && n >= 8) {
    v[0] = std::numeric_limits<float>::quiet_NaN();
    v[1] = -std::numeric_limits<float>::infinity();
    v[2] = -0.0f;
    v[3] = 60000.0f;
  }
  return stored<T>(v);
}

template <typename T>
void check_activations(int* ties) {
  using cpu::Activation;
  const std::vector<cpu::ActivationDims> fs{
      {Activation::Sigmoid},          {Activation::HardSigmoid, 1.0f / 6.0f, 0.5f},
      {Activation::HardSwish},        {Activation::Silu},
      {Activation::Clip, 0.0f, 6.0f}, {Activation::Gelu},
      {Activation::GeluTanh}};
  const std::size_t count = 2000;
  const auto n = static_cast<std::int64_t>(count);
  const auto x = values<T>(count, 1, -8, 8), dy = values<T>(count, 2), dx0 = values<T>(count, 3);
  const auto xw = widened(x), dyw = widened(dy), dx0w = widened(dx0);
  for (const auto& d : fs) {
    CAPTURE(static_cast<int>(d.f));
    std::vector<T> y(count);
    std::vector<float> y_ref(count), y_fp32(count);
    host::activation_forward(d, n, x.data(), y.data());
    cpu::activation_forward(d, n, xw.data(), y_ref.data());
    host::activation_forward(d, n, xw.data(), y_fp32.data());
    CHECK(same_as_rounded(y, y_ref, ties));
    CHECK(same_as_rounded(y, y_fp32, ties));
    // The backward reads the stored y (or x): the emulation widens that stored value.
    const bool reads_y = cpu::activation_backward_reads_y(d.f);
    const std::vector<T>& v = reads_y ? y : x;
    const std::vector<float> vw = widened(v);
    for (bool acc : {false, true}) {
      CAPTURE(acc);
      std::vector<T> dx = dx0;
      std::vector<float> dx_ref = dx0w, dx_fp32 = dx0w;
      host::activation_backward(d, n, v.data(), dy.data(), dx.data(), acc);
      cpu::activation_backward(d, n, vw.data(), dyw.data(), dx_ref.data(), acc);
      host::activation_backward(d, n, vw.data(), dyw.data(), dx_fp32.data(), acc);
      CHECK(same_as_rounded(dx, dx_ref, ties));
      CHECK(same_as_rounded(dx, dx_fp32, ties));
    }
  }
}

template <typename T>
void check_mul(int* ties) {
  for (bool per_channel : {false, true}) {
    CAPTURE(per_channel);
    const cpu::MulDims d{3, 8, 45, per_channel};  // plane 45: a warp's lanes wrap over each ds row
    const std::size_t nx = 3 * 8 * 45, ns = per_channel ? 3 * 8 : nx;
    const auto x = values<T>(nx, 11), s = values<T>(ns, 12, -2, 2), dy = values<T>(nx, 13);
    const auto dx0 = values<T>(nx, 14), ds0 = values<T>(ns, 15);
    const auto xw = widened(x), sw = widened(s), dyw = widened(dy), dx0w = widened(dx0), ds0w = widened(ds0);
    std::vector<T> y(nx);
    std::vector<float> y_ref(nx), y_fp32(nx);
    host::mul_forward(d, x.data(), s.data(), y.data());
    cpu::mul_forward(d, xw.data(), sw.data(), y_ref.data());
    host::mul_forward(d, xw.data(), sw.data(), y_fp32.data());
    CHECK(same_as_rounded(y, y_ref, ties));
    CHECK(same_as_rounded(y, y_fp32, ties));
    for (bool acc : {false, true}) {
      CAPTURE(acc);
      std::vector<T> dx = dx0, ds = ds0;
      std::vector<float> dx_ref = dx0w, ds_ref = ds0w, dx_fp32 = dx0w, ds_fp32 = ds0w;
      host::mul_backward(d, x.data(), s.data(), dy.data(), dx.data(), acc, ds.data(), !acc);
      cpu::mul_backward(d, xw.data(), sw.data(), dyw.data(), dx_ref.data(), acc, ds_ref.data(), !acc);
      host::mul_backward(d, xw.data(), sw.data(), dyw.data(), dx_fp32.data(), acc, ds_fp32.data(), !acc);
      CHECK(same_as_rounded(dx, dx_ref, ties));
      CHECK(same_as_rounded(dx, dx_fp32, ties));
      // Per channel, ds is a double warp reduction, not the CPU's float lanes: the FP32 threads'.
      if (!per_channel) CHECK(same_as_rounded(ds, ds_ref, ties));
      CHECK(same_as_rounded(ds, ds_fp32, ties));
    }
  }
}

template <typename T>
void check_scale(int* ties) {
  const std::int64_t n = 3, c = 5, plane = 67;
  const std::size_t count = n * c * plane;
  const auto x = values<T>(count, 21), dy = values<T>(count, 23), dx0 = values<T>(count, 24);
  const auto xw = widened(x), dyw = widened(dy), dx0w = widened(dx0);
  std::vector<float> g(c, 1.5f), dg0(c, 0.25f);
  g[1] = 0.75f;
  std::vector<T> y(count);
  std::vector<float> y_ref(count);
  host::scale_forward(n, c, plane, x.data(), g.data(), y.data());
  cpu::scale_forward(n, c, plane, xw.data(), g.data(), y_ref.data());
  CHECK(same_as_rounded(y, y_ref, ties));
  for (bool acc : {false, true}) {
    CAPTURE(acc);
    std::vector<T> dx = dx0;
    std::vector<float> dx_ref = dx0w, dg = dg0, dg_ref = dg0, dg_fp32 = dg0, dx_fp32 = dx0w;
    host::scale_backward(n, c, plane, x.data(), g.data(), dy.data(), dx.data(), acc, dg.data());
    cpu::scale_backward(n, c, plane, xw.data(), g.data(), dyw.data(), dx_ref.data(), acc, dg_ref.data());
    host::scale_backward(n, c, plane, xw.data(), g.data(), dyw.data(), dx_fp32.data(), acc, dg_fp32.data());
    CHECK(same_as_rounded(dx, dx_ref, ties));
    CHECK(same_bits(dg, dg_fp32));  // FP32 dgamma: the FP32 threads' double sums of the same values
  }
}

template <typename T>
void check_layer_norm(int* ties) {
  for (const cpu::LnDims d : {cpu::LnDims{3, 6, 5, 7, 1e-5}, cpu::LnDims{2, 40, 1, 1, 1e-6}}) {
    CAPTURE(d.c);
    const std::int64_t pixels = d.n * d.h * d.w;
    const std::size_t count = d.n * d.c * d.h * d.w;
    // No NaN here: one poisons a whole pixel's statistics, which the FP32 tests cover.
    const auto x = values<T>(count, 31, -2, 3, false), dy = values<T>(count, 33, -1, 1, false);
    const auto dx0 = values<T>(count, 34);
    const auto xw = widened(x), dyw = widened(dy), dx0w = widened(dx0);
    std::vector<float> gb(2 * d.c), dgb0(2 * d.c, 0.5f);
    for (std::int64_t k = 0; k < 2 * d.c; ++k) gb[k] = 0.5f + 0.125f * static_cast<float>(k % 9);
    std::vector<T> y(count), y_re(count);
    std::vector<float> s(2 * pixels), s_ref(2 * pixels), y_ref(count);
    host::ln_forward_training(d, x.data(), gb.data(), gb.data() + d.c, y.data(), s.data());
    cpu::ln_forward_training(d, xw.data(), gb.data(), gb.data() + d.c, y_ref.data(), s_ref.data());
    CHECK(same_bits(s, s_ref));
    CHECK(same_as_rounded(y, y_ref, ties));
    host::ln_forward_saved(d, x.data(), gb.data(), gb.data() + d.c, s.data(), y_re.data());
    CHECK(widened(y) == widened(y_re));  // a recomputation stores the same values (no NaN here)
    for (bool acc : {false, true}) {
      CAPTURE(acc);
      std::vector<T> dx = dx0;
      std::vector<float> dx_ref = dx0w, dx_fp32 = dx0w, dgb = dgb0, dgb_ref = dgb0, dgb_fp32 = dgb0;
      host::ln_backward(d, x.data(), gb.data(), s.data(), dy.data(), dx.data(), dgb.data(), acc);
      cpu::ln_backward(d, xw.data(), gb.data(), s_ref.data(), dyw.data(), dx_ref.data(), dgb_ref.data(), acc);
      host::ln_backward(d, xw.data(), gb.data(), s.data(), dyw.data(), dx_fp32.data(), dgb_fp32.data(), acc);
      CHECK(same_as_rounded(dx, dx_ref, ties));
      CHECK(same_bits(dgb, dgb_fp32));
    }
  }
}

template <typename T>
void check_moves(int* ties) {
  const std::int64_t n = 2, c = 6, plane = 10;
  const std::size_t count = n * c * plane;
  const auto x = values<T>(count, 41), dx0 = values<T>(count, 42);
  const auto xw = widened(x), dx0w = widened(dx0);
  for (std::int64_t groups : {2, 3}) {
    CAPTURE(groups);
    std::vector<T> y(count);
    std::vector<float> y_ref(count);
    host::channel_shuffle_forward(n, c, plane, groups, x.data(), y.data());
    cpu::channel_shuffle_forward(n, c, plane, groups, xw.data(), y_ref.data());
    CHECK(same_as_rounded(y, y_ref, ties));
    for (bool acc : {false, true}) {
      std::vector<T> dx = dx0;
      std::vector<float> dx_ref = dx0w;
      host::channel_shuffle_backward(n, c, plane, groups, x.data(), dx.data(), acc);
      cpu::channel_shuffle_backward(n, c, plane, groups, xw.data(), dx_ref.data(), acc);
      CHECK(same_as_rounded(dx, dx_ref, ties));
    }
  }
  const std::int64_t begin = 2, end = 5;
  const std::size_t ny = n * (end - begin) * plane;
  std::vector<T> y(ny);
  std::vector<float> y_ref(ny);
  host::slice_forward(n, c, plane, begin, end, x.data(), y.data());
  cpu::slice_forward(n, c, plane, begin, end, xw.data(), y_ref.data());
  CHECK(same_as_rounded(y, y_ref, ties));
  const auto dy = values<T>(ny, 43);
  const auto dyw = widened(dy);
  for (bool acc : {false, true}) {
    std::vector<T> dx = dx0;
    std::vector<float> dx_ref = dx0w;
    host::slice_backward(n, c, plane, begin, end, dy.data(), dx.data(), acc);
    cpu::slice_backward(n, c, plane, begin, end, dyw.data(), dx_ref.data(), acc);
    CHECK(same_as_rounded(dx, dx_ref, ties));
  }
}

// A layer whose forward reads x and writes y and whose backward reads x, y and dy and writes (or
// adds into) dx, as pooling and LRN: the host mirror at T stores the CPU emulation's bits (the
// CPU kernels on widened copies, rounded), and the mirror at FP32 gives the CPU's own bits.
template <typename T, typename MirrorFwd, typename CpuFwd, typename MirrorBwd, typename CpuBwd>
void check_forward_backward(const std::vector<T>& x, const std::vector<T>& dy, const std::vector<T>& dx0,
                            std::size_t ny, MirrorFwd mirror_fwd, CpuFwd cpu_fwd, MirrorBwd mirror_bwd, CpuBwd cpu_bwd,
                            int* ties) {
  const auto xw = widened(x), dyw = widened(dy), dx0w = widened(dx0);
  std::vector<T> y(ny);
  std::vector<float> y_ref(ny), y_fp32(ny);
  mirror_fwd(x.data(), y.data());
  cpu_fwd(xw.data(), y_ref.data());
  mirror_fwd(xw.data(), y_fp32.data());
  CHECK(same_bits(y_fp32, y_ref));
  CHECK(same_as_rounded(y, y_ref, ties));
  const std::vector<float> yw = widened(y);
  for (bool acc : {false, true}) {
    CAPTURE(acc);
    std::vector<T> dx = dx0;
    std::vector<float> dx_ref = dx0w, dx_fp32 = dx0w;
    mirror_bwd(x.data(), y.data(), dy.data(), dx.data(), acc);
    cpu_bwd(xw.data(), yw.data(), dyw.data(), dx_ref.data(), acc);
    mirror_bwd(xw.data(), yw.data(), dyw.data(), dx_fp32.data(), acc);
    CHECK(same_bits(dx_fp32, dx_ref));
    CHECK(same_as_rounded(dx, dx_ref, ties));
  }
}

cuda::detail::PoolShape pool_shape(const cpu::PoolDims& d) {
  return {d.n * d.c, d.h, d.w, d.ho, d.wo, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.max, d.count_include_pad};
}

// The pooling cases of ucplan-gpu-check's custom kernel: max and average, padding, ceil-mode
// sizes (the last window clipped), global average pooling (one window, the whole plane: its
// backward runs on this kernel, not cuDNN's), and a constant input (max ties: the first position
// wins).
std::vector<cpu::PoolDims> pool_cases() {
  std::vector<cpu::PoolDims> cases;
  cpu::PoolDims d{.n = 2, .c = 3, .h = 9, .w = 9, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1};
  d.ho = d.wo = 5;
  for (bool max : {true, false})
    for (bool include_pad : {true, false}) {
      d.max = max;
      d.count_include_pad = include_pad;
      cases.push_back(d);
    }
  cpu::PoolDims ceil{.n = 2, .c = 3, .h = 8, .w = 8, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ho = 4, .wo = 4};
  cases.push_back(ceil);
  ceil.max = false;
  cases.push_back(ceil);
  cases.push_back({.n = 2, .c = 3, .h = 7, .w = 5, .kh = 7, .kw = 5, .sh = 1, .sw = 1, .ho = 1, .wo = 1, .max = false});
  return cases;
}

template <typename T>
void check_pool(int* ties) {
  for (const cpu::PoolDims& d : pool_cases()) {
    for (bool constant : {false, true}) {
      CAPTURE(d.max);
      CAPTURE(d.count_include_pad);
      CAPTURE(d.ho);
      CAPTURE(constant);
      const std::size_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.ho * d.wo;
      const auto x = constant ? stored<T>(std::vector<float>(nx, 0.5f)) : values<T>(nx, 51);
      const auto dy = values<T>(ny, 52), dx0 = values<T>(nx, 53);
      const auto p = pool_shape(d);
      check_forward_backward(
          x, dy, dx0, ny, [&](const auto* in, auto* out) { dhost::pool_forward(p, in, out); },
          [&](const float* in, float* out) { cpu::pool_forward(d, in, out); },
          [&](const auto* xx, const auto* yy, const auto* dyy, auto* dxx, bool acc) {
            dhost::pool_backward(p, xx, yy, dyy, dxx, acc);
          },
          [&](const float* xx, const float* yy, const float* dyy, float* dxx, bool acc) {
            cpu::pool_backward(d, xx, yy, dyy, dxx, acc);
          },
          ties);
    }
  }
}

// The backend's LrnShape of these dims (small_kernels.h).
cuda::detail::LrnShape lrn_shape(const cpu::LrnDims& d) {
  return cuda::detail::lrn_shape(d.n, d.c, d.h * d.w, d.size, d.alpha, d.beta, d.k);
}

template <typename T>
void check_lrn(int* ties) {
  for (const auto& [size, k] : std::vector<std::pair<std::int64_t, double>>{{5, 1.0}, {4, 2.0}, {3, 1e-6}}) {
    CAPTURE(size);
    const cpu::LrnDims d{2, 7, 3, 4, size, 1e-2, 0.75, k};
    const std::size_t count = d.n * d.c * d.h * d.w;
    const auto x = values<T>(count, 61, -3, 3), dy = values<T>(count, 62), dx0 = values<T>(count, 63);
    const auto l = lrn_shape(d);
    check_forward_backward(
        x, dy, dx0, count, [&](const auto* in, auto* out) { dhost::lrn_forward(l, in, out); },
        [&](const float* in, float* out) { cpu::lrn_forward(d, in, out); },
        [&](const auto* xx, const auto* yy, const auto* dyy, auto* dxx, bool acc) {
          dhost::lrn_backward(l, xx, yy, dyy, dxx, acc);
        },
        [&](const float* xx, const float* yy, const float* dyy, float* dxx, bool acc) {
          cpu::lrn_backward(d, xx, yy, dyy, dxx, acc);
        },
        ties);
  }
}

// Runs check(type, &ties) at bf16 and at fp16. Where `tied` each must have stored ties: every
// kernel whose results are products, sums or averages of 16-bit values stores some; layer norm's
// and LRN's (divisions, square roots, powers) are ties only by chance, and store through the same
// from_float as the others.
template <typename F>
void at_both_types(F check, bool tied = true) {
  int ties = 0;
  check(std::type_identity<__nv_bfloat16>{}, &ties);
  MESSAGE("bf16: ", ties, " stores of a tie");
  if (tied) CHECK(ties > 0);
  ties = 0;
  check(std::type_identity<__half>{}, &ties);
  MESSAGE("fp16: ", ties, " stores of a tie");
  if (tied) CHECK(ties > 0);
}

}  // namespace

TEST_CASE("16-bit CUDA activation threads store the CPU emulation's bits") {
  at_both_types([](auto t, int* ties) { check_activations<typename decltype(t)::type>(ties); });
}

TEST_CASE("16-bit CUDA mul threads store the CPU emulation's bits, per-channel ds the FP32 threads'") {
  at_both_types([](auto t, int* ties) { check_mul<typename decltype(t)::type>(ties); });
}

TEST_CASE("16-bit CUDA scale threads: the emulation's y and dx, the FP32 threads' dgamma") {
  at_both_types([](auto t, int* ties) { check_scale<typename decltype(t)::type>(ties); });
}

TEST_CASE("16-bit CUDA layer norm threads: the CPU's statistics, the emulation's y and dx, recompute = forward") {
  at_both_types([](auto t, int* ties) { check_layer_norm<typename decltype(t)::type>(ties); }, false);
}

TEST_CASE("16-bit CUDA channel shuffle and slice threads move the stored elements, accumulate as the emulation") {
  at_both_types([](auto t, int* ties) { check_moves<typename decltype(t)::type>(ties); });
}

TEST_CASE("CUDA pooling threads: the CPU's bits at FP32, the emulation's at bf16 and fp16") {
  at_both_types([](auto t, int* ties) { check_pool<typename decltype(t)::type>(ties); });
}

TEST_CASE("CUDA LRN threads: the CPU's bits at FP32, the emulation's at bf16 and fp16") {
  at_both_types([](auto t, int* ties) { check_lrn<typename decltype(t)::type>(ties); }, false);
}
