// Convolution configurations (mu-cuDNN §III): the Pareto DP, WR, the WD ILP and the CBC wrapper,
// each checked against independent truth (exhaustive enumeration of small instances, an exact
// knapsack DP for larger WD instances), plus hand-worked examples in the style of mu-cuDNN
// Figs. 10 and 12. Every instance comes from a fixed generator, so runs are identical.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "planner/passes/conv_config.h"
#include "planner/solve/ilp.h"

using namespace ucplan;

namespace {

constexpr std::int64_t MiB = 1 << 20;
constexpr std::int64_t us = 1000;  // ns

// splitmix64: a fixed, portable generator, so every run sees the same instances.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {  // inclusive
    return lo + std::int64_t(next() % std::uint64_t(hi - lo + 1));
  }
  bool coin(int percent) { return uniform(1, 100) <= percent; }
};

// A random option list: `algos` algorithms, sizes 1..batch (some sizes or algorithms missing),
// small value ranges so that ties in time and workspace (and zero workspace) are common.
std::vector<MicroOption> random_options(Rng& rng, std::int64_t batch, int algos) {
  std::vector<MicroOption> v;
  const bool wide = rng.coin(30);                  // sometimes larger values: fewer ties, larger fronts
  const bool no_ones = rng.coin(10);               // then some batches cannot be composed at all
  for (std::int64_t b = 1; b <= batch + 2; ++b) {  // sizes above the batch must be ignored
    if ((b > 1 && rng.coin(20)) || (b == 1 && no_ones)) continue;
    for (int a = 0; a < algos; ++a) {
      if (rng.coin(15)) continue;
      MicroOption o;
      o.algo = std::string(1, char('A' + a));
      o.micro_batch = b;
      o.time_ns = wide ? rng.uniform(0, 1000) : rng.uniform(0, 3) * b + rng.uniform(0, 4);
      o.workspace_bytes = rng.coin(25) ? 0 : (wide ? rng.uniform(0, 1000) : rng.uniform(0, 6));
      v.push_back(o);
    }
  }
  if (rng.coin(50)) std::reverse(v.begin(), v.end());  // input order must not matter
  return v;
}

// Every ordered sequence of options whose micro-batches add up to `batch` (mu-cuDNN counts
// |A|(|A|+1)^(B-1) of them). Each is reported as (time, workspace, canonical list).
struct Brute {
  std::int64_t time, ws;
  std::vector<std::pair<std::int64_t, std::string>> canon;  // (-micro_batch, algo), sorted
};
void enumerate(const std::vector<MicroOption>& opts, std::int64_t left, std::vector<const MicroOption*>& seq,
               std::vector<Brute>& out) {
  if (left == 0) {
    Brute b{0, 0, {}};
    for (const MicroOption* o : seq) {
      b.time += o->time_ns;
      b.ws = std::max(b.ws, o->workspace_bytes);
      b.canon.push_back({-o->micro_batch, o->algo});
    }
    std::sort(b.canon.begin(), b.canon.end());
    out.push_back(std::move(b));
    return;
  }
  for (const MicroOption& o : opts) {
    if (o.micro_batch > left) continue;
    seq.push_back(&o);
    enumerate(opts, left - o.micro_batch, seq, out);
    seq.pop_back();
  }
}
std::vector<Brute> all_configs(const std::vector<MicroOption>& opts, std::int64_t batch) {
  std::vector<Brute> out;
  std::vector<const MicroOption*> seq;
  enumerate(opts, batch, seq, out);
  return out;
}

std::vector<std::pair<std::int64_t, std::string>> canon_of(const ConvConfig& c) {
  std::vector<std::pair<std::int64_t, std::string>> v;
  for (const MicroConfig& m : c.micro) v.push_back({-m.micro_batch, m.algo});
  return v;
}

// (batch, algorithms) pairs small enough to enumerate every ordered sequence quickly.
std::pair<std::int64_t, int> small_shape(Rng& rng) {
  for (;;) {
    const std::int64_t b = rng.uniform(1, 8);
    const int a = int(rng.uniform(2, 4));
    double n = a;
    for (int i = 1; i < b; ++i) n *= a + 1;
    if (n <= 60000) return {b, a};
  }
}

}  // namespace

TEST_CASE("pareto_front equals the brute-force Pareto set, with the documented tie-break") {
  int fronts = 0, empty = 0, max_size = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    Rng rng(seed);
    const auto shape = small_shape(rng);  // not a structured binding: CAPTURE's lambda needs clang >= 16 for those
    const std::int64_t batch = shape.first;
    const int algos = shape.second;
    const std::vector<MicroOption> opts = random_options(rng, batch, algos);
    const std::vector<Brute> all = all_configs(opts, batch);
    const std::vector<ConvConfig> front = pareto_front(opts, batch);
    CAPTURE(seed);
    CAPTURE(batch);

    // True Pareto set: workspace ascending, keep strictly decreasing times; for each point, the
    // tie-break winner (fewest micro-batches, then smallest canonical list).
    std::vector<const Brute*> order;
    for (const Brute& b : all) order.push_back(&b);
    std::sort(order.begin(), order.end(),
              [](const Brute* x, const Brute* y) { return std::tie(x->ws, x->time) < std::tie(y->ws, y->time); });
    std::vector<const Brute*> truth;
    for (const Brute* b : order)
      if (truth.empty() || b->time < truth.back()->time) truth.push_back(b);
    REQUIRE(front.size() == truth.size());
    for (std::size_t i = 0; i < truth.size(); ++i) {
      CHECK(front[i].time_ns == truth[i]->time);
      CHECK(front[i].workspace_bytes == truth[i]->ws);
      CHECK(find_config_error(opts, batch, front[i]) == "");
      const Brute* winner = nullptr;
      for (const Brute& b : all)
        if (b.time == truth[i]->time && b.ws == truth[i]->ws &&
            (!winner || std::make_pair(b.canon.size(), b.canon) < std::make_pair(winner->canon.size(), winner->canon)))
          winner = &b;
      CHECK(canon_of(front[i]) == winner->canon);
    }
    ++fronts;
    empty += front.empty();
    max_size = std::max(max_size, int(front.size()));
  }
  CHECK(empty > 0);      // some instances cannot compose their batch at all
  CHECK(max_size >= 5);  // and some fronts are not trivial
  CHECK(fronts == 400);
}

