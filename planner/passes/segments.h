// Checkpoints chosen by dynamic programming over the route instead of at a fixed stride: the
// recompute-only residency table of least recomputation time whose memory fits a limit, under
// Chen et al.'s segment model ("Training Deep Nets with Sublinear Memory Cost", 2016, §4.1: the
// backward pass of a segment recomputes it whole from the checkpoint before it). Chen et al. and
// Rotor (Beaumont et al., "Optimal checkpointing for heterogeneous chains", 2019, §4) solve this
// by dynamic programming over a chain; here the chain is the route, one link per layer, and a
// link's output is either kept (a checkpoint) or recomputed. The model leaves out workspace,
// fragmentation and the scheduler's on-demand eviction, so the ucplan search (search.h) uses its
// tables as seeds at several limits and lets the simulator judge them.
//
// Rotor's recursion proper (checkpoints inside segments too, each freed when its part of the
// backward pass is done: a staged plan rather than a table) was tried as a further seed, with
// the route's cuts (every value crossing a position, skip connections included) as its links.
// It lost everywhere: resnet20 b64, model:h100, its best staged plan ran 2.31 / 2.05 / 1.87 ms
// per round at 35 / 50 / 70 % of the peak where the search found 2.01 / 1.90 / 1.81 ms, and at
// 25 % it found no plan (24.8 MiB needed, 22.9 MiB there). Its schedules are persistent: a
// segment's input stays until the segment's backward pass is done, where the best plans drop a
// residual block's input (4 MiB) and recompute it from the stem (three cheap layers).
#pragma once

#include <cstdint>
#include <vector>

#include "costs.h"
#include "schedule.h"

namespace ucplan {

// One layer's output on the chain.
struct ChainLink {
  std::int64_t bytes = 0;    // its size
  std::int64_t redo_ns = 0;  // recomputing it: its forward task's time
  bool droppable = false;    // may be recomputed (not the input, the loss, a host input)
  bool needed = false;       // some backward task reads it (else it lives only in the forward pass)
};

// Memory and recomputation of a keep vector under the segment model, with `memory_bytes` to
// use. Between consecutive kept links a < b the links are dropped; those up to the last needed
// one are recomputed in the backward pass of (a, b]. That pass holds the kept links up to a (a
// itself only if needed or checkpointing a recomputation), b if needed, and two gradients of the
// segment's largest link, plus either every recomputed link (stored: each recomputed once) or
// only the one being recomputed and its input (streamed: each needed link recomputed from a + 1
// again, quadratic, as the scheduler's eviction of droppable values does under pressure, and as
// Rotor's deeper levels do). A segment is stored if that fits, else streamed.
struct ChainCost {
  std::int64_t peak_bytes = 0;  // the largest segment's peak, as stored or streamed
  std::int64_t redo_ns = 0;
  bool valid = false;  // keep[0], the last link and every link that is not droppable are kept
  bool fits = false;   // valid, and every segment fits memory_bytes (streamed if not stored)
};
ChainCost chain_cost(const std::vector<ChainLink>& chain, const std::vector<char>& keep, std::int64_t memory_bytes);

// The keep vector of least chain_cost redo_ns that fits `memory_bytes` (ties: least held), with
// at most `max_dropped` consecutive dropped links; empty if none fits. Held links are counted in
// units of memory_bytes / buckets (rounded up): exact when their sizes are whole units, and the
// answer always fits. O(links x max_dropped x buckets).
std::vector<char> choose_checkpoints(const std::vector<ChainLink>& chain, std::int64_t memory_bytes,
                                     int max_dropped = 16, int buckets = 256);

// The route as a chain (one link per route position, sizes and times at costs.sub_batch), and
// the residency table of choose_checkpoints for `memory_bytes` left to activations (empty if
// none fits): dropped links recomputed, every other tensor kept, segments bounded as
// bound_segments() bounds them.
std::vector<ChainLink> route_chain(const Graph& g, const TaskGraph& tg, const CostTable& costs);
std::vector<Residency> checkpoint_table(const Graph& g, const TaskGraph& tg, const std::vector<ChainLink>& chain,
                                        std::int64_t memory_bytes);

}  // namespace ucplan
