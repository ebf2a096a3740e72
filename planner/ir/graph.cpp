#include "graph.h"

#include <algorithm>
#include <initializer_list>
#include <map>
#include <queue>
#include <utility>
#include <unordered_map>

#include <fmt/format.h>

#include "planner/model/errors.h"

namespace ucplan {

std::string shape_text(const Shape& s) { return fmt::format("{}x{}x{}", s.c, s.h, s.w); }

int Graph::index_of(const std::string& name) const {
  if (by_name.size() == layers.size()) {  // 10^5 steps looking up 10^5 layers one by one took minutes
    const auto it = by_name.find(name);
    return it == by_name.end() ? -1 : it->second;
  }
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (layers[i].name() == name) return static_cast<int>(i);
  return -1;
}

std::int64_t Graph::total_params() const {
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.params();
  return n;
}

bool Graph::has_loss() const {
  for (const auto& l : layers)
    if (l.type() == LayerType::SoftmaxLoss) return true;
  return false;
}

bool Graph::has_batch_norm() const {
  for (const auto& l : layers)
    if (l.type() == LayerType::BatchNorm) return true;
  return false;
}

Storage Graph::activation_storage(int layer) const {
  return layers[layer].type() == LayerType::SoftmaxLoss ? Storage::F32 : storage_of(precision);
}

Storage Graph::gradient_storage(int) const { return storage_of(precision); }

std::int64_t Graph::out_bytes_per_sample(int layer) const {
  return layers[layer].out.elems() * storage_bytes(activation_storage(layer));
}

std::int64_t Graph::gradient_bytes_per_sample(int layer) const {
  return layers[layer].out.elems() * storage_bytes(gradient_storage(layer));
}

std::int64_t Graph::weight_copy_bytes(int layer) const {
  const LayerType t = layers[layer].type();
  if ((t != LayerType::Conv && t != LayerType::Fc) || !low_precision_storage(precision)) return 0;
  return layers[layer].params() * storage_bytes(storage_of(precision));
}

std::int64_t Graph::weight_bytes(int layer) const {
  return layers[layer].params() * dtype_bytes + weight_copy_bytes(layer);
}

std::int64_t Graph::conv_count() const {
  std::int64_t n = 0;
  for (const auto& l : layers) n += l.type() == LayerType::Conv;
  return n;
}

namespace {

// FLOPs per element of a point-wise activation, forward and backward (as counted by the
// operations of executor/cpu/activation.h: an exp, erf or tanh counts 4).
std::pair<double, double> pointwise_flops(LayerType t) {
  switch (t) {
    case LayerType::Sigmoid:
      return {6, 3};
    case LayerType::HardSigmoid:
      return {4, 3};
    case LayerType::HardSwish:
      return {5, 5};
    case LayerType::Silu:
      return {8, 10};
    case LayerType::Clip:
      return {2, 3};
    case LayerType::Gelu:
      return {8, 12};
    case LayerType::Relu:
      return {1, 1};
    // Not point-wise: their FLOPs are counted by shape inference.
    case LayerType::Input:
    case LayerType::Conv:
    case LayerType::Pool:
    case LayerType::BatchNorm:
    case LayerType::Lrn:
    case LayerType::Fc:
    case LayerType::Dropout:
    case LayerType::Add:
    case LayerType::Concat:
    case LayerType::SoftmaxLoss:
    case LayerType::Mul:
    case LayerType::Scale:
    case LayerType::LayerNorm:
    case LayerType::ChannelShuffle:
    case LayerType::Slice:
      break;
  }
  return {1, 1};
}

class ShapeInference {
 public:
  ShapeInference(Graph& g) : g_(g) {}

  std::string where(int gi, const std::string& field) const {
    const auto& l = g_.layers[gi];
    std::string base = fmt::format("layers[{}] ({})", l.file_index, l.name());
    return field.empty() ? base : base + "." + field;
  }
  [[noreturn]] void fail(int gi, const std::string& field, const std::string& what) const {
    throw UserError(g_.file, where(gi, field), what);
  }

