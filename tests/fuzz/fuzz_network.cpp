// libFuzzer harness: the network loader, then the graph (shapes) and the task graph built from it,
// and for a small network also what `ucplan profile --device model:h100` and `ucplan compile`
// make of it: a modelled profile at batch 2, then a plan at a budget with room and at the
// network's lower bound (any sub-batch). A network that loads must profile and plan, or be
// refused as bad input (UserError): the fuzzed profiles of the thirtieth session showed that
// loading is not where files that break the planner are found. Networks of more than 64 layers
// or of more than 64 MiB of activations a sample are only loaded, to keep each input to a
// fraction of a second. Byte-level mutation rarely gives a network that loads and differs from
// its seed in more than a name, so half of the mutations parse the file as JSON and change a
// layer the way a hand-written file goes wrong (a field at an edge, another type, an input
// renamed, a layer deleted, duplicated or inserted, the input's shape), then write it back.
#include <random>

#include <nlohmann/json.hpp>

#include "planner/ir/graph.h"
#include "planner/ir/route.h"
#include "planner/ir/tasks.h"
#include "planner/model/network.h"
#include "planner/passes/lower_bound.h"
#include "planner/passes/pipeline.h"
#include "profiler/model_device.h"
#include "profiler/profile_network.h"
#include "tests/fuzz/fuzz_loader.h"

extern "C" std::size_t LLVMFuzzerMutate(std::uint8_t* data, std::size_t size, std::size_t max_size);

