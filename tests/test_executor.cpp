// The executor on the CPU: plans at keep-all, at a tight budget and at the lower bound replay
// with weight gradients equal to a plain reference run; plans broken on purpose are refused by
// the verifier, and with verification bypassed are caught by the gradient check and poisoning.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "executor/backend.h"
#include "executor/cpu_ops.h"
#include "executor/reference.h"
#include "executor/replay.h"
#include "executor/substitute.h"
#include "planner/model/errors.h"
#include "planner/passes/lower_bound.h"
#include "planner/passes/pipeline.h"
#include "planner/ir/route.h"
#include "planner/check/verify.h"
#include "planner/model/json_util.h"
#include "planner/views/plan_views.h"
#include "plan_edit.h"
#include "executor/cpu_ops.h"
#include "profiler/cpu_runner.h"
#include "profiler/model_device.h"
#include "profiler/profile_network.h"
#include "planner_fixtures.h"
#include "test_nets.h"

using namespace ucplan;
using namespace ucplan::test;

namespace {

// A CPU profile with deterministic times (planner_fixtures.h): only the plans' correctness
// matters here, and measured times would make the plans, and whether a baseline fits at a
// budget, depend on the machine's load.
Profile cpu_profile(const Network& net, std::int64_t batch) { return deterministic_cpu_profile(net, batch); }

Plan compile(const Network& net, const Profile& prof, std::int64_t budget, const std::string& strategy,
             const std::string& sub_batch) {
  return make_plan(input_for(net, prof, budget, strategy, sub_batch)).plan;
}

RunOptions check_options(bool poison = true, bool rounding_floor = false) {
  RunOptions o;
  o.iterations = 1;
  o.check = true;
  o.poison = poison;
  o.rounding_floor = rounding_floor;
  return o;
}

RunReport replay(const Plan& plan, bool poison = true, bool rounding_floor = false) {
  const Graph g = build_graph(plan.network, "test");
  auto backend = make_cpu_backend(g);
  return replay_plan(plan, *backend, check_options(poison, rounding_floor));
}

// The CPU backend, every call passed on; check_steps only with `precheck` (without it a step
// the CPU cannot run fails when it runs, as on a device whose backend does not check ahead),
// and whether allocate() was called.
class WrappedCpu : public Backend {
 public:
  WrappedCpu(const Graph& g, bool precheck) : cpu_(make_cpu_backend(g)), precheck_(precheck) {}
  std::string description() const override { return cpu_->description(); }
  std::string device_name() const override { return cpu_->device_name(); }
  void check_steps(const std::vector<ResolvedStep>& steps) const override {
    if (precheck_) cpu_->check_steps(steps);
  }
  void allocate(std::int64_t arena, const std::vector<std::int64_t>& hosts) override {
    allocated = true;
    cpu_->allocate(arena, hosts);
  }
  void* host(int id) override { return cpu_->host(id); }
  void write(std::int64_t o, const void* src, std::int64_t b) override { cpu_->write(o, src, b); }
  void read(std::int64_t o, void* dst, std::int64_t b) override { cpu_->read(o, dst, b); }
  void fill(std::int64_t o, std::int64_t b, unsigned char v) override { cpu_->fill(o, b, v); }
  void begin() override { cpu_->begin(); }
  void submit(const ResolvedStep& s, int round, const RunContext& ctx, bool poison) override {
    cpu_->submit(s, round, ctx, poison);
  }
  void barrier() override { cpu_->barrier(); }
  std::vector<MeasuredStep> end() override { return cpu_->end(); }
  std::int64_t device_memory_bytes() override { return cpu_->device_memory_bytes(); }

  bool allocated = false;

 protected:
  std::unique_ptr<Backend> cpu_;

 private:
  bool precheck_;
};

struct Case {
  const char* text;
  Network net;
  Profile prof;
  std::int64_t lower_bound = 0, keep_all_peak = 0;
};

Case make_case(const char* text) {
  Case c{text, parse_network_text(text, "test"), {}, 0, 0};
  c.prof = cpu_profile(c.net, 8);
  const Graph g = build_graph(c.net, "test");
  c.lower_bound = memory_lower_bound(build_tasks(g, construct_route(g)), 1).bytes;
  c.keep_all_peak = compile(c.net, c.prof, std::int64_t{1} << 40, "keep-all", "auto").summary.peak_bytes;
  return c;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {make_case(kChain), make_case(kResidual), make_case(kConcat),
                                        make_case(kModern)};
  return all;
}

}  // namespace

