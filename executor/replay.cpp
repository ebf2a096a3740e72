#include "replay.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "cpu_ops.h"
#include "planner/model/errors.h"
#include "planner/model/precision.h"
#include "planner/model/units.h"
#include "reference.h"

namespace ucplan {

namespace {

// splitmix64: the deterministic source of every initial value.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
float uniform(std::uint64_t seed, std::uint64_t i) {  // in [-1, 1)
  return static_cast<float>(static_cast<double>(mix(seed ^ mix(i)) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}
std::uint64_t name_seed(const std::string& name, std::uint64_t seed) {
  std::uint64_t h = seed;
  for (char c : name) h = mix(h ^ static_cast<unsigned char>(c));
  return h;
}

}  // namespace

void init_weights(const GraphLayer& l, std::uint64_t seed, float* w) {
  const std::uint64_t s = name_seed(l.name(), seed);
  if (l.type() == LayerType::BatchNorm || l.type() == LayerType::LayerNorm ||
      l.type() == LayerType::Scale) {  // gamma near 1, beta (where there is one) near 0
    const std::int64_t c = l.weight_elems;
    for (std::int64_t i = 0; i < c; ++i) w[i] = 1.0f + 0.1f * uniform(s, static_cast<std::uint64_t>(i));
    for (std::int64_t i = 0; i < l.bias_elems; ++i) w[c + i] = 0.1f * uniform(s, static_cast<std::uint64_t>(c + i));
    return;
  }
  // Uniform in +-sqrt(3 / fan_in): unit-variance outputs for unit-variance inputs.
  const std::int64_t fan_in = l.spec.type == LayerType::Conv ? (l.in_shapes[0].c / l.spec.conv.groups) *
                                                                   l.spec.conv.kernel[0] * l.spec.conv.kernel[1]
                                                             : l.in_shapes[0].elems();
  const float a = static_cast<float>(std::sqrt(3.0 / static_cast<double>(std::max<std::int64_t>(fan_in, 1))));
  for (std::int64_t i = 0; i < l.params(); ++i) w[i] = a * uniform(s, static_cast<std::uint64_t>(i));
}

void init_input(std::int64_t elems, std::uint64_t seed, float* x) {
  for (std::int64_t i = 0; i < elems; ++i) x[i] = uniform(seed ^ 0xda7a, static_cast<std::uint64_t>(i));
}

void init_labels(std::int64_t n, std::int64_t classes, std::uint64_t seed, std::int32_t* labels) {
  for (std::int64_t i = 0; i < n; ++i)
    labels[i] = static_cast<std::int32_t>(mix(seed ^ 0x1abe1 ^ mix(static_cast<std::uint64_t>(i))) %
                                          static_cast<std::uint64_t>(classes));
}

std::vector<ResolvedStep> resolve_steps(const Plan& plan, const Program& program) {
  const Graph& g = program.graph;
  const TaskGraph& tg = program.tasks;
  const std::vector<int>& tensor_of = program.buffer_tensor;
  // What every replay relies on, checked here too: the verifier does more, but `run --no-verify`
  // (for tests of the poisoning) skips it, and a plan broken in these ways crashed or hung (a
  // wait on a later step never ends) instead of failing.
  const auto nsteps = static_cast<int>(plan.steps.size()), nbuffers = static_cast<int>(plan.buffers.size());
  for (int i = 0; i < nsteps; ++i) {
    const PlanStep& s = plan.steps[static_cast<std::size_t>(i)];
    auto bad = [&](const std::string& what) {
      throw UserError("", fmt::format("steps[{}]", i),
                      what + " (a plan the verifier refuses; run without --no-verify)");
    };
    if (s.id != i) bad(fmt::format("its id is {}, not its place", s.id));
    for (int w : s.waits)
      if (w < 0 || w >= i) bad(fmt::format("waits for step {}, not an earlier one", w));
    for (const auto* list : {&s.reads, &s.writes, &s.accumulates})
      for (int b : *list)
        if (b < 0 || b >= nbuffers) bad(fmt::format("names buffer {}, which the plan does not have", b));
    if (s.workspace < -1 || s.workspace >= nbuffers) bad(fmt::format("names workspace buffer {}", s.workspace));
    if (s.host < -1 || s.host >= static_cast<int>(plan.host_buffers.size()))
      bad(fmt::format("names host buffer {}", s.host));
    if (s.stream != Stream::Compute && s.host < 0) bad("a copy without a host buffer");
    if (s.stream != Stream::Compute && (s.op == StepOp::Prefetch ? s.writes.size() : s.reads.size()) != 1)
      bad("a copy moves one buffer");
  }
  std::unordered_map<std::string, int> layer_index;
  for (std::size_t l = 0; l < g.layers.size(); ++l) layer_index[g.layers[l].name()] = static_cast<int>(l);
  // Where the plan says each buffer's life ends (its last_step): that is when check mode
  // poisons it, after its last uses on the other streams up to then, so a plan that frees a
  // buffer too early is caught even if nothing has overwritten the memory yet.
  const std::size_t nb = plan.buffers.size();
  std::vector<std::array<int, 3>> last_use(nb, {-1, -1, -1});
  for (const PlanStep& s : plan.steps) {
    const int si = static_cast<int>(s.stream);
    auto note = [&](int b) {
      if (s.id <= plan.buffers[b].last_step) last_use[b][si] = std::max(last_use[b][si], s.id);
    };
    for (int b : s.reads) note(b);
    for (int b : s.writes) note(b);
    for (int b : s.accumulates) note(b);
    if (s.workspace >= 0) note(s.workspace);
  }
  std::vector<ResolvedStep> out(plan.steps.size());
  for (const PlanStep& s : plan.steps) {
    ResolvedStep& r = out[s.id];
    r.id = s.id;
    r.stream = s.stream;
    r.final = s.final;
    r.op = s.op;
    r.waits = s.waits;
    r.config = s.config;
    if (s.stream != Stream::Compute) {
      const int b = s.op == StepOp::Prefetch ? s.writes.at(0) : s.reads.at(0);
      const Tensor& t = tg.tensors.at(static_cast<std::size_t>(tensor_of[b]));
      r.device = plan.buffers[b].offset;
      r.host = s.host;
      r.bytes = t.bytes(plan.sub_batch);
      r.input = plan.host_buffers[s.host].input;
      r.ahead = s.ahead;
    } else {
      r.layer = layer_index.at(s.layer);
      const GraphLayer& l = g.layers[r.layer];
      // Each operand by its tensor id (tasks.h: y_of, dy_of, ... per layer), not by its name.
      std::unordered_map<int, std::int64_t> at;
      std::unordered_map<int, char> acc;
      for (int b : s.reads) at[tensor_of[b]] = plan.buffers[b].offset;
      for (int b : s.writes) at[tensor_of[b]] = plan.buffers[b].offset;
      for (int b : s.accumulates) {
        at[tensor_of[b]] = plan.buffers[b].offset;
        acc[tensor_of[b]] = 1;
      }
      auto find = [&](int tensor) -> std::int64_t {
        auto it = tensor < 0 ? at.end() : at.find(tensor);
        return it == at.end() ? -1 : it->second;
      };
      for (int in : l.inputs) {
        r.x.push_back(find(tg.y_of[in]));
        r.dx.push_back(find(tg.dy_of[in]));
        r.dx_accumulate.push_back(tg.dy_of[in] >= 0 && acc.count(tg.dy_of[in]) ? 1 : 0);
      }
      r.y = find(tg.y_of[r.layer]);
      r.w = find(tg.w_of[r.layer]);
      r.dw = find(tg.dw_of[r.layer]);
      r.aux = find(tg.aux_of[r.layer]);
      r.dy = find(tg.dy_of[r.layer]);
      r.labels = find(tg.labels);
      if (s.workspace >= 0) {
        r.workspace = plan.buffers[s.workspace].offset;
        r.workspace_bytes = plan.buffers[s.workspace].size;
      }
    }
  }
  for (std::size_t b = 0; b < nb; ++b) {
    if (plan.buffers[b].resident || plan.buffers[b].carried) continue;
    const auto& lu = last_use[b];
    const int last = plan.buffers[b].last_step;
    if (last < 0 || last >= static_cast<int>(out.size())) continue;
    out[last].poison_after.emplace_back(plan.buffers[b].offset, plan.buffers[b].size);
    for (int u : lu)
      if (u >= 0 && u != last &&
          std::find(out[last].poison_waits.begin(), out[last].poison_waits.end(), u) == out[last].poison_waits.end())
        out[last].poison_waits.push_back(u);
  }
  return out;
}

bool LossScaler::step(bool found_inf) {
  if (found_inf) {
    skipped += 1;
    good_steps = 0;
    if (config.kind == LossScale::Kind::Dynamic) scale *= config.backoff_factor;
    return false;
  }
  if (config.kind == LossScale::Kind::Dynamic && ++good_steps == config.growth_interval) {
    scale *= config.growth_factor;
    good_steps = 0;
  }
  return true;
}

double default_check_tolerance(Precision p, bool cuda) {
  const double fp32 = cuda ? 1e-2 : 1e-3;
  return p == Precision::FP32 ? fp32 : std::max(fp32, 8 * unit_roundoff(p));
}

namespace {

cpu::Half half_of(Precision p) { return storage_of(p) == Storage::BF16 ? cpu::Half::BF16 : cpu::Half::FP16; }

// An input host buffer's contents: the batch's data or a sink's external gradient in the storage
// type (bf16, fp16: the data loader's values rounded to nearest even, as the reference run rounds
// them), or the labels.
void load_host_input(const Plan& plan, const Program& program, const PlanHostBuffer& h, std::uint64_t seed, void* dst) {
  const Graph& g = program.graph;
  auto store_input = [&](std::int64_t elems, std::uint64_t input_seed) {
    if (!low_precision_storage(g.precision)) return init_input(elems, input_seed, static_cast<float*>(dst));
    std::vector<float> v(static_cast<std::size_t>(elems));
    init_input(elems, input_seed, v.data());
    cpu::narrow(half_of(g.precision), v.data(), static_cast<std::uint16_t*>(dst), elems);
  };
  const Tensor& t = program.tasks.tensors.at(static_cast<std::size_t>(program.tensor_ids.at(h.tensor)));
  if (t.kind == TensorKind::Labels) {
    init_labels(plan.batch, std::max<std::int64_t>(1, g.net.labels), seed, static_cast<std::int32_t*>(dst));
  } else if (t.kind == TensorKind::Activation) {  // the network input
    store_input(g.layers[0].out.elems() * plan.batch, seed);
  } else {  // the external gradient of a sink that is not a loss
    const int l = t.layer;
    store_input(g.layers[static_cast<std::size_t>(l)].out.elems() * plan.batch,
                seed ^ (0x9e37u + static_cast<std::uint64_t>(l)));
  }
}

}  // namespace

void load_initial_values(const Plan& plan, const Program& program, Backend& backend, std::uint64_t seed) {
  const Graph& g = program.graph;
  const cpu::Half half_type = half_of(g.precision);
  // Buffers are found by tensor id (the program's), not by parsing tensor names.
  const TaskGraph& tg = program.tasks;
  const std::unordered_map<std::string, int>& tensor_by_name = program.tensor_ids;
  std::unordered_map<int, const PlanBuffer*> resident;  // by tensor id
  for (const auto& b : plan.buffers)
    if (b.resident) resident[tensor_by_name.at(b.tensor)] = &b;
  for (std::size_t l = 0; l < g.layers.size(); ++l) {
    const GraphLayer& gl = g.layers[l];
    if (!gl.has_weights()) continue;
    std::vector<float> w(static_cast<std::size_t>(gl.params()));
    init_weights(gl, seed, w.data());
    const std::int64_t offset = resident.at(tg.w_of[l])->offset;
    backend.write(offset, w.data(), static_cast<std::int64_t>(w.size() * sizeof(float)));
    if (const std::int64_t copy = g.weight_copy_bytes(static_cast<int>(l)); copy > 0) {
      // The conv / fc weights' copy in the storage type, after the FP32 master (graph.h).
      std::vector<std::uint16_t> h(w.size());
      cpu::narrow(half_type, w.data(), h.data(), gl.params());
      backend.write(offset + static_cast<std::int64_t>(w.size() * sizeof(float)), h.data(), copy);
    }
  }
  for (const auto& h : plan.host_buffers)
    if (h.input) load_host_input(plan, program, h, seed, backend.host(h.id));
  // A carried buffer starts with the first round's slice of its input (plan.h): the copy that in
  // every later round the round before makes.
  for (const auto& b : plan.buffers) {
    if (!b.carried) continue;
    const int t = tensor_by_name.at(b.tensor);
    for (const auto& h : plan.host_buffers)
      if (h.input && h.tensor == b.tensor)
        backend.write(b.offset, backend.host(h.id), tg.tensors[static_cast<std::size_t>(t)].bytes(plan.sub_batch));
  }
}

double relative_l2_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got.at(i)) - static_cast<double>(want[i]);
    diff += d * d;
    norm += static_cast<double>(want[i]) * static_cast<double>(want[i]);
  }
  const double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  return rel == rel ? rel : INFINITY;
}