TEST_CASE("wr_optimal and fastest_within match the brute-force fastest under every limit") {
  for (std::uint64_t seed = 1000; seed < 1250; ++seed) {
    Rng rng(seed);
    const auto [batch, algos] = small_shape(rng);
    const std::vector<MicroOption> opts = random_options(rng, batch, algos);
    const std::vector<Brute> all = all_configs(opts, batch);
    const std::vector<ConvConfig> front = pareto_front(opts, batch);
    std::set<std::int64_t> limits = {-1, 0, 1, std::numeric_limits<std::int64_t>::max()};
    for (const MicroOption& o : opts) {
      limits.insert(o.workspace_bytes);
      limits.insert(o.workspace_bytes - 1);
      limits.insert(o.workspace_bytes + 1);
    }
    for (std::int64_t limit : limits) {
      CAPTURE(seed);
      CAPTURE(limit);
      std::optional<std::int64_t> truth;
      for (const Brute& b : all)
        if (b.ws <= limit && (!truth || b.time < *truth)) truth = b.time;
      const std::optional<ConvConfig> wr = wr_optimal(opts, batch, limit);
      const std::optional<ConvConfig> fw = fastest_within(front, limit);
      REQUIRE(wr.has_value() == truth.has_value());
      REQUIRE(fw.has_value() == truth.has_value());
      if (!truth) continue;
      CHECK(wr->time_ns == *truth);
      CHECK(fw->time_ns == *truth);
      CHECK(wr->workspace_bytes <= limit);
      CHECK(fw->workspace_bytes <= limit);
      CHECK(find_config_error(opts, batch, *wr) == "");
      CHECK(fw->workspace_bytes <= wr->workspace_bytes);  // the front's point is the cheapest
    }
  }
}

// mu-cuDNN Fig. 10 in miniature (AlexNet conv2 forward, B = 256, powerOfTwo): a GEMM-like
// algorithm with no workspace, 10 us per sample; an FFT-like one, 4 us per sample + 20 us per
// call, with 1 MiB of workspace per sample in the micro-batch.
//   undivided FFT: 4*256 + 20 = 1044 us but 256 MiB; GEMM: 2560 us with 0 B.
//   FFT beats GEMM on a micro-batch b when 4b + 20 < 10b, i.e. b >= 4 (b = 2: 28 vs 20 us).
//   k FFT micro-batches of 256/k samples: 4*256 + 20k = 1024 + 20k us, workspace 256/k MiB.
// So the front is GEMM at 0 B, then all-FFT splits into equal powers of two from 4 up:
//   4 MiB: 64 x 4 -> 2304 us; 8: 1664; 16: 1344; 32: 1184; 64: 1104; 128: 1064; 256: 1044.
// Under a 64 MiB limit (Caffe2's default) WR splits the batch into 4 FFT micro-batches of 64:
// 1104 us, 2.3x faster than what cuDNN alone would pick (GEMM, 2560 us).
TEST_CASE("hand-worked example: under a limit the batch splits into FFT micro-batches") {
  std::vector<MicroOption> opts;
  for (std::int64_t b = 1; b <= 256; b *= 2) {
    opts.push_back({"gemm", b, 10 * us * b, 0});
    opts.push_back({"fft", b, (4 * b + 20) * us, b * MiB});
  }
  const std::vector<ConvConfig> front = pareto_front(opts, 256);
  const std::vector<std::pair<std::int64_t, std::int64_t>> expected = {
      {0, 2560}, {4, 2304}, {8, 1664}, {16, 1344}, {32, 1184}, {64, 1104}, {128, 1064}, {256, 1044}};
  REQUIRE(front.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CHECK(front[i].workspace_bytes == expected[i].first * MiB);
    CHECK(front[i].time_ns == expected[i].second * us);
  }
  CHECK(front[0].micro == std::vector<MicroConfig>{{"gemm", 256}});  // fewest micro-batches

  const std::vector<MicroConfig> four_fft(4, MicroConfig{"fft", 64});
  const std::optional<ConvConfig> at64 = fastest_within(front, 64 * MiB);
  REQUIRE(at64);
  CHECK(at64->micro == four_fft);
  CHECK(at64->time_ns == 1104 * us);
  const std::optional<ConvConfig> wr64 = wr_optimal(opts, 256, 64 * MiB);
  REQUIRE(wr64);
  CHECK(*wr64 == *at64);

  // Just below 4 MiB nothing but GEMM helps; at 48 MiB powerOfTwo must use 32-sample pieces:
  // 8 x 32 -> 1024 + 160 = 1184 us at 32 MiB.
  CHECK(fastest_within(front, 4 * MiB - 1)->time_ns == 2560 * us);
  CHECK(fastest_within(front, 48 * MiB)->micro == std::vector<MicroConfig>(8, {"fft", 32}));

  // With the `all` policy 48 MiB allows 6 pieces of <= 48 samples: 1024 + 6*20 = 1144 us. Among
  // the 6-piece splits the front keeps the smallest workspace, ceil(256/6) = 43 MiB, and of those
  // the canonically smallest list (larger pieces first): 43 x 5 + 41. WR keeps its own tie-break
  // (fewest pieces, then canonical list) and is free to use all 48 MiB: 48 x 5 + 16.
  std::vector<MicroOption> all_sizes;
  for (std::int64_t b = 1; b <= 256; ++b) {
    all_sizes.push_back({"gemm", b, 10 * us * b, 0});
    all_sizes.push_back({"fft", b, (4 * b + 20) * us, b * MiB});
  }
  const std::vector<ConvConfig> front_all = pareto_front(all_sizes, 256);
  const std::optional<ConvConfig> at48 = fastest_within(front_all, 48 * MiB);
  REQUIRE(at48);
  CHECK(at48->time_ns == 1144 * us);
  CHECK(at48->workspace_bytes == 43 * MiB);
  std::vector<MicroConfig> split(5, MicroConfig{"fft", 43});
  split.push_back({"fft", 41});
  CHECK(at48->micro == split);
  const std::optional<ConvConfig> wr48 = wr_optimal(all_sizes, 256, 48 * MiB);
  REQUIRE(wr48);
  CHECK(wr48->time_ns == 1144 * us);
  split.assign(5, MicroConfig{"fft", 48});
  split.push_back({"fft", 16});
  CHECK(wr48->micro == split);
}