  void expect_inputs(int gi, std::size_t n) const {
    const auto& l = g_.layers[gi];
    if (l.inputs.size() != n)
      fail(gi, "inputs",
           fmt::format("a {} layer takes {} input{}, got {}", layer_type_name(l.type()), n, n == 1 ? "" : "s",
                       l.inputs.size()));
  }

  // Output size of a sliding window along one axis; 0 when the window does not fit.
  static std::int64_t window_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d,
                                 bool ceil_mode) {
    std::int64_t span = d * (k - 1) + 1;
    std::int64_t num = in + 2 * p - span;
    if (num < 0) return 0;
    std::int64_t out = ceil_mode ? (num + s - 1) / s + 1 : num / s + 1;
    // As in Caffe and PyTorch: the last window must start inside the input or its left padding.
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    return out;
  }

  // The bounds of graph.h (kMaxTensorElems and the rest), checked once a layer's shape is known and
  // before anything multiplies its sizes by a batch. Its inputs were checked as their own layers'
  // outputs, so the products inferring its shape took stay exact.
  void check_sizes(int gi) {
    const auto& l = g_.layers[gi];
    const std::int64_t values = product({l.out.c, l.out.h, l.out.w});
    const std::string where = gi == 0 ? "input.shape" : this->where(gi, "");
    auto refuse = [&](const std::string& what) { throw UserError(g_.file, where, what); };
    if (values > kMaxTensorElems)
      refuse(fmt::format("{:.4g} values per sample ({}): more than ucplan plans for in one tensor (2^36)",
                         static_cast<double>(l.out.c) * static_cast<double>(l.out.h) * static_cast<double>(l.out.w),
                         shape_text(l.out)));
    if (l.weight_elems > kMaxTensorElems)
      refuse("its weights hold more than 2^36 values: more than ucplan plans for in one layer");
    const bool macs = l.type() == LayerType::Conv || l.type() == LayerType::Fc;  // backward data: 2 FLOPs a MAC
    if (macs && l.backward_data_flops / 2 > kMaxLayerMacs)
      refuse(fmt::format("{:.4g} multiply-adds per sample: more than ucplan plans for in one layer (2^40)",
                         l.backward_data_flops / 2));
    network_values_ += values + l.params();
    if (network_values_ > kMaxNetworkElems)
      refuse(
          fmt::format("the network up to here holds {:.4g} values and parameters per sample: more than ucplan "
                      "plans for (2^40)",
                      static_cast<double>(network_values_)));
  }

  void infer(int gi) {
    infer_shape(gi);
    check_sizes(gi);
  }

 private:
  // A product of sizes, or just above kMaxTensorElems where it is larger (check_sizes refuses it), so
  // that sums of a few stay exact.
  static std::int64_t product(std::initializer_list<std::int64_t> factors) {
    std::int64_t p = 1;
    for (std::int64_t f : factors)
      if (__builtin_mul_overflow(p, f, &p) || p > kMaxTensorElems) return kMaxTensorElems + 1;
    return p;
  }

