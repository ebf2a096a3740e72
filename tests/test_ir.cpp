// The IR (planner/ir/) against arithmetic done by hand from the papers' definitions (STYLE.md
// #10: every expected number is worked out in a comment beside it):
//   route.h   SuperNeurons Alg. 1 (DFS with join counters), Fig. 6;
//   tasks.h   moDNN's TDFG: which tensors each forward/backward/update task touches;
//   graph.h   shapes, parameter counts, FLOPs, user errors naming layer and field.
// Sizes are float32 (4 bytes per element) unless said otherwise; "B" below means bytes.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ir_builders.h"
#include "planner/ir/graph.h"
#include "planner/ir/route.h"
#include "planner/ir/tasks.h"
#include "planner/model/errors.h"
#include "planner/model/network.h"
#include "planner/passes/liveness.h"

using namespace ucplan;
using namespace ucplan::test;

namespace {

// An independent transcription of SuperNeurons Alg. 1 (recursive, as printed) to compare with
// the iterative implementation on the zoo.
void route_construct(const Graph& g, int l, std::vector<int>& counter, std::vector<int>& route) {
  ++counter[l];                                                                     // line 4
  if (counter[l] < static_cast<int>(g.layers[l].inputs.size())) return;             // lines 5-6
  route.push_back(l);                                                               // line 7
  for (int next : g.layers[l].consumers) route_construct(g, next, counter, route);  // lines 8-10
  counter[l] = 0;                                                                   // line 11
}

// Route is a permutation of all layers, input first, every layer after all its inputs.
std::string topo_error(const Graph& g, const std::vector<int>& route) {
  const int n = static_cast<int>(g.layers.size());
  if (static_cast<int>(route.size()) != n)
    return "route has " + std::to_string(route.size()) + " of " + std::to_string(n);
  if (route[0] != 0) return "route does not start with the input";
  std::vector<int> pos(n, -1);
  for (int i = 0; i < n; ++i) {
    if (route[i] < 0 || route[i] >= n || pos[route[i]] >= 0) return "route repeats or invents a layer";
    pos[route[i]] = i;
  }
  for (int l = 0; l < n; ++l)
    for (int in : g.layers[l].inputs)
      if (pos[in] >= pos[l]) return g.layers[l].name() + " is routed before its input " + g.layers[in].name();
  return "";
}

}  // namespace

// =============================================================================================
// Route: SuperNeurons Alg. 1
// =============================================================================================

TEST_CASE("route: SuperNeurons Fig. 6, two nested fans; e, g and h are the prerequisites of i") {
  // Fig. 6 reconstructed: layers a..j, a the input. b fans out to c and d (fan 1: b, c, d);
  // inside d's branch f fans out to g and h (fan 2: f, g, h, nested in fan 1); i joins e, g and h.
  //
  //        a - b - c - e ----------.
  //             \                   i - j
  //              d - f - g --------/|
  //                   \            /
  //                    h ---------'
  //
  // Alg. 1 by hand (DFS from a, consumers in file order, counter(i) must reach 3):
  //   a -> b -> c -> e -> i (counter 1 < 3: return)
  //   back to b -> d -> f -> g -> i (counter 2 < 3: return)
  //   back to f -> h -> i (counter 3 = 3: route i) -> j
  //   route: a b c e d f g h i j          (file order / Kahn would give a b c d e f g h i j)
  std::vector<Layer> layers = {relu("b", "a"), relu("c", "b"), relu("d", "b"), relu("e", "c"),
                               relu("f", "d"), relu("g", "f"), relu("h", "f"), concat("i", {"e", "g", "h"}),
                               relu("j", "i")};
  Graph g = graph_of(make_net({2, 3, 3}, 1, layers, "a"));
  std::vector<int> route = construct_route(g);
  CHECK(route_names(g, route) == "a b c e d f g h i j");
  CHECK(topo_error(g, route) == "");
  // i is routed only after all three of its prerequisites.
  auto pos = [&](const char* n) { return std::find(route.begin(), route.end(), g.index_of(n)) - route.begin(); };
  CHECK(pos("i") > pos("e"));
  CHECK(pos("i") > pos("g"));
  CHECK(pos("i") > pos("h"));
  CHECK(pos("i") == pos("h") + 1);  // entered from h, the last prerequisite reached

  SUBCASE("consumers are explored in file order") {
    // Same graph, d listed before c in the file: b's consumers are now (d, c).
    //   a -> b -> d -> f -> g -> i (1 < 3) ; f -> h -> i (2 < 3) ; b -> c -> e -> i (3) -> j
    //   route: a b d f g h c e i j
    std::vector<Layer> swapped = layers;
    std::swap(swapped[1], swapped[2]);
    Graph g2 = graph_of(make_net({2, 3, 3}, 1, swapped, "a"));
    std::vector<int> r2 = construct_route(g2);
    CHECK(route_names(g2, r2) == "a b d f g h c e i j");
    CHECK(topo_error(g2, r2) == "");
  }
}

TEST_CASE("route: a topological order on every zoo network, equal to Alg. 1 as printed") {
  namespace fs = std::filesystem;
  const std::string zoo = zoo_directory();
  REQUIRE(fs::is_directory(zoo));
  int checked = 0;
  for (const auto& entry : fs::recursive_directory_iterator(zoo)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".json") continue;
    const std::string rel = fs::relative(entry.path(), zoo).replace_extension("").generic_string();
    CAPTURE(rel);
    Graph g = build_graph(load_network(zoo + "/" + rel + ".json"), rel);
    std::vector<int> route = construct_route(g);
    CHECK(topo_error(g, route) == "");
    if (g.layers.size() < 5000) {  // the recursive transcription, on networks it cannot overflow on
      std::vector<int> counter(g.layers.size(), 0), expected;
      route_construct(g, 0, counter, expected);
      CHECK(route == expected);
    }
    ++checked;
  }
  // 13 named networks + the DeepBench conv layers; at least the named ones must be there.
  CHECK(checked >= 13);
  MESSAGE("routes checked on " << checked << " zoo networks");
}

