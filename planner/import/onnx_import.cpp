// ONNX -> ucplan Network. One pass over the graph's nodes in file order (ONNX requires a
// topological order), tracking for every activation tensor the ucplan layer that produces it and
// its per-sample shape. Weights are never read: a weight's shape comes from its dims (an
// initializer keeps its dims when its data is stripped or external), from a graph input's type,
// from the op's attributes or from the declared shape of the op's output.
#include "onnx_import.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/stubs/logging.h>
#include <onnx/onnx_pb.h>

#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/ir/graph.h"

namespace ucplan {
namespace {

using Dims = std::vector<std::int64_t>;  // -1: a dimension the file leaves unknown or symbolic

// Integer constants folded from Shape (fold_ints) where the file leaves the batch unknown
// (symbolic): the batch itself, which a Reshape may keep as its first dimension, and any value
// computed from it, which no op imported here can take. Both are below every real value, and
// dims_text writes them as "?".
constexpr std::int64_t kBatchValue = INT64_MIN;
constexpr std::int64_t kUnknownValue = INT64_MIN + 1;
bool has_unknown(const Dims& v) {
  return std::any_of(v.begin(), v.end(), [](std::int64_t x) { return x <= kUnknownValue; });
}

// Names in an ONNX file are arbitrary bytes. In messages, control and non-ASCII bytes are written
// as \xNN, so an error stays one line; in layer names they become '_', so the network's JSON is
// valid UTF-8.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    out += c < 0x20 || c >= 0x7f ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
  return out;
}
std::string safe_name(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '_';
  return s;
}

const char* const kSupported =
    "ucplan imports Conv, BatchNormalization, Relu, Sigmoid, HardSigmoid, HardSwish, Clip, Gelu (or its Erf "
    "decomposition), x * Sigmoid(x) as SiLU, Mul (element-wise, by one value per channel, or by a learned [C, 1, 1] "
    "scale), LayerNormalization over channels (between Transposes to and from NHWC), MaxPool, AveragePool, "
    "GlobalAveragePool, GlobalMaxPool, ReduceMean over H and W, Gemm, MatMul (+ Add of a bias), Flatten, Reshape to "
    "[batch, features], Add, Sum, Concat, Split and Slice on channels, the channel shuffle Reshape-Transpose-Reshape, "
    "Dropout, LRN, Softmax or LogSoftmax as the last op, Identity, Constant, and shape arithmetic on constants "
    "(Shape, Gather, Unsqueeze, Squeeze, Concat, Add, Sub, Mul, Div, Cast)";

// An attribute's integers as the file holds them (dims_text writes a negative dimension as "?").
std::string ints_text(const Dims& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

std::string dims_text(const Dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i)
    s += (i ? ", " : "") + (d[i] < 0 ? std::string("?") : std::to_string(d[i]));
  return s + "]";
}

// Integer constants as the file computes them: -1 as -1, the unknown batch as "batch" and what is
// computed from it as "?".
std::string ints_folded_text(const Dims& v) {
  std::vector<std::string> parts;
  for (auto x : v) parts.push_back(x == kBatchValue ? "batch" : x == kUnknownValue ? "?" : std::to_string(x));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

// As in graph.cpp: output size of a sliding window along one axis; 0 when it does not fit.
std::int64_t window_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d,
                        bool ceil_mode) {
  std::int64_t num = in + 2 * p - (d * (k - 1) + 1);
  if (num < 0 || s < 1) return 0;
  std::int64_t out = ceil_mode ? (num + s - 1) / s + 1 : num / s + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

// An activation: the ucplan layer (or the network input) that holds it, its per-sample shape as
// ucplan sees it, and its ONNX rank. A flattened tensor ([batch, features], rank 2) is the same
// ucplan tensor as before flattening: fc layers flatten their input themselves.
// Between a Transpose to NHWC and the Transpose back (ConvNeXt's `permute` around its layer
// norm and linear layers) a value is `nhwc`: its ucplan shape stays (C, H, W); LayerNormalization
// over the last axis is a layer norm over channels and MatMul by a [C, K] weight a 1x1 conv.
// A `partial` value is the middle of a pattern that becomes one layer when it completes: GELU
// decomposed at opsets below 20 (x / sqrt 2 -> Erf -> + 1 -> * x -> * 0.5) and ShuffleNet's
// channel shuffle (Reshape to [N, g, C/g, H, W] -> Transpose(0, 2, 1, 3, 4) -> Reshape back).
enum class Partial { None, GeluDiv, GeluErf, GeluAdd, GeluMul, ShuffleSplit, ShuffleSwapped };

struct Value {
  std::string ref;
  Shape shape;
  int rank = 4;
  int bias_layer = -1;  // index of the fc or 1x1 conv a MatMul made (an Add of a bias may follow)
  bool loss = false;    // the output of Softmax: nothing may consume it
  bool nhwc = false;
  Partial partial = Partial::None;
  std::string base;         // a partial value: the ONNX value its pattern started from
  std::int64_t groups = 0;  // a partial channel shuffle: its groups
};

class Importer {
 public:
  Importer(onnx::ModelProto& model, std::string file, ImportOptions options)
      : model_(model), g_(model.graph()), file_(std::move(file)), options_(std::move(options)) {}

  Network run() {
    try {
      return import();
    } catch (const UserError& e) {
      throw UserError(e.file(), printable(e.where()), printable(e.reason()));
    }
  }

 private:
  Network import() {
    for (const auto& op : model_.opset_import())
      if (op.domain().empty() || op.domain() == "ai.onnx") opset_ = op.version();
    // ONNX's own shape inference is not run: every shape used here comes from the file's
    // declarations and the ops' attributes (the 68 torchvision exports of tests/data/onnx gave
    // byte-identical networks without it, and test_import's models pass), and ONNX 1.12's
    // inference functions assume valid graphs: a Conv whose weight has more dimensions than its
    // input crashed convPoolShapeInference (found by tests/fuzz/fuzz_onnx.cpp).
    check_names();
    collect_dims();
    for (const auto& node : g_.node())
      for (const auto& in : node.input()) ++uses_[in];
    for (const auto& out : g_.output()) ++uses_[out.name()];
    find_input();
    for (int i = 0; i < g_.node_size(); ++i) import_node(i, g_.node(i));
    add_losses();
    // Not the graph's name: exporters write their own ("main_graph", "torch_jit").
    // Everything written into the network file is valid UTF-8 (nlohmann::json refuses to write
    // anything else): file names and the producer's strings are arbitrary bytes.
    net_.name = safe_name(!options_.name.empty() ? options_.name : stem(file_));
    net_.description = fmt::format("imported from {} by ucplan import", printable(base_name(file_)));
    if (!model_.producer_name().empty())
      net_.source = fmt::format("ONNX from {} {} (opset {})", printable(model_.producer_name()),
                                printable(model_.producer_version()), opset_);
    Graph graph = build_graph_by_node();  // the same validation as a hand-written network
    for (std::size_t l = 1; l < graph.layers.size(); ++l) {
      auto it = expected_.find(graph.layers[l].name());
      UCPLAN_CHECK(it != expected_.end() && it->second == graph.layers[l].out,
                   fmt::format("import and build_graph disagree on the shape of layer {}", graph.layers[l].name()));
    }
    return net_;
  }

  // build_graph's errors name a place in the network file ucplan writes ("layers[3] (conv1).groups");
  // the user has the ONNX file, so they are said as the node that made the layer.
  Graph build_graph_by_node() {
    try {
      return build_graph(net_, file_);
    } catch (const UserError& e) {
      for (std::size_t k = 0; k < net_.layers.size(); ++k) {
        const std::string prefix = fmt::format("layers[{}] ({})", k, net_.layers[k].name);
        if (e.where().rfind(prefix, 0) != 0) continue;
        std::string rest = e.where().substr(prefix.size());
        if (!rest.empty() && rest[0] == '.') rest = rest.substr(1);
        const std::string what = fmt::format("ucplan's {} layer{}: {}", layer_type_name(net_.layers[k].type),
                                             rest.empty() ? "" : " (its " + rest + ")", e.reason());
        if (layer_node_[k] >= 0) fail(layer_node_[k], g_.node(layer_node_[k]), what);
        throw UserError(file_, "graph.output", what);
      }
      if (e.where().rfind("input", 0) == 0)
        throw UserError(file_, fmt::format("graph input \"{}\"", net_.input_name), e.reason());
      throw;
    }
  }

  // ONNX's rules for names (the IR's "Names Within a Graph"): every value is defined once, by a
  // graph input, an initializer or one node's output, before a node reads it. A file that breaks
  // them has no one meaning (which writer of a name does a reader see? a cycle?), so it is
  // refused, as ONNX's checker and ONNX Runtime refuse it. A name nothing defines is a weight
  // stripped with its declaration (a graph kept for its structure): the ops that read weights say
  // what they need of it.
  void check_names() const {
    std::set<std::string> produced;
    for (const auto& n : g_.node())
      for (const auto& out : n.output()) produced.insert(out);
    std::map<std::string, std::string> defined;  // name -> what defines it
    for (const auto& v : g_.input())
      if (!defined.emplace(v.name(), "a graph input").second)
        throw UserError(file_, fmt::format("graph input \"{}\"", v.name()), "is declared twice");
    std::set<std::string> initializers;
    for (const auto& t : g_.initializer()) {
      if (!initializers.insert(t.name()).second)
        throw UserError(file_, fmt::format("initializer \"{}\"", t.name()), "is given twice");
      defined.emplace(t.name(), "an initializer");  // also a graph input: the input's default value
    }
    for (int i = 0; i < g_.node_size(); ++i) {
      const onnx::NodeProto& n = g_.node(i);
      for (const auto& in : n.input())
        if (!in.empty() && !defined.count(in) && produced.count(in))
          fail(i, n,
               fmt::format("input \"{}\" is the output of this node or a later one (ONNX orders nodes so that each "
                           "follows its inputs, and a graph has no cycles)",
                           in));
      for (const auto& out : n.output()) {
        if (out.empty()) continue;
        const auto [at, fresh] = defined.emplace(out, fmt::format("node {}", i));
        if (!fresh)
          fail(i, n,
               fmt::format("output \"{}\" is already defined by {}; ONNX defines every name once", out, at->second));
      }
    }
  }

  static std::string base_name(const std::string& path) {
    auto slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
  }
  static std::string stem(const std::string& path) {
    std::string b = base_name(path);
    auto dot = b.rfind('.');
    return dot == std::string::npos || dot == 0 ? b : b.substr(0, dot);
  }

  [[noreturn]] void fail(int index, const onnx::NodeProto& n, const std::string& what) const {
    std::string where = n.name().empty() ? fmt::format("node {} ({})", index, n.op_type())
                                         : fmt::format("node {} \"{}\" ({})", index, n.name(), n.op_type());
    throw UserError(file_, where, what);
  }

  // A declared dimension outside [0, kMaxFeatures] is as good as unknown (-1): nothing ucplan
  // imports has one, and a layer whose shape needs it fails for want of it. (Not kMaxDim: a fully
  // connected layer's weight has a dimension of its input's features, which may exceed it.)
  static Dims dims_of(const onnx::TypeProto& t) {
    Dims d;
    for (const auto& dim : t.tensor_type().shape().dim()) {
      const bool known = dim.has_dim_value() && dim.dim_value() >= 0 && dim.dim_value() <= kMaxFeatures;
      d.push_back(known ? dim.dim_value() : -1);
    }
    return d;
  }

  void collect_dims() {
    auto add_typed = [&](const onnx::ValueInfoProto& v) {
      if (v.type().has_tensor_type() && v.type().tensor_type().has_shape()) dims_[v.name()] = dims_of(v.type());
    };
    for (const auto& v : g_.value_info()) add_typed(v);
    for (const auto& v : g_.output()) add_typed(v);
    for (const auto& v : g_.input()) add_typed(v);
    for (const auto& t : g_.initializer()) {
      for (auto d : t.dims())
        if (d < 0 || d > kMaxFeatures)
          throw UserError(file_, fmt::format("initializer \"{}\"", t.name()),
                          fmt::format("dimension {} is not between 0 and {}", d, kMaxFeatures));
      dims_[t.name()] = Dims(t.dims().begin(), t.dims().end());
      constants_.insert(t.name());
      read_constant(t.name(), t);
    }
  }

  // Small integer and float constants (Reshape's shape, Dropout's ratio); data may be absent.
  void read_constant(const std::string& name, const onnx::TensorProto& t) {
    std::int64_t n = 1;
    for (auto d : t.dims()) {
      if (d < 0 || d > 16) return;  // not a tensor, or more values than a small constant has
      n *= d;                       // at most 16 * 16: no overflow
      if (n > 16) return;
    }
    if (t.data_type() == onnx::TensorProto::INT64) {
      std::vector<std::int64_t> v(t.int64_data().begin(), t.int64_data().end());
      if (v.empty() && n > 0 && t.raw_data().size() == static_cast<std::size_t>(n) * 8) {
        v.resize(n);
        std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
      }
      if (static_cast<std::int64_t>(v.size()) == n) ints_[name] = v;
    } else if (t.data_type() == onnx::TensorProto::FLOAT) {
      std::vector<float> v(t.float_data().begin(), t.float_data().end());
      if (v.empty() && n > 0 && t.raw_data().size() == static_cast<std::size_t>(n) * 4) {
        v.resize(n);
        std::memcpy(v.data(), t.raw_data().data(), t.raw_data().size());
      }
      if (n == 1 && v.size() == 1) floats_[name] = float32_value(v[0]);
    } else if (t.data_type() == onnx::TensorProto::DOUBLE && n == 1) {
      if (t.double_data_size() == 1) {
        floats_[name] = t.double_data(0);
      } else if (t.raw_data().size() == 8) {
        double v = 0;
        std::memcpy(&v, t.raw_data().data(), 8);
        floats_[name] = v;
      }
    }
  }

  // The data input is the graph input (not an initializer) that some node takes as its first
  // input: weights are never first, also where an export without parameters makes them inputs.
  void find_input() {
    std::set<std::string> data_uses;
    for (const auto& n : g_.node())
      if (n.input_size() > 0) data_uses.insert(n.input(0));
    // Where a parameter is also first somewhere (PyTorch's `layer_scale * x`), the data comes
    // first in the graph's inputs, as exporters write them; the others are treated as weights,
    // so a second data input is refused where a layer consumes it.
    std::vector<std::string> candidates;
    for (const auto& v : g_.input())
      if (!constants_.count(v.name()) && data_uses.count(v.name())) candidates.push_back(v.name());
    if (candidates.empty())
      throw UserError(file_, "graph.input", "no graph input feeds the network (ucplan networks have one data input)");
    for (std::size_t c = 1; c < candidates.size(); ++c) constants_.insert(candidates[c]);
    const std::string name = candidates[0];
    auto it = dims_.find(name);
    Dims d = it == dims_.end() ? Dims{} : it->second;
    bool known =
        std::all_of(d.begin() + (d.empty() ? 0 : 1), d.end(), [](std::int64_t x) { return x > 0 && x <= kMaxDim; });
    if (!known || (d.size() != 4 && d.size() != 2))
      throw UserError(
          file_, fmt::format("graph input \"{}\"", name),
          fmt::format("shape {} is not [batch, C, H, W] (or [batch, features]) with C, H, W known (at most {}); "
                      "export with a fixed input size",
                      dims_text(d), kMaxDim));
    batch_ = d[0] > 0 ? d[0] : -1;  // 0: as unknown as a symbolic batch
    net_.input_name = safe_name(name);
    used_names_.insert(net_.input_name);
    Value v;
    v.ref = net_.input_name;
    v.rank = static_cast<int>(d.size());
    v.shape = d.size() == 4 ? Shape{d[1], d[2], d[3]} : Shape{d[1], 1, 1};
    net_.input_shape = {v.shape.c, v.shape.h, v.shape.w};
    values_[name] = v;
  }

  // --- attributes -------------------------------------------------------------------------
  static const onnx::AttributeProto* attr(const onnx::NodeProto& n, const char* name) {
    for (const auto& a : n.attribute())
      if (a.name() == name) return &a;
    return nullptr;
  }
  static std::int64_t attr_int(const onnx::NodeProto& n, const char* name, std::int64_t fallback) {
    const auto* a = attr(n, name);
    return a ? a->i() : fallback;
  }
  // ONNX stores float32: 1e-5 arrives as 9.99999974738e-06. The shortest decimal that reads back
  // as the same float32 is what the exporter's user wrote.
  static double float32_value(float f) { return std::stod(fmt::format("{}", f)); }
  static double attr_float(const onnx::NodeProto& n, const char* name, double fallback) {
    const auto* a = attr(n, name);
    return a ? float32_value(a->f()) : fallback;
  }
  static std::string attr_string(const onnx::NodeProto& n, const char* name, std::string fallback) {
    const auto* a = attr(n, name);
    return a ? a->s() : fallback;
  }
  static Dims attr_ints(const onnx::NodeProto& n, const char* name) {
    const auto* a = attr(n, name);
    return a ? Dims(a->ints().begin(), a->ints().end()) : Dims{};
  }

  // --- values ---------------------------------------------------------------------------
  // An input that is a whole activation in NCHW (or, where the op allows it, NHWC), not the
  // middle of a pattern.
  const Value& activation(int index, const onnx::NodeProto& n, int slot, bool allow_nhwc = false) {
    const Value& v = any_value(index, n, slot);
    if (v.partial != Partial::None)
      fail(index, n,
           fmt::format("input \"{}\" is the middle of a {} pattern, which this op does not continue", n.input(slot),
                       v.partial <= Partial::GeluMul ? "GELU (x * (1 + erf(x / sqrt 2)) / 2)" : "channel shuffle"));
    if (v.nhwc && !allow_nhwc)
      fail(index, n,
           fmt::format("input \"{}\" is in NHWC order (after a Transpose); ucplan supports only LayerNormalization, "
                       "MatMul, Add and activations there, then a Transpose back",
                       n.input(slot)));
    return v;
  }
  const Value& any_value(int index, const onnx::NodeProto& n, int slot) {
    if (slot >= n.input_size() || n.input(slot).empty()) fail(index, n, fmt::format("input {} is missing", slot));
    auto it = values_.find(n.input(slot));
    if (it == values_.end())
      fail(index, n,
           fmt::format("input \"{}\" is not an activation ucplan follows (a weight, a constant, or the output of an op "
                       "ucplan does not import)",
                       n.input(slot)));
    if (it->second.loss)
      fail(index, n,
           fmt::format("consumes the output of a Softmax (\"{}\"); ucplan supports Softmax only as the last op, "
                       "the loss",
                       n.input(slot)));
    return it->second;
  }
  bool is_activation(const std::string& name) const { return values_.count(name) > 0; }
  Dims known_dims(const std::string& name) const {
    auto it = dims_.find(name);
    return it == dims_.end() ? Dims{} : it->second;
  }
  // The declared shape of an op's output, when the file (or shape inference) gives it, must
  // be what ucplan computes; a difference means the mapping would misrepresent the model.
  void check_declared(int index, const onnx::NodeProto& n, const Value& v) const {
    Dims d = known_dims(n.output(0));
    if (d.empty()) return;
    if (static_cast<int>(d.size()) != v.rank)
      fail(index, n,
           fmt::format("ucplan computes a rank-{} output \"{}\", but the file declares {}", v.rank, n.output(0),
                       dims_text(d)));
    if (d[0] >= 0 && batch_ > 0 && d[0] != batch_)
      fail(index, n,
           fmt::format("the file declares output \"{}\" as {}, a batch of {}, but the network's input has {}",
                       n.output(0), dims_text(d), d[0], batch_));
    if (std::any_of(d.begin() + 1, d.end(), [](std::int64_t x) { return x < 0; })) return;
    const bool same = d.size() == 4 ? (v.nhwc ? Shape{d[3], d[1], d[2]} : Shape{d[1], d[2], d[3]}) == v.shape
                                    : d[1] == v.shape.elems();
    if (!same)
      fail(index, n,
           fmt::format("ucplan computes {} per sample for output \"{}\", but the file declares {}", shape_text(v.shape),
                       n.output(0), dims_text(d)));
  }

  std::string unique_name(const onnx::NodeProto& n, int index, const std::string& suffix = "") {
    std::string base = safe_name(n.name().empty() ? fmt::format("{}_{}", n.op_type(), index) : n.name());
    std::transform(base.begin(), base.end(), base.begin(), [](char c) { return c == ' ' ? '_' : c; });
    base += suffix;
    std::string name = base;
    if (used_names_.count(name)) {  // base_2, base_3, ...: where the last one for this base left off
      int& k = next_suffix_[base];
      k = std::max(k, 2);
      do name = fmt::format("{}_{}", base, k++);
      while (used_names_.count(name));
    }
    used_names_.insert(name);
    return name;
  }

  // Appends a layer and binds the node's first output to it.
  Value& add_layer(int index, const onnx::NodeProto& n, Layer layer, Shape out, int rank, bool nhwc = false) {
    // What the network loader would refuse in the file `ucplan import` writes (an epsilon of 0).
    if (const auto e = find_layer_param_error(layer))
      fail(index, n,
           e->field.empty() ? fmt::format("ucplan's {} layer: {}", layer_type_name(layer.type), e->reason)
                            : fmt::format("ucplan's {} layer's {} {}, got {}", layer_type_name(layer.type), e->field,
                                          e->reason, e->value));
    layer.name = unique_name(n, index);
    expected_[layer.name] = out;
    push_layer(std::move(layer), index);
    Value v;
    v.ref = net_.layers.back().name;
    v.shape = out;
    v.rank = rank;
    v.nhwc = nhwc;
    check_declared(index, n, v);
    Value& slot = values_[n.output(0)];
    slot = v;
    return slot;
  }
  void alias(const onnx::NodeProto& n, const Value& v) {
    Value copy = v;
    values_[n.output(0)] = copy;
  }
  void mark_secondary_outputs(const onnx::NodeProto& n) {
    for (int o = 1; o < n.output_size(); ++o) secondary_.insert(n.output(o));
  }

  // Symmetric padding per axis from pads / auto_pad; asymmetric padding has no ucplan form.
  std::array<std::int64_t, 2> padding(int index, const onnx::NodeProto& n, const Shape& x,
                                      const std::array<std::int64_t, 2>& k, const std::array<std::int64_t, 2>& s,
                                      const std::array<std::int64_t, 2>& d) {
    std::string mode = attr_string(n, "auto_pad", "NOTSET");
    if (mode == "VALID") return {0, 0};
    if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
      std::array<std::int64_t, 2> p{};
      const std::int64_t in[2] = {x.h, x.w};
      for (int a = 0; a < 2; ++a) {
        std::int64_t out = (in[a] + s[a] - 1) / s[a];
        std::int64_t total = std::max<std::int64_t>(0, (out - 1) * s[a] + d[a] * (k[a] - 1) + 1 - in[a]);
        if (total % 2)
          fail(index, n,
               fmt::format("auto_pad {} needs {} padding on axis {}, which is asymmetric; ucplan pads both sides "
                           "equally",
                           mode, total, a + 2));
        p[a] = total / 2;
      }
      return p;
    }
    if (mode != "NOTSET") fail(index, n, fmt::format("unknown auto_pad \"{}\"", mode));
    Dims pads = attr_ints(n, "pads");
    if (pads.empty()) return {0, 0};
    if (pads.size() != 4)
      fail(index, n, fmt::format("pads {} is not 2-d (ucplan supports 2-d windows)", dims_text(pads)));
    if (pads[0] != pads[2] || pads[1] != pads[3])
      fail(index, n, fmt::format("asymmetric pads {}; ucplan pads both sides of an axis equally", dims_text(pads)));
    if (std::min(pads[0], pads[1]) < 0 || std::max(pads[0], pads[1]) > kMaxDim)
      fail(index, n, fmt::format("pads {} must be between 0 and {}", ints_text(pads), kMaxDim));
    return {pads[0], pads[1]};
  }
  std::array<std::int64_t, 2> pair_attr(int index, const onnx::NodeProto& n, const char* name, std::int64_t fallback) {
    Dims v = attr_ints(n, name);
    if (v.empty()) return {fallback, fallback};
    if (v.size() != 2)
      fail(index, n, fmt::format("{} {} is not 2-d (ucplan supports 2-d windows)", name, dims_text(v)));
    if (std::min(v[0], v[1]) < 1 || std::max(v[0], v[1]) > kMaxDim)
      fail(index, n, fmt::format("{} {} must be between 1 and {}", name, ints_text(v), kMaxDim));
    return {v[0], v[1]};
  }
  void expect_rank4(int index, const onnx::NodeProto& n, const Value& x) {
    if (x.rank != 4)
      fail(index, n,
           fmt::format("input \"{}\" has rank {}; ucplan supports this op on [batch, C, H, W] tensors", n.input(0),
                       x.rank));
  }

  // --- ops --------------------------------------------------------------------------------
  void import_node(int i, const onnx::NodeProto& n) {
    if (!n.domain().empty() && n.domain() != "ai.onnx")
      fail(i, n, fmt::format("op type {} of domain \"{}\" is not supported ({})", n.op_type(), n.domain(), kSupported));
    const std::string& op = n.op_type();
    if (n.output_size() < 1) fail(i, n, "the node has no output");
    if (op == "Constant") return constant(i, n);
    if (n.input_size() < 1) fail(i, n, "the node has no input");  // every other op it imports has one
    if (op == "Identity") return identity(i, n);
    if (op == "Conv") return conv(i, n);
    if (fold_ints(i, n)) return;
    if (op == "Relu") return void(unary(i, n, LayerType::Relu));
    if (op == "Sigmoid") return void(unary(i, n, LayerType::Sigmoid));
    if (op == "HardSwish") return void(unary(i, n, LayerType::HardSwish));
    if (op == "HardSigmoid") return hard_sigmoid(i, n);
    if (op == "Clip") return clip(i, n);
    if (op == "Gelu") return gelu(i, n);
    if (op == "Div") return gelu_div(i, n);
    if (op == "Erf") return gelu_erf(i, n);
    if (op == "Mul") return mul(i, n);
    if (op == "LayerNormalization") return layer_norm(i, n);
    if (op == "Transpose") return transpose(i, n);
    if (op == "Split") return split(i, n);
    if (op == "Slice") return slice(i, n);
    if (op == "BatchNormalization") return batch_norm(i, n);
    if (op == "MaxPool" || op == "AveragePool") return pool(i, n, op == "MaxPool" ? PoolMode::Max : PoolMode::Avg);
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool")
      return global_pool(i, n, op == "GlobalMaxPool" ? PoolMode::Max : PoolMode::Avg, true);
    if (op == "ReduceMean") return reduce_mean(i, n);
    if (op == "Flatten") return flatten(i, n);
    if (op == "Reshape") return reshape(i, n);
    if (op == "Gemm") return gemm(i, n);
    if (op == "MatMul") return matmul(i, n);
    if (op == "Add" || op == "Sum") return add(i, n);
    if (op == "Concat") return concat(i, n);
    if (op == "Dropout") return dropout(i, n);
    if (op == "LRN") return lrn(i, n);
    if (op == "Softmax" || op == "LogSoftmax") return softmax(i, n);
    if (op == "Shape")
      fail(i, n,
           "op type Shape is not supported: the graph computes shapes at run time; export with a fixed input size and "
           "constant folding (torch.onnx.export(..., do_constant_folding=True))");
    fail(i, n, fmt::format("op type {} is not supported ({})", op, kSupported));
  }

  void constant(int i, const onnx::NodeProto& n) {
    constants_.insert(n.output(0));
    if (const auto* a = attr(n, "value")) {
      dims_[n.output(0)] = Dims(a->t().dims().begin(), a->t().dims().end());
      read_constant(n.output(0), a->t());
    } else if (const auto* ai = attr(n, "value_ints")) {
      ints_[n.output(0)] = Dims(ai->ints().begin(), ai->ints().end());
      dims_[n.output(0)] = {ai->ints_size()};
    } else if (const auto* av = attr(n, "value_int")) {
      ints_[n.output(0)] = {av->i()};
      dims_[n.output(0)] = {};
    } else if (const auto* af = attr(n, "value_float")) {
      floats_[n.output(0)] = float32_value(af->f());
      dims_[n.output(0)] = {};
    } else if (n.attribute_size() == 0) {
      fail(i, n, "a Constant without a value");
    }
  }

  // Identity of an activation is that activation; of a weight or constant, the same constant.
  void identity(int i, const onnx::NodeProto& n) {
    if (n.input_size() >= 1 && !is_activation(n.input(0)) &&
        (constants_.count(n.input(0)) || dims_.count(n.input(0)))) {
      const std::string &from = n.input(0), &to = n.output(0);
      constants_.insert(to);
      if (dims_.count(from)) dims_[to] = dims_[from];
      if (ints_.count(from)) ints_[to] = ints_[from];
      if (floats_.count(from)) floats_[to] = floats_[from];
      return;
    }
    alias(n, activation(i, n, 0));
  }

  // Point-wise: in NCHW or NHWC alike, the layout carries over.
  Value& unary(int i, const onnx::NodeProto& n, LayerType type, Layer l = {}) {
    const Value x = activation(i, n, 0, true);
    l.type = type;
    l.inputs = {x.ref};
    return add_layer(i, n, l, x.shape, x.rank, x.nhwc);
  }

  // --- shape arithmetic on constants ---------------------------------------------------------
  // PyTorch's tracer records `x.size()` and `torch.chunk` as Shape, Gather, Unsqueeze, Concat and
  // integer arithmetic, left unfolded in a training-mode export. With every shape known they are
  // constants: evaluated here, so Reshape and Slice see constant operands.
  bool fold_ints(int i, const onnx::NodeProto& n) {
    const std::string& op = n.op_type();
    auto ints_of = [&](int slot) -> const Dims* {
      if (slot >= n.input_size() || n.input(slot).empty()) return nullptr;
      auto it = ints_.find(n.input(slot));
      return it == ints_.end() ? nullptr : &it->second;
    };
    auto all_ints = [&] {
      for (int s = 0; s < n.input_size(); ++s)
        if (!n.input(s).empty() && !ints_of(s)) return false;
      return n.input_size() > 0;
    };
    auto set = [&](Dims v) {
      constants_.insert(n.output(0));
      dims_[n.output(0)] = {static_cast<std::int64_t>(v.size())};
      ints_[n.output(0)] = std::move(v);
    };
    if (op == "Shape") {
      const Value& x = activation(i, n, 0, true);
      const std::int64_t batch = batch_ > 0 ? batch_ : kBatchValue;
      const Dims d = x.rank == 2 ? Dims{batch, x.shape.elems()}
                     : x.nhwc    ? Dims{batch, x.shape.h, x.shape.w, x.shape.c}
                                 : Dims{batch, x.shape.c, x.shape.h, x.shape.w};
      // Opset 15's start and end: the axes [start, end), negative from the end, clamped.
      const auto r = static_cast<std::int64_t>(d.size());
      auto axis = [&](std::int64_t a) { return std::clamp<std::int64_t>(a < 0 ? a + r : a, 0, r); };
      const std::int64_t start = axis(attr_int(n, "start", 0)), end = axis(attr_int(n, "end", r));
      set(Dims(d.begin() + start, d.begin() + std::max(start, end)));
      return true;
    }
    if (!all_ints() || !ints_of(0)) return false;
    const Dims& a = *ints_of(0);
    const bool binary = op == "Gather" || op == "Add" || op == "Sub" || op == "Mul" || op == "Div";
    if (binary && !ints_of(1)) fail(i, n, fmt::format("{} of integer constants takes two inputs", op));
    if (op == "Unsqueeze" || op == "Squeeze" || op == "Cast" || op == "Identity") {
      set(a);  // a 0-d or 1-d integer constant: the values are what matter
      return true;
    }
    if (op == "Concat") {
      Dims v;
      for (int s = 0; s < n.input_size(); ++s) v.insert(v.end(), ints_of(s)->begin(), ints_of(s)->end());
      set(v);
      return true;
    }
    if (op == "Gather") {
      if (has_unknown(*ints_of(1))) fail(i, n, "the indices depend on the batch size, which the file leaves unknown");
      Dims v;
      for (std::int64_t k : *ints_of(1)) {
        if (k < 0) k += static_cast<std::int64_t>(a.size());
        if (k < 0 || k >= static_cast<std::int64_t>(a.size())) fail(i, n, fmt::format("index {} out of range", k));
        v.push_back(a[static_cast<std::size_t>(k)]);
      }
      set(v);
      return true;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      const Dims& b = *ints_of(1);
      if (a.size() != b.size() && a.size() != 1 && b.size() != 1)
        fail(i, n, fmt::format("integer operands {} and {} do not broadcast", dims_text(a), dims_text(b)));
      Dims v(std::max(a.size(), b.size()));
      for (std::size_t k = 0; k < v.size(); ++k) {
        const std::int64_t x = a[a.size() == 1 ? 0 : k], y = b[b.size() == 1 ? 0 : k];
        if (x <= kUnknownValue || y <= kUnknownValue) {  // computed from an unknown batch: unknown
          v[k] = kUnknownValue;
          continue;
        }
        if (op == "Div" && y == 0) fail(i, n, "integer division by zero");
        bool overflow = x == INT64_MIN && y == -1;  // Div's one overflow
        if (op == "Add")
          overflow = __builtin_add_overflow(x, y, &v[k]);
        else if (op == "Sub")
          overflow = __builtin_sub_overflow(x, y, &v[k]);
        else if (op == "Mul")
          overflow = __builtin_mul_overflow(x, y, &v[k]);
        else if (!overflow)
          v[k] = x / y;
        if (overflow) fail(i, n, fmt::format("{} of {} and {} overflows 64-bit integers", op, x, y));
      }
      set(v);
      return true;
    }
    return false;
  }

  // A float constant of one element (a scalar or [1]), given its input slot.
  bool scalar(const onnx::NodeProto& n, int slot, double* out) const {
    if (slot >= n.input_size()) return false;
    auto it = floats_.find(n.input(slot));
    if (it == floats_.end()) return false;
    *out = it->second;
    return true;
  }
  static bool near(double a, double b) { return std::fabs(a - b) <= 1e-6 * std::fabs(b); }

  // --- point-wise activations ---------------------------------------------------------------
  void hard_sigmoid(int i, const onnx::NodeProto& n) {
    Layer l;
    l.hardsigmoid.alpha = attr_float(n, "alpha", 0.2);  // ONNX's defaults; PyTorch writes 1/6
    l.hardsigmoid.beta = attr_float(n, "beta", 0.5);
    unary(i, n, LayerType::HardSigmoid, l);
  }

  void clip(int i, const onnx::NodeProto& n) {
    Layer l;
    // Bounds are inputs since opset 11, attributes before.
    bool has_min = n.input_size() >= 2 && !n.input(1).empty(), has_max = n.input_size() >= 3 && !n.input(2).empty();
    if (has_min && !scalar(n, 1, &l.clip.min)) fail(i, n, fmt::format("min \"{}\" is not a constant", n.input(1)));
    if (has_max && !scalar(n, 2, &l.clip.max)) fail(i, n, fmt::format("max \"{}\" is not a constant", n.input(2)));
    if (attr(n, "min")) l.clip.min = attr_float(n, "min", 0), has_min = true;
    if (attr(n, "max")) l.clip.max = attr_float(n, "max", 0), has_max = true;
    if (!has_min || !has_max) fail(i, n, "a Clip without both bounds; ucplan's clip has a finite min and max");
    unary(i, n, LayerType::Clip, l);
  }

  void gelu(int i, const onnx::NodeProto& n) {
    Layer l;
    const std::string a = attr_string(n, "approximate", "none");
    if (a != "none" && a != "tanh") fail(i, n, fmt::format("approximate \"{}\" is not none or tanh", a));
    l.gelu.tanh = a == "tanh";
    unary(i, n, LayerType::Gelu, l);
  }

  // GELU at opsets below 20, as PyTorch writes it: Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5.
  Value& continue_gelu(const onnx::NodeProto& n, const Value& from, Partial next) {
    Value v = from;
    v.partial = next;
    v.ref.clear();
    values_[n.output(0)] = v;
    return values_[n.output(0)];
  }

  void gelu_div(int i, const onnx::NodeProto& n) {
    double c = 0;
    if (!is_activation(n.input(0)) || !scalar(n, 1, &c) || !near(c, std::sqrt(2.0)))
      fail(i, n, "ucplan supports Div only as x / sqrt(2) in the Erf form of GELU");
    Value x = activation(i, n, 0, true);
    x.base = n.input(0);
    continue_gelu(n, x, Partial::GeluDiv);
  }

  void gelu_erf(int i, const onnx::NodeProto& n) {
    const Value& x = any_value(i, n, 0);
    if (x.partial != Partial::GeluDiv)
      fail(i, n, "ucplan supports Erf only in the Erf form of GELU, after x / sqrt(2)");
    continue_gelu(n, Value(x), Partial::GeluErf);
  }

  // --- mul: GELU's last steps, SiLU, squeeze-and-excitation, layer scale ----------------------
  void mul(int i, const onnx::NodeProto& n) {
    if (n.input_size() != 2) fail(i, n, "a Mul takes two inputs");
    const bool act0 = is_activation(n.input(0)), act1 = is_activation(n.input(1));
    if (act0 && act1) {
      const Value& a = any_value(i, n, 0);
      const Value& b = any_value(i, n, 1);
      // * x, with x the value the GELU pattern started from.
      for (int k = 0; k < 2; ++k) {
        const Value& p = k == 0 ? a : b;
        if (p.partial == Partial::GeluAdd && n.input(1 - k) == p.base)
          return void(continue_gelu(n, p, Partial::GeluMul));
      }
      const Value x0 = activation(i, n, 0, true), x1 = activation(i, n, 1, true);
      // x * sigmoid(x): SiLU, when the sigmoid's only use is this Mul.
      for (int k = 0; k < 2; ++k) {
        const Value& s = k == 0 ? x0 : x1;
        const Value& x = k == 0 ? x1 : x0;
        const int at = layer_index(s.ref);
        if (at >= 0 && net_.layers[at].type == LayerType::Sigmoid && net_.layers[at].inputs[0] == x.ref &&
            uses_[n.input(k)] == 1) {
          net_.layers[at].type = LayerType::Silu;
          return alias(n, s);
        }
      }
      // The feature map first, then the gate (of its shape or one value per channel). ONNX
      // broadcasts from the last axis, so a gate of another rank lines up with other axes: a
      // [batch, C] gate of a [batch, C, H, W] map is one value per column, not per channel.
      const bool swap = x0.shape.elems() < x1.shape.elems();
      const Value& x = swap ? x1 : x0;
      const Value& g = swap ? x0 : x1;
      if (x.nhwc || g.nhwc) fail(i, n, "a Mul of two NHWC tensors; ucplan multiplies [C, H, W] tensors");
      if (x0.rank != x1.rank)
        fail(i, n,
             fmt::format("multiplies a rank-{} tensor by a rank-{} one, which ONNX broadcasts from the last axis; "
                         "ucplan multiplies tensors of one rank",
                         x0.rank, x1.rank));
      if (!(g.shape == x.shape) && !(x.rank == 4 && g.shape == Shape{x.shape.c, 1, 1}))
        fail(i, n,
             fmt::format("multiplies {} by {}; ucplan multiplies by a tensor of the same shape or by one value per "
                         "channel",
                         shape_text(x.shape), shape_text(g.shape)));
      if (x.ref == g.ref) fail(i, n, "squares a tensor (x * x); ucplan's mul takes two distinct inputs");
      Layer l;
      l.type = LayerType::Mul;
      l.inputs = {x.ref, g.ref};
      add_layer(i, n, l, x.shape, x.rank);
      return;
    }
    if (!act0 && !act1) fail(i, n, "multiplies two constants; ucplan folds only integer shape arithmetic");
    const int slot = act0 ? 0 : 1;
    const Value& x = any_value(i, n, slot);
    const std::string& c = n.input(1 - slot);
    double v = 0;
    if (x.partial == Partial::GeluMul && scalar(n, 1 - slot, &v) && near(v, 0.5)) {
      Layer l;
      l.type = LayerType::Gelu;
      const Value& src = values_.at(x.base);
      l.inputs = {src.ref};
      add_layer(i, n, l, src.shape, src.rank, src.nhwc);
      return;
    }
    const Value y = activation(i, n, slot, true);
    // A learned factor per channel: [C, 1, 1] or [1, C, 1, 1] in NCHW, [C] in NHWC, [C] or [1, C]
    // for [batch, C]; never more axes than the tensor has (the product would have them).
    Dims d = known_dims(c);
    const std::size_t trailing = y.rank == 4 && !y.nhwc ? 3 : 1;
    const bool fits = d.size() <= static_cast<std::size_t>(y.rank);
    while (!d.empty() && d.front() == 1 && d.size() > trailing) d.erase(d.begin());
    const bool per_channel = fits && (y.nhwc        ? d == Dims{y.shape.c}
                                      : y.rank == 4 ? d == Dims{y.shape.c, 1, 1}
                                                    : y.shape.h == 1 && y.shape.w == 1 && d == Dims{y.shape.c});
    if (!per_channel)
      fail(i, n,
           fmt::format("multiplies {} by the constant \"{}\" of dims {}; ucplan supports a learned factor per channel "
                       "(ConvNeXt's layer scale)",
                       shape_text(y.shape), c, dims_text(known_dims(c))));
    claim_parameter(i, n, 1 - slot);
    Layer l;
    l.type = LayerType::Scale;
    l.inputs = {y.ref};
    add_layer(i, n, l, y.shape, y.rank, y.nhwc);
  }

  int layer_index(const std::string& ref) const {
    const auto it = layer_at_.find(ref);
    return it == layer_at_.end() ? -1 : it->second;
  }
  // Appends a named layer, made by node `node` (-1: by the importer, a loss).
  void push_layer(Layer l, int node) {
    layer_at_[l.name] = static_cast<int>(net_.layers.size());
    layer_node_.push_back(node);
    net_.layers.push_back(std::move(l));
  }

  // A learned parameter (a weight, a bias, batch-norm statistics) belongs to one layer: ucplan
  // gives every layer its own, so a tensor two layers share would count twice in memory.
  // Transposes of a weight are the weight (origin_).
  void claim_parameter(int i, const onnx::NodeProto& n, int slot) {
    if (slot >= n.input_size() || n.input(slot).empty()) return;
    const auto o = origin_.find(n.input(slot));
    const std::string& name = o == origin_.end() ? n.input(slot) : o->second;
    const auto [at, fresh] = parameter_user_.emplace(name, i);
    if (!fresh)
      fail(i, n,
           fmt::format("the parameter \"{}\" is also node {}'s; ucplan gives every layer its own parameters (a shared "
                       "one would be counted twice in memory)",
                       name, at->second));
  }
  // A parameter's declared dims, where the file gives them, are the ones the layer has.
  void expect_parameter_dims(int i, const onnx::NodeProto& n, int slot, const char* what, const Dims& want) {
    if (slot >= n.input_size() || n.input(slot).empty()) return;
    const Dims d = known_dims(n.input(slot));
    if (!d.empty() && d != want)
      fail(i, n,
           fmt::format("the {} \"{}\" has dims {}; this layer's is {}", what, n.input(slot), dims_text(d),
                       dims_text(want)));
  }

  // --- layer norm, transposes ----------------------------------------------------------------
  void layer_norm(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0, true);
    std::int64_t axis = attr_int(n, "axis", -1);
    const int rank = x.rank;
    if (axis < 0) axis += rank;
    if (x.rank == 2 && axis == 1 && !(x.shape.h == 1 && x.shape.w == 1))
      fail(i, n,
           fmt::format("normalizes the {} features of a flattened {} tensor together; ucplan's layer norm is over the "
                       "channels of each pixel",
                       x.shape.elems(), shape_text(x.shape)));
    if (!((x.nhwc && axis == 3) || (x.rank == 2 && axis == 1)))
      fail(i, n,
           fmt::format("normalizes over axes {}.. of a rank-{} {} tensor; ucplan's layer norm is over the channels of "
                       "each pixel: NHWC with axis -1 (ConvNeXt), or [batch, features]",
                       axis, rank, x.nhwc ? "NHWC" : "NCHW"));
    if (n.input_size() < 3 || n.input(1).empty() || n.input(2).empty())
      fail(i, n, "a layer norm without a learned scale and bias; ucplan's layer norm has both");
    for (int slot : {1, 2}) {
      expect_parameter_dims(i, n, slot, slot == 1 ? "scale" : "bias", Dims{x.shape.c});
      claim_parameter(i, n, slot);
    }
    Layer l;
    l.type = LayerType::LayerNorm;
    l.inputs = {x.ref};
    l.ln.eps = attr_float(n, "epsilon", 1e-5);
    mark_secondary_outputs(n);  // mean and inverse std
    add_layer(i, n, l, x.shape, x.rank, x.nhwc);
  }

