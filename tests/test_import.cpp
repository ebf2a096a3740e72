// ONNX import (planner/import/) against independent descriptions: each ONNX model is built here
// in C++ (ModelProto by hand, as PyTorch's exporter writes them: kernel_shape on every Conv,
// Flatten or a constant Reshape before the classifier) and its import must equal a ucplan network
// written by hand in JSON: the same layers, types, inputs, per-layer output shapes and parameter
// counts (layer_signature() covers type, input shapes and parameters). Every model is imported
// with its weights in four forms: with data, dims only (stripped), external data, and as graph
// inputs (torch.onnx.export(export_params=False)); never read, they must not matter.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include "planner/import/onnx_import.h"
#include "planner/model/errors.h"
#include "planner/ir/graph.h"
#include "planner/model/network.h"

using namespace ucplan;

namespace {

enum class Weights { Data, DimsOnly, External, GraphInput, Absent };
const Weights kAllForms[] = {Weights::Data, Weights::DimsOnly, Weights::External, Weights::GraphInput};

// A ModelProto under construction, opset 13 (PyTorch's default export opset at 1.12's time).
struct ModelBuilder {
  onnx::ModelProto model;
  onnx::GraphProto* g;
  Weights form;

  explicit ModelBuilder(Weights f, const std::string& name = "test") : g(model.mutable_graph()), form(f) {
    model.set_ir_version(8);
    model.set_producer_name("test_import");
    auto* op = model.add_opset_import();
    op->set_domain("");
    op->set_version(13);
    g->set_name(name);
  }
  static void set_type(onnx::ValueInfoProto* v, const std::string& name, const std::vector<std::int64_t>& dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = t->mutable_shape();
    for (auto d : dims) {
      auto* dim = shape->add_dim();
      if (d < 0)
        dim->set_dim_param("batch");  // symbolic, as a dynamic-batch export writes it
      else
        dim->set_dim_value(d);
    }
  }
  void input(const std::string& name, const std::vector<std::int64_t>& dims) { set_type(g->add_input(), name, dims); }
  void output(const std::string& name) {
    auto* v = g->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  void value_info(const std::string& name, const std::vector<std::int64_t>& dims) {
    set_type(g->add_value_info(), name, dims);
  }
  void weight(const std::string& name, const std::vector<std::int64_t>& dims) {
    if (form == Weights::Absent) return;
    if (form == Weights::GraphInput) return input(name, dims);
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    std::int64_t n = 1;
    for (auto d : dims) {
      t->add_dims(d);
      n *= d;
    }
    if (form == Weights::Data) t->set_raw_data(std::string(static_cast<std::size_t>(n) * 4, '\0'));
    if (form == Weights::External) {
      t->set_data_location(onnx::TensorProto::EXTERNAL);
      auto* kv = t->add_external_data();
      kv->set_key("location");
      kv->set_value("weights.bin");
    }
  }
  void int64_constant(const std::string& name, const std::vector<std::int64_t>& values) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<std::int64_t>(values.size()));
    for (auto v : values) t->add_int64_data(v);
  }
  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& ins,
                        const std::vector<std::string>& outs, const std::string& name) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& s : ins) n->add_input(s);
    for (const auto& s : outs) n->add_output(s);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const std::string& name, std::int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void real(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  // Conv as torch.onnx writes it: W [M, C/g, k, k], kernel_shape, strides, pads, dilations, group.
  void conv(const std::string& name, const std::string& x, std::int64_t in_c, std::int64_t out_c, std::int64_t k,
            std::int64_t stride, std::int64_t pad, bool bias, std::int64_t groups = 1, std::int64_t dilation = 1) {
    weight(name + ".weight", {out_c, in_c / groups, k, k});
    std::vector<std::string> ins{x, name + ".weight"};
    if (bias) {
      weight(name + ".bias", {out_c});
      ins.push_back(name + ".bias");
    }
    auto* n = node("Conv", ins, {name}, name);
    ints(n, "kernel_shape", {k, k});
    ints(n, "strides", {stride, stride});
    ints(n, "pads", {pad, pad, pad, pad});
    ints(n, "dilations", {dilation, dilation});
    integer(n, "group", groups);
  }
  void bn(const std::string& name, const std::string& x, std::int64_t c) {
    for (const char* p : {".weight", ".bias", ".running_mean", ".running_var"}) weight(name + p, {c});
    auto* n = node("BatchNormalization",
                   {x, name + ".weight", name + ".bias", name + ".running_mean", name + ".running_var"}, {name}, name);
    real(n, "epsilon", 1e-5f);
  }
  void relu(const std::string& name, const std::string& x) { node("Relu", {x}, {name}, name); }
  void pool(const std::string& op, const std::string& name, const std::string& x, std::int64_t k, std::int64_t s,
            std::int64_t p, bool ceil = false) {
    auto* n = node(op, {x}, {name}, name);
    ints(n, "kernel_shape", {k, k});
    ints(n, "strides", {s, s});
    ints(n, "pads", {p, p, p, p});
    if (ceil) integer(n, "ceil_mode", 1);
  }
  void gemm(const std::string& name, const std::string& x, std::int64_t in, std::int64_t out) {
    weight(name + ".weight", {out, in});
    weight(name + ".bias", {out});
    auto* n = node("Gemm", {x, name + ".weight", name + ".bias"}, {name}, name);
    real(n, "alpha", 1.0f);
    real(n, "beta", 1.0f);
    integer(n, "transB", 1);
  }
  std::string bytes() const { return model.SerializeAsString(); }
};

Network import(const ModelBuilder& b, const std::string& file = "model.onnx") {
  return import_onnx_bytes(b.bytes(), file, {});
}

// The imported network must be the hand-written one: layer by layer the same name, type, inputs,
// output shape and signature (type + input shapes + parameters), the same totals; and what the
// importer would write must load back through the network loader to the same graph.
void expect_same_network(const Network& imported, const char* hand_written_json) {
  Graph got = build_graph(imported, "imported");
  Graph want = build_graph(parse_network_text(hand_written_json, "hand-written"), "hand-written");
  CHECK(got.net.input_shape == want.net.input_shape);
  CHECK(got.net.input_name == want.net.input_name);
  CHECK(got.net.labels == want.net.labels);
  REQUIRE(got.layers.size() == want.layers.size());
  for (std::size_t l = 1; l < want.layers.size(); ++l) {
    INFO("layer ", l, " ", want.layers[l].name());
    CHECK(got.layers[l].name() == want.layers[l].name());
    CHECK(got.layers[l].type() == want.layers[l].type());
    CHECK(got.layers[l].spec.inputs == want.layers[l].spec.inputs);
    CHECK(got.layers[l].out == want.layers[l].out);
    CHECK(got.layers[l].params() == want.layers[l].params());
    CHECK(layer_signature(got, static_cast<int>(l)) == layer_signature(want, static_cast<int>(l)));
  }
  CHECK(got.total_params() == want.total_params());
  Graph reloaded = build_graph(parse_network_text(network_to_json_text(imported), "reloaded"), "reloaded");
  CHECK(reloaded.total_params() == want.total_params());
  CHECK(network_to_json_text(reloaded.net) == network_to_json_text(imported));
}

// ---- a ResNet-style stem and two basic blocks (the second with a 1x1 projection) -----------------

