#include "costs.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "planner/check/verify.h"
#include "planner/model/errors.h"

namespace ucplan {

std::int64_t seconds_to_ns(double seconds) { return static_cast<std::int64_t>(std::llround(seconds * 1e9)); }

std::int64_t CostTable::h2d_ns(std::int64_t bytes) const { return bytes <= 0 ? 0 : seconds_to_ns(h2d.seconds(bytes)); }
std::int64_t CostTable::d2h_ns(std::int64_t bytes) const { return bytes <= 0 ? 0 : seconds_to_ns(d2h.seconds(bytes)); }

std::vector<std::int64_t> costable_sub_batches(const Profile& p, std::int64_t batch) {
  std::vector<std::int64_t> out;
  for (auto s : p.sizes)
    if (s <= batch && batch % s == 0) out.push_back(s);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

namespace {

bool micro_size_allowed(SizesPolicy policy, std::int64_t size, std::int64_t sub_batch) {
  if (policy == SizesPolicy::All) return true;
  if (policy == SizesPolicy::Undivided) return size == sub_batch;
  return size == sub_batch || (size & (size - 1)) == 0;
}

}  // namespace

const SignatureCosts& profile_costs_of(const Graph& g, int layer, const Profile& p, const std::string& file) {
  const std::string sig = layer_signature(g, layer);
  const SignatureCosts* sc = p.find(sig);
  if (!sc)
    throw UserError(file, fmt::format("layer {}", g.layers[layer].name()),
                    fmt::format("the profile has no costs for signature \"{}\" ({})", sig,
                                p.network == g.net.name
                                    ? "the network has changed since it was profiled: profile it again"
                                    : fmt::format("the profile is for network {}, not {}", p.network, g.net.name)));
  return *sc;
}

CostTable build_cost_table(const Graph& g, const TaskGraph& tg, const Profile& p, const std::string& file,
                           std::int64_t sub_batch, SizesPolicy policy) {
  CostTable ct;
  ct.sub_batch = sub_batch;
  ct.h2d = p.h2d;
  ct.d2h = p.d2h;
  ct.duplex = p.duplex;
  // Each kernel a task launches waits the launch gap after the one before: a conv task's micro-
  // batches are a kernel each (mu-cuDNN), any other task one.
  ct.launch_gap_ns = p.launch_gap ? seconds_to_ns(p.launch_gap->seconds) : 0;
  ct.tasks.resize(tg.tasks.size());
  ct.forward_task.assign(g.layers.size(), -1);
  // Costs are shared by every task with the same signature and op: compute each once.
  std::map<std::pair<std::string, StepOp>, TaskCost> memo;
  for (const Task& t : tg.tasks) {
    if (t.kind == TaskKind::Forward) ct.forward_task[t.layer] = t.id;
    const std::string sig = layer_signature(g, t.layer);
    const StepOp op = step_op_of(t.kind);  // a profile costs each task kind's op
    auto key = std::make_pair(sig, op);
    auto it = memo.find(key);
    if (it != memo.end()) {
      ct.tasks[t.id] = it->second;
      continue;
    }
    const SignatureCosts* sc = &profile_costs_of(g, t.layer, p, file);
    const std::string& layer = g.layers[t.layer].name();
    TaskCost tc;
    tc.conv = t.conv_kernel;
    if (t.conv_kernel) {
      std::vector<MicroOption> options;
      // On cuDNN a micro-batch starts at a multiple of the layer's granule (verify.h): sizes that
      // are not multiples are left out unless undivided, so every start is one (a last odd
      // micro-batch would be aligned too; kept simple, as only 16-bit odd shapes have a granule).
      const std::int64_t granule = p.device.kind == "cpu" ? 1 : cudnn_micro_batch_granule(g, t.layer);
      for (const auto& c : sc->costs) {
        if (c.op != op || !c.ok()) continue;
        // The convolutions as the checker holds them: a plan made from a cost that breaks its
        // rules would fail the plan checker at the end of the compile.
        if (const std::string why =
                conv_cost_error(g.layers[t.layer], p.device.kind == "cpu", op, c.algo, c.batch, c.workspace_bytes);
            !why.empty())
          throw UserError(file,
                          fmt::format("layer {} ({}), {} at {} samples", layer, step_op_name(op), c.algo, c.batch),
                          why + " (an edited profile or --cache file: profile again)");
        if (c.batch >= 1 && c.batch <= sub_batch && micro_size_allowed(policy, c.batch, sub_batch) &&
            (c.batch == sub_batch || c.batch % granule == 0))
          options.push_back({c.algo, c.batch, seconds_to_ns(c.seconds) + ct.launch_gap_ns, c.workspace_bytes});
      }
      tc.front = pareto_front(options, sub_batch);
      if (tc.front.empty())
        throw UserError(
            file, fmt::format("layer {} ({})", layer, step_op_name(op)),
            fmt::format("no working algorithm measured whose micro-batches can make up {} samples", sub_batch));
      tc.time_ns = tc.front.back().time_ns;
      tc.baseline_ns = tc.front.front().time_ns;
      tc.min_workspace = tc.front.front().workspace_bytes;
      std::int64_t undivided = INT64_MAX;
      for (const auto& o : options)
        if (o.micro_batch == sub_batch) undivided = std::min(undivided, o.time_ns);
      tc.undivided_ns = undivided == INT64_MAX ? tc.time_ns : undivided;
    } else {
      const std::int64_t want = t.kind == TaskKind::Update ? 0 : sub_batch;
      const OpCost* best = nullptr;
      std::string why;  // the status of a measurement at this size that did not run
      for (const auto& c : sc->costs) {
        if (c.op == op && c.ok() && c.batch == want && (!best || c.seconds < best->seconds)) best = &c;
        if (c.op == op && !c.ok() && c.batch == want && why.empty()) why = c.status;
      }
      if (!best)
        throw UserError(
            file, fmt::format("layer {} ({})", layer, step_op_name(op)),
            want == 0 ? std::string("no update cost in the profile")
            : why == "out_of_memory"
                ? fmt::format("ran out of memory at batch {} when profiled (a smaller --sub-batch may fit)", want)
            : !why.empty()
                ? fmt::format("its measurement at batch {} did not run ({}; a smaller --sub-batch may fit)", want, why)
                : fmt::format("no successful measurement at batch {} (sizes measured: see \"sizes\")", want));
      tc.time_ns = seconds_to_ns(best->seconds) + ct.launch_gap_ns;
      tc.baseline_ns = tc.time_ns;
      tc.undivided_ns = tc.time_ns;
    }
    memo.emplace(key, tc);
    ct.tasks[t.id] = std::move(tc);
  }
  // Overheads are shares of the ideal iteration (the tasks at their fastest): with every task at
  // 0 s there is nothing to share, and no real measurement or model gives that.
  if (std::all_of(ct.tasks.begin(), ct.tasks.end(), [](const TaskCost& c) { return c.time_ns == 0; }))
    throw UserError(file, "signatures",
                    fmt::format("every cost network {} uses is 0 s at sub-batch {}, so its ideal iteration would "
                                "take no time (an edited profile: profile again)",
                                g.net.name, sub_batch));
  return ct;
}

}  // namespace ucplan
