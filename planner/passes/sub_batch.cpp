#include "sub_batch.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "planner/model/errors.h"
#include "simulator.h"

namespace ucplan {

SubBatchOption parse_sub_batch_option(const std::string& text) {
  if (text == "auto") return {SubBatchOption::Kind::Auto, 0};
  if (text == "any") return {SubBatchOption::Kind::Any, 0};
  std::int64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || ptr != text.data() + text.size() || n < 1)
    throw UserError("", "--sub-batch", fmt::format("expected auto, any or a number of samples, got \"{}\"", text));
  return {SubBatchOption::Kind::Size, n};
}

std::string sub_batch_option_text(const SubBatchOption& o) {
  switch (o.kind) {
    case SubBatchOption::Kind::Auto:
      return "auto";
    case SubBatchOption::Kind::Any:
      return "any";
    case SubBatchOption::Kind::Size:
      return std::to_string(o.size);
  }
  return "?";
}

std::vector<std::int64_t> sub_batch_candidates(const SubBatchOption& o, bool has_batch_norm,
                                               const std::vector<std::int64_t>& costable, std::int64_t batch) {
  std::vector<std::int64_t> out;
  if (o.kind != SubBatchOption::Kind::Size) {
    for (auto b : costable)
      if (o.kind == SubBatchOption::Kind::Any || !has_batch_norm || b == batch) out.push_back(b);
  } else {
    const std::int64_t n = o.size;
    if (n > batch)
      throw UserError("", "--sub-batch",
                      fmt::format("{} is larger than the batch {}: a sub-batch divides it", n, batch));
    if (batch % n != 0) throw UserError("", "--sub-batch", fmt::format("{} does not divide the batch {}", n, batch));
    if (std::find(costable.begin(), costable.end(), n) == costable.end()) {
      std::string sizes;
      for (auto b : costable) sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
      throw UserError("", "--sub-batch",
                      fmt::format("the profile has no measurements at {} samples (of its sizes, those that divide the "
                                  "batch: {}): profile at --batch {}, or with --sizes all",
                                  n, sizes, n));
    }
    out.push_back(n);
  }
  if (out.empty()) {
    // Only with batch-norm and auto: the whole batch is the one candidate, and no profiled size is it.
    std::string sizes;
    for (auto b : costable) sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
    throw UserError(
        "", "--batch",
        fmt::format("the network has batch-norm, so the batch of {} runs whole, but the profile has no "
                    "measurements at {} samples (of its sizes, those that divide it: {}): profile at --batch {}, or "
                    "pass --sub-batch any or N",
                    batch, batch, sizes, batch));
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

namespace {

std::int64_t task_data_bytes(const TaskGraph& tg, const Task& t, std::int64_t b) {
  std::int64_t bytes = 0;
  for (int id : tg.touched(t))
    if (!tg.tensors[id].resident()) bytes += align_up(tg.tensors[id].bytes(b));
  return bytes;
}

}  // namespace

std::int64_t max_task_bytes_fastest(const TaskGraph& tg, const CostTable& costs) {
  std::int64_t best = 0;
  for (const Task& t : tg.tasks) {
    std::int64_t ws = t.conv_kernel ? align_up(costs.tasks[t.id].front.back().workspace_bytes) : 0;
    best = std::max(best, task_data_bytes(tg, t, costs.sub_batch) + ws);
  }
  return best;
}

std::int64_t min_plan_bytes(const TaskGraph& tg, const CostTable& costs) {
  std::int64_t resident = 0;
  for (const Tensor& t : tg.tensors)
    if (t.resident()) resident += align_up(t.bytes(1));
  std::int64_t best = 0;
  for (const Task& t : tg.tasks) {
    std::int64_t ws = t.conv_kernel ? align_up(costs.tasks[t.id].min_workspace) : 0;
    best = std::max(best, task_data_bytes(tg, t, costs.sub_batch) + ws);
  }
  return resident + best;
}

std::int64_t modnn_sub_batch(const TaskGraph& tg, const std::map<std::int64_t, CostTable>& tables,
                             std::int64_t budget) {
  if (tables.empty()) return 0;
  std::int64_t resident = 0;
  for (const Tensor& t : tg.tensors)
    if (t.resident()) resident += align_up(t.bytes(1));
  const std::int64_t room = budget - resident;
  std::int64_t b = tables.rbegin()->first;
  std::vector<std::int64_t> visited;
  for (;;) {
    visited.push_back(b);
    const std::int64_t need = max_task_bytes_fastest(tg, tables.at(b));
    const double target =
        static_cast<double>(b) * static_cast<double>(room) / static_cast<double>(std::max<std::int64_t>(need, 1));
    // The largest candidate not above the target (the smallest if none is).
    std::int64_t next = tables.begin()->first;
    for (const auto& [size, table] : tables)
      if (static_cast<double>(size) <= target) next = size;
    if (next == b) return b;
    // A cycle (a large workspace at one size sends the iteration down, the smaller size's need
    // back up): the smallest size on it, whose tasks need the least.
    if (auto seen = std::find(visited.begin(), visited.end(), next); seen != visited.end())
      return *std::min_element(seen, visited.end());
    b = next;
  }
}

}  // namespace ucplan