ModelBuilder resnet_block(Weights form) {
  ModelBuilder b(form, "resnet_block");
  b.input("x", {-1, 3, 64, 64});
  b.conv("conv1", "x", 3, 16, 7, 2, 3, false);  // 64 -> (64 + 6 - 7) / 2 + 1 = 32
  b.bn("bn1", "conv1", 16);
  b.relu("relu1", "bn1");
  b.pool("MaxPool", "pool1", "relu1", 3, 2, 1);  // 32 -> (32 + 2 - 3) / 2 + 1 = 16
  b.conv("b1c1", "pool1", 16, 16, 3, 1, 1, false);
  b.bn("b1n1", "b1c1", 16);
  b.relu("b1r1", "b1n1");
  b.conv("b1c2", "b1r1", 16, 16, 3, 1, 1, false);
  b.bn("b1n2", "b1c2", 16);
  b.node("Add", {"b1n2", "pool1"}, {"b1add"}, "b1add");
  b.relu("b1r2", "b1add");
  b.conv("b2c1", "b1r2", 16, 32, 3, 2, 1, false);  // 16 -> 8
  b.bn("b2n1", "b2c1", 32);
  b.relu("b2r1", "b2n1");
  b.conv("b2c2", "b2r1", 32, 32, 3, 1, 1, false);
  b.bn("b2n2", "b2c2", 32);
  b.conv("b2down", "b1r2", 16, 32, 1, 2, 0, false);  // 16 -> (16 - 1) / 2 + 1 = 8
  b.bn("b2downbn", "b2down", 32);
  b.node("Add", {"b2n2", "b2downbn"}, {"b2add"}, "b2add");
  b.relu("b2r2", "b2add");
  b.node("GlobalAveragePool", {"b2r2"}, {"gap"}, "gap");
  b.node("Flatten", {"gap"}, {"flat"}, "flatten");
  b.gemm("fc", "flat", 32, 10);
  b.output("fc");  // logits: the importer appends the loss
  return b;
}

const char* kResnetBlock =
    R"({"format": "ucplan-network/1", "name": "resnet_block", "input": {"name": "x", "shape": [3, 64, 64]},
 "labels": 10, "layers": [
  {"name": "conv1", "type": "conv", "inputs": ["x"], "out_channels": 16, "kernel": 7, "stride": 2, "pad": 3, "bias": false},
  {"name": "bn1", "type": "bn", "inputs": ["conv1"]},
  {"name": "relu1", "type": "relu", "inputs": ["bn1"]},
  {"name": "pool1", "type": "pool", "inputs": ["relu1"], "mode": "max", "kernel": 3, "stride": 2, "pad": 1},
  {"name": "b1c1", "type": "conv", "inputs": ["pool1"], "out_channels": 16, "kernel": 3, "pad": 1, "bias": false},
  {"name": "b1n1", "type": "bn", "inputs": ["b1c1"]},
  {"name": "b1r1", "type": "relu", "inputs": ["b1n1"]},
  {"name": "b1c2", "type": "conv", "inputs": ["b1r1"], "out_channels": 16, "kernel": 3, "pad": 1, "bias": false},
  {"name": "b1n2", "type": "bn", "inputs": ["b1c2"]},
  {"name": "b1add", "type": "add", "inputs": ["b1n2", "pool1"]},
  {"name": "b1r2", "type": "relu", "inputs": ["b1add"]},
  {"name": "b2c1", "type": "conv", "inputs": ["b1r2"], "out_channels": 32, "kernel": 3, "stride": 2, "pad": 1, "bias": false},
  {"name": "b2n1", "type": "bn", "inputs": ["b2c1"]},
  {"name": "b2r1", "type": "relu", "inputs": ["b2n1"]},
  {"name": "b2c2", "type": "conv", "inputs": ["b2r1"], "out_channels": 32, "kernel": 3, "pad": 1, "bias": false},
  {"name": "b2n2", "type": "bn", "inputs": ["b2c2"]},
  {"name": "b2down", "type": "conv", "inputs": ["b1r2"], "out_channels": 32, "kernel": 1, "stride": 2, "bias": false},
  {"name": "b2downbn", "type": "bn", "inputs": ["b2down"]},
  {"name": "b2add", "type": "add", "inputs": ["b2n2", "b2downbn"]},
  {"name": "b2r2", "type": "relu", "inputs": ["b2add"]},
  {"name": "gap", "type": "pool", "inputs": ["b2r2"], "mode": "avg", "global": true},
  {"name": "fc", "type": "fc", "inputs": ["gap"], "out_features": 10},
  {"name": "loss", "type": "softmax_loss", "inputs": ["fc"]}]})";

// ---- an Inception-like concat with dilated, grouped and 5x5 branches, ceil-mode average pool -------

ModelBuilder inception(Weights form) {
  ModelBuilder b(form, "inception");
  b.input("data", {8, 3, 32, 32});
  b.conv("stem", "data", 3, 24, 3, 1, 1, true);
  b.relu("stem_relu", "stem");
  b.conv("br1", "stem_relu", 24, 8, 1, 1, 0, true);
  b.conv("br3", "stem_relu", 24, 12, 3, 1, 2, true, 1, 2);  // dilation 2, pad 2: 32 + 4 - 5 + 1 = 32
  b.conv("br5", "stem_relu", 24, 4, 5, 1, 2, true);
  b.pool("MaxPool", "brpool", "stem_relu", 3, 1, 1);
  b.conv("brpool_proj", "brpool", 24, 8, 1, 1, 0, true);
  b.node("Concat", {"br1", "br3", "br5", "brpool_proj"}, {"cat"}, "cat");  // 8 + 12 + 4 + 8 = 32 channels
  ModelBuilder::integer(b.g->mutable_node(b.g->node_size() - 1), "axis", 1);
  b.conv("grouped", "cat", 32, 32, 3, 1, 1, false, 4);     // weight [32, 8, 3, 3]: 2,304 parameters
  b.pool("AveragePool", "avg", "grouped", 3, 2, 0, true);  // ceil((32 - 3) / 2) + 1 = 16
  b.node("GlobalAveragePool", {"avg"}, {"gap"}, "gap");
  b.node("Flatten", {"gap"}, {"flat"}, "flatten");
  b.gemm("classifier", "flat", 32, 7);
  b.node("Softmax", {"classifier"}, {"prob"}, "prob");
  b.output("prob");
  return b;
}

const char* kInception =
    R"({"format": "ucplan-network/1", "name": "inception", "input": {"shape": [3, 32, 32]}, "labels": 7,
 "layers": [
  {"name": "stem", "type": "conv", "inputs": ["data"], "out_channels": 24, "kernel": 3, "pad": 1},
  {"name": "stem_relu", "type": "relu", "inputs": ["stem"]},
  {"name": "br1", "type": "conv", "inputs": ["stem_relu"], "out_channels": 8, "kernel": 1},
  {"name": "br3", "type": "conv", "inputs": ["stem_relu"], "out_channels": 12, "kernel": 3, "pad": 2, "dilation": 2},
  {"name": "br5", "type": "conv", "inputs": ["stem_relu"], "out_channels": 4, "kernel": 5, "pad": 2},
  {"name": "brpool", "type": "pool", "inputs": ["stem_relu"], "mode": "max", "kernel": 3, "stride": 1, "pad": 1},
  {"name": "brpool_proj", "type": "conv", "inputs": ["brpool"], "out_channels": 8, "kernel": 1},
  {"name": "cat", "type": "concat", "inputs": ["br1", "br3", "br5", "brpool_proj"]},
  {"name": "grouped", "type": "conv", "inputs": ["cat"], "out_channels": 32, "kernel": 3, "pad": 1, "groups": 4, "bias": false},
  {"name": "avg", "type": "pool", "inputs": ["grouped"], "mode": "avg", "kernel": 3, "stride": 2, "ceil_mode": true,
   "count_include_pad": false},
  {"name": "gap", "type": "pool", "inputs": ["avg"], "mode": "avg", "global": true},
  {"name": "classifier", "type": "fc", "inputs": ["gap"], "out_features": 7},
  {"name": "prob", "type": "softmax_loss", "inputs": ["classifier"]}]})";

// ---- AlexNet-like: LRN, a constant Reshape, Dropout, MatMul + Add, Gemm, LogSoftmax ---------------