  void infer_shape(int gi) {
    auto& l = g_.layers[gi];
    for (int in : l.inputs) l.in_shapes.push_back(g_.layers[in].out);
    const Layer& s = l.spec;
    switch (l.type()) {
      case LayerType::Input:
        break;
      case LayerType::Conv: {
        expect_inputs(gi, 1);
        const Shape x = l.in_shapes[0];
        const auto& c = s.conv;
        if (x.c % c.groups != 0)
          fail(gi, "groups", fmt::format("input channels {} are not divisible by groups {}", x.c, c.groups));
        if (c.out_channels % c.groups != 0)
          fail(gi, "groups", fmt::format("out_channels {} are not divisible by groups {}", c.out_channels, c.groups));
        std::int64_t ho = window_out(x.h, c.kernel[0], c.stride[0], c.pad[0], c.dilation[0], false);
        std::int64_t wo = window_out(x.w, c.kernel[1], c.stride[1], c.pad[1], c.dilation[1], false);
        if (ho < 1 || wo < 1)
          fail(gi, "kernel",
               fmt::format("the kernel {}x{} (dilation {}x{}, pad {}x{}) does not fit the input {}", c.kernel[0],
                           c.kernel[1], c.dilation[0], c.dilation[1], c.pad[0], c.pad[1], shape_text(x)));
        l.out = {c.out_channels, ho, wo};
        std::int64_t cin_g = x.c / c.groups;
        l.weight_elems = product({c.out_channels, cin_g, c.kernel[0], c.kernel[1]});
        l.bias_elems = c.bias ? c.out_channels : 0;
        double macs = static_cast<double>(c.out_channels) * ho * wo * cin_g * c.kernel[0] * c.kernel[1];
        const double bias_flops = c.bias ? static_cast<double>(c.out_channels) * ho * wo : 0.0;  // before the check
        l.forward_flops = 2 * macs + bias_flops;
        l.backward_data_flops = 2 * macs;
        l.backward_filter_flops = 2 * macs + bias_flops;
        break;
      }
      case LayerType::Pool: {
        expect_inputs(gi, 1);
        const Shape x = l.in_shapes[0];
        auto& p = l.spec.pool;
        if (p.global) {
          p.kernel = {x.h, x.w};
          p.stride = {1, 1};
          p.pad = {0, 0};
        }
        for (int a = 0; a < 2; ++a)
          if (p.pad[a] * 2 > p.kernel[a])
            fail(gi, "pad", fmt::format("pad {} is more than half the kernel {}", p.pad[a], p.kernel[a]));
        std::int64_t ho = window_out(x.h, p.kernel[0], p.stride[0], p.pad[0], 1, p.ceil_mode);
        std::int64_t wo = window_out(x.w, p.kernel[1], p.stride[1], p.pad[1], 1, p.ceil_mode);
        if (ho < 1 || wo < 1)
          fail(gi, "kernel",
               fmt::format("the window {}x{} does not fit the input {}", p.kernel[0], p.kernel[1], shape_text(x)));
        l.out = {x.c, ho, wo};
        l.forward_flops = static_cast<double>(l.out.elems()) * p.kernel[0] * p.kernel[1];
        l.backward_data_flops = l.forward_flops;
        break;
      }
      case LayerType::Relu:
        expect_inputs(gi, 1);
        l.out = l.in_shapes[0];
        l.forward_flops = static_cast<double>(l.out.elems());
        l.backward_data_flops = l.forward_flops;
        break;
      case LayerType::BatchNorm:
        expect_inputs(gi, 1);
        l.out = l.in_shapes[0];
        l.weight_elems = l.out.c;
        l.bias_elems = l.out.c;
        l.aux_bytes_fixed = 2 * l.out.c * g_.dtype_bytes;  // saved mean and inverse std
        l.forward_flops = 7.0 * static_cast<double>(l.out.elems());
        l.backward_data_flops = 9.0 * static_cast<double>(l.out.elems());
        break;
      case LayerType::Lrn:
        expect_inputs(gi, 1);
        l.out = l.in_shapes[0];
        l.forward_flops = static_cast<double>(l.out.elems()) * (2.0 * static_cast<double>(s.lrn.size) + 5.0);
        l.backward_data_flops = static_cast<double>(l.out.elems()) * (4.0 * static_cast<double>(s.lrn.size) + 8.0);
        break;
      case LayerType::Fc: {
        expect_inputs(gi, 1);
        std::int64_t in = l.in_shapes[0].elems();
        l.out = {s.fc.out_features, 1, 1};
        l.weight_elems = product({in, s.fc.out_features});
        l.bias_elems = s.fc.bias ? s.fc.out_features : 0;
        double macs = static_cast<double>(in) * static_cast<double>(s.fc.out_features);
        l.forward_flops = 2 * macs + static_cast<double>(l.bias_elems);
        l.backward_data_flops = 2 * macs;
        l.backward_filter_flops = 2 * macs + static_cast<double>(l.bias_elems);
        break;
      }
      case LayerType::Dropout:
        expect_inputs(gi, 1);
        l.out = l.in_shapes[0];
        l.aux_bytes_per_sample = l.out.elems();  // one byte of mask per element
        l.forward_flops = 2.0 * static_cast<double>(l.out.elems());
        l.backward_data_flops = static_cast<double>(l.out.elems());
        break;
      case LayerType::Add: {
        if (l.inputs.size() < 2)
          fail(gi, "inputs", fmt::format("an add layer takes at least 2 inputs, got {}", l.inputs.size()));
        for (std::size_t i = 1; i < l.in_shapes.size(); ++i)
          if (!(l.in_shapes[i] == l.in_shapes[0]))
            fail(gi, fmt::format("inputs[{}]", i),
                 fmt::format("shape {} of \"{}\" differs from shape {} of \"{}\"", shape_text(l.in_shapes[i]),
                             s.inputs[i], shape_text(l.in_shapes[0]), s.inputs[0]));
        l.out = l.in_shapes[0];
        l.forward_flops = static_cast<double>(l.out.elems()) * static_cast<double>(l.inputs.size() - 1);
        l.backward_data_flops = static_cast<double>(l.out.elems()) * static_cast<double>(l.inputs.size());
        break;
      }
      case LayerType::Concat: {
        std::int64_t c = 0;
        for (std::size_t i = 0; i < l.in_shapes.size(); ++i) {
          if (l.in_shapes[i].h != l.in_shapes[0].h || l.in_shapes[i].w != l.in_shapes[0].w)
            fail(gi, fmt::format("inputs[{}]", i),
                 fmt::format("spatial size {}x{} of \"{}\" differs from {}x{} of \"{}\"", l.in_shapes[i].h,
                             l.in_shapes[i].w, s.inputs[i], l.in_shapes[0].h, l.in_shapes[0].w, s.inputs[0]));
          c += l.in_shapes[i].c;
        }
        l.out = {c, l.in_shapes[0].h, l.in_shapes[0].w};
        l.forward_flops = static_cast<double>(l.out.elems());
        l.backward_data_flops = static_cast<double>(l.out.elems());
        break;
      }
      case LayerType::Sigmoid:
      case LayerType::HardSigmoid:
      case LayerType::HardSwish:
      case LayerType::Silu:
      case LayerType::Clip:
      case LayerType::Gelu: {
        expect_inputs(gi, 1);
        l.out = l.in_shapes[0];
        const auto [fwd, bwd] = pointwise_flops(l.type());
        l.forward_flops = fwd * static_cast<double>(l.out.elems());
        l.backward_data_flops = bwd * static_cast<double>(l.out.elems());
        break;
      }
      case LayerType::Mul: {
        // x * s with s of x's shape, or one value per channel (squeeze-and-excitation).
        expect_inputs(gi, 2);
        const Shape x = l.in_shapes[0], m = l.in_shapes[1];
        if (!(m == x) && !(m == Shape{x.c, 1, 1}))
          fail(gi, "inputs[1]",
               fmt::format("shape {} of \"{}\" is neither the shape {} of \"{}\" nor one value per channel ({}x1x1)",
                           shape_text(m), s.inputs[1], shape_text(x), s.inputs[0], x.c));
        l.out = x;
        l.forward_flops = static_cast<double>(x.elems());
        l.backward_data_flops = 3.0 * static_cast<double>(x.elems());  // dx = dy s; ds = sum dy x
        break;
      }
      case LayerType::Scale:
        expect_inputs(gi, 1);
        l.out = l.in_shapes[0];
        l.weight_elems = l.out.c;  // one learned factor per channel (ConvNeXt's layer scale)
        l.forward_flops = static_cast<double>(l.out.elems());
        l.backward_data_flops = 3.0 * static_cast<double>(l.out.elems());
        break;
      case LayerType::LayerNorm:
        expect_inputs(gi, 1);
        l.out = l.in_shapes[0];
        l.weight_elems = l.out.c;
        l.bias_elems = l.out.c;
        l.aux_bytes_per_sample = 2 * l.out.h * l.out.w * g_.dtype_bytes;  // mean and inverse std per pixel
        l.forward_flops = 7.0 * static_cast<double>(l.out.elems());
        l.backward_data_flops = 9.0 * static_cast<double>(l.out.elems());
        break;
      case LayerType::ChannelShuffle: {
        expect_inputs(gi, 1);
        const Shape x = l.in_shapes[0];
        if (x.c % s.shuffle.groups != 0)
          fail(gi, "groups", fmt::format("input channels {} are not divisible by groups {}", x.c, s.shuffle.groups));
        l.out = x;
        l.forward_flops = static_cast<double>(x.elems());
        l.backward_data_flops = l.forward_flops;
        break;
      }
      case LayerType::Slice: {
        expect_inputs(gi, 1);
        const Shape x = l.in_shapes[0];
        if (s.slice.end > x.c)
          fail(gi, "end", fmt::format("end {} is beyond the input's {} channels", s.slice.end, x.c));
        l.out = {s.slice.end - s.slice.begin, x.h, x.w};
        l.forward_flops = static_cast<double>(l.out.elems());
        l.backward_data_flops = static_cast<double>(x.elems());  // the rest of dx is zero
        break;
      }
      case LayerType::SoftmaxLoss: {
        expect_inputs(gi, 1);
        std::int64_t k = l.in_shapes[0].elems();
        if (k != g_.net.labels)
          fail(gi, "inputs",
               fmt::format("the loss input \"{}\" has {} values per sample but the network has {} labels", s.inputs[0],
                           k, g_.net.labels));
        l.out = {k, 1, 1};
        l.forward_flops = 4.0 * static_cast<double>(k);
        l.backward_data_flops = 2.0 * static_cast<double>(k);
        break;
      }
    }
  }