  void transpose(int i, const onnx::NodeProto& n) {
    const Dims perm = attr_ints(n, "perm");
    if (!is_activation(n.input(0))) {  // of a weight (a Linear's, in a training export): its dims permuted
      const Dims d = known_dims(n.input(0));
      Dims t;
      if (perm.empty()) {
        t.assign(d.rbegin(), d.rend());
      } else if (!d.empty()) {
        Dims sorted = perm;
        std::sort(sorted.begin(), sorted.end());
        for (std::size_t a = 0; a < sorted.size(); ++a)
          if (sorted.size() != d.size() || sorted[a] != static_cast<std::int64_t>(a))
            fail(i, n,
                 fmt::format("perm {} is not a permutation of the {} axes of \"{}\" {}", ints_text(perm), d.size(),
                             n.input(0), dims_text(d)));
        for (auto p : perm) t.push_back(d[static_cast<std::size_t>(p)]);
      }
      constants_.insert(n.output(0));
      dims_[n.output(0)] = t;
      const auto o = origin_.find(n.input(0));
      origin_[n.output(0)] = o == origin_.end() ? n.input(0) : o->second;
      return;
    }
    const Value& x = any_value(i, n, 0);
    if (x.partial == Partial::ShuffleSplit && perm == Dims{0, 2, 1, 3, 4}) {
      Value v = x;
      v.partial = Partial::ShuffleSwapped;
      values_[n.output(0)] = v;
      return;
    }
    Value v = activation(i, n, 0, true);
    if (v.rank == 4 && !v.nhwc && perm == Dims{0, 2, 3, 1}) {
      v.nhwc = true;
    } else if (v.rank == 4 && v.nhwc && perm == Dims{0, 3, 1, 2}) {
      v.nhwc = false;
    } else {
      fail(i, n,
           fmt::format(
               "perm {} of an {} tensor; ucplan supports NCHW <-> NHWC and the channel shuffle's (0, 2, 1, 3, 4)",
               dims_text(perm), v.nhwc ? "NHWC" : "NCHW"));
    }
    alias(n, v);
    check_declared(i, n, v);
  }

