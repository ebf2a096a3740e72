#include "strategies.h"

#include <algorithm>
#include <cmath>

#include "planner/model/errors.h"

namespace ucplan {
namespace {

class TableStrategy : public Strategy {
 public:
  TableStrategy(std::string name, std::vector<Residency> table, PrefetchMode prefetch, bool evict, bool by_gain,
                bool may_offload)
      : name_(std::move(name)),
        table_(std::move(table)),
        prefetch_(prefetch),
        evict_(evict),
        by_gain_(by_gain),
        may_offload_(may_offload) {
    if (!may_offload_)
      for (Residency& r : table_)
        if (r == Residency::Offload) r = Residency::Keep;
  }
  std::string name() const override { return name_; }
  Residency residency(int tensor) const override { return table_[tensor]; }
  PrefetchMode prefetch_mode() const override { return prefetch_; }
  bool evict_on_demand() const override { return evict_; }
  bool may_offload() const override { return may_offload_; }
  std::size_t choose_config(const ConfigContext& ctx) override {
    return by_gain_ ? choose_config_by_gain(ctx) : choose_fastest_fitting(ctx);
  }

 private:
  std::string name_;
  std::vector<Residency> table_;
  PrefetchMode prefetch_;
  bool evict_, by_gain_, may_offload_;
};

// The per-stage flags say what stays into each stage, so a table's Hold (schedule.h) is a
// Recompute here: a held value is one the flags keep from its recomputation on.
std::vector<Residency> unheld(std::vector<Residency> table) {
  std::replace(table.begin(), table.end(), Residency::Hold, Residency::Recompute);
  return table;
}

class StagedStrategy : public TableStrategy {
 public:
  StagedStrategy(const StagedPlan& plan, bool may_offload)
      : TableStrategy("staged", plan.holds ? plan.table : unheld(plan.table), PrefetchMode::Eq4, true, true,
                      may_offload),
        keep_(plan.keep) {}
  std::optional<bool> keep_into(int tensor, int pos) const override {
    if (pos < 0 || pos >= static_cast<int>(keep_.size())) return true;
    return keep_[pos][tensor] != 0;
  }

 private:
  const std::vector<std::vector<char>>& keep_;
};

bool consumed_by(const Graph& g, int layer, LayerType type) {
  for (int c : g.layers[layer].consumers)
    if (g.layers[c].type() == type) return true;
  return false;
}

// Recomputation segments are bounded: a tensor whose recomputation would reach back more than
// kMaxSegment layers of recomputed tensors becomes a checkpoint. Without the bound, a residual
// stream (add, relu, add, ... with no convolution on it) would make the whole network one
// segment: quadratic recomputation and quadratic bookkeeping.
constexpr int kMaxSegment = 16;

}  // namespace

std::vector<char> backward_needed(const TaskGraph& tg) {
  std::vector<char> need(tg.tensors.size(), 0);
  for (const Task& t : tg.tasks)
    if (t.round_task && t.kind != TaskKind::Forward)
      for (int r : t.reads) need[r] = 1;
  return need;
}

bool recomputable(const Graph& g, const TaskGraph& tg, int t) {
  const Tensor& x = tg.tensors[t];
  return x.kind == TensorKind::Activation && x.layer != 0 && !x.host_input &&
         g.layers[x.layer].type() != LayerType::SoftmaxLoss;
}

// Chen et al. 2016's sqrt(N) checkpoints: among the route positions where a single activation
// carries everything forward (articulation points, so a segment can be recomputed from it
// alone), keep about every sqrt(N)-th (or every stride-th, if stride > 0) and recompute the rest.
std::vector<char> sqrt_checkpoints(const Graph& g, const TaskGraph& tg, int stride_asked) {
  const int n = static_cast<int>(tg.route.size());
  std::vector<int> pos(g.layers.size());
  for (int i = 0; i < n; ++i) pos[tg.route[i]] = i;
  std::vector<int> last_consumer(n, -1);
  for (int i = 0; i < n; ++i)
    for (int c : g.layers[tg.route[i]].consumers) last_consumer[i] = std::max(last_consumer[i], pos[c]);
  // crossing[i]: activations produced at or before i and consumed after i.
  std::vector<int> diff(n + 1, 0);
  for (int i = 0; i < n; ++i)
    if (last_consumer[i] > i) {
      diff[i] += 1;
      diff[last_consumer[i]] -= 1;
    }
  std::vector<int> candidates;
  int crossing = 0;
  for (int i = 0; i < n; ++i) {
    crossing += diff[i];
    if (crossing == 1 && last_consumer[i] > i) candidates.push_back(i);
  }
  std::vector<char> keep(tg.tensors.size(), 0);
  if (candidates.empty()) {  // no articulation point: nothing can be recomputed from one tensor
    for (int l : tg.route) keep[tg.y_of[l]] = 1;
    return keep;
  }
  const int stride =
      stride_asked > 0 ? stride_asked : std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(n)))));
  int since = stride;
  for (int i : candidates) {
    if (++since >= stride) {
      keep[tg.y_of[tg.route[i]]] = 1;
      since = 0;
    }
  }
  return keep;
}