// Without offload, below what every residency table of the search fits, a plan may still fit
// that recomputes every input in every stage and keeps nothing between stages (exact mode's first
// incumbent), refined stage by stage (schedule_recompute_every_stage): the compile finds it where
// it refused before (resnet20 b16 on a measured CPU profile: no plan at 28-29 % of the liveness
// peak; now plans that `run --check` passes), and it replays, poisoned, to the reference.
TEST_CASE("without offload, below what the search's tables fit, a plan recomputing in every stage runs") {
  const Network net = load_network(resolve_network_path("resnet20"));
  const Profile prof = cpu_profile(net, 16);
  auto attempt = [&](std::int64_t budget) -> std::optional<CompileResult> {
    CompileInput in = input_for(net, prof, budget, "ucplan", "auto");
    in.options.offload = false;
    in.options.quick = true;
    try {
      return make_plan(in);
    } catch (const UserError&) {
      return std::nullopt;
    }
  };
  auto from_every_stage = [](const CompileResult& r) {
    for (const auto& c : r.candidates[0].search)
      if (c.name.find("every input recomputed in every stage") != std::string::npos && c.why.empty()) return true;
    return false;
  };
  // The smallest budget with a plan, to 1/64 of the keep-all peak (bisected: feasibility grows
  // with the budget here).
  std::int64_t lo = lower_bound_of(net), hi = keep_all_peak(net, prof);
  REQUIRE(attempt(hi));
  while (hi - lo > keep_all_peak(net, prof) / 64) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (attempt(mid) ? hi : lo) = mid;
  }
  const std::optional<CompileResult> r = attempt(hi);
  REQUIRE(r);
  CHECK(from_every_stage(*r));  // no table fits there
  CHECK(find_plan_error(r->plan) == "");
  const RunReport run = replay(r->plan);
  CHECK(run.passed);
  CHECK(run.max_rel_error < 1e-5);
}

TEST_CASE("run --check: keep-all, a tight budget and the lower bound give the reference gradients") {
  std::int64_t offloaded = 0, recomputed = 0, rounds = 0, carried = 0;
  for (const Case& c : cases()) {
    const std::int64_t tight = c.lower_bound + (c.keep_all_peak - c.lower_bound) / 5;
    struct Budget {
      std::int64_t bytes;
      const char* sub_batch;
    };
    for (Budget b : {Budget{4 * c.keep_all_peak, "auto"}, Budget{tight, "any"}, Budget{c.lower_bound, "any"}}) {
      for (const char* strategy : {"ucplan", "superneurons", "vdnn-all"}) {
        CAPTURE(c.net.name);
        CAPTURE(b.bytes);
        CAPTURE(strategy);
        Plan p;
        try {
          p = compile(c.net, c.prof, b.bytes, strategy, b.sub_batch);
        } catch (const UserError&) {
          CHECK(std::string(strategy) != "ucplan");  // baselines may not fit; ucplan always does
          continue;
        }
        const RunReport r = replay(p);
        CHECK(r.checked);
        CHECK(r.passed);
        CHECK(r.checked_iterations == 2);  // the second from the updated weights
        // Same algorithms, same micro-batches per sample: only accumulation order differs.
        CHECK(r.max_rel_error < 1e-5);
        offloaded += p.summary.offload_bytes;
        recomputed += p.summary.recompute_steps;
        rounds += p.rounds > 1;
        carried += std::any_of(p.buffers.begin(), p.buffers.end(), [](const PlanBuffer& x) { return x.carried; });
      }
    }
  }
  // The cases above really exercise offload, recomputation, sub-batch rounds and a carried input.
  CHECK(offloaded > 0);
  CHECK(recomputed > 0);
  CHECK(rounds > 0);
  CHECK(carried > 0);
}

