// The adversary of `ucplan check` (issue 12), kept in the repository: it compiles valid plans of
// the test networks (tests/test_nets.h) with every strategy at budgets from keep-all to the
// lower bound and at several sub-batch sizes, so they hold sub-batch rounds, offloads, prefetches
// and recomputation; then mutates them at random (offsets, sizes, lifetimes, deleted, repeated or moved
// steps, waits, streams, micro-configurations with or without the kernels list, workspaces,
// host buffers, algorithms, the sub-batch, a carried input and its refill). Every mutant the verifier accepts must
// replay on the CPU backend with `run --check` semantics: weight gradients of two iterations equal to the reference,
// every freed region poisoned, the input host buffers intact, and no error from the executor. A crash ends the program
// (run it under ASan/UBSan: scripts/fuzz.sh).
//
// Usage: ucplan-plan-mutator [--mutants N] [--seed S] [--verbose]
// Prints one summary line; exit 1 (with the mutant's description) when an accepted mutant fails, or when fewer
// than one mutant in 100 was accepted and replayed (the mutations no longer reach plans the verifier accepts).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "executor/backend.h"
#include "executor/replay.h"
#include "planner/model/errors.h"
#include "planner/passes/lower_bound.h"
#include "planner/passes/pipeline.h"
#include "planner/ir/route.h"
#include "planner/check/verify.h"
#include "profiler/cpu_runner.h"
#include "profiler/profile_network.h"
#include "tests/plan_edit.h"
#include "tests/planner_fixtures.h"
#include "tests/test_nets.h"

using namespace ucplan;

namespace {

// One search branch (PlanOptions::quick): the mutants need valid plans of every kind (rounds,
// offload, recomputation), not the fastest ones; the default search made building the base plans
// most of the mutator's run under the sanitizers (42 s of scripts/fuzz.sh --quick's 72).
Plan compile(const Network& net, const Profile& prof, std::int64_t budget, const std::string& strategy,
             const std::string& sub_batch) {
  CompileInput in = test::input_for(net, prof, budget, strategy, sub_batch);
  in.options.quick = true;
  return make_plan(in).plan;
}

std::vector<Plan> base_plans() {
  std::vector<Plan> out;
  for (const char* text : {test::kChain, test::kResidual, test::kConcat}) {
    const Network net = parse_network_text(text, "mutator");
    const Profile prof = test::deterministic_cpu_profile(net, 8);
    const Graph g = build_graph(net, "mutator");
    const std::int64_t lb = memory_lower_bound(build_tasks(g, construct_route(g)), 1).bytes;
    const std::int64_t peak = compile(net, prof, std::int64_t{1} << 40, "keep-all", "auto").summary.peak_bytes;
    for (std::int64_t budget : {4 * peak, peak * 85 / 100, lb + (peak - lb) / 3, lb + (peak - lb) / 8, lb})
      for (const char* strategy : {"ucplan", "superneurons", "vdnn-all", "vdnn-conv", "checkpoint-sqrt", "keep-all"})
        for (const char* sub_batch : {"auto", "any", "2", "4"}) {
          try {
            Plan p = compile(net, prof, budget, strategy, sub_batch);
            if (find_plan_error(p).empty()) out.push_back(std::move(p));
          } catch (const UserError&) {
            // A baseline that does not fit this budget: fine.
          }
        }
  }
  // bf16 (issue 15): 2-byte activations and gradients, emulated exactly on the CPU; fewer
  // variants, since the buffer logic is the same and only the sizes and the rounding differ.
  for (const char* text : {test::kChain, test::kResidual}) {
    const Network net = parse_network_text(text, "mutator");
    const Profile prof = test::deterministic_cpu_profile(net, 8, Precision::BF16);
    const Graph g = build_graph(net, "mutator", Precision::BF16);
    const std::int64_t lb = memory_lower_bound(build_tasks(g, construct_route(g)), 1).bytes;
    const std::int64_t peak = compile(net, prof, std::int64_t{1} << 40, "keep-all", "auto").summary.peak_bytes;
    for (std::int64_t budget : {peak * 85 / 100, lb + (peak - lb) / 3, lb})
      for (const char* strategy : {"ucplan", "vdnn-all", "superneurons"})
        for (const char* sub_batch : {"auto", "any"}) {
          try {
            Plan p = compile(net, prof, budget, strategy, sub_batch);
            if (find_plan_error(p).empty()) out.push_back(std::move(p));
          } catch (const UserError&) {
          }
        }
  }
  return out;
}

class Mutator {
 public:
  explicit Mutator(std::uint64_t seed) : rng_(seed) {}