  Graph& g_;
  std::int64_t network_values_ = 0;
};

}  // namespace

Graph build_graph(const Network& net, const std::string& file, Precision precision) {
  Graph g;
  g.file = file;
  g.precision = precision;
  g.net = net;
  g.dtype_bytes = dtype_bytes(net.dtype);
  GraphLayer input;
  input.spec.name = net.input_name;
  input.spec.type = LayerType::Input;
  input.out = {net.input_shape[0], net.input_shape[1], net.input_shape[2]};
  g.layers.push_back(std::move(input));

  std::unordered_map<std::string, int> index;
  index[net.input_name] = 0;
  for (std::size_t i = 0; i < net.layers.size(); ++i) {
    const Layer& l = net.layers[i];
    std::string where = fmt::format("layers[{}] ({}).name", i, l.name);
    if (l.name == net.input_name) throw UserError(file, where, "a layer cannot have the input's name");
    if (auto [it, added] = index.emplace(l.name, static_cast<int>(i) + 1); !added)
      throw UserError(file, where, fmt::format("the name is already used by layers[{}]", it->second - 1));
    GraphLayer gl;
    gl.spec = l;
    gl.file_index = static_cast<int>(i);
    g.layers.push_back(std::move(gl));
  }
  const int n = static_cast<int>(g.layers.size());
  for (int gi = 1; gi < n; ++gi) {
    auto& gl = g.layers[gi];
    for (std::size_t k = 0; k < gl.spec.inputs.size(); ++k) {
      const std::string& name = gl.spec.inputs[k];
      std::string where = fmt::format("layers[{}] ({}).inputs[{}]", gl.file_index, gl.name(), k);
      auto it = index.find(name);
      if (it == index.end()) throw UserError(file, where, fmt::format("unknown input \"{}\"", name));
      if (it->second == gi) throw UserError(file, where, "a layer cannot take its own output as input");
      if (std::find(gl.inputs.begin(), gl.inputs.end(), it->second) != gl.inputs.end())
        throw UserError(file, where, fmt::format("input \"{}\" is listed twice", name));
      if (it->second > 0 && g.layers[it->second].type() == LayerType::SoftmaxLoss)
        throw UserError(
            file, where,
            fmt::format("\"{}\" is a softmax_loss layer: a loss ends the network and cannot be an input", name));
      gl.inputs.push_back(it->second);
    }
  }
  for (int gi = 1; gi < n; ++gi)
    for (int in : g.layers[gi].inputs) g.layers[in].consumers.push_back(gi);

  // Kahn's algorithm, taking ready layers in file order, so the order is deterministic (a heap:
  // sorting the ready list at every step took 33 s for 10^5 layers reading one input).
  std::vector<int> pending(n);
  for (int gi = 0; gi < n; ++gi) pending[gi] = static_cast<int>(g.layers[gi].inputs.size());
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  ready.push(0);
  std::vector<char> done(n, 0);
  while (!ready.empty()) {
    const int gi = ready.top();
    ready.pop();
    done[gi] = 1;
    g.topo_order.push_back(gi);
    for (int c : g.layers[gi].consumers)
      if (--pending[c] == 0) ready.push(c);
  }
  if (static_cast<int>(g.topo_order.size()) != n) {
    for (int gi = 1; gi < n; ++gi)
      if (!done[gi])
        throw UserError(file, fmt::format("layers[{}] ({}).inputs", g.layers[gi].file_index, g.layers[gi].name()),
                        "the layer is part of a cycle (or depends on one)");
  }
  ShapeInference inference(g);
  for (int gi : g.topo_order) inference.infer(gi);
  g.by_name = std::move(index);
  return g;
}

