// Timing of the conv configuration passes (mu-cuDNN §III) on synthetic but realistically shaped
// profiles, until measured ones exist (rerun on real profiles when they do):
//   1. pareto_front with the `all` policy at B = 256 (8 cuDNN-like algorithms per size);
//   2. the fronts of a ResNet-152-sized network at B = 128 (155 conv layers x forward /
//      backward-data / backward-filter = 465 kernels, 60 distinct shapes), powerOfTwo and all;
//   3. solve_wd over those 465 fronts for a range of total workspaces, and a sweep of 49 totals
//      (mu-cuDNN reports 716 ms with GLPK for ResNet-152 at batch 128).
// Medians of repeated runs. Usage: bench_conv_config [repeats]   (default 11)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "planner/passes/conv_config.h"

using namespace ucplan;

namespace {

constexpr double MiB = 1024.0 * 1024.0;

struct Rng {  // splitmix64: the same instances on every run
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed) {}
  double uniform() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return double((z ^ (z >> 31)) >> 11) / double(1ull << 53);
  }
};

// One convolution: per-sample FLOPs and tensor sizes drive time and workspace.
struct Conv {
  int cin, cout, k, hw;  // square images, stride 1 ("same" padding) for simplicity
};

// A cuDNN-like algorithm model. Time of a call on b samples:
//   overhead + per_sample * (b + b_half)  (small micro-batches under-use the GPU)
// with per_sample = FLOPs / (speed * 10 TFLOP/s); workspace = fixed + per-sample * b.
struct Algo {
  const char* name;
  double speed;           // relative to a plain GEMM
  double ws_fixed_mult;   // x filter bytes
  double ws_sample_mult;  // x (input + output) bytes of one sample
  bool needs_3x3;         // FFT / Winograd variants only for 3x3 here
};
const Algo kAlgos[] = {
    {"implicit_gemm", 0.8, 0.0, 0.0, false}, {"implicit_precomp_gemm", 1.0, 0.02, 0.1, false},
    {"gemm", 1.1, 0.0, 1.0, false},          {"direct", 0.5, 0.0, 0.0, false},
    {"fft", 1.6, 4.0, 3.0, false},           {"fft_tiling", 1.35, 1.0, 1.0, false},
    {"winograd", 1.25, 0.5, 0.02, true},     {"winograd_nonfused", 1.8, 2.0, 2.0, true},
};

std::vector<MicroOption> conv_options(const Conv& c, const std::vector<std::int64_t>& sizes, double kind_factor,
                                      Rng& rng) {
  const double flops = 2.0 * c.hw * c.hw * double(c.cout) * c.cin * c.k * c.k;
  const double io_bytes = 4.0 * c.hw * c.hw * (c.cin + c.cout);
  const double filter_bytes = 4.0 * c.cin * c.cout * c.k * c.k;
  const double b_half = 0.5 + 400.0 / c.hw / c.hw * 16;  // small images need larger batches
  std::vector<MicroOption> v;
  for (const Algo& a : kAlgos) {
    if (a.needs_3x3 && c.k != 3) continue;
    // FFT pays off only for larger filters: half speed on 1x1.
    const double speed = a.speed * (c.k == 1 && a.ws_fixed_mult >= 1.0 ? 0.5 : 1.0);
    const double per_sample_ns = flops / (speed * kind_factor * 10e12) * 1e9;
    const double overhead_ns = 3000 + 2000 * rng.uniform();
    for (std::int64_t b : sizes) {
      const double noise = 0.97 + 0.06 * rng.uniform();
      MicroOption o;
      o.algo = a.name;
      o.micro_batch = b;
      o.time_ns = std::int64_t((overhead_ns + per_sample_ns * (double(b) + b_half)) * noise);
      o.workspace_bytes =
          std::int64_t(a.ws_fixed_mult * filter_bytes + a.ws_sample_mult * io_bytes * double(b) * noise);
      v.push_back(o);
    }
  }
  return v;
}

// ResNet-152's 155 convolutions: the stem, 3/8/36/3 bottleneck blocks of 1x1-3x3-1x1, and one
// projection shortcut per stage.
std::vector<Conv> resnet152_convs() {
  std::vector<Conv> v = {{3, 64, 7, 112}};
  const int blocks[] = {3, 8, 36, 3}, mid[] = {64, 128, 256, 512}, hw[] = {56, 28, 14, 7};
  int cin = 64;
  for (int s = 0; s < 4; ++s) {
    const int cout = mid[s] * 4;
    v.push_back({cin, cout, 1, hw[s]});  // projection shortcut
    for (int b = 0; b < blocks[s]; ++b) {
      v.push_back({b == 0 ? cin : cout, mid[s], 1, hw[s]});
      v.push_back({mid[s], mid[s], 3, hw[s]});
      v.push_back({mid[s], cout, 1, hw[s]});
    }
    cin = cout;
  }
  return v;
}

