#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include "planner/model/errors.h"
#include "planner/ir/graph.h"
#include "planner/model/network.h"
#include "profiler/cache.h"
#include "profiler/model_device.h"

using namespace ucplan;

// Helpers of the model_device suite (named, so other suites in this file can add their own).
namespace model_device_test {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// Networks built in code through the real model (network -> build_graph), so these tests do not
// depend on the zoo files; the layer lists follow the reference definitions named below.
class NetBuilder {
 public:
  NetBuilder(std::string name, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t labels) {
    net_.name = std::move(name);
    net_.input_shape = {c, h, w};
    net_.labels = labels;
  }
  std::string conv(const std::string& name, const std::string& in, std::int64_t out, std::int64_t k,
                   std::int64_t stride = 1, std::int64_t pad = 0, std::int64_t groups = 1, bool bias = true,
                   std::int64_t dilation = 1) {
    Layer& l = add_layer(name, LayerType::Conv, {in});
    l.conv.dilation = {dilation, dilation};
    l.conv.out_channels = out;
    l.conv.kernel = {k, k};
    l.conv.stride = {stride, stride};
    l.conv.pad = {pad, pad};
    l.conv.groups = groups;
    l.conv.bias = bias;
    return name;
  }
  std::string relu(const std::string& name, const std::string& in) { return simple(name, LayerType::Relu, in); }
  std::string bn(const std::string& name, const std::string& in) { return simple(name, LayerType::BatchNorm, in); }
  std::string lrn(const std::string& name, const std::string& in) { return simple(name, LayerType::Lrn, in); }
  std::string dropout(const std::string& name, const std::string& in) { return simple(name, LayerType::Dropout, in); }
  std::string loss(const std::string& name, const std::string& in) { return simple(name, LayerType::SoftmaxLoss, in); }
  std::string pool(const std::string& name, const std::string& in, PoolMode mode, std::int64_t k, std::int64_t stride,
                   std::int64_t pad = 0, bool global = false) {
    Layer& l = add_layer(name, LayerType::Pool, {in});
    l.pool.mode = mode;
    l.pool.kernel = {k, k};
    l.pool.stride = {stride, stride};
    l.pool.pad = {pad, pad};
    l.pool.global = global;
    return name;
  }
  std::string fc(const std::string& name, const std::string& in, std::int64_t out) {
    add_layer(name, LayerType::Fc, {in}).fc.out_features = out;
    return name;
  }
  std::string add(const std::string& name, const std::string& a, const std::string& b) {
    add_layer(name, LayerType::Add, {a, b});
    return name;
  }
  Graph build() const { return build_graph(net_, net_.name + " (built in test_profiler.cpp)"); }

 private:
  Layer& add_layer(const std::string& name, LayerType type, std::vector<std::string> inputs) {
    Layer l;
    l.name = name;
    l.type = type;
    l.inputs = std::move(inputs);
    net_.layers.push_back(std::move(l));
    return net_.layers.back();
  }
  std::string simple(const std::string& name, LayerType type, const std::string& in) {
    add_layer(name, type, {in});
    return name;
  }
  Network net_;
};

// Caffe's bvlc_alexnet (227x227, grouped conv2/4/5): the network of mu-cuDNN's Figs. 1, 6, 9-12.
Graph alexnet() {
  NetBuilder n("alexnet", 3, 227, 227, 1000);
  auto x = n.conv("conv1", "data", 96, 11, 4);
  x = n.pool("pool1", n.lrn("norm1", n.relu("relu1", x)), PoolMode::Max, 3, 2);
  x = n.conv("conv2", x, 256, 5, 1, 2, 2);
  x = n.pool("pool2", n.lrn("norm2", n.relu("relu2", x)), PoolMode::Max, 3, 2);
  x = n.relu("relu3", n.conv("conv3", x, 384, 3, 1, 1));
  x = n.relu("relu4", n.conv("conv4", x, 384, 3, 1, 1, 2));
  x = n.relu("relu5", n.conv("conv5", x, 256, 3, 1, 1, 2));
  x = n.pool("pool5", x, PoolMode::Max, 3, 2);
  x = n.dropout("drop6", n.relu("relu6", n.fc("fc6", x, 4096)));
  x = n.dropout("drop7", n.relu("relu7", n.fc("fc7", x, 4096)));
  n.loss("loss", n.fc("fc8", x, 1000));
  return n.build();
}

// VGG-16 (configuration D, 224x224): moDNN's K40 experiments.
Graph vgg16() {
  NetBuilder n("vgg16", 3, 224, 224, 1000);
  std::string x = "data";
  const std::vector<std::vector<std::int64_t>> stages = {
      {64, 64}, {128, 128}, {256, 256, 256}, {512, 512, 512}, {512, 512, 512}};
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (std::size_t i = 0; i < stages[s].size(); ++i) {
      auto name = fmt::format("conv{}_{}", s + 1, i + 1);
      x = n.relu("relu" + name.substr(4), n.conv(name, x, stages[s][i], 3, 1, 1));
    }
    x = n.pool(fmt::format("pool{}", s + 1), x, PoolMode::Max, 2, 2);
  }
  x = n.dropout("drop6", n.relu("relu6", n.fc("fc6", x, 4096)));
  x = n.dropout("drop7", n.relu("relu7", n.fc("fc7", x, 4096)));
  n.loss("loss", n.fc("fc8", x, 1000));
  return n.build();
}

// torchvision's resnet50 (v1.5: stride on the 3x3 conv of each bottleneck).
Graph resnet50() {
  NetBuilder n("resnet50", 3, 224, 224, 1000);
  auto x = n.relu("relu", n.bn("bn1", n.conv("conv1", "data", 64, 7, 2, 3, 1, false)));
  x = n.pool("maxpool", x, PoolMode::Max, 3, 2, 1);
  const std::int64_t widths[] = {64, 128, 256, 512}, blocks[] = {3, 4, 6, 3};
  for (int s = 0; s < 4; ++s) {
    for (int b = 0; b < blocks[s]; ++b) {
      const std::int64_t w = widths[s], stride = (b == 0 && s > 0) ? 2 : 1;
      const auto p = fmt::format("layer{}.{}.", s + 1, b);
      auto y = n.relu(p + "relu1", n.bn(p + "bn1", n.conv(p + "conv1", x, w, 1, 1, 0, 1, false)));
      y = n.relu(p + "relu2", n.bn(p + "bn2", n.conv(p + "conv2", y, w, 3, stride, 1, 1, false)));
      y = n.bn(p + "bn3", n.conv(p + "conv3", y, 4 * w, 1, 1, 0, 1, false));
      auto shortcut = x;
      if (b == 0) shortcut = n.bn(p + "downsample.1", n.conv(p + "downsample.0", x, 4 * w, 1, stride, 0, 1, false));
      x = n.relu(p + "relu3", n.add(p + "add", y, shortcut));
    }
  }
  x = n.pool("avgpool", x, PoolMode::Avg, 1, 1, 0, true);
  n.loss("loss", n.fc("fc", x, 1000));
  return n.build();
}

// The ops one training iteration runs for a layer (the profile's op names; runner.h). The first
// layer's input needs no gradient, so its backward_data is skipped, as frameworks do.
std::vector<TaskKind> training_ops(const Graph& g, int layer) {
  const GraphLayer& l = g.layers[layer];
  const bool reads_input = std::find(l.inputs.begin(), l.inputs.end(), 0) != l.inputs.end();
  switch (l.type()) {
    case LayerType::Input:
      return {};
    case LayerType::Conv:
    case LayerType::Fc:
      if (reads_input) return {TaskKind::Forward, TaskKind::BackwardFilter, TaskKind::Update};
      return {TaskKind::Forward, TaskKind::BackwardData, TaskKind::BackwardFilter, TaskKind::Update};
    case LayerType::BatchNorm:
      return {TaskKind::Forward, TaskKind::Backward, TaskKind::Update};
    default:
      return {TaskKind::Forward, TaskKind::Backward};
  }
}