TEST_CASE("find_config_error rejects what is not a configuration of the options") {
  const std::vector<MicroOption> opts = {{"a", 2, 10, 5}, {"b", 2, 7, 9}, {"a", 1, 6, 1}};
  CHECK(find_config_error(opts, 3, {{{"a", 2}, {"a", 1}}, 16, 5}) == "");
  CHECK(find_config_error(opts, 3, {{{"a", 1}, {"a", 2}}, 16, 5}) != "");  // not canonical
  CHECK(find_config_error(opts, 4, {{{"a", 2}, {"a", 1}}, 16, 5}) != "");  // 3 samples, not 4
  CHECK(find_config_error(opts, 3, {{{"c", 2}, {"a", 1}}, 16, 5}) != "");  // unknown algorithm
  CHECK(find_config_error(opts, 3, {{{"a", 2}, {"a", 1}}, 15, 5}) != "");  // time is 10 + 6
  CHECK(find_config_error(opts, 3, {{{"a", 2}, {"a", 1}}, 16, 6}) != "");  // workspace max(5, 1)
  CHECK(find_config_error(opts, 4, {{{"a", 2}, {"b", 2}}, 17, 9}) == "");
}

TEST_CASE("edge cases: unreachable batch, sizes above the batch, a single option") {
  // Only 3-sample micro-batches: 4 cannot be composed; 6 can (3 + 3).
  const std::vector<MicroOption> threes = {{"a", 3, 5, 1}, {"b", 8, 1, 0}};
  CHECK(pareto_front(threes, 4).empty());
  CHECK(!wr_optimal(threes, 4, 100));
  const std::vector<ConvConfig> six = pareto_front(threes, 6);
  REQUIRE(six.size() == 1);
  CHECK(six[0].micro == std::vector<MicroConfig>{{"a", 3}, {"a", 3}});
  CHECK(six[0].time_ns == 10);
  CHECK(six[0].workspace_bytes == 1);
  CHECK(!fastest_within(six, 0));
  CHECK(pareto_front({}, 1).empty());
}

