#include "simulator.h"

#include <algorithm>

#include "planner/model/errors.h"

namespace ucplan {

const char* stream_name(Stream s) {
  switch (s) {
    case Stream::Compute: return "compute";
    case Stream::H2D: return "h2d";
    case Stream::D2H: return "d2h";
  }
  return "?";
}

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
    st.waits.push_back(waits[o]);
    st.start = std::max(st.start, steps_[waits[o]].end);
  }
  std::sort(st.waits.begin(), st.waits.end());
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

Arena::Arena(std::int64_t begin, std::int64_t end) : begin_(begin), end_(end) {
  UCPLAN_CHECK(begin <= end, "arena bounds");
  if (end > begin) blocks_[begin] = Block{end - begin, -1, kNoneReady};
  free_bytes_ = end - begin;
  high_water_ = begin;
}

void Arena::allocate_at(std::int64_t offset, std::int64_t size, int owner, ReadySet* waits) {
  UCPLAN_CHECK(size > 0 && owner >= 0, "allocations have a size and an owner");
  auto it = blocks_.upper_bound(offset);
  UCPLAN_CHECK(it != blocks_.begin(), "offset inside the arena");
  --it;
  // Take the run of adjacent free blocks covering [offset, offset + size): the new buffer waits
  // only for the histories of the blocks it overlaps.
  std::int64_t need_end = offset + size;
  std::vector<std::pair<std::int64_t, Block>> taken;
  while (true) {
    UCPLAN_CHECK(it != blocks_.end() && it->second.owner < 0, "allocate_at inside a run of free blocks");
    taken.emplace_back(it->first, it->second);
    std::int64_t bend = it->first + it->second.size;
    it = blocks_.erase(it);
    if (bend >= need_end) break;
    UCPLAN_CHECK(it != blocks_.end() && it->first == bend, "free blocks are adjacent");
  }
  const auto& first = taken.front();
  const auto& last = taken.back();
  UCPLAN_CHECK(offset >= first.first, "offset inside the first block");
  for (const auto& [off, b] : taken) {
    bool overlaps = off < need_end && off + b.size > offset;
    if (overlaps && waits) merge_into(*waits, b.ready);
  }
  if (offset > first.first) blocks_[first.first] = Block{offset - first.first, -1, first.second.ready};
  blocks_[offset] = Block{size, owner, kNoneReady};
  std::int64_t last_end = last.first + last.second.size;
  if (need_end < last_end) blocks_[need_end] = Block{last_end - need_end, -1, last.second.ready};
  free_bytes_ -= size;
  high_water_ = std::max(high_water_, need_end);
}

std::optional<std::int64_t> Arena::allocate(std::int64_t size, int owner, ReadySet* waits) {
  std::int64_t run_start = -1, run_size = 0;
  for (const auto& [off, b] : blocks_) {
    if (b.owner >= 0) {
      run_start = -1;
      run_size = 0;
      continue;
    }
    if (run_start < 0) run_start = off;
    run_size += b.size;
    if (run_size >= size) {
      const std::int64_t at = run_start;
      allocate_at(at, size, owner, waits);
      return at;
    }
  }
  return std::nullopt;
}

std::int64_t Arena::largest_free() const {
  std::int64_t best = 0, run = 0;
  for (const auto& [off, b] : blocks_) {
    run = b.owner < 0 ? run + b.size : 0;
    best = std::max(best, run);
  }
  return best;
}

void Arena::release(std::int64_t offset, const ReadySet& ready) {
  auto it = blocks_.find(offset);
  UCPLAN_CHECK(it != blocks_.end() && it->second.owner >= 0, "release of an allocated block");
  it->second.owner = -1;
  it->second.ready = ready;
  free_bytes_ += it->second.size;
  // Coalesce only with free neighbours of the same history, so no buffer ever waits for steps
  // that touched space it does not use.
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.owner < 0 && next->second.ready == it->second.ready) {
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.owner < 0 && prev->second.ready == it->second.ready) {
      prev->second.size += it->second.size;
      blocks_.erase(it);
    }
  }
}

}  // namespace ucplan
