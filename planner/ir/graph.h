// Pass 1 (DESIGN.md "Graph"): a network with its input as layer 0, inputs resolved to indices,
// shapes inferred, parameter counts, FLOPs and per-sample bytes. Validation of structure and
// shapes happens here: unknown input names, cycles, shape mismatches and bad parameters are
// UserErrors naming the file, the layer and the field.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "planner/model/network.h"
#include "planner/model/precision.h"

namespace ucplan {

// What one network may hold (build_graph refuses more, naming the layer): values of one tensor
// per sample and parameters of one layer (2^36 each, 256 GiB in FP32), multiply-adds of one layer
// per sample (2^40: bounds an im2col workspace too), and values and parameters of the whole
// network per sample (2^40). Every size in bytes is a product of these with a batch of at most
// kMaxBatch (2^16) and elements of at most 8 bytes, or a sum of such products over the network,
// so it stays far below 2^63. The largest networks in the zoo are 2^12-2^16 times below them.
constexpr std::int64_t kMaxTensorElems = std::int64_t{1} << 36;
constexpr double kMaxLayerMacs = double(std::int64_t{1} << 40);
constexpr std::int64_t kMaxNetworkElems = std::int64_t{1} << 40;

struct Shape {
  std::int64_t c = 0, h = 0, w = 0;
  std::int64_t elems() const { return c * h * w; }
  bool operator==(const Shape&) const = default;
};
std::string shape_text(const Shape& s);  // "64x56x56"

struct GraphLayer {
  Layer spec;                  // the file's layer (for the input: name and type Input)
  int file_index = -1;         // index in Network::layers, -1 for the input
  std::vector<int> inputs;     // graph layer indices
  std::vector<int> consumers;  // graph layer indices, in file order
  std::vector<Shape> in_shapes;
  Shape out;
  std::int64_t weight_elems = 0;  // learnable: conv/fc weight, bn gamma
  std::int64_t bias_elems = 0;    // learnable: conv/fc bias, bn beta
  // Per sample, in floating-point operations (a multiply-add counts 2).
  double forward_flops = 0;
  double backward_data_flops = 0;    // conv/fc: gradient w.r.t. the input; others: whole backward
  double backward_filter_flops = 0;  // conv/fc: gradient w.r.t. weights and bias
  // Extra per-layer state kept from forward to backward (bn: saved mean and inverse std;
  // dropout: the mask, one byte per element): bytes = aux_bytes_per_sample * b + aux_bytes_fixed.
  std::int64_t aux_bytes_per_sample = 0;
  std::int64_t aux_bytes_fixed = 0;

  const std::string& name() const { return spec.name; }
  LayerType type() const { return spec.type; }
  std::int64_t params() const { return weight_elems + bias_elems; }
  bool has_weights() const { return params() > 0; }
  bool is_sink() const { return consumers.empty(); }
};

struct Graph {
  std::string file;  // for error messages
  Network net;
  std::vector<GraphLayer> layers;  // [0] is the input; then the file's layers in file order
  std::vector<int> topo_order;     // a topological order of all layers, input first
  int dtype_bytes = 4;             // of an FP32 element: master weights, their gradients, statistics
  Precision precision = Precision::FP32;

  int index_of(const std::string& name) const;  // -1 when absent
  // Layer indices by name, as build_graph makes them (index_of searches the layers where a graph
  // made otherwise has none).
  std::unordered_map<std::string, int> by_name;
  std::int64_t total_params() const;
  // Element types, in one place (precision.h): a layer's output Y_l and its gradient dY_l are in
  // the precision's storage type, except the loss's output (probabilities), which stays FP32 as
  // in autocast; weights, weight gradients, bn statistics and labels are FP32 / int32.
  Storage activation_storage(int layer) const;
  Storage gradient_storage(int layer) const;
  std::int64_t out_bytes_per_sample(int layer) const;       // Y_l per sample
  std::int64_t gradient_bytes_per_sample(int layer) const;  // dY_l per sample
  // The weight tensor W_l: FP32 master weights (+ bias), followed for conv and fc at a
  // low-precision storage by their copy in the storage type, which forward and backward-data
  // read and every update refreshes (what autocast's weight cast cache holds).
  std::int64_t weight_bytes(int layer) const;
  std::int64_t weight_copy_bytes(int layer) const;  // the copy's part of weight_bytes
  bool has_loss() const;
  bool has_batch_norm() const;
  std::int64_t conv_count() const;
};

Graph build_graph(const Network& net, const std::string& file_for_errors, Precision precision = Precision::FP32);

// A layer's cost signature: type + input shapes + params + dtype, so repeated layers (ResNet's
// identical blocks) are measured once. Batch size is not part of it.
std::string layer_signature(const Graph& g, int layer);

}  // namespace ucplan
