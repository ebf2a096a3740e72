#include "offsets.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <tuple>
#include <utility>

namespace ucplan {

namespace {

constexpr std::size_t kMaxBuffers = 20000;  // ResNet-152 b256: ~4,000; the 10^4-layer ResNet: more
constexpr int kNever = std::numeric_limits<int>::max();
// The search's nodes: about kSearchWork / buffers (a node looks at every buffer left), at least two
// dives, at most kMaxSearchNodes. Measured on the pool branches of resnet20, resnet50 and
// densenet40 b64 (model:h100 and model:v100): a placement that fits is found within 4 to 8 nodes
// per buffer where one was found at all, in 20-60 ms; a search that finds none stops after
// 0.2-0.5 s (resnet50 b64, 740 buffers).
constexpr std::int64_t kSearchWork = 6'000'000;
constexpr std::int64_t kMaxSearchNodes = 20'000;
using Clock = std::array<int, kStreams>;  // per stream: the latest step known to have ended

// The depth-first search of pack_below (offsets.h). Sections: the spans between consecutive
// first steps and ends (last + 1) of the buffers; the buffers alive in a section overlap, so
// they conflict pairwise and stack above its floor.
class Packer {
 public:
  explicit Packer(const PackingProblem& p) : p_(p), n_(static_cast<int>(p.size.size())) {
    std::vector<int> points;
    for (int i = 0; i < n_; ++i) {
      points.push_back(p.first[i]);
      points.push_back(p.last[i] + 1);
    }
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    auto at = [&](int step) {
      return static_cast<int>(std::lower_bound(points.begin(), points.end(), step) - points.begin());
    };
    from_.resize(n_);
    to_.resize(n_);
    total_.assign(points.size(), 0);
    for (int i = 0; i < n_; ++i) {
      from_[i] = at(p.first[i]);
      to_[i] = at(p.last[i] + 1);
      for (int s = from_[i]; s < to_[i]; ++s) total_[s] += p.size[i];
    }
    members_.resize(points.size());
    slot_from_.resize(n_ + 1, 0);
    for (int i = 0; i < n_; ++i) {
      slot_from_[i + 1] = slot_from_[i] + (to_[i] - from_[i]);
      for (int s = from_[i]; s < to_[i]; ++s) {
        slots_.push_back(static_cast<int>(members_[s].size()));
        members_[s].push_back(i);
      }
    }
    unplaced_.resize(points.size());
    seen_.assign(points.size(), 0);
  }

  // The preferences for ties in one order each, deterministic.
  std::vector<std::vector<int>> preorders() const {
    std::vector<std::int64_t> busiest(n_, 0);
    for (int i = 0; i < n_; ++i)
      for (int s = from_[i]; s < to_[i]; ++s) busiest[i] = std::max(busiest[i], total_[s]);
    auto span = [&](int i) { return p_.last[i] - p_.first[i]; };
    std::vector<std::vector<int>> orders(3, std::vector<int>(n_));
    for (auto& o : orders) std::iota(o.begin(), o.end(), 0);
    std::sort(orders[0].begin(), orders[0].end(), [&](int a, int b) {
      return std::make_tuple(-p_.size[a], -span(a), a) < std::make_tuple(-p_.size[b], -span(b), b);
    });
    std::sort(orders[1].begin(), orders[1].end(), [&](int a, int b) {
      return std::make_tuple(-busiest[a], -span(a), -p_.size[a], a) <
             std::make_tuple(-busiest[b], -span(b), -p_.size[b], b);
    });
    std::sort(orders[2].begin(), orders[2].end(), [&](int a, int b) {
      return std::make_tuple(-span(a), -p_.size[a], a) < std::make_tuple(-span(b), -p_.size[b], b);
    });
    return orders;
  }

  enum class Outcome { Found, None, Aborted };

  // One search with ties broken by `preorder`, at most `nodes` nodes.
  Outcome run(const std::vector<int>& preorder, std::int64_t nodes) {
    nodes_left_ = nodes;
    offset_.assign(n_, -1);
    min_offset_.assign(n_, 0);
    floor_.assign(total_.size(), 0);
    for (std::size_t s = 0; s < members_.size(); ++s) unplaced_[s] = static_cast<int>(members_[s].size());
    std::vector<Candidate> all(n_);
    for (int r = 0; r < n_; ++r) all[r] = {0, r, preorder[r]};
    const Outcome o = search(all, 0, -1);
    for (int i = 0; i < n_; ++i)  // a placement found keeps its bytes taken: given back
      if (offset_[i] >= 0)
        for (int s = from_[i]; s < to_[i]; ++s) total_[s] += p_.size[i];
    return o;
  }