TEST_CASE("route: a 10^4-layer chain does not overflow the stack") {
  // data -> c0 (1x1 conv, 1 channel, so gradients are needed all the way down) -> r1 -> ... ->
  // r10000: the only route is 0, 1, ..., 10001.
  const int n = 10000;
  std::vector<Layer> layers;
  layers.reserve(n + 1);
  Layer c0;
  c0.name = "c0";
  c0.type = LayerType::Conv;
  c0.inputs = {"data"};
  c0.conv.out_channels = 1;
  c0.conv.bias = true;
  layers.push_back(c0);
  for (int i = 1; i <= n; ++i)
    layers.push_back(relu("r" + std::to_string(i), i == 1 ? "c0" : "r" + std::to_string(i - 1)));
  Graph g = graph_of(make_net({1, 2, 2}, 1, layers));
  std::vector<int> route = construct_route(g);
  REQUIRE(route.size() == static_cast<std::size_t>(n + 2));
  bool identity = true;
  for (int i = 0; i <= n + 1; ++i) identity = identity && route[i] == i;
  CHECK(identity);
  // The later passes are iterative too. Every tensor is 1x2x2 = 16 B per sample; c0 has 2
  // parameters (weight and bias): 8 B, and 8 B of gradient. Steps: 10001 forward, 10000 relu
  // backwards (r1's writes dY:c0, needed for c0's weight gradient), c0's backward-filter (no
  // backward-data: it reads the network input): 20002.
  TaskGraph tg = build_tasks(g, route);
  Liveness lv = compute_liveness(tg, 1);
  CHECK(lv.steps.size() == static_cast<std::size_t>(2 * n + 2));
  // Peak at the first backward step (r10000's, step 10001): Y_data (read again by c0's
  // backward-filter at the very end), Y_r1..Y_r10000 (each read by its own backward), dY_r10000
  // (host-provided: a sink) and dY_r9999 (written) = 10003 tensors x 16 B, + 16 B resident.
  // (Y_c0 died at step 1: no backward reads a conv's output.)
  CHECK(lv.liveness_peak == 10003 * 16 + 16);
  CHECK(lv.peak_step == n + 1);
}

// =============================================================================================
// Tasks (moDNN's TDFG)
// =============================================================================================

