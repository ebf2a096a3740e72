#include "network.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "errors.h"
#include "network_json.h"

#ifndef UCPLAN_SOURCE_DIR
#define UCPLAN_SOURCE_DIR "."
#endif

namespace ucplan {

int dtype_bytes(DType) { return 4; }
const char* dtype_name(DType) { return "float32"; }

namespace {
struct TypeRow {
  LayerType type;
  const char* name;
  int min_inputs, max_inputs;
  bool pointwise;
};
constexpr TypeRow kTypes[] = {
#define UCPLAN_LAYER_TYPE(Enum, name, min_inputs, max_inputs, pointwise) \
  {LayerType::Enum, name, min_inputs, max_inputs, pointwise},
#include "layer_types.def"
#undef UCPLAN_LAYER_TYPE
};
const TypeRow& row(LayerType t) { return kTypes[static_cast<int>(t)]; }

// A spatial parameter written either as one integer or as [h, w].
std::array<std::int64_t, 2> read_pair(const JsonReader& r, std::int64_t min) {
  if (r.is_array()) {
    auto items = r.array(2, 2);
    return {items[0].integer(min, kMaxDim), items[1].integer(min, kMaxDim)};
  }
  if (!r.is_number()) r.fail("expected an integer or [height, width], got " + json_type_name(r.raw()));
  std::int64_t v = r.integer(min, kMaxDim);
  return {v, v};
}

std::array<std::int64_t, 2> read_pair_or(const JsonReader& layer, std::string_view key,
                                         std::array<std::int64_t, 2> fallback, std::int64_t min) {
  auto f = layer.find(key);
  return f ? read_pair(*f, min) : fallback;
}

OrderedJson pair_json(const std::array<std::int64_t, 2>& p) {
  if (p[0] == p[1]) return p[0];
  return OrderedJson::array({p[0], p[1]});
}

}  // namespace

std::optional<LayerParamError> find_layer_param_error(const Layer& l) {
  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  auto non_negative = [](double v) { return std::isfinite(v) && v >= 0; };
  switch (l.type) {
    case LayerType::BatchNorm:
      if (!positive(l.bn.eps)) return LayerParamError{"eps", "must be positive", l.bn.eps};
      break;
    case LayerType::LayerNorm:
      if (!positive(l.ln.eps)) return LayerParamError{"eps", "must be positive", l.ln.eps};
      break;
    case LayerType::Lrn:
      if (!positive(l.lrn.k)) return LayerParamError{"k", "must be positive", l.lrn.k};
      if (!non_negative(l.lrn.alpha)) return LayerParamError{"alpha", "must not be negative", l.lrn.alpha};
      if (!non_negative(l.lrn.beta)) return LayerParamError{"beta", "must not be negative", l.lrn.beta};
      break;
    case LayerType::Dropout:
      if (!(non_negative(l.dropout.ratio) && l.dropout.ratio < 1))
        return LayerParamError{"ratio", "must be in [0, 1)", l.dropout.ratio};
      break;
    case LayerType::HardSigmoid:
      if (!positive(l.hardsigmoid.alpha)) return LayerParamError{"alpha", "must be positive", l.hardsigmoid.alpha};
      if (!std::isfinite(l.hardsigmoid.beta)) return LayerParamError{"beta", "must be finite", l.hardsigmoid.beta};
      break;
    case LayerType::Clip:
      if (!(std::isfinite(l.clip.min) && std::isfinite(l.clip.max) && l.clip.min < l.clip.max))
        return LayerParamError{"", fmt::format("min {} must be less than max {}", l.clip.min, l.clip.max)};
      break;
    default:
      break;
  }
  return std::nullopt;
}

namespace {

// A name is printed in reports, tables and traces: not empty, and without control characters
// (a newline or a terminal escape in a layer name broke inspect's table).
std::string read_name(const JsonReader& r) {
  std::string name = r.string();
  if (name.empty()) r.fail("must not be empty");
  if (std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    r.fail(fmt::format("\"{}\" holds a control character", one_line(name)));
  return name;
}

Layer read_layer(const JsonReader& at_index) {
  Layer l;
  l.name = read_name(at_index.at("name"));
  // From here on errors name the layer as build_graph() does: "layers[3] (conv2).kernel".
  const JsonReader r(at_index.raw(), at_index.file(), fmt::format("{} ({})", at_index.path(), l.name));
  std::string type = r.at("type").string();
  if (!parse_layer_type(type, &l.type) || l.type == LayerType::Input)
    r.at("type").fail(fmt::format("unknown layer type \"{}\" (known: {})", type, layer_type_names()));
  for (const auto& in : r.at("inputs").array(1, 1 << 16)) l.inputs.push_back(in.string());
  switch (l.type) {
    case LayerType::Conv: {
      r.allow_only({"name", "type", "inputs", "out_channels", "kernel", "stride", "pad", "dilation", "groups", "bias"});
      l.conv.out_channels = r.at("out_channels").integer(1, kMaxDim);
      l.conv.kernel = read_pair(r.at("kernel"), 1);
      l.conv.stride = read_pair_or(r, "stride", {1, 1}, 1);
      l.conv.pad = read_pair_or(r, "pad", {0, 0}, 0);
      l.conv.dilation = read_pair_or(r, "dilation", {1, 1}, 1);
      l.conv.groups = r.integer_or("groups", 1, 1, kMaxDim);
      l.conv.bias = r.boolean_or("bias", true);
      break;
    }
    case LayerType::Pool: {
      r.allow_only(
          {"name", "type", "inputs", "mode", "kernel", "stride", "pad", "global", "ceil_mode", "count_include_pad"});
      std::string mode = r.at("mode").string();
      if (mode == "max")
        l.pool.mode = PoolMode::Max;
      else if (mode == "avg")
        l.pool.mode = PoolMode::Avg;
      else
        r.at("mode").fail(fmt::format("must be \"max\" or \"avg\", got \"{}\"", mode));
      l.pool.global = r.boolean_or("global", false);
      if (l.pool.global) {
        if (r.has("kernel") || r.has("stride") || r.has("pad")) r.fail("a global pool takes no kernel, stride or pad");
      } else {
        l.pool.kernel = read_pair(r.at("kernel"), 1);
        l.pool.stride = read_pair_or(r, "stride", l.pool.kernel, 1);
        l.pool.pad = read_pair_or(r, "pad", {0, 0}, 0);
      }
      l.pool.ceil_mode = r.boolean_or("ceil_mode", false);
      l.pool.count_include_pad = r.boolean_or("count_include_pad", true);
      break;
    }
    case LayerType::BatchNorm: {
      r.allow_only({"name", "type", "inputs", "eps"});
      l.bn.eps = r.number_or("eps", 1e-5);
      break;
    }
    case LayerType::Lrn: {
      r.allow_only({"name", "type", "inputs", "size", "alpha", "beta", "k"});
      l.lrn.size = r.integer_or("size", 5, 1, 1025);
      l.lrn.alpha = r.number_or("alpha", 1e-4);
      l.lrn.beta = r.number_or("beta", 0.75);
      l.lrn.k = r.number_or("k", 1.0);
      break;
    }
    case LayerType::Fc: {
      r.allow_only({"name", "type", "inputs", "out_features", "bias"});
      l.fc.out_features = r.at("out_features").integer(1, kMaxFeatures);
      l.fc.bias = r.boolean_or("bias", true);
      break;
    }
    case LayerType::Dropout: {
      r.allow_only({"name", "type", "inputs", "ratio"});
      l.dropout.ratio = r.number_or("ratio", 0.5);
      break;
    }
    case LayerType::HardSigmoid: {
      r.allow_only({"name", "type", "inputs", "alpha", "beta"});
      l.hardsigmoid.alpha = r.number_or("alpha", 1.0 / 6.0);
      l.hardsigmoid.beta = r.number_or("beta", 0.5);
      break;
    }
    case LayerType::Clip: {
      r.allow_only({"name", "type", "inputs", "min", "max"});
      l.clip.min = r.number_or("min", 0.0);
      l.clip.max = r.number_or("max", 6.0);
      break;
    }
    case LayerType::Gelu: {
      r.allow_only({"name", "type", "inputs", "approximate"});
      std::string a = r.string_or("approximate", "none");
      if (a != "none" && a != "tanh")
        r.at("approximate").fail(fmt::format("must be \"none\" or \"tanh\", got \"{}\"", a));
      l.gelu.tanh = a == "tanh";
      break;
    }
    case LayerType::LayerNorm: {
      r.allow_only({"name", "type", "inputs", "eps"});
      l.ln.eps = r.number_or("eps", 1e-5);
      break;
    }
    case LayerType::ChannelShuffle: {
      r.allow_only({"name", "type", "inputs", "groups"});
      l.shuffle.groups = r.at("groups").integer(1, kMaxDim);
      break;
    }
    case LayerType::Slice: {
      r.allow_only({"name", "type", "inputs", "begin", "end"});
      l.slice.begin = r.at("begin").integer(0, kMaxDim);
      l.slice.end = r.at("end").integer(1, kMaxDim);
      if (l.slice.end <= l.slice.begin) r.at("end").fail(fmt::format("must be greater than begin {}", l.slice.begin));
      break;
    }
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
      r.allow_only({"name", "type", "inputs"});
      break;
  }
  if (const auto e = find_layer_param_error(l)) (e->field.empty() ? r : r.at(e->field)).fail(e->reason);
  return l;
}

}  // namespace

const char* layer_type_name(LayerType t) { return row(t).name; }
int layer_min_inputs(LayerType t) { return row(t).min_inputs; }
int layer_max_inputs(LayerType t) { return row(t).max_inputs; }
bool is_pointwise(LayerType t) { return row(t).pointwise; }

bool parse_layer_type(const std::string& name, LayerType* out) {
  for (const auto& r : kTypes) {
    if (name == r.name) {
      *out = r.type;
      return true;
    }
  }
  return false;
}

std::string layer_type_names() {
  std::string s;
  for (const auto& r : kTypes)
    if (r.type != LayerType::Input) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

Network network_from_json(const JsonReader& r) {
  r.expect_format("network");
  r.allow_only({"format", "name", "description", "source", "input", "labels", "dtype", "layers"});
  Network net;
  net.name = read_name(r.at("name"));
  net.description = r.string_or("description", "");
  net.source = r.string_or("source", "");
  auto in = r.at("input");
  in.allow_only({"name", "shape"});
  net.input_name = in.has("name") ? read_name(in.at("name")) : "data";
  auto shape = in.at("shape").array(3, 3);
  for (int i = 0; i < 3; ++i) net.input_shape[i] = shape[i].integer(1, kMaxDim);
  net.labels = r.at("labels").integer(1, kMaxFeatures);
  std::string dtype = r.string_or("dtype", "float32");
  if (dtype != "float32") r.at("dtype").fail(fmt::format("only \"float32\" is supported, got \"{}\"", dtype));
  auto layers = r.at("layers").array(1, 1 << 22);
  net.layers.reserve(layers.size());
  for (const auto& lr : layers) net.layers.push_back(read_layer(lr));
  return net;
}

OrderedJson network_to_json(const Network& net) {
  OrderedJson j;
  j["format"] = "ucplan-network/1";
  j["name"] = net.name;
  if (!net.description.empty()) j["description"] = net.description;
  if (!net.source.empty()) j["source"] = net.source;
  j["input"] = {{"name", net.input_name}, {"shape", {net.input_shape[0], net.input_shape[1], net.input_shape[2]}}};
  j["labels"] = net.labels;
  j["dtype"] = dtype_name(net.dtype);
  OrderedJson layers = OrderedJson::array();
  for (const auto& l : net.layers) {
    OrderedJson lj;
    lj["name"] = l.name;
    lj["type"] = layer_type_name(l.type);
    lj["inputs"] = l.inputs;
    switch (l.type) {
      case LayerType::Conv:
        lj["out_channels"] = l.conv.out_channels;
        lj["kernel"] = pair_json(l.conv.kernel);
        lj["stride"] = pair_json(l.conv.stride);
        lj["pad"] = pair_json(l.conv.pad);
        if (l.conv.dilation != std::array<std::int64_t, 2>{1, 1}) lj["dilation"] = pair_json(l.conv.dilation);
        if (l.conv.groups != 1) lj["groups"] = l.conv.groups;
        lj["bias"] = l.conv.bias;
        break;
      case LayerType::Pool:
        lj["mode"] = l.pool.mode == PoolMode::Max ? "max" : "avg";
        if (l.pool.global) {
          lj["global"] = true;
        } else {
          lj["kernel"] = pair_json(l.pool.kernel);
          lj["stride"] = pair_json(l.pool.stride);
          lj["pad"] = pair_json(l.pool.pad);
        }
        if (l.pool.ceil_mode) lj["ceil_mode"] = true;
        if (!l.pool.count_include_pad) lj["count_include_pad"] = false;
        break;
      case LayerType::BatchNorm:
        lj["eps"] = l.bn.eps;
        break;
      case LayerType::Lrn:
        lj["size"] = l.lrn.size;
        lj["alpha"] = l.lrn.alpha;
        lj["beta"] = l.lrn.beta;
        lj["k"] = l.lrn.k;
        break;
      case LayerType::Fc:
        lj["out_features"] = l.fc.out_features;
        lj["bias"] = l.fc.bias;
        break;
      case LayerType::Dropout:
        lj["ratio"] = l.dropout.ratio;
        break;
      case LayerType::HardSigmoid:
        lj["alpha"] = l.hardsigmoid.alpha;
        lj["beta"] = l.hardsigmoid.beta;
        break;
      case LayerType::Clip:
        lj["min"] = l.clip.min;
        lj["max"] = l.clip.max;
        break;
      case LayerType::Gelu:
        if (l.gelu.tanh) lj["approximate"] = "tanh";
        break;
      case LayerType::LayerNorm:
        lj["eps"] = l.ln.eps;
        break;
      case LayerType::ChannelShuffle:
        lj["groups"] = l.shuffle.groups;
        break;
      case LayerType::Slice:
        lj["begin"] = l.slice.begin;
        lj["end"] = l.slice.end;
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
    layers.push_back(std::move(lj));
  }
  j["layers"] = std::move(layers);
  return j;
}

Network load_network(const std::string& path) {
  Json j = load_json_file(path);
  return network_from_json(JsonReader(j, path, ""));
}

Network parse_network_text(const std::string& text, const std::string& file_for_errors) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw UserError(file_for_errors, "", std::string("invalid JSON: ") + e.what());
  }
  return network_from_json(JsonReader(j, file_for_errors, ""));
}

std::string network_to_json_text(const Network& net) { return dump_json(network_to_json(net)); }

std::string zoo_directory() {
  if (const char* env = std::getenv("UCPLAN_NETWORKS"); env && *env) return env;
  return std::string(UCPLAN_SOURCE_DIR) + "/networks";
}

std::string resolve_network_path(const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(name, ec)) return name;
  bool looks_like_path =
      name.find('/') != std::string::npos && name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
  if (looks_like_path)
    throw UserError(name, "",
                    fs::is_directory(name, ec) ? "is a folder, not a network file"
                    : fs::exists(name, ec)     ? "is not a regular file (a network is read from a file)"
                                               : "no such file");
  std::string zoo = zoo_directory();
  std::string candidate = zoo + "/" + name + ".json";
  if (fs::is_regular_file(candidate, ec)) return candidate;
  throw UserError("", "NETWORK",
                  fmt::format("\"{}\" is neither a file nor a zoo network in {} (see `ucplan networks`)", name, zoo));
}

}  // namespace ucplan