// Fastest supported algorithm for one op at one micro-batch within a workspace limit (-1: none).
struct Best {
  std::string algo;
  double seconds = std::numeric_limits<double>::infinity();
  std::int64_t workspace = 0;
};
Best fastest(Runner& r, const Graph& g, int layer, TaskKind op, std::int64_t b, std::int64_t limit) {
  Best best;
  for (const auto& a : r.algorithms(g, layer, op)) {
    Measurement m = r.measure(g, layer, op, a, op == TaskKind::Update ? 0 : b, 1);
    if (m.status != "ok" || (limit >= 0 && m.workspace_bytes > limit)) continue;
    if (m.seconds < best.seconds) best = {a, m.seconds, m.workspace_bytes};
  }
  return best;
}

// One undivided iteration (forward + backward + update, one compute stream): the sum over the
// layers of each op's fastest algorithm at the whole batch within a per-kernel workspace limit --
// mu-cuDNN's "undivided" policy under WR.
double iteration_seconds(Runner& r, const Graph& g, std::int64_t batch, std::int64_t limit) {
  double t = 0;
  for (int i = 1; i < static_cast<int>(g.layers.size()); ++i)
    for (const auto& op : training_ops(g, i)) {
      Best b = fastest(r, g, i, op, batch, limit);
      REQUIRE_MESSAGE(std::isfinite(b.seconds), g.layers[i].name(), " ", task_kind_name(op), " has no algorithm");
      t += b.seconds;
    }
  return t;
}

std::vector<int> conv_layers(const Graph& g) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(g.layers.size()); ++i)
    if (g.layers[i].type() == LayerType::Conv) out.push_back(i);
  return out;
}

// One layer per distinct signature (the profile measures each signature once).
std::vector<int> distinct_layers(const Graph& g) {
  std::set<std::string> seen;
  std::vector<int> out;
  for (int i = 1; i < static_cast<int>(g.layers.size()); ++i)
    if (seen.insert(layer_signature(g, i)).second) out.push_back(i);
  return out;
}

Measurement measure(Runner& r, const Graph& g, const std::string& layer, TaskKind op, const std::string& algo,
                    std::int64_t b) {
  int i = g.index_of(layer);
  REQUIRE(i > 0);
  return r.measure(g, i, op, algo, b, 5);
}

const std::vector<TaskKind> kConvOps = {TaskKind::Forward, TaskKind::BackwardData, TaskKind::BackwardFilter};

// Direct-convolution FLOPs (2 per multiply-add) of one conv op per sample: the reference of the
// speed bound; bias excluded so it never exceeds what the algorithms compute.
double direct_flops_per_sample(const GraphLayer& l) {
  const auto& c = l.spec.conv;
  return 2.0 * static_cast<double>(l.out.elems()) * static_cast<double>(l.in_shapes[0].c / c.groups) *
         static_cast<double>(c.kernel[0] * c.kernel[1]);
}

// The documented arithmetic reduction bound of each algorithm (model_device.h, "Sanity rule").
double reduction_bound(const GraphLayer& l, const std::string& algo) {
  const auto& c = l.spec.conv;
  const double kk = static_cast<double>(c.kernel[0] * c.kernel[1]);
  if (algo == "winograd") return 2.25;
  if (algo == "winograd_nonfused") {
    const double m = static_cast<double>(6 - c.kernel[0] + 1);
    return kk * m * m / 36.0;
  }
  if (algo == "fft" || algo == "fft_tiling") return kk;
  return 1.0;
}

}  // namespace model_device_test