TEST_CASE("tasks: exactly what each layer type's backward reads, writes and accumulates") {
  // One network with every layer type, two fan-outs (n1 -> mp, ap; s -> c2, cat):
  //   data 2x4x4 -> c1 conv(4, k3 p1) -> b1 bn -> r1 relu -> n1 lrn -> mp max-pool k2 s2 ----.
  //                                                                  \-> ap avg-pool k2 s2 ---s add
  //   s -> c2 conv(4, k1) ; cat = concat(s, c2) (8x2x2) -> dr dropout -> f fc(3) -> loss
  // Route (Alg. 1): data c1 b1 r1 n1 mp [s: 1 < 2] ap s c2 [cat: 1 < 2] cat dr f loss.
  Graph g = graph_of(make_net(
      {2, 4, 4}, 3,
      {conv("c1", "data", 4, 3, 1, 1), bn("b1", "c1"), relu("r1", "b1"), lrn("n1", "r1"),
       pool("mp", "n1", PoolMode::Max, 2, 2), pool("ap", "n1", PoolMode::Avg, 2, 2), add("s", {"mp", "ap"}),
       conv("c2", "s", 4, 1), concat("cat", {"s", "c2"}), dropout("dr", "cat"), fc("f", "dr", 3), loss("loss", "f")}));
  std::vector<int> route = construct_route(g);
  REQUIRE(route_names(g, route) == "data c1 b1 r1 n1 mp ap s c2 cat dr f loss");
  TaskGraph tg = build_tasks(g, route);

  // Forward in route order; backward in reverse route order (conv/fc: filter, then data);
  // then one update per weighted layer (c1, b1, c2, f) in route order.
  CHECK(task_sequence(g, tg) ==
        "forward:c1 forward:b1 forward:r1 forward:n1 forward:mp forward:ap forward:s forward:c2 "
        "forward:cat forward:dr forward:f forward:loss "
        "backward:loss backward_filter:f backward_data:f backward:dr backward:cat "
        "backward_filter:c2 backward_data:c2 backward:s backward:ap backward:mp backward:n1 "
        "backward:r1 backward:b1 backward_filter:c1 "
        "update:c1 update:b1 update:c2 update:f");

  auto reads = [&](const Task& t) { return names(tg, t.reads); };
  auto writes = [&](const Task& t) { return names(tg, t.writes); };
  auto accs = [&](const Task& t) { return names(tg, t.accumulates); };

  SUBCASE("softmax_loss: Y and labels; no dY of its own") {
    const Task& t = task(g, tg, "loss", TaskKind::Backward);
    CHECK(reads(t) == sorted_list("Y:loss, labels"));
    CHECK(writes(t) == "dY:f");
    CHECK(accs(t) == "");
    CHECK(tensor_id(tg, "dY:loss") == -1);
    CHECK(tg.dy_of[g.index_of("loss")] == -1);
  }
  SUBCASE("fc: backward_filter reads X and dY, backward_data reads dY and W") {
    const Task& f = task(g, tg, "f", TaskKind::BackwardFilter);
    const Task& d = task(g, tg, "f", TaskKind::BackwardData);
    CHECK(f.id + 1 == d.id);  // filter first, then data
    CHECK(reads(f) == sorted_list("Y:dr, dY:f"));
    CHECK(writes(f) == "dW:f");
    CHECK(reads(d) == sorted_list("dY:f, W:f"));
    CHECK(writes(d) == "dY:dr");
    CHECK(task_index(g, tg, "f", TaskKind::Backward) == -1);
    CHECK_FALSE(f.conv_kernel);  // only conv tasks are conv kernels
  }
  SUBCASE("dropout: only its mask and dY") {
    const Task& t = task(g, tg, "dr", TaskKind::Backward);
    CHECK(reads(t) == sorted_list("aux:dr, dY:dr"));
    CHECK(writes(t) == "dY:cat");
    // The mask is written by the forward, one byte per element: 8x2x2 = 32 B per sample.
    CHECK(writes(task(g, tg, "dr", TaskKind::Forward)) == sorted_list("Y:dr, aux:dr"));
    CHECK(tensor(tg, "aux:dr").bytes(1) == 32);
    CHECK(tensor(tg, "aux:dr").bytes(3) == 96);
  }
  SUBCASE("concat and add: only dY; the first writer of a fan-out gradient overwrites, later ones add") {
    // Backward order is loss f dr cat c2 s ap mp ...: cat runs before c2, so cat writes dY:s
    // and c2's backward_data accumulates into it; ap runs before mp, so ap writes dY:n1 and
    // mp accumulates.
    const Task& cat = task(g, tg, "cat", TaskKind::Backward);
    CHECK(reads(cat) == "dY:cat");
    CHECK(writes(cat) == sorted_list("dY:s, dY:c2"));
    CHECK(accs(cat) == "");
    const Task& s = task(g, tg, "s", TaskKind::Backward);
    CHECK(reads(s) == "dY:s");
    CHECK(writes(s) == sorted_list("dY:mp, dY:ap"));
    const Task& c2d = task(g, tg, "c2", TaskKind::BackwardData);
    CHECK(writes(c2d) == "");
    CHECK(accs(c2d) == "dY:s");
  }
  SUBCASE("conv: backward_filter reads X and dY, then backward_data reads dY and W") {
    const Task& f = task(g, tg, "c2", TaskKind::BackwardFilter);
    const Task& d = task(g, tg, "c2", TaskKind::BackwardData);
    CHECK(f.id + 1 == d.id);
    CHECK(reads(f) == sorted_list("Y:s, dY:c2"));
    CHECK(writes(f) == "dW:c2");
    CHECK(reads(d) == sorted_list("dY:c2, W:c2"));
    CHECK(f.conv_kernel);
    CHECK(d.conv_kernel);
    CHECK(task(g, tg, "c2", TaskKind::Forward).conv_kernel);
    CHECK_FALSE(task(g, tg, "c2", TaskKind::Update).conv_kernel);
  }
  SUBCASE("pooling: max reads X and Y, avg reads nothing but dY") {
    const Task& ap = task(g, tg, "ap", TaskKind::Backward);
    CHECK(reads(ap) == "dY:ap");
    CHECK(writes(ap) == "dY:n1");
    CHECK(accs(ap) == "");
    const Task& mp = task(g, tg, "mp", TaskKind::Backward);
    CHECK(reads(mp) == sorted_list("Y:n1, Y:mp, dY:mp"));
    CHECK(writes(mp) == "");
    CHECK(accs(mp) == "dY:n1");
  }
  SUBCASE("lrn: X and Y; relu: Y") {
    const Task& n1 = task(g, tg, "n1", TaskKind::Backward);
    CHECK(reads(n1) == sorted_list("Y:r1, Y:n1, dY:n1"));
    CHECK(writes(n1) == "dY:r1");
    const Task& r1 = task(g, tg, "r1", TaskKind::Backward);
    CHECK(reads(r1) == sorted_list("Y:r1, dY:r1"));
    CHECK(writes(r1) == "dY:b1");
  }
  SUBCASE("bn: X, saved statistics, gamma (W) and dY; writes dW and dX") {
    const Task& t = task(g, tg, "b1", TaskKind::Backward);
    CHECK(reads(t) == sorted_list("Y:c1, aux:b1, W:b1, dY:b1"));
    CHECK(writes(t) == sorted_list("dW:b1, dY:c1"));
    CHECK(writes(task(g, tg, "b1", TaskKind::Forward)) == sorted_list("Y:b1, aux:b1"));
    // Saved mean and inverse std: 2 * 4 channels * 4 B = 32 B, whatever the batch.
    CHECK(tensor(tg, "aux:b1").bytes(1) == 32);
    CHECK(tensor(tg, "aux:b1").bytes(64) == 32);
    // gamma + beta = 2 * 4 = 8 params = 32 B, resident.
    CHECK(tensor(tg, "W:b1").bytes(64) == 32);
    CHECK(tensor(tg, "W:b1").resident());
  }
  SUBCASE("a conv reading the network input has no backward_data") {
    const Task& f = task(g, tg, "c1", TaskKind::BackwardFilter);
    CHECK(reads(f) == sorted_list("Y:data, dY:c1"));
    CHECK(writes(f) == "dW:c1");
    CHECK(task_index(g, tg, "c1", TaskKind::BackwardData) == -1);
    CHECK(tensor_id(tg, "dY:data") == -1);
  }
  SUBCASE("forward tasks read inputs and weights (and labels for the loss)") {
    CHECK(reads(task(g, tg, "c1", TaskKind::Forward)) == sorted_list("Y:data, W:c1"));
    CHECK(writes(task(g, tg, "c1", TaskKind::Forward)) == "Y:c1");
    CHECK(reads(task(g, tg, "s", TaskKind::Forward)) == sorted_list("Y:mp, Y:ap"));
    CHECK(reads(task(g, tg, "loss", TaskKind::Forward)) == sorted_list("Y:f, labels"));
    CHECK(writes(task(g, tg, "loss", TaskKind::Forward)) == "Y:loss");
  }
  SUBCASE("updates: one per weighted layer, after every round task, outside the rounds") {
    int first_update = -1, updates = 0;
    for (const auto& t : tg.tasks) {
      if (t.kind != TaskKind::Update) {
        CHECK(t.round_task);
        CHECK(first_update < 0);  // no round task after an update
        continue;
      }
      if (first_update < 0) first_update = t.id;
      ++updates;
      CHECK_FALSE(t.round_task);
      const std::string n = g.layers[t.layer].name();
      CHECK(names(tg, t.reads) == "dW:" + n);
      CHECK(names(tg, t.writes) == "W:" + n);
    }
    CHECK(updates == 4);        // c1, b1, c2, f; none for relu, lrn, pools, add, concat, dropout, loss
    CHECK(first_update == 26);  // 12 forward + 14 backward before
  }
  SUBCASE("tensor sizes and host inputs") {
    // Y:data 2x4x4 = 128 B/sample, host-provided; labels 4 B/sample, host-provided; no sink
    // other than the loss, so no gradient is host-provided.
    CHECK(tensor(tg, "Y:data").bytes(2) == 256);
    CHECK(tensor(tg, "Y:data").host_input);
    CHECK(tensor(tg, "labels").host_input);
    CHECK(tensor(tg, "labels").bytes(8) == 32);
    CHECK(tg.labels == tensor_id(tg, "labels"));
    for (const auto& t : tg.tensors)
      if (t.kind == TensorKind::Gradient) CHECK_MESSAGE(!t.host_input, t.name);
    // Y:cat 8x2x2 = 32 elems = 128 B/sample; W:c1 = 4*2*3*3 + 4 = 76 params = 304 B fixed.
    CHECK(tensor(tg, "Y:cat").bytes(1) == 128);
    CHECK(tensor(tg, "W:c1").bytes(1) == 304);
    CHECK(tensor(tg, "dW:c1").bytes(1000) == 304);
    // Resident weights: c1 304 B; b1 (4+4)*4 = 32 B; c2 (4*4*1*1 + 4)*4 = 80 B;
    // f: its input is 8x2x2 = 32 elems, (32*3 + 3)*4 = 396 B. W = 304+32+80+396 = 812 B,
    // W + dW = 1624 B.
    CHECK(tg.resident_bytes() == 1624);
  }
}