  // --- split and slice on channels -------------------------------------------------------------
  void add_slice(int i, const onnx::NodeProto& n, int output, const Value& x, std::int64_t begin, std::int64_t end) {
    Layer l;
    l.type = LayerType::Slice;
    l.inputs = {x.ref};
    l.slice = {begin, end};
    l.name = unique_name(n, i, output == 0 ? "" : fmt::format("_{}", output));
    const Shape out{end - begin, x.shape.h, x.shape.w};
    expected_[l.name] = out;
    push_layer(std::move(l), i);
    Value v;
    v.ref = net_.layers.back().name;
    v.shape = out;
    v.rank = x.rank;
    values_[n.output(output)] = v;
  }

  void split(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    std::int64_t axis = attr_int(n, "axis", 0);
    if (axis < 0) axis += x.rank;
    if (axis != 1) fail(i, n, fmt::format("Split on axis {}; ucplan splits channels (axis 1)", axis));
    Dims sizes = attr_ints(n, "split");  // an attribute up to opset 12, an input since 13
    if (sizes.empty() && n.input_size() >= 2 && !n.input(1).empty()) {
      auto it = ints_.find(n.input(1));
      if (it == ints_.end()) fail(i, n, fmt::format("the split sizes \"{}\" are not a constant", n.input(1)));
      if (has_unknown(it->second))
        fail(i, n, "the split sizes depend on the batch size, which the file leaves unknown");
      sizes = it->second;
    }
    const std::int64_t parts = n.output_size();
    if (sizes.empty()) {
      if (x.shape.c % parts != 0)
        fail(i, n, fmt::format("{} channels do not split into {} equal parts", x.shape.c, parts));
      sizes.assign(static_cast<std::size_t>(parts), x.shape.c / parts);
    }
    if (static_cast<std::int64_t>(sizes.size()) != parts)
      fail(i, n, fmt::format("{} split sizes for {} outputs", sizes.size(), parts));
    std::int64_t begin = 0;
    for (int o = 0; o < parts; ++o) {
      if (sizes[static_cast<std::size_t>(o)] < 1) fail(i, n, "a split size is not positive");
      add_slice(i, n, o, x, begin, begin + sizes[static_cast<std::size_t>(o)]);
      begin += sizes[static_cast<std::size_t>(o)];
    }
    if (begin != x.shape.c) fail(i, n, fmt::format("split sizes add up to {}, not the {} channels", begin, x.shape.c));
  }

