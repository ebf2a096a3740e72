#include "segments.h"

#include <algorithm>
#include <limits>

#include "planner/model/errors.h"
#include "simulator.h"
#include "strategies.h"

namespace ucplan {

ChainCost chain_cost(const std::vector<ChainLink>& chain, const std::vector<char>& keep, std::int64_t memory_bytes) {
  ChainCost c;
  const int n = static_cast<int>(chain.size());
  if (n == 0 || static_cast<int>(keep.size()) != n || !keep[0] || !keep[n - 1]) return c;
  for (int i = 0; i < n; ++i)
    if (!keep[i] && !chain[i].droppable) return c;
  c.valid = true;
  c.fits = true;
  std::int64_t held = 0;  // kept links before the segment's checkpoint that the backward pass still holds
  for (int a = 0; a < n - 1;) {
    int b = a + 1;
    while (!keep[b]) ++b;
    int last_needed = -1;  // the last dropped link of (a, b) that is needed: (a, last_needed] is recomputed
    std::int64_t largest = 0;
    for (int j = a + 1; j <= b; ++j) {
      largest = std::max(largest, chain[j].bytes);
      if (j < b && chain[j].needed) last_needed = j;
    }
    std::int64_t stored = 0, streamed = 0, store_ns = 0, stream_ns = 0;
    for (int j = a + 1; j <= last_needed; ++j) {
      stored += chain[j].bytes;
      store_ns += chain[j].redo_ns;
      streamed = std::max(streamed, chain[j].bytes + (j - 1 > a ? chain[j - 1].bytes : 0));
      if (chain[j].needed)
        for (int i = a + 1; i <= j; ++i) stream_ns += chain[i].redo_ns;
    }
    if (chain[a].needed || last_needed > a) held += chain[a].bytes;
    const std::int64_t base = held + (chain[b].needed ? chain[b].bytes : 0) + 2 * largest;
    if (base + stored <= memory_bytes) {
      c.redo_ns += store_ns;
      c.peak_bytes = std::max(c.peak_bytes, base + stored);
    } else {
      c.redo_ns += stream_ns;
      c.peak_bytes = std::max(c.peak_bytes, base + streamed);
      c.fits = c.fits && base + streamed <= memory_bytes;
    }
    a = b;
  }
  return c;
}

// f[b][m]: the least recomputation of a keep vector for links 0..b with b kept and m units held
// before b. A transition from the previous kept link a adds segment (a, b], whose peak (as
// chain_cost counts it) must fit; a is held from then on if it is needed or (a, b] recomputes.
std::vector<char> choose_checkpoints(const std::vector<ChainLink>& chain, std::int64_t memory_bytes, int max_dropped,
                                     int buckets) {
  const int n = static_cast<int>(chain.size());
  if (n == 0 || memory_bytes <= 0 || buckets < 1) return {};
  const std::int64_t unit = std::max<std::int64_t>(1, (memory_bytes + buckets - 1) / buckets);
  const int cap = static_cast<int>(memory_bytes / unit);
  const int width = cap + 1;
  auto units = [unit](std::int64_t bytes) { return (bytes + unit - 1) / unit; };
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> f(static_cast<std::size_t>(n) * width, kNone);
  struct From {
    int link = -1, held = -1;
  };
  std::vector<From> from(f.size());
  f[0] = 0;
  for (int b = 1; b < n; ++b) {
    std::int64_t largest = chain[b].bytes, stored = 0, streamed = 0, store_ns = 0, stream_ns = 0;
    int last_needed = -1, needed_dropped = 0;
    // a = b - 1, b - 2, ...: links a + 1 .. b - 1 dropped.
    for (int a = b - 1; a >= 0 && b - 1 - a <= max_dropped; --a) {
      if (a < b - 1) {  // link a + 1 joins the dropped run at its front
        const ChainLink& d = chain[a + 1];
        if (!d.droppable) break;
        largest = std::max(largest, d.bytes);
        if (last_needed < 0 && d.needed) last_needed = a + 1;
        if (last_needed >= 0) {
          stored += d.bytes;
          store_ns += d.redo_ns;
          streamed = std::max(streamed, d.bytes + (a + 2 <= last_needed ? chain[a + 2].bytes : 0));
          needed_dropped += d.needed;
          stream_ns += d.redo_ns * needed_dropped;  // each needed link's recomputation starts at a + 1
        }
      }
      const bool hold_a = chain[a].needed || last_needed >= 0;
      const std::int64_t add = hold_a ? units(chain[a].bytes) : 0;
      const std::int64_t base = (chain[b].needed ? chain[b].bytes : 0) + 2 * largest;
      // (m + add) * unit + base + stored (or streamed) <= memory_bytes
      auto top = [&](std::int64_t extra) {
        const std::int64_t room = memory_bytes - base - extra;
        return room < 0 ? std::int64_t{-1} : std::min<std::int64_t>(cap, room / unit - add);
      };
      const std::int64_t top_store = top(stored), top_stream = top(streamed);
      const std::int64_t* fa = &f[static_cast<std::size_t>(a) * width];
      std::int64_t* fb = &f[static_cast<std::size_t>(b) * width];
      From* from_b = &from[static_cast<std::size_t>(b) * width];
      for (std::int64_t m = 0; m <= top_stream; ++m) {
        if (fa[m] == kNone) continue;
        const std::int64_t v = fa[m] + (m <= top_store ? store_ns : stream_ns);
        const std::size_t to = static_cast<std::size_t>(m + add);
        if (v < fb[to]) {
          fb[to] = v;
          from_b[to] = {a, static_cast<int>(m)};
        }
      }
    }
  }
  const std::int64_t* last = &f[static_cast<std::size_t>(n - 1) * width];
  int held = -1;
  for (int m = 0; m < width; ++m)
    if (last[m] != kNone && (held < 0 || last[m] < last[held])) held = m;
  if (held < 0) return {};
  std::vector<char> keep(n, 0);
  for (int b = n - 1; b > 0;) {
    keep[b] = 1;
    const From& p = from[static_cast<std::size_t>(b) * width + held];
    UCPLAN_CHECK(p.link >= 0 && p.link < b, "a checkpoint's predecessor comes before it");
    b = p.link;
    held = p.held;
  }
  keep[0] = 1;
  return keep;
}

std::vector<ChainLink> route_chain(const Graph& g, const TaskGraph& tg, const CostTable& costs) {
  const std::vector<char> need = backward_needed(tg);
  std::vector<ChainLink> chain;
  chain.reserve(tg.route.size());
  for (int l : tg.route) {
    const int y = tg.y_of[l];
    ChainLink link;
    if (y >= 0) {
      const Tensor& x = tg.tensors[y];
      link.bytes = align_up(x.bytes(costs.sub_batch));
      link.needed = need[y];
      link.droppable = recomputable(g, tg, y);
    }
    if (costs.forward_task[l] >= 0) link.redo_ns = costs.tasks[costs.forward_task[l]].time_ns;
    chain.push_back(link);
  }
  return chain;
}

std::vector<Residency> checkpoint_table(const Graph& g, const TaskGraph& tg, const std::vector<ChainLink>& chain,
                                        std::int64_t memory_bytes) {
  UCPLAN_CHECK(chain.size() == tg.route.size(), "one chain link per route position");
  const std::vector<char> keep = choose_checkpoints(chain, memory_bytes);
  if (keep.empty()) return {};
  std::vector<Residency> table(tg.tensors.size(), Residency::Keep);
  for (std::size_t i = 0; i < keep.size(); ++i)
    if (!keep[i]) table[tg.y_of[tg.route[i]]] = Residency::Recompute;
  bound_segments(g, tg, table);
  return table;
}

}  // namespace ucplan