std::vector<std::string> strategy_names() {
  return {"ucplan", "keep-all", "vdnn-all", "vdnn-conv", "superneurons", "checkpoint-sqrt"};
}

std::unique_ptr<Strategy> make_table_strategy(std::string name, std::vector<Residency> table, PrefetchMode prefetch,
                                              bool evict_on_demand, bool by_gain, bool may_offload) {
  return std::make_unique<TableStrategy>(std::move(name), std::move(table), prefetch, evict_on_demand, by_gain,
                                         may_offload);
}

ScheduleResult simulate_staged(const ScheduleInput& in, const StagedPlan& plan, bool may_offload) {
  StagedStrategy strategy(plan, may_offload);
  return simulate_schedule(in, strategy);
}

void bound_segments(const Graph& g, const TaskGraph& tg, std::vector<Residency>& table) {
  std::vector<int> depth(g.layers.size(), 0);
  for (int l : tg.route) {
    const int y = tg.y_of[l];
    if (l == 0 || !recomputed(table[y])) continue;
    int d = 0;
    for (int in : g.layers[l].inputs) d = std::max(d, depth[in]);
    if (d + 1 > kMaxSegment) {
      table[y] = Residency::Keep;
    } else {
      depth[l] = d + 1;
    }
  }
}

void recompute_unneeded_inputs(const Graph& g, const TaskGraph& tg, const std::vector<char>& need,
                               std::vector<Residency>& table, std::vector<int> from) {
  while (!from.empty()) {
    const int y = from.back();
    from.pop_back();
    for (int in : g.layers[tg.tensors[y].layer].inputs) {
      const int x = tg.y_of[in];
      if (x < 0 || need[x] || !recomputable(g, tg, x) || table[x] != Residency::Keep) continue;
      table[x] = Residency::Recompute;
      from.push_back(x);
    }
  }
}

std::vector<Residency> baseline_table(const std::string& name, const Graph& g, const TaskGraph& tg) {
  const int nt = static_cast<int>(tg.tensors.size());
  std::vector<Residency> table(nt, Residency::Keep);
  const std::vector<char> need = backward_needed(tg);
  std::vector<char> sqrt_keep;
  if (name == "checkpoint-sqrt") sqrt_keep = sqrt_checkpoints(g, tg);
  for (int t = 0; t < nt; ++t) {
    const Tensor& x = tg.tensors[t];
    if (x.kind != TensorKind::Activation) continue;
    const int l = x.layer;
    const LayerType type = g.layers[l].type();
    // Recomputation covers whole segments back to a checkpoint, so it also drops activations no
    // backward task reads (e.g. an add output that only feeds a relu); offload only pays for
    // what backward reads.
    if (!need[t] && (name == "vdnn-all" || name == "vdnn-conv")) continue;
    if (name == "vdnn-all") {
      table[t] = Residency::Offload;
    } else if (name == "vdnn-conv") {
      if (consumed_by(g, l, LayerType::Conv)) table[t] = Residency::Offload;
    } else if (name == "superneurons") {
      // §3.3-3.4: conv outputs are the checkpoints, cached and offloaded when memory runs out;
      // the cheap layers' outputs are recomputed.
      if (l != 0 && type != LayerType::Conv && type != LayerType::SoftmaxLoss) table[t] = Residency::Recompute;
    } else if (name == "checkpoint-sqrt") {
      if (l != 0 && !sqrt_keep[t] && type != LayerType::SoftmaxLoss) table[t] = Residency::Recompute;
    }
  }
  bound_segments(g, tg, table);
  return table;
}

std::unique_ptr<Strategy> make_baseline_strategy(const std::string& name, const Graph& g, const TaskGraph& tg,
                                                 const CostTable& /*costs*/) {
  std::vector<Residency> table = baseline_table(name, g, tg);
  if (name == "keep-all") return make_table_strategy(name, table, PrefetchMode::OnDemand, false, false);
  if (name == "vdnn-all" || name == "vdnn-conv")
    return make_table_strategy(name, table, PrefetchMode::NextLayer, false, false);
  if (name == "superneurons") return make_table_strategy(name, table, PrefetchMode::NextLayer, true, false);
  if (name == "checkpoint-sqrt") return make_table_strategy(name, table, PrefetchMode::OnDemand, false, false);
  UCPLAN_CHECK(false, "unknown baseline strategy " + name);
  return nullptr;
}

}  // namespace ucplan