  void slice(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    // Inputs since opset 10, attributes before.
    auto ints_at = [&](int slot, const char* what) -> Dims {
      if (slot >= n.input_size() || n.input(slot).empty()) return attr_ints(n, what);
      auto it = ints_.find(n.input(slot));
      if (it == ints_.end()) fail(i, n, fmt::format("{} \"{}\" is not a constant", what, n.input(slot)));
      if (has_unknown(it->second))
        fail(i, n, fmt::format("the {} depend on the batch size, which the file leaves unknown", what));
      return it->second;
    };
    const Dims starts = ints_at(1, "starts"), ends = ints_at(2, "ends");
    Dims axes = ints_at(3, "axes"), steps = ints_at(4, "steps");
    if (starts.size() != 1 || ends.size() != 1 || (!axes.empty() && axes.size() != 1))
      fail(i, n, "a Slice of more than one axis; ucplan slices channels");
    std::int64_t axis = axes.empty() ? 0 : axes[0];
    if (axis < 0) axis += x.rank;
    if (axis != 1) fail(i, n, fmt::format("a Slice on axis {}; ucplan slices channels (axis 1)", axis));
    if (!steps.empty() && steps[0] != 1)
      fail(i, n, fmt::format("a Slice with step {}; ucplan slices with step 1", steps[0]));
    auto clamp = [&](std::int64_t v) {
      if (v < 0) v += x.shape.c;
      return std::clamp<std::int64_t>(v, 0, x.shape.c);
    };
    const std::int64_t begin = clamp(starts[0]), end = clamp(ends[0]);
    if (end <= begin) fail(i, n, fmt::format("an empty Slice of channels [{}, {})", begin, end));
    if (begin == 0 && end == x.shape.c) return alias(n, x);
    add_slice(i, n, 0, x, begin, end);
  }

