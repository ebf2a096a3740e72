#include "simulator.h"

#include <algorithm>
#include <array>
#include <utility>

#include "planner/model/errors.h"

namespace ucplan {

void merge_into(ReadySet& into, const ReadySet& from) {
  for (int s = 0; s < kStreams; ++s) into[s] = std::max(into[s], from[s]);
}

void merge_into(ReadySet& into, int step, Stream s) {
  if (step >= 0) into[static_cast<int>(s)] = std::max(into[static_cast<int>(s)], step);
}

int Timeline::issue(Stream s, std::int64_t duration, const ReadySet& waits) {
  UCPLAN_CHECK(duration >= 0, "durations are non-negative");
  const int si = static_cast<int>(s);
  Step st;
  st.stream = s;
  st.start = end_[si];
  for (int o = 0; o < kStreams; ++o) {
    if (o == si || waits[o] < 0) continue;
    UCPLAN_CHECK(waits[o] < size(), "waits name earlier steps");
    UCPLAN_CHECK(steps_[waits[o]].stream == static_cast<Stream>(o), "a ready set entry belongs to its stream");
    st.wait_ids[static_cast<std::size_t>(st.n_waits++)] = waits[o];
    st.start = std::max(st.start, steps_[waits[o]].end);
  }
  static_assert(kStreams == 3, "at most two waits, put in order by one swap");
  if (st.n_waits == 2 && st.wait_ids[0] > st.wait_ids[1]) std::swap(st.wait_ids[0], st.wait_ids[1]);
  st.end = st.start + duration;
  steps_.push_back(std::move(st));
  const int id = size() - 1;
  end_[si] = steps_[id].end;
  last_[si] = id;
  return id;
}

std::int64_t Timeline::ready_time(const ReadySet& r) const {
  std::int64_t t = 0;
  for (int s = 0; s < kStreams; ++s)
    if (r[s] >= 0) t = std::max(t, steps_[r[s]].end);
  return t;
}

std::int64_t Timeline::makespan() const { return std::max({end_[0], end_[1], end_[2]}); }

Arena::Arena(std::int64_t begin, std::int64_t end, Fit fit) : begin_(begin), end_(end), fit_(fit) {
  UCPLAN_CHECK(begin <= end, "arena bounds");
  if (end > begin && fit != Fit::Pool) blocks_.push_back(Block{begin, end - begin, -1, kNoneReady, 0});
  free_bytes_ = end - begin;
  high_water_ = begin;
  next_ = begin;
  never_used_ = end - begin;
}

std::size_t Arena::index_of(std::int64_t offset) const {
  auto it = std::upper_bound(blocks_.begin(), blocks_.end(), offset,
                             [](std::int64_t o, const Block& b) { return o < b.offset; });
  UCPLAN_CHECK(it != blocks_.begin(), "offset inside the arena");
  return static_cast<std::size_t>(it - blocks_.begin()) - 1;
}

void Arena::allocate_at(std::int64_t offset, std::int64_t size, int owner, ReadySet* waits) {
  UCPLAN_CHECK(size > 0 && owner >= 0, "allocations have a size and an owner");
  // Take the run of adjacent free blocks covering [offset, offset + size): the new buffer waits
  // only for the histories of the blocks it overlaps.
  const std::int64_t need_end = offset + size;
  const std::size_t first = index_of(offset);
  std::size_t last = first;
  while (true) {
    UCPLAN_CHECK(last < blocks_.size() && blocks_[last].owner < 0, "allocate_at inside a run of free blocks");
    const Block& b = blocks_[last];
    if (waits && b.offset < need_end && b.offset + b.size > offset) merge_into(*waits, b.ready);
    if (b.offset + b.size >= need_end) break;
    ++last;
    UCPLAN_CHECK(last < blocks_.size() && blocks_[last].offset == blocks_[last - 1].offset + blocks_[last - 1].size,
                 "free blocks are adjacent");
  }
  const Block head = blocks_[first], tail = blocks_[last];
  // Blocks [first, last] become at most three: the head's free rest, the new buffer, the tail's
  // free rest. Written in place, the list grown or shrunk by the difference.
  std::array<Block, 3> replacement;
  std::size_t k = 0;
  if (offset > head.offset) replacement[k++] = Block{head.offset, offset - head.offset, -1, head.ready, head.ready_end};
  replacement[k++] = Block{offset, size, owner, kNoneReady, 0};
  const std::int64_t tail_end = tail.offset + tail.size;
  if (need_end < tail_end) replacement[k++] = Block{need_end, tail_end - need_end, -1, tail.ready, tail.ready_end};
  const std::size_t old = last - first + 1;
  const auto at = blocks_.begin() + static_cast<std::ptrdiff_t>(first);
  if (k > old)
    blocks_.insert(at, k - old, Block{});
  else if (k < old)
    blocks_.erase(at, at + static_cast<std::ptrdiff_t>(old - k));
  std::copy(replacement.begin(), replacement.begin() + static_cast<std::ptrdiff_t>(k),
            blocks_.begin() + static_cast<std::ptrdiff_t>(first));
  // No new pair of adjacent free blocks: a free rest borders what its block bordered, with its
  // history, so merge_after_ holds.
  free_bytes_ -= size;
  high_water_ = std::max(high_water_, need_end);
  first_free_ = std::min(first_free_, first);  // the head's free rest may now be at `first`
}

std::optional<std::int64_t> Arena::allocate(std::int64_t size, int owner, ReadySet* waits, bool from_top) {
  if (fit_ == Fit::Pool) {  // a new address; the bytes in use bound it
    UCPLAN_CHECK(size > 0 && owner >= 0, "allocations have a size and an owner");
    if (size > free_bytes_) return std::nullopt;
    std::int64_t rest = size - std::min(size, never_used_);
    never_used_ -= size - rest;
    while (rest > 0) {
      Released& r = released_.front();
      if (waits) merge_into(*waits, r.ready);
      const std::int64_t take = std::min(rest, r.size);
      r.size -= take;
      rest -= take;
      if (r.size == 0) released_.pop_front();
    }
    const std::int64_t at = next_;
    next_ += (size + kAlignment - 1) / kAlignment * kAlignment;
    blocks_.push_back(Block{at, size, owner, kNoneReady, 0});
    free_bytes_ -= size;
    high_water_ = std::max(high_water_, end_ - free_bytes_);
    return at;
  }
  if (size > free_bytes_) return std::nullopt;  // no run of free blocks holds more
  // The blocks before the first free one are in use: skipped, here and by every later call.
  while (first_free_ < blocks_.size() && blocks_[first_free_].owner >= 0) ++first_free_;
  if (from_top) {
    std::int64_t run_end = -1;
    for (std::size_t i = blocks_.size(); i-- > first_free_;) {
      const Block& b = blocks_[i];
      if (b.owner >= 0) {
        run_end = -1;
        continue;
      }
      if (run_end < 0) run_end = b.offset + b.size;
      if (run_end - size < b.offset) continue;
      const std::int64_t at = (run_end - size) / kAlignment * kAlignment;
      if (at >= b.offset) {
        allocate_at(at, size, owner, waits);
        return at;
      }
    }
    return std::nullopt;
  }
  // Over runs of adjacent free blocks: first fit takes the first run that holds the request,
  // best fit the smallest (ties: the lowest address).
  std::int64_t best_start = -1, best_size = 0, run_start = -1, run_size = 0;
  auto end_run = [&] {
    if (run_start >= 0 && run_size >= size && (best_start < 0 || run_size < best_size)) {
      best_start = run_start;
      best_size = run_size;
    }
    run_start = -1;
    run_size = 0;
  };
  for (std::size_t i = first_free_; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (b.owner >= 0) {
      end_run();
      continue;
    }
    if (run_start < 0) run_start = b.offset;
    run_size += b.size;
    if (fit_ == Fit::First && run_size >= size) {
      best_start = run_start;
      break;
    }
  }
  if (fit_ == Fit::Best) end_run();
  if (best_start < 0) return std::nullopt;
  allocate_at(best_start, size, owner, waits);
  return best_start;
}

std::int64_t Arena::largest_free() const {
  if (fit_ == Fit::Pool) return free_bytes_;
  std::int64_t best = 0, run = 0;
  for (std::size_t i = first_free_; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    run = b.owner < 0 ? run + b.size : 0;
    best = std::max(best, run);
  }
  return best;
}

void Arena::release(std::int64_t offset, const ReadySet& ready, std::int64_t ready_end) {
  std::size_t i = index_of(offset);
  UCPLAN_CHECK(blocks_[i].offset == offset && blocks_[i].owner >= 0, "release of an allocated block");
  if (fit_ == Fit::Pool) {  // its bytes go back to the pool, with its history; its address is never used again
    free_bytes_ += blocks_[i].size;
    if (!released_.empty() && released_.back().ready == ready)
      released_.back().size += blocks_[i].size;
    else
      released_.push_back({blocks_[i].size, ready});
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
    return;
  }
  blocks_[i].owner = -1;
  blocks_[i].ready = ready;
  blocks_[i].ready_end = ready_end;
  free_bytes_ += blocks_[i].size;
  // Coalesce only with free neighbours of the same history, so no buffer ever waits for steps
  // that touched space it does not use.
  if (i + 1 < blocks_.size() && blocks_[i + 1].owner < 0 && blocks_[i + 1].ready == ready) {
    blocks_[i].size += blocks_[i + 1].size;
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  }
  if (i > 0 && blocks_[i - 1].owner < 0 && blocks_[i - 1].ready == ready) {
    blocks_[i - 1].size += blocks_[i].size;
    blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(i));
    --i;
  }
  first_free_ = std::min(first_free_, i);
  note_free_pairs(i);
}

