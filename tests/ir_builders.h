// Networks and task graphs built in code for the IR and pass tests: one helper per layer type,
// and lookups of layers, tasks and tensors by name that fail the test (not crash) when absent.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "planner/ir/graph.h"
#include "planner/ir/tasks.h"
#include "planner/model/network.h"

namespace ucplan::test {

// ---- building networks in code ------------------------------------------------------------

inline Layer simple(const std::string& name, LayerType type, std::vector<std::string> inputs) {
  Layer l;
  l.name = name;
  l.type = type;
  l.inputs = std::move(inputs);
  return l;
}

inline Layer conv(const std::string& name, const std::string& in, std::int64_t out, std::int64_t k,
                  std::int64_t stride = 1, std::int64_t pad = 0, std::int64_t dilation = 1, std::int64_t groups = 1,
                  bool bias = true) {
  Layer l = simple(name, LayerType::Conv, {in});
  l.conv.out_channels = out;
  l.conv.kernel = {k, k};
  l.conv.stride = {stride, stride};
  l.conv.pad = {pad, pad};
  l.conv.dilation = {dilation, dilation};
  l.conv.groups = groups;
  l.conv.bias = bias;
  return l;
}

inline Layer pool(const std::string& name, const std::string& in, PoolMode mode, std::int64_t k, std::int64_t stride,
                  std::int64_t pad = 0, bool ceil_mode = false) {
  Layer l = simple(name, LayerType::Pool, {in});
  l.pool.mode = mode;
  l.pool.kernel = {k, k};
  l.pool.stride = {stride, stride};
  l.pool.pad = {pad, pad};
  l.pool.ceil_mode = ceil_mode;
  return l;
}

inline Layer global_pool(const std::string& name, const std::string& in, PoolMode mode) {
  Layer l = simple(name, LayerType::Pool, {in});
  l.pool.mode = mode;
  l.pool.global = true;
  return l;
}

inline Layer fc(const std::string& name, const std::string& in, std::int64_t out, bool bias = true) {
  Layer l = simple(name, LayerType::Fc, {in});
  l.fc.out_features = out;
  l.fc.bias = bias;
  return l;
}

inline Layer relu(const std::string& name, const std::string& in) { return simple(name, LayerType::Relu, {in}); }
inline Layer bn(const std::string& name, const std::string& in) { return simple(name, LayerType::BatchNorm, {in}); }
inline Layer lrn(const std::string& name, const std::string& in) { return simple(name, LayerType::Lrn, {in}); }
inline Layer dropout(const std::string& name, const std::string& in) { return simple(name, LayerType::Dropout, {in}); }
inline Layer loss(const std::string& name, const std::string& in) { return simple(name, LayerType::SoftmaxLoss, {in}); }
inline Layer add(const std::string& name, std::vector<std::string> in) {
  return simple(name, LayerType::Add, std::move(in));
}
inline Layer concat(const std::string& name, std::vector<std::string> in) {
  return simple(name, LayerType::Concat, std::move(in));
}

inline Network make_net(std::array<std::int64_t, 3> input_chw, std::int64_t labels, std::vector<Layer> layers,
                        const std::string& input_name = "data") {
  Network n;
  n.name = "test";
  n.input_name = input_name;
  n.input_shape = input_chw;
  n.labels = labels;
  n.layers = std::move(layers);
  return n;
}

inline Graph graph_of(const Network& n) { return build_graph(n, "test"); }

inline const GraphLayer& layer(const Graph& g, const std::string& name) {
  int i = g.index_of(name);
  REQUIRE_MESSAGE(i >= 0, "no layer " << name);
  return g.layers[i];
}

// ---- naming what the passes return ----------------------------------------------------------

// "b, a, c" -> "a, b, c": expected sets are written in any order and compared sorted.
inline std::string sorted_list(const std::string& list) {
  std::vector<std::string> items;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) items.push_back(item);
  }
  std::sort(items.begin(), items.end());
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

inline std::string names(const TaskGraph& tg, const std::vector<int>& ids) {
  std::string list;
  for (int id : ids) list += tg.tensors.at(id).name + ",";
  return sorted_list(list);
}

inline std::string route_names(const Graph& g, const std::vector<int>& route) {
  std::string s;
  for (int l : route) s += (s.empty() ? "" : " ") + g.layers.at(l).name();
  return s;
}

inline std::string task_label(const Graph& g, const Task& t) {
  return std::string(task_kind_name(t.kind)) + ":" + g.layers.at(t.layer).name();
}

inline std::string task_sequence(const Graph& g, const TaskGraph& tg) {
  std::string s;
  for (const auto& t : tg.tasks) s += (s.empty() ? "" : " ") + task_label(g, t);
  return s;
}

inline int task_index(const Graph& g, const TaskGraph& tg, const std::string& name, TaskKind kind) {
  int found = -1;
  for (const auto& t : tg.tasks)
    if (t.kind == kind && g.layers[t.layer].name() == name) {
      REQUIRE_MESSAGE(found < 0, "two " << task_kind_name(kind) << " tasks for " << name);
      found = t.id;
    }
  return found;
}

inline const Task& task(const Graph& g, const TaskGraph& tg, const std::string& name, TaskKind kind) {
  int i = task_index(g, tg, name, kind);
  REQUIRE_MESSAGE(i >= 0, "no " << task_kind_name(kind) << " task for " << name);
  return tg.tasks[i];
}

inline int tensor_id(const TaskGraph& tg, const std::string& name) {
  for (const auto& t : tg.tensors)
    if (t.name == name) return t.id;
  return -1;
}

inline const Tensor& tensor(const TaskGraph& tg, const std::string& name) {
  int i = tensor_id(tg, name);
  REQUIRE_MESSAGE(i >= 0, "no tensor " << name);
  return tg.tensors[i];
}

}  // namespace ucplan::test