namespace {

// Random per-kernel configuration lists: sometimes real fronts from random options, sometimes
// arbitrary lists (with dominated entries and duplicates), at small or realistic magnitudes.
std::vector<std::vector<ConvConfig>> random_fronts(Rng& rng, int kernels, bool realistic) {
  std::vector<std::vector<ConvConfig>> fronts;
  for (int k = 0; k < kernels; ++k) {
    std::vector<ConvConfig> f;
    if (k > 0 && rng.coin(30)) {  // identical layers share one measurement
      fronts.push_back(fronts[rng.uniform(0, k - 1)]);
      continue;
    }
    if (!realistic && rng.coin(50)) {
      const std::int64_t batch = rng.uniform(1, 6);
      f = pareto_front(random_options(rng, batch, 3), batch);
      if (f.size() > 6) f.resize(6);
      if (f.empty()) f.push_back({{}, 7, 0});
    } else {
      const int n = int(rng.uniform(1, 6));
      for (int i = 0; i < n; ++i) {
        ConvConfig c;
        if (realistic) {  // ns up to ~0.5 s, bytes up to ~8 GiB
          c.time_ns = rng.uniform(100 * us, 500'000 * us);
          c.workspace_bytes = rng.coin(20) ? 0 : rng.uniform(4096, std::int64_t(8) << 30);
        } else {
          c.time_ns = rng.uniform(0, 30);
          c.workspace_bytes = rng.uniform(0, 12);
        }
        f.push_back(c);
      }
    }
    fronts.push_back(std::move(f));
  }
  return fronts;
}

}  // namespace

TEST_CASE("solve_wd equals brute force over all combinations (feasible, tight and infeasible)") {
  int solved = 0, infeasible = 0, cbc_used = 0, rounded = 0;
  for (std::uint64_t seed = 2000; seed < 2300; ++seed) {
    Rng rng(seed);
    const bool realistic = rng.coin(40);
    const int kernels = int(rng.uniform(2, 5));
    const std::vector<std::vector<ConvConfig>> fronts = random_fronts(rng, kernels, realistic);

    // Every combination: its total time and workspace.
    std::vector<std::pair<std::int64_t, std::int64_t>> combos;  // (workspace, time)
    std::vector<int> idx(kernels, 0);
    for (;;) {
      std::int64_t t = 0, w = 0;
      for (int k = 0; k < kernels; ++k) {
        t += fronts[k][idx[k]].time_ns;
        w += fronts[k][idx[k]].workspace_bytes;
      }
      combos.push_back({w, t});
      int k = 0;
      while (k < kernels && ++idx[k] == int(fronts[k].size())) idx[k++] = 0;
      if (k == kernels) break;
    }
    // Totals: exactly at combination sums (zero slack), one byte either side, and random.
    std::set<std::int64_t> totals = {-1, 0};
    for (int i = 0; i < 6; ++i) {
      const auto& c = combos[rng.uniform(0, std::int64_t(combos.size()) - 1)];
      totals.insert(c.first);
      totals.insert(c.first - 1);
      totals.insert(c.first + 1);
    }
    for (std::int64_t total : totals) {
      CAPTURE(seed);
      CAPTURE(total);
      std::optional<std::int64_t> truth;
      for (const auto& [w, t] : combos)
        if (w <= total && (!truth || t < *truth)) truth = t;
      const std::optional<WdSolution> wd = solve_wd(fronts, total);
      REQUIRE(wd.has_value() == truth.has_value());
      if (!truth) {
        ++infeasible;
        continue;
      }
      ++solved;
      cbc_used += wd->ilp_solves > 0;
      rounded += wd->workspace_unit > 1;
      CHECK(wd->workspace_bytes <= total);
      CHECK(wd->lower_bound_ns <= *truth);
      // Byte-exact and proven, also where the ILP's rounded workspaces lose the optimum (a
      // total sitting on a combination's sum, or a byte from it): Pareto sums in bytes find it.
      CHECK(wd->optimal);
      CHECK(wd->time_ns == *truth);
      CHECK(wd->lower_bound_ns == wd->time_ns);
      REQUIRE(int(wd->choice.size()) == kernels);
      std::int64_t t = 0, w = 0;
      for (int k = 0; k < kernels; ++k) {
        REQUIRE(wd->choice[k] >= 0);
        REQUIRE(wd->choice[k] < int(fronts[k].size()));
        t += fronts[k][wd->choice[k]].time_ns;
        w += fronts[k][wd->choice[k]].workspace_bytes;
      }
      CHECK(t == wd->time_ns);
      CHECK(w == wd->workspace_bytes);
    }
  }
  MESSAGE("WD cases: ", solved, " solved (CBC ran in ", cbc_used, ", ", rounded, " with rounded workspaces), ",
          infeasible, " infeasible");
  CHECK(solved > 1000);
  CHECK(infeasible > 300);
  CHECK(cbc_used > 200);                      // CBC really decides many of them
  CHECK(rounded > 100);                       // and realistic byte counts go through the rounding
  CHECK(solve_wd({}, 0)->choice.empty());     // no kernels: trivially optimal
  CHECK(!solve_wd({{}, {{{}, 1, 0}}}, 100));  // a kernel without configurations
}

// Larger instances than brute force can enumerate (up to 40 kernels, many of them identical),
// against an independent exact DP over the total workspace. Workspaces are small integers, or
// the same times 4096 bytes (then the ILP works in a unit > 1 byte, and the DP in 4 KiB steps).
TEST_CASE("solve_wd equals an exact knapsack DP on larger instances") {
  int checked = 0, rounded = 0;
  for (std::uint64_t seed = 5000; seed < 5120; ++seed) {
    Rng rng(seed);
    const int kernels = int(rng.uniform(10, 40));
    const std::int64_t scale = rng.coin(50) ? 4096 : 1;
    std::vector<std::vector<ConvConfig>> fronts;
    for (int k = 0; k < kernels; ++k) {
      if (k > 0 && rng.coin(50)) {
        fronts.push_back(fronts[rng.uniform(0, k - 1)]);
        continue;
      }
      std::vector<ConvConfig> f;
      const int n = int(rng.uniform(1, 8));
      for (int i = 0; i < n; ++i) f.push_back({{}, rng.uniform(1000, 200000), rng.uniform(0, 60) * scale});
      fronts.push_back(std::move(f));
    }
    std::int64_t max_units = 0;
    for (const auto& f : fronts) {
      std::int64_t w = 0;
      for (const ConvConfig& c : f) w = std::max(w, c.workspace_bytes / scale);
      max_units += w;
    }
    // best[w]: least total time with total workspace <= w units (exact, one kernel at a time).
    const std::int64_t inf = std::numeric_limits<std::int64_t>::max() / 4;
    std::vector<std::int64_t> best(max_units + 1, 0);
    for (const auto& f : fronts) {
      std::vector<std::int64_t> next(max_units + 1, inf);
      for (std::int64_t w = 0; w <= max_units; ++w)
        for (const ConvConfig& c : f)
          if (c.workspace_bytes / scale <= w)
            next[w] = std::min(next[w], best[w - c.workspace_bytes / scale] + c.time_ns);
      best = std::move(next);
    }
    for (int t = 0; t < 3; ++t) {
      const std::int64_t units = rng.uniform(0, max_units);
      const std::int64_t total = units * scale + (scale > 1 ? rng.uniform(0, scale - 1) : 0);
      CAPTURE(seed);
      CAPTURE(total);
      const std::optional<WdSolution> wd = solve_wd(fronts, total);
      REQUIRE(wd.has_value() == (best[units] < inf));
      if (!wd) continue;
      CHECK(wd->optimal);
      CHECK(wd->time_ns == best[units]);
      CHECK(wd->workspace_bytes <= total);
      ++checked;
      rounded += wd->workspace_unit > 1;
    }
  }
  CHECK(checked > 250);
  CHECK(rounded > 20);
}

// Issue cross-check: WR with per-kernel limits L_k is one feasible answer of WD with total
// Σ L_k, so WD is never slower; when every limit admits the kernel's fastest configuration,
// both pick the fastest everywhere and are equal.
TEST_CASE("WD with the sum of the WR limits is never slower than WR") {
  int strictly_better = 0;
  for (std::uint64_t seed = 3000; seed < 3200; ++seed) {
    Rng rng(seed);
    const int kernels = int(rng.uniform(2, 8));
    std::vector<std::vector<ConvConfig>> fronts;
    for (int k = 0; k < kernels; ++k) {
      const std::int64_t batch = rng.uniform(4, 16);
      std::vector<MicroOption> opts = random_options(rng, batch, 3);
      opts.push_back({"Z", 1, 50, 0});  // a slow zero-workspace fallback: WR always fits
      fronts.push_back(pareto_front(opts, batch));
    }
    std::vector<std::int64_t> limits(kernels);
    std::int64_t sum_limits = 0, wr_time = 0;
    const bool generous = rng.coin(25);
    for (int k = 0; k < kernels; ++k) {
      limits[k] = generous ? fronts[k].back().workspace_bytes + rng.uniform(0, 5)
                           : rng.uniform(0, fronts[k].back().workspace_bytes);
      sum_limits += limits[k];
      const std::optional<ConvConfig> wr = fastest_within(fronts[k], limits[k]);
      REQUIRE(wr);
      wr_time += wr->time_ns;
    }
    const std::optional<WdSolution> wd = solve_wd(fronts, sum_limits);
    REQUIRE(wd);
    CAPTURE(seed);
    CHECK(wd->time_ns <= wr_time);
    if (generous) CHECK(wd->time_ns == wr_time);
    strictly_better += wd->time_ns < wr_time;
  }
  CHECK(strictly_better > 20);  // WD's point (mu-cuDNN Fig. 11): sharing the total helps
}

// mu-cuDNN Fig. 12 in miniature. Two kernels, 8 MiB each under WR (16 MiB in all):
//   kernel 0: 900 us with 0 B, 300 us with 16 MiB;  kernel 1: 200 us with 0 B, 150 us with 8 MiB.
// WR: kernel 0 cannot use its 8 MiB (900 us), kernel 1 uses it (150 us): 1050 us.
// WD with 16 MiB in total gives it all to kernel 0: 300 + 200 = 500 us.
TEST_CASE("hand-worked WD: the total goes to the kernel that gains most") {
  const std::vector<std::vector<ConvConfig>> fronts = {{{{}, 900 * us, 0}, {{}, 300 * us, 16 * MiB}},
                                                       {{{}, 200 * us, 0}, {{}, 150 * us, 8 * MiB}}};
  const std::int64_t wr = fastest_within(fronts[0], 8 * MiB)->time_ns + fastest_within(fronts[1], 8 * MiB)->time_ns;
  CHECK(wr == 1050 * us);
  const std::optional<WdSolution> wd = solve_wd(fronts, 16 * MiB);
  REQUIRE(wd);
  CHECK(wd->choice == std::vector<int>{1, 0});
  CHECK(wd->time_ns == 500 * us);
  CHECK(wd->workspace_bytes == 16 * MiB);
  CHECK(wd->optimal);
}

// Coefficients up to 2^16 in magnitude (the range ilp.h says CBC is reliable in), mixed senses,
// negative coefficients, zero-slack right-hand sides.
TEST_CASE("solve_ilp equals brute force on small random ILPs (0-1 and bounded integers)") {
  int optimal = 0, infeasible = 0, started = 0;
  for (std::uint64_t seed = 4000; seed < 4300; ++seed) {
    Rng rng(seed);
    Ilp ilp;
    const int n = int(rng.uniform(1, 10));
    const bool big = rng.coin(50);
    for (int j = 0; j < n; ++j) ilp.objective.push_back(rng.uniform(-50, 100) * (big ? 1000003 : 1));
    if (rng.coin(40))  // bounded integers, at most ~12k points to enumerate
      for (int j = 0; j < n; ++j) ilp.upper.push_back(j < 6 ? rng.uniform(0, 3) : 1);
    const int rows = int(rng.uniform(1, 4));
    for (int r = 0; r < rows; ++r) {
      IlpRow row;
      row.sense = IlpSense(rng.uniform(0, 2));
      std::int64_t sum = 0;
      for (int j = 0; j < n; ++j)
        if (rng.coin(70)) {
          const std::int64_t c = big ? rng.uniform(-16384, 65536) : rng.uniform(-5, 20);
          row.terms.push_back({j, c});
          sum += std::max<std::int64_t>(c, 0);
        }
      // Equalities are satisfiable by x_j = 1 alone; inequalities sometimes sit exactly at the
      // activity of a random point (zero slack there).
      std::int64_t at_point = 0;
      for (const IlpTerm& t : row.terms) at_point += rng.coin(50) ? t.coef : 0;
      row.rhs = row.sense == IlpSense::eq && !row.terms.empty() ? row.terms[0].coef
                : rng.coin(50)                                  ? at_point
                                                                : rng.uniform(0, std::max<std::int64_t>(sum, 1));
      ilp.rows.push_back(row);
    }
    std::optional<std::int64_t> truth;
    std::vector<std::vector<std::int64_t>> feasible;
    std::vector<std::int64_t> x(n, 0);
    for (;;) {  // every point of the box, odometer order
      std::int64_t z = 0;
      for (int j = 0; j < n; ++j) z += ilp.objective[j] * x[j];
      if (find_ilp_violation(ilp, x).empty()) {
        feasible.push_back(x);
        if (!truth || z < *truth) truth = z;
      }
      int j = 0;
      while (j < n && ++x[j] > (ilp.upper.empty() ? 1 : ilp.upper[j])) x[j++] = 0;
      if (j == n) break;
    }
    CAPTURE(seed);
    for (const bool full : {false, true}) {  // plain branch and bound, and CBC's full strategy
      CAPTURE(full);
      ilp.full_strategy = full;
      const IlpResult r = solve_ilp(ilp);
      if (!truth) {
        CHECK(r.status == IlpStatus::infeasible);
        infeasible += full;
        continue;
      }
      REQUIRE(r.status == IlpStatus::optimal);
      CHECK(r.objective == *truth);
      CHECK(find_ilp_violation(ilp, r.x) == "");
      CHECK(r.tightenings == 0);
      optimal += full;
      // Stopped after one node, what it proves (at least the LP relaxation's optimum, solved before
      // branch and bound and scaled back from CBC's objective units) never passes the optimum.
      Ilp stopped = ilp;
      stopped.max_nodes = 1;
      const IlpResult s = solve_ilp(stopped);
      if (s.status != IlpStatus::no_solution) CHECK(s.bound <= *truth);
    }
    // Under a time limit the full strategy solves the root LP its own way first (solve_root_lp_within
    // in ilp_cbc.cpp: primal simplex from the start, else presolved dual simplex, then CBC from that
    // basis), a path the solves above never take. A start anywhere in the feasible set, the optimum
    // included: the answer is still the optimum and the bound never passes it. (The probe's value
    // itself is reported only when the child's deadline falls inside Clp's solve after it, which
    // these small ILPs never reach.)
    if (truth) {
      ilp.full_strategy = true;
      ilp.max_seconds = 60;
      ilp.start = feasible[static_cast<std::size_t>(rng.uniform(0, std::int64_t(feasible.size()) - 1))];
      const IlpResult r = solve_ilp(ilp);
      REQUIRE(r.status == IlpStatus::optimal);
      CHECK(r.objective == *truth);
      CHECK(r.bound <= *truth);
      CHECK(find_ilp_violation(ilp, r.x) == "");
      started += 1;
    }
  }
  CHECK(optimal > 100);
  CHECK(infeasible > 10);
  CHECK(started == optimal);

  // CBC's full strategy runs in a child process: if it dies, plain branch and bound answers.
  {
    Ilp knap;
    knap.objective = {-5, -4, -3};
    knap.rows = {{{{0, 2}, {1, 3}, {2, 1}}, IlpSense::le, 5}};
    knap.full_strategy = true;
    ::setenv("UCPLAN_TEST_CBC_CHILD_CRASH", "1", 1);
    const IlpResult crashed = solve_ilp(knap);
    ::unsetenv("UCPLAN_TEST_CBC_CHILD_CRASH");
    CHECK(crashed.full_strategy_failures == 1);
    REQUIRE(crashed.status == IlpStatus::optimal);
    CHECK(crashed.objective == -9);  // a and b: 2 + 3 <= 5, worth 5 + 4
    const IlpResult fine = solve_ilp(knap);
    CHECK(fine.full_strategy_failures == 0);
    CHECK(fine.objective == crashed.objective);
  }

  // A model CBC 2.10 used to abort on (an assertion in markHotStart, for fewer than 3 rows).
  Ilp tiny;
  tiny.objective = {31, 32};
  tiny.rows = {{{{0, -3}}, IlpSense::le, 0}, {{{0, 8}, {1, 19}}, IlpSense::ge, 8}};
  const IlpResult r = solve_ilp(tiny);
  CHECK(r.status == IlpStatus::optimal);
  CHECK(r.objective == 31);
}

TEST_CASE("solve_ilps answers each ILP as solve_ilp alone, its children side by side") {
  // 0-1 knapsacks of 14 items against brute force, two in three with CBC's full strategy (a child
  // each, all forked before any is waited for), the third plain (in this process, in turn).
  std::vector<Ilp> ilps;
  std::vector<std::int64_t> truth;
  for (std::uint64_t seed = 9000; seed < 9009; ++seed) {
    Rng rng(seed);
    const int n = 14;
    Ilp k;
    IlpRow cap{{}, IlpSense::le, 0};
    for (int j = 0; j < n; ++j) {
      k.objective.push_back(-rng.uniform(1, 60));
      cap.terms.push_back({j, rng.uniform(1, 40)});
      cap.rhs += cap.terms.back().coef;
    }
    cap.rhs /= 3;
    k.rows.push_back(cap);
    k.full_strategy = seed % 3 != 0;
    k.max_seconds = 30;
    std::int64_t best = 0;
    for (int mask = 0; mask < (1 << n); ++mask) {
      std::int64_t z = 0, w = 0;
      for (int j = 0; j < n; ++j)
        if (mask >> j & 1) z += k.objective[j], w += cap.terms[j].coef;
      if (w <= cap.rhs) best = std::min(best, z);
    }
    ilps.push_back(k);
    truth.push_back(best);
  }
  std::vector<const Ilp*> all;
  for (const Ilp& k : ilps) all.push_back(&k);
  const std::vector<IlpResult> together = solve_ilps(all);
  REQUIRE(together.size() == ilps.size());
  for (std::size_t k = 0; k < ilps.size(); ++k) {
    CAPTURE(k);
    REQUIRE(together[k].status == IlpStatus::optimal);
    CHECK(together[k].objective == truth[k]);
    CHECK(find_ilp_violation(ilps[k], together[k].x) == "");
    CHECK(together[k].full_strategy_failures == 0);
  }
  // Every child dies: each full-strategy ILP falls back to plain branch and bound, with the same answer.
  ::setenv("UCPLAN_TEST_CBC_CHILD_CRASH", "1", 1);
  const std::vector<IlpResult> crashed = solve_ilps(all);
  ::unsetenv("UCPLAN_TEST_CBC_CHILD_CRASH");
  for (std::size_t k = 0; k < ilps.size(); ++k) {
    CAPTURE(k);
    CHECK(crashed[k].full_strategy_failures == (ilps[k].full_strategy ? 1 : 0));
    REQUIRE(crashed[k].status == IlpStatus::optimal);
    CHECK(crashed[k].objective == truth[k]);
  }
  CHECK(solve_ilps({}).empty());
}

namespace {

struct ProcStat {
  char state = 0;  // 0: no such process
  long parent = 0;
};

// A process's state letter and parent from /proc/PID/stat.
ProcStat proc_stat(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string line;
  ProcStat st;
  const std::size_t close = std::getline(in, line) ? line.rfind(')') : std::string::npos;  // the name may hold ')'
  if (close != std::string::npos) std::istringstream(line.substr(close + 1)) >> st.state >> st.parent;
  return st;
}

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> out;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (std::all_of(pid.begin(), pid.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        proc_stat(pid).parent == parent)
      out.push_back(static_cast<pid_t>(std::stol(pid)));
  }
  return out;
}

}  // namespace