TEST_CASE("tasks: exact read sets of today's CNN layer types (what each derivative is a function of)") {
  // data 4x4x4 -> c1 conv(4, k3 p1) -> hs hardswish -> gp global avg -> sg sigmoid -> hsg hardsigmoid
  //   se = hs * hsg (one gate per channel) -> si silu -> ge gelu -> cl clip(-1, 1) -> ln layer norm
  //   -> sc scale -> a, b = slices [0, 2), [2, 4) -> cat(b, a) -> sh channel shuffle(2) --.
  // data -> c0 conv(4, k1) ; ds = sigmoid(data) (no weights before it: needs no gradient);
  //   m2 = c0 * ds (element-wise) -------------------------------------------------------- j add -> f fc(3) -> loss
  Graph g = graph_of(parse_network_text(
      R"({"format": "ucplan-network/1", "name": "t", "input": {"shape": [4, 4, 4]}, "labels": 3, "layers": [
  {"name": "c1", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 3, "pad": 1},
  {"name": "hs", "type": "hardswish", "inputs": ["c1"]},
  {"name": "gp", "type": "pool", "inputs": ["hs"], "mode": "avg", "global": true},
  {"name": "sg", "type": "sigmoid", "inputs": ["gp"]},
  {"name": "hsg", "type": "hardsigmoid", "inputs": ["sg"]},
  {"name": "se", "type": "mul", "inputs": ["hs", "hsg"]},
  {"name": "si", "type": "silu", "inputs": ["se"]},
  {"name": "ge", "type": "gelu", "inputs": ["si"]},
  {"name": "cl", "type": "clip", "inputs": ["ge"], "min": -1, "max": 1},
  {"name": "ln", "type": "layer_norm", "inputs": ["cl"]},
  {"name": "sc", "type": "scale", "inputs": ["ln"]},
  {"name": "a", "type": "slice", "inputs": ["sc"], "begin": 0, "end": 2},
  {"name": "b", "type": "slice", "inputs": ["sc"], "begin": 2, "end": 4},
  {"name": "cat", "type": "concat", "inputs": ["b", "a"]},
  {"name": "sh", "type": "channel_shuffle", "inputs": ["cat"], "groups": 2},
  {"name": "c0", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 1},
  {"name": "ds", "type": "sigmoid", "inputs": ["data"]},
  {"name": "m2", "type": "mul", "inputs": ["c0", "ds"]},
  {"name": "j", "type": "add", "inputs": ["sh", "m2"]},
  {"name": "f", "type": "fc", "inputs": ["j"], "out_features": 3},
  {"name": "loss", "type": "softmax_loss", "inputs": ["f"]}]})",
      "t"));
  TaskGraph tg = build_tasks(g, construct_route(g));
  auto reads = [&](const char* layer) { return names(tg, task(g, tg, layer, TaskKind::Backward).reads); };
  auto writes = [&](const char* layer) { return names(tg, task(g, tg, layer, TaskKind::Backward).writes); };
  auto accs = [&](const char* layer) { return names(tg, task(g, tg, layer, TaskKind::Backward).accumulates); };

  // hardswish, SiLU and GELU: x; sigmoid, hardsigmoid and clip: y (executor/cpu/activation.h).
  CHECK(reads("hs") == sorted_list("Y:c1, dY:hs"));
  CHECK(reads("si") == sorted_list("Y:se, dY:si"));
  CHECK(reads("ge") == sorted_list("Y:si, dY:ge"));
  CHECK(reads("sg") == sorted_list("Y:sg, dY:sg"));
  CHECK(reads("hsg") == sorted_list("Y:hsg, dY:hsg"));
  CHECK(reads("cl") == sorted_list("Y:cl, dY:cl"));
  CHECK(writes("cl") == "dY:ge");
  // mul: dx = dy * s reads the gate; ds = sum dy * x reads the feature map.
  CHECK(reads("se") == sorted_list("dY:se, Y:hsg, Y:hs"));
  CHECK(writes("se") == sorted_list("dY:hs, dY:hsg"));
  CHECK(accs("gp") == "dY:hs");  // the pool's gradient joins the mul's
  // ... and where the gate needs no gradient (it comes from the input), x is not read at all.
  CHECK(reads("m2") == sorted_list("dY:m2, Y:ds"));
  CHECK(writes("m2") == "dY:c0");
  CHECK(task_index(g, tg, "ds", TaskKind::Backward) == -1);
  // layer norm as bn, its statistics per pixel: 2 * 16 pixels * 4 B = 128 B per sample.
  CHECK(reads("ln") == sorted_list("Y:cl, aux:ln, W:ln, dY:ln"));
  CHECK(writes("ln") == sorted_list("dW:ln, dY:cl"));
  CHECK(tensor(tg, "aux:ln").bytes(1) == 128);
  CHECK(tensor(tg, "aux:ln").bytes(3) == 384);
  CHECK(tensor(tg, "W:ln").bytes(1) == 2 * 4 * 4);
  // scale: dgamma needs x, dx needs gamma.
  CHECK(reads("sc") == sorted_list("Y:ln, W:sc, dY:sc"));
  CHECK(writes("sc") == sorted_list("dW:sc, dY:ln"));
  CHECK(tensor(tg, "W:sc").bytes(1) == 4 * 4);
  // Data movement reads only dY; the first slice backward writes dY:sc (zeros outside its
  // channels), the second adds into it.
  CHECK(reads("sh") == "dY:sh");
  CHECK(reads("a") == "dY:a");
  CHECK(reads("b") == "dY:b");
  CHECK(writes("a") + accs("a") + writes("b") + accs("b") == "dY:scdY:sc");
  CHECK((writes("a") == "dY:sc") != (writes("b") == "dY:sc"));
  // Recomputation reads the forward's inputs, plus layer norm's saved statistics.
  CHECK(names(tg, tg.recompute_reads(g.index_of("ln"))) == sorted_list("Y:cl, W:ln, aux:ln"));
  CHECK(names(tg, tg.recompute_reads(g.index_of("se"))) == sorted_list("Y:hs, Y:hsg"));
}