GradientError compare_gradient(const std::string& tensor, const std::vector<float>& got, const std::vector<float>& want,
                               const std::vector<float>* fp32, const std::vector<float>* jittered) {
  return {tensor, relative_l2_error(got, want),
          std::max(fp32 ? relative_l2_error(want, *fp32) : 0.0, jittered ? relative_l2_error(*jittered, want) : 0.0)};
}

RunReport replay_plan(const Plan& plan, Backend& backend, const RunOptions& o) {
  // The verifier checks the route too, but `run --no-verify` skips it: said as resolve_steps says.
  std::string route_error;
  const Program program = derive_program(plan, &route_error);
  if (!route_error.empty())
    throw UserError("", "steps", route_error + " (a plan the verifier refuses; run without --no-verify)");
  const Graph& g = program.graph;
  const std::vector<ResolvedStep> steps = resolve_steps(plan, program);
  RunReport rep;
  rep.backend = backend.description();
  rep.arena_bytes = plan.arena_bytes;
  rep.predicted_seconds = static_cast<double>(plan.summary.predicted_ns) * 1e-9;

  backend.check_steps(steps);
  std::vector<std::int64_t> host_sizes;
  for (const auto& h : plan.host_buffers) host_sizes.push_back(h.size);
  if (o.check && o.host_bytes_available > 0) {
    const std::int64_t reference = reference_bytes_at_least(g, plan.sub_batch);
    std::int64_t host = 0;
    for (std::int64_t b : host_sizes) host += b;
    if (reference + host > o.host_bytes_available)
      throw UserError("", "--check",
                      fmt::format("the check's CPU reference run holds at least {} at once (every layer's value for "
                                  "a sub-batch of {}) beside the plan's {} of host buffers, more than the {} of host "
                                  "memory available: check the plan compiled at a smaller batch, or on a host with "
                                  "more memory (ucplan run without --check needs only the host buffers)",
                                  format_bytes(reference), plan.sub_batch, format_bytes(host),
                                  format_bytes(o.host_bytes_available)));
  }
  backend.allocate(plan.arena_bytes, host_sizes);
  rep.device_memory_bytes = backend.device_memory_bytes();

  // Buffers are found by tensor id (the program's), not by parsing tensor names.
  const TaskGraph& tg = program.tasks;
  const std::unordered_map<std::string, int>& tensor_by_name = program.tensor_ids;
  std::unordered_map<int, const PlanBuffer*> resident;  // by tensor id
  for (const auto& b : plan.buffers)
    if (b.resident) resident[tensor_by_name.at(b.tensor)] = &b;
  load_initial_values(plan, program, backend, o.seed);
  for (const auto& s : steps) {
    if (s.stream == Stream::H2D) rep.bytes_h2d += s.bytes;
    if (s.stream == Stream::D2H) rep.bytes_d2h += s.bytes;
  }
  rep.bytes_h2d *= plan.rounds;
  rep.bytes_d2h *= plan.rounds;

  LossScaler scaler(parse_loss_scale(plan.loss_scale));
  rep.loss_scale = plan.loss_scale;
  rep.initial_loss_scale = scaler.scale;
  RunContext ctx;
  ctx.sub_batch = plan.sub_batch;
  ctx.total_batch = plan.batch;
  ctx.lr = o.lr;
  ctx.seed = o.seed;
  // The backend's warm-up iterations come first, untimed (Backend::warmup_iterations). Check mode
  // checks the first two iterations, so that what one iteration leaves behind (updated weights,
  // buffers reused across rounds and iterations) is checked too.
  const int warmup = backend.warmup_iterations();
  const int total_iterations = o.iterations + warmup;
  // Whether every weight gradient is finite (read back from the arena: GradScaler's found_inf).
  auto all_finite = [&] {
    for (std::size_t i = 0; i < plan.buffers.size(); ++i) {
      const PlanBuffer& b = plan.buffers[i];
      const int t = program.buffer_tensor[i];
      if (!b.resident || t < 0 || tg.tensors[static_cast<std::size_t>(t)].kind != TensorKind::WeightGrad) continue;
      std::vector<float> v(static_cast<std::size_t>(b.size / 4));
      backend.read(b.offset, v.data(), static_cast<std::int64_t>(v.size() * sizeof(float)));
      for (float x : v)
        if (!std::isfinite(x)) return false;
    }
    return true;
  };
  constexpr int kCheckedIterations = 2;
  // A dynamic loss scale starts high and halves on each overflow (GradScaler's way): the
  // iterations where both runs overflowed compare nothing, so checking goes on, while the run
  // has iterations, until two compared something, or for this many more (2^24 below fp16's
  // default 65536 is 2^-8: any network whose gradients fit fp16 at all compares by then).
  constexpr int kOverflowRetries = 24;
  const bool dynamic = scaler.config.kind == LossScale::Kind::Dynamic;
  ReferenceScratch scratch;  // the memory of every reference run of the check
  for (int it = 0; it < total_iterations; ++it) {
    for (const auto& [tensor, b] : resident)
      if (tg.tensors[static_cast<std::size_t>(tensor)].kind == TensorKind::WeightGrad)
        backend.fill(b->offset, b->size, 0);
    const bool checking = o.check && rep.checked_iterations - rep.overflow_checked < kCheckedIterations &&
                          rep.checked_iterations < kCheckedIterations + (dynamic ? kOverflowRetries : 0);
    const bool poison = checking && o.poison;
    // The weights this iteration starts from: the reference starts from the same.
    std::map<std::string, std::vector<float>> start_weights;
    if (checking)
      for (std::size_t l = 0; l < g.layers.size(); ++l) {
        if (tg.w_of[l] < 0) continue;
        std::vector<float> w(static_cast<std::size_t>(g.layers[l].params()));
        backend.read(resident.at(tg.w_of[l])->offset, w.data(), static_cast<std::int64_t>(w.size() * sizeof(float)));
        start_weights.emplace(tg.tensors[static_cast<std::size_t>(tg.w_of[l])].name, std::move(w));
      }
    const auto t0 = std::chrono::steady_clock::now();
    ctx.loss_scale = scaler.scale;
    ctx.lr = o.lr;
    backend.begin();
    try {
      for (std::int64_t r = 0; r < plan.rounds; ++r) {
        for (const auto& s : steps)
          if (!s.final) backend.submit(s, static_cast<int>(r), ctx, poison);
        backend.barrier();
      }
    } catch (const ExecutionFault& e) {
      if (!o.check) throw;
      rep.checked = true;
      rep.passed = false;
      rep.fault = e.what();
      rep.max_rel_error = INFINITY;
      return rep;
    }
    const auto reference_start = std::chrono::steady_clock::now();
    // One progress line per stage of a checked iteration, with the seconds since the last.
    auto stage_start = reference_start;
    auto say = [&](const std::string& what) {
      if (!o.progress) return;
      const auto now = std::chrono::steady_clock::now();
      o.progress(fmt::format("check: iteration {} of {}: {} in {:.1f} s", it + 1,
                             std::max(kCheckedIterations, rep.checked_iterations + 1), what,
                             std::chrono::duration<double>(now - stage_start).count()));
      stage_start = now;
    };
    if (checking) {
      stage_start = t0;
      say(fmt::format("the plan's {} round{} ran", plan.rounds, plan.rounds == 1 ? "" : "s"));
      // This iteration's weight gradients (before its updates) against the reference.
      // The reference runs on the CPU: a plan for another device (cuDNN names) gets the CPU
      // algorithm closest to each of its algorithms (cpu_ops.h reference_conv_algo_cpu).
      std::map<std::string, std::string> algos;
      for (const PlanStep& ps : plan.steps) {
        if (ps.op == StepOp::Recompute || ps.config.empty()) continue;
        const std::string cpu_algo = reference_conv_algo_cpu(ps.op, ps.config.front().algo);
        if (cpu_algo.empty())
          throw UserError("", "--check",
                          fmt::format("{} {}: no CPU algorithm corresponds to \"{}\" for the reference run", ps.layer,
                                      step_op_name(ps.op), ps.config.front().algo));
        algos.emplace(ps.layer + ":" + step_op_name(ps.op), cpu_algo);
      }
      ReferenceResult ref =
          reference_gradients(g, plan.batch, plan.sub_batch, o.seed, algos, start_weights, ctx.loss_scale, 0, &scratch);
      say("the reference ran on the CPU");
      // The 16-bit floor: the same reference at FP32 (RunOptions::fp32_floor).
      std::map<std::string, std::vector<float>> fp32_gradients;
      if (o.fp32_floor && low_precision_storage(g.precision)) {
        const Graph g32 = build_graph(plan.network, "", Precision::FP32);
        fp32_gradients = reference_gradients(g32, plan.batch, plan.sub_batch, o.seed, algos, start_weights,
                                             ctx.loss_scale, 0, &scratch)
                             .weight_gradients;
        rep.floor_checked = true;
        say("the FP32 reference (the floor of 16-bit storage) ran on the CPU");
      }
      // The rounding floor: the same reference with every convolution's output jittered.
      std::map<std::string, std::vector<float>> jittered_gradients;
      if (o.rounding_floor) {
        jittered_gradients = reference_gradients(g, plan.batch, plan.sub_batch, o.seed, algos, start_weights,
                                                 ctx.loss_scale, kRoundingJitter, &scratch)
                                 .weight_gradients;
        rep.floor_checked = true;
        say("the jittered reference (the rounding floor) ran on the CPU");
      }
      rep.checked = true;
      // A scaled loss gradient that overflows (fp16) in the reference overflows in the plan's
      // run too, and both skip the step: nothing to compare then. Poison read by a broken plan
      // makes only the plan's run non-finite, and fails below.
      bool ref_finite = true;
      for (const auto& [name, want] : ref.weight_gradients)
        for (float v : want) ref_finite = ref_finite && std::isfinite(v);
      if (!ref_finite && scaler.active() && !all_finite()) {
        rep.overflow_checked += 1;
        ref.weight_gradients.clear();
      }
      // Without loss scaling, a non-finite reference from weights the plan's run has updated
      // correctly so far is the run's own (updates that diverged, a 16-bit gradient that
      // overflowed): it holds nothing the plan's run could be measured against. (After a wrong
      // update, the plan's fault, reported already, can make the reference diverge too.)
      if (!ref_finite && !scaler.active() && rep.passed) {
        std::string why = fmt::format("the updates at --lr {:g} diverged", o.lr);
        if (it == 0)
          why = low_precision_storage(plan.precision)
                    ? "before any update: a 16-bit value overflowed without loss scaling"
                    : "before any update";
        throw UserError("", "--check",
                        fmt::format("the reference run's weight gradients are not finite at iteration {} ({}), so "
                                    "the plan's cannot be checked against them",
                                    it + 1, why));
      }
      // Relative L2 error per weight-gradient tensor; NaN (a read of poisoned memory) is infinite.
      rep.errors.clear();
      for (const auto& [name, want] : ref.weight_gradients) {
        std::vector<float> got(want.size());
        backend.read(resident.at(tensor_by_name.at(name))->offset, got.data(),
                     static_cast<std::int64_t>(got.size() * sizeof(float)));
        const auto fp32 = fp32_gradients.find(name);
        const auto jittered = jittered_gradients.find(name);
        const GradientError e =
            compare_gradient(name, got, want, fp32 == fp32_gradients.end() ? nullptr : &fp32->second,
                             jittered == jittered_gradients.end() ? nullptr : &jittered->second);
        rep.errors.push_back(e);
        if (rep.worst_tensor.empty() || e.max_rel_error > rep.max_rel_error) {
          rep.max_rel_error = e.max_rel_error;
          rep.worst_tensor = name;
        }
        const double share = e.share_of_limit(o.tolerance);
        if (rep.worst_share_tensor.empty() || share > rep.worst_share_of_limit) {
          rep.worst_share_of_limit = share;
          rep.worst_share_tensor = name;
        }
        rep.passed = rep.passed && e.max_rel_error <= check_limit(o.tolerance, e.floor);
      }
      rep.checked_iterations += 1;
      if (rep.checked_iterations - rep.overflow_checked == kCheckedIterations)
        scratch = ReferenceScratch();  // not held while timing
    }
    const auto reference_time = std::chrono::steady_clock::now() - reference_start;  // not the plan's time
    // Loss scaling: a step with inf/NaN weight gradients is skipped; otherwise the updates take
    // the gradients divided by the scale (folded into the learning rate: SGD is linear in them).
    bool update = true;
    auto finite_time = std::chrono::steady_clock::duration::zero();  // not the plan's time either
    if (scaler.active()) {
      const double used = scaler.scale;
      // Read back here, one weight gradient after another (on a GPU a host round trip each);
      // GradScaler's own check runs on the device and reads one flag, which the plan does not
      // count either: this time is left out of the iteration's (the CUDA static review).
      const auto finite_start = std::chrono::steady_clock::now();
      // The unscale too (GradScaler's 1 / scale times each gradient): a scale so small that the
      // learning rate over it is not a finite FP32 value would write NaN (inf x 0) into the weights.
      const bool finite = all_finite() && std::isfinite(static_cast<float>(o.lr / used));
      finite_time = std::chrono::steady_clock::now() - finite_start;
      update = scaler.step(!finite);
      ctx.lr = o.lr / used;
    }
    rep.steps += 1;
    if (update)
      for (const auto& s : steps)
        if (s.final) backend.submit(s, 0, ctx, false);
    backend.barrier();
    std::vector<MeasuredStep> timeline = backend.end();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0 - reference_time - finite_time).count();
    if (it >= warmup) {
      rep.iteration_seconds.push_back(seconds);
      rep.timeline = std::move(timeline);
      for (MeasuredStep& m : rep.timeline) m.bytes = steps.at(static_cast<std::size_t>(m.step)).bytes;
    }
    // The updates: each reference starts from the weights the plan's run has, so a missing,
    // doubled or misdirected update (or a weight overwritten after its last read) would not show
    // in the gradients. After a checked iteration every layer's weights must be the ones it
    // started from less the learning rate times the gradient the run computed (unchanged where a
    // loss scale skipped the step): the SGD the final steps run, to within float rounding.
    if (checking && rep.passed) {
      for (std::size_t l = 0; l < g.layers.size() && rep.fault.empty(); ++l) {
        if (tg.w_of[l] < 0 || tg.dw_of[l] < 0) continue;
        const std::string& name = tg.tensors[static_cast<std::size_t>(tg.w_of[l])].name;
        const std::vector<float>& before = start_weights.at(name);
        std::vector<float> after(before.size()), gradient(before.size());
        const auto bytes = static_cast<std::int64_t>(before.size() * sizeof(float));
        backend.read(resident.at(tg.w_of[l])->offset, after.data(), bytes);
        backend.read(resident.at(tg.dw_of[l])->offset, gradient.data(), bytes);
        // Each weight as the SGD step computes it in float (w - float(lr) x dW), to within two units
        // in the last place (a fused multiply-add on a GPU rounds once, not twice): a step below
        // that is one float arithmetic itself cannot show.
        const auto rate = static_cast<float>(ctx.lr);
        std::size_t wrong = 0, first = 0;
        for (std::size_t e = 0; e < before.size(); ++e) {
          const float want = update ? before[e] - rate * gradient[e] : before[e];  // a skipped step: no change
          // The step itself overflows FP32 from finite values (a huge --lr): the run diverged, as a
          // non-finite reference says above; the plan is not at fault, and nothing measures it.
          if (!std::isfinite(want) && std::isfinite(before[e]) && std::isfinite(gradient[e]))
            throw UserError("", "--lr",
                            fmt::format("the update of {} at --lr {:g} after iteration {} overflows FP32 ({:g} - {:g} "
                                        "x {:g}): the updates diverged, so the plan's cannot be checked against them",
                                        name, ctx.lr, it + 1, before[e], rate, gradient[e]));
          const float scale = std::max(std::fabs(want), std::fabs(before[e]));
          const float ulp = std::nextafter(scale, INFINITY) - scale;
          if (!(std::fabs(after[e] - want) <= 2 * ulp)) {
            if (wrong++ == 0) first = e;
          }
        }
        if (wrong > 0) {
          rep.passed = false;
          rep.max_rel_error = INFINITY;
          rep.fault = fmt::format(
              "after iteration {}, {} is not its value less the learning rate times {} at {} of {} values (the "
              "first, [{}]: {:g} from {:g} and a gradient {:g}, {:g} expected): an update missing, doubled or of "
              "another layer, or the weight overwritten",
              it + 1, name, tg.tensors[static_cast<std::size_t>(tg.dw_of[l])].name, wrong, before.size(), first,
              after[first], before[first], gradient[first],
              update ? before[first] - rate * gradient[first] : before[first]);
        }
      }
    }
  }
  if (o.check && rep.passed && rep.checked_iterations > 0 && rep.overflow_checked == rep.checked_iterations) {
    // Both runs overflowed in every checked iteration: nothing was compared, which is no pass.
    rep.passed = false;
    rep.max_rel_error = INFINITY;
    rep.fault =
        dynamic
            ? fmt::format(
                  "nothing was compared: in each of the {} checked iterations the loss-scaled gradients overflowed in "
                  "the plan's run and the reference alike (the dynamic loss scale went from {:g} to {:g}){}",
                  rep.checked_iterations, rep.initial_loss_scale, scaler.scale,
                  rep.checked_iterations < kCheckedIterations + kOverflowRetries
                      ? ": give more iterations (-n) for it to fall to where the gradients fit"
                      : "")
            : fmt::format(
                  "nothing was compared: in each of the {} checked iterations the loss-scaled gradients overflowed in "
                  "the plan's run and the reference alike (the loss scale {:g} is too large for this network)",
                  rep.checked_iterations, rep.initial_loss_scale);
  }
  if (o.check) {
    // The data loader's batch is read-only for the plan: after every round of every iteration
    // the input host buffers must still hold exactly what was loaded.
    for (const auto& h : plan.host_buffers) {
      if (!h.input) continue;
      std::vector<char> want(static_cast<std::size_t>(h.size), 0);
      load_host_input(plan, program, h, o.seed, want.data());
      if (std::memcmp(want.data(), backend.host(h.id), want.size()) != 0) {
        rep.passed = false;
        rep.fault = fmt::format("host buffer {} ({}) no longer holds the batch's input after the run", h.id, h.tensor);
        rep.max_rel_error = INFINITY;
      }
    }
  }
  rep.backend = backend.description();  // what it did, e.g. graphs launched
  rep.skipped_steps = scaler.skipped;
  rep.final_loss_scale = scaler.scale;
  rep.device_memory_bytes =
      std::max(rep.device_memory_bytes, backend.device_memory_bytes());  // after what the run took
  std::vector<double> sorted = rep.iteration_seconds;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty()) {
    const std::size_t n = sorted.size();
    rep.median_seconds = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  return rep;
}

}  // namespace ucplan