TEST_CASE("a CBC child dies with the process that started it") {
  // A market-split instance (Cornuejols and Dawande): equality rows over 0-1 variables with random
  // weights, each row's right-hand side half its weights' sum, slack penalised. Branch and bound
  // takes far longer than this test waits, so the solve is still running when its process dies.
  Ilp split;
  Rng rng(4242);
  const int n = 36, m = 4;
  split.objective.assign(n, 0);
  for (int r = 0; r < m; ++r) {
    IlpRow row{{}, IlpSense::eq, 0};
    std::int64_t sum = 0;
    for (int j = 0; j < n; ++j) {
      row.terms.push_back({j, rng.uniform(0, 99)});
      sum += row.terms.back().coef;
    }
    row.rhs = sum / 2;
    for (const std::int64_t sign : {1, -1}) {  // slack either way, each costing its size
      row.terms.push_back({static_cast<int>(split.objective.size()), sign});
      split.objective.push_back(1);
    }
    split.rows.push_back(row);
  }
  split.upper.assign(n, 1);
  split.upper.resize(split.objective.size(), 10'000);
  split.full_strategy = true;
  split.max_seconds = 120;
  const pid_t solver = ::fork();
  REQUIRE(solver >= 0);
  if (solver == 0) {
    (void)solve_ilp(split);
    ::_exit(0);
  }
  std::vector<pid_t> cbc;  // the solver's CBC child
  for (int wait = 0; wait < 200 && cbc.empty(); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cbc = children_of(solver);
  }
  ::kill(solver, SIGKILL);
  ::waitpid(solver, nullptr, 0);
  REQUIRE(cbc.size() == 1);
  char state = proc_stat(std::to_string(cbc[0])).state;
  for (int wait = 0; wait < 100 && state != 0 && state != 'Z'; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    state = proc_stat(std::to_string(cbc[0])).state;
  }
  CHECK((state == 0 || state == 'Z'));  // gone, or dead and waiting for whoever adopted it to reap it
  if (state != 0 && state != 'Z') ::kill(cbc[0], SIGKILL);  // failed: not for the rest of its limit
}

TEST_CASE("a time limit that stops the LP still leaves a valid bound from its dual prices") {
  // A regular set cover: each of n unit-cost columns covers k rows (counted with multiplicity, from
  // shuffled row stubs), each of m rows is covered d = nk/m times. Its LP's optimum is m/k exactly:
  // x = 1/d everywhere is feasible and costs n/d = m/k, and row prices 1/k are dual feasible
  // (each column's k entries price to its cost) with that value. Its LP is degenerate enough that
  // dual simplex needs over a minute for it; a one-second limit stops it, and the bound must then come from the prices
  // it had reached: above the trivial 0 (no cost is negative), at most m/k. Before, such a solve reported no bound at
  // all, or another ILP's (below). (Dual simplex reached 253 in 0.5 s and 460 in 58 s on the development machine.)
  const int n = 20'000, m = 4'000, k = 8, d = n * k / m;
  Rng rng(515);
  std::vector<int> stubs;
  for (int r = 0; r < m; ++r) stubs.insert(stubs.end(), d, r);
  for (std::size_t i = stubs.size() - 1; i > 0; --i)
    std::swap(stubs[i], stubs[static_cast<std::size_t>(rng.uniform(0, static_cast<std::int64_t>(i)))]);
  Ilp cover;
  cover.objective.assign(n, 1);
  cover.rows.assign(m, IlpRow{{}, IlpSense::ge, 1});
  for (int j = 0; j < n; ++j) {
    std::map<int, std::int64_t> entries;
    for (int e = 0; e < k; ++e) ++entries[stubs[static_cast<std::size_t>(j) * k + e]];
    for (const auto& [r, times] : entries) cover.rows[r].terms.push_back({j, times});
  }
  const std::int64_t lp_optimum = m / k;

  // An ILP solved in this process last, whose LP bound is far above: a forked child inherits what
  // this process last knew, and must not send it as its own.
  Ilp far;
  far.objective = {2 * lp_optimum};
  far.rows = {{{{0, 1}}, IlpSense::ge, 1}};
  REQUIRE(solve_ilp(far).objective == 2 * lp_optimum);

  cover.start.assign(n, 1);  // every column: feasible, poor
  cover.full_strategy = true;
  cover.max_seconds = 1;
  const auto t0 = std::chrono::steady_clock::now();
  const IlpResult r = solve_ilps({&cover})[0];
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.status == IlpStatus::feasible);
  CHECK(r.bound > 0);
  CHECK(r.bound <= lp_optimum);
  CHECK(seconds < 10.0);
  MESSAGE("regular set cover of " << n << " columns and " << m << " rows: LP optimum " << lp_optimum << "; bound "
                                  << r.bound << " after " << seconds << " s");
}