TEST_SUITE("broken plans") {
  // The chain at a budget where activations must move. vDNN-all offloads every layer's input
  // whatever the costs; ucplan's choice between offload and recomputation depends on them, and
  // could leave nothing to prefetch.
  // A prefetch of an activation (not the batch's data or labels) into bytes that never held that
  // tensor before: without it the reader finds
  // something else there whatever the threads' timing (into the tensor's own old bytes, the
  // reader might race ahead of their poisoning and read a stale but equal copy).
  int fresh_prefetch(const Plan& p) {
    auto fresh_destination = [&](const PlanStep& s) {
      if (s.op != StepOp::Prefetch || p.host_buffers[static_cast<std::size_t>(s.host)].input) return false;
      const PlanBuffer& b = p.buffers[s.writes[0]];
      for (const PlanBuffer& o : p.buffers)
        if (o.id != b.id && o.tensor == b.tensor && o.first_step < b.first_step && o.offset < b.offset + b.size &&
            b.offset < o.offset + o.size)
          return false;
      return true;
    };
    auto it = std::find_if(p.steps.begin(), p.steps.end(), fresh_destination);
    REQUIRE(it != p.steps.end());
    return it->id;
  }

  Plan moving_plan() {
    const Case& c = cases()[0];
    Plan p = compile(c.net, c.prof, c.keep_all_peak * 85 / 100, "vdnn-all", "auto");
    REQUIRE(p.summary.offload_bytes > 0);
    REQUIRE(find_plan_error(p) == "");
    REQUIRE(replay(p).passed);
    return p;
  }

  TEST_CASE("overlapping buffers: refused by the verifier, wrong gradients without it") {
    Plan p = moving_plan();
    bool done = false;
    for (std::size_t i = 0; i < p.buffers.size() && !done; ++i)
      for (std::size_t j = i + 1; j < p.buffers.size() && !done; ++j) {
        PlanBuffer& a = p.buffers[i];
        PlanBuffer& b = p.buffers[j];
        if (a.resident || b.resident || a.tensor == "workspace" || b.tensor == "workspace") continue;
        if (a.tensor.rfind("Y:", 0) != 0 || b.tensor.rfind("Y:", 0) != 0) continue;
        if (b.first_step > a.last_step || a.first_step > b.last_step || b.size < a.size) continue;
        b.offset = a.offset;  // two live activations on the same bytes
        done = true;
      }
    REQUIRE(done);
    CHECK(find_plan_error(p).find("while both live") != std::string::npos);
    CHECK_FALSE(replay(p).passed);
  }

  // The batch's input carried across rounds (plan.h), two rounds of 4: the ahead prefetch made a
  // plain one refills the carried buffer with the round's own slice, so the second round trains
  // on the first round's samples again.
  TEST_CASE("a carried input refilled with the same slice: refused by the verifier, wrong gradients without it") {
    const Case& c = cases()[1];
    Plan p = compile(c.net, c.prof, 2 * c.keep_all_peak, "ucplan", "4");
    REQUIRE(p.rounds == 2);
    auto ahead = std::find_if(p.steps.begin(), p.steps.end(), [](const PlanStep& s) { return s.ahead; });
    REQUIRE(ahead != p.steps.end());
    REQUIRE(find_plan_error(p) == "");
    REQUIRE(replay(p).passed);
    ahead->ahead = false;
    CHECK(find_plan_error(p).find("does not hold the next round's slice") != std::string::npos);
    CHECK_FALSE(replay(p).passed);
  }

  TEST_CASE("a missing prefetch: refused by the verifier, wrong gradients without it") {
    Plan p = moving_plan();
    remove_step(p, fresh_prefetch(p));
    CHECK(find_plan_error(p).find("holds no value") != std::string::npos);
    CHECK_FALSE(replay(p).passed);
  }

  TEST_CASE("updates missing or doubled: refused by the verifier; without it the check of the weights fails") {
    // Each reference starts from the weights the plan's run has, so the gradients alone cannot
    // show a wrong update: the weights after each checked iteration must be w - lr x dW.
    const Plan p = moving_plan();
    auto update_of = [](const Plan& plan, std::size_t k) {
      std::vector<int> ids;
      for (const PlanStep& s : plan.steps)
        if (s.op == StepOp::Update) ids.push_back(s.id);
      REQUIRE(ids.size() > k);
      return ids[k];
    };
    CHECK(replay(p).passed);
    Plan missing = p;
    remove_step(missing, update_of(missing, 0));
    CHECK(find_plan_error(missing).find("final steps, the iteration has") != std::string::npos);
    const RunReport r = replay(missing);
    CHECK_FALSE(r.passed);
    CHECK(r.fault.find("is not its value less the learning rate times") != std::string::npos);
    Plan doubled = p;  // the second layer's update runs as the first's: one layer twice, one never
    const int second = update_of(doubled, 1);
    doubled.steps[static_cast<std::size_t>(second)] = doubled.steps[static_cast<std::size_t>(update_of(doubled, 0))];
    doubled.steps[static_cast<std::size_t>(second)].id = second;
    CHECK(find_plan_error(doubled).find("expected update of") != std::string::npos);
    CHECK(replay(doubled).fault.find("an update missing, doubled or of another layer") != std::string::npos);
  }

  TEST_CASE("without the verifier, a wait on a later step or an unknown buffer is refused, not hung or crashed") {
    const Plan p = moving_plan();
    Plan later = p;
    later.steps[0].waits.push_back(1);  // would wait forever: step 1 cannot start before step 0 on its stream
    CHECK_THROWS_WITH_AS(replay(later), doctest::Contains("steps[0]: waits for step 1, not an earlier one"), UserError);
    Plan unknown = p;
    unknown.steps[1].reads.push_back(static_cast<int>(unknown.buffers.size()));
    CHECK_THROWS_WITH_AS(replay(unknown), doctest::Contains("which the plan does not have"), UserError);
    Plan gap = p;
    gap.steps.back().id += 1;
    CHECK_THROWS_WITH_AS(replay(gap), doctest::Contains("not its place"), UserError);
  }

  TEST_CASE("run --no-verify: schedule errors are replayed, steps reaching outside their buffers are refused") {
    const Plan p = moving_plan();
    std::string schedule;
    CHECK(find_unsafe_plan_error(p, &schedule) == "");
    CHECK(schedule == "");
    // What the poisoning is there to catch: the verifier refuses it, the memory-safe rules do not.
    Plan early = p;
    REQUIRE(free_an_activation_early(early));
    CHECK(find_unsafe_plan_error(early, &schedule) == "");
    CHECK(schedule.find("after its last_step") != std::string::npos);
    Plan missing = p;
    remove_step(missing, fresh_prefetch(missing));
    CHECK(find_unsafe_plan_error(missing, &schedule) == "");
    CHECK(schedule.find("holds no value") != std::string::npos);
    // A buffer past the arena's end, or a step reading another tensor's (smaller) buffer as its
    // input, would make the replay itself read or write outside the arena or its operands.
    Plan outside = p;
    outside.buffers.back().offset = outside.arena_bytes;
    CHECK(find_unsafe_plan_error(outside, &schedule).find("lies outside the arena") != std::string::npos);
    Plan swapped = p;
    auto conv = std::find_if(swapped.steps.begin(), swapped.steps.end(),
                             [](const PlanStep& s) { return s.op == StepOp::Forward && !s.config.empty(); });
    REQUIRE(conv != swapped.steps.end());
    conv->reads[0] = conv->writes[0];
    CHECK(find_unsafe_plan_error(swapped, &schedule).find("names no buffer holding it") != std::string::npos);
  }

  TEST_CASE("the rounding floor: measured per gradient, and a wrong plan is still far beyond it") {
    // A missing prefetch without the verifier: the reader finds other bytes (finite, not poison).
    Plan p = moving_plan();
    const RunReport good = replay(p, true, true);
    CHECK(good.passed);
    CHECK(good.floor_checked);
    REQUIRE_FALSE(good.errors.empty());
    for (const auto& e : good.errors) {
      CAPTURE(e.tensor);
      CHECK(e.max_rel_error < 1e-6);  // the CPU runs the reference's own kernels
      CHECK(e.floor > 0);             // every weight gradient is downstream of a jittered convolution
      CHECK(e.floor < 1e-3);          // a shallow chain without batch norm amplifies little
    }
    remove_step(p, fresh_prefetch(p));
    const RunReport broken = replay(p, false, true);
    CHECK_FALSE(broken.passed);
    CAPTURE(broken.fault);
    CHECK(broken.worst_share_of_limit > 1);
  }

  TEST_CASE("freed too early: only poisoning catches it when the bytes are not reused") {
    Plan p = moving_plan();
    // An activation read again later: declare it dead right after it is written.
    REQUIRE(free_an_activation_early(p));
    CHECK(find_plan_error(p).find("after its last_step") != std::string::npos);
    // Nothing else writes those bytes before the late read: without poisoning the run looks fine.
    CHECK(replay(p, /*poison=*/false).passed);
    // Poisoned when the plan says the buffer dies, the late read sees NaN.
    const RunReport r = replay(p);
    CHECK_FALSE(r.passed);
    CHECK(r.max_rel_error > 1.0);
  }
}