ModelBuilder alexnet_like(Weights form) {
  ModelBuilder b(form, "alexnet_like");
  b.input("image", {1, 3, 67, 67});
  b.conv("conv1", "image", 3, 16, 11, 4, 2, true);  // (67 + 4 - 11) / 4 + 1 = 16
  b.relu("relu1", "conv1");
  auto* n = b.node("LRN", {"relu1"}, {"norm1"}, "norm1");
  ModelBuilder::integer(n, "size", 5);
  ModelBuilder::real(n, "alpha", 1e-4f);
  ModelBuilder::real(n, "beta", 0.75f);
  ModelBuilder::real(n, "bias", 2.0f);
  b.pool("MaxPool", "pool1", "norm1", 3, 2, 0);  // (16 - 3) / 2 + 1 = 7
  b.conv("conv2", "pool1", 16, 32, 3, 1, 1, true);
  b.node("Identity", {"conv2"}, {"conv2_id"}, "id");  // folds away
  b.relu("relu2", "conv2_id");
  b.pool("MaxPool", "pool2", "relu2", 3, 2, 0);  // (7 - 3) / 2 + 1 = 3: 32 x 3 x 3 = 288 features
  b.int64_constant("flat_shape", {1, 288});      // torch's x.view(1, 288), folded to a constant
  b.node("Reshape", {"pool2", "flat_shape"}, {"flat"}, "reshape");
  auto* r = b.g->add_initializer();  // Dropout's ratio is an input since opset 12
  r->set_name("ratio");
  r->set_data_type(onnx::TensorProto::FLOAT);
  r->add_float_data(0.25f);
  b.node("Dropout", {"flat", "ratio"}, {"drop1"}, "drop1");
  b.weight("fc1.weight_t", {288, 64});  // MatMul's B is [in, out]
  b.weight("fc1.bias", {64});
  b.node("MatMul", {"drop1", "fc1.weight_t"}, {"fc1_mm"}, "fc1");
  b.node("Add", {"fc1_mm", "fc1.bias"}, {"fc1"}, "fc1_bias");
  b.relu("relu3", "fc1");
  b.gemm("fc2", "relu3", 64, 5);
  b.node("LogSoftmax", {"fc2"}, {"logprob"}, "logprob");
  b.output("logprob");
  return b;
}

const char* kAlexnetLike =
    R"({"format": "ucplan-network/1", "name": "alexnet_like", "input": {"name": "image", "shape": [3, 67, 67]},
 "labels": 5, "layers": [
  {"name": "conv1", "type": "conv", "inputs": ["image"], "out_channels": 16, "kernel": 11, "stride": 4, "pad": 2},
  {"name": "relu1", "type": "relu", "inputs": ["conv1"]},
  {"name": "norm1", "type": "lrn", "inputs": ["relu1"], "size": 5, "alpha": 1e-4, "beta": 0.75, "k": 2},
  {"name": "pool1", "type": "pool", "inputs": ["norm1"], "mode": "max", "kernel": 3, "stride": 2},
  {"name": "conv2", "type": "conv", "inputs": ["pool1"], "out_channels": 32, "kernel": 3, "pad": 1},
  {"name": "relu2", "type": "relu", "inputs": ["conv2"]},
  {"name": "pool2", "type": "pool", "inputs": ["relu2"], "mode": "max", "kernel": 3, "stride": 2},
  {"name": "drop1", "type": "dropout", "inputs": ["pool2"], "ratio": 0.25},
  {"name": "fc1", "type": "fc", "inputs": ["drop1"], "out_features": 64},
  {"name": "relu3", "type": "relu", "inputs": ["fc1"]},
  {"name": "fc2", "type": "fc", "inputs": ["relu3"], "out_features": 5},
  {"name": "logprob", "type": "softmax_loss", "inputs": ["fc2"]}]})";

const char* form_name(Weights f) {
  switch (f) {
    case Weights::Data:
      return "with data";
    case Weights::DimsOnly:
      return "stripped (dims only)";
    case Weights::External:
      return "external data";
    case Weights::GraphInput:
      return "weights as graph inputs";
    case Weights::Absent:
      return "absent";
  }
  return "";
}

std::string error_of(const ModelBuilder& b, const std::string& file = "m.onnx") {
  try {
    import(b, file);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string error_of_bytes(const std::string& bytes) {
  try {
    import_onnx_bytes(bytes, "m.onnx", {});
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a ResNet-style stem and blocks import as the hand-written network, with weights in every form") {
  for (Weights f : kAllForms) {
    INFO(form_name(f));
    expect_same_network(import(resnet_block(f)), kResnetBlock);
  }
  // Totals worked by hand: convs 3*16*49 + 2*16*16*9 + 16*32*9 + 32*32*9 + 16*32 = 2,352 + 4,608 +
  // 4,608 + 9,216 + 512 = 21,296; bn 2 per channel: 2*(16+16+16+32+32+32) = 288; fc 32*10 + 10 = 330.
  CHECK(build_graph(import(resnet_block(Weights::DimsOnly)), "").total_params() == 21296 + 288 + 330);
}

TEST_CASE("an Inception-like concat with dilated, grouped and ceil-mode layers and a final Softmax imports exactly") {
  for (Weights f : kAllForms) {
    INFO(form_name(f));
    expect_same_network(import(inception(f)), kInception);
  }
  Graph g = build_graph(import(inception(Weights::DimsOnly)), "");
  CHECK(g.layers[g.index_of("cat")].out == Shape{32, 32, 32});
  CHECK(g.layers[g.index_of("grouped")].params() == 32 * 8 * 9);  // groups 4: 32 / 4 input channels per output
  CHECK(g.layers[g.index_of("avg")].out == Shape{32, 16, 16});    // ceil mode: ceil(29 / 2) + 1
}

TEST_CASE("an AlexNet-like chain with LRN, a constant Reshape, Dropout, MatMul + Add and LogSoftmax imports exactly") {
  for (Weights f : kAllForms) {
    INFO(form_name(f));
    expect_same_network(import(alexnet_like(f)), kAlexnetLike);
  }
  Graph g = build_graph(import(alexnet_like(Weights::DimsOnly)), "");
  CHECK(g.layers[g.index_of("fc1")].params() == 288 * 64 + 64);  // the Add became fc1's bias
}

// auto_pad SAME (symmetric here: 3x3 at stride 1 needs 2 = 1 + 1), ReduceMean over H and W,
// GlobalMaxPool, Sum, and the extra outputs of a training-mode export (batch-norm's running
// statistics, MaxPool's indices, Dropout's mask), which nothing consumes.
ModelBuilder odds_and_ends(Weights form) {
  ModelBuilder b(form, "odds");
  b.input("in", {4, 8, 16, 16});
  b.weight("c.weight", {8, 8, 3, 3});
  auto* c = b.node("Conv", {"in", "c.weight"}, {"c"}, "c");
  ModelBuilder::ints(c, "kernel_shape", {3, 3});
  c->add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("auto_pad");
    a.set_type(onnx::AttributeProto::STRING);
    a.set_s("SAME_UPPER");
    return a;
  }());
  b.bn("n", "c", 8);
  b.g->mutable_node(b.g->node_size() - 1)->add_output("n_running_mean");
  b.g->mutable_node(b.g->node_size() - 1)->add_output("n_running_var");
  b.relu("r", "n");
  auto* p = b.node("MaxPool", {"r"}, {"p", "p_indices"}, "p");
  ModelBuilder::ints(p, "kernel_shape", {2, 2});
  ModelBuilder::ints(p, "strides", {2, 2});  // 16 -> 8
  b.relu("q", "p");
  b.relu("t", "p");
  b.node("Sum", {"p", "q", "t"}, {"s"}, "s");  // three inputs, one add layer
  auto* m = b.node("ReduceMean", {"s"}, {"m"}, "m");
  ModelBuilder::ints(m, "axes", {-2, -1});
  ModelBuilder::integer(m, "keepdims", 0);  // [batch, 8]: already flat
  b.node("GlobalMaxPool", {"s"}, {"g"}, "g");
  b.node("Flatten", {"g"}, {"gf"}, "gf");
  auto* d = b.node("Dropout", {"gf"}, {"d", "d_mask"}, "d");
  ModelBuilder::real(d, "ratio", 0.1f);  // opset < 12 writes it as an attribute
  b.node("Add", {"m", "d"}, {"sum"}, "sum");
  b.gemm("fc", "sum", 8, 3);
  b.output("fc");
  b.output("n_running_mean");  // a training export may list them; they are not losses
  return b;
}

const char* kOddsAndEnds =
    R"({"format": "ucplan-network/1", "name": "odds", "input": {"name": "in", "shape": [8, 16, 16]},
 "labels": 3, "layers": [
  {"name": "c", "type": "conv", "inputs": ["in"], "out_channels": 8, "kernel": 3, "pad": 1, "bias": false},
  {"name": "n", "type": "bn", "inputs": ["c"]},
  {"name": "r", "type": "relu", "inputs": ["n"]},
  {"name": "p", "type": "pool", "inputs": ["r"], "mode": "max", "kernel": 2, "stride": 2},
  {"name": "q", "type": "relu", "inputs": ["p"]},
  {"name": "t", "type": "relu", "inputs": ["p"]},
  {"name": "s", "type": "add", "inputs": ["p", "q", "t"]},
  {"name": "m", "type": "pool", "inputs": ["s"], "mode": "avg", "global": true},
  {"name": "g", "type": "pool", "inputs": ["s"], "mode": "max", "global": true},
  {"name": "d", "type": "dropout", "inputs": ["g"], "ratio": 0.1},
  {"name": "sum", "type": "add", "inputs": ["m", "d"]},
  {"name": "fc", "type": "fc", "inputs": ["sum"], "out_features": 3},
  {"name": "loss", "type": "softmax_loss", "inputs": ["fc"]}]})";

