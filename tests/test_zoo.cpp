// The network zoo (networks/, written by networks/generate.py) against independent references:
// parameter counts and output shapes from the reference implementations, the DeepBench CSV,
// the generator's own --check, and a deep ResNet of more than 10^4 layers.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "planner/ir/graph.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/network.h"
#include "planner/model/network_json.h"
#include "planner/passes/liveness.h"
#include "planner/passes/lower_bound.h"
#include "planner/ir/route.h"

using namespace ucplan;

namespace {

const std::string kZoo = UCPLAN_SOURCE_DIR "/networks";
const std::string kGenerator = UCPLAN_SOURCE_DIR "/networks/generate.py";

struct ShapeRef {
  const char* layer;
  Shape shape;
};

struct ZooRef {
  const char* network;
  std::int64_t params;
  std::vector<ShapeRef> shapes;
};

// Reference numbers, none typed in by hand: every parameter count is sum(p.numel() for p in
// model.parameters()) (learnable parameters only, no batch-norm running statistics) and every shape
// is the output of the named module from a forward hook on a 1-sample zero input (C, H, W; an
// fc output or a flattened pooled feature is C x 1 x 1), taken with PyTorch 2.15.0 and
// torchvision 0.29.2 on the CPU. The ucplan layer names are torchvision's module names where
// torchvision has one module per layer (conv, bn, pool, fc); a residual block's output is its
// last relu (torchvision reuses one ReLU module per block, ucplan has relu1/relu2/relu3).
//  - torchvision: models.vgg16/vgg19/resnet18/34/50/101/152/densenet121(weights=None),
//    models.inception_v3(weights=None, aux_logits=False, init_weights=True) at 299x299,
//    resnet230 = models.resnet.ResNet(Bottleneck, [6, 32, 32, 6]).
//  - AlexNet: a PyTorch module written layer by layer from the Caffe model zoo's
//    bvlc_alexnet/train_val.prototxt (groups 2 on conv2/4/5, LocalResponseNorm(5, 1e-4, 0.75, 1),
//    MaxPool2d(3, 2, ceil_mode=True)); its count equals the published 60,965,224.
//  - ResNet-20: a PyTorch module after He et al. 2016 section 4.2 (n = 3) with option-B
//    projection shortcuts, 272,474; the same module with option-A (parameter-free) shortcuts has
//    269,722, the paper's "0.27M".
//  - DenseNet-40: a PyTorch module after Huang et al. 2017 (L = 40, k = 12, no bottleneck, no
//    compression, conv without bias, as github.com/liuzhuang13/DenseNet): 1,019,722, the paper's
//    "1.0M".
// Besides these sampled layers, every conv, bn, fc and max-pool layer of every network was compared
// with its torchvision/PyTorch module (shape and parameters) when the zoo was made: all agreed.
const std::vector<ZooRef> kZooRefs = {
    {"alexnet",
     60965224,
     {{"conv1", {96, 55, 55}},
      {"pool1", {96, 27, 27}},
      {"pool2", {256, 13, 13}},
      {"conv4", {384, 13, 13}},
      {"pool5", {256, 6, 6}},
      {"fc6", {4096, 1, 1}},
      {"fc8", {1000, 1, 1}}}},
    {"vgg16",
     138357544,
     {{"features.0", {64, 224, 224}},
      {"features.16", {256, 28, 28}},
      {"features.30", {512, 7, 7}},
      {"classifier.0", {4096, 1, 1}},
      {"classifier.6", {1000, 1, 1}}}},
    {"vgg19",
     143667240,
     {{"features.0", {64, 224, 224}},
      {"features.18", {256, 28, 28}},
      {"features.36", {512, 7, 7}},
      {"classifier.0", {4096, 1, 1}},
      {"classifier.6", {1000, 1, 1}}}},
    {"resnet18",
     11689512,
     {{"conv1", {64, 112, 112}},
      {"maxpool", {64, 56, 56}},
      {"layer1.1.relu2", {64, 56, 56}},
      {"layer2.1.relu2", {128, 28, 28}},
      {"layer3.1.relu2", {256, 14, 14}},
      {"layer4.1.relu2", {512, 7, 7}},
      {"avgpool", {512, 1, 1}},
      {"fc", {1000, 1, 1}}}},
    {"resnet34",
     21797672,
     {{"conv1", {64, 112, 112}},
      {"maxpool", {64, 56, 56}},
      {"layer2.3.relu2", {128, 28, 28}},
      {"layer3.5.relu2", {256, 14, 14}},
      {"layer4.2.relu2", {512, 7, 7}},
      {"avgpool", {512, 1, 1}},
      {"fc", {1000, 1, 1}}}},
    {"resnet50",
     25557032,
     {{"conv1", {64, 112, 112}},
      {"maxpool", {64, 56, 56}},
      {"layer1.2.relu3", {256, 56, 56}},
      {"layer2.0.conv2", {128, 28, 28}},
      {"layer3.5.relu3", {1024, 14, 14}},
      {"layer4.2.relu3", {2048, 7, 7}},
      {"avgpool", {2048, 1, 1}},
      {"fc", {1000, 1, 1}}}},
    {"resnet101",
     44549160,
     {{"conv1", {64, 112, 112}},
      {"layer1.2.relu3", {256, 56, 56}},
      {"layer3.11.conv3", {1024, 14, 14}},
      {"layer3.22.relu3", {1024, 14, 14}},
      {"layer4.2.relu3", {2048, 7, 7}},
      {"avgpool", {2048, 1, 1}},
      {"fc", {1000, 1, 1}}}},
    {"resnet152",
     60192808,
     {{"conv1", {64, 112, 112}},
      {"layer2.7.relu3", {512, 28, 28}},
      {"layer3.17.conv1", {256, 14, 14}},
      {"layer3.35.relu3", {1024, 14, 14}},
      {"layer4.2.relu3", {2048, 7, 7}},
      {"avgpool", {2048, 1, 1}},
      {"fc", {1000, 1, 1}}}},
    {"densenet121",
     7978856,
     {{"features.conv0", {64, 112, 112}},
      {"features.pool0", {64, 56, 56}},
      {"features.denseblock1", {256, 56, 56}},
      {"features.transition1.pool", {128, 28, 28}},
      {"features.denseblock3.denselayer24.conv1", {128, 14, 14}},
      {"features.denseblock3", {1024, 14, 14}},
      {"features.transition3.pool", {512, 7, 7}},
      {"features.norm5", {1024, 7, 7}},
      {"avgpool", {1024, 1, 1}},
      {"classifier", {1000, 1, 1}}}},
    {"inception_v3",
     23834568,
     {{"Conv2d_1a_3x3.relu", {32, 149, 149}},
      {"maxpool1", {64, 73, 73}},
      {"Conv2d_4a_3x3.relu", {192, 71, 71}},
      {"Mixed_5b", {256, 35, 35}},
      {"Mixed_6a", {768, 17, 17}},
      {"Mixed_6e", {768, 17, 17}},
      {"Mixed_7a", {1280, 8, 8}},
      {"Mixed_7b", {2048, 8, 8}},
      {"Mixed_7c", {2048, 8, 8}},
      {"avgpool", {2048, 1, 1}},
      {"fc", {1000, 1, 1}}}},
    {"resnet20",
     272474,
     {{"conv1", {16, 32, 32}},
      {"layer1.2.relu2", {16, 32, 32}},
      {"layer2.2.relu2", {32, 16, 16}},
      {"layer3.2.relu2", {64, 8, 8}},
      {"avgpool", {64, 1, 1}},
      {"fc", {10, 1, 1}}}},
    {"densenet40",
     1019722,
     {{"conv0", {16, 32, 32}},
      {"block1", {160, 32, 32}},
      {"transition1.pool", {160, 16, 16}},
      {"block2", {304, 16, 16}},
      {"block3", {448, 8, 8}},
      {"norm", {448, 8, 8}},
      {"avgpool", {448, 1, 1}},
      {"fc", {10, 1, 1}}}},
    {"resnet230",
     76044584,
     {{"conv1", {64, 112, 112}},
      {"layer2.31.relu3", {512, 28, 28}},
      {"layer3.31.relu3", {1024, 14, 14}},
      {"layer4.5.relu3", {2048, 7, 7}},
      {"avgpool", {2048, 1, 1}},
      {"fc", {1000, 1, 1}}}},
};

// torchvision.models.resnet.ResNet(Bottleneck, [6, 32, 1000, 6]) built on the meta device (no
// memory allocated) with PyTorch 2.15.0 / torchvision 0.29.2: sum of p.numel(), and the hooked
// outputs of layer3 (its last block) and layer4.
const std::int64_t kDeepN3 = 1000;
const ZooRef kDeepRef = {
    "resnet-deep-6-32-1000-6",
    1157478696,
    {{"layer3.999.relu3", {1024, 14, 14}}, {"layer4.5.relu3", {2048, 7, 7}}, {"fc", {1000, 1, 1}}}};

Graph load_graph(const std::string& path) { return build_graph(load_network(path), path); }

void check_against(const Graph& g, const ZooRef& ref) {
  CAPTURE(ref.network);
  CHECK(g.total_params() == ref.params);
  for (const auto& s : ref.shapes) {
    CAPTURE(s.layer);
    int l = g.index_of(s.layer);
    REQUIRE(l >= 0);
    CHECK(shape_text(g.layers[l].out) == shape_text(s.shape));
  }
}

std::vector<std::string> json_files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

int run_command(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

}  // namespace

TEST_CASE("zoo networks have the parameter counts and shapes of their reference implementations") {
  for (const auto& ref : kZooRefs) check_against(load_graph(kZoo + "/" + ref.network + ".json"), ref);
}

TEST_CASE("every top-level zoo network has a reference, a description and a source") {
  std::set<std::string> with_ref;
  for (const auto& ref : kZooRefs) with_ref.insert(std::string(ref.network) + ".json");
  for (const auto& path : json_files_in(kZoo)) {
    CAPTURE(path);
    CHECK(with_ref.count(std::filesystem::path(path).filename().string()) == 1);
  }
  CHECK(json_files_in(kZoo).size() == kZooRefs.size());
  for (const auto& dir : {kZoo, kZoo + "/deepbench"})
    for (const auto& path : json_files_in(dir)) {
      CAPTURE(path);
      Network net = load_network(path);
      CHECK(!net.description.empty());
      CHECK(!net.source.empty());
    }
}

// Every command reads its files through read_file_bytes: what cannot be read is one line naming it.
TEST_CASE("a folder, a missing file and an empty file name are refused, each named, with the reason") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  auto refusal = [](const std::string& path, const char* what) {
    try {
      read_file_bytes(path, what);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("read");
  };
  CHECK(refusal(dir, "JSON file") == dir + ": is a folder, not a JSON file");
  CHECK(refusal(dir + "/ucplan-no-such-file.json", "file") ==
        dir + "/ucplan-no-such-file.json: cannot read the file (No such file or directory)");
  CHECK(refusal("", "file") == "\"\": cannot read the file (No such file or directory)");
  const std::string path = dir + "/ucplan-read-file-bytes.bin";
  const std::string bytes("a\0b\xff\n", 5);
  write_file_atomically(path, bytes);
  CHECK(read_file_bytes(path) == bytes);  // every byte, a NUL too
  std::filesystem::remove(path);
}

TEST_CASE("zoo files read back as ucplan writes them (every field explicit, same values)") {
  // The generator writes every parameter, defaults included, in network_to_json's key order, so
  // reading a file and writing the network again gives the same JSON document.
  for (const auto& dir : {kZoo, kZoo + "/deepbench"})
    for (const auto& path : json_files_in(dir)) {
      CAPTURE(path);
      Json file = load_json_file(path);
      Json written = Json::parse(network_to_json_text(load_network(path)));
      CHECK(file == written);
    }
}

TEST_CASE("DeepBench: 94 single-conv networks with the CSV's shapes") {
  // Hand-checked rows (output = (in + 2 pad - filter) / stride + 1, rounded down):
  //  #01: 1x161x700, 32 filters 5x20, stride 2: (161-5)/2+1 = 79, (700-20)/2+1 = 341 -> 32x79x341,
  //       which is #05's input.
  //  #30: 3x224x224, 64 filters 7x7, pad 3, stride 2: (224+6-7)/2+1 = 111+1 = 112 -> 64x112x112.
  //  #45: 2048x7x7, 512 filters 1x1, pad 3, stride 2: (7+6-1)/2+1 = 7 -> 512x7x7.
  //  #57: 64x80x350, 128 filters 5x5, pad 1, stride 2: (80+2-5)/2+1 = 39, (350+2-5)/2+1 = 174.
  const std::string dir = kZoo + "/deepbench";
  REQUIRE(json_files_in(dir).size() == 94);
  struct Hand {
    int row;
    Shape out;
  };
  for (const Hand& h :
       {Hand{1, {32, 79, 341}}, Hand{30, {64, 112, 112}}, Hand{45, {512, 7, 7}}, Hand{57, {128, 39, 174}}}) {
    CAPTURE(h.row);
    char name[32];
    std::snprintf(name, sizeof name, "/conv%02d.json", h.row);
    Graph g = load_graph(dir + name);
    CHECK(shape_text(g.layers.back().out) == shape_text(h.out));
  }

  // Every row of the CSV (a copy of shared/data/deepbench-conv-training.csv kept with the zoo):
  // the network's input, its one conv's parameters, and the output shape from the formula.
  std::istringstream csv(read_file_bytes(dir + "/deepbench-conv-training.csv"));
  std::string line;
  std::getline(csv, line);
  REQUIRE(line == "w,h,c,n,k,filter_w,filter_h,pad_w,pad_h,stride_w,stride_h");
  int row = 0;
  while (std::getline(csv, line)) {
    if (line.empty()) continue;
    ++row;
    CAPTURE(row);
    std::vector<std::int64_t> v;
    std::istringstream fields(line);
    for (std::string f; std::getline(fields, f, ',');) v.push_back(std::stoll(f));
    REQUIRE(v.size() == 11);
    const std::int64_t w = v[0], h = v[1], c = v[2], k = v[4], fw = v[5], fh = v[6], pw = v[7], ph = v[8], sw = v[9],
                       sh = v[10];
    char name[32];
    std::snprintf(name, sizeof name, "/conv%02d.json", row);
    Graph g = load_graph(dir + name);
    REQUIRE(g.layers.size() == 2);
    const GraphLayer& conv = g.layers[1];
    REQUIRE(conv.type() == LayerType::Conv);
    CHECK(shape_text(g.layers[0].out) == shape_text({c, h, w}));
    CHECK(conv.spec.conv.out_channels == k);
    CHECK(conv.spec.conv.kernel == std::array<std::int64_t, 2>{fh, fw});
    CHECK(conv.spec.conv.pad == std::array<std::int64_t, 2>{ph, pw});
    CHECK(conv.spec.conv.stride == std::array<std::int64_t, 2>{sh, sw});
    CHECK(conv.spec.conv.groups == 1);
    CHECK(!conv.spec.conv.bias);
    CHECK(shape_text(conv.out) == shape_text({k, (h + 2 * ph - fh) / sh + 1, (w + 2 * pw - fw) / sw + 1}));
    CHECK(conv.params() == k * c * fh * fw);
    CHECK(conv.is_sink());
    CHECK(!g.has_loss());
  }
  CHECK(row == 94);
}

TEST_CASE("the zoo files are up to date with networks/generate.py") {
  int rc = run_command("python3 '" + kGenerator + "' --check > /dev/null");
  CHECK_MESSAGE(rc == 0, "run python3 networks/generate.py and commit the files it writes");
}

TEST_CASE("deep ResNet generator: more than 10^4 layers load, match torchvision and inspect fast") {
  // SuperNeurons Table 4 family with n1 = 6, n2 = 32, n4 = 6 and n3 = 1000: depth 3 * 1044 + 2 =
  // 3134. Layers: stem 4 (conv, bn, relu, maxpool) + 1044 bottlenecks x 10 (3 x conv/bn, 2 relu,
  // add, relu) + 4 downsamples x 2 (conv, bn) + avgpool, fc, loss = 4 + 10440 + 8 + 3 = 10455.
  const std::string out = (std::filesystem::temp_directory_path() / "ucplan-zoo-resnet-deep-n3-1000.json").string();
  std::string cmd = "python3 '" + kGenerator + "' deep-resnet --n1 6 --n2 32 --n3 " + std::to_string(kDeepN3) +
                    " --n4 6 -o '" + out + "' > /dev/null";
  REQUIRE(run_command(cmd) == 0);

  // What `ucplan inspect` does before printing: load, graph, route, tasks, liveness, lower bound.
  auto start = std::chrono::steady_clock::now();
  Graph g = load_graph(out);
  TaskGraph tg = build_tasks(g, construct_route(g));
  Liveness lv = compute_liveness(tg, 16);
  LowerBound lb = memory_lower_bound(tg, 1);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("deep ResNet (" << g.layers.size() - 1 << " layers): load + inspect passes took " << seconds << " s");

  CHECK(g.layers.size() - 1 == 10455);
  CHECK(g.conv_count() == 1 + 1044 * 3 + 4);
  check_against(g, kDeepRef);
  CHECK(lv.liveness_peak > 0);
  CHECK(lb.bytes > 0);
#ifdef NDEBUG
  CHECK(seconds < 2.0);  // measured ~0.1 s on the 2-core development machine
#endif
  std::filesystem::remove(out);
}