// The holes an adversary found in `ucplan check` (issue 12), each closed in the verifier itself:
// a plan broken in that way is refused with a message saying why, and (where the executor can
// run it at all) shown to be really wrong when the verifier is bypassed.
TEST_SUITE("adversarial plans") {
  Plan keep_all(int which) {
    const Case& c = cases()[static_cast<std::size_t>(which)];
    Plan p = compile(c.net, c.prof, 4 * c.keep_all_peak, "keep-all", "auto");
    REQUIRE(find_plan_error(p) == "");
    return p;
  }
  // A conv step running a lowering algorithm (it needs a workspace) with its kernel entry.
  PlanStep* lowered_step(Plan & p) {
    for (auto& s : p.steps)
      if (s.op != StepOp::Recompute && s.workspace >= 0 && !s.config.empty() && s.config[0].algo != "direct") return &s;
    return nullptr;
  }
  void set_config(Plan & p, const PlanStep& s, const std::vector<MicroStep>& c) {
    for (auto& st : p.steps)
      if (st.layer == s.layer && (st.op == s.op || (s.op == StepOp::Forward && st.op == StepOp::Recompute)))
        st.config = c;
    for (auto& k : p.kernels)
      if (k.layer == s.layer && k.op == s.op) k.config = c;
  }

  TEST_CASE("an offset near INT64_MAX does not wrap the bounds check") {
    Plan p = keep_all(0);
    PlanBuffer& b = p.buffers.back();
    b.offset = INT64_MAX - 255;  // offset + size would wrap to a negative number
    CHECK(find_plan_error(p).find("lies outside the arena") != std::string::npos);
    // A buffer of no bytes is said to be one, not to lie outside the arena (the precision review).
    Plan q = keep_all(0);
    q.buffers.back().size = 0;
    CHECK(find_plan_error(q).find("has 0 bytes: a buffer holds at least one") != std::string::npos);
  }

  TEST_CASE("every buffer starts on 256 bytes") {
    Plan p = keep_all(0);
    for (auto& b : p.buffers)
      if (!b.resident && b.offset + b.size + 1 <= p.arena_bytes) {
        b.offset += 1;
        break;
      }
    CHECK(find_plan_error(p).find("not on a 256-byte boundary") != std::string::npos);
  }

  TEST_CASE("a workspace smaller than the configuration needs, or none") {
    Plan p = keep_all(0);
    PlanStep* s = lowered_step(p);
    REQUIRE(s != nullptr);
    Plan q = p;
    q.buffers[s->workspace].size -= 256;  // the CPU kernels need every byte they say
    CHECK(find_plan_error(q).find("bytes of workspace, its workspace buffer") != std::string::npos);
    Plan r = p;
    r.steps[s->id].workspace = -1;
    CHECK(find_plan_error(r).find("it has no workspace buffer") != std::string::npos);
  }

  TEST_CASE("the verifier's workspace rule is the CPU kernels' own, to the byte") {
    // verify.cpp restates the kernels' workspace formula (independent code); here every
    // lowered step of the three networks gets a workspace buffer of exactly what the kernels
    // say (executor/cpu conv_workspace_bytes, max over its micro-batches): accepted; one byte
    // less: refused.
    int checked = 0;
    for (int which = 0; which < 3; ++which) {
      const Plan p = keep_all(which);
      const Graph g = build_graph(p.network, "test");
      for (const auto& s : p.steps) {
        if (s.workspace < 0 || s.config.empty()) continue;
        int users = 0;
        for (const auto& t : p.steps) users += t.workspace == s.workspace;
        if (users != 1) continue;
        const GraphLayer& l = g.layers[static_cast<std::size_t>(g.index_of(s.layer))];
        std::int64_t need = 0;
        for (const auto& m : s.config) need = std::max(need, layer_op_workspace_cpu(l, s.op, m.algo, m.batch));
        if (need == 0) continue;
        auto with_size = [&](std::int64_t size) {
          Plan q = p;
          q.buffers[s.workspace].size = size;
          std::int64_t high = 0;
          for (const auto& b : q.buffers) high = std::max(high, b.offset + b.size);
          q.arena_bytes = q.summary.peak_bytes = high;
          return find_plan_error(q);
        };
        CAPTURE(s.id);
        CHECK(with_size(need) == "");
        CHECK(with_size(need - 1).find("bytes of workspace") != std::string::npos);
        ++checked;
      }
    }
    CHECK(checked >= 3);  // gemm and gemm_lift kernels of all three networks
  }

  TEST_CASE("micro-batches: a split runs in less workspace; merged again, that workspace is refused") {
    Plan p = keep_all(0);
    PlanStep* s = lowered_step(p);
    REQUIRE(s != nullptr);
    REQUIRE(p.sub_batch % 2 == 0);
    // Split into equal parts of the smallest micro-batch the planner chose (by measured times;
    // half the sub-batch if it did not split), with that micro-batch's algorithm, so the
    // workspace buffer is large enough; the kernels list edited to match: a valid plan that runs.
    MicroStep smallest = s->config[0];
    for (const auto& m : s->config)
      if (m.batch < smallest.batch && m.algo != "direct") smallest = m;
    const std::string algo = smallest.algo;
    const std::int64_t half = smallest.batch == p.sub_batch ? p.sub_batch / 2 : smallest.batch;
    REQUIRE(p.sub_batch % half == 0);
    Plan split = p;
    set_config(split, *s, std::vector<MicroStep>(static_cast<std::size_t>(p.sub_batch / half), MicroStep{algo, half}));
    CHECK(find_plan_error(split) == "");
    CHECK(replay(split).passed);
    // Shrink the workspace buffer to what a half needs (the arena follows its high-water mark)...
    const Graph g = build_graph(p.network, "test");
    const GraphLayer& l = g.layers[static_cast<std::size_t>(g.index_of(s->layer))];
    const std::int64_t need_half = layer_op_workspace_cpu(l, s->op, algo, half);
    const std::int64_t need_whole = layer_op_workspace_cpu(l, s->op, algo, p.sub_batch);
    REQUIRE(need_whole > (need_half + 255) / 256 * 256);  // the lowered matrix grows with the micro-batch
    split.buffers[s->workspace].size = (need_half + 255) / 256 * 256;
    std::int64_t high = 0;
    for (const auto& b : split.buffers) high = std::max(high, b.offset + b.size);
    split.arena_bytes = split.summary.peak_bytes = high;
    // ...then merge the parts again: the whole micro-batch needs `need_whole` and is refused.
    Plan merged = split;
    set_config(merged, *s, {MicroStep{algo, p.sub_batch}});
    CHECK(find_plan_error(merged).find("bytes of workspace") != std::string::npos);
  }

  TEST_CASE("a configuration that differs from the kernels list") {
    Plan p = keep_all(0);
    PlanStep* s = lowered_step(p);
    REQUIRE(s != nullptr);
    s->config = {MicroStep{"direct", p.sub_batch}};
    CHECK(find_plan_error(p).find("differs from the kernels list") != std::string::npos);
  }

  TEST_CASE("algorithms: unknown names, another device's names, gemm_lift on a stride-2 convolution") {
    Plan p = keep_all(2);  // the concat network: c1 has stride 2
    const PlanStep* c1 = nullptr;
    for (const auto& s : p.steps)
      if (s.layer == "c1" && s.op == StepOp::Forward) c1 = &s;
    REQUIRE(c1 != nullptr);
    Plan lift = p;
    set_config(lift, *c1, {MicroStep{"gemm_lift", p.sub_batch}});
    CHECK(find_plan_error(lift).find("does not support this convolution") != std::string::npos);
    Plan bogus = p;
    set_config(bogus, *c1, {MicroStep{"bogus", p.sub_batch}});
    CHECK(find_plan_error(bogus).find("\"bogus\" is not a forward algorithm") != std::string::npos);
    Plan cudnn = p;  // a cuDNN name in a CPU plan: the backward-filter names say CPU
    set_config(cudnn, *c1, {MicroStep{"implicit_gemm", p.sub_batch}});
    CHECK(find_plan_error(cudnn).find("is not a") != std::string::npos);
  }

  TEST_CASE("no offload into an input host buffer") {
    const Case& c = cases()[0];
    Plan p = compile(c.net, c.prof, c.keep_all_peak * 85 / 100, "vdnn-all", "auto");
    REQUIRE(find_plan_error(p) == "");
    int input = -1;
    for (const auto& h : p.host_buffers)
      if (h.input) input = h.id;
    REQUIRE(input >= 0);
    auto it = std::find_if(p.steps.begin(), p.steps.end(), [](const PlanStep& s) { return s.op == StepOp::Offload; });
    REQUIRE(it != p.steps.end());
    it->host = input;
    CHECK(find_plan_error(p).find("which holds the batch's input") != std::string::npos);
  }

  TEST_CASE("a step that fails while other streams hold queued steps: the error, then a clean stop") {
    // An algorithm the CPU does not have stops the run at that step while copies are still
    // queued; the backend must drain its queues before the steps are freed (under ASan a use
    // after free would show here). Without the check ahead, so that the step fails as it runs.
    const Case& c = cases()[0];
    Plan p = compile(c.net, c.prof, c.keep_all_peak * 85 / 100, "vdnn-all", "auto");
    for (auto& s : p.steps)
      if (s.op == StepOp::BackwardFilter && !s.config.empty()) {
        s.config[0].algo = "fft";
        break;
      }
    const Graph g = build_graph(p.network, "test");  // the backend keeps a reference
    WrappedCpu backend(g, false);
    bool refused = false;
    try {
      replay_plan(p, backend, check_options());
    } catch (const UserError& e) {
      refused = std::string(e.what()).find("not a CPU algorithm") != std::string::npos;
    }
    CHECK(refused);
    CHECK(backend.allocated);
  }

  TEST_CASE("a backend's warm-up iterations are run and not timed; check mode still checks the first two") {
    // As the CUDA backend with graphs (a second warm-up iteration, which captures): replay_plan
    // runs Backend::warmup_iterations() untimed iterations before the timed ones, and reports the
    // backend's description as it is after the run.
    class TwoWarmups : public WrappedCpu {
     public:
      using WrappedCpu::WrappedCpu;
      int warmup_iterations() const override { return 2; }
      std::string description() const override { return "two warm-ups, " + std::to_string(begun) + " begun"; }
      void begin() override {
        ++begun;
        cpu_->begin();
      }
      int begun = 0;
    };
    const Case& c = cases()[1];
    const Plan p = compile(c.net, c.prof, c.keep_all_peak * 70 / 100, "ucplan", "any");
    const Graph g = build_graph(p.network, "test");
    for (const bool check : {false, true}) {
      CAPTURE(check);
      TwoWarmups backend(g, true);
      RunOptions o = check_options();
      o.check = check;
      o.iterations = 3;
      const RunReport r = replay_plan(p, backend, o);
      CHECK(backend.begun == 5);
      CHECK(r.iteration_seconds.size() == 3);
      CHECK(r.backend == "two warm-ups, 5 begun");
      if (check) {
        CHECK(r.checked_iterations == 2);
        CHECK(r.passed);
      }
    }
  }

  TEST_CASE("a plan with another device's conv algorithm is refused before its arena is allocated") {
    // As a CUDA plan given to --device cpu: refused at once, not after its arena (gigabytes for
    // the golden H100 plans) is allocated and zeroed.
    const Case& c = cases()[0];
    Plan p = compile(c.net, c.prof, c.keep_all_peak, "keep-all", "auto");
    for (auto it = p.steps.rbegin(); it != p.steps.rend(); ++it)
      if (!it->config.empty()) {
        it->config.back().algo = "implicit_precomp_gemm";  // cuDNN's name, in the plan's last conv step
        break;
      }
    const Graph g = build_graph(p.network, "test");
    WrappedCpu backend(g, true);
    std::string error;
    try {
      replay_plan(p, backend, check_options());
    } catch (const UserError& e) {
      error = e.what();
    }
    CHECK(error.find("\"implicit_precomp_gemm\", which is not a CPU algorithm") != std::string::npos);
    CHECK_FALSE(backend.allocated);
  }
}