TEST_CASE("tasks: a sink that is not a loss gets a host-provided gradient") {
  // data 1x2x2 -> c conv(2, k1) -> r relu (sink, no head) ; c -> f fc(3) -> loss.
  // r is a sink without a loss: its dY comes from the host; f's dY comes from the loss.
  // Route (Alg. 1): data c r f loss (c's consumers in file order: r, f). Backward runs in
  // reverse: loss, f (filter, data), r, c; so f's backward_data writes c's fan-out gradient
  // dY:c first and r's backward accumulates into it.
  Graph g =
      graph_of(make_net({1, 2, 2}, 3, {conv("c", "data", 2, 1), relu("r", "c"), fc("f", "c", 3), loss("loss", "f")}));
  std::vector<int> route = construct_route(g);
  REQUIRE(route_names(g, route) == "data c r f loss");
  TaskGraph tg = build_tasks(g, route);
  CHECK(tensor(tg, "dY:r").host_input);
  CHECK_FALSE(tensor(tg, "dY:f").host_input);
  CHECK_FALSE(tensor(tg, "dY:c").host_input);
  CHECK(names(tg, task(g, tg, "f", TaskKind::BackwardData).writes) == "dY:c");
  CHECK(names(tg, task(g, tg, "r", TaskKind::Backward).accumulates) == "dY:c");
  CHECK(names(tg, task(g, tg, "r", TaskKind::Backward).reads) == sorted_list("Y:r, dY:r"));

  SUBCASE("no loss at all: no labels tensor") {
    Graph g2 = graph_of(make_net({1, 2, 2}, 3, {conv("c", "data", 2, 1), relu("r", "c")}));
    TaskGraph tg2 = build_tasks(g2, construct_route(g2));
    CHECK(tg2.labels == -1);
    CHECK(tensor_id(tg2, "labels") == -1);
    CHECK(tensor(tg2, "dY:r").host_input);
    // The host-provided gradient is live from its first reader (r's backward, step 2) on.
    Liveness lv = compute_liveness(tg2, 1);
    CHECK(lv.first_step[tensor_id(tg2, "dY:r")] == 2);
  }
}

TEST_CASE("tasks: a backward that would produce nothing is dropped") {
  // relu and avg-pool right after the input: their backward would only write dY:data, which
  // does not exist (no gradient for the network input), so there is no backward task.
  // An fc on the input keeps its backward_filter (it writes dW) but has no backward_data.
  Graph g =
      graph_of(make_net({1, 4, 4}, 1, {relu("r", "data"), pool("p", "data", PoolMode::Avg, 2, 2), fc("f", "data", 2)}));
  TaskGraph tg = build_tasks(g, construct_route(g));
  CHECK(task_sequence(g, tg) == "forward:r forward:p forward:f backward_filter:f update:f");
  CHECK(names(tg, task(g, tg, "f", TaskKind::BackwardFilter).reads) == sorted_list("Y:data, dY:f"));
  CHECK(tensor(tg, "dY:f").host_input);
}

// =============================================================================================
// Graph: shapes, parameters, FLOPs, errors
// =============================================================================================