  // Applies 1-3 mutations; returns what was done, for the report.
  std::string mutate(Plan& p) {
    std::string what;
    const int count = 1 + static_cast<int>(pick(3));
    for (int i = 0; i < count; ++i) {
      std::string w = "nothing";
      for (int tries = 0; w == "nothing" && tries < 20; ++tries) w = one(p);
      what += (what.empty() ? "" : "; ") + w;
    }
    if (pick(10) < 8) {  // usually keep the times consistent, so the deeper checks are reached
      test::retime(p);
      what += " (retimed)";
    }
    return what;
  }

 private:
  std::uint64_t pick(std::uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  int any_buffer(const Plan& p) { return static_cast<int>(pick(p.buffers.size())); }
  int any_step(const Plan& p) { return static_cast<int>(pick(p.steps.size())); }
  // A value at an edge near `around`, which an earlier mutation may have put at an edge itself
  // (INT64_MAX - 17): the arithmetic saturates rather than overflow (UBSan's finding with seed 309).
  static std::int64_t add(std::int64_t a, std::int64_t b) {
    std::int64_t r = 0;
    return __builtin_add_overflow(a, b, &r) ? (b > 0 ? INT64_MAX : INT64_MIN) : r;
  }
  std::int64_t interesting(std::int64_t around) {
    switch (pick(9)) {
      case 0:
        return add(around, 256);
      case 1:
        return add(around, -256);
      case 2:
        return add(around, 1 + static_cast<std::int64_t>(pick(255)));
      case 3:
        return INT64_MAX - static_cast<std::int64_t>(pick(4096));
      case 4:
        return -static_cast<std::int64_t>(pick(4096)) - 1;
      case 5:
        return 0;
      case 6:
        return around / 2;
      case 7:
        return add(around, around);
      default:
        return static_cast<std::int64_t>(pick(static_cast<std::uint64_t>(std::max<std::int64_t>(around, 1)) * 2)) /
               256 * 256;
    }
  }
  std::vector<int> conv_steps(const Plan& p) {
    std::vector<int> out;
    for (const auto& s : p.steps)
      if (!s.config.empty()) out.push_back(s.id);
    return out;
  }
  PlanKernel* kernel_for(Plan& p, const PlanStep& s) {
    const StepOp op = s.op == StepOp::Recompute ? StepOp::Forward : s.op;
    for (auto& k : p.kernels)
      if (k.layer == s.layer && k.op == op) return &k;
    return nullptr;
  }
  // Changes a step's configuration, and with probability 1/2 the kernels list to match (the
  // adversary keeps the plan self-consistent).
  std::string set_config(Plan& p, int id, std::vector<MicroStep> c, const std::string& why) {
    p.steps[id].config = c;
    std::string what = fmt::format("step {} config: {}", id, why);
    if (pick(2)) {
      const StepOp kop = p.steps[id].op == StepOp::Recompute ? StepOp::Forward : p.steps[id].op;
      for (auto& s : p.steps)
        if (s.layer == p.steps[id].layer && !s.config.empty() &&
            (s.op == StepOp::Recompute ? StepOp::Forward : s.op) == kop)
          s.config = c;
      if (PlanKernel* k = kernel_for(p, p.steps[id])) k->config = c;
      what += " (kernels list too)";
    }
    return what;
  }

  std::string one(Plan& p) {
    switch (pick(24)) {
      case 0: {  // offset
        int b = any_buffer(p);
        p.buffers[b].offset = interesting(p.buffers[b].offset);
        return fmt::format("buffer {} offset -> {}", b, p.buffers[b].offset);
      }
      case 1: {  // onto another buffer's bytes
        int a = any_buffer(p), b = any_buffer(p);
        p.buffers[b].offset = add(p.buffers[a].offset, pick(2) ? 0 : p.buffers[a].size / 2 / 256 * 256);
        return fmt::format("buffer {} moved onto buffer {}", b, a);
      }
      case 2: {  // size
        int b = any_buffer(p);
        p.buffers[b].size = interesting(p.buffers[b].size);
        return fmt::format("buffer {} size -> {}", b, p.buffers[b].size);
      }
      case 3: {  // lifetime
        int b = any_buffer(p);
        const int d = static_cast<int>(pick(7)) - 3;
        if (pick(2))
          p.buffers[b].first_step += d;
        else
          p.buffers[b].last_step += d;
        return fmt::format("buffer {} lifetime shifted by {}", b, d);
      }
      case 4: {  // delete a step
        if (p.steps.size() < 2) return "nothing";
        int s = any_step(p);
        test::remove_step(p, s);
        return fmt::format("step {} deleted", s);
      }
      case 5: {  // delete a wait
        int s = any_step(p);
        if (p.steps[s].waits.empty()) return "nothing";
        p.steps[s].waits.erase(p.steps[s].waits.begin() + static_cast<long>(pick(p.steps[s].waits.size())));
        return fmt::format("a wait of step {} deleted", s);
      }
      case 6: {  // retarget a wait
        int s = any_step(p);
        if (p.steps[s].waits.empty() || s == 0) return "nothing";
        p.steps[s].waits[pick(p.steps[s].waits.size())] = static_cast<int>(pick(static_cast<std::uint64_t>(s)));
        return fmt::format("a wait of step {} retargeted", s);
      }
      case 7: {  // swap two neighbouring steps
        int s = any_step(p);
        if (s + 1 >= static_cast<int>(p.steps.size())) return "nothing";
        std::swap(p.steps[s], p.steps[s + 1]);
        p.steps[s].id = s;
        p.steps[s + 1].id = s + 1;
        for (auto& st : p.steps)
          for (int& w : st.waits) w = w == s ? s + 1 : w == s + 1 ? s : w;
        if (pick(2)) test::relife(p);
        return fmt::format("steps {} and {} swapped", s, s + 1);
      }
      case 8: {  // stream
        int s = any_step(p);
        static const Stream streams[] = {Stream::Compute, Stream::H2D, Stream::D2H};
        p.steps[s].stream = streams[pick(3)];
        return fmt::format("step {} moved to stream {}", s, stream_name(p.steps[s].stream));
      }
      case 9: {  // merge micro-batches
        auto cs = conv_steps(p);
        if (cs.empty()) return "nothing";
        int s = cs[pick(cs.size())];
        auto c = p.steps[s].config;
        std::int64_t total = 0;
        for (auto& m : c) total += m.batch;
        return set_config(p, s, {MicroStep{c[pick(c.size())].algo, total}}, "micro-batches merged");
      }
      case 10: {  // split a micro-batch
        auto cs = conv_steps(p);
        if (cs.empty()) return "nothing";
        int s = cs[pick(cs.size())];
        auto c = p.steps[s].config;
        std::size_t i = pick(c.size());
        if (c[i].batch < 2) return "nothing";
        const std::int64_t a = 1 + static_cast<std::int64_t>(pick(static_cast<std::uint64_t>(c[i].batch - 1)));
        c.insert(c.begin() + static_cast<long>(i) + 1, MicroStep{c[i].algo, c[i].batch - a});
        c[i].batch = a;
        return set_config(p, s, c, "a micro-batch split");
      }
      case 11: {  // algorithm
        auto cs = conv_steps(p);
        if (cs.empty()) return "nothing";
        int s = cs[pick(cs.size())];
        auto c = p.steps[s].config;
        static const char* algos[] = {"direct", "gemm", "gemm_lift", "implicit_gemm", "algo_0", "fft", "bogus", ""};
        c[pick(c.size())].algo = algos[pick(8)];
        return set_config(p, s, c, "an algorithm changed");
      }
      case 12: {  // micro-batch sizes
        auto cs = conv_steps(p);
        if (cs.empty()) return "nothing";
        int s = cs[pick(cs.size())];
        auto c = p.steps[s].config;
        c[pick(c.size())].batch += static_cast<std::int64_t>(pick(5)) - 2;
        return set_config(p, s, c, "a micro-batch resized");
      }
      case 13: {  // workspace of a step
        int s = any_step(p);
        const int before = p.steps[s].workspace;
        p.steps[s].workspace = pick(3) == 0 ? -1 : any_buffer(p);
        return fmt::format("step {} workspace {} -> {}", s, before, p.steps[s].workspace);
      }
      case 14: {  // shrink a workspace buffer, maybe moving a live buffer into the freed bytes
        std::vector<int> ws;
        for (const auto& b : p.buffers)
          if (b.tensor == "workspace") ws.push_back(b.id);
        if (ws.empty()) return "nothing";
        int b = ws[pick(ws.size())];
        const std::int64_t keep = p.buffers[b].size / static_cast<std::int64_t>(2 + pick(3)) / 256 * 256;
        p.buffers[b].size = std::max<std::int64_t>(keep, 256);
        if (pick(2)) {
          int o = any_buffer(p);
          if (!p.buffers[o].resident) p.buffers[o].offset = add(p.buffers[b].offset, p.buffers[b].size);
          return fmt::format("workspace buffer {} shrunk, buffer {} moved into the freed bytes", b, o);
        }
        return fmt::format("workspace buffer {} shrunk to {}", b, p.buffers[b].size);
      }
      case 15: {  // host buffer of a copy
        int s = any_step(p);
        if (p.host_buffers.empty() || p.steps[s].stream == Stream::Compute) return "nothing";
        p.steps[s].host = static_cast<int>(pick(p.host_buffers.size()));
        return fmt::format("step {} host buffer -> {}", s, p.steps[s].host);
      }
      case 16: {  // host buffer roles and sizes
        if (p.host_buffers.empty()) return "nothing";
        int h = static_cast<int>(pick(p.host_buffers.size()));
        if (pick(2))
          p.host_buffers[h].input = !p.host_buffers[h].input;
        else
          p.host_buffers[h].size = interesting(p.host_buffers[h].size);
        return fmt::format("host buffer {} role or size changed", h);
      }
      case 17: {  // offload into an input host buffer, retargeting a copy and its tensor
        int s = any_step(p);
        if (p.steps[s].op != StepOp::Offload) return "nothing";
        for (const auto& h : p.host_buffers)
          if (h.input && h.tensor == p.steps[s].tensor) {
            p.steps[s].host = h.id;
            return fmt::format("step {} offloads into input host buffer {}", s, h.id);
          }
        p.steps[s].host = 0;
        return fmt::format("step {} offloads into host buffer 0", s);
      }
      case 18: {  // operand lists
        int s = any_step(p);
        auto& st = p.steps[s];
        std::vector<int>* lists[] = {&st.reads, &st.writes, &st.accumulates};
        auto* l = lists[pick(3)];
        if (l->empty()) {
          l->push_back(any_buffer(p));
          return fmt::format("step {} got an extra operand", s);
        }
        (*l)[pick(l->size())] = any_buffer(p);
        if (pick(2)) test::relife(p);
        return fmt::format("an operand of step {} replaced", s);
      }
      case 19: {  // sub-batch and rounds
        const std::int64_t f = pick(2) ? 2 : 0;
        if (f && p.sub_batch % 2 == 0) {
          p.sub_batch /= 2;
          p.rounds *= 2;
        } else {
          p.sub_batch *= 2;
          p.rounds = std::max<std::int64_t>(p.rounds / 2, 1);
          p.batch = p.sub_batch * p.rounds;
        }
        return fmt::format("sub-batch {} x {} rounds", p.sub_batch, p.rounds);
      }
      case 20: {  // op: recompute <-> forward, or a step's layer
        int s = any_step(p);
        auto& st = p.steps[s];
        if (st.op == StepOp::Recompute)
          st.op = StepOp::Forward;
        else if (st.op == StepOp::Forward)
          st.op = StepOp::Recompute;
        else
          st.layer = p.steps[any_step(p)].layer;
        return fmt::format("step {} op/layer changed", s);
      }
      case 21: {  // the batch's input carried across rounds (plan.h): the ahead flag or the carried one
        if (pick(2)) {
          int s = any_step(p);
          p.steps[s].ahead = !p.steps[s].ahead;
          return fmt::format("step {} ahead -> {}", s, p.steps[s].ahead);
        }
        int b = any_buffer(p);
        p.buffers[b].carried = !p.buffers[b].carried;
        if (pick(2)) test::relife(p);
        return fmt::format("buffer {} carried -> {}", b, p.buffers[b].carried);
      }
      case 22: {  // a step run again later (a second offload over a host copy still to be read, a value
                  // made again while a copy of the old one waits to be read back), waiting as it did or
                  // also on the step before its new place
        const int s = any_step(p);
        const int at = s + 1 + static_cast<int>(pick(p.steps.size() - static_cast<std::size_t>(s)));
        PlanStep again = p.steps[s];
        if (pick(2) && at > 0) again.waits.push_back(at - 1);
        test::insert_step(p, at, std::move(again));
        return fmt::format("step {} repeated as step {}", s, at);
      }
      default: {  // arena and budget
        if (pick(2))
          p.arena_bytes = interesting(p.arena_bytes);
        else
          p.budget_bytes = interesting(p.budget_bytes);
        p.summary.peak_bytes = p.arena_bytes;
        return "arena or budget changed";
      }
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace

int main(int argc, char** argv) {
  long mutants = 500;
  std::uint64_t seed = 1;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mutants") && i + 1 < argc)
      mutants = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--verbose"))
      verbose = true;
    else {
      std::fprintf(stderr, "usage: %s [--mutants N] [--seed S] [--verbose]\n", argv[0]);
      return 2;
    }
  }
  const std::vector<Plan> plans = base_plans();
  int with_rounds = 0, with_offload = 0, with_recompute = 0, with_carried = 0;
  for (const Plan& p : plans) {
    with_rounds += p.rounds > 1;
    with_offload += p.summary.offload_bytes > 0;
    with_recompute += p.summary.recompute_steps > 0;
    for (const PlanBuffer& b : p.buffers) with_carried += b.carried && p.rounds > 1;
  }
  if (plans.empty() || !with_rounds || !with_offload || !with_recompute || !with_carried) {
    std::fprintf(stderr, "the base plans do not cover rounds, offload, recomputation and a carried input\n");
    return 1;
  }
  Mutator mut(seed);
  long accepted = 0, failed = 0, unchanged = 0;
  for (long i = 0; i < mutants; ++i) {
    const Plan& base = plans[static_cast<std::size_t>(i) % plans.size()];
    Plan m = base;
    const std::string what = mut.mutate(m);
    const std::string error = find_plan_error(m);
    if (verbose)
      std::printf("mutant %ld of plan %zu: %s -> %s\n", i, static_cast<std::size_t>(i) % plans.size(), what.c_str(),
                  error.empty() ? "ACCEPTED" : error.c_str());
    if (!error.empty()) continue;
    if (plan_to_json_text(m) == plan_to_json_text(base)) {
      ++unchanged;
      continue;
    }
    ++accepted;
    std::string failure;
    try {
      const Graph g = build_graph(m.network, "mutant", m.precision);
      auto backend = make_cpu_backend(g);
      RunOptions o;
      o.iterations = 1;
      o.check = true;
      o.tolerance = default_check_tolerance(m.precision, false);
      const RunReport r = replay_plan(m, *backend, o);
      if (!r.passed)
        failure = r.fault.empty() ? fmt::format("gradients differ: {} ({})", r.max_rel_error, r.worst_tensor) : r.fault;
      else if (r.checked_iterations < 2)
        failure = "fewer than two iterations checked";
    } catch (const std::exception& e) {
      failure = std::string("run refused it: ") + e.what();
    }
    if (!failure.empty()) {
      ++failed;
      std::printf("ACCEPTED AND FAILED: mutant %ld (seed %llu) of plan %zu (%s, %s, sub-batch %lld): %s: %s\n", i,
                  static_cast<unsigned long long>(seed), static_cast<std::size_t>(i) % plans.size(),
                  base.network.name.c_str(), base.strategy.c_str(), static_cast<long long>(base.sub_batch),
                  what.c_str(), failure.c_str());
    }
  }
  std::printf(
      "plan mutator: %zu base plans (%d with rounds, %d with offload, %d with recomputation, %d carrying their "
      "input over rounds), %ld mutants, %ld refused, %ld accepted (%ld identical to their plan), %ld accepted and "
      "failed\n",
      plans.size(), with_rounds, with_offload, with_recompute, with_carried, mutants, mutants - accepted - unchanged,
      accepted + unchanged, unchanged, failed);
  // A run that replayed almost nothing proved almost nothing: at least one accepted, changed
  // mutant in 100 (600 mutants of seed 1 replay 16, 300 replay 5), else the mutations no longer reach plans the
  // verifier accepts.
  if (accepted * 100 < mutants) {
    std::printf("too few accepted mutants replayed: %ld of %ld (at least one in 100)\n", accepted, mutants);
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