TEST_SUITE("model_device") {
  using namespace model_device_test;

  TEST_CASE("the seven model devices and their datasheet numbers") {
    CHECK(model_device_names() == std::vector<std::string>{"k40", "p100", "v100", "a100", "h100", "h200", "h100-fit"});
    // The fitted device is model:h100's datasheet with factors (tests/model/fitted.py checks them).
    CHECK(find_model_device("h100-fit")->fp32_flops == find_model_device("h100")->fp32_flops);
    CHECK(find_model_device("h100")->fitted.empty());
    CHECK_FALSE(find_model_device("h100-fit")->fitted.empty());
    REQUIRE(find_model_device("k40") != nullptr);
    CHECK(find_model_device("model:k40") == find_model_device("k40"));
    CHECK(find_model_device("k80") == nullptr);
    CHECK(find_model_device("model:") == nullptr);
    // Spot checks against the datasheets cited in model_device.h.
    CHECK(find_model_device("k40")->fp32_flops == doctest::Approx(4.29e12));
    CHECK(find_model_device("k40")->memory_bytes == 12 * 1024 * kMiB);
    CHECK(find_model_device("p100")->mem_bandwidth == doctest::Approx(732e9));
    CHECK(find_model_device("v100")->fp32_flops == doctest::Approx(15.7e12));
    CHECK(find_model_device("h200")->mem_bandwidth == doctest::Approx(4.8e12));
    // Dense tensor-core rates (issue 15): V100 fp16 only; A100 and Hopper tf32, bf16, fp16.
    CHECK(find_model_device("v100")->fp16_tensor_flops == doctest::Approx(125e12));
    CHECK(find_model_device("v100")->bf16_tensor_flops == 0);
    CHECK(find_model_device("a100")->tf32_tensor_flops == doctest::Approx(156e12));
    CHECK(find_model_device("a100")->bf16_tensor_flops == doctest::Approx(312e12));
    CHECK(find_model_device("h100")->bf16_tensor_flops == doctest::Approx(989.4e12));
    CHECK(find_model_device("k40")->fp16_tensor_flops == 0);
    for (const auto& name : model_device_names()) {
      CAPTURE(name);
      auto r = make_model_runner(name);
      const ModelDeviceSpec* spec = find_model_device(name);
      CHECK(r->source() == "model:" + name);
      DeviceInfo d = r->device();
      CHECK(d.kind == "model");
      CHECK(d.name.starts_with("model " + name + " (" + spec->full_name));
      CHECK(d.memory_bytes == spec->memory_bytes);
      CHECK(d.peak_flops == spec->fp32_flops);
      CHECK(d.versions.at("model") == kModelVersion);
      CHECK(r->measure_duplex() == spec->duplex);
    }
  }

  TEST_CASE("an unknown model device is a user error listing the known ones") {
    try {
      make_model_runner("tpu-v2");
      FAIL("no error");
    } catch (const UserError& e) {
      CHECK(e.where() == "--device");
      CHECK(std::string(e.what()).find("tpu-v2") != std::string::npos);
      CHECK(e.reason().find("model:k40, model:p100, model:v100, model:a100, model:h100, model:h200") !=
            std::string::npos);
    }
  }

  TEST_CASE("transfers are exactly latency + bytes / bandwidth") {
    auto r = make_model_runner("k40");
    const ModelDeviceSpec& s = *find_model_device("k40");
    // 10 us + 64 MiB / 10 GB/s = 10 us + 6.711 ms
    auto h2d = r->measure_transfers(true, {0, 4096, 64 * kMiB});
    REQUIRE(h2d.size() == 3);
    CHECK(h2d[0].bytes == 0);
    CHECK(h2d[0].seconds == doctest::Approx(s.link_latency_s));
    CHECK(h2d[2].bytes == 64 * kMiB);
    CHECK(h2d[2].seconds == doctest::Approx(10e-6 + 64.0 * kMiB / 10e9));
    auto d2h = r->measure_transfers(false, {64 * kMiB});
    CHECK(d2h[0].seconds == doctest::Approx(s.link_latency_s + 64.0 * kMiB / s.d2h_bandwidth));
    // Gen5 on H100: 64 MiB in ~1.35 ms.
    auto h = make_model_runner("h100")->measure_transfers(true, {64 * kMiB});
    CHECK(h[0].seconds == doctest::Approx(8e-6 + 64.0 * kMiB / 50e9));
  }

  TEST_CASE("algorithm lists use runner.h's names") {
    Graph g = alexnet();
    auto r = make_model_runner("p100");
    const int conv2 = g.index_of("conv2");
    CHECK(r->algorithms(g, conv2, TaskKind::Forward) ==
          std::vector<std::string>{"implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling",
                                   "winograd", "winograd_nonfused"});
    CHECK(r->algorithms(g, conv2, TaskKind::BackwardData) ==
          std::vector<std::string>{"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"});
    CHECK(r->algorithms(g, conv2, TaskKind::BackwardFilter) ==
          std::vector<std::string>{"algo_0", "algo_1", "fft", "algo_3", "winograd_nonfused", "fft_tiling"});
    CHECK(r->algorithms(g, conv2, TaskKind::Update) == std::vector<std::string>{"sgd"});
    CHECK(r->algorithms(g, g.index_of("relu2"), TaskKind::Forward) == std::vector<std::string>{"default"});
    CHECK(r->algorithms(g, g.index_of("relu2"), TaskKind::Update).empty());
    CHECK(r->algorithms(g, g.index_of("fc6"), TaskKind::BackwardFilter) == std::vector<std::string>{"default"});
    CHECK(r->algorithms(g, g.index_of("relu2"), TaskKind::BackwardData).empty());
    CHECK(r->algorithms(g, g.index_of("fc6"), TaskKind::Backward).empty());
    CHECK(r->algorithms(g, conv2, TaskKind::Backward).empty());
    CHECK(r->algorithms(g, 0, TaskKind::Forward).empty());
  }

  TEST_CASE("results are deterministic and failures come back as a status") {
    Graph g = alexnet();
    auto r = make_model_runner("v100");
    Measurement a = measure(*r, g, "conv3", TaskKind::Forward, "winograd", 64);
    Measurement b = measure(*r, g, "conv3", TaskKind::Forward, "winograd", 64);
    CHECK(a.status == "ok");
    CHECK(a.seconds == b.seconds);  // bit for bit
    CHECK(a.spread == 0);
    CHECK(measure(*r, g, "conv3", TaskKind::Forward, "algo_0", 64).status.starts_with("failed: unknown algorithm"));
    CHECK(measure(*r, g, "conv3", TaskKind::Backward, "algo_0", 64).status.starts_with("failed:"));
    CHECK(measure(*r, g, "conv3", TaskKind::Forward, "winograd", 0).status.starts_with("failed:"));
    CHECK(measure(*r, g, "relu3", TaskKind::Forward, "fft", 8).status.starts_with("failed:"));
    CHECK(measure(*r, g, "relu3", TaskKind::BackwardData, "default", 8).status.starts_with("failed:"));
    CHECK(measure(*r, g, "relu3", TaskKind::Update, "sgd", 0).status.starts_with("failed:"));
    CHECK(r->measure(g, 0, TaskKind::Forward, "default", 8, 1).status.starts_with("failed:"));
    CHECK(r->measure(g, 999, TaskKind::Forward, "default", 8, 1).status.starts_with("failed:"));
    // update: 3 x parameter bytes at e_mem * bandwidth, + one launch.
    // conv3: 384*256*9 + 384 = 885,120 params -> 10.6 MB -> 13.9 us at 0.85 * 900 GB/s, + 4 us.
    Measurement u = measure(*r, g, "conv3", TaskKind::Update, "sgd", 0);
    CHECK(u.status == "ok");
    CHECK(u.seconds == doctest::Approx(3.0 * 885120 * 4 / (0.85 * 900e9) + 4e-6));
  }

  TEST_CASE("an op of any type whose operands do not fit the device is out of memory") {
    // AlexNet's relu1: 96x55x55 floats in and out, 1,161,600 B a sample at once. The K40 holds
    // 12 GiB: 11,091 samples, not 11,092 (it was "ok" at any batch: only convolutions were checked).
    Graph g = alexnet();
    auto r = make_model_runner("k40");
    const std::int64_t per_sample = 2 * 96 * 55 * 55 * 4, fit = (std::int64_t{12} << 30) / per_sample;
    CHECK(measure(*r, g, "relu1", TaskKind::Forward, "default", fit).status == "ok");
    CHECK(measure(*r, g, "relu1", TaskKind::Forward, "default", fit + 1).status == "out_of_memory");
    // Batch norm reads its input twice but holds it once: X and Y, as a relu.
    const Network net =
        parse_network_text(R"({"format": "ucplan-network/1", "name": "bn", "input": {"shape": [4, 64, 64]},
      "labels": 4, "layers": [{"name": "b", "type": "bn", "inputs": ["data"]},
      {"name": "f", "type": "fc", "inputs": ["b"], "out_features": 4},
      {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]})",
                           "bn");
    const Graph bn = build_graph(net, "bn");
    const std::int64_t bn_fit = (std::int64_t{12} << 30) / (2 * 4 * 64 * 64 * 4);
    CHECK(measure(*r, bn, "b", TaskKind::Forward, "default", bn_fit).status == "ok");
    CHECK(measure(*r, bn, "b", TaskKind::Forward, "default", bn_fit + 1).status == "out_of_memory");
  }

  TEST_CASE("unsupported algorithm and shape combinations are marked unsupported") {
    Graph g = alexnet();
    auto r = make_model_runner("p100");
    // cuDNN has no DIRECT implementation.
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "direct", 8).status == "unsupported");
    // conv1 is 11x11 stride 4: no FFT, no Winograd.
    for (const char* a : {"fft", "fft_tiling", "winograd", "winograd_nonfused"}) {
      CAPTURE(a);
      CHECK(measure(*r, g, "conv1", TaskKind::Forward, a, 8).status == "unsupported");
    }
    CHECK(measure(*r, g, "conv1", TaskKind::Forward, "gemm", 8).status == "ok");
    CHECK(measure(*r, g, "conv1", TaskKind::BackwardFilter, "fft", 8).status == "unsupported");
    // conv2 is 5x5: fused Winograd is 3x3 only, the non-fused one takes 5x5 (F(2x2,5x5)).
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "winograd", 8).status == "unsupported");
    CHECK(measure(*r, g, "conv2", TaskKind::BackwardData, "winograd", 8).status == "unsupported");
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "winograd_nonfused", 8).status == "ok");
    CHECK(measure(*r, g, "conv2", TaskKind::BackwardFilter, "winograd_nonfused", 8).status == "ok");
    CHECK(measure(*r, g, "conv3", TaskKind::BackwardData, "winograd", 8).status == "ok");

    // Images above 256 (padded) defeat FFT but not FFT_TILING; dilation defeats both Winograds.
    NetBuilder n("big", 16, 300, 300, 10);
    auto x = n.conv("c3", "data", 16, 3, 1, 1);
    x = n.conv("c7", x, 16, 7, 1, 3);
    auto dilated = n.conv("d", x, 16, 3, 1, 2, 1, true, 2);
    n.loss("loss", n.fc("fc", n.pool("gp", dilated, PoolMode::Avg, 1, 1, 0, true), 10));
    Graph big = n.build();
    CHECK(measure(*r, big, "c3", TaskKind::Forward, "fft", 4).status == "unsupported");
    CHECK(measure(*r, big, "c3", TaskKind::Forward, "fft_tiling", 4).status == "ok");
    CHECK(measure(*r, big, "c7", TaskKind::Forward, "winograd_nonfused", 4).status == "unsupported");
    CHECK(measure(*r, big, "d", TaskKind::Forward, "winograd", 4).status == "unsupported");
    CHECK(measure(*r, big, "d", TaskKind::Forward, "winograd_nonfused", 4).status == "unsupported");
    CHECK(measure(*r, big, "d", TaskKind::Forward, "fft_tiling", 4).status == "unsupported");
    CHECK(measure(*r, big, "d", TaskKind::Forward, "implicit_gemm", 4).status == "ok");
  }

  TEST_CASE("AlexNet conv2 workspaces are those of mu-cuDNN Figs. 1 and 10 (P100, batch 256)") {
    Graph g = alexnet();
    auto r = make_model_runner("p100");
    // conv2: 96 -> 256 channels, 5x5, pad 2, 2 groups, 27x27. Per group Cg = 48, Kg = 128.
    // FFT: 27 + 2*2 = 31 -> N = 32, S = 32 * 17 = 544 complex points (8 bytes) per plane:
    //   b 256: (256*48 + 256*128 + 128*48) * 544 * 8 = 222,822,400 B = 212.5 MiB (paper: 213 MiB)
    //   b 32:  (32*48 + 32*128 + 128*48) * 544 * 8 = 51,249,152 B = 48.9 MiB (paper: 48.9 MiB)
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "fft", 256).workspace_bytes == 222822400);
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "fft", 32).workspace_bytes == 51249152);
    // implicit_precomp_gemm: an index buffer of 48*5*5 ints = 4.7 KiB (paper: 4.3 KiB); none for
    // implicit_gemm.
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "implicit_precomp_gemm", 256).workspace_bytes == 4800);
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "implicit_gemm", 256).workspace_bytes == 0);

    // With Caffe2's 64 MiB per-kernel limit, FFT only fits micro-batched: 64 does not fit (72.3 MiB),
    // 32 does -- and 8 x FFT(32) beats the best undivided algorithm (mu-cuDNN's powerOfTwo result).
    const std::int64_t limit = 64 * kMiB;
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "fft", 64).workspace_bytes > limit);
    Best undivided = fastest(*r, g, g.index_of("conv2"), TaskKind::Forward, 256, limit);
    CHECK(undivided.algo == "implicit_precomp_gemm");
    Measurement fft32 = measure(*r, g, "conv2", TaskKind::Forward, "fft", 32);
    CHECK(8 * fft32.seconds < undivided.seconds);
    // Best micro-batch size of a powerOfTwo split within 64 MiB: at least 1.5x faster than undivided
    // (mu-cuDNN Fig. 10: 2.33x with the "all" policy; FFT in micro-batches of 32 with powerOfTwo).
    double best_split = undivided.seconds;
    for (std::int64_t b = 1; b <= 256; b *= 2)
      best_split = std::min(best_split, static_cast<double>(256 / b) *
                                            fastest(*r, g, g.index_of("conv2"), TaskKind::Forward, b, limit).seconds);
    CHECK(best_split * 1.5 < undivided.seconds);
    // Non-fused Winograd (F(2x2,5x5)) needs ~5 MB per sample: only small micro-batches fit.
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "winograd_nonfused", 16).workspace_bytes > limit);
    CHECK(measure(*r, g, "conv2", TaskKind::Forward, "winograd_nonfused", 8).workspace_bytes <= limit);
    // Unlimited workspace, undivided: the fastest algorithm needs far more than 64 MiB.
    Best unlimited = fastest(*r, g, g.index_of("conv2"), TaskKind::Forward, 256, -1);
    CHECK(unlimited.workspace > limit);
  }

  TEST_CASE(
      "workspace: none for implicit GEMM, proportional to the micro-batch for GEMM, affine for FFT and Winograd") {
    for (const Graph& g : {alexnet(), resnet50()}) {
      auto r = make_model_runner("v100");
      for (int i : conv_layers(g)) {
        const std::string& name = g.layers[i].name();
        CAPTURE(name);
        CHECK(r->measure(g, i, TaskKind::Forward, "implicit_gemm", 17, 1).workspace_bytes == 0);
        CHECK(r->measure(g, i, TaskKind::BackwardData, "algo_0", 17, 1).workspace_bytes == 0);
        CHECK(r->measure(g, i, TaskKind::BackwardFilter, "algo_0", 17, 1).workspace_bytes == 0);
        // gemm: the lowered matrix, exactly b times that of one sample.
        auto ws = [&](TaskKind op, const std::string& a, std::int64_t b) {
          return r->measure(g, i, op, a, b, 1).workspace_bytes;
        };
        CHECK(ws(TaskKind::Forward, "gemm", 1) > 0);
        CHECK(ws(TaskKind::Forward, "gemm", 24) == 24 * ws(TaskKind::Forward, "gemm", 1));
        // fft, fft_tiling, winograd_nonfused: ws(b) = intercept + b * slope, slope > 0 (the
        // intercept is the transformed filter, which does not depend on the micro-batch).
        for (const auto& op : kConvOps)
          for (const char* a : {"fft", "fft_tiling", "winograd_nonfused"}) {
            CAPTURE(task_kind_name(op));
            CAPTURE(a);
            if (r->measure(g, i, op, a, 1, 1).status != "ok") continue;
            const std::int64_t w1 = ws(op, a, 1), w2 = ws(op, a, 2), w10 = ws(op, a, 10);
            CHECK(w2 > w1);
            CHECK(std::abs((w10 - w2) - 8 * (w2 - w1)) <= 8);  // rounding to whole bytes
            CHECK(2 * w1 - w2 >= 0);                           // intercept >= 0
          }
        // fft_tiling never needs more than fft, and less once the padded image exceeds a tile.
        for (const auto& op : kConvOps) {
          if (r->measure(g, i, op, "fft", 1, 1).status != "ok") continue;
          CAPTURE(task_kind_name(op));
          CHECK(ws(op, "fft_tiling", 64) <= ws(op, "fft", 64));
          const auto& in = g.layers[i].in_shapes[0];
          if (in.h + 2 * g.layers[i].spec.conv.pad[0] > 32) CHECK(ws(op, "fft_tiling", 64) < ws(op, "fft", 64));
        }
      }
    }
  }

  TEST_CASE("no conv op runs faster than its FLOPs over peak, allowing each algorithm's reduction") {
    // Rule (model_device.h): seconds >= direct FLOPs / (peak * R), R = 1 (GEMM family), 2.25
    // (winograd), 4 or 2.78 (winograd_nonfused 3x3 / 5x5), kh*kw (fft, fft_tiling).
    int checked = 0;
    for (const Graph& g : {alexnet(), vgg16(), resnet50()})
      for (const auto& name : model_device_names()) {
        auto r = make_model_runner(name);
        const double peak = find_model_device(name)->fp32_flops;
        for (int i : conv_layers(g))
          for (const auto& op : kConvOps)
            for (const auto& a : r->algorithms(g, i, op))
              for (std::int64_t b : {1, 7, 32, 256}) {
                Measurement m = r->measure(g, i, op, a, b, 1);
                if (m.status != "ok") continue;
                const double bound = direct_flops_per_sample(g.layers[i]) * static_cast<double>(b) /
                                     (peak * reduction_bound(g.layers[i], a));
                CAPTURE(name);
                CAPTURE(g.layers[i].name());
                CAPTURE(task_kind_name(op));
                CAPTURE(a);
                CAPTURE(b);
                CHECK(m.seconds >= bound);
                ++checked;
              }
      }
    CHECK(checked > 10000);
  }

  TEST_CASE("time grows with the micro-batch while time per sample shrinks (efficiency saturates)") {
    int compared = 0;
    for (const Graph& g : {alexnet(), resnet50()})
      for (const auto& name : model_device_names()) {
        auto r = make_model_runner(name);
        for (int i : distinct_layers(g))
          for (const auto& op : training_ops(g, i)) {
            if (op == TaskKind::Update) continue;
            for (const auto& a : r->algorithms(g, i, op)) {
              double prev = 0;
              for (std::int64_t b = 1; b <= 256; b = b < 16 ? b + 1 : b * 2) {
                Measurement m = r->measure(g, i, op, a, b, 1);
                if (m.status != "ok") break;
                if (prev > 0) {
                  const double prev_b = static_cast<double>(b < 17 ? b - 1 : b / 2);
                  if (!(m.seconds >= prev * (1 - 1e-12)) ||
                      !(m.seconds / static_cast<double>(b) <= prev / prev_b * (1 + 1e-12))) {
                    FAIL_CHECK(fmt::format("{} {} {} {} at b={}: {} s after {} s at b={}", name, g.layers[i].name(),
                                           task_kind_name(op), a, b, m.seconds, prev, prev_b));
                  }
                  ++compared;
                }
                prev = m.seconds;
              }
            }
          }
      }
    CHECK(compared > 10000);
    // The effect is real: on a V100, ResNet-50's last 3x3 conv at micro-batch 1 runs at well under
    // half the per-sample speed it reaches at 64.
    Graph g = resnet50();
    auto r = make_model_runner("v100");
    const double t1 = measure(*r, g, "layer4.1.conv2", TaskKind::Forward, "implicit_precomp_gemm", 1).seconds;
    const double t64 = measure(*r, g, "layer4.1.conv2", TaskKind::Forward, "implicit_precomp_gemm", 64).seconds;
    CHECK(t1 > 2 * t64 / 64);
  }

  TEST_CASE("an op whose working set exceeds the device memory is out_of_memory") {
    Graph g = vgg16();
    auto r = make_model_runner("k40");
    // conv1_2 (64 -> 64, 3x3 at 224x224), F(4x4,3x3): 56*56 tiles of 6x6 per plane;
    // (256*64*3136 + 256*64*3136 + 64*64) * 36 * 4 B = 14.8 GB > 12 GiB.
    Measurement m = measure(*r, g, "conv1_2", TaskKind::Forward, "winograd_nonfused", 256);
    CHECK(m.status == "out_of_memory");
    CHECK(m.workspace_bytes > 12 * 1024 * kMiB);
    CHECK(measure(*r, g, "conv1_2", TaskKind::Forward, "winograd_nonfused", 16).status == "ok");
    CHECK(measure(*make_model_runner("h200"), g, "conv1_2", TaskKind::Forward, "winograd_nonfused", 256).status ==
          "ok");
  }

  // Sanity bands: the model is not a simulator of any one GPU, but a whole iteration must land
  // where published measurements put it, or plans made with it would mislead.
  TEST_CASE("sanity band: ResNet-50 batch 64 on V100 trains at a few hundred images/s") {
    // Published FP32 training throughput on one V100-SXM2 16GB: 367 img/s (NVIDIA
    // DeepLearningExamples, PyTorch ResNet50 v1.5, DGX-1); 342 ms per batch of 128 = 374 img/s
    // (torchvision, FP32 NCHW). Band: 250 - 550 img/s, i.e. 116 - 256 ms for 64 images.
    Graph g = resnet50();
    CHECK(g.total_params() == 25557032);  // torchvision's count: the builder is the reference net
    auto r = make_model_runner("v100");
    const double t = iteration_seconds(*r, g, 64, -1);
    MESSAGE(fmt::format("ResNet-50 b64 on model:v100: {:.1f} ms per iteration, {:.0f} images/s", t * 1e3, 64 / t));
    CHECK(64 / t >= 250);
    CHECK(64 / t <= 550);
  }

  TEST_CASE("sanity band: AlexNet batch 256 on P100, undivided, as in mu-cuDNN Fig. 9") {
    // mu-cuDNN Fig. 9 (Caffe, P100-SXM2, batch 256): about 100 - 200 ms per iteration undivided;
    // 64 MiB per kernel is Caffe2's default. Band: 80 - 250 ms; more workspace is never slower.
    Graph g = alexnet();
    CHECK(g.total_params() == 60965224);  // bvlc_alexnet
    auto r = make_model_runner("p100");
    const double t8 = iteration_seconds(*r, g, 256, 8 * kMiB);
    const double t64 = iteration_seconds(*r, g, 256, 64 * kMiB);
    const double t512 = iteration_seconds(*r, g, 256, 512 * kMiB);
    MESSAGE(fmt::format("AlexNet b256 on model:p100, undivided: {:.1f} / {:.1f} / {:.1f} ms with 8 / 64 / 512 MiB",
                        t8 * 1e3, t64 * 1e3, t512 * 1e3));
    CHECK(t64 >= 0.080);
    CHECK(t64 <= 0.250);
    CHECK(t8 >= t64);
    CHECK(t64 >= t512);
  }

  TEST_CASE("sanity band: VGG-16 batch 256 on K40 takes seconds (moDNN's setting)") {
    // moDNN trains VGG-16 at batch 256 on a K40m (12 GB). Torch + cuDNN 5.0 on a K40c: 920 ms
    // forward + backward per batch of 16 (jcjohnson/cnn-benchmarks), i.e. ~14.7 s per 256 by
    // linear scaling; cuDNN >= 5.1's non-fused Winograd (4x fewer multiplies on VGG's 3x3 convs)
    // can halve that. Band: 5 - 25 s.
    Graph g = vgg16();
    CHECK(g.total_params() == 138357544);
    auto r = make_model_runner("k40");
    const double t = iteration_seconds(*r, g, 256, -1);
    MESSAGE(fmt::format("VGG-16 b256 on model:k40: {:.2f} s per iteration", t));
    CHECK(t >= 5);
    CHECK(t <= 25);
  }

  TEST_CASE("sanity bands hold for the zoo's networks when they are there") {
    struct Case {
      const char* file;
      const char* device;
      std::int64_t batch, limit;
      double lo, hi;  // seconds per iteration
    };
    // Same bands as above; the zoo may follow a different reference (e.g. torchvision's AlexNet),
    // so these are looser by the same margins.
    const Case cases[] = {{"resnet50.json", "v100", 64, -1, 64.0 / 550, 64.0 / 250},
                          {"alexnet.json", "p100", 256, 64 * kMiB, 0.050, 0.250},
                          {"vgg16.json", "k40", 256, -1, 5, 25}};
    for (const auto& c : cases) {
      const std::filesystem::path path = std::filesystem::path(UCPLAN_SOURCE_DIR) / "networks" / c.file;
      if (!std::filesystem::exists(path)) {
        MESSAGE("no ", path.string(), " yet: skipped");
        continue;
      }
      Graph g = build_graph(load_network(path.string()), path.string());
      auto r = make_model_runner(c.device);
      const double t = iteration_seconds(*r, g, c.batch, c.limit);
      MESSAGE(fmt::format("{} b{} on model:{}: {:.1f} ms", c.file, c.batch, c.device, t * 1e3));
      CHECK(t >= c.lo);
      CHECK(t <= c.hi);
    }
  }

  // Not a check: the numbers quoted in reports. Run with
  //   test_profiler --test-case='*model numbers*' --no-skip
  TEST_CASE("model numbers (report)" * doctest::skip()) {
    Graph g = alexnet();
    auto r = make_model_runner("p100");
    fmt::print("AlexNet (bvlc) batch 256 on model:p100, per conv op and algorithm: time, workspace\n");
    for (int i : conv_layers(g))
      for (const auto& op : kConvOps) {
        fmt::print("{:6} {:16}", g.layers[i].name(), task_kind_name(op));
        for (const auto& a : r->algorithms(g, i, op)) {
          Measurement m = r->measure(g, i, op, a, 256, 1);
          if (m.status == "ok")
            fmt::print(" {}={:.2f}ms/{:.1f}MiB", a, m.seconds * 1e3, static_cast<double>(m.workspace_bytes) / kMiB);
          else
            fmt::print(" {}={}", a, m.status);
        }
        fmt::print("\n");
      }
    for (const char* dev : {"k40", "p100", "v100", "h100", "h200"}) {
      auto rd = make_model_runner(dev);
      fmt::print("model:{}: ResNet-50 b64 {:.1f} ms; AlexNet b256 (64 MiB) {:.1f} ms; VGG-16 b256 {:.2f} s\n", dev,
                 iteration_seconds(*rd, resnet50(), 64, -1) * 1e3,
                 iteration_seconds(*rd, alexnet(), 256, 64 * kMiB) * 1e3, iteration_seconds(*rd, vgg16(), 256, -1));
    }
    // jcjohnson/cnn-benchmarks, Torch + cuDNN 5.0, Tesla K40c, batch 16 forward + backward:
    // AlexNet 61.5 ms, VGG-16 920 ms, ResNet-50 450 ms.
    auto k40 = make_model_runner("k40");
    fmt::print("model:k40 batch 16: AlexNet {:.1f} ms, VGG-16 {:.1f} ms, ResNet-50 {:.1f} ms\n",
               iteration_seconds(*k40, alexnet(), 16, -1) * 1e3, iteration_seconds(*k40, vgg16(), 16, -1) * 1e3,
               iteration_seconds(*k40, resnet50(), 16, -1) * 1e3);
  }

}  // TEST_SUITE