TEST_CASE("auto_pad SAME, ReduceMean, GlobalMaxPool, Sum and a training export's extra outputs import exactly") {
  for (Weights f : kAllForms) {
    INFO(form_name(f));
    expect_same_network(import(odds_and_ends(f)), kOddsAndEnds);
  }
  // SAME at stride 2 on 16: output 8, total padding (8 - 1) * 2 + 3 - 16 = 1, odd: no ucplan form.
  ModelBuilder b = odds_and_ends(Weights::DimsOnly);
  ModelBuilder::ints(b.g->mutable_node(0), "strides", {2, 2});
  CHECK(error_of(b) ==
        "m.onnx: node 0 \"c\" (Conv): auto_pad SAME_UPPER needs 1 padding on axis 2, which is asymmetric; "
        "ucplan pads both sides equally");
  // x + x: ucplan's add takes distinct inputs.
  ModelBuilder twice = odds_and_ends(Weights::DimsOnly);
  for (auto& n : *twice.g->mutable_node())
    if (n.name() == "s") n.set_input(1, "p");
  CHECK(error_of(twice) == "m.onnx: node 6 \"s\" (Sum): adds \"p\" more than once; ucplan's add takes distinct inputs");
}

TEST_CASE("weights absent from the file: shapes from kernel_shape and the outputs' value_info") {
  // Neither initializers nor inputs name the weights (a graph stripped to its structure). Conv's
  // kernel comes from kernel_shape, its output channels and Gemm's features from value_info.
  ModelBuilder b = resnet_block(Weights::Absent);
  for (const char* c : {"conv1"}) b.value_info(c, {-1, 16, 32, 32});
  for (const char* c : {"b1c1", "b1c2"}) b.value_info(c, {-1, 16, 16, 16});
  for (const char* c : {"b2c1", "b2c2", "b2down"}) b.value_info(c, {-1, 32, 8, 8});
  b.value_info("fc", {-1, 10});
  expect_same_network(import(b), kResnetBlock);

  ModelBuilder missing = resnet_block(Weights::Absent);  // no value_info: the channels are unknown
  CHECK(error_of(missing) ==
        "m.onnx: node 0 \"conv1\" (Conv): the output channels are unknown: the file gives neither the dims of weight "
        "\"conv1.weight\" nor the shape of output \"conv1\"");
}

TEST_CASE("the network's name: --name, else the file's stem (exporters name every graph alike)") {
  ImportOptions named;
  named.name = "mine";
  CHECK(import_onnx_bytes(resnet_block(Weights::DimsOnly).bytes(), "x/y.onnx", named).name == "mine");
  CHECK(import(resnet_block(Weights::DimsOnly), "models/resnet_block_v2.onnx").name == "resnet_block_v2");
  CHECK(import(resnet_block(Weights::DimsOnly), "model").name == "model");
}

