#include "offsets.h"

#include <algorithm>
#include <array>
#include <limits>
#include <tuple>

namespace ucplan {

namespace {

constexpr std::size_t kMaxBuffers = 20000;  // ResNet-152 b256: ~4,000; the 10^4-layer ResNet: more
constexpr int kNever = std::numeric_limits<int>::max();
using Clock = std::array<int, kStreams>;  // per stream: the latest step known to have ended

}  // namespace

OffsetReassignment assign_offsets_after_scheduling(std::vector<PlanBuffer>& buffers, const std::vector<PlanStep>& steps,
                                                   std::int64_t arena_bytes) {
  OffsetReassignment r;
  r.before_bytes = r.after_bytes = arena_bytes;
  const int ns = static_cast<int>(steps.size());
  for (int i = 0; i < ns; ++i)
    if (steps[i].id != i) return r;

  // Vector clocks: what has ended, per stream, before each step starts (stream order and waits),
  // and each stream's steps in order (their clocks grow along it). The verifier derives the same
  // relation with code of its own, on purpose: it checks this pass (STYLE.md #5).
  std::vector<Clock> clock(ns);
  std::array<std::vector<int>, kStreams> on_stream;
  for (int i = 0; i < ns; ++i) {
    const int x = static_cast<int>(steps[i].stream);
    Clock c = on_stream[x].empty() ? Clock{-1, -1, -1} : clock[on_stream[x].back()];
    for (int w : steps[i].waits)
      if (w >= 0 && w < i)
        for (int k = 0; k < kStreams; ++k) c[k] = std::max(c[k], clock[w][k]);
    c[x] = i;
    clock[i] = c;
    on_stream[x].push_back(i);
  }

  // Per buffer: its last step on each stream (its first is PlanBuffer::first_step).
  const int nb = static_cast<int>(buffers.size());
  std::vector<Clock> last(nb, Clock{-1, -1, -1});
  for (const PlanStep& s : steps) {
    const int x = static_cast<int>(s.stream);
    auto touch = [&](int b) {
      if (b >= 0 && b < nb) last[b][x] = std::max(last[b][x], s.id);
    };
    for (int b : s.reads) touch(b);
    for (int b : s.writes) touch(b);
    for (int b : s.accumulates) touch(b);
    touch(s.workspace);
  }
  std::int64_t region = 0;  // the dynamic region starts above the resident buffers
  std::vector<int> dynamic;
  for (int b = 0; b < nb; ++b) {
    if (buffers[b].resident)
      region = std::max(region, buffers[b].offset + buffers[b].size);
    else if (buffers[b].first_step >= 0 && buffers[b].first_step < ns)
      dynamic.push_back(b);
  }
  if (dynamic.empty() || dynamic.size() > kMaxBuffers) return r;

  // free_at[b][x]: the first step on stream x, after every step touching b, that they all happen
  // before (kNever: none). A buffer whose first step is on x at or after it may take b's bytes.
  std::vector<Clock> free_at(nb, Clock{kNever, kNever, kNever});
  for (int b : dynamic)
    for (int x = 0; x < kStreams; ++x) {
      const std::vector<int>& on = on_stream[x];
      auto after_all = [&](int step) {
        for (int k = 0; k < kStreams; ++k)
          if (last[b][k] >= 0 && (step <= last[b][k] || clock[step][k] < last[b][k])) return false;
        return true;
      };
      auto it = std::partition_point(on.begin(), on.end(), [&](int step) { return !after_all(step); });
      if (it != on.end()) free_at[b][x] = *it;
    }
  auto first = [&](int b) { return buffers[b].first_step; };
  auto conflict = [&](int a, int b) {
    if (first(a) == first(b)) return true;
    if (first(a) > first(b)) std::swap(a, b);
    return first(b) < free_at[a][static_cast<int>(steps[first(b)].stream)];
  };

  // One placement: buffers in the given order, each into the smallest gap between the placed
  // buffers it conflicts with that holds it, or above them all. Returns the arena's end, or
  // stops as soon as it reaches `limit` (no better than what it would replace).
  std::vector<std::int64_t> offset(nb, -1), best_offset;
  std::vector<int> placed;
  std::vector<std::pair<std::int64_t, std::int64_t>> taken;  // [begin, end) of conflicting placed buffers
  auto place = [&](const std::vector<int>& order, std::int64_t limit) {
    placed.clear();
    std::int64_t top = region;
    for (int b : order) {
      if (top >= limit) return top;
      const std::int64_t size = buffers[b].size;
      taken.clear();
      for (int a : placed)
        if (conflict(a, b)) taken.emplace_back(offset[a], offset[a] + buffers[a].size);
      std::sort(taken.begin(), taken.end());
      std::int64_t cursor = region, best = -1, best_gap = std::numeric_limits<std::int64_t>::max();
      for (const auto& [lo, hi] : taken) {
        if (lo > cursor && lo - cursor >= size && lo - cursor < best_gap) {
          best = cursor;
          best_gap = lo - cursor;
        }
        cursor = std::max(cursor, hi);
      }
      offset[b] = best >= 0 ? best : cursor;
      top = std::max(top, offset[b] + size);
      placed.push_back(b);
    }
    return top;
  };
  // Orders, as XLA's heap simulator tries several and keeps the best (ChooseBestHeapAlgorithm):
  // largest first, longest-lived first, and in time order (the order the simulation allocated in);
  // ties by first step, then id, so the result is deterministic.
  auto span = [&](int b) { return buffers[b].last_step - first(b); };
  std::vector<std::vector<int>> orders(3, dynamic);
  std::sort(orders[0].begin(), orders[0].end(), [&](int a, int b) {
    return std::make_tuple(-buffers[a].size, first(a), a) < std::make_tuple(-buffers[b].size, first(b), b);
  });
  std::sort(orders[1].begin(), orders[1].end(), [&](int a, int b) {
    return std::make_tuple(-span(a), -buffers[a].size, first(a), a) <
           std::make_tuple(-span(b), -buffers[b].size, first(b), b);
  });
  std::sort(orders[2].begin(), orders[2].end(),
            [&](int a, int b) { return std::make_pair(first(a), a) < std::make_pair(first(b), b); });
  std::int64_t top = arena_bytes;
  for (const auto& order : orders) {
    const std::int64_t t = place(order, top);
    if (t < top) {
      top = t;
      best_offset = offset;
    }
  }
  if (top >= arena_bytes) return r;
  for (int b : dynamic) buffers[b].offset = best_offset[b];
  r.applied = true;
  r.after_bytes = top;
  return r;
}

}  // namespace ucplan