std::string layer_signature(const Graph& g, int layer) {
  const GraphLayer& l = g.layers[layer];
  std::string in;
  for (std::size_t i = 0; i < l.in_shapes.size(); ++i) in += (i ? "+" : "") + shape_text(l.in_shapes[i]);
  const Layer& s = l.spec;
  std::string params;
  switch (l.type()) {
    case LayerType::Conv:
      params = fmt::format("k{} r{}x{} s{}x{} p{}x{} d{}x{} g{}{}", s.conv.out_channels, s.conv.kernel[0],
                           s.conv.kernel[1], s.conv.stride[0], s.conv.stride[1], s.conv.pad[0], s.conv.pad[1],
                           s.conv.dilation[0], s.conv.dilation[1], s.conv.groups, s.conv.bias ? " bias" : "");
      break;
    case LayerType::Pool:
      params = fmt::format("{} r{}x{} s{}x{} p{}x{}{}{}", s.pool.mode == PoolMode::Max ? "max" : "avg",
                           s.pool.kernel[0], s.pool.kernel[1], s.pool.stride[0], s.pool.stride[1], s.pool.pad[0],
                           s.pool.pad[1], s.pool.ceil_mode ? " ceil" : "", s.pool.count_include_pad ? "" : " excl");
      break;
    case LayerType::BatchNorm:
      params = fmt::format("eps{}", s.bn.eps);
      break;
    case LayerType::Lrn:
      params = fmt::format("n{} a{} b{} k{}", s.lrn.size, s.lrn.alpha, s.lrn.beta, s.lrn.k);
      break;
    case LayerType::Fc:
      params = fmt::format("o{}{}", s.fc.out_features, s.fc.bias ? " bias" : "");
      break;
    case LayerType::Dropout:
      params = fmt::format("p{}", s.dropout.ratio);
      break;
    case LayerType::HardSigmoid:
      params = fmt::format("a{} b{}", s.hardsigmoid.alpha, s.hardsigmoid.beta);
      break;
    case LayerType::Clip:
      params = fmt::format("min{} max{}", s.clip.min, s.clip.max);
      break;
    case LayerType::Gelu:
      params = s.gelu.tanh ? "tanh" : "";
      break;
    case LayerType::LayerNorm:
      params = fmt::format("eps{}", s.ln.eps);
      break;
    case LayerType::ChannelShuffle:
      params = fmt::format("g{}", s.shuffle.groups);
      break;
    case LayerType::Slice:
      params = fmt::format("c{}:{}", s.slice.begin, s.slice.end);
      break;
    case LayerType::Input:
    case LayerType::Relu:
    case LayerType::Add:
    case LayerType::Concat:
    case LayerType::SoftmaxLoss:
    case LayerType::Sigmoid:
    case LayerType::HardSwish:
    case LayerType::Silu:
    case LayerType::Mul:
    case LayerType::Scale:
      break;
  }
  std::string sig = fmt::format("{} {}", layer_type_name(l.type()), in);
  if (!params.empty()) sig += " " + params;
  return sig + " " + signature_dtype(g.precision);
}

}  // namespace ucplan
