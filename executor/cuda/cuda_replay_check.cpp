// GPU check of the CUDA replay backend (cuda_backend.cpp) against the CPU backend (STYLE.md #8).
// Any failure exits 1. Without a device: "SKIP: ..." and exit 0, or with --require-device (or
// UCPLAN_REQUIRE_GPU=1) "FAIL: ..." and exit 3; a driver too old always fails (exit 4).
//   1. The backend alone, on copy steps: each round copies its own slice of an input host buffer;
//      a d2h copy waits for the h2d copy it reads; poisoning (0xFF) runs after the step and after
//      its poison_waits on another stream (a 64 MiB offload makes a missing wait visible as 0xFF
//      bytes in the host copy); the timeline has one entry per submission and respects the
//      waits; a step that cannot run (a CPU algorithm name) is reported by barrier() and the
//      backend keeps working afterwards.
//   2. Each plan given (compiled from a cuda or model:* profile, so its conv algorithms are
//      cuDNN's): the replay's program with poisoning in the first iteration, on cuda, and on the
//      cpu backend with every conv kernel switched to the CPU's direct algorithm (same
//      micro-batches); the first iteration's weight gradients of both against the reference run
//      (relative L2 error, as `ucplan run --check`), the weights after all iterations cuda vs
//      cpu; then replay_plan on cuda (the `ucplan run --device cuda` path): times, and the
//      measured timeline (one entry per step and round, waits respected).
//   Tolerance (default 1e-2): a missing wait or a poisoned read gives NaN/inf or O(1) errors;
//   cuDNN's algorithms (Winograd, FFT) against the CPU's direct one, through batch-norm backward,
//   stay far below it.
// One CUDA backend (one arena) exists at a time, so a plan whose arena fills most of the device
// can be checked.
// Built wherever CUDA is: build/bin/ucplan-cuda-check [--device N] [--iterations K] [--tolerance T]
// [--require-device] PLAN.json...
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
#include "executor/reference.h"
#include "executor/replay.h"
#include "planner/model/errors.h"
#include "planner/check/verify.h"