// ---- The profiling driver: CPU measurements, the cache, transfer fits, file round trip. ----
#include <filesystem>

#include "planner/model/json_util.h"
#include "profiler/cpu_runner.h"
#include "profiler/profile_network.h"

TEST_SUITE("profile") {
  TEST_CASE("transfer fit: latency and bandwidth of exact points") {
    // t = 10 us + bytes / 8 GB/s at 1 KB, 1 MB and 100 MB.
    std::vector<ucplan::TransferPoint> pts;
    for (std::int64_t b : {1000LL, 1000000LL, 100000000LL}) pts.push_back({b, 10e-6 + static_cast<double>(b) / 8e9});
    const ucplan::TransferCosts t = ucplan::fit_transfers(pts);
    CHECK(t.latency_seconds == doctest::Approx(10e-6).epsilon(1e-6));
    CHECK(t.bytes_per_second == doctest::Approx(8e9).epsilon(1e-9));
    CHECK(t.seconds(2000000) == doctest::Approx(10e-6 + 2e6 / 8e9));
  }

  TEST_CASE("micro-batch size policies (mu-cuDNN §III-B)") {
    using ucplan::SizesPolicy;
    CHECK(ucplan::micro_batch_sizes(SizesPolicy::Undivided, 48) == std::vector<std::int64_t>{48});
    CHECK(ucplan::micro_batch_sizes(SizesPolicy::PowerOfTwo, 48) == std::vector<std::int64_t>{1, 2, 4, 8, 16, 32, 48});
    CHECK(ucplan::micro_batch_sizes(SizesPolicy::PowerOfTwo, 32) == std::vector<std::int64_t>{1, 2, 4, 8, 16, 32});
    CHECK(ucplan::micro_batch_sizes(SizesPolicy::All, 5) == std::vector<std::int64_t>{1, 2, 3, 4, 5});
  }

  // A large input through a relu (the op too large to run), then a global pool and an fc (small).
  // A runner that is another one but for what a test changes of its measurements.
  struct Wrapping : ucplan::Runner {
    explicit Wrapping(std::unique_ptr<ucplan::Runner> r) : inner(std::move(r)) {}
    std::unique_ptr<ucplan::Runner> inner;
    ucplan::DeviceInfo device() override { return inner->device(); }
    std::string source() const override { return inner->source(); }
    std::vector<std::string> algorithms(const ucplan::Graph& g, int layer, TaskKind op) override {
      return inner->algorithms(g, layer, op);
    }
    Measurement measure(const ucplan::Graph& g, int layer, TaskKind op, const std::string& algo, std::int64_t batch,
                        int repeats) override {
      return inner->measure(g, layer, op, algo, batch, repeats);
    }
    std::vector<ucplan::TransferPoint> measure_transfers(bool h2d, const std::vector<std::int64_t>& sizes) override {
      return inner->measure_transfers(h2d, sizes);
    }
    bool measure_duplex() override { return inner->measure_duplex(); }
  };

  ucplan::Network relu_pool_fc(const std::string& name, const std::string& shape) {
    return ucplan::parse_network_text(R"({"format": "ucplan-network/1", "name": ")" + name +
                                          R"(", "input": {"shape": )" + shape + R"(}, "labels": 4, "layers": [
      {"name": "r", "type": "relu", "inputs": ["data"]},
      {"name": "p", "type": "pool", "inputs": ["r"], "mode": "avg", "global": true},
      {"name": "f", "type": "fc", "inputs": ["p"], "out_features": 4},
      {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]})",
                                      name);
  }

  // As a GPU's runner records what cudaMalloc refuses, the CPU's records an op whose buffers exceed
  // the host's memory as out_of_memory, without allocating them. It threw std::bad_alloc (or the
  // kernel's OOM killer ended the profiler) before.
  TEST_CASE("a CPU op whose buffers exceed the host's memory is out_of_memory, not a crash") {
    const ucplan::Network net = relu_pool_fc("wide", "[16, 1024, 1024]");
    const ucplan::Graph g = ucplan::build_graph(net, "wide");
    auto runner = ucplan::make_cpu_runner();
    // 2^24 values a sample, four buffers of them (x, dx, y, dy) at 2^16 samples: 16 TiB.
    const Measurement m = runner->measure(g, g.index_of("r"), TaskKind::Forward, "default", 65536, 1);
    CHECK(m.status == "out_of_memory");
    CHECK(m.seconds == 0);
    CHECK(runner->measure(g, g.index_of("f"), TaskKind::Forward, "default", 65536, 1).status == "ok");  // 16 values
  }

  // The profile loader refuses an op of more than kMaxOpSeconds (1000 s); a layer of 2^36 values a
  // sample at a batch of 1024 was modelled at 1,400 s on a K40, and the profiler wrote it, so every
  // compile refused the profile. Now such an op is recorded as failed, and the profile reads back.
  // (The K40 model now finds that layer out of memory, as it is: a runner 10^5 times slower than
  // it stands in for a slow device.)
  TEST_CASE("an op longer than a profile may hold is recorded as failed, and the profile reads back") {
    struct Slow : Wrapping {
      Slow() : Wrapping(make_model_runner("k40")) {}
      Measurement measure(const ucplan::Graph& g, int layer, TaskKind op, const std::string& algo, std::int64_t batch,
                          int repeats) override {
        Measurement m = inner->measure(g, layer, op, algo, batch, repeats);
        m.seconds *= 1e5;
        return m;
      }
    };
    const ucplan::Network net = relu_pool_fc("huge", "[1, 1024, 1024]");
    ucplan::ProfileOptions o;
    o.batch = 1024;
    Slow slow;
    const ucplan::Profile p = ucplan::profile_network(net, "huge", slow, o);
    const ucplan::Graph g = ucplan::build_graph(net, "huge");
    const ucplan::SignatureCosts* relu = p.find(ucplan::layer_signature(g, g.index_of("r")));
    REQUIRE(relu);
    int failed = 0, ok = 0;
    for (const auto& c : relu->costs) {
      if (c.ok()) {
        ++ok;
        CHECK(c.seconds <= ucplan::kMaxOpSeconds);
      } else {
        ++failed;
        CHECK(c.status.rfind("failed: ", 0) == 0);
        CHECK(c.status.find("more than the 1000 s a profile holds for one op") != std::string::npos);
      }
    }
    CHECK(failed > 0);
    CHECK(ok > 0);
    namespace fs = std::filesystem;
    const std::string path = (fs::temp_directory_path() / "ucplan-test-huge-profile.json").string();
    const std::string text = ucplan::profile_to_json_text(p);
    ucplan::write_file_atomically(path, text);
    CHECK(ucplan::profile_to_json_text(ucplan::load_profile(path)) == text);
    fs::remove(path);
  }

  TEST_CASE("a measured CPU profile covers every op at every size, reads back, and is reused from the cache") {
    const ucplan::Network net = ucplan::parse_network_text(R"({"format": "ucplan-network/1", "name": "tiny",
      "input": {"shape": [2, 8, 8]}, "labels": 4, "layers": [
      {"name": "c1", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 3, "pad": 1},
      {"name": "b1", "type": "bn", "inputs": ["c1"]},
      {"name": "r1", "type": "relu", "inputs": ["b1"]},
      {"name": "c2", "type": "conv", "inputs": ["r1"], "out_channels": 4, "kernel": 3, "pad": 1, "stride": 2},
      {"name": "f", "type": "fc", "inputs": ["c2"], "out_features": 4},
      {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]})",
                                                           "tiny");
    namespace fs = std::filesystem;
    const std::string cache = (fs::temp_directory_path() / "ucplan-test-cache").string();
    fs::remove_all(cache);
    auto runner = ucplan::make_cpu_runner();
    ucplan::ProfileOptions o;
    o.batch = 4;
    o.repeat = 2;
    o.cache_dir = cache;
    const ucplan::Profile p = ucplan::profile_network(net, "tiny", *runner, o);
    CHECK(p.source == "measured");
    CHECK(p.device.kind == "cpu");
    CHECK(!p.date.empty());
    CHECK(p.sizes == std::vector<std::int64_t>{1, 2, 4});
    // conv c1 reads the network input: forward and backward_filter only; c2 also backward_data.
    // Every (op, size, algorithm) is there, with a status; conv algorithms that cannot run the
    // shape (gemm_lift needs stride 1) are recorded as unsupported, not dropped.
    const ucplan::Graph g = ucplan::build_graph(net, "tiny");
    const ucplan::SignatureCosts* c2 = p.find(ucplan::layer_signature(g, g.index_of("c2")));
    REQUIRE(c2);
    int unsupported = 0, ok = 0;
    for (const auto& c : c2->costs) {
      if (c.op == ucplan::StepOp::Update) continue;
      (c.ok() ? ok : unsupported) += 1;
      if (c.ok()) CHECK(c.seconds > 0);
    }
    CHECK(ok == 3 * 3 * 2);           // 3 ops x 3 sizes x {direct, gemm}
    CHECK(unsupported == 3 * 3 * 1);  // gemm_lift at stride 2
    // The file reads back to the same text.
    const std::string path = (fs::temp_directory_path() / "ucplan-test-profile.json").string();
    const std::string text = ucplan::profile_to_json_text(p);
    ucplan::write_file_atomically(path, text);
    CHECK(ucplan::profile_to_json_text(ucplan::load_profile(path)) == text);
    fs::remove(path);
    // Profiled again with the cache: the same costs, nothing measured twice (same medians).
    const ucplan::Profile again = ucplan::profile_network(net, "tiny", *runner, o);
    REQUIRE(again.signatures.size() == p.signatures.size());
    for (std::size_t i = 0; i < p.signatures.size(); ++i) {
      REQUIRE(again.signatures[i].costs.size() == p.signatures[i].costs.size());
      for (std::size_t k = 0; k < p.signatures[i].costs.size(); ++k)
        CHECK(again.signatures[i].costs[k].seconds == p.signatures[i].costs[k].seconds);
    }
    // A cache file edited by hand is refused where it is wrong, as a profile would be: an entry
    // under another measurement's key (here a gemm_lift entry made "ok" and moved to a gemm key:
    // a profile with it would hand the planner costs the CPU kernels break), or a time no
    // profile may hold.
    std::string cache_file;
    for (const auto& f : fs::directory_iterator(cache)) cache_file = f.path().string();
    std::stringstream text_of;
    text_of << std::ifstream(cache_file).rdbuf();
    const std::string original = text_of.str();
    auto edited = [&](const std::string& from, const std::string& to) {
      const auto at = original.find(from);
      REQUIRE(at != std::string::npos);
      ucplan::write_file_atomically(cache_file, std::string(original).replace(at, from.size(), to));
    };
    edited("|forward|gemm|4|r2\",\"op\":\"forward\",\"algo\":\"gemm\"",
           "|forward|gemm|4|r2\",\"op\":\"forward\",\"algo\":\"gemm_lift\"");
    CHECK_THROWS_WITH_AS(ucplan::profile_network(net, "tiny", *runner, o),
                         doctest::Contains("].key: names another measurement than the entry's "
                                           "(\"forward|gemm_lift|4|r\" expected after its signature)"),
                         ucplan::UserError);
    edited("\"seconds\":", "\"seconds\":-");
    CHECK_THROWS_WITH_AS(ucplan::profile_network(net, "tiny", *runner, o),
                         doctest::Contains("].seconds: must be a finite, non-negative number"), ucplan::UserError);
    fs::remove_all(cache);
  }

  // Two profiles sharing a cache folder (fp32 and bf16 of one network, side by side) both save
  // it: the second used to write what it had read before the first saved, and the first's
  // measurements were lost (33252 fp32 entries and 0 bf16 after two such runs).
  TEST_CASE("a cache saved by two profiles keeps both profiles' measurements") {
    namespace fs = std::filesystem;
    const std::string dir = (fs::temp_directory_path() / "ucplan-test-cache-shared").string();
    fs::remove_all(dir);
    ucplan::DeviceInfo device;
    device.kind = "model";
    device.name = "model k40";
    ucplan::MeasurementCache first(dir, device, "model:k40"), second(dir, device, "model:k40");
    auto cost = [](const char* algo, double seconds) {
      ucplan::OpCost c;
      c.op = ucplan::StepOp::Forward;
      c.algo = algo;
      c.batch = 4;
      c.seconds = seconds;
      return c;
    };
    first.put("conv A|forward|gemm|4|r1", cost("gemm", 1e-3));
    first.save();
    second.put("conv B|forward|direct|4|r1", cost("direct", 2e-3));
    second.put("conv C|forward|gemm|4|r1", [&] {  // out of memory then: not kept
      ucplan::OpCost c = cost("gemm", 0);
      c.status = "out_of_memory";
      return c;
    }());
    second.save();
    const ucplan::MeasurementCache again(dir, device, "model:k40");
    REQUIRE(again.find("conv A|forward|gemm|4|r1"));
    CHECK(again.find("conv A|forward|gemm|4|r1")->seconds == 1e-3);
    REQUIRE(again.find("conv B|forward|direct|4|r1"));
    CHECK(again.find("conv B|forward|direct|4|r1")->seconds == 2e-3);
    CHECK_FALSE(again.find("conv C|forward|gemm|4|r1"));
    fs::remove_all(dir);
  }

  // A conv and an fc: the smallest network whose profile has a conv's algorithms.
  ucplan::Network one_conv_network() {
    return ucplan::parse_network_text(R"({"format": "ucplan-network/1", "name": "one",
      "input": {"shape": [2, 8, 8]}, "labels": 4, "layers": [
      {"name": "c1", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 3, "pad": 1},
      {"name": "f", "type": "fc", "inputs": ["c1"], "out_features": 4},
      {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]})",
                                      "one");
  }

  // Other work on the CPU while profiling inflates kernel times: said where it had half a core or
  // more (measured from /proc/stat less the profiler's own CPU time), not otherwise.
  TEST_CASE("a CPU profile measured beside other work says so") {
    ucplan::Profile p;
    CHECK(ucplan::shared_cpu_warning(p).empty());  // a model's, or one made before these fields
    p.device.versions = {{"cpu_busy_others", "1.87"}, {"cpu_cores", "2"}, {"measured_seconds", "12.0"}};
    CHECK(ucplan::shared_cpu_warning(p) ==
          "other work kept 1.9 of this machine's 2 cores busy on average while the profile was measured (12.0 s): "
          "its kernel times may be inflated; profile on an idle machine, or with more --repeat");
    p.device.versions["cpu_busy_others"] = "0.49";
    CHECK(ucplan::shared_cpu_warning(p).empty());
    for (const char* bad : {"", "x", "nan", "-1", "0.6x"}) {  // an edited profile: no warning, no crash
      p.device.versions["cpu_busy_others"] = bad;
      CHECK(ucplan::shared_cpu_warning(p).empty());
    }
  }

  // A model device's costs come from formulas that change with the code, and the cache's key
  // names the device and versions, not the formulas: a cache of them would keep a changed model's
  // old answers. Only measurements are cached.
  TEST_CASE("a model device neither reads nor writes the cache") {
    namespace fs = std::filesystem;
    const std::string dir = (fs::temp_directory_path() / "ucplan-test-cache-model").string();
    fs::remove_all(dir);
    const ucplan::Network net = one_conv_network();
    auto runner = ucplan::make_model_runner("h100");
    ucplan::ProfileOptions o;
    o.batch = 2;
    o.cache_dir = dir;
    const ucplan::Profile first = ucplan::profile_network(net, "one", *runner, o);
    CHECK_FALSE(fs::exists(dir));
    // A cache left by an older model (the same key, another time) is not read either.
    ucplan::MeasurementCache stale(dir, runner->device(), runner->source());
    const auto& c1 = first.signatures.front();
    for (const auto& c : c1.costs) {
      ucplan::OpCost old = c;
      old.seconds = 1.0;
      stale.put(fmt::format("{}|{}|{}|{}|r{}", c1.signature, ucplan::step_op_name(c.op), c.algo, c.batch, o.repeat),
                old);
    }
    stale.save();
    const ucplan::Profile second = ucplan::profile_network(net, "one", *runner, o);
    CHECK(ucplan::profile_to_json_text(second) == ucplan::profile_to_json_text(first));
    fs::remove_all(dir);
  }

  // Out of memory depends on what else held the memory then (a profile under `ulimit -v`, a GPU
  // shared with another process): the cache keeps what the device says of the op itself, and an
  // op out of memory once is measured again the next time.
  TEST_CASE("the cache does not keep out of memory: the next profile measures the op again") {
    struct Squeezed : Wrapping {  // the CPU runner, every gemm out of memory while `tight`
      Squeezed() : Wrapping(ucplan::make_cpu_runner()) {}
      bool tight = true;
      ucplan::Measurement measure(const ucplan::Graph& g, int layer, ucplan::TaskKind op, const std::string& algo,
                                  std::int64_t batch, int repeats) override {
        if (tight && algo == "gemm") return {"out_of_memory", 0, 0, 0};
        return inner->measure(g, layer, op, algo, batch, repeats);
      }
    };
    const ucplan::Network net = one_conv_network();
    namespace fs = std::filesystem;
    const std::string cache = (fs::temp_directory_path() / "ucplan-test-cache-oom").string();
    fs::remove_all(cache);
    Squeezed runner;
    ucplan::ProfileOptions o;
    o.batch = 2;
    o.repeat = 1;
    o.cache_dir = cache;
    auto gemm_statuses = [](const ucplan::Profile& p) {
      std::set<std::string> statuses;
      for (const auto& sig : p.signatures)
        for (const auto& c : sig.costs)
          if (c.algo == "gemm") statuses.insert(c.status);
      return statuses;
    };
    CHECK(gemm_statuses(ucplan::profile_network(net, "one", runner, o)) == std::set<std::string>{"out_of_memory"});
    runner.tight = false;
    CHECK(gemm_statuses(ucplan::profile_network(net, "one", runner, o)) == std::set<std::string>{"ok"});
    fs::remove_all(cache);
  }
}