TEST_CASE("unsupported or unrepresentable graphs: one error naming the file, the node and what ucplan supports") {
  SUBCASE("an unsupported op") {
    ModelBuilder b = resnet_block(Weights::DimsOnly);
    b.g->mutable_node(2)->set_op_type("Einsum");
    std::string e = error_of(b);
    CHECK(e.rfind("m.onnx: node 2 \"relu1\" (Einsum): op type Einsum is not supported (ucplan imports Conv, ", 0) == 0);
    CHECK(e.find('\n') == std::string::npos);
  }
  SUBCASE("an unnamed node is named by its index") {
    ModelBuilder b = resnet_block(Weights::DimsOnly);
    b.g->mutable_node(2)->set_op_type("LSTM");
    b.g->mutable_node(2)->clear_name();
    CHECK(error_of(b).rfind("m.onnx: node 2 (LSTM): op type LSTM is not supported", 0) == 0);
  }
  SUBCASE("names with control or non-ASCII bytes: escaped in the one line, replaced in layer names") {
    ModelBuilder b = resnet_block(Weights::DimsOnly);
    b.g->mutable_node(2)->set_name("relu\n1\xff");
    Graph g = build_graph(import(b), "");
    CHECK(g.index_of("relu_1_") == 3);
    b.g->mutable_node(2)->set_op_type("Einsum");
    CHECK(error_of(b).rfind("m.onnx: node 2 \"relu\\x0a1\\xff\" (Einsum): op type Einsum is not supported", 0) == 0);
  }
  SUBCASE("asymmetric padding") {
    ModelBuilder b = resnet_block(Weights::DimsOnly);
    auto* pads = b.g->mutable_node(0)->mutable_attribute(2);
    REQUIRE(pads->name() == "pads");
    pads->set_ints(2, 4);
    CHECK(error_of(b) ==
          "m.onnx: node 0 \"conv1\" (Conv): asymmetric pads [3, 3, 4, 3]; ucplan pads both sides of an axis equally");
  }
  SUBCASE("a Softmax in the middle") {
    ModelBuilder b = alexnet_like(Weights::DimsOnly);
    b.node("Relu", {"logprob"}, {"after"}, "after");
    CHECK(error_of(b) ==
          "m.onnx: node 15 \"after\" (Relu): consumes the output of a Softmax (\"logprob\"); ucplan supports "
          "Softmax only as the last op, the loss");
  }
  SUBCASE("a broadcasting Add") {
    ModelBuilder b = resnet_block(Weights::DimsOnly);
    b.g->mutable_node(9)->set_input(1, "relu1");  // b1add: 16x16x16 + 16x32x32
    CHECK(error_of(b) ==
          "m.onnx: node 9 \"b1add\" (Add): adds \"relu1\" of 16x32x32 per sample to \"b1n2\" of 16x16x16; "
          "ucplan adds equal shapes (no broadcasting)");
  }
  SUBCASE("a declared shape that ucplan would compute differently") {
    ModelBuilder b = resnet_block(Weights::DimsOnly);
    b.value_info("pool1", {-1, 16, 17, 17});  // e.g. an exporter whose pooling rounds up
    std::string e = error_of(b);
    CHECK(e.find("node 3 \"pool1\" (MaxPool): ") != std::string::npos);
    CHECK(e.find("ucplan computes 16x16x16 per sample for output \"pool1\", but the file declares") !=
          std::string::npos);
  }
  SUBCASE("an input of unknown size") {
    ModelBuilder b = resnet_block(Weights::DimsOnly);
    auto* dim = b.g->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(2);
    dim->set_dim_param("height");
    CHECK(error_of(b) ==
          "m.onnx: graph input \"x\": shape [?, 3, ?, 64] is not [batch, C, H, W] (or [batch, features]) "
          "with C, H, W known (at most 1048576); export with a fixed input size");
    dim->set_dim_value(std::int64_t{1} << 21);  // known, but no network is that large
    CHECK(error_of(b) ==
          "m.onnx: graph input \"x\": shape [?, 3, 2097152, 64] is not [batch, C, H, W] (or [batch, features]) "
          "with C, H, W known (at most 1048576); export with a fixed input size");
  }
  SUBCASE("a Reshape that is not a flatten") {
    ModelBuilder b = alexnet_like(Weights::DimsOnly);
    for (auto& t : *b.g->mutable_initializer()) {
      if (t.name() != "flat_shape") continue;
      t.clear_int64_data();
      t.clear_dims();
      t.add_dims(3);
      for (std::int64_t v : {1, 32, 9}) t.add_int64_data(v);
    }
    CHECK(error_of(b) ==
          "m.onnx: node 8 \"reshape\" (Reshape): Reshape of 32x3x3 to [1, 32, 9]; ucplan supports Reshape "
          "only to [batch, features] or to the same shape");
  }
  SUBCASE("today's ops outside the patterns ucplan maps") {
    ModelBuilder b = resnet_block(Weights::DimsOnly);
    b.weight("factors", {16, 32});
    b.node("Mul", {"relu1", "factors"}, {"scaled"}, "scaled");
    CHECK(error_of(b) ==
          "m.onnx: node 23 \"scaled\" (Mul): multiplies 16x32x32 by the constant \"factors\" of dims [16, 32]; "
          "ucplan supports a learned factor per channel (ConvNeXt's layer scale)");
    ModelBuilder t = resnet_block(Weights::DimsOnly);
    ModelBuilder::ints(t.node("Transpose", {"relu1"}, {"hw"}, "swap_hw"), "perm", {0, 1, 3, 2});
    CHECK(error_of(t) ==
          "m.onnx: node 23 \"swap_hw\" (Transpose): perm [0, 1, 3, 2] of an NCHW tensor; ucplan supports NCHW <-> "
          "NHWC and the channel shuffle's (0, 2, 1, 3, 4)");
    ModelBuilder e = resnet_block(Weights::DimsOnly);
    e.node("Erf", {"relu1"}, {"erf"}, "erf");
    CHECK(error_of(e) ==
          "m.onnx: node 23 \"erf\" (Erf): ucplan supports Erf only in the Erf form of GELU, after x / sqrt(2)");
    ModelBuilder c = resnet_block(Weights::DimsOnly);
    ModelBuilder::ints(c.node("Transpose", {"relu1"}, {"nhwc"}, "to_nhwc"), "perm", {0, 2, 3, 1});
    c.node("MaxPool", {"nhwc"}, {"p"}, "pool_nhwc");
    CHECK(error_of(c) ==
          "m.onnx: node 24 \"pool_nhwc\" (MaxPool): input \"nhwc\" is in NHWC order (after a Transpose); ucplan "
          "supports only LayerNormalization, MatMul, Add and activations there, then a Transpose back");
  }
  SUBCASE("values a broken or hostile exporter writes (what tests/fuzz/fuzz_onnx.cpp found): one error, no crash") {
    // conv1 (node 0): attributes kernel_shape, strides, pads, dilations, group; its weight is
    // initializer 0, [16, 3, 7, 7].
    auto conv1 = [](ModelBuilder& b) { return b.g->mutable_node(0); };
    ModelBuilder d5 = resnet_block(Weights::DimsOnly);
    d5.g->mutable_initializer(0)->add_dims(1);  // ONNX 1.12's own shape inference crashed on this
    CHECK(error_of(d5) ==
          "m.onnx: node 0 \"conv1\" (Conv): weight \"conv1.weight\" has dims [16, 3, 7, 7, 1]; ucplan supports 2-d "
          "convolutions");
    for (std::int64_t bad : {std::int64_t{-1}, std::int64_t{1} << 62}) {
      ModelBuilder b = resnet_block(Weights::DimsOnly);
      b.g->mutable_initializer(0)->set_dims(1, bad);  // a negative size was read as 2^64 - 1 values
      CHECK(error_of(b) == "m.onnx: initializer \"conv1.weight\": dimension " + std::to_string(bad) +
                               " is not between 0 and 1073741824");
    }
    ModelBuilder group = resnet_block(Weights::DimsOnly);
    conv1(group)->mutable_attribute(4)->set_i(std::int64_t{1} << 62);  // 3 channels per group x 2^62 overflowed
    CHECK(error_of(group) ==
          "m.onnx: node 0 \"conv1\" (Conv): group 4611686018427387904 must be between 1 and 1048576");
    ModelBuilder stride = resnet_block(Weights::DimsOnly);
    conv1(stride)->mutable_attribute(1)->set_ints(0, std::int64_t{1} << 40);
    CHECK(error_of(stride) ==
          "m.onnx: node 0 \"conv1\" (Conv): strides [1099511627776, 2] must be between 1 and 1048576");
    ModelBuilder pads = resnet_block(Weights::DimsOnly);
    for (int k = 0; k < 4; ++k) conv1(pads)->mutable_attribute(2)->set_ints(k, INT64_MAX);  // input + 2 pad overflowed
    CHECK(error_of(pads) ==
          "m.onnx: node 0 \"conv1\" (Conv): pads [9223372036854775807, 9223372036854775807, 9223372036854775807, "
          "9223372036854775807] must be between 0 and 1048576");
    ModelBuilder window = resnet_block(Weights::DimsOnly);
    window.g->mutable_node(3)->mutable_attribute(0)->set_ints(1, INT64_MIN);  // pool1's kernel_shape
    CHECK(error_of(window) ==
          "m.onnx: node 3 \"pool1\" (MaxPool): kernel_shape [3, -9223372036854775808] must be between 1 and 1048576");
    ModelBuilder orphan = resnet_block(Weights::DimsOnly);
    orphan.g->mutable_node(2)->clear_input();  // read its first input regardless
    CHECK(error_of(orphan) == "m.onnx: node 2 \"relu1\" (Relu): the node has no input");
    ModelBuilder sum = resnet_block(Weights::DimsOnly);  // shape arithmetic, folded by the importer
    sum.int64_constant("big", {INT64_MAX});
    sum.int64_constant("one", {1});
    sum.node("Add", {"big", "one"}, {"more"}, "more");
    CHECK(error_of(sum) ==
          "m.onnx: node 23 \"more\" (Add): Add of 9223372036854775807 and 1 overflows 64-bit integers");
    sum.g->mutable_node(23)->set_op_type("Mul");
    sum.g->mutable_node(23)->mutable_input()->RemoveLast();  // its second operand was read anyway
    CHECK(error_of(sum) == "m.onnx: node 23 \"more\" (Mul): Mul of integer constants takes two inputs");
    ModelBuilder eps = resnet_block(Weights::DimsOnly);
    eps.g->mutable_node(1)->mutable_attribute(0)->set_f(0);  // bn1's epsilon: imported, then refused on reading
    CHECK(error_of(eps) ==
          "m.onnx: node 1 \"bn1\" (BatchNormalization): ucplan's bn layer's eps must be positive, got 0");
    ModelBuilder producer = resnet_block(Weights::DimsOnly);
    producer.model.set_producer_name("torch\x94");  // not UTF-8: writing the network threw (exit 134)
    const Network from_bytes = import_onnx_bytes(producer.bytes(), "r\xe9seau.onnx", {});
    CHECK(from_bytes.name == "r_seau");
    CHECK(from_bytes.source.rfind("ONNX from torch\\x94 ", 0) == 0);
    CHECK(parse_network_text(network_to_json_text(from_bytes), "reloaded").name == "r_seau");
    ModelBuilder wide(Weights::DimsOnly);  // each dimension allowed, their product not as classes
    wide.input("x", {-1, 65536, 32, 65536});
    wide.relu("r", "x");
    wide.output("r");
    CHECK(error_of(wide) ==
          "m.onnx: graph output \"r\": has 137438953472 classes; ucplan networks have at most 1073741824");
    ModelBuilder empty = resnet_block(Weights::DimsOnly);
    empty.int64_constant("nothing", {});  // zero values: no copy from a null pointer (UBSan)
    CHECK(build_graph(import(empty), "").total_params() == 21296 + 288 + 330);
  }
  SUBCASE("bytes that are not ONNX") {
    CHECK(error_of_bytes("{\"format\": \"ucplan-network/1\"}") ==
          "m.onnx: not an ONNX model (no ModelProto with a graph could be read from it)");
    CHECK(error_of_bytes("") == "m.onnx: not an ONNX model (no ModelProto with a graph could be read from it)");
  }
}

