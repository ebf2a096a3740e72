// The verifier (planner/check/) against deliberately broken plans: each break is refused with a
// message saying what is wrong. (tests/test_executor.cpp shows the same breaks really corrupt a
// replay when the verifier is bypassed; tests/fuzz/ mutates plans at random.)
#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "plan_edit.h"
#include "planner/check/verify.h"
#include "planner/model/plan.h"
#include "planner_fixtures.h"
#include "test_nets.h"

using namespace ucplan;
using namespace ucplan::test;

TEST_SUITE("verifier") {
  // A plan with offloads and prefetches to break in different ways: the whole batch (the
  // chain has bn) at 88 % of the keep-all peak, with vDNN-all's decisions so activations move
  // (ucplan itself may rightly prefer recomputation there).
  Plan tight_plan() {
    const Network net = parse_network_text(kChain, "test");
    const Profile prof = model_profile(net, 8);
    Plan p = make_plan(input_for(net, prof, keep_all_peak(net, prof) * 88 / 100, "vdnn-all", "auto")).plan;
    REQUIRE(find_plan_error(p) == "");
    REQUIRE(p.summary.offload_bytes > 0);
    return p;
  }

  TEST_CASE("overlapping live buffers") {
    Plan p = tight_plan();
    // Two buffers live at once: move the second onto the first.
    bool done = false;
    for (std::size_t i = 0; i < p.buffers.size() && !done; ++i)
      for (std::size_t j = i + 1; j < p.buffers.size() && !done; ++j) {
        PlanBuffer& a = p.buffers[i];
        PlanBuffer& b = p.buffers[j];
        if (a.resident || b.resident || b.first_step > a.last_step || a.first_step > b.last_step) continue;
        b.offset = a.offset;
        done = true;
      }
    REQUIRE(done);
    CHECK(find_plan_error(p).find("while both live") != std::string::npos);
  }

  TEST_CASE("a missing prefetch") {
    Plan p = tight_plan();
    auto it = std::find_if(p.steps.begin(), p.steps.end(),
                           [](const PlanStep& s) { return s.op == StepOp::Prefetch && s.tensor != "Y:data"; });
    REQUIRE(it != p.steps.end());
    const int buffer = it->writes[0];
    remove_step(p, it->id);
    const std::string error = find_plan_error(p);
    CAPTURE(error);
    CHECK(error.find("holds no value") != std::string::npos);
    CHECK(error.find(p.buffers[buffer].tensor) != std::string::npos);
  }

  TEST_CASE("a read after free") {
    Plan p = tight_plan();
    // A tensor offloaded then prefetched has two buffers; make a step after the prefetch read the
    // first one, whose bytes were reused in between.
    bool done = false;
    for (auto& s : p.steps) {
      if (done || s.stream != Stream::Compute) continue;
      for (int& b : s.reads) {
        const std::string& t = p.buffers[b].tensor;
        for (const auto& old : p.buffers)
          if (!done && old.id < b && old.tensor == t && old.last_step < s.id && !old.resident) {
            b = old.id;
            done = true;
          }
      }
    }
    REQUIRE(done);
    const std::string error = find_plan_error(p);
    CAPTURE(error);
    CHECK(error.find("after its last_step") != std::string::npos);
  }

  TEST_CASE("a missing wait") {
    Plan p = tight_plan();
    auto it = std::find_if(p.steps.begin(), p.steps.end(),
                           [](const PlanStep& s) { return s.stream == Stream::Compute && !s.waits.empty(); });
    REQUIRE(it != p.steps.end());
    it->waits.clear();
    retime(p);
    const std::string error = find_plan_error(p);
    CAPTURE(error);
    CHECK(error.find("without waiting") != std::string::npos);
  }

  // A second offload of a tensor over the host copy a prefetch has yet to read back: an offload
  // of the plan run again later (insert_step) without waiting for that prefetch, as the plan
  // mutator makes it; the first place where the verifier names this fault is taken (at others an
  // earlier rule breaks first). The mutator also reaches the stale host copy (a prefetch of a copy
  // older than the tensor's value), whose directed construction breaks buffer lifetimes first.
  TEST_CASE("a host copy overwritten before it is read back") {
    const Plan base = tight_plan();
    std::string error;
    for (const PlanStep& s : base.steps) {
      if (s.op != StepOp::Offload) continue;
      for (int at = s.id + 1; at <= static_cast<int>(base.steps.size()) && error.empty(); ++at) {
        Plan p = base;
        insert_step(p, at, s);
        if (const std::string e = find_plan_error(p); e.find("overwrites host buffer") != std::string::npos) error = e;
      }
    }
    CAPTURE(error);
    CHECK(error.find("while step") != std::string::npos);
  }

  // A plan that carries the batch's input across rounds (plan.h): two rounds of 4 with room for all.
  Plan carried_plan() {
    const Network net = parse_network_text(kChain, "test");
    const Profile prof = model_profile(net, 8);
    Plan p = make_plan(input_for(net, prof, keep_all_peak(net, prof) * 2, "ucplan", "4")).plan;
    REQUIRE(find_plan_error(p) == "");
    REQUIRE(p.rounds == 2);
    REQUIRE(std::count_if(p.buffers.begin(), p.buffers.end(), [](const PlanBuffer& b) { return b.carried; }) == 1);
    REQUIRE(std::count_if(p.steps.begin(), p.steps.end(), [](const PlanStep& s) { return s.ahead; }) == 1);
    return p;
  }
  int carried_buffer(const Plan& p) {
    return static_cast<int>(
        std::find_if(p.buffers.begin(), p.buffers.end(), [](const PlanBuffer& b) { return b.carried; }) -
        p.buffers.begin());
  }
  PlanStep& ahead_step(Plan & p) {
    return *std::find_if(p.steps.begin(), p.steps.end(), [](const PlanStep& s) { return s.ahead; });
  }

  TEST_CASE("a carried input: not refilled, read after its refill, refilled too early, or not an input") {
    const Plan p = carried_plan();
    const int c = carried_buffer(p);
    auto error_of = [](const Plan& q) {
      const std::string e = find_plan_error(q);
      CAPTURE(e);
      return e;
    };
    // The ahead prefetch made a plain one: the next round would find this round's slice.
    Plan a = p;
    ahead_step(a).ahead = false;
    CHECK(error_of(a).find("does not hold the next round's slice when the round ends") != std::string::npos);
    // A later step (the backward pass's use of the input, which has a buffer of its own) reads the
    // carried buffer after the refill.
    Plan b = p;
    const int refill = ahead_step(b).id;
    bool redirected = false;
    for (PlanStep& st : b.steps)
      for (int& r : st.reads)
        if (!redirected && st.id > refill && st.stream == Stream::Compute &&
            b.buffers[r].tensor == b.buffers[c].tensor) {
          r = c;
          redirected = true;
        }
    REQUIRE(redirected);
    relife(b);
    CHECK(error_of(b).find("after step " + std::to_string(refill) + " copied the next round's slice") !=
          std::string::npos);
    // The refill does not wait for the step that reads the round's slice.
    Plan d = p;
    ahead_step(d).waits.clear();
    retime(d);
    CHECK(error_of(d).find("missing wait") != std::string::npos);
    // Carrying what is not the batch's input, or an ahead copy into a buffer that is not carried.
    Plan e = p;
    const auto act = std::find_if(e.buffers.begin(), e.buffers.end(), [](const PlanBuffer& x) {
      return !x.resident && !x.carried && x.tensor.rfind("Y:", 0) == 0 && x.tensor != "Y:data";
    });
    REQUIRE(act != e.buffers.end());
    act->carried = true;
    CHECK(error_of(e).find("which is not the network's input") != std::string::npos);
    Plan f = p;  // the backward pass's copy of the input, into a buffer of its own
    const auto again = std::find_if(f.steps.begin(), f.steps.end(), [&](const PlanStep& st) {
      return st.op == StepOp::Prefetch && !st.ahead && st.tensor == f.buffers[static_cast<std::size_t>(c)].tensor;
    });
    REQUIRE(again != f.steps.end());
    again->ahead = true;
    CHECK(error_of(f).find("not a carried buffer of the batch's input") != std::string::npos);
    Plan g = p;
    g.steps.back().ahead = true;  // an update
    CHECK(error_of(g).find("only a prefetch in the round copies the next round's slice") != std::string::npos);
  }

  TEST_CASE("a buffer on a carried buffer's bytes, which it holds for the whole program") {
    Plan p = carried_plan();
    const PlanBuffer& c = p.buffers[static_cast<std::size_t>(carried_buffer(p))];
    // The last dynamic buffer of the round, long after the forward pass is done with the slice.
    auto late = std::max_element(p.buffers.begin(), p.buffers.end(), [](const PlanBuffer& x, const PlanBuffer& y) {
      return (x.resident || x.carried ? -1 : x.first_step) < (y.resident || y.carried ? -1 : y.first_step);
    });
    REQUIRE(late->size <= c.size + p.arena_bytes - c.offset - c.size);
    late->offset = c.offset;
    const std::string error = find_plan_error(p);
    CAPTURE(error);
    CHECK(error.find("overlaps carried buffer") != std::string::npos);
  }

  TEST_CASE("over budget, waits on later steps, wrong times, skipped tasks") {
    Plan p = tight_plan();
    Plan a = p;
    a.budget_bytes = a.arena_bytes - 1;
    CHECK(find_plan_error(a).find("exceeds the budget") != std::string::npos);
    Plan b = p;
    b.steps[3].waits.push_back(10);
    CHECK(find_plan_error(b).find("not an earlier step") != std::string::npos);
    Plan c = p;
    c.steps[5].start_ns += 1;
    c.steps[5].end_ns += 1;
    CHECK(find_plan_error(c).find("predicted start") != std::string::npos);
    Plan d = p;
    auto f =
        std::find_if(d.steps.begin(), d.steps.end(), [](const PlanStep& s) { return s.op == StepOp::BackwardFilter; });
    remove_step(d, f->id);
    CHECK(find_plan_error(d).find("expected backward_filter of") != std::string::npos);
  }

  TEST_CASE("a conv kernel whose fastest configuration is slower than the one chosen") {
    Plan p = tight_plan();
    REQUIRE(!p.kernels.empty());
    for (const PlanKernel& k : p.kernels) CHECK(k.fastest_ns <= k.time_ns);
    p.kernels[0].fastest_ns = p.kernels[0].time_ns + 1;
    CHECK(find_plan_error(p).find("slower than the one chosen") != std::string::npos);
  }

  TEST_CASE("a measured cuDNN plan whose forward is cuDNN's gemm is a cuDNN plan, not a CPU one") {
    // One convolution on the network's input: a forward and a backward_filter kernel. Its
    // forward at cuDNN's gemm (a name the CPU also has) made one CPU name against one of cuDNN's
    // own, and the checker, counting a majority, took the plan for a CPU one and refused algo_N
    // (compile aborted on a measured CUDA profile of such a network).
    const Network net =
        parse_network_text(R"({"format": "ucplan-network/1", "name": "one", "input": {"shape": [3, 8, 8]},
      "labels": 4, "layers": [{"name": "c", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 1},
      {"name": "f", "type": "fc", "inputs": ["c"], "out_features": 4}, {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]})",
                           "test");
    Profile prof = model_profile(net, 4, "h100");
    prof.source = "measured";  // as if measured on the device
    prof.device.kind = "cuda";
    int gemm = 0;
    for (auto& sc : prof.signatures)
      for (auto& c : sc.costs)
        if (c.op == StepOp::Forward && c.algo == "gemm" && c.ok()) {
          c.seconds = 1e-9;  // the fastest forward
          ++gemm;
        }
    REQUIRE(gemm > 0);
    const Plan p = make_plan(input_for(net, prof, std::int64_t{1} << 30, "keep-all", "auto")).plan;
    std::vector<std::string> algos;
    for (const PlanStep& s : p.steps)
      for (const MicroStep& m : s.config) algos.push_back(m.algo);
    REQUIRE(algos.size() == 2);
    CHECK(algos[0] == "gemm");
    CHECK(algos[1].rfind("algo_", 0) == 0);
    CHECK(find_plan_error(p) == "");
    // A CPU plan given one name of cuDNN's own is still refused.
    const Network cpu_net = parse_network_text(kChain, "test");
    Plan cpu = make_plan(input_for(cpu_net, deterministic_cpu_profile(cpu_net, 4), std::int64_t{1} << 30)).plan;
    REQUIRE(find_plan_error(cpu) == "");
    for (PlanStep& s : cpu.steps)
      if (s.op == StepOp::BackwardFilter && !s.config.empty()) {
        s.config[0].algo = "algo_0";
        break;
      }
    CHECK(find_plan_error(cpu) != "");
  }

  TEST_CASE("a cuDNN recomputation's workspace: stated for its own configuration, and held") {
    // A recomputation may run another configuration than the kernels list's forward one (less
    // workspace may be free then); for cuDNN only the profile knows what it needs, so the plan
    // states it on the step and the workspace buffer must hold it.
    const Network net = parse_network_text(kResidual, "test");
    const Profile prof = model_profile(net, 8, "h100");
    Plan p;
    const PlanStep* step = nullptr;
    for (int share = 60; share >= 20 && !step; share -= 5) {
      p = make_plan(input_for(net, prof, keep_all_peak(net, prof) * share / 100, "checkpoint-sqrt", "auto")).plan;
      for (const PlanStep& s : p.steps)
        if (s.op == StepOp::Recompute && !s.config.empty() && s.workspace >= 0) step = &s;
    }
    REQUIRE(step != nullptr);
    REQUIRE(find_plan_error(p) == "");
    const int id = step->id;
    const std::int64_t held = p.buffers[step->workspace].size;
    CHECK(step->config_workspace_bytes >= 0);
    CHECK(step->config_workspace_bytes <= held);
    // Another cuDNN forward algorithm than the kernels list's, with what it needs stated.
    const std::string other = p.steps[id].config[0].algo == "gemm" ? "fft" : "gemm";
    Plan q = p;
    for (MicroStep& m : q.steps[id].config) m.algo = other;
    q.steps[id].config_workspace_bytes = held;
    CHECK(find_plan_error(q) == "");
    q.steps[id].config_workspace_bytes = held + 1;
    CHECK(find_plan_error(q).find("bytes of workspace, its workspace buffer") != std::string::npos);
    q.steps[id].config_workspace_bytes = -1;  // nothing stated: it could need any workspace
    CHECK(find_plan_error(q).find("states no workspace") != std::string::npos);
    // The kernels list's own configuration: a statement, if any, must be the list's.
    Plan r = p;
    for (const PlanKernel& k : r.kernels)
      if (k.layer == r.steps[id].layer && k.op == StepOp::Forward) {
        r.steps[id].config = k.config;
        r.steps[id].config_workspace_bytes = k.workspace_bytes + 256;
      }
    CHECK(find_plan_error(r).find("for the configuration the kernels list states") != std::string::npos);
    // Only a recomputation states one.
    Plan u = p;
    for (PlanStep& s : u.steps)
      if (s.op == StepOp::Forward && !s.config.empty()) {
        s.config_workspace_bytes = 0;
        break;
      }
    CHECK(find_plan_error(u).find("only a recomputation does") != std::string::npos);
  }

  TEST_CASE("a convolution whose predicted duration is not its kernel's") {
    Plan p = tight_plan();
    REQUIRE(!p.kernels.empty());
    p.kernels[0].time_ns += 1;  // the kernel table now tells another story than the steps
    CHECK(find_plan_error(p).find("the kernels list states") != std::string::npos);
  }

  TEST_CASE("summary totals that are not the steps' (reports and run print them)") {
    const Plan p = tight_plan();  // offloads and prefetches; the schedule's own totals pass
    std::int64_t PlanSummary::*const fields[] = {&PlanSummary::offload_bytes,   &PlanSummary::prefetch_bytes,
                                                 &PlanSummary::input_bytes,     &PlanSummary::recompute_ns,
                                                 &PlanSummary::recompute_steps, &PlanSummary::workspace_peak_bytes};
    const char* const names[] = {"offload_bytes", "prefetch_bytes",  "input_bytes",
                                 "recompute_ns",  "recompute_steps", "workspace_peak_bytes"};
    for (int k = 0; k < 6; ++k) {
      Plan q = p;
      q.summary.*fields[k] += 1;
      const std::string error = find_plan_error(q);
      CAPTURE(error);
      CHECK(error.find(std::string("summary.") + names[k] + " is ") != std::string::npos);
    }
  }

  TEST_CASE("a plan that says its batch-norm statistics are the whole batch's when they are per sub-batch") {
    // The chain has bn; the whole batch at 88 % of the peak is one round: the statistics are the batch's.
    Plan p = tight_plan();
    REQUIRE(p.rounds == 1);
    p.sub_batch_changes_statistics = true;
    CHECK(find_plan_error(p).find("sub_batch_changes_statistics is true, but its batch-norm statistics are the "
                                  "whole batch's") != std::string::npos);
  }

  TEST_CASE("an update inside the round, two buffers for one weight, a buffer no step uses") {
    const Plan p = tight_plan();
    auto error_of = [](const Plan& q) {
      const std::string e = find_plan_error(q);
      CAPTURE(e);
      return e;
    };
    // A backward step made an update (a forward one would break the route first).
    Plan a = p;
    auto backward = std::find_if(a.steps.begin(), a.steps.end(), [](const PlanStep& s) {
      return s.stream == Stream::Compute && !s.final && s.op != StepOp::Forward;
    });
    REQUIRE(backward != a.steps.end());
    backward->op = StepOp::Update;
    CHECK(error_of(a).find("an update inside the round") != std::string::npos);
    // A second buffer for a weight, past the arena's end (the arena and budget grown to hold it).
    Plan c = p;
    auto weight = std::find_if(c.buffers.begin(), c.buffers.end(), [](const PlanBuffer& x) { return x.resident; });
    REQUIRE(weight != c.buffers.end());
    PlanBuffer twin = *weight;
    twin.id = static_cast<int>(c.buffers.size());
    twin.offset = (c.arena_bytes + 255) / 256 * 256;
    c.arena_bytes = c.summary.peak_bytes = twin.offset + twin.size;
    c.budget_bytes = std::max(c.budget_bytes, c.arena_bytes);
    c.buffers.push_back(twin);
    CHECK(error_of(c).find("two resident buffers hold " + twin.tensor) != std::string::npos);
    // A buffer no step uses, inside the arena.
    Plan d = p;
    PlanBuffer idle{};
    idle.id = static_cast<int>(d.buffers.size());
    idle.tensor = "workspace";
    idle.offset = 0;
    idle.size = 256;
    idle.first_step = idle.last_step = 0;
    d.buffers.push_back(idle);
    CHECK(error_of(d).find("is never used") != std::string::npos);
  }

  TEST_CASE("options the plan records that its steps do not keep (explain printed them)") {
    const Plan p = tight_plan();  // vdnn-all: offloads; dynamic workspace; sub-batch auto, one round
    REQUIRE(p.strategy == "vdnn-all");
    REQUIRE(p.sub_batch_option == "auto");
    REQUIRE(p.workspace_option == "dynamic");
    std::int64_t largest = 0, total = 0;
    bool split = false;
    for (const PlanKernel& k : p.kernels) {
      largest = std::max(largest, k.workspace_bytes);
      total += k.workspace_bytes;
    }
    for (const PlanStep& s : p.steps) split |= s.config.size() > 1;
    REQUIRE(largest > 0);
    auto refused = [](Plan q, const std::string& want) {
      const std::string error = find_plan_error(q);
      CAPTURE(error);
      CHECK(error.find(want) != std::string::npos);
    };
    Plan q = p;
    q.offload = "never";
    refused(q, "options.offload is never, but");
    q = p;
    q.strategy = "keep-all";
    refused(q, "options.strategy is keep-all, but");
    q = p;
    q.sub_batch_option = "4";
    refused(q, "options.sub_batch is \"4\", but the plan's sub-batch is 8");
    q = p;
    q.workspace_option = "wr:64MiB";  // the policy in words still says dynamic
    refused(q, "is not what options.workspace \"wr:64MiB\" makes");
    q.workspace_policy = "WR: per kernel";
    CHECK(find_plan_error(q) == "");  // every kernel's workspace is within 64 MiB
    q.workspace_option = fmt::format("wr:{}B", largest - 1);
    refused(q, "but a kernel's workspace is");
    q.workspace_option = fmt::format("wd:{}B", total - 1);
    q.workspace_policy = "WD: 0-1 ILP";
    refused(q, "but the kernels' workspaces add up to");
    q.workspace_option = fmt::format("wd:{}B", total);
    CHECK(find_plan_error(q) == "");
    // The first kernel run in two micro-batches of 4 (its step and the kernels list alike), and
    // then in 3 + 5: undivided allows neither, powerOfTwo the first only.
    q = p;
    REQUIRE_FALSE(split);
    q.micro_batches = "undivided";
    CHECK(find_plan_error(q) == "");
    PlanKernel& k = q.kernels[0];
    auto step = std::find_if(q.steps.begin(), q.steps.end(),
                             [&](const PlanStep& s) { return s.layer == k.layer && s.op == k.op; });
    REQUIRE(step != q.steps.end());
    REQUIRE(k.config.size() == 1);
    const std::string algo = k.config[0].algo;
    k.config = step->config = {{algo, 4}, {algo, 4}};
    CHECK(find_plan_error(q).find("a micro-batch of 4 samples, which options.micro_batches undivided does not allow") !=
          std::string::npos);
    q.micro_batches = "powerOfTwo";
    CHECK(find_plan_error(q) == "");
    k.config = step->config = {{algo, 3}, {algo, 5}};
    CHECK(
        find_plan_error(q).find("a micro-batch of 3 samples, which options.micro_batches powerOfTwo does not allow") !=
        std::string::npos);
    q.micro_batches = "all";
    CHECK(find_plan_error(q) == "");
    // A batch-norm network split into rounds, recorded as auto (which never splits one).
    const Network net = parse_network_text(kChain, "test");
    const Profile prof = model_profile(net, 8);
    Plan rounds = make_plan(input_for(net, prof, std::int64_t{1} << 30, "ucplan", "4")).plan;
    REQUIRE(rounds.rounds == 2);
    REQUIRE(find_plan_error(rounds) == "");
    rounds.sub_batch_option = "auto";
    refused(rounds, "options.sub_batch is auto, which never splits a batch-norm network, but the plan runs 2 rounds");
  }

  TEST_CASE("an embedded network edited after the plan was made") {
    Plan p = make_plan(input_for(parse_network_text(kChain, "test"),
                                 model_profile(parse_network_text(kChain, "test"), 8), std::int64_t{1} << 30))
                 .plan;
    REQUIRE(find_plan_error(p) == "");
    p.network.name += "-edited";
    CHECK(find_plan_error(p).find("inputs.network_sha256") != std::string::npos);
  }
}