TEST_CASE("graph: output shapes and parameter counts by hand, every layer type") {
  Graph g =
      graph_of(make_net({4, 9, 9}, 10,
                        {
                            // conv, groups 2, dilation 2, stride 2, pad 2 on 4x9x9:
                            //   span = 2*(3-1)+1 = 5; out = (9 + 2*2 - 5)/2 + 1 = 5 -> 6x5x5
                            //   W = 6 * (4/2) * 3*3 = 108, bias 6 -> 114 params
                            conv("gconv", "data", 6, 3, 2, 2, 2, 2),
                            // max pool k3 s2 on 6x5x5, floor: (5-3)/2+1 = 2 -> 6x2x2
                            pool("pfloor", "gconv", PoolMode::Max, 3, 2),
                            // max pool k2 s2 on 4x9x9: floor (9-2)/2+1 = 4; ceil ceil(7/2)+1 = 5,
                            //   last window starts at (5-1)*2 = 8 < 9: kept -> 4x5x5
                            pool("pceil", "data", PoolMode::Max, 2, 2, 0, true),
                            pool("pceil_floor", "data", PoolMode::Max, 2, 2, 0, false),  // 4x4x4
                                                                                         // global avg on 6x5x5 -> 6x1x1
                            global_pool("gap", "gconv", PoolMode::Avg),
                            // bn on 6x5x5: gamma + beta = 12 params; saved stats 2*6*4 = 48 B
                            bn("norm", "gconv"),
                            // lrn, relu, dropout: same shape, no parameters
                            lrn("lrn", "norm"),
                            relu("act", "lrn"),
                            dropout("drop", "act"),
                            // concat 6x5x5 + 4x5x5 + 6x5x5 -> 16x5x5
                            concat("cat", {"drop", "pceil", "act"}),
                            // add of two 6x5x5 -> 6x5x5
                            add("sum", {"act", "drop"}),
                            // fc on 16x5x5 = 400 inputs -> 10: 400*10 + 10 = 4010 params
                            fc("fc", "cat", 10),
                            // fc without bias on 6x2x2 = 24 inputs -> 7: 168 params
                            fc("fc_nobias", "pfloor", 7, false),
                            loss("loss", "fc"),
                        }));
  struct Row {
    const char* name;
    Shape out;
    std::int64_t params;
  };
  const Row rows[] = {
      {"data", {4, 9, 9}, 0},        {"gconv", {6, 5, 5}, 114},     {"pfloor", {6, 2, 2}, 0}, {"pceil", {4, 5, 5}, 0},
      {"pceil_floor", {4, 4, 4}, 0}, {"gap", {6, 1, 1}, 0},         {"norm", {6, 5, 5}, 12},  {"lrn", {6, 5, 5}, 0},
      {"act", {6, 5, 5}, 0},         {"drop", {6, 5, 5}, 0},        {"cat", {16, 5, 5}, 0},   {"sum", {6, 5, 5}, 0},
      {"fc", {10, 1, 1}, 4010},      {"fc_nobias", {7, 1, 1}, 168}, {"loss", {10, 1, 1}, 0},
  };
  std::int64_t total = 0;
  for (const auto& r : rows) {
    CAPTURE(r.name);
    const GraphLayer& l = layer(g, r.name);
    CHECK(shape_text(l.out) == shape_text(r.out));
    CHECK(l.params() == r.params);
    total += r.params;
  }
  CHECK(g.layers.size() == std::size(rows));
  // 114 + 12 + 4010 + 168 = 4304
  CHECK(total == 4304);
  CHECK(g.total_params() == 4304);
  CHECK(layer(g, "gconv").weight_elems == 108);
  CHECK(layer(g, "gconv").bias_elems == 6);
  CHECK(layer(g, "norm").aux_bytes_fixed == 48);
  CHECK(layer(g, "norm").aux_bytes_per_sample == 0);
  CHECK(layer(g, "drop").aux_bytes_per_sample == 150);  // 6*5*5 mask bytes
  CHECK(layer(g, "cat").in_shapes.size() == 3);
  CHECK(g.out_bytes_per_sample(g.index_of("cat")) == 16 * 25 * 4);  // 1600 B
  CHECK(g.has_loss());
  CHECK(g.has_batch_norm());
  CHECK(g.conv_count() == 1);
  // The input is layer 0 and the file's layers follow in file order.
  CHECK(g.layers[0].type() == LayerType::Input);
  CHECK(g.layers[0].file_index == -1);
  CHECK(g.layers[1].name() == "gconv");
  CHECK(g.layers[1].file_index == 0);
  // data's consumers in file order: gconv, pceil, pceil_floor.
  CHECK(g.layers[0].consumers == std::vector<int>{1, 3, 4});
}

TEST_CASE("graph: pooling rounding, padding and the ceil-mode clip") {
  // ResNet's stem pool: max k3 s2 p1 on 64x112x112: (112 + 2 - 3)/2 + 1 = 55 + 1 = 56.
  // GoogLeNet's Caffe pool: max k3 s2 ceil on 112: ceil(109/2) + 1 = 56; floor 54 + 1 = 55.
  // Ceil-mode clip (Caffe/PyTorch): k2 s2 p1 ceil on 5: ceil((5+2-2)/2) + 1 = 4, but the 4th
  //   window would start at (4-1)*2 = 6 >= 5 + 1 (past input and left pad) -> 3.
  Graph g = graph_of(
      make_net({64, 112, 112}, 1,
               {pool("stem", "data", PoolMode::Max, 3, 2, 1), pool("ceil", "data", PoolMode::Max, 3, 2, 0, true),
                pool("floor", "data", PoolMode::Max, 3, 2, 0, false)}));
  CHECK(shape_text(layer(g, "stem").out) == "64x56x56");
  CHECK(shape_text(layer(g, "ceil").out) == "64x56x56");
  CHECK(shape_text(layer(g, "floor").out) == "64x55x55");
  Graph g2 = graph_of(make_net({1, 5, 5}, 1, {pool("clip", "data", PoolMode::Avg, 2, 2, 1, true)}));
  CHECK(shape_text(layer(g2, "clip").out) == "1x3x3");
  // Global pooling on a non-square plane: 8x5x3 -> 8x1x1.
  Graph g3 = graph_of(make_net({8, 5, 3}, 1, {global_pool("gmax", "data", PoolMode::Max)}));
  CHECK(shape_text(layer(g3, "gmax").out) == "8x1x1");
}

TEST_CASE("graph: rectangular conv parameters from JSON ([h, w] pairs)") {
  // 3x7x10, 4 out, kernel [3,5], stride [2,1], pad [1,0], no bias:
  //   h: (7 + 2*1 - 3)/2 + 1 = 4; w: (10 + 0 - 5)/1 + 1 = 6 -> 4x4x6; W = 4*3*3*5 = 180.
  const std::string text =
      R"({"format": "ucplan-network/1", "name": "rect", "input": {"shape": [3, 7, 10]}, "labels": 1,
    "layers": [{"name": "c", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": [3, 5],
                "stride": [2, 1], "pad": [1, 0], "bias": false}]})";
  Graph g = build_graph(parse_network_text(text, "rect.json"), "rect.json");
  CHECK(shape_text(layer(g, "c").out) == "4x4x6");
  CHECK(layer(g, "c").params() == 180);
  CHECK(layer(g, "c").bias_elems == 0);
}