// What an adversarial review found imported as something the model does not mean (each case checked
// against ONNX Runtime 1.32 at the time): every one is now refused at its node, or imported as
// the model means it.
TEST_CASE("graphs ucplan's layers would change are refused at their node; older opsets' forms import") {
  // x [batch, 4, 3, 3]; what each case adds reads "x" or "r" (relu of x).
  auto base = [](std::int64_t batch = 2) {
    ModelBuilder b(Weights::DimsOnly);
    b.input("x", {batch, 4, 3, 3});
    b.relu("r", "x");
    return b;
  };
  auto opset = [](ModelBuilder& b, std::int64_t v) { b.model.mutable_opset_import(0)->set_version(v); };
  SUBCASE("names defined twice, read before they are written, or in a cycle") {
    ModelBuilder twice = base();
    twice.node("Sigmoid", {"x"}, {"r"}, "again");
    twice.output("r");
    CHECK(
        error_of(twice) ==
        "m.onnx: node 1 \"again\" (Sigmoid): output \"r\" is already defined by node 0; ONNX defines every name once");
    ModelBuilder over_input = base();
    over_input.node("Relu", {"x"}, {"x"}, "in_place");
    over_input.output("r");
    CHECK(error_of(over_input) ==
          "m.onnx: node 1 \"in_place\" (Relu): output \"x\" is already defined by a graph input; ONNX defines every "
          "name once");
    ModelBuilder cycle = base();
    cycle.node("Add", {"r", "z"}, {"z"}, "loop");
    cycle.output("z");
    CHECK(error_of(cycle) ==
          "m.onnx: node 1 \"loop\" (Add): input \"z\" is the output of this node or a later one (ONNX orders nodes so "
          "that each follows its inputs, and a graph has no cycles)");
    ModelBuilder inputs = base();
    inputs.input("x", {2, 8, 3, 3});
    inputs.output("r");
    CHECK(error_of(inputs) == "m.onnx: graph input \"x\": is declared twice");
    ModelBuilder weights = base();
    weights.weight("w", {4});
    weights.weight("w", {8});
    weights.output("r");
    CHECK(error_of(weights) == "m.onnx: initializer \"w\": is given twice");
  }
  SUBCASE("a weight's Transpose by a perm that is not a permutation (read past the dims: a crash)") {
    for (const std::vector<std::int64_t>& perm : {std::vector<std::int64_t>{1, 100000000}, {1, -5}, {1, 1}}) {
      ModelBuilder b = base();
      b.weight("w", {10, 36});
      ModelBuilder::ints(b.node("Transpose", {"w"}, {"wt"}, "t"), "perm", perm);
      b.node("Flatten", {"r"}, {"f"}, "f");
      b.node("Gemm", {"f", "wt"}, {"y"}, "fc");
      b.output("y");
      CHECK(error_of(b).find("node 1 \"t\" (Transpose): perm [1, ") != std::string::npos);
      CHECK(error_of(b).find("] is not a permutation of the 2 axes of \"w\" [10, 36]") != std::string::npos);
    }
  }
  SUBCASE("a Mul that ONNX broadcasts other than per channel") {
    ModelBuilder gate = base();  // [2, 4] * [2, 4, 3, 3]: one value per column of W (4 > 3: not even valid)
    gate.node("GlobalAveragePool", {"r"}, {"p"}, "p");
    gate.node("Flatten", {"p"}, {"f"}, "f");
    gate.node("Mul", {"r", "f"}, {"y"}, "se");
    gate.output("y");
    CHECK(
        error_of(gate) ==
        "m.onnx: node 3 \"se\" (Mul): multiplies a rank-4 tensor by a rank-2 one, which ONNX broadcasts from the last "
        "axis; ucplan multiplies tensors of one rank");
    ModelBuilder scale = base();  // [2, 4] * [4, 1, 1] = [2... 4, 1, 4]: not a scale of the 4 features
    scale.node("GlobalAveragePool", {"r"}, {"p"}, "p");
    scale.node("Flatten", {"p"}, {"f"}, "f");
    scale.weight("s", {4, 1, 1});
    scale.node("Mul", {"f", "s"}, {"y"}, "scale");
    scale.output("y");
    CHECK(error_of(scale) ==
          "m.onnx: node 3 \"scale\" (Mul): multiplies 4x1x1 by the constant \"s\" of dims [4, 1, 1]; ucplan supports a "
          "learned factor per channel (ConvNeXt's layer scale)");
    ModelBuilder wider = base();  // [1, 1, 4, 1, 1]: a rank-5 product
    wider.weight("s", {1, 1, 4, 1, 1});
    wider.node("Mul", {"r", "s"}, {"y"}, "scale");
    wider.output("y");
    CHECK(error_of(wider).find("node 1 \"scale\" (Mul): multiplies 4x3x3 by the constant \"s\" of dims") !=
          std::string::npos);
  }
  SUBCASE("a layer norm or a softmax over other axes than ucplan's") {
    ModelBuilder ln = base();
    ln.node("Flatten", {"r"}, {"f"}, "f");
    ln.weight("g", {36});
    ln.weight("b", {36});
    ModelBuilder::integer(ln.node("LayerNormalization", {"f", "g", "b"}, {"y"}, "ln"), "axis", 1);
    ln.output("y");
    CHECK(error_of(ln) ==
          "m.onnx: node 2 \"ln\" (LayerNormalization): normalizes the 36 features of a flattened 4x3x3 tensor "
          "together; ucplan's layer norm is over the channels of each pixel");
    ModelBuilder batch = base();  // over the batch
    batch.node("GlobalAveragePool", {"r"}, {"p"}, "p");
    batch.node("Flatten", {"p"}, {"f"}, "f");
    ModelBuilder::integer(batch.node("Softmax", {"f"}, {"y"}, "sm"), "axis", 0);
    batch.output("y");
    CHECK(error_of(batch) ==
          "m.onnx: node 3 \"sm\" (Softmax): a Softmax over axis 0 of a rank-2 tensor; ucplan's loss is a softmax over "
          "the classes (axis 1)");
    ModelBuilder last = base();  // opset 13's default: the last axis, of size 1
    last.node("GlobalAveragePool", {"r"}, {"p"}, "p");
    last.node("Softmax", {"p"}, {"y"}, "sm");
    last.output("y");
    CHECK(error_of(last) ==
          "m.onnx: node 2 \"sm\" (Softmax): a Softmax over axis 3 of a rank-4 tensor (opset 13's default); ucplan's "
          "loss is a softmax over the classes (axis 1)");
    opset(last, 11);  // before 13 the default is 1, the axes after it flattened: the 4 channels
    CHECK(build_graph(import(last), "").net.labels == 4);
  }
  SUBCASE("shape arithmetic: Shape's start and end, and a batch the file leaves unknown") {
    auto flatten_by_shape = [](ModelBuilder& b, std::int64_t start, std::int64_t end, bool plus_one) {
      auto* shape = b.node("Shape", {"r"}, {"s"}, "shape");
      ModelBuilder::integer(shape, "start", start);
      ModelBuilder::integer(shape, "end", end);
      std::string first = "s";
      if (plus_one) {
        b.int64_constant("one", {1});
        b.node("Add", {"s", "one"}, {"s1"}, "plus");
        first = "s1";
      }
      b.int64_constant("rest", {-1});
      b.node("Concat", {first, "rest"}, {"target"}, "target");
      b.node("Reshape", {"r", "target"}, {"y"}, "reshape");
      b.output("y");
    };
    ModelBuilder batch = base();
    flatten_by_shape(batch, 0, 1, false);  // [batch, -1]: a flatten
    CHECK(build_graph(import(batch), "").net.labels == 36);
    ModelBuilder height = base();
    flatten_by_shape(height, 2, 3, false);  // [3, -1]: not a flatten
    CHECK(error_of(height) ==
          "m.onnx: node 3 \"reshape\" (Reshape): Reshape of 4x3x3 to [3, -1]; ucplan supports Reshape only to [batch, "
          "features] or to the same shape");
    ModelBuilder symbolic = base(-1);
    flatten_by_shape(symbolic, 0, 1, false);
    CHECK(build_graph(import(symbolic), "").net.labels == 36);
    ModelBuilder computed = base(-1);  // [batch + 1, -1]: the batch was read as -1, so 0, "copy the batch"
    flatten_by_shape(computed, 0, 1, true);
    CHECK(error_of(computed) ==
          "m.onnx: node 4 \"reshape\" (Reshape): the target shape [?, -1] is computed from the batch size, which the "
          "file leaves unknown; export with a fixed batch");
  }
  SUBCASE("an empty target shape (read past its end)") {
    ModelBuilder b = base();
    b.int64_constant("none", {});
    b.node("Reshape", {"r", "none"}, {"y"}, "reshape");
    b.output("y");
    CHECK(error_of(b) ==
          "m.onnx: node 1 \"reshape\" (Reshape): Reshape of 4x3x3 to []; ucplan supports Reshape only to [batch, "
          "features] or to the same shape");
  }
  SUBCASE("a channel shuffle that splits the batch instead") {
    ModelBuilder b = base(1);
    b.int64_constant("split", {2, 2, -1, 3, 3});
    b.node("Reshape", {"r", "split"}, {"a"}, "split");
    ModelBuilder::ints(b.node("Transpose", {"a"}, {"t"}, "swap"), "perm", {0, 2, 1, 3, 4});
    b.int64_constant("back", {1, 4, 3, 3});
    b.node("Reshape", {"t", "back"}, {"y"}, "back");
    b.output("y");
    CHECK(error_of(b) ==
          "m.onnx: node 1 \"split\" (Reshape): Reshape of 4x3x3 to [2, 2, -1, 3, 3]; ucplan supports Reshape only to "
          "[batch, features] or to the same shape");
  }
  SUBCASE("parameters: per activation, of other dims, or shared by two layers") {
    ModelBuilder spatial = base();
    spatial.bn("bn", "r", 4);
    ModelBuilder::integer(spatial.g->mutable_node(1), "spatial", 0);
    spatial.output("bn");
    CHECK(error_of(spatial) ==
          "m.onnx: node 1 \"bn\" (BatchNormalization): spatial=0: statistics and parameters per activation (opsets 7 "
          "and 8); ucplan's bn normalizes per channel");
    ModelBuilder dims = base();
    dims.bn("bn", "r", 7);
    dims.output("bn");
    CHECK(error_of(dims) ==
          "m.onnx: node 1 \"bn\" (BatchNormalization): the scale \"bn.weight\" has dims [7]; this layer's is [4]");
    ModelBuilder bias = base();
    bias.conv("c", "r", 4, 8, 3, 1, 1, true);
    bias.g->mutable_initializer(1)->set_dims(0, 9);
    bias.output("c");
    CHECK(error_of(bias) == "m.onnx: node 1 \"c\" (Conv): the bias \"c.bias\" has dims [9]; this layer's is [8]");
    ModelBuilder c = base();
    c.node("Flatten", {"r"}, {"f"}, "f");
    c.gemm("fc", "f", 36, 10);
    c.g->mutable_initializer(1)->set_dims(0, 1);  // one bias for every output
    c.output("fc");
    CHECK(error_of(c) ==
          "m.onnx: node 2 \"fc\" (Gemm): C \"fc.bias\" has dims [1]; an fc layer's bias is one value per output, [10]");
    ModelBuilder shared = base();
    shared.conv("c1", "r", 4, 4, 3, 1, 1, false);
    shared.node("Conv", {"c1", "c1.weight"}, {"c2"}, "c2");
    ModelBuilder::ints(shared.g->mutable_node(2), "pads", {1, 1, 1, 1});
    shared.output("c2");
    CHECK(
        error_of(shared) ==
        "m.onnx: node 2 \"c2\" (Conv): the parameter \"c1.weight\" is also node 1's; ucplan gives every layer its own "
        "parameters (a shared one would be counted twice in memory)");
  }
  SUBCASE("an LRN of even size, whose ONNX window is off centre") {
    ModelBuilder b = base();
    ModelBuilder::integer(b.node("LRN", {"r"}, {"y"}, "lrn"), "size", 4);
    b.output("y");
    CHECK(error_of(b) ==
          "m.onnx: node 1 \"lrn\" (LRN): size 4 is even: ONNX's window is then off centre, ucplan's is centred");
  }
  SUBCASE("what the network loader refuses is said at the node, in the ONNX file's terms") {
    ModelBuilder groups = base();
    groups.conv("c", "r", 4, 6, 3, 1, 1, false, 4);  // 6 outputs in 4 groups
    groups.output("c");
    CHECK(error_of(groups) == "m.onnx: node 1 \"c\" (Conv): 4 groups do not divide the 4 input and 6 output channels");
    ModelBuilder twice = base();
    twice.node("Concat", {"r", "r"}, {"y"}, "cat");
    ModelBuilder::integer(twice.g->mutable_node(1), "axis", 1);
    twice.output("y");
    CHECK(error_of(twice) ==
          "m.onnx: node 1 \"cat\" (Concat): joins \"r\" more than once; ucplan's concat takes distinct inputs");
    ModelBuilder partial = base();
    partial.weight("sqrt2", {});
    partial.g->mutable_initializer(0)->set_data_type(onnx::TensorProto::FLOAT);
    partial.g->mutable_initializer(0)->set_raw_data(std::string("\xf3\x04\xb5\x3f", 4));  // 1.4142135f
    partial.node("Div", {"r", "sqrt2"}, {"d"}, "div");
    partial.node("Erf", {"d"}, {"e"}, "erf");
    partial.output("e");
    CHECK(error_of(partial) ==
          "m.onnx: graph output \"e\": is the middle of a GELU (x * (1 + erf(x / sqrt 2)) / 2) pattern, which ucplan "
          "imports as one layer");
  }
  SUBCASE("declared outputs of another rank or batch") {
    ModelBuilder rank = base();
    rank.value_info("r", {2, 36});
    rank.output("r");
    CHECK(error_of(rank) ==
          "m.onnx: node 0 \"r\" (Relu): ucplan computes a rank-4 output \"r\", but the file declares [2, 36]");
    ModelBuilder batch = base();
    batch.value_info("r", {3, 4, 3, 3});
    batch.output("r");
    CHECK(error_of(batch) ==
          "m.onnx: node 0 \"r\" (Relu): the file declares output \"r\" as [3, 4, 3, 3], a batch of 3, but the "
          "network's input has 2");
  }
  SUBCASE("opset 9's Slice and opset 1's Reshape take attributes") {
    ModelBuilder slice = base();
    opset(slice, 9);
    auto* n = slice.node("Slice", {"r"}, {"y"}, "slice");
    ModelBuilder::ints(n, "starts", {1});
    ModelBuilder::ints(n, "ends", {3});
    ModelBuilder::ints(n, "axes", {1});
    slice.output("y");
    CHECK(build_graph(import(slice), "").net.labels == 2 * 3 * 3);
    ModelBuilder reshape = base();
    opset(reshape, 1);
    ModelBuilder::ints(reshape.node("Reshape", {"r"}, {"y"}, "flat"), "shape", {2, 36});
    reshape.output("y");
    CHECK(build_graph(import(reshape), "").net.labels == 36);
  }
  SUBCASE("10^4 nodes of one name are named apart in linear time") {
    ModelBuilder b = base();
    std::string x = "r";
    for (int k = 0; k < 10000; ++k) {
      const std::string y = "v" + std::to_string(k);
      b.node("Relu", {x}, {y}, "same");
      x = y;
    }
    b.output(x);
    const Graph g = build_graph(import(b), "");
    CHECK(g.layers[2].name() == "same");
    CHECK(g.layers[3].name() == "same_2");
    CHECK(g.layers[10001].name() == "same_10000");
  }
}