  void conv(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    expect_rank4(i, n, x);
    if (n.input_size() < 2) fail(i, n, "the weight input is missing");
    if (is_activation(n.input(1)))
      fail(i, n, "the weight is computed by the network; ucplan supports learned weights only");
    Layer l;
    l.type = LayerType::Conv;
    l.inputs = {x.ref};
    auto& c = l.conv;
    c.groups = attr_int(n, "group", 1);
    if (c.groups < 1 || c.groups > kMaxDim)
      fail(i, n, fmt::format("group {} must be between 1 and {}", c.groups, kMaxDim));
    Dims w = known_dims(n.input(1));
    std::int64_t kh = -1, kw = -1;
    if (!w.empty()) {
      if (w.size() != 4)
        fail(i, n,
             fmt::format("weight \"{}\" has dims {}; ucplan supports 2-d convolutions", n.input(1), dims_text(w)));
      c.out_channels = w[0];
      kh = w[2];
      kw = w[3];
      if (w[1] > 0 && w[1] * c.groups != x.shape.c)
        fail(i, n,
             fmt::format(
                 "weight \"{}\" has dims {}: {} input channels per group x {} groups, but the input has {} channels",
                 n.input(1), dims_text(w), w[1], c.groups, x.shape.c));
    }
    Dims ks = attr_ints(n, "kernel_shape");
    if (!ks.empty()) {
      if (ks.size() != 2)
        fail(i, n, fmt::format("kernel_shape {} is not 2-d; ucplan supports 2-d convolutions", dims_text(ks)));
      if ((kh > 0 && kh != ks[0]) || (kw > 0 && kw != ks[1]))
        fail(i, n, fmt::format("kernel_shape {} differs from the weight's dims {}", dims_text(ks), dims_text(w)));
      kh = ks[0];
      kw = ks[1];
    }
    if (kh < 1 || kw < 1)
      fail(i, n,
           fmt::format("the kernel size of weight \"{}\" is unknown: the file gives neither its dims nor kernel_shape",
                       n.input(1)));
    if (c.out_channels < 1) {
      Dims y = known_dims(n.output(0));
      if (y.size() == 4 && y[1] > 0)
        c.out_channels = y[1];
      else
        fail(i, n,
             fmt::format("the output channels are unknown: the file gives neither the dims of weight \"{}\" nor the "
                         "shape of output \"{}\"",
                         n.input(1), n.output(0)));
    }
    if (std::max({kh, kw, c.out_channels}) > kMaxDim)
      fail(i, n,
           fmt::format("a kernel {}x{} with {} outputs: ucplan takes at most {} in each", kh, kw, c.out_channels,
                       kMaxDim));
    c.kernel = {kh, kw};
    c.stride = pair_attr(i, n, "strides", 1);
    c.dilation = pair_attr(i, n, "dilations", 1);
    c.pad = padding(i, n, x.shape, c.kernel, c.stride, c.dilation);
    c.bias = n.input_size() >= 3 && !n.input(2).empty();
    if (c.bias && is_activation(n.input(2)))
      fail(i, n, "the bias is computed by the network; ucplan supports learned biases only");
    if (x.shape.c % c.groups != 0 || c.out_channels % c.groups != 0)
      fail(i, n,
           fmt::format("{} groups do not divide the {} input and {} output channels", c.groups, x.shape.c,
                       c.out_channels));
    expect_parameter_dims(i, n, 2, "bias", Dims{c.out_channels});
    claim_parameter(i, n, 1);
    claim_parameter(i, n, 2);
    std::int64_t ho = window_out(x.shape.h, kh, c.stride[0], c.pad[0], c.dilation[0], false);
    std::int64_t wo = window_out(x.shape.w, kw, c.stride[1], c.pad[1], c.dilation[1], false);
    if (ho < 1 || wo < 1)
      fail(i, n, fmt::format("the kernel {}x{} does not fit the input {}", kh, kw, shape_text(x.shape)));
    add_layer(i, n, l, Shape{c.out_channels, ho, wo}, 4);
  }