  const std::vector<std::int64_t>& offsets() const { return offset_; }
  std::int64_t nodes_left() const { return nodes_left_; }

 private:
  struct Candidate {
    std::int64_t offset;  // the lowest it may go now
    int rank;             // in the preorder
    int buffer;
  };

  Outcome search(const std::vector<Candidate>& parent, std::int64_t last_offset, int last_rank) {
    if (nodes_left_-- <= 0) return Outcome::Aborted;
    std::vector<Candidate> open;
    for (const Candidate& c : parent)
      if (offset_[c.buffer] < 0) open.push_back({min_offset_[c.buffer], c.rank, c.buffer});
    if (open.empty()) return Outcome::Found;
    std::sort(open.begin(), open.end(), [](const Candidate& a, const Candidate& b) {
      return std::make_pair(a.offset, a.rank) < std::make_pair(b.offset, b.rank);
    });
    std::int64_t lowest_top = std::numeric_limits<std::int64_t>::max();
    for (const Candidate& c : open) lowest_top = std::min(lowest_top, c.offset + p_.size[c.buffer]);
    std::vector<std::pair<int, std::int64_t>> raised;      // (buffer, its min offset before)
    std::vector<std::pair<int, std::int64_t>> old_floors;  // (section, its floor before)
    for (const Candidate& c : open) {
      // Canonical: in order of offsets, then of the preorder; no needless gap below the lowest top.
      if (c.offset < last_offset || (c.offset == last_offset && c.rank < last_rank)) continue;
      if (c.offset >= lowest_top) break;
      const int b = c.buffer;
      const std::int64_t top = c.offset + p_.size[b];
      if (top > p_.capacity) continue;
      offset_[b] = c.offset;
      raised.clear();
      old_floors.clear();
      for (int o : p_.conflicts[b])
        if (offset_[o] < 0 && min_offset_[o] < top) {
          raised.emplace_back(o, min_offset_[o]);
          min_offset_[o] = top;
        }
      for (int s = from_[b]; s < to_[b]; ++s) {
        old_floors.emplace_back(s, floor_[s]);
        floor_[s] = top;
        total_[s] -= p_.size[b];
        move_member(s, b, unplaced_[s] - 1);
        --unplaced_[s];
      }
      // A section's floor is no lower than the lowest its unplaced buffers may go.
      ++stamp_;
      for (const auto& change : raised)
        for (int s = from_[change.first]; s < to_[change.first]; ++s) {
          if (seen_[s] == stamp_) continue;
          seen_[s] = stamp_;
          // Only a rise matters: an unplaced buffer that may go as low as the floor ends the look.
          std::int64_t lowest = std::numeric_limits<std::int64_t>::max();
          for (int k = 0; k < unplaced_[s]; ++k) {
            const int u = members_[s][k];
            if (min_offset_[u] <= floor_[s]) {
              lowest = std::numeric_limits<std::int64_t>::max();
              break;
            }
            lowest = std::min(lowest, min_offset_[u]);
          }
          if (lowest != std::numeric_limits<std::int64_t>::max()) {
            old_floors.emplace_back(s, floor_[s]);
            floor_[s] = lowest;
          }
        }
      Outcome below = Outcome::None;
      if (fits_above(c.offset)) below = search(open, c.offset, c.rank);
      if (below == Outcome::Found) return below;
      for (auto it = raised.rbegin(); it != raised.rend(); ++it) min_offset_[it->first] = it->second;
      for (auto it = old_floors.rbegin(); it != old_floors.rend(); ++it) floor_[it->first] = it->second;
      for (int s = from_[b]; s < to_[b]; ++s) {
        total_[s] += p_.size[b];
        move_member(s, b, unplaced_[s]);
        ++unplaced_[s];
      }
      offset_[b] = -1;
      if (below == Outcome::Aborted) return below;
    }
    return Outcome::None;
  }

  // Swaps buffer b to position k of section s's members (the unplaced ones come first).
  void move_member(int s, int b, int k) {
    int& from = slots_[slot_from_[b] + (s - from_[b])];
    const int other = members_[s][k];
    members_[s][from] = other;
    slots_[slot_from_[other] + (s - from_[other])] = from;
    members_[s][k] = b;
    from = k;
  }

