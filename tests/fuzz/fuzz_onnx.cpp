// libFuzzer harness: the ONNX importer on any bytes (protobuf parsing, every operator's
// attributes and shapes), then the graph and the task graph of what it returns, and the network
// read back through the network loader. `ucplan import` reads files from anywhere, exported by
// tools ucplan does not control. Byte-level mutation of a protobuf rarely gets past the parser
// with a model the importer walks far, so the mutator works on the parsed ModelProto half of the
// time: an operator's type, an attribute, an input, a node or a dimension changed to a value at
// an edge (0, -1, 2^31, 2^62...), as files from a broken or hostile exporter would hold them.
#include <cstdio>
#include <random>

#include <onnx/onnx_pb.h>

#include "planner/import/onnx_import.h"
#include "planner/ir/graph.h"
#include "planner/ir/route.h"
#include "planner/ir/tasks.h"
#include "tests/fuzz/fuzz_loader.h"

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace {

// clang-format off
const char* const kOps[] = {
    "Conv", "BatchNormalization", "Relu", "Sigmoid", "HardSigmoid", "HardSwish", "Clip", "Gelu", "Erf", "Mul",
    "Div", "Add", "Sum", "Sub", "LayerNormalization", "Transpose", "MaxPool", "AveragePool", "GlobalAveragePool",
    "GlobalMaxPool", "ReduceMean", "Gemm", "MatMul", "Flatten", "Reshape", "Concat", "Split", "Slice", "Dropout",
    "LRN", "Softmax", "LogSoftmax", "Identity", "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Cast"};
const std::int64_t kEdges[] = {
    0, 1, 2, 3, -1, -2, 7, 64, 1 << 16, std::int64_t{1} << 31, std::int64_t{1} << 40, std::int64_t{1} << 62,
    INT64_MAX, INT64_MIN};
// clang-format on

template <class Rng>
std::int64_t edge(Rng& rng) {
  return kEdges[rng() % std::size(kEdges)];
}

template <class Rng>
void mutate_dims(google::protobuf::RepeatedField<std::int64_t>* dims, Rng& rng) {
  if (dims->empty() || rng() % 4 == 0) {
    dims->Add(edge(rng));
  } else if (rng() % 4 == 0) {
    dims->RemoveLast();
  } else {
    dims->Set(static_cast<int>(rng() % dims->size()), edge(rng));
  }
}

template <class Rng>
void mutate_model(onnx::ModelProto& m, Rng& rng) {
  onnx::GraphProto* g = m.mutable_graph();
  switch (rng() % 8) {
    case 0:
      if (g->initializer_size() > 0)
        mutate_dims(g->mutable_initializer(static_cast<int>(rng() % g->initializer_size()))->mutable_dims(), rng);
      return;
    case 1: {  // a declared shape: a graph input or a value_info
      auto* v = rng() % 2 && g->input_size() > 0 ? g->mutable_input(static_cast<int>(rng() % g->input_size()))
                : g->value_info_size() > 0       ? g->mutable_value_info(static_cast<int>(rng() % g->value_info_size()))
                                                 : nullptr;
      if (!v) return;
      auto* shape = v->mutable_type()->mutable_tensor_type()->mutable_shape();
      if (shape->dim_size() == 0 || rng() % 4 == 0)
        shape->add_dim()->set_dim_value(edge(rng));
      else
        shape->mutable_dim(static_cast<int>(rng() % shape->dim_size()))->set_dim_value(edge(rng));
      return;
    }
    case 2:
      if (!m.opset_import().empty()) m.mutable_opset_import(0)->set_version(static_cast<std::int64_t>(rng() % 24));
      return;
    default:
      break;
  }
  if (g->node_size() == 0) return;
  const int k = static_cast<int>(rng() % g->node_size());
  onnx::NodeProto* n = g->mutable_node(k);
  switch (rng() % 7) {
    case 0:
      n->set_op_type(kOps[rng() % std::size(kOps)]);
      return;
    case 1: {  // an attribute's value(s)
      if (n->attribute_size() == 0) return;
      onnx::AttributeProto* a = n->mutable_attribute(static_cast<int>(rng() % n->attribute_size()));
      if (a->ints_size() > 0 && rng() % 2)
        mutate_dims(a->mutable_ints(), rng);
      else if (rng() % 2)
        a->set_i(edge(rng));
      else
        a->set_f(static_cast<float>(edge(rng)));
      if (a->has_t()) mutate_dims(a->mutable_t()->mutable_dims(), rng);
      return;
    }
    case 2:
      if (n->attribute_size() > 0)
        n->mutable_attribute()->DeleteSubrange(static_cast<int>(rng() % n->attribute_size()), 1);
      return;
    case 3: {  // an input named after another value (possibly a later one: a cycle or a forward use)
      const onnx::NodeProto& other = g->node(static_cast<int>(rng() % g->node_size()));
      const std::string name = other.output_size() > 0 ? other.output(0) : std::string();
      if (n->input_size() > 0 && rng() % 3)
        n->set_input(static_cast<int>(rng() % n->input_size()), name);
      else
        n->add_input(name);
      return;
    }
    case 4:
      if (n->input_size() > 0) n->mutable_input()->DeleteSubrange(static_cast<int>(rng() % n->input_size()), 1);
      return;
    case 5:
      g->mutable_node()->DeleteSubrange(k, 1);
      return;
    default:
      *g->add_node() = g->node(k);  // the same outputs written twice
      return;
  }
}

}  // namespace

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  std::mt19937 rng(seed);
  onnx::ModelProto m;
  if (rng() % 2 == 0 || !m.ParseFromArray(data, static_cast<int>(size))) return LLVMFuzzerMutate(data, size, max_size);
  const int steps = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < steps; ++i) mutate_model(m, rng);
  const std::string out = m.SerializeAsString();
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ucplan::fuzz::run_loader(data, size, [](const std::string& path) {
    const ucplan::Network net = ucplan::import_onnx_file(path, {});
    const ucplan::Graph g = ucplan::build_graph(net, path);
    ucplan::build_tasks(g, ucplan::construct_route(g));
    // What `ucplan import` writes, every other command must read: a network the importer accepts
    // and the network loader refuses is a finding too.
    try {
      ucplan::build_graph(ucplan::parse_network_text(ucplan::network_to_json_text(net), "reloaded"), "reloaded");
    } catch (const ucplan::UserError& e) {
      std::fprintf(stderr, "imported, then refused on reading back: %s\n", e.what());
      std::abort();
    }
  });
}