  void batch_norm(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    if (x.rank != 4 && !(x.shape.h == 1 && x.shape.w == 1))
      fail(i, n,
           fmt::format("normalizes {} features of a flattened {} tensor; ucplan's bn normalizes per channel",
                       x.shape.elems(), shape_text(x.shape)));
    if (attr(n, "spatial") && attr_int(n, "spatial", 1) == 0)
      fail(i, n,
           "spatial=0: statistics and parameters per activation (opsets 7 and 8); ucplan's bn normalizes per channel");
    if (n.input_size() < 5) fail(i, n, "a BatchNormalization without scale, bias, mean and variance");
    static const char* const kParameters[] = {"scale", "bias", "mean", "variance"};
    for (int slot = 1; slot <= 4; ++slot) {
      if (is_activation(n.input(slot)))
        fail(
            i, n,
            fmt::format("the {} is computed by the network; ucplan supports learned ones only", kParameters[slot - 1]));
      expect_parameter_dims(i, n, slot, kParameters[slot - 1], Dims{x.shape.c});
      claim_parameter(i, n, slot);
    }
    Layer l;
    l.type = LayerType::BatchNorm;
    l.inputs = {x.ref};
    l.bn.eps = attr_float(n, "epsilon", 1e-5);
    mark_secondary_outputs(n);  // running mean and variance in a training-mode export
    add_layer(i, n, l, x.shape, x.rank);
  }

  void pool(int i, const onnx::NodeProto& n, PoolMode mode) {
    const Value x = activation(i, n, 0);
    expect_rank4(i, n, x);
    Dims ks = attr_ints(n, "kernel_shape");
    if (ks.size() != 2)
      fail(i, n, fmt::format("kernel_shape {} is not 2-d (ucplan supports 2-d pooling)", dims_text(ks)));
    Layer l;
    l.type = LayerType::Pool;
    l.inputs = {x.ref};
    auto& p = l.pool;
    p.mode = mode;
    p.kernel = pair_attr(i, n, "kernel_shape", 1);  // 2-d (above) and within [1, kMaxDim]
    p.stride = pair_attr(i, n, "strides", 1);
    auto dil = pair_attr(i, n, "dilations", 1);
    if (dil[0] != 1 || dil[1] != 1) fail(i, n, fmt::format("dilated pooling ({}x{}) is not supported", dil[0], dil[1]));
    p.pad = padding(i, n, x.shape, p.kernel, p.stride, {1, 1});
    p.ceil_mode = attr_int(n, "ceil_mode", 0) != 0;
    // ONNX's default is to exclude the padding from averages; PyTorch's export says which it uses.
    p.count_include_pad = mode == PoolMode::Max || attr_int(n, "count_include_pad", 0) != 0;
    mark_secondary_outputs(n);  // MaxPool's indices
    // A 1x1 window with stride 1 (PyTorch's adaptive pooling to the size it already has) is the identity.
    if (p.kernel == std::array<std::int64_t, 2>{1, 1} && p.stride == std::array<std::int64_t, 2>{1, 1} &&
        p.pad == std::array<std::int64_t, 2>{0, 0}) {
      alias(n, x);
      check_declared(i, n, x);
      return;
    }
    std::int64_t ho = window_out(x.shape.h, p.kernel[0], p.stride[0], p.pad[0], 1, p.ceil_mode);
    std::int64_t wo = window_out(x.shape.w, p.kernel[1], p.stride[1], p.pad[1], 1, p.ceil_mode);
    if (ho < 1 || wo < 1)
      fail(i, n,
           fmt::format("the window {}x{} does not fit the input {}", p.kernel[0], p.kernel[1], shape_text(x.shape)));
    add_layer(i, n, l, Shape{x.shape.c, ho, wo}, 4);
  }

  void global_pool(int i, const onnx::NodeProto& n, PoolMode mode, bool keep_dims) {
    const Value x = activation(i, n, 0);
    expect_rank4(i, n, x);
    Layer l;
    l.type = LayerType::Pool;
    l.inputs = {x.ref};
    l.pool.mode = mode;
    l.pool.global = true;
    add_layer(i, n, l, Shape{x.shape.c, 1, 1}, keep_dims ? 4 : 2);
  }

  void reduce_mean(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    expect_rank4(i, n, x);
    Dims axes = attr_ints(n, "axes");  // an attribute up to opset 17, an input since 18
    if (axes.empty() && n.input_size() >= 2 && ints_.count(n.input(1))) axes = ints_[n.input(1)];
    if (has_unknown(axes)) fail(i, n, "the axes depend on the batch size, which the file leaves unknown");
    const Dims written = axes;
    for (auto& a : axes)
      if (a < 0) a += 4;
    std::sort(axes.begin(), axes.end());
    if (axes != Dims{2, 3})
      fail(i, n,
           fmt::format("ReduceMean over axes {}; ucplan supports it over H and W only (a global average pool)",
                       dims_text(written)));
    global_pool(i, n, PoolMode::Avg, attr_int(n, "keepdims", 1) != 0);
  }

  void flatten(int i, const onnx::NodeProto& n) {
    Value x = activation(i, n, 0);
    std::int64_t axis = attr_int(n, "axis", 1);
    if (axis < 0) axis += x.rank;
    if (axis != 1)
      fail(i, n, fmt::format("Flatten with axis {}; ucplan supports flattening to [batch, features] (axis 1)", axis));
    x.rank = 2;
    alias(n, x);
    check_declared(i, n, x);
  }