  // Section inference: what is left to place in a section stacks above its floor and above the
  // offset just placed (the offsets only grow).
  bool fits_above(std::int64_t offset) const {
    for (std::size_t s = 0; s < total_.size(); ++s)
      if (total_[s] > 0 && std::max(floor_[s], offset) + total_[s] > p_.capacity) return false;
    return true;
  }

  const PackingProblem& p_;
  const int n_;
  std::vector<int> from_, to_;  // per buffer: its sections [from, to)
  // Per section: the buffers alive in it, the unplaced_ first (their order is of no consequence:
  // the search looks for the lowest of them); per buffer and section, its place there (slots_,
  // buffer b's from slot_from_[b]).
  std::vector<std::vector<int>> members_;
  std::vector<int> unplaced_, slots_, slot_from_;
  std::vector<std::int64_t> seen_;  // per section: the stamp_ of the last visit
  std::int64_t stamp_ = 0;
  std::vector<std::int64_t> total_, floor_;  // per section: bytes left to place, top of the placed
  std::vector<std::int64_t> offset_, min_offset_;
  std::int64_t nodes_left_ = 0;
};

}  // namespace

Packing pack_below(const PackingProblem& p, std::int64_t max_nodes) {
  Packing result;
  const std::int64_t n = static_cast<std::int64_t>(p.size.size());
  if (n == 0) {
    result.offsets.emplace();
    return result;
  }
  Packer packer(p);
  const std::vector<std::vector<int>> orders = packer.preorders();
  for (std::int64_t limit = n; result.nodes < max_nodes; limit *= 2)
    for (const std::vector<int>& order : orders) {
      const std::int64_t nodes = std::min(limit, max_nodes - result.nodes);
      if (nodes <= 0) return result;
      const auto outcome = packer.run(order, nodes);
      result.nodes += nodes - std::max<std::int64_t>(packer.nodes_left(), 0);
      if (outcome == Packer::Outcome::Found) {
        result.offsets = packer.offsets();
        return result;
      }
      if (outcome == Packer::Outcome::None) {
        result.exhausted = true;
        return result;
      }
    }
  return result;
}

OffsetReassignment assign_offsets_after_scheduling(std::vector<PlanBuffer>& buffers, const std::vector<PlanStep>& steps,
                                                   std::int64_t arena_bytes, bool search) {
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
    if (buffers[b].resident || buffers[b].carried)
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
  // Per dynamic buffer: its last step on any stream. The buffers alive at one step conflict
  // pairwise, so their bytes at the busiest step bound any placement from below.
  auto last_any = [&](int b) { return std::max(first(b), *std::max_element(last[b].begin(), last[b].end())); };
  auto busiest_step_bytes = [&] {
    std::vector<std::int64_t> delta(ns + 1, 0);
    for (int b : dynamic) {
      delta[first(b)] += buffers[b].size;
      delta[last_any(b) + 1] -= buffers[b].size;
    }
    std::int64_t live = 0, most = 0;
    for (int i = 0; i < ns; ++i) most = std::max(most, live += delta[i]);
    return most;
  };
  if (top >= arena_bytes && search && region + busiest_step_bytes() < arena_bytes) {
    // None fits, and the bound does not rule it out: the search, for any placement that does.
    const int m = static_cast<int>(dynamic.size());
    PackingProblem p;
    p.capacity = arena_bytes - 1 - region;
    p.conflicts.resize(m);
    for (int i = 0; i < m; ++i) {
      const int b = dynamic[i];
      p.size.push_back(buffers[b].size);
      p.first.push_back(first(b));
      p.last.push_back(last_any(b));
      for (int j = 0; j < i; ++j)
        if (conflict(dynamic[j], b)) {
          p.conflicts[i].push_back(j);
          p.conflicts[j].push_back(i);
        }
    }
    const Packing packed = pack_below(p, std::min(std::max<std::int64_t>(kSearchWork / m, 2 * m), kMaxSearchNodes));
    r.search_work = packed.nodes * m;
    if (packed.offsets) {
      r.search_nodes = packed.nodes;
      best_offset.resize(nb, -1);
      top = region;
      for (int i = 0; i < m; ++i) {
        best_offset[dynamic[i]] = region + (*packed.offsets)[i];
        top = std::max(top, best_offset[dynamic[i]] + p.size[i]);
      }
    }
  }
  if (top >= arena_bytes) return r;
  for (int b : dynamic) buffers[b].offset = best_offset[b];
  r.applied = true;
  r.after_bytes = top;
  return r;
}

}  // namespace ucplan