TEST_CASE("graph: FLOPs of a conv and an fc by hand (a multiply-add counts 2)") {
  // The grouped dilated conv above: 6x5x5 = 150 outputs, each (4/2)*3*3 = 18 MACs -> 2700 MACs.
  //   forward = 2*2700 + 150 bias adds = 5550; backward_data = 2*2700 = 5400;
  //   backward_filter = 2*2700 + 150 (bias gradient sums 150 values) = 5550.
  // fc 2x3x4 = 24 -> 10: 240 MACs: forward 480 + 10 = 490; data 480; filter 490.
  Graph g = graph_of(make_net({4, 9, 9}, 10, {conv("gconv", "data", 6, 3, 2, 2, 2, 2)}));
  const GraphLayer& c = layer(g, "gconv");
  CHECK(c.forward_flops == doctest::Approx(5550));
  CHECK(c.backward_data_flops == doctest::Approx(5400));
  CHECK(c.backward_filter_flops == doctest::Approx(5550));
  Graph g2 = graph_of(make_net({2, 3, 4}, 10, {fc("fc", "data", 10)}));
  const GraphLayer& f = layer(g2, "fc");
  CHECK(f.params() == 250);  // 24*10 + 10
  CHECK(f.forward_flops == doctest::Approx(490));
  CHECK(f.backward_data_flops == doctest::Approx(480));
  CHECK(f.backward_filter_flops == doctest::Approx(490));
  // ResNet-50's conv1 (7x7/2, pad 3, 3 -> 64 on 224, no bias): out 112x112,
  //   MACs = 64*112*112 * 3*7*7 = 802816 * 147 = 118013952 -> 236027904 FLOPs forward.
  Graph g3 = graph_of(make_net({3, 224, 224}, 1, {conv("conv1", "data", 64, 7, 2, 3, 1, 1, false)}));
  CHECK(shape_text(layer(g3, "conv1").out) == "64x112x112");
  CHECK(layer(g3, "conv1").params() == 9408);  // 64*3*7*7
  CHECK(layer(g3, "conv1").forward_flops == doctest::Approx(236027904.0));
}

namespace {

std::string net_text(const std::string& layers, std::int64_t labels = 10) {
  return R"({"format": "ucplan-network/1", "name": "bad", "input": {"name": "data", "shape": [3, 8, 8]}, "labels": )" +
         std::to_string(labels) + R"(, "layers": [)" + layers + "]}";
}

struct Failure {
  bool thrown = false;
  std::string where, reason, what;
};

Failure graph_failure(const std::string& layers, std::int64_t labels = 10) {
  try {
    build_graph(parse_network_text(net_text(layers, labels), "bad.json"), "bad.json");
  } catch (const UserError& e) {
    return {true, e.where(), e.reason(), e.what()};
  }
  return {};
}

}  // namespace

TEST_CASE("graph: malformed networks are UserErrors naming the layer and the field") {
  SUBCASE("unknown input") {
    CHECK_THROWS_WITH_AS(build_graph(parse_network_text(net_text(R"({"name": "r1", "type": "relu", "inputs": ["data"]},
                                                   {"name": "r2", "type": "relu", "inputs": ["nope"]})"),
                                                        "bad.json"),
                                     "bad.json"),
                         "bad.json: layers[1] (r2).inputs[0]: unknown input \"nope\"", UserError);
  }
  SUBCASE("shape mismatch at an add: names the second input and both shapes") {
    // c4: 4x8x8, c5: 5x8x8 (k1 keeps 8x8).
    Failure f = graph_failure(R"({"name": "c4", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 1},
                                 {"name": "c5", "type": "conv", "inputs": ["data"], "out_channels": 5, "kernel": 1},
                                 {"name": "s", "type": "add", "inputs": ["c4", "c5"]})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[2] (s).inputs[1]");
    CHECK(f.reason.find("5x8x8") != std::string::npos);
    CHECK(f.reason.find("4x8x8") != std::string::npos);
    CHECK(f.what.rfind("bad.json: layers[2] (s).inputs[1]: ", 0) == 0);
  }
  SUBCASE("today's layer types: a gate of another shape, a slice past the channels, shuffle groups, clip bounds") {
    // data is 3x8x8.
    Failure m = graph_failure(R"({"name": "p", "type": "pool", "mode": "max", "inputs": ["data"], "kernel": 2},
                                 {"name": "m", "type": "mul", "inputs": ["data", "p"]})");
    REQUIRE(m.thrown);
    CHECK(m.where == "layers[1] (m).inputs[1]");
    CHECK(m.reason == "shape 3x4x4 of \"p\" is neither the shape 3x8x8 of \"data\" nor one value per channel (3x1x1)");
    Failure sl = graph_failure(R"({"name": "s", "type": "slice", "inputs": ["data"], "begin": 1, "end": 4})");
    REQUIRE(sl.thrown);
    CHECK(sl.where == "layers[0] (s).end");
    CHECK(sl.reason == "end 4 is beyond the input's 3 channels");
    Failure sh = graph_failure(R"({"name": "s", "type": "channel_shuffle", "inputs": ["data"], "groups": 2})");
    REQUIRE(sh.thrown);
    CHECK(sh.where == "layers[0] (s).groups");
    CHECK(sh.reason == "input channels 3 are not divisible by groups 2");
    Failure c = graph_failure(R"({"name": "c", "type": "clip", "inputs": ["data"], "min": 6, "max": 0})");
    REQUIRE(c.thrown);
    CHECK(c.what == "bad.json: layers[0] (c): min 6 must be less than max 0");
    Failure e = graph_failure(R"({"name": "s", "type": "slice", "inputs": ["data"], "begin": 2, "end": 2})");
    REQUIRE(e.thrown);
    CHECK(e.where == "layers[0] (s).end");
  }
  SUBCASE("spatial mismatch at a concat") {
    // p: k2 s2 -> 3x4x4 vs data 3x8x8.
    Failure f = graph_failure(R"({"name": "p", "type": "pool", "mode": "max", "inputs": ["data"], "kernel": 2},
                                 {"name": "cat", "type": "concat", "inputs": ["data", "p"]})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[1] (cat).inputs[1]");
    CHECK(f.reason.find("4x4") != std::string::npos);
  }
  SUBCASE("cycle") {
    // a <- b <- a: neither is reachable from the input; the first in file order is named.
    Failure f = graph_failure(R"({"name": "r", "type": "relu", "inputs": ["data"]},
                                 {"name": "a", "type": "relu", "inputs": ["b"]},
                                 {"name": "b", "type": "relu", "inputs": ["a"]})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[1] (a).inputs");
    CHECK(f.reason.find("cycle") != std::string::npos);
  }
  SUBCASE("a layer reading itself") {
    Failure f = graph_failure(R"({"name": "a", "type": "relu", "inputs": ["a"]})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[0] (a).inputs[0]");
  }
  SUBCASE("groups that do not divide the input channels") {
    Failure f = graph_failure(
        R"({"name": "g", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 1, "groups": 2})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[0] (g).groups");
    CHECK(f.reason.find("3") != std::string::npos);
  }
  SUBCASE("a kernel larger than the padded input") {
    // span 9 > 8 + 2*0.
    Failure f = graph_failure(R"({"name": "big", "type": "conv", "inputs": ["data"], "out_channels": 4, "kernel": 9})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[0] (big).kernel");
    CHECK(f.reason.find("3x8x8") != std::string::npos);
  }
  SUBCASE("pool padding more than half the kernel") {
    Failure f =
        graph_failure(R"({"name": "p", "type": "pool", "mode": "avg", "inputs": ["data"], "kernel": 2, "pad": 2})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[0] (p).pad");
  }
  SUBCASE("a single-input layer given two inputs") {
    Failure f = graph_failure(R"({"name": "r", "type": "relu", "inputs": ["data"]},
                                 {"name": "r2", "type": "relu", "inputs": ["data", "r"]})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[1] (r2).inputs");
  }
  SUBCASE("loss input size differs from the label count") {
    // fc gives 5 values per sample, the network has 10 labels.
    Failure f = graph_failure(R"({"name": "f", "type": "fc", "inputs": ["data"], "out_features": 5},
                                 {"name": "loss", "type": "softmax_loss", "inputs": ["f"]})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[1] (loss).inputs");
    CHECK(f.reason.find("5") != std::string::npos);
    CHECK(f.reason.find("10") != std::string::npos);
  }
  SUBCASE("duplicate names") {
    Failure f = graph_failure(R"({"name": "r", "type": "relu", "inputs": ["data"]},
                                 {"name": "r", "type": "relu", "inputs": ["data"]})");
    REQUIRE(f.thrown);
    CHECK(f.where == "layers[1] (r).name");
  }
  SUBCASE("a well-formed network does not throw") {
    Failure f = graph_failure(R"({"name": "r", "type": "relu", "inputs": ["data"]})");
    CHECK_FALSE(f.thrown);
  }
}