// Through the command line: exit code 2, one line, and no output file left behind on failure;
// on success the file loads through the network loader.
TEST_CASE("ucplan import: exit code 2 and no output file on bad input, a network file on good input") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("ucplan_import_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
    return (dir / name).string();
  };
  auto run = [&](const std::string& args) {
    std::string cmd =
        std::string(UCPLAN_BIN) + " import " + args + " 2>" + (dir / "stderr.txt").string() + " >/dev/null";
    int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  auto stderr_text = [&] {
    std::ifstream in(dir / "stderr.txt");
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string out = (dir / "net.json").string();

  ModelBuilder bad = resnet_block(Weights::DimsOnly);
  bad.g->mutable_node(5)->set_op_type("Mish");
  std::string bad_path = write("bad.onnx", bad.bytes());
  CHECK(run(bad_path + " -o " + out) == 2);
  CHECK(stderr_text() ==
        "ucplan import: error: " + bad_path + ": node 5 \"b1n1\" (Mish): op type Mish is not supported (" +
            std::string("ucplan imports Conv, BatchNormalization, Relu, Sigmoid, HardSigmoid, HardSwish, Clip, ") +
            "Gelu (or its Erf decomposition), x * Sigmoid(x) as SiLU, Mul (element-wise, by one value per channel, or "
            "by a learned [C, 1, 1] scale), LayerNormalization over channels (between Transposes to and from NHWC), "
            "MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, ReduceMean over H and W, Gemm, MatMul (+ Add of "
            "a bias), Flatten, Reshape to [batch, features], Add, Sum, Concat, Split and Slice on channels, the "
            "channel shuffle Reshape-Transpose-Reshape, Dropout, LRN, Softmax or LogSoftmax as the last op, Identity, "
            "Constant, and shape arithmetic on constants (Shape, Gather, Unsqueeze, Squeeze, Concat, Add, Sub, Mul, "
            "Div, Cast))\n");
  CHECK(!fs::exists(out));
  CHECK(run((dir / "missing.onnx").string() + " -o " + out) == 2);
  CHECK(stderr_text() == "ucplan import: error: " + (dir / "missing.onnx").string() +
                             ": cannot read the file (No such file or directory)\n");
  CHECK(!fs::exists(out));

  std::string good = write("good.onnx", inception(Weights::DimsOnly).bytes());
  CHECK(run(good + " -o " + out + " --name imported_inception") == 0);
  Network net = load_network(out);
  CHECK(net.name == "imported_inception");
  CHECK(build_graph(net, out).total_params() == build_graph(parse_network_text(kInception, "h"), "h").total_params());
  fs::remove_all(dir);
}

// torchvision's classification CNNs, exported by scripts/export_torchvision.py without weights
// (tests/data/onnx/). Truth, recorded by that script from PyTorch itself (torchvision.json):
// each model's parameter count (sum of p.numel()) and the per-sample output shape of every
// Conv2d and Linear call of a training forward, in call order; and for four of them the zoo
// network written independently by networks/generate.py, layer by layer.
nlohmann::json torchvision_truth(const std::string& folder) {
  std::ifstream in(folder + "/torchvision.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

void check_against_torch(const std::string& folder, const std::string& name, const nlohmann::json& truth) {
  INFO(name);
  const std::string path = folder + "/" + name + ".onnx";
  Graph g = build_graph(import_onnx_file(path, {}), path);
  CHECK(g.total_params() == truth["parameters"].get<std::int64_t>());
  CHECK(g.net.labels == 1000);
  CHECK(g.layers[0].out == (Shape{truth["input"][0], truth["input"][1], truth["input"][2]}));
  // torch's Conv2d and Linear calls are ucplan's conv and fc layers, in the same order (a Linear on
  // NHWC pixels is a 1x1 conv).
  std::vector<const GraphLayer*> calls;
  for (const auto& l : g.layers)
    if (l.type() == LayerType::Conv || l.type() == LayerType::Fc) calls.push_back(&l);
  const auto& want = truth["conv_fc_outputs"];
  REQUIRE(calls.size() == want.size());
  for (std::size_t k = 0; k < calls.size(); ++k) {
    INFO("call ", k, ": ", calls[k]->name());
    const auto& s = want[k][1];
    CHECK(calls[k]->out == (Shape{s[0], s[1], s[2]}));
    if (want[k][0] == "conv") CHECK(calls[k]->type() == LayerType::Conv);
  }
}

TEST_CASE("torchvision models from weight-stripped ONNX files: parameter counts and layer shapes") {
  const std::string folder = std::string(UCPLAN_SOURCE_DIR) + "/tests/data/onnx";
  const nlohmann::json truth = torchvision_truth(folder);
  CHECK(truth["models"].size() >= 68);
  for (const auto& [name, t] : truth["models"].items()) check_against_torch(folder, name, t);
  // The same four at 64x64 (the CPU replay tests' inputs).
  const nlohmann::json small = torchvision_truth(folder + "/small");
  for (const auto& [name, t] : small["models"].items()) check_against_torch(folder + "/small", name, t);

  // Inception v3 has its auxiliary classifier: two outputs, two losses.
  const std::pair<const char*, std::int64_t> losses[] = {{"inception_v3", 2}, {"resnet50", 1}, {"googlenet", 1}};
  for (const auto& [name, count] : losses) {
    Graph g = build_graph(import_onnx_file(folder + "/" + name + ".onnx", {}), name);
    std::int64_t n = 0;
    for (const auto& l : g.layers) n += l.type() == LayerType::SoftmaxLoss;
    CHECK(n == count);
  }
  // Names differ (PyTorch's node names); the sequence of (type, output shape, parameters) may not.
  for (const char* zoo_name : {"vgg16", "resnet18", "resnet50", "densenet121"}) {
    INFO(zoo_name);
    Graph g = build_graph(import_onnx_file(folder + "/" + zoo_name + ".onnx", {}), zoo_name);
    Graph zoo = build_graph(load_network(resolve_network_path(zoo_name)), zoo_name);
    REQUIRE(g.layers.size() == zoo.layers.size());
    for (std::size_t l = 1; l < g.layers.size(); ++l) {
      INFO("layer ", l, ": ", zoo.layers[l].name(), " / ", g.layers[l].name());
      CHECK(g.layers[l].type() == zoo.layers[l].type());
      CHECK(g.layers[l].out == zoo.layers[l].out);
      CHECK(g.layers[l].params() == zoo.layers[l].params());
    }
  }
  // Spot checks against torchvision's modules: densenet121's last dense block ends with
  // 64 + 32*6 -> 128 (transition) ... -> 1024 channels at 7x7; inception_v3's Mixed_7c 2048x8x8.
  Graph d =
      build_graph(import_onnx_file(std::string(UCPLAN_SOURCE_DIR) + "/tests/data/onnx/densenet121.onnx", {}), "d");
  REQUIRE(d.index_of("/features/norm5/BatchNormalization") > 0);
  CHECK(d.layers[d.index_of("/features/norm5/BatchNormalization")].out == Shape{1024, 7, 7});
  Graph i =
      build_graph(import_onnx_file(std::string(UCPLAN_SOURCE_DIR) + "/tests/data/onnx/inception_v3.onnx", {}), "i");
  REQUIRE(i.index_of("/Mixed_7c/Concat") > 0);
  CHECK(i.layers[i.index_of("/Mixed_7c/Concat")].out == Shape{2048, 8, 8});
}