void Arena::note_free_pairs(std::size_t i) {
  const Block& b = blocks_[i];
  if (b.owner >= 0) return;
  if (i > 0 && blocks_[i - 1].owner < 0)
    merge_after_ = std::min(merge_after_, std::max(b.ready_end, blocks_[i - 1].ready_end));
  if (i + 1 < blocks_.size() && blocks_[i + 1].owner < 0)
    merge_after_ = std::min(merge_after_, std::max(b.ready_end, blocks_[i + 1].ready_end));
}

void Arena::coalesce(std::int64_t now) {
  // A pool's blocks are all in use; before merge_after_ no two free neighbours are both settled.
  if (fit_ == Fit::Pool || now < merge_after_) return;
  // In place: `kept` blocks so far, the last of which may absorb the next.
  std::size_t kept = 0;
  auto settled = [now](const Block& b) { return b.ready_end <= now; };
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Block& b = blocks_[i];
    if (kept > 0 && b.owner < 0 && blocks_[kept - 1].owner < 0 && settled(b) && settled(blocks_[kept - 1])) {
      Block& into = blocks_[kept - 1];
      into.size += b.size;
      merge_into(into.ready, b.ready);
      into.ready_end = std::max(into.ready_end, b.ready_end);
    } else {
      if (kept != i) blocks_[kept] = b;
      ++kept;
    }
  }
  blocks_.resize(kept);
  // first_free_ holds: no merge is before the first free block, and the blocks before it stay
  // where they were.
  merge_after_ = std::numeric_limits<std::int64_t>::max();
  for (std::size_t i = 1; i < blocks_.size(); ++i) note_free_pairs(i);
}

}  // namespace ucplan