// Sizes are bounded before anything multiplies them by a batch (graph.h): at each bound a network
// is accepted, one past it refused, naming the place. Past them, sizes in bytes overflowed int64
// (a conv of 2^20 x 2^20 x 2^20 x 2^20 weights; 2^60 values a sample at any batch).
TEST_CASE("graph: tensors, weights, multiply-adds and the whole network are bounded, exactly at the bound") {
  auto failure = [](const std::string& shape, const std::string& layers) {
    const std::string text = R"({"format": "ucplan-network/1", "name": "big", "input": {"name": "data", "shape": )" +
                             shape + R"(}, "labels": 10, "layers": [)" + layers + "]}";
    try {
      build_graph(parse_network_text(text, "big.json"), "big.json");
    } catch (const UserError& e) {
      return Failure{true, e.where(), e.reason(), e.what()};
    }
    return Failure{};
  };
  const std::string relu = R"({"name": "r", "type": "relu", "inputs": ["data"]})";
  CHECK_FALSE(failure("[1, 262144, 262144]", relu).thrown);  // 2^36 values
  const Failure input = failure("[1, 262144, 262145]", relu);
  CHECK(input.what ==
        "big.json: input.shape: 6.872e+10 values per sample (1x262144x262145): more than ucplan plans for in one "
        "tensor (2^36)");

  auto conv = [](int out, int kernel) {
    return fmt::format(R"({{"name": "c", "type": "conv", "inputs": ["data"], "out_channels": {}, "kernel": {}}})", out,
                       kernel);
  };
  CHECK_FALSE(failure("[65536, 1, 1]", conv(1048576, 1)).thrown);  // 2^16 x 2^20 weights
  const Failure weights = failure("[65537, 1, 1]", conv(1048576, 1));
  CHECK(weights.where == "layers[0] (c)");
  CHECK(weights.reason == "its weights hold more than 2^36 values: more than ucplan plans for in one layer");
  const Failure huge = failure("[1048576, 1, 1]", conv(1048576, 1));  // 2^40 weights
  CHECK(huge.reason == weights.reason);

  auto fc = [](std::int64_t out) {
    return fmt::format(R"({{"name": "f", "type": "fc", "inputs": ["data"], "out_features": {}}})", out);
  };
  CHECK_FALSE(failure("[262144, 1, 1]", fc(262144)).thrown);
  CHECK(failure("[262144, 1, 1]", fc(262145)).reason == weights.reason);
  CHECK(failure("[1024, 1024, 1024]", fc(std::int64_t{1} << 30)).reason == weights.reason);  // 2^60

  // Multiply-adds: 2^10 -> 2^10 channels over 2^20 pixels is 2^40.
  CHECK_FALSE(failure("[1024, 1024, 1024]", conv(1024, 1)).thrown);
  const Failure macs = failure("[1024, 1024, 1024]", conv(1025, 1));
  CHECK(macs.where == "layers[0] (c)");
  CHECK(macs.reason == "1.101e+12 multiply-adds per sample: more than ucplan plans for in one layer (2^40)");

  // The whole network: the input and 15 layers of 2^36 values each are 2^40; a 16th layer is too many.
  std::string chain = relu;
  for (int i = 1; i < 15; ++i)
    chain += fmt::format(R"(, {{"name": "r{}", "type": "relu", "inputs": ["{}"]}})", i,
                         i == 1 ? "r" : fmt::format("r{}", i - 1));
  CHECK_FALSE(failure("[1, 262144, 262144]", chain).thrown);
  chain += R"(, {"name": "r15", "type": "relu", "inputs": ["r14"]})";
  const Failure network = failure("[1, 262144, 262144]", chain);
  CHECK(network.where == "layers[15] (r15)");
  CHECK(network.reason ==
        "the network up to here holds 1.168e+12 values and parameters per sample: more than ucplan plans for (2^40)");
}

// A loss ends the network: it has no dY tensor, so a consumer's backward would have nowhere to
// write (found while writing these tests; build_graph() now refuses it).
TEST_CASE("graph: a layer reading a softmax_loss output is a user error") {
  Failure f = graph_failure(R"({"name": "f", "type": "fc", "inputs": ["data"], "out_features": 10},
                               {"name": "loss", "type": "softmax_loss", "inputs": ["f"]},
                               {"name": "r", "type": "relu", "inputs": ["loss"]})");
  REQUIRE(f.thrown);
  CHECK(f.where.rfind("layers[2] (r).inputs", 0) == 0);
}
