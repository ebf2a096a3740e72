// The CUDA kernels of today's layer types (executor/cuda/modern_kernels.cu) without a GPU: their
// per-thread functions run on the host in the device's order (cuda::host), against the CPU
// reference. What this cannot see is the device's own math library (expf, erff, tanhf differ from
// glibc's by ulps) and the launch itself; ucplan-gpu-check compares those on a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "float_bits.h"
#include "executor/cpu/kernels.h"
#include "executor/cuda/modern_kernels.h"

using namespace ucplan;
namespace host = ucplan::cuda::host;

namespace {

using ucplan::test::same_bits;

std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// max |a - b| / max(max |a|, 1e-6), NaN where exactly one of a pair is NaN.
double rel_err(const std::vector<float>& ref, const std::vector<float>& got) {
  double scale = 1e-6, err = 0;
  for (float r : ref) scale = std::max(scale, static_cast<double>(std::fabs(r)));
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(ref[i]) != std::isnan(got[i])) return std::numeric_limits<double>::quiet_NaN();
    if (!std::isnan(ref[i])) err = std::max(err, std::fabs(static_cast<double>(ref[i]) - got[i]));
  }
  return err / scale;
}

}  // namespace

TEST_CASE("CUDA activation threads compute the CPU's activations, NaN passed on") {
  using cpu::Activation;
  const std::vector<cpu::ActivationDims> fs{
      {Activation::Sigmoid},          {Activation::HardSigmoid, 1.0f / 6.0f, 0.5f},
      {Activation::HardSwish},        {Activation::Silu},
      {Activation::Clip, 0.0f, 6.0f}, {Activation::Gelu},
      {Activation::GeluTanh}};
  auto x = random_floats(301, 1, -8, 8);
  // The kinks, where the two sides' derivatives differ, and a NaN (check mode's poison).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float k : {-3.0f, 3.0f, 0.0f, 6.0f, nan}) x.push_back(k);
  const auto dy = random_floats(x.size(), 2), dx0 = random_floats(x.size(), 3);
  const auto n = static_cast<std::int64_t>(x.size());
  for (const auto& d : fs) {
    CAPTURE(static_cast<int>(d.f));
    std::vector<float> y_ref(x.size()), y(x.size());
    cpu::activation_forward(d, n, x.data(), y_ref.data());
    host::activation_forward(d, n, x.data(), y.data());
    CHECK(same_bits(y_ref, y));
    CHECK(std::isnan(y.back()));
    const std::vector<float>& v = cpu::activation_backward_reads_y(d.f) ? y_ref : x;
    for (bool acc : {false, true}) {
      std::vector<float> dx_ref = dx0, dx = dx0;
      cpu::activation_backward(d, n, v.data(), dy.data(), dx_ref.data(), acc);
      host::activation_backward(d, n, v.data(), dy.data(), dx.data(), acc);
      CHECK(same_bits(dx_ref, dx));
      CHECK(std::isnan(dx.back()));
    }
  }
}

TEST_CASE("CUDA mul threads: s per element or per channel, dx and ds each optional") {
  for (bool per_channel : {false, true}) {
    // plane 35: a warp's lanes wrap once over each row of the per-channel ds reduction.
    const cpu::MulDims d{3, 4, 35, per_channel};
    const std::size_t nx = 3 * 4 * 35, ns = per_channel ? 3 * 4 : nx;
    const auto x = random_floats(nx, 11), s = random_floats(ns, 12), dy = random_floats(nx, 13);
    const auto dx0 = random_floats(nx, 14), ds0 = random_floats(ns, 15);
    std::vector<float> y_ref(nx), y(nx);
    cpu::mul_forward(d, x.data(), s.data(), y_ref.data());
    host::mul_forward(d, x.data(), s.data(), y.data());
    CHECK(same_bits(y_ref, y));
    for (bool acc : {false, true}) {
      CAPTURE(per_channel);
      CAPTURE(acc);
      std::vector<float> dx_ref = dx0, ds_ref = ds0, dx = dx0, ds = ds0;
      cpu::mul_backward(d, x.data(), s.data(), dy.data(), dx_ref.data(), acc, ds_ref.data(), !acc);
      host::mul_backward(d, x.data(), s.data(), dy.data(), dx.data(), acc, ds.data(), !acc);
      CHECK(same_bits(dx_ref, dx));
      // Per channel: the CPU's float lanes against the kernel's double warp sums.
      if (per_channel)
        CHECK(rel_err(ds_ref, ds) <= 1e-5);
      else
        CHECK(same_bits(ds_ref, ds));
      // Only dx (s's producer needs no gradient): x is not given; only ds: s is not given.
      std::vector<float> dx_only = dx0, ds_only = ds0;
      host::mul_backward<float>(d, nullptr, s.data(), dy.data(), dx_only.data(), acc, nullptr, false);
      host::mul_backward<float>(d, x.data(), nullptr, dy.data(), nullptr, false, ds_only.data(), !acc);
      CHECK(same_bits(dx, dx_only));
      CHECK(same_bits(ds, ds_only));
    }
  }
}

