#include "tasks.h"

#include <algorithm>

#include <fmt/format.h>

#include "planner/model/errors.h"

namespace ucplan {

const char* tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::Activation:
      return "activation";
    case TensorKind::Gradient:
      return "gradient";
    case TensorKind::Aux:
      return "aux";
    case TensorKind::Weight:
      return "weight";
    case TensorKind::WeightGrad:
      return "weight_gradient";
    case TensorKind::Labels:
      return "labels";
  }
  return "?";
}

const char* task_kind_name(TaskKind k) {
  switch (k) {
    case TaskKind::Forward:
      return "forward";
    case TaskKind::Backward:
      return "backward";
    case TaskKind::BackwardData:
      return "backward_data";
    case TaskKind::BackwardFilter:
      return "backward_filter";
    case TaskKind::Update:
      return "update";
  }
  return "?";
}

StepOp step_op_of(TaskKind k) {
  switch (k) {
    case TaskKind::Forward:
      return StepOp::Forward;
    case TaskKind::Backward:
      return StepOp::Backward;
    case TaskKind::BackwardData:
      return StepOp::BackwardData;
    case TaskKind::BackwardFilter:
      return StepOp::BackwardFilter;
    case TaskKind::Update:
      return StepOp::Update;
  }
  return StepOp::Forward;
}

bool layer_has_task(const GraphLayer& l, TaskKind k) {
  if (l.type() == LayerType::Input) return false;
  const bool split = l.type() == LayerType::Conv || l.type() == LayerType::Fc;
  switch (k) {
    case TaskKind::Forward:
      return true;
    case TaskKind::Backward:
      return !split;
    case TaskKind::BackwardData:
    case TaskKind::BackwardFilter:
      return split;
    case TaskKind::Update:
      return l.has_weights();
  }
  return false;
}

std::int64_t TaskGraph::resident_bytes() const {
  std::int64_t n = 0;
  for (const auto& t : tensors)
    if (t.resident()) n += t.bytes(1);
  return n;
}

std::vector<int> TaskGraph::recompute_reads(int layer) const {
  std::vector<int> reads = tasks[static_cast<std::size_t>(forward_of[static_cast<std::size_t>(layer)])].reads;
  if (aux_of[static_cast<std::size_t>(layer)] >= 0) reads.push_back(aux_of[static_cast<std::size_t>(layer)]);
  return reads;
}