TEST_CASE("a measured trace gives every copy its bytes, the tensor's, which `ucplan calibrate` fits") {
  const Case& c = cases()[0];
  const Plan p = compile(c.net, c.prof, c.keep_all_peak * 85 / 100, "vdnn-all", "auto");
  REQUIRE(p.summary.offload_bytes > 0);
  const RunReport r = replay(p);
  const Json trace = Json::parse(chrome_trace(p, &r.timeline));
  // Independently of the executor: the tensor's bytes are its host buffer's (an input buffer
  // holds every round's slice).
  std::int64_t copies = 0, moved = 0;
  for (const Json& e : trace.at("traceEvents")) {
    if (!e.contains("cat")) continue;
    const std::string cat = e.at("cat");
    const PlanStep& s = p.steps.at(e.at("args").at("step").get<std::size_t>());
    if (cat != "offload" && cat != "prefetch") {
      CHECK_FALSE(e.at("args").contains("bytes"));
      continue;
    }
    const PlanHostBuffer& h = p.host_buffers.at(static_cast<std::size_t>(s.host));
    CHECK(e.at("args").at("bytes").get<std::int64_t>() == (h.input ? h.size / p.rounds : h.size));
    moved += e.at("args").at("bytes").get<std::int64_t>();
    copies += 1;
  }
  CHECK(copies > 0);
  CHECK(moved == r.bytes_h2d + r.bytes_d2h);
}