TEST_CASE("solve_ilp hands a model of 100,000 rows to CBC without copying it row by row") {
  // Rows x_j + x_{j+1} <= 1 over a path of n vertices: the LP's optimum is its first basis (nothing
  // chosen, objective 0 when every x costs 1), so the time is the model's hand-over. Built row by
  // row into CBC's matrix, each row copied the matrix so far: 24 s for this model, which exact
  // mode's time limit paid before its LP had started (20 s of 60 for resnet20's offload MILP).
  const int n = 100'001;
  Ilp path;
  path.objective.assign(n, 1);
  for (int j = 0; j + 1 < n; ++j) path.rows.push_back({{{j, 1}, {j + 1, 1}}, IlpSense::le, 1});
  const auto t0 = std::chrono::steady_clock::now();
  const IlpResult r = solve_ilp(path);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(r.status == IlpStatus::optimal);
  CHECK(r.objective == 0);
  CHECK(seconds < 5.0);
}

TEST_CASE("determinism: same input, identical output") {
  Rng rng(77);
  // Four algorithms with a per-call overhead and a per-sample cost, workspace growing with the
  // micro-batch (gemm needs none), and a little noise.
  std::vector<MicroOption> opts;
  const std::int64_t call[] = {20, 30, 60, 40}, per[] = {10, 8, 3, 5}, ws[] = {0, 16, 1024, 256};
  const char* names[] = {"gemm", "implicit", "fft", "winograd"};
  for (std::int64_t b = 1; b <= 64; ++b)
    for (int a = 0; a < 4; ++a)
      opts.push_back({names[a], b, (call[a] + per[a] * b) * us + rng.uniform(0, 999),
                      ws[a] * b * 1024 + (a ? rng.uniform(0, 4095) : 0)});
  const std::vector<ConvConfig> f1 = pareto_front(opts, 64);
  const std::vector<ConvConfig> f2 = pareto_front(opts, 64);
  CHECK(f1 == f2);
  CHECK(f1.size() > 5);
  for (std::size_t i = 1; i < f1.size(); ++i) {
    CHECK(f1[i].workspace_bytes > f1[i - 1].workspace_bytes);
    CHECK(f1[i].time_ns < f1[i - 1].time_ns);
  }

  // 20 distinct kernels, each three times (identical layers): 60 kernels.
  std::vector<std::vector<ConvConfig>> fronts;
  std::int64_t max_sum = 0;
  for (int k = 0; k < 20; ++k) {
    std::vector<MicroOption> o;
    for (std::int64_t b = 1; b <= 32; b *= 2)
      for (int a = 0; a < 4; ++a)
        o.push_back({std::string(1, char('a' + a)), b, rng.uniform(1, 40) * b + rng.uniform(0, 99),
                     a == 0 ? 0 : rng.uniform(0, 64) * b * 1024});
    fronts.push_back(pareto_front(o, 32));
    max_sum += 3 * fronts.back().back().workspace_bytes;
  }
  for (int k = 0; k < 40; ++k) fronts.push_back(fronts[k % 20]);
  const std::optional<WdSolution> w1 = solve_wd(fronts, max_sum / 3);
  const std::optional<WdSolution> w2 = solve_wd(fronts, max_sum / 3);
  REQUIRE(w1);
  REQUIRE(w2);
  CHECK(w1->choice == w2->choice);
  CHECK(w1->time_ns == w2->time_ns);
  CHECK(w1->optimal);
  CHECK(w1->ilp_solves >= 1);
}