namespace device_failure_test {

const char* kTiny = R"({"format": "ucplan-network/1", "name": "tiny",
  "input": {"shape": [2, 8, 8]}, "labels": 4, "layers": [
  {"name": "c1", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 3, "pad": 1},
  {"name": "r1", "type": "relu", "inputs": ["c1"]},
  {"name": "f", "type": "fc", "inputs": ["r1"], "out_features": 4},
  {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]})";

// A model device whose `fail_at`-th measurement breaks the device for good (as a CUDA illegal
// address would), and which reports conditions after measuring.
class BreakingRunner : public ucplan::Runner {
 public:
  explicit BreakingRunner(int fail_at) : model_(ucplan::make_model_runner("h100")), fail_at_(fail_at) {}
  ucplan::DeviceInfo device() override { return model_->device(); }
  std::string source() const override { return model_->source(); }
  std::vector<std::string> algorithms(const ucplan::Graph& g, int layer, TaskKind op) override {
    return model_->algorithms(g, layer, op);
  }
  ucplan::Measurement measure(const ucplan::Graph& g, int layer, TaskKind op, const std::string& algo,
                              std::int64_t batch, int repeats) override {
    if (++calls == fail_at_)
      throw ucplan::DeviceFailure(fmt::format("{} {} {} b={}: cudaErrorIllegalAddress", g.layers[layer].name(),
                                              ucplan::task_kind_name(op), algo, batch));
    return model_->measure(g, layer, op, algo, batch, repeats);
  }
  std::vector<ucplan::TransferPoint> measure_transfers(bool h2d, const std::vector<std::int64_t>& sizes) override {
    return model_->measure_transfers(h2d, sizes);
  }
  bool measure_duplex() override { return model_->measure_duplex(); }
  std::map<std::string, std::string> conditions() override { return {{"timing", "back-to-back"}, {"l2_flush", "no"}}; }
  int calls = 0;