TEST_CASE("the reference run's reused memory changes nothing, even filled with NaN between runs") {
  // `run --check` runs up to eight references through one ReferenceScratch, whose buffers go back
  // to its spares as soon as the backward is done with them: each run must give, bit for bit, what
  // a fresh run gives, whatever the previous run (another network, precision, sub-batch or jitter)
  // left behind, here replaced by NaN. Every network of test_nets.h: every layer type, residual
  // joins, a concat fan-out, sinks without a loss.
  ReferenceScratch scratch;
  auto poison = [&] {
    const float nan = std::nanf("");
    for (auto* vs : {&scratch.y, &scratch.dy, &scratch.spare})
      for (auto& v : *vs) std::fill(v.begin(), v.end(), nan);
    for (auto& v : scratch.aux) std::fill(v.begin(), v.end(), 0xff);
    std::fill(scratch.workspace.begin(), scratch.workspace.end(), nan);
  };
  int runs = 0;
  for (const char* text : {kChain, kResidual, kConcat, kModern}) {
    const Network net = parse_network_text(text, "test");
    for (const Precision p : {Precision::FP32, Precision::BF16}) {
      const Graph g = build_graph(net, "test", p);
      std::map<std::string, std::string> gemm;
      for (const GraphLayer& l : g.layers)
        if (l.type() == LayerType::Conv)
          for (const char* op : {"forward", "backward_data", "backward_filter"}) gemm[l.name() + ":" + op] = "gemm";
      for (const std::int64_t sub : {std::int64_t{4}, std::int64_t{2}})
        for (const double jitter : {0.0, kRoundingJitter}) {
          CAPTURE(text);
          CAPTURE(sub);
          CAPTURE(jitter);
          const ReferenceResult fresh = reference_gradients(g, 4, sub, 3, gemm, {}, 1, jitter);
          poison();
          const ReferenceResult reused = reference_gradients(g, 4, sub, 3, gemm, {}, 1, jitter, &scratch);
          REQUIRE(reused.weight_gradients.size() == fresh.weight_gradients.size());
          for (const auto& entry : fresh.weight_gradients) {  // CAPTURE: not a structured binding (clang < 16)
            const std::string& name = entry.first;
            CAPTURE(name);
            CHECK(reused.weight_gradients.at(name) == entry.second);
          }
          CHECK(reused.loss == fresh.loss);
          ++runs;
        }
    }
  }
  CHECK(runs == 32);
}