namespace {

using Json = nlohmann::json;

// clang-format off
// Types that take one input of any shape and need no field: a layer's type changed to one of these,
// or one inserted, keeps the network valid, so the planner sees it.
const char* const kPlainTypes[] = {
    "relu", "bn", "lrn", "dropout", "sigmoid", "hardsigmoid", "hardswish", "silu", "clip", "gelu", "scale",
    "layer_norm"};
const char* const kTypes[] = {
    "conv", "pool", "fc", "add", "concat", "softmax_loss", "mul", "channel_shuffle", "slice", "input"};
const char* const kFields[] = {
    "kernel", "stride", "pad", "dilation", "groups", "out_channels", "out_features", "begin", "end", "global", "size",
    "ratio", "mode", "ceil_mode", "count_include_pad", "bias", "eps"};
const std::int64_t kSmall[] = {1, 1, 2, 2, 3, 4, 5, 8};
const std::int64_t kEdges[] = {0, -1, 7, 16, 33, 64, 1 << 16, 1 << 20, std::int64_t{1} << 31};
// clang-format on

// A value for a field: mostly small and valid, sometimes at an edge.
template <class Rng>
Json value(Rng& rng) {
  if (rng() % 4) return kSmall[rng() % std::size(kSmall)];
  if (rng() % 8 == 0) return static_cast<double>(kEdges[rng() % std::size(kEdges)]) / 8;
  return kEdges[rng() % std::size(kEdges)];
}

template <class Rng>
std::string name_of_some_layer(const Json& layers, Rng& rng) {
  if (layers.empty() || rng() % 8 == 0) return "data";
  const Json& l = layers[rng() % layers.size()];
  return l.contains("name") && l["name"].is_string() ? l["name"].get<std::string>() : "data";
}

// A layer named `name` reading `from`: mostly one of kPlainTypes, sometimes one that changes the
// shape. (One braced list per return: clang 14 leaked a json object assigned over another from a
// braced list inside a switch, found by LeakSanitizer in this mutator and confirmed by valgrind.)
template <class Rng>
Json inserted_layer(const std::string& name, const std::string& from, Rng& rng) {
  const Json in = Json::array({from});
  switch (rng() % 9) {
    case 0:
      return {{"name", name},         {"type", "conv"},       {"inputs", in},    {"out_channels", value(rng)},
              {"kernel", value(rng)}, {"stride", value(rng)}, {"pad", rng() % 2}};
    case 1: {
      const char* mode = rng() % 2 ? "max" : "avg";
      return {{"name", name}, {"type", "pool"},       {"inputs", in},
              {"mode", mode}, {"kernel", value(rng)}, {"stride", value(rng)}};
    }
    case 2:
      return {{"name", name}, {"type", "add"}, {"inputs", Json::array({from, from})}};
    default:
      return {{"name", name}, {"type", kPlainTypes[rng() % std::size(kPlainTypes)]}, {"inputs", in}};
  }
}

// One change to a parsed network file; false if it found nothing to change. Most keep the file
// valid (small values, field-free types, a deleted layer's readers rewired), so that the profiler
// and the planner meet networks no seed has; the rest break it the way hand-written files do.
template <class Rng>
bool mutate_network(Json& net, Rng& rng) {
  if (!net.is_object() || !net.contains("layers") || !net["layers"].is_array()) return false;
  Json& layers = net["layers"];
  if (rng() % 10 == 0) {  // the input's shape, or the labels
    if (rng() % 4 == 0) {
      net["labels"] = value(rng);
      return true;
    }
    if (!net.contains("input") || !net["input"].is_object()) return false;
    Json& shape = net["input"]["shape"];
    if (!shape.is_array() || shape.empty()) return false;
    shape[rng() % shape.size()] = value(rng);
    return true;
  }
  if (layers.empty()) return false;
  const std::size_t k = rng() % layers.size();
  Json& l = layers[k];
  if (!l.is_object() || !l.contains("name") || !l["name"].is_string() || !l.contains("inputs") ||
      !l["inputs"].is_array())
    return false;
  const std::string name = l["name"].get<std::string>();
  const bool loss = l.contains("type") && l["type"] == "softmax_loss";  // nothing may read it
  switch (rng() % 10) {
    case 0:
    case 1:
    case 2: {  // one of its fields: a number, a pair's half, a flag
      std::vector<std::string> keys;
      for (const auto& [key, v] : l.items())
        if (key != "inputs" && (v.is_number() || v.is_array() || v.is_boolean())) keys.push_back(key);
      if (keys.empty()) return false;
      Json& v = l[keys[rng() % keys.size()]];
      if (v.is_boolean())
        v = !v.get<bool>();
      else if (v.is_array() && !v.empty() && v[0].is_number())
        v[rng() % v.size()] = value(rng);
      else
        v = value(rng);
      return true;
    }
    case 3:  // a field-free type in its place (its fields dropped), or any type with its fields kept
      if (rng() % 4) {
        const Json first = l["inputs"].empty() ? Json("data") : l["inputs"][0];
        Json plain = {
            {"name", name}, {"type", kPlainTypes[rng() % std::size(kPlainTypes)]}, {"inputs", Json::array({first})}};
        l = std::move(plain);
      } else {
        l["type"] = kTypes[rng() % std::size(kTypes)];
      }
      return true;
    case 4: {  // a field of another layer type: refused, except where the type takes it
      l[kFields[rng() % std::size(kFields)]] = value(rng);
      return true;
    }
    case 5: {  // an input named after another layer (possibly a later one), or one more input
      Json& in = l["inputs"];
      if (!in.empty() && rng() % 3)
        in[rng() % in.size()] = name_of_some_layer(layers, rng);
      else
        in.push_back(name_of_some_layer(layers, rng));
      return true;
    }
    case 6: {  // deleted, its readers reading its first input instead
      const Json from = l["inputs"].empty() ? Json("data") : l["inputs"][0];
      for (Json& other : layers)
        if (other.is_object() && other.contains("inputs") && other["inputs"].is_array())
          for (Json& in : other["inputs"])
            if (in == name) in = from;
      layers.erase(k);
      return true;
    }
    case 7:
    case 8: {  // a layer inserted after it, reading it, and read by its readers
      if (loss) return false;
      const std::string added = name + "_" + std::to_string(rng() % 100);
      const Json layer = inserted_layer(added, name, rng);
      for (Json& other : layers)
        if (other.is_object() && other.contains("inputs") && other["inputs"].is_array())
          for (Json& in : other["inputs"])
            if (in == name) in = added;
      layers.insert(layers.begin() + static_cast<std::ptrdiff_t>(k + 1), layer);
      return true;
    }
    default: {  // the same layer twice, the copy reading the first
      if (loss) return false;
      Json copy = l;
      copy["name"] = name + "_2";
      copy["inputs"] = Json::array({name});
      layers.insert(layers.begin() + static_cast<std::ptrdiff_t>(k + 1), copy);
      return true;
    }
  }
}

void plan_small_network(const ucplan::Network& net, const ucplan::Graph& g, const ucplan::TaskGraph& tg,
                        const std::string& path) {
  constexpr std::int64_t batch = 2;
  if (g.layers.size() > 64) return;
  std::int64_t sample_bytes = 0;
  for (std::size_t l = 0; l < g.layers.size(); ++l) sample_bytes += g.out_bytes_per_sample(static_cast<int>(l));
  if (sample_bytes > (std::int64_t{64} << 20)) return;

  const auto runner = ucplan::make_model_runner("h100");
  ucplan::ProfileOptions po;
  po.batch = batch;
  po.sizes = ucplan::SizesPolicy::All;
  po.repeat = 1;
  const ucplan::Profile profile = ucplan::profile_network(net, path, *runner, po);

  const std::int64_t lower = ucplan::memory_lower_bound(tg).bytes;
  for (const std::int64_t budget : {std::int64_t{1} << 34, lower}) {
    ucplan::CompileInput in;
    in.network = net;
    in.network_file = path;
    in.profile = profile;
    in.profile_path = "model-h100.json";
    in.batch = batch;
    in.budget_bytes = budget;
    in.options.solver = ucplan::Solver::Fast;
    in.options.sub_batch.kind = ucplan::SubBatchOption::Kind::Any;
    try {
      ucplan::make_plan(in);
    } catch (const ucplan::UserError&) {
      // no plan at this budget (or the network is refused): what this harness looks for is any
      // other outcome
    }
  }
}

}  // namespace

extern "C" std::size_t LLVMFuzzerCustomMutator(std::uint8_t* data, std::size_t size, std::size_t max_size,
                                               unsigned int seed) {
  std::mt19937 rng(seed);
  if (rng() % 2 == 0) return LLVMFuzzerMutate(data, size, max_size);
  Json net = Json::parse(data, data + size, nullptr, false);
  if (net.is_discarded()) return LLVMFuzzerMutate(data, size, max_size);
  const int steps = 1 + static_cast<int>(rng() % 3);
  bool changed = false;
  for (int i = 0; i < steps; ++i) changed = mutate_network(net, rng) || changed;
  if (!changed) return LLVMFuzzerMutate(data, size, max_size);
  const std::string out = net.dump(1);
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::copy(out.begin(), out.end(), data);
  return out.size();
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return ucplan::fuzz::run_loader(data, size, [](const std::string& path) {
    const ucplan::Network net = ucplan::load_network(path);
    const ucplan::Graph g = ucplan::build_graph(net, path);
    const ucplan::TaskGraph tg = ucplan::build_tasks(g, ucplan::construct_route(g));
    plan_small_network(net, g, tg, path);
  });
}