 private:
  std::unique_ptr<ucplan::Runner> model_;
  int fail_at_;
};

TEST_CASE("a device failure stops profiling at that measurement; conditions are recorded after measuring") {
  const ucplan::Network net = ucplan::parse_network_text(kTiny, "tiny");
  ucplan::ProfileOptions o;
  o.batch = 4;
  BreakingRunner breaking(3);
  std::string message;
  try {
    ucplan::profile_network(net, "tiny", breaking, o);
  } catch (const ucplan::DeviceFailure& e) {
    message = e.what();
  }
  CHECK(message.find("cudaErrorIllegalAddress") != std::string::npos);
  CHECK(breaking.calls == 3);  // nothing measured after the failure

  BreakingRunner fine(-1);
  const ucplan::Profile p = ucplan::profile_network(net, "tiny", fine, o);
  CHECK(p.device.versions.at("timing") == "back-to-back");
  CHECK(p.device.versions.at("l2_flush") == "no");
  CHECK(p.device.versions.at("model") == fine.device().versions.at("model"));  // the device's own versions stay
}

TEST_CASE("micro-batches are measured at the worst alignment replay gives them") {
  // AlexNet's input: 3x227x227 floats = 618,348 bytes a sample; 618,348 = 4 x 154,587 (odd):
  // the second micro-batch starts 4-byte aligned.
  CHECK(ucplan::micro_batch_misalignment(3 * 227 * 227 * 4) == 4);
  // conv1's output 96x55x55 floats = 1,161,600 bytes = 128 x 9,075: 128-byte aligned at best.
  CHECK(ucplan::micro_batch_misalignment(96 * 55 * 55 * 4) == 128);
  // ResNet's 3x32x32 floats = 12,288 bytes = 48 x 256: every micro-batch is 256-byte aligned.
  CHECK(ucplan::micro_batch_misalignment(3 * 32 * 32 * 4) == 0);
  CHECK(ucplan::micro_batch_misalignment(0) == 0);
}

}  // namespace device_failure_test