TEST_CASE("run --check refuses, before allocating, a plan whose reference would not fit in the host's memory") {
  const Case& c = cases()[1];  // kResidual, offloaded: host buffers beside the reference
  const Plan p = compile(c.net, c.prof, 4 * c.keep_all_peak, "vdnn-all", "auto");
  const Graph g = build_graph(p.network, "test");
  std::int64_t host = 0;
  for (const auto& h : p.host_buffers) host += h.size;
  REQUIRE(host > 0);
  // A lower bound of what a reference run really holds: what its scratch holds after one.
  ReferenceScratch scratch;
  reference_gradients(g, p.batch, p.sub_batch, 3, {}, {}, 1, 0, &scratch);
  std::int64_t held = 0;
  for (auto* vs : {&scratch.y, &scratch.dy, &scratch.spare})
    for (const auto& v : *vs) held += static_cast<std::int64_t>(v.capacity() * sizeof(float));
  for (const auto& v : scratch.aux) held += static_cast<std::int64_t>(v.capacity());
  const std::int64_t least = reference_bytes_at_least(g, p.sub_batch);
  CHECK(least <= held);
  CHECK(least > held / 2);  // and not a trivial one
  RunOptions o = check_options();
  o.host_bytes_available = least + host - 1;
  WrappedCpu refused(g, true);
  CHECK_THROWS_WITH_AS(replay_plan(p, refused, o), doctest::Contains("host memory available"), UserError);
  CHECK_FALSE(refused.allocated);
  o.host_bytes_available = least + host;
  WrappedCpu runs(g, true);
  CHECK(replay_plan(p, runs, o).passed);
  CHECK(runs.allocated);
}

TEST_CASE("run --check with updates that diverge: the reference is not finite, so nothing is checked") {
  const Case& c = cases()[1];
  const Plan p = compile(c.net, c.prof, c.keep_all_peak, "keep-all", "auto");
  const Graph g = build_graph(p.network, "test");
  RunOptions o = check_options();
  o.lr = 1e30;  // the first update takes the weights to +-1e30 times their gradients; the second iteration overflows
  auto backend = make_cpu_backend(g);
  CHECK_THROWS_WITH_AS(replay_plan(p, *backend, o),
                       "--check: the reference run's weight gradients are not finite at iteration 2 (the updates at "
                       "--lr 1e+30 diverged), so the plan's cannot be checked against them",
                       UserError);
  o.lr = 1;  // large, and finite throughout: checked as usual
  auto again = make_cpu_backend(g);
  CHECK(replay_plan(p, *again, o).passed);
}