  void reshape(int i, const onnx::NodeProto& n) {
    Dims t;
    if (n.input_size() >= 2) {
      auto it = ints_.find(n.input(1));
      if (it == ints_.end())
        fail(i, n, "the target shape is not a constant; export with a fixed input size and constant folding");
      t = it->second;
    } else if (attr(n, "shape")) {
      t = attr_ints(n, "shape");  // Reshape-1 (opsets below 5): an attribute
    } else {
      fail(i, n, "the target shape is missing");
    }
    // A 0 copies the input's dimension, unless allowzero (opset 14) makes it a dimension of 0.
    if (attr_int(n, "allowzero", 0) != 0 && std::find(t.begin(), t.end(), 0) != t.end())
      fail(i, n, fmt::format("allowzero with a 0 in the target shape {}: an empty tensor", ints_folded_text(t)));
    // The first dimension keeps the batch: 0 (copied), the batch itself, or -1 where the others are known.
    auto keeps_batch = [&](bool others_known) {
      return !t.empty() &&
             (t[0] == 0 || t[0] == kBatchValue || (batch_ > 0 && t[0] == batch_) || (t[0] == -1 && others_known));
    };
    auto known = [&](std::size_t from) {  // no -1 from `from` on
      return from >= t.size() || std::none_of(t.begin() + static_cast<std::ptrdiff_t>(from), t.end(),
                                              [](std::int64_t v) { return v == -1; });
    };
    // Known values only, but for the unknown batch itself as the first dimension (keeps_batch).
    bool computed = false;
    for (std::size_t k = 0; k < t.size(); ++k)
      computed = computed || t[k] == kUnknownValue || (k > 0 && t[k] == kBatchValue);
    if (computed)
      fail(i, n,
           fmt::format("the target shape {} is computed from the batch size, which the file leaves unknown; export "
                       "with a fixed batch",
                       ints_folded_text(t)));
    const Value& in = any_value(i, n, 0);
    if (in.partial == Partial::ShuffleSwapped) {  // back to [N, C, H, W]: the channel shuffle is complete
      const bool back = t.size() == 4 && keeps_batch(known(1)) && (t[1] == in.shape.c || (t[1] == -1 && t[0] != -1)) &&
                        t[2] == in.shape.h && t[3] == in.shape.w;
      if (!back)
        fail(i, n, fmt::format("a channel shuffle reshaped to {}, not back to [N, C, H, W]", ints_folded_text(t)));
      const Value& src = values_.at(in.base);
      Layer l;
      l.type = LayerType::ChannelShuffle;
      l.inputs = {src.ref};
      l.shuffle.groups = in.groups;
      add_layer(i, n, l, src.shape, 4);
      return;
    }
    Value x = activation(i, n, 0);
    if (t.size() == 5 && x.rank == 4 && keeps_batch(known(1)) && t[1] > 0 && t[3] == x.shape.h && t[4] == x.shape.w &&
        x.shape.c % t[1] == 0 && (t[2] == x.shape.c / t[1] || (t[2] == -1 && t[0] != -1))) {  // [N, g, C/g, H, W]
      Value v = x;
      v.partial = Partial::ShuffleSplit;
      v.base = n.input(0);
      v.groups = t[1];
      v.ref.clear();
      values_[n.output(0)] = v;
      return;
    }
    const std::int64_t k = x.shape.elems();
    const bool batch_ok = keeps_batch(known(1));
    if (t.size() == 2 && batch_ok && (t[1] == k || (t[1] == -1 && t[0] != -1))) {
      x.rank = 2;  // flattening before a fully connected layer: fc flattens its input itself
      alias(n, x);
      check_declared(i, n, x);
      return;
    }
    Dims same = x.rank == 4 ? Dims{x.shape.c, x.shape.h, x.shape.w} : Dims{k};
    if (t.size() == same.size() + 1 && batch_ok) {
      bool identity = true;
      for (std::size_t a = 0; a < same.size(); ++a) identity = identity && (t[a + 1] == same[a] || t[a + 1] == 0);
      if (identity) return alias(n, x);
    }
    fail(i, n,
         fmt::format("Reshape of {} to {}; ucplan supports Reshape only to [batch, features] or to the same shape",
                     shape_text(x.shape), ints_folded_text(t)));
  }

  void add_fc(int i, const onnx::NodeProto& n, const Value& x, std::int64_t out, std::int64_t in, bool bias,
              bool from_matmul) {
    if (in > 0 && in != x.shape.elems())
      fail(i, n,
           fmt::format("the weight \"{}\" takes {} features, but the input has {}", n.input(1), in, x.shape.elems()));
    Layer l;
    l.type = LayerType::Fc;
    l.inputs = {x.ref};
    l.fc.out_features = out;
    l.fc.bias = bias;
    Value& v = add_layer(i, n, l, Shape{out, 1, 1}, 2);
    if (from_matmul && !bias) v.bias_layer = static_cast<int>(net_.layers.size()) - 1;
  }

  std::int64_t out_features_from_output(int i, const onnx::NodeProto& n) {
    Dims y = known_dims(n.output(0));
    if (y.size() == 2 && y[1] > 0) return y[1];
    fail(i, n,
         fmt::format("the output features are unknown: the file gives neither the dims of weight \"{}\" nor the shape "
                     "of output \"{}\"",
                     n.input(1), n.output(0)));
  }

  void gemm(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    if (attr_int(n, "transA", 0) != 0) fail(i, n, "transA=1 (a transposed input) is not supported");
    if (attr_float(n, "alpha", 1.0) != 1.0 || attr_float(n, "beta", 1.0) != 1.0)
      fail(i, n, "alpha or beta other than 1 is not supported");
    if (x.rank != 2)
      fail(i, n, fmt::format("input \"{}\" has rank {}; Gemm takes [batch, features]", n.input(0), x.rank));
    if (n.input_size() < 2 || is_activation(n.input(1)))
      fail(i, n, "the second operand is not a weight; ucplan maps Gemm to a fully connected layer");
    Dims b = known_dims(n.input(1));
    bool trans_b = attr_int(n, "transB", 0) != 0;
    std::int64_t out = -1, in = -1;
    if (b.size() == 2) {
      out = trans_b ? b[0] : b[1];
      in = trans_b ? b[1] : b[0];
    } else if (!b.empty()) {
      fail(i, n, fmt::format("weight \"{}\" has dims {}, expected 2", n.input(1), dims_text(b)));
    }
    if (out < 1) out = out_features_from_output(i, n);
    bool bias = n.input_size() >= 3 && !n.input(2).empty();
    if (bias && is_activation(n.input(2)))
      fail(i, n, "C is computed by the network; ucplan supports a learned bias only");
    if (bias) {  // one value per output: [out] or [1, out] (a [1] or [batch, out] C is not an fc's bias)
      const Dims d = known_dims(n.input(2));
      if (!d.empty() && d != Dims{out} && d != Dims{1, out})
        fail(i, n,
             fmt::format("C \"{}\" has dims {}; an fc layer's bias is one value per output, [{}]", n.input(2),
                         dims_text(d), out));
    }
    claim_parameter(i, n, 1);
    claim_parameter(i, n, 2);
    add_fc(i, n, x, out, in, bias, false);
  }

