// GPU check of the CUDA replay backend (cuda_backend.cpp) against the CPU backend (STYLE.md #8).
// Without a device it prints "SKIP: <reason>" and exits 0; any failure exits 1.
//   1. The backend alone, on copy steps: each round copies its own slice of an input host buffer;
//      a d2h copy waits for the h2d copy it reads; poisoning (0xFF) runs after the step and after
//      its poison_waits on another stream (a 64 MiB offload makes a missing wait visible as 0xFF
//      bytes in the host copy); the timeline has one entry per submission and respects the
//      waits; a step that cannot run (a CPU algorithm name) is reported by barrier() and the
//      backend keeps working afterwards.
//   2. Each plan given: the same replay as `ucplan run --check` (poisoning in the first
//      iteration, weight gradients against the reference run) on cuda and on cpu; the weights
//      after all iterations compared between the two backends; the measured timeline's waits.
// Build (not built by default): ninja -C build ucplan-cuda-check
// Run:   build/executor/ucplan-cuda-check [--device N] [--iterations K] [--tolerance T] PLAN.json...
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "executor/backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/replay.h"
#include "planner/model/errors.h"
#include "planner/passes/verify.h"

namespace {

using namespace ucplan;

int g_failures = 0;

void expect(bool ok, const std::string& what) {
  fmt::print("  {} {}\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++g_failures;
}

// Waits respected in a measured timeline: a step starts no earlier than the steps it waits for,
// in the same round, ended (1 us of slack for the event timer's resolution).
int wait_violations(const std::vector<ResolvedStep>& steps, const std::vector<MeasuredStep>& timeline, std::string* first) {
  std::map<std::pair<int, int>, const MeasuredStep*> at;  // (round, step)
  for (const auto& m : timeline) at[{m.round, m.step}] = &m;
  int bad = 0;
  for (const auto& m : timeline) {
    for (int w : steps.at(static_cast<std::size_t>(m.step)).waits) {
      auto it = at.find({m.round, w});
      if (it == at.end()) continue;
      if (m.start_ns + 1000 < it->second->end_ns) {
        if (bad++ == 0 && first)
          *first = fmt::format("step {} (round {}) starts at {} ns, before step {} ends at {} ns", m.step, m.round, m.start_ns, w,
                               it->second->end_ns);
      }
    }
  }
  return bad;
}

ResolvedStep copy_step(int id, const std::string& op, std::int64_t device, int host, std::int64_t bytes, bool input) {
  ResolvedStep s;
  s.id = id;
  s.stream = op == "prefetch" ? 1 : 2;
  s.op = op;
  s.device = device;
  s.host = host;
  s.bytes = bytes;
  s.input = input;
  return s;
}

unsigned char pattern(std::int64_t i, int round) { return static_cast<unsigned char>((i * 7 + round * 13 + 1) & 0x7F); }

void check_backend_alone(const Graph& g, int device) {
  fmt::print("backend alone (copies, waits, poisoning, timeline, errors)\n");
  const std::int64_t big = std::int64_t{64} << 20, small = 4096;
  const std::int64_t a = 0, b = big;  // arena regions A (big) and B (small)
  auto be = make_cuda_backend(g, device);
  be->allocate(big + small, {2 * big, big});
  auto* in = static_cast<unsigned char*>(be->host(0));
  for (int r = 0; r < 2; ++r)
    for (std::int64_t i = 0; i < big; ++i) in[r * big + i] = pattern(i, r);
  // Step 0: A <- this round's 64 MiB slice; step 1: host 1 <- A (waits for 0); step 2: B <- a
  // 4 KiB slice, then poison A once step 1 (on the d2h stream) has read it.
  std::vector<ResolvedStep> steps{copy_step(0, "prefetch", a, 0, big, true), copy_step(1, "offload", a, 1, big, false),
                                  copy_step(2, "prefetch", b, 0, small, true)};
  steps[1].waits = {0};
  steps[2].poison_after = {{a, big}};
  steps[2].poison_waits = {1};
  RunContext ctx;
  ctx.sub_batch = 1;
  ctx.total_batch = 2;
  be->begin();
  std::vector<unsigned char> got(static_cast<std::size_t>(big));
  for (int r = 0; r < 2; ++r) {
    for (const auto& s : steps) be->submit(s, r, ctx, true);
    be->barrier();
    const auto* out = static_cast<const unsigned char*>(be->host(1));
    std::int64_t wrong = 0, poisoned = 0;
    for (std::int64_t i = 0; i < big; ++i) {
      wrong += out[i] != pattern(i, r);
      poisoned += out[i] == kPoisonByte;
    }
    expect(wrong == 0, fmt::format("round {}: the offload read this round's input slice ({} wrong bytes, {} of them 0xFF)", r,
                                   wrong, poisoned));
    be->read(a, got.data(), big);
    expect(std::all_of(got.begin(), got.end(), [](unsigned char c) { return c == kPoisonByte; }),
           fmt::format("round {}: region A is poisoned (0xFF) after its last use", r));
    be->read(b, got.data(), small);
    // An input copy takes the slice at host offset round x bytes.
    expect(std::memcmp(got.data(), in + r * small, static_cast<std::size_t>(small)) == 0,
           fmt::format("round {}: region B holds the input slice at host offset {} x {} bytes", r, r, small));
  }
  const std::vector<MeasuredStep> timeline = be->end();
  expect(timeline.size() == 6, fmt::format("timeline: {} entries for 6 submissions", timeline.size()));
  bool ordered = true;
  for (const auto& m : timeline) ordered = ordered && m.start_ns >= 0 && m.end_ns >= m.start_ns;
  expect(ordered, "timeline: 0 <= start <= end for every step");
  std::string first;
  expect(wait_violations(steps, timeline, &first) == 0, "timeline: waits respected " + first);
  std::int64_t poison_end = 0, offload_end = 0;
  for (const auto& m : timeline) {
    if (m.round == 0 && m.step == 1) offload_end = m.end_ns;
    if (m.round == 0 && m.step == 2) poison_end = m.end_ns;
  }
  expect(poison_end + 1000 >= offload_end, fmt::format("timeline: the poisoning step ends ({} ns) after the offload it waited for ({} ns)",
                                                       poison_end, offload_end));

  // A step that cannot run on this device surfaces at barrier(), as a UserError naming it.
  int conv = -1;
  for (std::size_t l = 0; l < g.layers.size(); ++l)
    if (g.layers[l].type() == LayerType::Conv) {
      conv = static_cast<int>(l);
      break;
    }
  if (conv >= 0) {
    ResolvedStep bad;
    bad.id = 0;
    bad.stream = 0;
    bad.op = "forward";
    bad.layer = conv;
    bad.config = {MicroStep{"im2col", 1}};
    be->begin();
    be->submit(bad, 0, ctx, false);
    be->submit(steps[2], 0, ctx, false);
    std::string message;
    try {
      be->barrier();
    } catch (const UserError& e) {
      message = e.what();
    }
    expect(message.find("is not a cuDNN forward algorithm") != std::string::npos && message.find("step 0") != std::string::npos,
           "a CPU algorithm name is reported by barrier(): " + message);
    be->begin();
    be->submit(steps[2], 0, ctx, false);
    bool works = true;
    try {
      works = be->end().size() == 1;
    } catch (const std::exception& e) {
      works = false;
      fmt::print("  {}\n", e.what());
    }
    expect(works, "the backend runs steps again after the error");
  }
}

void check_plan(const std::string& path, int device, int iterations, double tolerance) {
  fmt::print("plan {}\n", path);
  const Plan plan = load_plan(path);
  const std::string error = find_plan_error(plan);
  if (!error.empty()) {
    expect(false, "the plan verifies: " + error);
    return;
  }
  const Graph g = build_graph(plan.network, path);
  RunOptions o;
  o.iterations = iterations;
  o.check = true;
  o.tolerance = tolerance;
  auto gpu = make_cuda_backend(g, device);
  const RunReport rg = replay_plan(plan, *gpu, o);
  auto cpu = make_cpu_backend(g);
  const RunReport rc = replay_plan(plan, *cpu, o);
  fmt::print("  {}: {} rounds of {}, arena {} bytes, device memory held {} bytes\n", rg.backend, plan.rounds, plan.sub_batch,
             rg.arena_bytes, rg.device_memory_bytes);
  fmt::print("  time: cuda median {:.3f} ms, cpu median {:.3f} ms, predicted {:.3f} ms ({})\n", rg.median_seconds * 1e3,
             rc.median_seconds * 1e3, rg.predicted_seconds * 1e3, plan.profile_source);
  expect(rg.passed, fmt::format("cuda weight gradients vs the reference: max relative error {:.2e} ({})", rg.max_rel_error,
                                rg.worst_tensor));
  expect(rc.passed, fmt::format("cpu weight gradients vs the reference: max relative error {:.2e} ({})", rc.max_rel_error,
                                rc.worst_tensor));
  // The weights after the updates of every iteration, cuda against cpu.
  double worst = 0;
  std::string worst_name;
  for (const auto& b : plan.buffers) {
    if (!b.resident || b.tensor.rfind("W:", 0) != 0) continue;
    std::vector<float> x(static_cast<std::size_t>(b.size / 4)), y(x.size());
    gpu->read(b.offset, x.data(), b.size / 4 * 4);
    cpu->read(b.offset, y.data(), b.size / 4 * 4);
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
      const double d = std::fabs(static_cast<double>(x[i]) - y[i]);
      diff = std::max(diff, d == d ? d : INFINITY);
    }
    const double rel = scale > 0 ? diff / scale : diff;
    if (rel >= worst) {
      worst = rel;
      worst_name = b.tensor;
    }
  }
  expect(worst <= tolerance, fmt::format("weights after {} iterations, cuda vs cpu: max relative difference {:.2e} ({})",
                                         iterations + 1, worst, worst_name));
  // The last timed iteration's timeline: one entry per submission, waits respected.
  const TaskGraph tg = build_tasks(g, plan_route(plan, g));
  const std::vector<ResolvedStep> steps = resolve_steps(plan, g, tg);
  std::size_t finals = 0;
  for (const auto& s : steps) finals += s.final ? 1 : 0;
  const std::size_t want = static_cast<std::size_t>(plan.rounds) * (steps.size() - finals) + finals;
  expect(rg.timeline.size() == want, fmt::format("timeline: {} entries, {} rounds x {} steps + {} final", rg.timeline.size(),
                                                 plan.rounds, steps.size() - finals, finals));
  std::string first;
  const int bad = wait_violations(steps, rg.timeline, &first);
  expect(bad == 0, fmt::format("timeline: waits respected ({} violations) {}", bad, first));
}

}  // namespace

int main(int argc, char** argv) {
  int device = 0, iterations = 2;
  double tolerance = 1e-3;
  std::vector<std::string> plans;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc) device = std::atoi(argv[++i]);
    else if (a == "--iterations" && i + 1 < argc) iterations = std::atoi(argv[++i]);
    else if (a == "--tolerance" && i + 1 < argc) tolerance = std::atof(argv[++i]);
    else plans.push_back(a);
  }
  if (plans.empty()) {
    std::fprintf(stderr, "usage: ucplan-cuda-check [--device N] [--iterations K] [--tolerance T] PLAN.json...\n");
    return 2;
  }
  std::string why;
  if (!cuda::cuda_device_available(&why)) {
    fmt::print("SKIP: no CUDA device: {}\n", why);
    return 0;
  }
  try {
    check_backend_alone(build_graph(load_plan(plans[0]).network, plans[0]), device);
    for (const auto& p : plans) check_plan(p, device, iterations, tolerance);
  } catch (const std::exception& e) {
    fmt::print("FAIL: {}\n", e.what());
    return 1;
  }
  fmt::print("{}: {} failure{}\n", g_failures ? "FAILED" : "PASSED", g_failures, g_failures == 1 ? "" : "s");
  return g_failures ? 1 : 0;
}