TEST_CASE("the reference run maps cuDNN algorithm names to CPU algorithms") {
  // Every cuDNN name of profiler/runner.h, per op, has a CPU counterpart; CPU names stay.
  const std::vector<std::pair<std::string, std::vector<std::string>>> cudnn = {
      {"forward",
       {"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling", "winograd",
        "winograd_nonfused"}},
      {"backward_data", {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"}},
      {"backward_filter", {"algo_0", "algo_1", "fft", "algo_3", "winograd_nonfused", "fft_tiling"}}};
  for (const auto& entry : cudnn)  // not a structured binding: CAPTURE's lambda needs clang >= 16 for those
    for (const auto& n : entry.second) {
      const std::string& op = entry.first;
      CAPTURE(op);
      CAPTURE(n);
      StepOp o;
      REQUIRE(parse_step_op(op, &o));
      CHECK(reference_conv_algo_cpu(o, n) == (n == "direct" ? "direct" : "gemm"));
    }
  for (const auto& n : conv_algorithms_cpu()) CHECK(reference_conv_algo_cpu(StepOp::BackwardFilter, n) == n);
  CHECK(reference_conv_algo_cpu(StepOp::Recompute, "winograd") == "gemm");
  CHECK(reference_conv_algo_cpu(StepOp::Forward, "algo_3").empty());  // a backward-filter name, not a forward one
  CHECK(reference_conv_algo_cpu(StepOp::Forward, "im2col").empty());
}

namespace {

// A device whose conv algorithms have cuDNN's names, emulated on the CPU backend with the
// direct algorithm (it needs no workspace; the plan's workspaces are cuDNN's, smaller than the
// CPU's gemm needs). What `run --device cuda --check` asks of the reference, without a GPU.
class CudnnNamedCpu : public WrappedCpu {
 public:
  explicit CudnnNamedCpu(const Graph& g) : WrappedCpu(g, false) {}
  std::string description() const override { return "cpu with cuDNN algorithm names"; }
  void submit(const ResolvedStep& s, int round, const RunContext& ctx, bool poison) override {
    // The CPU backend keeps a reference to the step until it has run: the renamed copies live
    // as long as this backend.
    auto [it, fresh] = renamed_.try_emplace(s.id, s);
    if (fresh)
      for (auto& m : it->second.config) {
        REQUIRE(!reference_conv_algo_cpu(s.op, m.algo).empty());
        m.algo = "direct";
      }
    cpu_->submit(it->second, round, ctx, poison);
  }

 private:
  std::map<int, ResolvedStep> renamed_;
};

}  // namespace

TEST_CASE("run --check of a plan with cuDNN algorithms: the CPU reference runs the mapped algorithms") {
  // A plan compiled from a modelled K40 profile names cuDNN algorithms (winograd, algo_1, ...);
  // before the mapping, the reference aborted on the first of them.
  const Network net = parse_network_text(kChain, "test");
  ProfileOptions po;
  po.batch = 8;
  const Profile prof = profile_network(net, "test", *make_model_runner("k40"), po);
  const Plan plan = compile(net, prof, std::int64_t{1} << 30, "keep-all", "auto");
  bool cudnn_names = false;
  for (const auto& s : plan.steps)
    for (const auto& m : s.config) cudnn_names = cudnn_names || reference_conv_algo_cpu(s.op, m.algo) != m.algo;
  REQUIRE(cudnn_names);
  const Graph g = build_graph(plan.network, "test");
  CudnnNamedCpu backend(g);
  RunOptions o;
  o.iterations = 1;
  o.check = true;
  const RunReport r = replay_plan(plan, backend, o);
  CHECK(r.checked);
  CHECK(r.fault.empty());
  CHECK(r.passed);
  MESSAGE("direct on the device vs the mapped algorithms in the reference: max relative error ", r.max_rel_error);
  CHECK(r.max_rel_error < 1e-4);  // different algorithms, FP32 rounding through batch norm only
}

TEST_CASE("batch-norm recomputation runs the training forward it is costed as, and leaves the saved statistics alone") {
  // The planner costs a recomputation as its layer's profiled forward (the training forward);
  // replay runs that, so with the saved statistics poisoned (NaN) the recomputed y is still the
  // forward's y, bit for bit, and the statistics the backward will read are not overwritten.
  const Graph g = build_graph(parse_network_text(kChain, "test"), "test");
  const GraphLayer* bn = nullptr;
  for (const auto& l : g.layers)
    if (l.type() == LayerType::BatchNorm) bn = &l;
  REQUIRE(bn);
  const std::int64_t n = 3, elems = n * bn->out.elems(), c = bn->out.c;
  std::vector<float> x(static_cast<std::size_t>(elems)), w(static_cast<std::size_t>(2 * c));
  init_input(elems, 7, x.data());
  init_weights(*bn, 7, w.data());
  std::vector<float> y0(x.size()), y1(x.size(), 0.0f), saved(static_cast<std::size_t>(2 * c));
  LayerArgs a;
  a.x = {x.data()};
  a.w = w.data();
  a.n = n;
  a.y = y0.data();
  a.aux = saved.data();
  run_layer_op_cpu(*bn, StepOp::Forward, "default", a);
  std::fill(saved.begin(), saved.end(), std::nanf(""));
  a.y = y1.data();
  run_layer_op_cpu(*bn, StepOp::Recompute, "default", a);
  CHECK(y1 == y0);
  CHECK(std::all_of(saved.begin(), saved.end(), [](float v) { return std::isnan(v); }));
}

TEST_CASE(
    "a configuration the device cannot run as planned: the device's best-ranked algorithm that fits the plan's "
    "workspace") {
  // The plan gave the step 1 MiB of workspace. Modelled winograd fitted; cuDNN here wants 3 MiB.
  const std::int64_t given = 1 << 20;
  const std::vector<AlgoFit> ranked = {{"fft_tiling", 8 << 20},  // fastest expected, too big
                                       {"winograd", 3 << 20},    // the planned one, too big here
                                       {"implicit_precomp_gemm", 512 << 10},
                                       {"implicit_gemm", 0},
                                       {"direct", std::nullopt}};  // unsupported
  CHECK(choose_conv_algo({"winograd", 3 << 20}, ranked, given) == "implicit_precomp_gemm");
  CHECK(choose_conv_algo({"winograd", 1 << 20}, ranked, given) == "winograd");  // fits exactly: kept
  CHECK(choose_conv_algo({"direct", std::nullopt}, ranked, given) == "implicit_precomp_gemm");
  CHECK(choose_conv_algo({"winograd", 3 << 20}, ranked, 0) == "implicit_gemm");  // no workspace at all
  CHECK(choose_conv_algo({"winograd", 3 << 20}, {{"fft", 2 << 20}, {"direct", std::nullopt}}, given).empty());
}
