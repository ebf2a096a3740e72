#include "reference.h"

#include <algorithm>
#include <cmath>

#include "cpu/kernels.h"
#include "cpu_ops.h"
#include "planner/model/errors.h"
#include "replay.h"

namespace ucplan {

std::int64_t reference_bytes_at_least(const Graph& g, std::int64_t sub_batch) {
  std::int64_t bytes = 0;
  for (const GraphLayer& l : g.layers)
    bytes += l.out.elems() * sub_batch * static_cast<std::int64_t>(sizeof(float)) + l.aux_bytes_per_sample * sub_batch +
             l.aux_bytes_fixed;
  return bytes;
}

ReferenceResult reference_gradients(const Graph& g, std::int64_t batch, std::int64_t sub_batch, std::uint64_t seed,
                                    const std::map<std::string, std::string>& conv_algo,
                                    const std::map<std::string, std::vector<float>>& weights, double loss_scale,
                                    double perturb, ReferenceScratch* scratch) {
  // Every convolution's output multiplied by 1 + perturb * u, u uniform in [-1, 1) from a fixed
  // sequence: what FP32 sums in another order do to it, at about that size.
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto jitter = [&](float* v, std::int64_t count) {
    if (perturb == 0) return;
    for (std::int64_t i = 0; i < count; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const double u = static_cast<double>(state >> 11) * 0x1p-52 - 1.0;
      v[i] = static_cast<float>(v[i] * (1.0 + perturb * u));
    }
  };
  auto algo_for = [&](const GraphLayer& l, const char* op) -> std::string {
    if (l.type() != LayerType::Conv) return "default";
    auto it = conv_algo.find(l.name() + ":" + op);
    return it == conv_algo.end() ? "direct" : it->second;
  };
  UCPLAN_CHECK(sub_batch >= 1 && batch % sub_batch == 0, "rounds of equal size");
  const int n = static_cast<int>(g.layers.size());
  ReferenceResult res;
  // The precision emulated as the backend does, on float vectors holding storage-type values.
  const CpuPrecision precision = cpu_precision(g.precision, false);
  auto round_all = [&](std::vector<float>& v) {
    if (precision.half)
      for (auto& e : v) e = cpu::round_to(precision.type, e);
  };
  auto run_op = [&](const GraphLayer& gl, StepOp op, const std::string& algo, const LayerArgs& a) {
    if (!precision.active()) return run_layer_op_cpu(gl, op, algo, a);
    run_emulated(gl, op, a, precision, [&](const LayerArgs& b) { run_layer_op_cpu(gl, op, algo, b); });
  };
  std::vector<std::vector<float>> w(n), dw(n);
  for (int l = 0; l < n; ++l) {
    if (!g.layers[l].has_weights()) continue;
    w[l].resize(static_cast<std::size_t>(g.layers[l].params()));
    dw[l].assign(w[l].size(), 0.0f);
    auto given = weights.find("W:" + g.layers[l].name());
    if (given == weights.end())
      init_weights(g.layers[l], seed, w[l].data());
    else {
      UCPLAN_CHECK(given->second.size() == w[l].size(), "given weights have the layer's size");
      w[l] = given->second;
    }
  }
  const std::int64_t in_per = g.layers[0].out.elems();
  std::vector<float> data(static_cast<std::size_t>(in_per * batch));
  init_input(in_per * batch, seed, data.data());
  round_all(data);
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch));
  init_labels(batch, std::max<std::int64_t>(1, g.net.labels), seed, labels.data());
  const std::vector<int>& order = g.topo_order;
  ReferenceScratch own;
  ReferenceScratch& mem = scratch ? *scratch : own;
  // A vector of `count` zeros, in the memory it already holds where it can.
  auto zeros = [](auto& v, std::int64_t count) {
    v.resize(static_cast<std::size_t>(count));
    std::fill(v.begin(), v.end(), 0);
  };
  // The same for a value or gradient, in the smallest spare buffer that holds it (ReferenceScratch).
  auto take = [&](std::vector<float>& v, std::int64_t count) {
    const auto want = static_cast<std::size_t>(count);
    if (v.capacity() < want) {
      auto best = mem.spare.end();
      for (auto it = mem.spare.begin(); it != mem.spare.end(); ++it)
        if (it->capacity() >= want && (best == mem.spare.end() || it->capacity() < best->capacity())) best = it;
      if (best != mem.spare.end()) {
        std::swap(v, *best);
        if (best->capacity() == 0) mem.spare.erase(best);
      }
    }
    zeros(v, count);
  };
  auto release = [&](std::vector<float>& v) {
    if (v.capacity() > 0) mem.spare.push_back(std::move(v));
    v = std::vector<float>();
  };
  // One workspace for every convolution, grown to the largest: a fresh one per layer (an im2col
  // of ResNet-50 b64's first layer is 472 MB) spent much of the reference's time in page faults.
  std::vector<float>& ws = mem.workspace;
  auto workspace = [&](LayerArgs& a, std::int64_t bytes) {
    const auto floats = static_cast<std::size_t>(bytes / 4 + 1);
    if (ws.size() < floats) ws.resize(floats);
    a.workspace = ws.data();
    a.workspace_bytes = static_cast<std::int64_t>(ws.size() * sizeof(float));
  };
  double loss = 0;
  for (std::int64_t first = 0; first < batch; first += sub_batch) {
    const std::int64_t b = sub_batch;
    auto& y = mem.y;
    auto& dy = mem.dy;
    auto& aux = mem.aux;
    y.resize(static_cast<std::size_t>(n));
    dy.resize(static_cast<std::size_t>(n));
    aux.resize(static_cast<std::size_t>(n));
    std::vector<char> has_dy(static_cast<std::size_t>(n), 0);  // a gradient flows back into the layer's output
    y[0].assign(data.begin() + first * in_per, data.begin() + (first + b) * in_per);
    for (int l : order) {
      if (l == 0) continue;
      const GraphLayer& gl = g.layers[l];
      take(y[l], gl.out.elems() * b);
      zeros(aux[l], gl.aux_bytes_per_sample * b + gl.aux_bytes_fixed + 4);
      LayerArgs a;
      for (int in : gl.inputs) a.x.push_back(y[in].data());
      a.y = y[l].data();
      a.w = w[l].empty() ? nullptr : w[l].data();
      a.aux = aux[l].data();
      a.labels = labels.data() + first;
      a.n = b;
      a.first_sample = first;
      a.total_batch = batch;
      a.seed = seed;
      a.loss_scale = loss_scale;
      if (gl.type() == LayerType::Conv) {
        const std::string algo = algo_for(gl, "forward");
        workspace(a, layer_op_workspace_cpu(gl, StepOp::Forward, algo, b));
        run_op(gl, StepOp::Forward, algo, a);
        jitter(y[l].data(), static_cast<std::int64_t>(y[l].size()));
      } else {
        run_op(gl, StepOp::Forward, "default", a);
      }
      if (gl.type() == LayerType::SoftmaxLoss) {
        for (std::int64_t i = 0; i < b; ++i) {
          const float p = y[l][static_cast<std::size_t>(i * gl.out.c + labels[first + i])];
          loss -= std::log(std::max(p, 1e-30f));
        }
      }
    }
    // Backward in reverse topological order; a sink without loss gets the same external
    // gradient the plan's host input carries.
    for (int l = 1; l < n; ++l)
      if (g.layers[l].is_sink() && g.layers[l].type() != LayerType::SoftmaxLoss) {
        const std::int64_t per = g.layers[l].out.elems();
        std::vector<float> all(static_cast<std::size_t>(per * batch));
        init_input(per * batch, seed ^ (0x9e37u + static_cast<std::uint64_t>(l)), all.data());
        round_all(all);
        take(dy[l], per * b);
        std::copy(all.begin() + first * per, all.begin() + (first + b) * per, dy[l].begin());
        has_dy[l] = 1;
      }
    std::vector<char> written(n, 0);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const int l = *it;
      if (l == 0) continue;
      const GraphLayer& gl = g.layers[l];
      if (gl.type() != LayerType::SoftmaxLoss && !has_dy[l]) {  // nothing flows back
        release(y[l]);
        continue;
      }
      LayerArgs a;
      for (int in : gl.inputs) {
        a.x.push_back(y[in].data());
        if (in == 0) {
          a.dx.push_back(nullptr);
          a.dx_accumulate.push_back(0);
        } else {
          if (!has_dy[in]) {
            take(dy[in], g.layers[in].out.elems() * b);
            has_dy[in] = 1;
          }
          a.dx.push_back(dy[in].data());
          a.dx_accumulate.push_back(written[in]);
        }
      }
      a.y = y[l].data();
      a.w = w[l].empty() ? nullptr : w[l].data();
      a.dw = dw[l].empty() ? nullptr : dw[l].data();
      a.aux = aux[l].data();
      a.dy = has_dy[l] ? dy[l].data() : nullptr;
      a.labels = labels.data() + first;
      a.n = b;
      a.first_sample = first;
      a.total_batch = batch;
      a.seed = seed;
      a.loss_scale = loss_scale;
      if (gl.type() == LayerType::Conv || gl.type() == LayerType::Fc) {
        const std::string filter = algo_for(gl, "backward_filter"), data_algo = algo_for(gl, "backward_data");
        workspace(a, std::max(layer_op_workspace_cpu(gl, StepOp::BackwardFilter, filter, b),
                              layer_op_workspace_cpu(gl, StepOp::BackwardData, data_algo, b)));
        run_op(gl, StepOp::BackwardFilter, filter, a);
        if (gl.inputs[0] != 0) run_op(gl, StepOp::BackwardData, data_algo, a);
        if (gl.type() == LayerType::Conv && gl.inputs[0] != 0)
          jitter(dy[gl.inputs[0]].data(), static_cast<std::int64_t>(dy[gl.inputs[0]].size()));
      } else {
        bool any = false;
        for (auto* d : a.dx) any = any || d != nullptr;
        if (any || gl.has_weights()) {
          std::vector<float> discarded;  // bn right after the input: its weight gradients still need the backward
          if (gl.type() == LayerType::BatchNorm && a.dx[0] == nullptr) {
            take(discarded, gl.out.elems() * b);
            a.dx[0] = discarded.data();
          }
          run_op(gl, StepOp::Backward, "default", a);
          release(discarded);
        }
      }
      for (int in : gl.inputs)
        if (in != 0) written[in] = 1;
      // Every layer that reads this one's value or gradient has run its backward.
      release(y[l]);
      release(dy[l]);
    }
  }
  for (int l = 0; l < n; ++l)
    if (!dw[l].empty()) res.weight_gradients["dW:" + g.layers[l].name()] = std::move(dw[l]);
  res.loss = loss / static_cast<double>(batch);
  return res;
}

}  // namespace ucplan