namespace {

using namespace ucplan;

int g_failures = 0;

void expect(bool ok, const std::string& what) {
  fmt::print("  {} {}\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++g_failures;
}

// Waits respected in a measured timeline: a step starts no earlier than the steps it waits for,
// in the same round, ended (1 us of slack for the event timer's resolution).
int wait_violations(const std::vector<ResolvedStep>& steps, const std::vector<MeasuredStep>& timeline,
                    std::string* first) {
  std::map<std::pair<int, int>, const MeasuredStep*> at;  // (round, step)
  for (const auto& m : timeline) at[{m.round, m.step}] = &m;
  int bad = 0;
  for (const auto& m : timeline) {
    for (int w : steps.at(static_cast<std::size_t>(m.step)).waits) {
      auto it = at.find({m.round, w});
      if (it == at.end()) continue;
      if (m.start_ns + 1000 < it->second->end_ns) {
        if (bad++ == 0 && first)
          *first = fmt::format("step {} (round {}) starts at {} ns, before step {} ends at {} ns", m.step, m.round,
                               m.start_ns, w, it->second->end_ns);
      }
    }
  }
  return bad;
}

ResolvedStep copy_step(int id, StepOp op, std::int64_t device, int host, std::int64_t bytes, bool input) {
  ResolvedStep s;
  s.id = id;
  s.stream = op == StepOp::Prefetch ? Stream::H2D : Stream::D2H;
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
  std::vector<ResolvedStep> steps{copy_step(0, StepOp::Prefetch, a, 0, big, true),
                                  copy_step(1, StepOp::Offload, a, 1, big, false),
                                  copy_step(2, StepOp::Prefetch, b, 0, small, true)};
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
    expect(wrong == 0,
           fmt::format("round {}: the offload read this round's input slice ({} wrong bytes, {} of them 0xFF)", r,
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
  expect(poison_end + 1000 >= offload_end,
         fmt::format("timeline: the poisoning step ends ({} ns) after the offload it waited for ({} ns)", poison_end,
                     offload_end));

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
    bad.stream = Stream::Compute;
    bad.op = StepOp::Forward;
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
    expect(message.find("is not a cuDNN forward algorithm") != std::string::npos &&
               message.find("step 0") != std::string::npos,
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

// Relative L2 error |got - want| / |want| (NaN: infinite), as replay.cpp's check.
using Tensors = std::map<std::string, std::vector<float>>;

// The worst relative L2 error over the tensors of `want`, and which.
std::pair<double, std::string> worst_error(const Tensors& got, const Tensors& want) {
  std::pair<double, std::string> worst{0.0, ""};
  for (const auto& [name, w] : want) {
    const double e = relative_l2_error(got.at(name), w);
    if (worst.second.empty() || e > worst.first) worst = {e, name};
  }
  return worst;
}

struct LoopResult {
  Tensors dw0;  // weight gradients of the first iteration (before any update), read after its rounds
  Tensors w;    // weights after every iteration's updates
};

// The replay's program (replay.cpp: the same initial values, then per iteration: zero dW, the
// rounds with a barrier after each, the final steps), with poisoning in the first iteration, and
// dW read after the first iteration's rounds. Kept apart from replay_plan's --check (which maps
// the plan's cuDNN algorithms to CPU ones for its reference) so that both are exercised.
LoopResult run_loop(Backend& be, const Plan& plan, const Program& program, const std::vector<ResolvedStep>& steps,
                    int iterations, std::uint64_t seed) {
  const Graph& g = program.graph;
  std::vector<std::int64_t> host_sizes;
  for (const auto& h : plan.host_buffers) host_sizes.push_back(h.size);
  be.allocate(plan.arena_bytes, host_sizes);
  load_initial_values(plan, program, be, seed);
  std::map<std::string, const PlanBuffer*> resident;
  for (const auto& b : plan.buffers)
    if (b.resident) resident[b.tensor] = &b;
  auto read_all = [&](const std::string& prefix) {
    Tensors out;
    for (const auto& [name, b] : resident) {
      if (name.rfind(prefix, 0) != 0) continue;
      const GraphLayer& gl = g.layers[static_cast<std::size_t>(g.index_of(name.substr(prefix.size())))];
      std::vector<float> v(static_cast<std::size_t>(gl.params()));
      be.read(b->offset, v.data(), static_cast<std::int64_t>(v.size() * sizeof(float)));
      out["W:" + gl.name()] = std::move(v);  // keyed by the weights' name in both maps
    }
    return out;
  };
  RunContext ctx;
  ctx.sub_batch = plan.sub_batch;
  ctx.total_batch = plan.batch;
  ctx.seed = seed;
  LoopResult res;
  for (int it = 0; it < iterations; ++it) {
    for (const auto& b : plan.buffers)
      if (b.resident && b.tensor.rfind("dW:", 0) == 0) be.fill(b.offset, b.size, 0);
    be.begin();
    for (std::int64_t r = 0; r < plan.rounds; ++r) {
      for (const auto& s : steps)
        if (!s.final) be.submit(s, static_cast<int>(r), ctx, it == 0);
      be.barrier();
    }
    if (it == 0) res.dw0 = read_all("dW:");
    for (const auto& s : steps)
      if (s.final) be.submit(s, 0, ctx, false);
    be.barrier();
    be.end();
  }
  res.w = read_all("W:");
  return res;
}

void check_plan(const std::string& path, int device, int iterations, double tolerance) {
  fmt::print("plan {}\n", path);
  const Plan plan = load_plan(path);
  const std::string error = find_plan_error(plan);
  if (!error.empty()) {
    expect(false, "the plan verifies: " + error);
    return;
  }
  const Program program = derive_program(plan);
  const Graph& g = program.graph;
  const std::vector<ResolvedStep> steps = resolve_steps(plan, program);
  const std::uint64_t seed = 0x5eed;
  // At a 16-bit precision at least 8 units of its roundoff (replay.h default_check_tolerance):
  // cuDNN and the CPU emulation may round a stored value to different neighbours.
  tolerance = std::max(tolerance, default_check_tolerance(plan.precision, true));
  if (plan.precision != Precision::FP32)
    fmt::print("  precision {}, tolerance {:.1e}\n", precision_name(plan.precision), tolerance);
  int conv_steps = 0, copies = 0, poisons = 0;
  for (const auto& s : steps) {
    conv_steps += s.config.empty() ? 0 : 1;
    copies += s.stream != Stream::Compute ? 1 : 0;
    poisons += static_cast<int>(s.poison_after.size());
  }
  fmt::print(
      "  {} rounds of {}, {} steps ({} conv kernels, {} copies), {} regions poisoned per round, arena {} bytes\n",
      plan.rounds, plan.sub_batch, steps.size(), conv_steps, copies, poisons, plan.arena_bytes);

  // The same program on the CPU backend, every conv kernel with the CPU's direct algorithm (no
  // workspace) and the plan's micro-batches, and the reference (undivided, direct).
  std::vector<ResolvedStep> cpu_steps = steps;
  for (auto& s : cpu_steps)
    for (auto& m : s.config) m.algo = "direct";
  LoopResult rg;
  {
    auto gpu = make_cuda_backend(g, device);  // released before the next CUDA backend is made
    rg = run_loop(*gpu, plan, program, steps, iterations, seed);
  }
  auto cpu = make_cpu_backend(g);
  const LoopResult rc = run_loop(*cpu, plan, program, cpu_steps, iterations, seed);
  ReferenceScratch scratch;  // both references' memory
  const ReferenceResult ref = reference_gradients(g, plan.batch, plan.sub_batch, seed, {}, {}, 1, 0, &scratch);
  Tensors want;
  for (const auto& [name, v] : ref.weight_gradients) want["W:" + name.substr(3)] = v;
  const auto [e_gpu, t_gpu] = worst_error(rg.dw0, want);
  const auto [e_cpu, t_cpu] = worst_error(rc.dw0, want);
  const auto [e_w, t_w] = worst_error(rg.w, rc.w);
  expect(e_cpu <= 1e-4,
         fmt::format("cpu backend (direct) weight gradients vs the reference: relative L2 error {:.2e} (d{})", e_cpu,
                     t_cpu));
  // Each tensor within kFloorFactor x its floor, or the tolerance (replay.h RunOptions): at 16 bits
  // the emulation's distance from FP32 (fp32_floor), at FP32 a jittered reference's distance from
  // the reference (rounding_floor), which a deeper network's batch norm makes larger than 1e-2.
  const bool half = low_precision_storage(plan.precision);
  const ReferenceResult other =
      half ? reference_gradients(build_graph(plan.network, path, Precision::FP32), plan.batch, plan.sub_batch, seed, {},
                                 {}, 1, 0, &scratch)
           : reference_gradients(g, plan.batch, plan.sub_batch, seed, {}, {}, 1, kRoundingJitter, &scratch);
  GradientError worst;
  double worst_share = 0;
  for (const auto& [name, v] : ref.weight_gradients) {
    const std::vector<float>& floor_run = other.weight_gradients.at(name);
    const GradientError e = compare_gradient(name, rg.dw0.at("W:" + name.substr(3)), v, half ? &floor_run : nullptr,
                                             half ? nullptr : &floor_run);
    if (worst.tensor.empty() || e.share_of_limit(tolerance) > worst_share) {
      worst = e;
      worst_share = e.share_of_limit(tolerance);
    }
  }
  expect(worst_share <= 1,
         fmt::format("cuda weight gradients (poisoned run) vs the reference: worst {} at relative L2 error {:.2e}, "
                     "{:.0f} % of its limit max({:.1e}, {:g} x {} {:.2e}) (largest error {:.2e}, d{})",
                     worst.tensor, worst.max_rel_error, 100 * worst_share, tolerance, kFloorFactor,
                     half ? "the emulation's distance from FP32" : "a jittered reference's distance", worst.floor,
                     e_gpu, t_gpu));
  expect(e_w <= tolerance,
         fmt::format("weights after {} iterations, cuda vs cpu: relative L2 error {:.2e} ({})", iterations, e_w, t_w));

  // The same iterations with every phase after the first iteration launched as a CUDA graph
  // (the first iteration, poisoned, runs step by step; the second captures; the third launches):
  // the weights as without graphs, within the tolerance of the CUDA-vs-CPU comparison above: the
  // two differ by the device's own nondeterminism (atomics in some backward algorithms; on an H200,
  // resnet20 b64's weights by 8.8e-5 after 3 iterations, a network without them by 0).
  LoopResult rgg;
  std::string graphs_described, graphs_notes;
  {
    auto gpu = make_cuda_backend(g, device, false, /*graphs=*/true);
    rgg = run_loop(*gpu, plan, program, steps, iterations, seed);
    graphs_described = gpu->description();
    for (const auto& n : gpu->notes())
      if (n.find("CUDA graphs") != std::string::npos) graphs_notes += n;
  }
  expect(iterations < 2 || (graphs_described.find("CUDA graphs") != std::string::npos && graphs_notes.empty()),
         fmt::format("phases launched as CUDA graphs ({}{})", graphs_described,
                     graphs_notes.empty() ? "" : "; " + graphs_notes));
  const auto [e_gw, t_gw] = worst_error(rgg.w, rg.w);
  expect(e_gw <= tolerance,
         fmt::format("weights after {} iterations, CUDA graphs vs a launch per step: relative L2 error "
                     "{:.2e} ({})",
                     iterations, e_gw, t_gw));

  // The replay engine itself (as `ucplan run --device cuda`, with and without graphs): times and
  // the measured timeline.
  for (const bool graphs : {false, true}) {
    RunOptions o;
    o.iterations = iterations;
    RunReport rr;
    {
      auto gpu = make_cuda_backend(g, device, false, graphs);
      rr = replay_plan(plan, *gpu, o);
    }
    fmt::print("  {}: median {:.3f} ms, predicted {:.3f} ms ({}), device memory held {} bytes (arena {})\n", rr.backend,
               rr.median_seconds * 1e3, rr.predicted_seconds * 1e3, plan.profile_source, rr.device_memory_bytes,
               rr.arena_bytes);
    const std::string how = graphs ? " (CUDA graphs)" : "";
    std::size_t finals = 0;
    for (const auto& s : steps) finals += s.final ? 1 : 0;
    const std::size_t want_entries = static_cast<std::size_t>(plan.rounds) * (steps.size() - finals) + finals;
    expect(rr.timeline.size() == want_entries,
           fmt::format("timeline{}: {} entries = {} rounds x {} steps + {} final", how, rr.timeline.size(), plan.rounds,
                       steps.size() - finals, finals));
    bool ordered = true;
    for (const auto& m : rr.timeline) ordered = ordered && m.start_ns >= 0 && m.end_ns >= m.start_ns;
    expect(ordered, fmt::format("timeline{}: 0 <= start <= end for every step", how));
    std::string first;
    const int bad = wait_violations(steps, rr.timeline, &first);
    expect(bad == 0, fmt::format("timeline{}: waits respected ({} violations) {}", how, bad, first));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a log up to the line before a crash
  int device = 0, iterations = 3;
  double tolerance = 1e-2;
  bool required = cuda::device_required_by_environment();
  std::vector<std::string> plans;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--device" && i + 1 < argc)
      device = std::atoi(argv[++i]);
    else if (a == "--iterations" && i + 1 < argc)
      iterations = std::atoi(argv[++i]);
    else if (a == "--tolerance" && i + 1 < argc)
      tolerance = std::atof(argv[++i]);
    else if (a == "--require-device")
      required = true;
    else
      plans.push_back(a);
  }
  if (plans.empty()) {
    std::fprintf(
        stderr,
        "usage: ucplan-cuda-check [--device N] [--iterations K] [--tolerance T] [--require-device] PLAN.json...\n");
    return 2;
  }
  if (const int code = cuda::check_program_device_gate("ucplan-cuda-check", required); code >= 0) return code;
  try {
    {
      const Plan first = load_plan(plans[0]);
      check_backend_alone(build_graph(first.network, plans[0], first.precision), device);
    }
    for (const auto& p : plans) check_plan(p, device, iterations, tolerance);
  } catch (const std::exception& e) {
    fmt::print("FAIL: {}\n", e.what());
    return 1;
  }
  fmt::print("{}: {} failure{}\n", g_failures ? "FAILED" : "PASSED", g_failures, g_failures == 1 ? "" : "s");
  return g_failures ? 1 : 0;
}