std::vector<int> TaskGraph::touched(const Task& t) const {
  std::vector<int> all;
  all.reserve(t.reads.size() + t.writes.size() + t.accumulates.size());
  all.insert(all.end(), t.reads.begin(), t.reads.end());
  all.insert(all.end(), t.writes.begin(), t.writes.end());
  all.insert(all.end(), t.accumulates.begin(), t.accumulates.end());
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

namespace {

int add_tensor(TaskGraph& tg, TensorKind kind, int layer, std::string name, std::int64_t per_sample,
               std::int64_t fixed) {
  Tensor t;
  t.id = static_cast<int>(tg.tensors.size());
  t.kind = kind;
  t.layer = layer;
  t.name = std::move(name);
  t.bytes_per_sample = per_sample;
  t.fixed_bytes = fixed;
  tg.tensors.push_back(std::move(t));
  return tg.tensors.back().id;
}

}  // namespace

TaskGraph build_tasks(const Graph& g, const std::vector<int>& route) {
  const int n = static_cast<int>(g.layers.size());
  UCPLAN_CHECK(static_cast<int>(route.size()) == n && route[0] == 0, "route must list every layer once, input first");
  std::vector<int> position(n, -1);
  for (int i = 0; i < n; ++i) {
    UCPLAN_CHECK(route[i] >= 0 && route[i] < n && position[route[i]] < 0, "route lists a layer twice");
    position[route[i]] = i;
  }
  for (int l = 0; l < n; ++l)
    for (int in : g.layers[l].inputs) UCPLAN_CHECK(position[in] < position[l], "route is not a topological order");

  TaskGraph tg;
  tg.route = route;
  tg.y_of.assign(n, -1);
  tg.dy_of.assign(n, -1);
  tg.aux_of.assign(n, -1);
  tg.w_of.assign(n, -1);
  tg.dw_of.assign(n, -1);
  tg.forward_of.assign(n, -1);
  // dY_l is needed only if layer l's backward yields something: its weight gradients, or the
  // gradient of an input that needs one (never the network input). No gradient is computed for
  // nothing (e.g. the relu between the input and the first conv).
  std::vector<char> need_dy(n, 0);
  for (int l : route) {
    if (l == 0) continue;
    const GraphLayer& gl = g.layers[l];
    bool useful = gl.has_weights();
    for (int in : gl.inputs) useful = useful || (in != 0 && need_dy[in]);
    need_dy[l] = useful;
  }
  for (int l : route) {
    const GraphLayer& gl = g.layers[l];
    tg.y_of[l] = add_tensor(tg, TensorKind::Activation, l, "Y:" + gl.name(), g.out_bytes_per_sample(l), 0);
    if (l == 0) tg.tensors[tg.y_of[l]].host_input = true;
    if (l != 0 && gl.type() != LayerType::SoftmaxLoss && need_dy[l]) {
      tg.dy_of[l] = add_tensor(tg, TensorKind::Gradient, l, "dY:" + gl.name(), g.gradient_bytes_per_sample(l), 0);
      if (gl.is_sink()) tg.tensors[tg.dy_of[l]].host_input = true;
    }
    if (gl.aux_bytes_per_sample > 0 || gl.aux_bytes_fixed > 0)
      tg.aux_of[l] =
          add_tensor(tg, TensorKind::Aux, l, "aux:" + gl.name(), gl.aux_bytes_per_sample, gl.aux_bytes_fixed);
    if (gl.has_weights()) {
      tg.w_of[l] = add_tensor(tg, TensorKind::Weight, l, "W:" + gl.name(), 0, g.weight_bytes(l));
      tg.dw_of[l] = add_tensor(tg, TensorKind::WeightGrad, l, "dW:" + gl.name(), 0, gl.params() * g.dtype_bytes);
    }
  }
  if (g.has_loss()) {
    tg.labels = add_tensor(tg, TensorKind::Labels, 0, "labels", 4, 0);
    tg.tensors[tg.labels].host_input = true;
  }

  auto new_task = [&](TaskKind kind, int layer) -> Task& {
    Task t;
    t.id = static_cast<int>(tg.tasks.size());
    t.kind = kind;
    t.layer = layer;
    t.conv_kernel = g.layers[layer].type() == LayerType::Conv && kind != TaskKind::Update;
    tg.tasks.push_back(std::move(t));
    return tg.tasks.back();
  };

  // Forward.
  for (int l : route) {
    if (l == 0) continue;
    const GraphLayer& gl = g.layers[l];
    Task& t = new_task(TaskKind::Forward, l);
    tg.forward_of[l] = t.id;
    for (int in : gl.inputs) t.reads.push_back(tg.y_of[in]);
    if (tg.w_of[l] >= 0) t.reads.push_back(tg.w_of[l]);
    if (gl.type() == LayerType::SoftmaxLoss) t.reads.push_back(tg.labels);
    t.writes.push_back(tg.y_of[l]);
    if (tg.aux_of[l] >= 0) t.writes.push_back(tg.aux_of[l]);
  }

  // Backward, in reverse route order. A gradient written by an earlier backward task (another
  // consumer of the same tensor) is accumulated into; the first writer overwrites.
  std::vector<char> dy_written(n, 0);
  auto needs_grad = [&](int input_layer) { return input_layer != 0 && need_dy[input_layer]; };
  auto grad_out = [&](Task& t, int input_layer) {
    if (input_layer == 0 || !need_dy[input_layer]) return;  // nobody needs it
    int d = tg.dy_of[input_layer];
    if (dy_written[input_layer])
      t.accumulates.push_back(d);
    else
      t.writes.push_back(d);
    dy_written[input_layer] = 1;
  };
  for (auto it = route.rbegin(); it != route.rend(); ++it) {
    int l = *it;
    if (l == 0) continue;
    const GraphLayer& gl = g.layers[l];
    // No gradient arrives and no weights: nothing to do (softmax_loss starts the chain itself).
    if (!need_dy[l] && gl.type() != LayerType::SoftmaxLoss) continue;
    const int x = gl.inputs.empty() ? -1 : tg.y_of[gl.inputs[0]];
    const int dy = tg.dy_of[l];
    switch (gl.type()) {
      case LayerType::Conv:
      case LayerType::Fc: {
        Task& f = new_task(TaskKind::BackwardFilter, l);
        f.reads = {x, dy};
        f.writes = {tg.dw_of[l]};
        if (gl.inputs[0] != 0 && need_dy[gl.inputs[0]]) {
          Task& d = new_task(TaskKind::BackwardData, l);
          d.reads = {dy, tg.w_of[l]};
          grad_out(d, gl.inputs[0]);
        }
        break;
      }
      case LayerType::BatchNorm: {
        Task& t = new_task(TaskKind::Backward, l);
        t.reads = {x, tg.aux_of[l], tg.w_of[l], dy};
        t.writes = {tg.dw_of[l]};
        grad_out(t, gl.inputs[0]);
        break;
      }
      case LayerType::LayerNorm: {  // as bn, with statistics per pixel
        Task& t = new_task(TaskKind::Backward, l);
        t.reads = {x, tg.aux_of[l], tg.w_of[l], dy};
        t.writes = {tg.dw_of[l]};
        grad_out(t, gl.inputs[0]);
        break;
      }
      case LayerType::Scale: {  // dgamma = sum dy x; dx = dy gamma
        Task& t = new_task(TaskKind::Backward, l);
        t.reads = {x, dy};
        if (needs_grad(gl.inputs[0])) t.reads.push_back(tg.w_of[l]);
        t.writes = {tg.dw_of[l]};
        grad_out(t, gl.inputs[0]);
        break;
      }
      case LayerType::SoftmaxLoss: {
        Task& t = new_task(TaskKind::Backward, l);
        t.reads = {tg.y_of[l], tg.labels};
        grad_out(t, gl.inputs[0]);
        break;
      }
      case LayerType::Input:
      case LayerType::Relu:
      case LayerType::Pool:
      case LayerType::Lrn:
      case LayerType::Dropout:
      case LayerType::Add:
      case LayerType::Concat:
      case LayerType::Sigmoid:
      case LayerType::HardSigmoid:
      case LayerType::HardSwish:
      case LayerType::Silu:
      case LayerType::Clip:
      case LayerType::Gelu:
      case LayerType::Mul:
      case LayerType::ChannelShuffle:
      case LayerType::Slice: {
        Task& t = new_task(TaskKind::Backward, l);
        switch (gl.type()) {
          case LayerType::Relu:
            t.reads = {tg.y_of[l], dy};
            break;
          case LayerType::Pool:
            if (gl.spec.pool.mode == PoolMode::Max)
              t.reads = {x, tg.y_of[l], dy};
            else
              t.reads = {dy};
            break;
          case LayerType::Lrn:
            t.reads = {x, tg.y_of[l], dy};
            break;
          case LayerType::Dropout:
            t.reads = {tg.aux_of[l], dy};
            break;
          // Point-wise activations read whichever of x and y their derivative is a function of
          // (executor/cpu/activation.h): sigmoid's is y (1 - y); hardsigmoid's and clip's are
          // nonzero exactly where y is strictly inside the clamp; the others need x.
          case LayerType::Sigmoid:
          case LayerType::HardSigmoid:
          case LayerType::Clip:
            t.reads = {tg.y_of[l], dy};
            break;
          case LayerType::HardSwish:
          case LayerType::Silu:
          case LayerType::Gelu:
            t.reads = {x, dy};
            break;
          case LayerType::Mul:  // dx = dy s needs s; ds = sum over the pixels of dy x needs x
            t.reads = {dy};
            if (needs_grad(gl.inputs[0])) t.reads.push_back(tg.y_of[gl.inputs[1]]);
            if (needs_grad(gl.inputs[1])) t.reads.push_back(tg.y_of[gl.inputs[0]]);
            break;
          case LayerType::Add:
          case LayerType::Concat:
          case LayerType::ChannelShuffle:
          case LayerType::Slice:
            t.reads = {dy};
            break;
          case LayerType::Input:
          case LayerType::Conv:
          case LayerType::BatchNorm:
          case LayerType::Fc:
          case LayerType::SoftmaxLoss:
          case LayerType::Scale:
          case LayerType::LayerNorm:
            UCPLAN_CHECK(false, fmt::format("no backward for a {} layer", layer_type_name(gl.type())));
        }
        for (int in : gl.inputs) grad_out(t, in);
        break;
      }
    }
    // A backward task that produces nothing (e.g. relu right after the input) is dropped.
    Task& last = tg.tasks.back();
    if (last.kind != TaskKind::BackwardFilter && last.writes.empty() && last.accumulates.empty()) tg.tasks.pop_back();
  }

  // Updates (once per iteration, after all sub-batch rounds).
  for (int l : route) {
    if (tg.w_of[l] < 0) continue;
    Task& t = new_task(TaskKind::Update, l);
    t.reads = {tg.dw_of[l]};
    t.writes = {tg.w_of[l]};
    t.round_task = false;
  }
  return tg;
}

}  // namespace ucplan
