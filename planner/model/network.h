// The network (`ucplan-network/1`): a named input of shape (C, H, W) per sample, a label count,
// a dtype, and a DAG of layers in the order the file lists them. Plain data; shapes are inferred
// by build_graph() in graph.h. The JSON format is specified by schemas/network.schema.json.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ucplan {

enum class DType { Float32 };
int dtype_bytes(DType t);
const char* dtype_name(DType t);

// The layer types are listed once, in layer_types.def. `Input` never appears in a file:
// build_graph() adds the network input as layer 0 of a graph.
enum class LayerType {
#define UCPLAN_LAYER_TYPE(Enum, name, min_inputs, max_inputs, pointwise) Enum,
#include "layer_types.def"
#undef UCPLAN_LAYER_TYPE
};
const char* layer_type_name(LayerType t);  // "conv", "relu", ... as written in files
bool parse_layer_type(const std::string& name, LayerType* out);
std::string layer_type_names();  // every type a file may use, comma separated, for messages
int layer_min_inputs(LayerType t);
int layer_max_inputs(LayerType t);
// Point-wise activations: one input, an output of its shape, y = f(x) per element.
bool is_pointwise(LayerType t);

enum class PoolMode { Max, Avg };

struct ConvParams {
  std::int64_t out_channels = 0;
  std::array<std::int64_t, 2> kernel{1, 1};  // (h, w)
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> pad{0, 0};
  std::array<std::int64_t, 2> dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;
};

struct PoolParams {
  PoolMode mode = PoolMode::Max;
  std::array<std::int64_t, 2> kernel{1, 1};
  std::array<std::int64_t, 2> stride{1, 1};
  std::array<std::int64_t, 2> pad{0, 0};
  bool global = false;            // kernel = whole input plane
  bool ceil_mode = false;         // Caffe-style output size rounding
  bool count_include_pad = true;  // average pooling divides by the full window (PyTorch default)
};

struct BatchNormParams {
  double eps = 1e-5;
};

// Cross-channel LRN as in Caffe/PyTorch: y = x / (k + alpha/size * sum_{window} x^2)^beta.
struct LrnParams {
  std::int64_t size = 5;
  double alpha = 1e-4;
  double beta = 0.75;
  double k = 1.0;
};

struct FcParams {
  std::int64_t out_features = 0;
  bool bias = true;
};

struct DropoutParams {
  double ratio = 0.5;
};

// y = clamp(alpha * x + beta, 0, 1). PyTorch's Hardsigmoid is alpha 1/6, beta 1/2 (ONNX's
// HardSigmoid defaults to alpha 0.2).
struct HardSigmoidParams {
  double alpha = 1.0 / 6.0;
  double beta = 0.5;
};

// y = min(max(x, min), max): ReLU6 is clip(0, 6), Hardtanh clip(-1, 1).
struct ClipParams {
  double min = 0;
  double max = 6;
};

// y = x * Phi(x) (erf, PyTorch's default), or its tanh approximation.
struct GeluParams {
  bool tanh = false;
};

// Layer norm over the channels of each sample's pixel (ConvNeXt's LayerNorm2d, or LayerNorm
// over the last axis between NCHW <-> NHWC permutes), with a learned gamma and beta per channel.
struct LayerNormParams {
  double eps = 1e-5;
};

// ShuffleNet's channel shuffle: channels viewed as [groups, C / groups], transposed.
struct ChannelShuffleParams {
  std::int64_t groups = 1;
};

// Channels [begin, end) of the input (ShuffleNet's split, torch.chunk on channels).
struct SliceParams {
  std::int64_t begin = 0;
  std::int64_t end = 0;
};

struct Layer {
  std::string name;
  LayerType type = LayerType::Relu;
  std::vector<std::string> inputs;
  // Only the member of the layer's type is meaningful.
  ConvParams conv;
  PoolParams pool;
  BatchNormParams bn;
  LrnParams lrn;
  FcParams fc;
  DropoutParams dropout;
  HardSigmoidParams hardsigmoid;
  ClipParams clip;
  GeluParams gelu;
  LayerNormParams ln;
  ChannelShuffleParams shuffle;
  SliceParams slice;
};

// The largest mini-batch ucplan takes (profile, compile, plans): larger ones are not trained at
// once, and their profiles and compiles would take minutes and gigabytes for nothing.
constexpr std::int64_t kMaxBatch = 65536;
// The largest channel count, spatial size, window, stride, padding or dilation a network may
// have (its loaders, JSON and ONNX, refuse larger ones): products of a few stay far from overflow.
constexpr std::int64_t kMaxDim = 1 << 20;
// The most classes (labels) and a fully connected layer's outputs.
constexpr std::int64_t kMaxFeatures = std::int64_t{1} << 30;

struct Network {
  std::string name;
  std::string description;  // optional, free text
  std::string source;       // optional: the reference definition this network follows
  std::string input_name = "data";
  std::array<std::int64_t, 3> input_shape{0, 0, 0};  // C, H, W per sample
  std::int64_t labels = 0;                           // classes of the softmax_loss layer(s)
  DType dtype = DType::Float32;
  std::vector<Layer> layers;
};

// What is wrong with a layer's own real-valued parameters, if anything: the field (its JSON
// key; empty for the layer as a whole) and why. The network loader and the ONNX importer refuse
// what it names, so what `ucplan import` writes always reads back. Non-finite values are wrong
// too: JSON cannot hold them.
struct LayerParamError {
  std::string field, reason;
  double value = 0;  // the field's (meaningless when field is empty)
};
std::optional<LayerParamError> find_layer_param_error(const Layer& l);

// Reads a network file: any malformed content is a UserError naming file, JSON path and reason.
// Structural checks that need shapes (unknown input names, cycles, shape mismatches) are made
// by build_graph(), which names the layer and the field.
Network load_network(const std::string& path);
Network parse_network_text(const std::string& text, const std::string& file_for_errors);
// Canonical JSON text of a network (what `plan.network` embeds and what hashes are taken of).
std::string network_to_json_text(const Network& net);

// NETWORK arguments are a zoo name ("resnet50", "deepbench/conv07") or a path to a file.
// Throws UserError when neither exists, listing where the zoo was looked for.
std::string resolve_network_path(const std::string& name_or_path);
// The zoo folder: $UCPLAN_NETWORKS, else the source tree's networks/ folder.
std::string zoo_directory();

}  // namespace ucplan