template <class F>
double median_ms(int repeats, F&& f) {
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

void bench_resnet152(const char* policy, const std::vector<std::int64_t>& sizes, int repeats) {
  // Layers with the same shape share one measurement (profiles are keyed by layer signature),
  // so ResNet-152's 36 identical stage-3 blocks give identical kernels, as in a real profile;
  // the planner computes one front per signature.
  const std::vector<Conv> convs = resnet152_convs();
  std::map<std::tuple<int, int, int, int, int>, int> signature;
  std::vector<std::vector<MicroOption>> distinct_opts;
  std::vector<int> kernel_sig;
  Rng rng(7);
  const double kind[] = {1.0, 0.8, 0.7};  // forward, backward-data, backward-filter
  for (const Conv& c : convs)
    for (int i = 0; i < 3; ++i) {
      auto [it, fresh] = signature.try_emplace({c.cin, c.cout, c.k, c.hw, i}, int(distinct_opts.size()));
      if (fresh) distinct_opts.push_back(conv_options(c, sizes, kind[i], rng));
      kernel_sig.push_back(it->second);
    }
  std::vector<std::vector<ConvConfig>> distinct(distinct_opts.size());
  const double dp_ms = median_ms(repeats, [&] {
    for (std::size_t d = 0; d < distinct.size(); ++d) distinct[d] = pareto_front(distinct_opts[d], 128);
  });
  std::vector<std::vector<ConvConfig>> fronts;
  for (int d : kernel_sig) fronts.push_back(distinct[d]);
  std::size_t smallest = 1 << 30, largest = 0, vars = 0;
  double min_ws = 0, max_ws = 0, sum_fast = 0, sum_slow = 0;
  for (const auto& f : fronts) {
    smallest = std::min(smallest, f.size());
    largest = std::max(largest, f.size());
    vars += f.size();
    min_ws += double(f.front().workspace_bytes);
    max_ws += double(f.back().workspace_bytes);
    sum_slow += double(f.front().time_ns);
    sum_fast += double(f.back().time_ns);
  }
  std::printf(
      "\nResNet-152 B=128 %s: %zu convs, %zu kernels (%zu distinct), fronts %zu..%zu "
      "configurations (%zu ILP variables), the %zu distinct fronts in %.1f ms\n",
      policy, convs.size(), fronts.size(), distinct.size(), smallest, largest, vars, distinct.size(), dp_ms);
  std::printf("  sum of smallest workspaces %.1f MiB (%.1f ms), of fastest %.1f MiB (%.1f ms)\n\n", min_ws / MiB,
              sum_slow / 1e6, max_ws / MiB, sum_fast / 1e6);

  std::printf("%-30s %10s %10s %8s %9s %6s %9s %9s\n", "total workspace", "time", "used", "optimal", "gap", "ILPs",
              "unit", "solve");
  auto run = [&](const std::string& label, double total) {
    std::optional<WdSolution> s;
    const double ms = median_ms(repeats, [&] { s = solve_wd(fronts, std::int64_t(total)); });
    if (!s) {
      std::printf("%-30s infeasible, %.2f ms\n", label.c_str(), ms);
      return;
    }
    std::printf("%-30s %8.2f ms %6.0f MiB %8s %6.2f us %6d %7lld B %6.2f ms\n", label.c_str(), double(s->time_ns) / 1e6,
                double(s->workspace_bytes) / MiB, s->optimal ? "yes" : "no",
                double(s->time_ns - s->lower_bound_ns) / 1e3, s->ilp_solves, (long long)s->workspace_unit, ms);
  };
  for (double mib : {8.0, 64.0, 512.0}) {
    char label[64];
    std::snprintf(label, sizeof label, "%.0f MiB x %zu kernels", mib, fronts.size());
    run(label, mib * MiB * double(fronts.size()));
  }
  for (double f : {0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99}) {
    char label[64];
    std::snprintf(label, sizeof label, "smallest + %.0f%% of the range", f * 100);
    run(label, min_ws + f * (max_ws - min_ws));
  }

  // A sweep: 49 totals spread over the whole range, each solved `repeats` times.
  std::vector<double> ms;
  int proven = 0, cbc = 0;
  double worst_gap = 0;
  for (int i = 1; i < 50; ++i) {
    const double total = min_ws + (max_ws - min_ws) * i / 50.0;
    std::optional<WdSolution> s;
    ms.push_back(median_ms(repeats, [&] { s = solve_wd(fronts, std::int64_t(total)); }));
    proven += s->optimal;
    cbc += s->ilp_solves > 0;
    worst_gap = std::max(worst_gap, double(s->time_ns - s->lower_bound_ns) / double(s->time_ns));
  }
  std::sort(ms.begin(), ms.end());
  std::printf(
      "sweep of %zu totals (2%%..98%% of the range): median %.2f ms, 90th percentile %.2f ms, "
      "max %.2f ms; CBC ran in %d, proven optimal %d, worst relative gap %.1e\n",
      ms.size(), ms[ms.size() / 2], ms[ms.size() * 9 / 10], ms.back(), cbc, proven, worst_gap);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 11;
  std::printf("conv configuration benchmark, medians of %d runs\n\n", repeats);

  // 1. pareto_front, policy all, B = 256.
  {
    std::vector<std::int64_t> all(256);
    for (int b = 0; b < 256; ++b) all[b] = b + 1;
    const Conv layers[] = {{128, 128, 3, 28}, {64, 64, 3, 56}, {256, 256, 3, 14}};
    for (const Conv& c : layers) {
      Rng rng(42);
      const std::vector<MicroOption> opts = conv_options(c, all, 1.0, rng);
      std::vector<ConvConfig> front;
      const double ms = median_ms(repeats, [&] { front = pareto_front(opts, 256); });
      std::printf("pareto_front all B=256  conv %dx%d %d->%d @%dx%d: %zu options, front %zu, %.2f ms\n", c.k, c.k,
                  c.cin, c.cout, c.hw, c.hw, opts.size(), front.size(), ms);
    }
  }

  // 2./3. ResNet-152 at B = 128: fronts, then WD, for both policies.
  std::vector<std::int64_t> pow2, all;
  for (std::int64_t b = 1; b <= 128; b *= 2) pow2.push_back(b);
  for (std::int64_t b = 1; b <= 128; ++b) all.push_back(b);
  bench_resnet152("powerOfTwo", pow2, repeats);
  bench_resnet152("all", all, repeats);
  return 0;
}
