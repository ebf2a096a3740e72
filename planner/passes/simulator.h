// The stream/memory simulator the scheduler drives (moDNN §IV-B: "Algorithm 1 simulates the
// actual execution process"). It knows streams, steps, times and an arena; nothing about tasks
// or strategies, which plug in from schedule.h.
//  - Timeline: a step starts when the previous step on its stream has ended and every step it
//    waits for has ended; durations are integer nanoseconds.
//  - Arena: static offsets, first-fit over an address-ordered list of blocks (moDNN's linked
//    list). A freed block remembers, per stream, the last step that touched what it held: a
//    later buffer placed there must wait for those steps (on other streams) before touching it.
#pragma once

#include <array>
#include <deque>
#include <limits>
#include <cstdint>
#include <optional>
#include <vector>

#include "planner/model/plan.h"

namespace ucplan {

// Stream, kStreams and stream_name() are the plan's (planner/model/plan.h).

// Per stream, the latest step (id) that must have ended; -1 for none. Steps on one stream end
// in issue order, so the latest one stands for all earlier ones.
using ReadySet = std::array<int, kStreams>;
constexpr ReadySet kNoneReady = {-1, -1, -1};
void merge_into(ReadySet& into, const ReadySet& from);
void merge_into(ReadySet& into, int step, Stream s);

class Timeline {
 public:
  struct Step {
    Stream stream;
    std::int64_t start = 0, end = 0;
    // Steps on other streams, in increasing order: at most one per other stream, held inline
    // (a simulation issues thousands of steps; a vector each would cost an allocation each).
    std::array<int, kStreams - 1> wait_ids{-1, -1};
    int n_waits = 0;
    std::vector<int> waits() const { return {wait_ids.begin(), wait_ids.begin() + n_waits}; }
  };
  // `waits` may name steps on any stream; those on `s` itself are implied by stream order and
  // dropped. Returns the new step's id.
  int issue(Stream s, std::int64_t duration, const ReadySet& waits);
  const Step& step(int id) const { return steps_[id]; }
  int size() const { return static_cast<int>(steps_.size()); }
  std::int64_t stream_end(Stream s) const { return end_[static_cast<int>(s)]; }
  int last_on(Stream s) const { return last_[static_cast<int>(s)]; }
  std::int64_t ready_time(const ReadySet& r) const;  // when all of r have ended
  std::int64_t makespan() const;

 private:
  std::vector<Step> steps_;
  std::array<std::int64_t, kStreams> end_{0, 0, 0};
  std::array<int, kStreams> last_{-1, -1, -1};
};

class Arena {
 public:
  struct Block {
    std::int64_t offset = 0;
    std::int64_t size = 0;
    int owner = -1;               // -1: free; else the caller's id for what occupies it
    ReadySet ready = kNoneReady;  // free blocks: steps that must end before reuse
    std::int64_t ready_end = 0;   // free blocks: when the last of those steps ends
  };
  // First fit (moDNN's linked list) or best fit (the smallest run of free blocks that holds the
  // request, so large holes stay whole for large tensors), or a pool: bytes are counted, not
  // placed (every request fits while the bytes in use do, at an address never used before), and
  // the caller places the buffers once the schedule is known (offsets.h), as XLA's heap
  // simulator places a schedule's buffers; there are no free blocks. A pool's request takes
  // bytes never used first, then released bytes in the order they were released, and waits for
  // the histories of the released bytes it takes, as a block of first fit does: the buffers it
  // takes them from may then share bytes with it once placed.
  enum class Fit { First, Best, Pool };
  Arena(std::int64_t begin, std::int64_t end, Fit fit = Fit::First);
  // On success returns the offset; `waits` receives the ready sets of the free space taken.
  // nullopt when no run of free blocks is large enough (fragmentation or full).
  // `from_top`: the highest run that holds the request, filled from its end (long-lived tensors
  // there keep the short-lived ones below from fragmenting the space between them).
  std::optional<std::int64_t> allocate(std::int64_t size, int owner, ReadySet* waits, bool from_top = false);
  // Allocates exactly at `offset` (which must lie in one free block).
  void allocate_at(std::int64_t offset, std::int64_t size, int owner, ReadySet* waits);
  void release(std::int64_t offset, const ReadySet& ready, std::int64_t ready_end);
  // Merges runs of adjacent free blocks whose histories are settled (ready_end <= now: their
  // steps have all ended by the time anything new can use the space), so the block list stays
  // short. The merged block waits for the latest of them, which costs nothing then.
  void coalesce(std::int64_t now);
  // Address order. A sorted vector, not a map: the scheduler walks it on every allocation and
  // eviction, and contiguous storage makes those walks several times faster.
  const std::vector<Block>& blocks() const { return blocks_; }
  std::int64_t begin() const { return begin_; }
  std::int64_t end() const { return end_; }
  std::int64_t high_water() const { return high_water_; }
  std::int64_t free_bytes() const { return free_bytes_; }
  std::int64_t largest_free() const;
  std::int64_t used_bytes() const { return (end_ - begin_) - free_bytes_; }

 private:
  std::int64_t begin_, end_;
  Fit fit_ = Fit::First;
  std::vector<Block> blocks_;
  std::size_t index_of(std::int64_t offset) const;  // the block containing offset
  // No block before this index is free (a lower bound, raised by each allocate's scan): on the
  // 10,455-layer ResNet the blocks in use below the first free one were 40 % of what first fit
  // looked at.
  std::size_t first_free_ = 0;
  std::int64_t high_water_ = 0;
  std::int64_t free_bytes_ = 0;
  std::int64_t next_ = 0;  // a pool's next address
  // A pool's bytes: never used, and released (with the history they must wait for), oldest first.
  struct Released {
    std::int64_t size = 0;
    ReadySet ready = kNoneReady;
  };
  std::int64_t never_used_ = 0;
  std::deque<Released> released_;
  // No two adjacent free blocks are both settled before this time (a lower bound, made exact by
  // each coalesce that merges): the scheduler coalesces before every task, and merges are rare
  // (about one call in a thousand on ResNet-152 b256 at 12 GiB), so most calls end here.
  std::int64_t merge_after_ = std::numeric_limits<std::int64_t>::max();
  void note_free_pairs(std::size_t i);  // lowers merge_after_ for block i's free neighbours
};

// Buffers are aligned so that every kernel gets aligned pointers (cuDNN wants 16 bytes at
// least; 256 matches cudaMalloc's alignment).
constexpr std::int64_t kAlignment = 256;
inline std::int64_t align_up(std::int64_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace ucplan