  void matmul(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0, true);
    if (x.nhwc) return matmul_nhwc(i, n, x);
    if (x.rank != 2)
      fail(i, n,
           fmt::format("input \"{}\" has rank {}; ucplan maps MatMul of [batch, features] by a weight to a fully "
                       "connected layer",
                       n.input(0), x.rank));
    if (n.input_size() < 2 || is_activation(n.input(1)))
      fail(i, n, "the second operand is not a weight; ucplan maps MatMul to a fully connected layer");
    Dims b = known_dims(n.input(1));
    std::int64_t out = -1, in = -1;
    if (b.size() == 2) {
      out = b[1];
      in = b[0];
    } else if (!b.empty()) {
      fail(i, n, fmt::format("weight \"{}\" has dims {}, expected 2", n.input(1), dims_text(b)));
    }
    if (out < 1) out = out_features_from_output(i, n);
    claim_parameter(i, n, 1);
    add_fc(i, n, x, out, in, false, true);
  }

  // A Linear on the channels of NHWC pixels: a 1x1 convolution in ucplan's NCHW.
  void matmul_nhwc(int i, const onnx::NodeProto& n, const Value& x) {
    if (n.input_size() < 2 || is_activation(n.input(1)))
      fail(i, n, "the second operand is not a weight; ucplan maps MatMul to a learned linear layer");
    const Dims b = known_dims(n.input(1));
    if (b.size() != 2 || b[0] != x.shape.c)
      fail(i, n,
           fmt::format("weight \"{}\" has dims {}; a linear layer on {} channels takes [{}, out]", n.input(1),
                       dims_text(b), x.shape.c, x.shape.c));
    claim_parameter(i, n, 1);
    Layer l;
    l.type = LayerType::Conv;
    l.inputs = {x.ref};
    l.conv.out_channels = b[1];
    l.conv.bias = false;  // an Add of a bias may follow
    Value& v = add_layer(i, n, l, Shape{b[1], x.shape.h, x.shape.w}, 4, true);
    v.bias_layer = static_cast<int>(net_.layers.size()) - 1;
  }

  void add(int i, const onnx::NodeProto& n) {
    if (n.input_size() == 2) {  // + 1 in the Erf form of GELU
      for (int k = 0; k < 2; ++k) {
        double one = 0;
        if (is_activation(n.input(k)) && any_value(i, n, k).partial == Partial::GeluErf && scalar(n, 1 - k, &one) &&
            near(one, 1.0))
          return void(continue_gelu(n, any_value(i, n, k), Partial::GeluAdd));
      }
    }
    std::vector<const Value*> acts;
    std::vector<std::string> consts;
    for (int s = 0; s < n.input_size(); ++s) {
      if (is_activation(n.input(s)))
        acts.push_back(&activation(i, n, s, true));
      else
        consts.push_back(n.input(s));
    }
    if (acts.size() == 1 && consts.size() == 1 && acts[0]->bias_layer >= 0) {
      // MatMul + Add of a [features] constant: the fc layer's bias.
      const Dims d = known_dims(consts[0]);
      const Value x = *acts[0];
      const bool per_output = d.size() <= static_cast<std::size_t>(x.rank) && !d.empty() && d.back() == x.shape.c &&
                              std::all_of(d.begin(), d.end() - 1, [](std::int64_t e) { return e == 1; });
      if (!d.empty() && !per_output)
        fail(i, n,
             fmt::format("the bias \"{}\" has dims {}, but the MatMul before has {} outputs", consts[0], dims_text(d),
                         x.shape.c));
      const int bias_slot = is_activation(n.input(0)) ? 1 : 0;
      claim_parameter(i, n, bias_slot);
      Layer& biased = net_.layers[static_cast<std::size_t>(x.bias_layer)];
      (biased.type == LayerType::Conv ? biased.conv.bias : biased.fc.bias) = true;
      Value v = x;
      v.bias_layer = -1;
      alias(n, v);
      check_declared(i, n, v);
      return;
    }
    if (!consts.empty())
      fail(i, n,
           fmt::format("adds the constant \"{}\"; ucplan supports a constant only as the bias after a MatMul",
                       consts[0]));
    if (acts.size() == 1) return alias(n, *acts[0]);
    Layer l;
    l.type = LayerType::Add;
    for (const Value* a : acts)
      if (a->nhwc != acts[0]->nhwc) fail(i, n, "adds an NHWC tensor to an NCHW one");
    for (std::size_t a = 0; a < acts.size(); ++a) {
      if (!(acts[a]->shape == acts[0]->shape) || acts[a]->rank != acts[0]->rank)
        fail(i, n,
             fmt::format("adds \"{}\" of {} per sample to \"{}\" of {}; ucplan adds equal shapes (no broadcasting)",
                         n.input(static_cast<int>(a)), shape_text(acts[a]->shape), n.input(0),
                         shape_text(acts[0]->shape)));
      if (std::find(l.inputs.begin(), l.inputs.end(), acts[a]->ref) != l.inputs.end())
        fail(i, n,
             fmt::format("adds \"{}\" more than once; ucplan's add takes distinct inputs",
                         n.input(static_cast<int>(a))));
      l.inputs.push_back(acts[a]->ref);
    }
    add_layer(i, n, l, acts[0]->shape, acts[0]->rank, acts[0]->nhwc);
  }

  void concat(int i, const onnx::NodeProto& n) {
    Layer l;
    l.type = LayerType::Concat;
    Shape out;
    int rank = 0;
    for (int s = 0; s < n.input_size(); ++s) {
      const Value& x = activation(i, n, s);
      if (s == 0) {
        rank = x.rank;
        out = Shape{0, x.shape.h, x.shape.w};
      }
      if (x.rank != rank || x.shape.h != out.h || x.shape.w != out.w)
        fail(i, n,
             fmt::format("input \"{}\" of {} per sample does not join \"{}\" of {} on channels", n.input(s),
                         shape_text(x.shape), n.input(0), shape_text(activation(i, n, 0).shape)));
      if (x.rank == 2 && !(x.shape.h == 1 && x.shape.w == 1))
        fail(i, n,
             fmt::format("joins a flattened {} tensor; ucplan concatenates channels of [C, H, W] tensors",
                         shape_text(x.shape)));
      if (std::find(l.inputs.begin(), l.inputs.end(), x.ref) != l.inputs.end())
        fail(i, n, fmt::format("joins \"{}\" more than once; ucplan's concat takes distinct inputs", n.input(s)));
      out.c += x.shape.c;
      l.inputs.push_back(x.ref);
    }
    std::int64_t axis = attr_int(n, "axis", 1);
    if (axis < 0) axis += rank;
    if (axis != 1) fail(i, n, fmt::format("Concat on axis {}; ucplan concatenates channels (axis 1)", axis));
    if (n.input_size() == 1) return alias(n, activation(i, n, 0));
    add_layer(i, n, l, out, rank);
  }

  void dropout(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    Layer l;
    l.type = LayerType::Dropout;
    l.inputs = {x.ref};
    double ratio = attr_float(n, "ratio", 0.5);  // an attribute up to opset 11, an input since 12
    if (n.input_size() >= 2 && !n.input(1).empty()) {
      auto it = floats_.find(n.input(1));
      if (it == floats_.end()) fail(i, n, fmt::format("the ratio \"{}\" is not a constant", n.input(1)));
      ratio = it->second;
    }
    l.dropout.ratio = ratio;
    mark_secondary_outputs(n);  // the mask
    add_layer(i, n, l, x.shape, x.rank);
  }

  void lrn(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    expect_rank4(i, n, x);
    Layer l;
    l.type = LayerType::Lrn;
    l.inputs = {x.ref};
    // ONNX's LRN: y = x / (bias + alpha/size * sum over the window of x^2)^beta, as ucplan's.
    l.lrn.size = attr_int(n, "size", 0);
    if (l.lrn.size < 1) fail(i, n, "size is missing or not positive");
    // ONNX's window is [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]: centred only for an
    // odd size, as ucplan's (and ONNX Runtime refuses an even one).
    if (l.lrn.size % 2 == 0)
      fail(i, n, fmt::format("size {} is even: ONNX's window is then off centre, ucplan's is centred", l.lrn.size));
    l.lrn.alpha = attr_float(n, "alpha", 1e-4);
    l.lrn.beta = attr_float(n, "beta", 0.75);
    l.lrn.k = attr_float(n, "bias", 1.0);
    add_layer(i, n, l, x.shape, x.rank);
  }

  void softmax(int i, const onnx::NodeProto& n) {
    const Value x = activation(i, n, 0);
    // The axis (opset 13's default is the last; before, 1 with the axes after it flattened into one):
    // ucplan's loss is over the classes, axis 1 of [batch, classes] or [batch, classes, 1, 1].
    std::int64_t axis = attr_int(n, "axis", opset_ >= 13 ? -1 : 1);
    if (axis < 0) axis += x.rank;
    if (axis != 1)
      fail(i, n,
           fmt::format("a {} over axis {} of a rank-{} tensor{}; ucplan's loss is a softmax over the classes (axis 1)",
                       n.op_type(), axis, x.rank, attr(n, "axis") ? "" : fmt::format(" (opset {}'s default)", opset_)));
    if (!(x.shape.h == 1 && x.shape.w == 1))
      fail(i, n,
           fmt::format("a softmax over {} per sample; ucplan's loss is a softmax over [batch, classes]",
                       shape_text(x.shape)));
    Layer l;
    l.type = LayerType::SoftmaxLoss;
    l.inputs = {x.ref};
    add_layer(i, n, l, x.shape, x.rank).loss = true;
  }

  // Every graph output is a loss: a Softmax already is one; logits get a softmax_loss.
  void add_losses() {
    if (g_.output_size() == 0) throw UserError(file_, "graph.output", "the graph has no outputs");
    std::int64_t labels = 0;
    for (int o = 0; o < g_.output_size(); ++o) {
      const std::string& name = g_.output(o).name();
      auto it = values_.find(name);
      if (it == values_.end()) {
        if (secondary_.count(name) || constants_.count(name)) continue;
        throw UserError(file_, fmt::format("graph output \"{}\"", name), "is not produced by any node");
      }
      Value v = it->second;
      if (v.partial != Partial::None)
        throw UserError(
            file_, fmt::format("graph output \"{}\"", name),
            fmt::format("is the middle of a {} pattern, which ucplan imports as one layer",
                        v.partial <= Partial::GeluMul ? "GELU (x * (1 + erf(x / sqrt 2)) / 2)" : "channel shuffle"));
      if (v.ref == net_.input_name)
        throw UserError(file_, fmt::format("graph output \"{}\"", name), "is the graph's input");
      if (!v.loss) {
        Layer l;
        l.type = LayerType::SoftmaxLoss;
        l.inputs = {v.ref};
        onnx::NodeProto named;
        named.set_name("loss");
        l.name = unique_name(named, 0);
        expected_[l.name] = Shape{v.shape.elems(), 1, 1};
        push_layer(std::move(l), -1);
      }
      if (labels != 0 && labels != v.shape.elems())
        throw UserError(file_, fmt::format("graph output \"{}\"", name),
                        fmt::format("has {} classes, another output has {}; ucplan networks have one label count",
                                    v.shape.elems(), labels));
      if (v.shape.elems() > kMaxFeatures)
        throw UserError(file_, fmt::format("graph output \"{}\"", name),
                        fmt::format("has {} classes; ucplan networks have at most {}", v.shape.elems(), kMaxFeatures));
      labels = v.shape.elems();
    }
    if (labels == 0) throw UserError(file_, "graph.output", "no output is produced by the network's layers");
    net_.labels = labels;
  }

  onnx::ModelProto& model_;
  const onnx::GraphProto& g_;
  std::string file_;
  ImportOptions options_;
  Network net_;
  std::int64_t opset_ = 1;
  std::int64_t batch_ = -1;
  std::map<std::string, Dims> dims_;
  std::map<std::string, Dims> ints_;
  std::map<std::string, double> floats_;
  std::set<std::string> constants_;
  std::set<std::string> secondary_;
  std::map<std::string, Value> values_;
  std::set<std::string> used_names_;
  std::map<std::string, int> next_suffix_;     // unique_name: the next suffix to try per base name
  std::map<std::string, int> layer_at_;        // layer name -> index in net_.layers
  std::vector<int> layer_node_;                // per layer: the node that made it (-1: a loss added here)
  std::map<std::string, std::string> origin_;  // a weight's Transpose -> the weight
  std::map<std::string, int> parameter_user_;  // a parameter -> the node whose layer has it
  std::map<std::string, int> uses_;            // how many node inputs and graph outputs name each value
  std::map<std::string, Shape> expected_;
};

}  // namespace

Network import_onnx_bytes(const std::string& bytes, const std::string& file_for_errors, const ImportOptions& options) {
  onnx::ModelProto model;
  // Protobuf logs some parse problems on stderr; the user gets one line from us instead.
  google::protobuf::LogHandler* previous = google::protobuf::SetLogHandler(nullptr);
  bool parsed = model.ParseFromString(bytes);
  google::protobuf::SetLogHandler(previous);
  if (!parsed || !model.has_graph() || model.ir_version() <= 0)
    throw UserError(file_for_errors, "", "not an ONNX model (no ModelProto with a graph could be read from it)");
  if (model.graph().node_size() == 0) throw UserError(file_for_errors, "graph", "the graph has no nodes");
  return Importer(model, file_for_errors, options).run();
}

Network import_onnx_file(const std::string& path, const ImportOptions& options) {
  return import_onnx_bytes(read_file_bytes(path, "model file"), path, options);
}

}  // namespace ucplan