TEST_CASE("CUDA scale threads: dgamma accumulates, dx optional without gamma") {
  const std::int64_t n = 3, c = 5, plane = 67;
  const std::size_t count = n * c * plane;
  const auto x = random_floats(count, 21), g = random_floats(c, 22, 0.5f, 1.5f), dy = random_floats(count, 23);
  const auto dx0 = random_floats(count, 24), dg0 = random_floats(c, 25);
  std::vector<float> y_ref(count), y(count);
  cpu::scale_forward(n, c, plane, x.data(), g.data(), y_ref.data());
  host::scale_forward(n, c, plane, x.data(), g.data(), y.data());
  CHECK(same_bits(y_ref, y));
  for (bool acc : {false, true}) {
    std::vector<float> dx_ref = dx0, dg_ref = dg0, dx = dx0, dg = dg0;
    cpu::scale_backward(n, c, plane, x.data(), g.data(), dy.data(), dx_ref.data(), acc, dg_ref.data());
    host::scale_backward(n, c, plane, x.data(), g.data(), dy.data(), dx.data(), acc, dg.data());
    CHECK(same_bits(dx_ref, dx));
    CHECK(rel_err(dg_ref, dg) <= 1e-5);
  }
  std::vector<float> dg = dg0, dg_ref = dg0;
  cpu::scale_backward(n, c, plane, x.data(), nullptr, dy.data(), nullptr, false, dg_ref.data());
  host::scale_backward<float>(n, c, plane, x.data(), nullptr, dy.data(), nullptr, false, dg.data());
  CHECK(rel_err(dg_ref, dg) <= 1e-5);
}

TEST_CASE("CUDA layer norm threads: the CPU's statistics and forward to the bit, recompute = forward") {
  for (const cpu::LnDims d : {cpu::LnDims{3, 6, 5, 7, 1e-5}, cpu::LnDims{2, 40, 1, 1, 1e-6}}) {
    CAPTURE(d.c);
    const std::int64_t pixels = d.n * d.h * d.w;
    const std::size_t count = d.n * d.c * d.h * d.w;
    const auto x = random_floats(count, 31, -2, 3), gb = random_floats(2 * d.c, 32, 0.5f, 1.5f);
    const auto dy = random_floats(count, 33), dx0 = random_floats(count, 34), dgb0 = random_floats(2 * d.c, 35);
    std::vector<float> y_ref(count), s_ref(2 * pixels), y(count), s(2 * pixels), y_re(count);
    cpu::ln_forward_training(d, x.data(), gb.data(), gb.data() + d.c, y_ref.data(), s_ref.data());
    host::ln_forward_training(d, x.data(), gb.data(), gb.data() + d.c, y.data(), s.data());
    CHECK(same_bits(s_ref, s));
    CHECK(same_bits(y_ref, y));
    host::ln_forward_saved(d, x.data(), gb.data(), gb.data() + d.c, s.data(), y_re.data());
    CHECK(same_bits(y, y_re));
    for (bool acc : {false, true}) {
      CAPTURE(acc);
      std::vector<float> dx_ref = dx0, dgb_ref = dgb0, dx = dx0, dgb = dgb0;
      cpu::ln_backward(d, x.data(), gb.data(), s_ref.data(), dy.data(), dx_ref.data(), dgb_ref.data(), acc);
      host::ln_backward(d, x.data(), gb.data(), s.data(), dy.data(), dx.data(), dgb.data(), acc);
      CHECK(same_bits(dx_ref, dx));
      CHECK(rel_err(dgb_ref, dgb) <= 1e-5);
    }
    std::vector<float> dgb = dgb0, dgb_ref = dgb0;  // no dx (the input needs no gradient)
    cpu::ln_backward(d, x.data(), gb.data(), s_ref.data(), dy.data(), nullptr, dgb_ref.data(), false);
    host::ln_backward<float>(d, x.data(), gb.data(), s.data(), dy.data(), nullptr, dgb.data(), false);
    CHECK(rel_err(dgb_ref, dgb) <= 1e-5);
  }
}

TEST_CASE("CUDA channel shuffle and slice threads move the CPU's elements") {
  const std::int64_t n = 2, c = 6, plane = 10;
  const std::size_t count = n * c * plane;
  const auto x = random_floats(count, 41), dx0 = random_floats(count, 42);
  for (std::int64_t groups : {1, 2, 3, 6}) {
    CAPTURE(groups);
    std::vector<float> y_ref(count), y(count);
    cpu::channel_shuffle_forward(n, c, plane, groups, x.data(), y_ref.data());
    host::channel_shuffle_forward(n, c, plane, groups, x.data(), y.data());
    CHECK(same_bits(y_ref, y));
    for (bool acc : {false, true}) {
      std::vector<float> dx_ref = dx0, dx = dx0;
      cpu::channel_shuffle_backward(n, c, plane, groups, y_ref.data(), dx_ref.data(), acc);
      host::channel_shuffle_backward(n, c, plane, groups, y_ref.data(), dx.data(), acc);
      CHECK(same_bits(dx_ref, dx));
    }
  }
  for (auto [begin, end] : {std::pair<std::int64_t, std::int64_t>{0, 6}, {2, 5}, {0, 3}, {5, 6}}) {
    CAPTURE(begin);
    CAPTURE(end);
    const std::size_t ny = n * (end - begin) * plane;
    std::vector<float> y_ref(ny), y(ny);
    cpu::slice_forward(n, c, plane, begin, end, x.data(), y_ref.data());
    host::slice_forward(n, c, plane, begin, end, x.data(), y.data());
    CHECK(same_bits(y_ref, y));
    for (bool acc : {false, true}) {
      std::vector<float> dx_ref = dx0, dx = dx0;
      cpu::slice_backward(n, c, plane, begin, end, y_ref.data(), dx_ref.data(), acc);
      host::slice_backward(n, c, plane, begin, end, y_ref.data(), dx.data(), acc);
      CHECK(same_bits(dx_ref, dx));
    }
  }
}
