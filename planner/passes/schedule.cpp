#include "schedule.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "planner/model/errors.h"
#include "simulator.h"

namespace ucplan {

const char* residency_name(Residency r) {
  switch (r) {
    case Residency::Keep:
      return "keep";
    case Residency::Offload:
      return "offload";
    case Residency::Recompute:
      return "recompute";
  }
  return "?";
}

std::size_t choose_config_by_gain(const ConfigContext& ctx) {
  const auto& front = ctx.cost->front;
  UCPLAN_CHECK(!front.empty(), "a conv task has at least one configuration");
  constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max() / 4;
  const std::int64_t base = ctx.cost->baseline_ns;
  std::size_t best = 0;
  std::int64_t best_gain = -kInf;
  for (std::size_t i = 0; i < front.size(); ++i) {
    std::int64_t delay = ctx.evict_delay[i];
    if (delay >= kInf) continue;  // cannot be made to fit now
    std::int64_t gain = base - front[i].time_ns - delay - ctx.prefetch_penalty[i];
    if (gain > best_gain) {  // strict: ties keep the smaller workspace
      best_gain = gain;
      best = i;
    }
  }
  return best;
}

std::size_t choose_fastest_fitting(const ConfigContext& ctx) {
  const auto& front = ctx.cost->front;
  std::size_t best = 0;
  for (std::size_t i = 0; i < front.size(); ++i)
    if (front[i].workspace_bytes <= ctx.largest_free) best = i;
  return best;
}

namespace {

constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max() / 4;
constexpr int kWorkspaceOwner = 1 << 30;  // arena owner ids >= this are workspaces, never evicted
constexpr int kFreeBlock = -1;            // BlockView::owner of free space
constexpr int kWallBlock = -2;            // BlockView::owner of what a window cannot evict (locked, resident)
constexpr int kNeverUsed = 1 << 30;       // a next use beyond any round position

// A candidate run of arena blocks to empty (moDNN's "offloading scheme").
struct Window {
  bool found = false;
  std::int64_t offset = 0;
  std::int64_t delay = kInf;
  std::int64_t fresh_bytes = 0, dirty_bytes = 0;
  int soonest_use = 0;  // the earliest next use of what the window holds
  std::vector<int> owners;
};

// What emptying one arena block would cost, as the window search sees it.
struct BlockView {
  std::int64_t off = 0, size = 0;
  int owner = kFreeBlock;      // kFreeBlock, kWallBlock or a tensor
  std::int64_t ready_end = 0;  // when its space is free if emptied now (clean part)
  std::int64_t dirty_ns = 0;   // offload copy time needed first
  std::int64_t dirty_bytes = 0, fresh_bytes = 0;
  int next_use = kNeverUsed;  // round position of the owner's next use
};

// The engine: one object per simulation, discarded afterwards. All state lives here.
class Scheduler {
 public:
  Scheduler(const ScheduleInput& in, Strategy& strategy)
      : in_(in), g_(*in.graph), tg_(*in.tasks), costs_(*in.costs), strategy_(strategy), arena_(0, 0) {}

  ScheduleResult run();

 private:
  struct TState {
    bool on_device = false;
    std::int64_t offset = 0, size = 0;
    int buffer = -1;                    // plan buffer of the device copy
    bool host_valid = false;            // the host buffer holds the current value
    int host = -1;                      // host buffer id
    int host_writer = -1;               // d2h step that wrote the host copy (-1: valid from the start)
    int host_reader = -1;               // last h2d step that read the host copy
    bool dropped = false;               // freed, to be recomputed
    bool produced = false;              // the device copy holds a value
    bool fresh = false;                 // produced or prefetched and not used since (moDNN criterion b)
    ReadySet writer = kNoneReady;       // last step that wrote the device copy
    ReadySet readers = kNoneReady;      // last steps that read it, per stream
    ReadySet alloc_waits = kNoneReady;  // steps that must end before the space is touched
    std::int64_t access_end = 0;        // when the last step touching the device copy ends
    std::int64_t host_writer_end = 0;   // when the host copy is complete
    int lock = 0;
    std::size_t next_use = 0;  // index into uses_
    Residency decision = Residency::Keep;
  };

  struct EmitArgs {
    Stream stream = Stream::Compute;
    StepOp op = StepOp::Forward;
    std::string layer, tensor;
    std::int64_t duration = 0;
    std::vector<int> reads, writes, accumulates;  // tensor ids
    int workspace = -1;                           // plan buffer id
    ReadySet workspace_waits = kNoneReady;
    int host_tensor = -1;  // offload/prefetch: the tensor whose host buffer is used
    std::vector<MicroStep> config;
  };

  // --- set-up ---
  void compute_uses();
  int new_buffer(const std::string& tensor, std::int64_t offset, std::int64_t size, bool resident);
  int host_buffer_of(int t);
  void drop_unused_buffers();

  // --- mechanism ---
  int emit(const EmitArgs& a);
  bool allocate_tensor(int t, bool may_evict);
  BlockView view(const Arena::Block& blk) const;
  Window find_window(std::int64_t size) const;
  bool make_room(std::int64_t size);
  void evict(int t);
  void offload(int t);
  void release_device_copy(int t, bool keep_value_on_host);
  ReadySet accesses(const TState& s) const;
  bool evictable(int owner) const;
  bool clean(int t) const;
  bool droppable(int t) const;
  bool ensure_resident(int t);
  bool prefetch(int t, bool may_evict);
  bool recompute(int layer);
  void defragment();

  // --- Alg. 1 ---
  bool run_task(int pos);
  bool choose_and_allocate_workspace(int task, std::size_t* index, int* ws_buffer, ReadySet* ws_waits);
  void look_ahead(int pos, std::int64_t task_ns);
  void copies_needed(int t, int depth, std::vector<int>* out) const;
  void finish_position(int pos);
  void drop_unkept(int pos);
  std::int64_t task_time(int task) const;
  std::vector<int> round_inputs(const Task& t) const;  // reads + accumulates
  void lock(const std::vector<int>& ts, int delta);

  const ScheduleInput& in_;
  const Graph& g_;
  const TaskGraph& tg_;
  const CostTable& costs_;
  Strategy& strategy_;
  Arena arena_;
  Timeline timeline_;
  std::vector<PlanStep> meta_;  // per timeline step: what it does (times filled at the end)
  std::vector<TState> st_;
  std::vector<std::vector<int>> uses_;      // per tensor: round positions needing it
  std::vector<std::vector<int>> users_at_;  // per position: tensors with a use there
  std::vector<int> order_;                  // round task ids
  int bwd_start_ = 0;
  int pos_ = 0;                                   // current position
  mutable ScheduleResult res_;                    // mutable for the work counter of the (const) window search
  mutable std::vector<BlockView> scratch_views_;  // reused by find_window
  mutable std::vector<std::size_t> scratch_maxq_, scratch_minq_;
  std::vector<PlanBuffer> buffers_;
  std::vector<char> kernel_seen_;
  std::vector<int> resident_buffer_;  // per tensor: plan buffer of a resident tensor
  bool in_defrag_retry_ = false;
  bool staged_ = false;               // the strategy gives a per-stage plan (Strategy::keep_into)
  int step_limit_ = 0;                // steps a round may take before it counts as a runaway
  std::int64_t recompute_limit_ = 0;  // recomputations a round may take likewise
  bool runaway_ = false;
};

std::int64_t Scheduler::task_time(int task) const { return costs_.tasks[task].time_ns; }

std::vector<int> Scheduler::round_inputs(const Task& t) const {
  std::vector<int> v = t.reads;
  v.insert(v.end(), t.accumulates.begin(), t.accumulates.end());
  return v;
}

void Scheduler::lock(const std::vector<int>& ts, int delta) {
  for (int t : ts)
    if (!tg_.tensors[t].resident()) st_[t].lock += delta;
}

// Uses of each tensor by round position, extended for recomputation: a tensor that may be
// dropped and recomputed needs its producer's inputs (and saved state) wherever it is needed
// itself after it was first produced.
void Scheduler::compute_uses() {
  const int nt = static_cast<int>(tg_.tensors.size());
  for (const Task& t : tg_.tasks)
    if (t.round_task) order_.push_back(t.id);
  std::vector<int> pos_of(tg_.tasks.size(), -1);
  for (std::size_t p = 0; p < order_.size(); ++p) pos_of[order_[p]] = static_cast<int>(p);
  bwd_start_ = static_cast<int>(order_.size());
  for (std::size_t p = 0; p < order_.size(); ++p)
    if (tg_.tasks[order_[p]].kind != TaskKind::Forward) {
      bwd_start_ = static_cast<int>(p);
      break;
    }
  uses_.assign(nt, {});
  for (int task : order_)
    for (int t : tg_.touched(tg_.tasks[task]))
      if (!tg_.tensors[t].resident()) uses_[t].push_back(pos_of[task]);
  // Reverse route order: a recomputed tensor's consumers come later in the route, so their
  // extensions are known before the tensor's own producer inputs are extended.
  for (auto it = tg_.route.rbegin(); it != tg_.route.rend(); ++it) {
    const int l = *it;
    const int y = tg_.y_of[l];
    if (l == 0 || st_[y].decision != Residency::Recompute) continue;
    // y's list is final here (its consumers come later in the route and were extended first);
    // deduplicate before passing it on, or fan-outs (skip connections) multiply it.
    std::sort(uses_[y].begin(), uses_[y].end());
    uses_[y].erase(std::unique(uses_[y].begin(), uses_[y].end()), uses_[y].end());
    const int produced_at = uses_[y].empty() ? 0 : uses_[y].front();  // the forward task itself
    std::vector<int> need;
    for (int p : uses_[y])
      if (p > produced_at) need.push_back(p);
    for (int x : tg_.recompute_reads(l)) {
      if (tg_.tensors[x].resident()) continue;
      uses_[x].insert(uses_[x].end(), need.begin(), need.end());
    }
  }
  users_at_.assign(order_.size(), {});
  for (int t = 0; t < nt; ++t) {
    auto& u = uses_[t];
    std::sort(u.begin(), u.end());
    u.erase(std::unique(u.begin(), u.end()), u.end());
    for (int p : u) users_at_[p].push_back(t);
  }
}

int Scheduler::new_buffer(const std::string& tensor, std::int64_t offset, std::int64_t size, bool resident) {
  PlanBuffer b;
  b.id = static_cast<int>(buffers_.size());
  b.tensor = tensor;
  b.offset = offset;
  b.size = size;
  b.resident = resident;
  buffers_.push_back(std::move(b));
  return buffers_.back().id;
}

// A task that fails (no room) after allocating its outputs is retried after defragmentation,
// which evicts those allocations unwritten: their buffers were never used by any step. They
// leave the plan, and the others are renumbered.
void Scheduler::drop_unused_buffers() {
  if (std::all_of(buffers_.begin(), buffers_.end(), [](const PlanBuffer& b) { return b.first_step >= 0; })) return;
  std::vector<int> new_id(buffers_.size(), -1);
  std::vector<PlanBuffer> kept;
  for (auto& b : buffers_) {
    if (b.first_step < 0) continue;
    new_id[static_cast<std::size_t>(b.id)] = static_cast<int>(kept.size());
    b.id = static_cast<int>(kept.size());
    kept.push_back(std::move(b));
  }
  auto renumber = [&](std::vector<int>& ids) {
    for (int& b : ids) b = new_id[static_cast<std::size_t>(b)];
  };
  for (PlanStep& ps : meta_) {
    renumber(ps.reads);
    renumber(ps.writes);
    renumber(ps.accumulates);
    if (ps.workspace >= 0) ps.workspace = new_id[static_cast<std::size_t>(ps.workspace)];
  }
  buffers_ = std::move(kept);
}

int Scheduler::host_buffer_of(int t) {
  TState& s = st_[t];
  if (s.host >= 0) return s.host;
  const Tensor& tensor = tg_.tensors[t];
  PlanHostBuffer h;
  h.id = static_cast<int>(res_.host_buffers.size());
  h.tensor = tensor.name;
  h.input = tensor.host_input;
  h.size = tensor.host_input ? tensor.bytes(in_.batch) : tensor.bytes(costs_.sub_batch);
  res_.host_buffers.push_back(h);
  s.host = h.id;
  return s.host;
}

ReadySet Scheduler::accesses(const TState& s) const {
  ReadySet r = s.readers;
  merge_into(r, s.writer);
  merge_into(r, s.alloc_waits);
  return r;
}

int Scheduler::emit(const EmitArgs& a) {
  ReadySet waits = kNoneReady;
  for (int t : a.reads) {
    if (tg_.tensors[t].resident()) continue;
    merge_into(waits, st_[t].writer);
    merge_into(waits, st_[t].alloc_waits);
  }
  auto for_write = [&](int t) {
    if (tg_.tensors[t].resident()) return;
    merge_into(waits, accesses(st_[t]));
  };
  for (int t : a.writes) for_write(t);
  for (int t : a.accumulates) for_write(t);
  merge_into(waits, a.workspace_waits);
  if (a.host_tensor >= 0) {
    const TState& s = st_[a.host_tensor];
    if (a.stream == Stream::H2D)
      merge_into(waits, s.host_writer, Stream::D2H);
    else
      merge_into(waits, s.host_reader, Stream::H2D);
  }
  // Without duplex copies, host->device and device->host share one engine: serialise them.
  if (!costs_.duplex) {
    if (a.stream == Stream::H2D) merge_into(waits, timeline_.last_on(Stream::D2H), Stream::D2H);
    if (a.stream == Stream::D2H) merge_into(waits, timeline_.last_on(Stream::H2D), Stream::H2D);
  }
  const std::int64_t stream_end_before = timeline_.stream_end(a.stream);
  const int id = timeline_.issue(a.stream, a.duration, waits);
  const auto& step = timeline_.step(id);
  if (a.stream == Stream::Compute && step.start > stream_end_before) {
    const std::int64_t stall = step.start - stream_end_before;
    res_.stall_ns += stall;
    for (int t : a.reads)
      if (!tg_.tensors[t].resident() && st_[t].writer[static_cast<int>(Stream::H2D)] >= 0)
        res_.stall_by_tensor[t] += stall;
  }

  PlanStep ps;
  ps.id = id;
  ps.stream = a.stream;
  ps.op = a.op;
  ps.layer = a.layer;
  ps.tensor = a.tensor;
  ps.waits = step.waits;
  auto buffers_of = [&](const std::vector<int>& ts) {
    std::vector<int> out;
    for (int t : ts) {
      int b = tg_.tensors[t].resident() ? resident_buffer_[t] : st_[t].buffer;
      UCPLAN_CHECK(b >= 0, "a step touches a tensor on the device: " + tg_.tensors[t].name);
      out.push_back(b);
    }
    return out;
  };
  ps.reads = buffers_of(a.reads);
  ps.writes = buffers_of(a.writes);
  ps.accumulates = buffers_of(a.accumulates);
  ps.workspace = a.workspace;
  ps.host = a.host_tensor >= 0 ? st_[a.host_tensor].host : -1;
  ps.config = a.config;
  auto touch = [&](int b) {
    if (buffers_[b].first_step < 0) buffers_[b].first_step = id;
    buffers_[b].last_step = std::max(buffers_[b].last_step, id);
  };
  for (int b : ps.reads) touch(b);
  for (int b : ps.writes) touch(b);
  for (int b : ps.accumulates) touch(b);
  if (ps.workspace >= 0) touch(ps.workspace);
  meta_.push_back(std::move(ps));

  for (int t : a.reads) {
    if (tg_.tensors[t].resident()) continue;
    merge_into(st_[t].readers, id, a.stream);
    st_[t].alloc_waits = kNoneReady;
    st_[t].access_end = std::max(st_[t].access_end, step.end);
  }
  auto wrote = [&](int t) {
    if (tg_.tensors[t].resident()) return;
    TState& s = st_[t];
    s.writer = kNoneReady;
    merge_into(s.writer, id, a.stream);
    s.readers = kNoneReady;
    s.alloc_waits = kNoneReady;
    s.produced = true;
    s.access_end = std::max(s.access_end, step.end);
  };
  for (int t : a.writes) wrote(t);
  for (int t : a.accumulates) wrote(t);
  if (a.host_tensor >= 0) {
    TState& s = st_[a.host_tensor];
    if (a.stream == Stream::H2D) {
      s.host_reader = std::max(s.host_reader, id);
    } else {
      s.host_writer = id;
      s.host_writer_end = step.end;
    }
  }
  return id;
}

bool Scheduler::evictable(int owner) const {
  if (owner < 0 || owner >= kWorkspaceOwner) return false;
  if (tg_.tensors[owner].resident()) return false;
  return st_[owner].lock == 0;
}

// Freeing it costs no copy: the host holds its value, it will be recomputed, or it has none yet.
bool Scheduler::clean(int t) const {
  const TState& s = st_[t];
  return s.host_valid || !s.produced || droppable(t);
}

// A tensor planned for recomputation may be dropped whenever it holds a value: its producer's
// inputs are kept alive for every later use of it (compute_uses).
bool Scheduler::droppable(int t) const {
  const TState& s = st_[t];
  return s.decision == Residency::Recompute && s.produced;
}

void Scheduler::release_device_copy(int t, bool keep_value_on_host) {
  TState& s = st_[t];
  UCPLAN_CHECK(s.on_device, "release of a tensor on the device");
  ReadySet ready = accesses(s);
  std::int64_t ready_end = s.access_end;
  if (keep_value_on_host && s.host_writer >= 0) {
    merge_into(ready, s.host_writer, Stream::D2H);
    ready_end = std::max(ready_end, s.host_writer_end);
  }
  arena_.release(s.offset, ready, ready_end);
  s.on_device = false;
  s.buffer = -1;
  s.produced = false;
  s.fresh = false;
  s.writer = s.readers = s.alloc_waits = kNoneReady;
  s.access_end = 0;
}

void Scheduler::evict(int t) {
  TState& s = st_[t];
  if (s.host_valid) {
    release_device_copy(t, true);
    return;
  }
  if (!s.produced) {
    release_device_copy(t, false);
    return;
  }
  if (droppable(t)) {
    s.dropped = true;
    release_device_copy(t, false);
    return;
  }
  offload(t);
  res_.evicted_dirty[t] = 1;
  release_device_copy(t, true);
}

// Copies a tensor's device value to its host buffer on the device-to-host stream.
void Scheduler::offload(int t) {
  EmitArgs a;
  a.stream = Stream::D2H;
  a.op = StepOp::Offload;
  a.tensor = tg_.tensors[t].name;
  a.duration = costs_.d2h_ns(tg_.tensors[t].bytes(costs_.sub_batch));
  a.reads = {t};
  a.host_tensor = t;
  host_buffer_of(t);
  emit(a);
  st_[t].host_valid = true;
  res_.offload_bytes += tg_.tensors[t].bytes(costs_.sub_batch);
}

BlockView Scheduler::view(const Arena::Block& blk) const {
  BlockView b;
  b.off = blk.offset;
  b.size = blk.size;
  b.owner = blk.owner;
  if (blk.owner < 0) {
    b.ready_end = blk.ready_end;
  } else if (evictable(blk.owner) && (strategy_.may_offload() || clean(blk.owner))) {
    const TState& s = st_[blk.owner];
    b.ready_end = s.access_end;
    if (s.host_valid && s.host_writer >= 0) b.ready_end = std::max(b.ready_end, s.host_writer_end);
    if (!clean(blk.owner)) {
      b.dirty_ns = costs_.d2h_ns(tg_.tensors[blk.owner].bytes(costs_.sub_batch));  // what an offload copies
      b.dirty_bytes = s.size;
    }
    if (s.fresh) b.fresh_bytes = s.size;
    if (s.next_use < uses_[blk.owner].size()) b.next_use = uses_[blk.owner][s.next_use];
  } else {
    b.owner = kWallBlock;
  }
  return b;
}

// moDNN §IV-B1 "finding an offloading scheme": a run of adjacent blocks (free, or holding
// evictable tensors) at least `size` long; among all runs, the one whose eviction delays the
// compute stream least. Runs holding tensors not used since they were produced or prefetched
// (criterion b) are taken only when nothing else works. Among equally cheap runs (in the
// backward pass most tensors already have a host copy, so evicting costs nothing now), the one
// whose contents are needed furthest ahead: the schedule is static, so the planner knows the
// future and applies Belady's rule. Two pointers over the address-ordered blocks with
// monotonic deques keep this linear in the number of blocks; every block's figures are kept up
// to date as steps are emitted, so looking at one is cheap.
Window Scheduler::find_window(std::int64_t size) const {
  const auto& blocks = arena_.blocks();
  const std::size_t n = blocks.size();
  res_.work += static_cast<std::int64_t>(n);
  const std::int64_t now = timeline_.stream_end(Stream::Compute);
  std::int64_t copy_free = timeline_.stream_end(Stream::D2H);
  if (!costs_.duplex) copy_free = std::max(copy_free, timeline_.stream_end(Stream::H2D));
  // Views are filled as the window's front reaches each block; the monotonic queues hold
  // window indices (vectors with a moving head: indices only ever grow).
  std::vector<BlockView>& bs = scratch_views_;
  bs.resize(n);
  std::vector<std::size_t>& maxq = scratch_maxq_;  // decreasing ready_end
  std::vector<std::size_t>& minq = scratch_minq_;  // increasing next_use
  std::size_t maxh = 0, minh = 0;
  Window best;
  std::size_t best_i = 0, best_j = 0;
  std::size_t j = 0;
  std::int64_t total = 0, dirty_ns = 0, dirty_bytes = 0, fresh_bytes = 0;
  auto reset = [&](std::size_t at) {
    j = at;
    total = dirty_ns = dirty_bytes = fresh_bytes = 0;
    maxq.clear();
    minq.clear();
    maxh = minh = 0;
  };
  reset(0);
  for (std::size_t i = 0; i < n; ++i) {
    if (j < i) reset(i);
    if (j == i) bs[i] = view(blocks[i]);
    if (bs[i].owner == kWallBlock) {
      reset(i + 1);
      continue;
    }
    while (j < n && total < size) {
      if (j > i) bs[j] = view(blocks[j]);
      if (bs[j].owner == kWallBlock) break;
      total += bs[j].size;
      dirty_ns += bs[j].dirty_ns;
      dirty_bytes += bs[j].dirty_bytes;
      fresh_bytes += bs[j].fresh_bytes;
      while (maxq.size() > maxh && bs[maxq.back()].ready_end <= bs[j].ready_end) maxq.pop_back();
      maxq.push_back(j);
      while (minq.size() > minh && bs[minq.back()].next_use >= bs[j].next_use) minq.pop_back();
      minq.push_back(j);
      ++j;
    }
    if (total >= size) {
      std::int64_t ready = maxq.size() > maxh ? bs[maxq[maxh]].ready_end : 0;
      if (dirty_ns > 0) ready = std::max(ready, std::max(copy_free, now) + dirty_ns);
      const std::int64_t delay = std::max<std::int64_t>(0, ready - now);
      const int soonest = minq.size() > minh ? bs[minq[minh]].next_use : kNeverUsed;
      auto key = std::make_tuple(fresh_bytes > 0, delay, -soonest, dirty_bytes, bs[i].off);
      auto best_key =
          std::make_tuple(best.fresh_bytes > 0, best.delay, -best.soonest_use, best.dirty_bytes, best.offset);
      if (!best.found || key < best_key) {
        best.found = true;
        best.offset = bs[i].off;
        best.delay = delay;
        best.soonest_use = soonest;
        best.fresh_bytes = fresh_bytes;
        best.dirty_bytes = dirty_bytes;
        best_i = i;
        best_j = j;
      }
    }
    if (j > i) {  // slide block i out of the window
      total -= bs[i].size;
      dirty_ns -= bs[i].dirty_ns;
      dirty_bytes -= bs[i].dirty_bytes;
      fresh_bytes -= bs[i].fresh_bytes;
      if (maxq.size() > maxh && maxq[maxh] == i) ++maxh;
      if (minq.size() > minh && minq[minh] == i) ++minh;
    } else {
      reset(i + 1);
    }
  }
  if (best.found)
    for (std::size_t k = best_i; k < best_j; ++k)
      if (blocks[k].owner >= 0) best.owners.push_back(blocks[k].owner);
  return best;
}

bool Scheduler::make_room(std::int64_t size) {
  Window w = find_window(size);
  if (!w.found) return false;
  for (int owner : w.owners) evict(owner);
  return true;
}

bool Scheduler::allocate_tensor(int t, bool may_evict) {
  TState& s = st_[t];
  UCPLAN_CHECK(!s.on_device, "allocation of a tensor already on the device");
  const std::int64_t size = align_up(std::max<std::int64_t>(1, tg_.tensors[t].bytes(costs_.sub_batch)));
  ReadySet waits = kNoneReady;
  // Two-ended: what is kept for the backward pass (by the table, or by a staged plan into its
  // first backward stage) goes at the top.
  const bool kept_across =
      s.decision == Residency::Keep || (staged_ && strategy_.keep_into(t, bwd_start_).value_or(false));
  const bool top =
      in_.two_ended && pos_ < bwd_start_ && kept_across && !uses_[t].empty() && uses_[t].back() >= bwd_start_;
  auto at = arena_.allocate(size, t, &waits, top);
  if (!at && may_evict && (strategy_.evict_on_demand() || in_defrag_retry_)) {
    if (make_room(size)) at = arena_.allocate(size, t, &waits, top);
  }
  if (!at) return false;
  s.on_device = true;
  s.offset = *at;
  s.size = size;
  s.alloc_waits = waits;
  s.access_end = timeline_.ready_time(waits);
  s.writer = s.readers = kNoneReady;
  s.produced = false;
  s.buffer = new_buffer(tg_.tensors[t].name, *at, size, false);
  return true;
}

// Copies a tensor's host copy into a new device buffer; `may_evict` is false for look-ahead
// prefetches, which must never push out what runs before the task they are for.
bool Scheduler::prefetch(int t, bool may_evict) {
  TState& s = st_[t];
  UCPLAN_CHECK(s.host_valid, "prefetch of a tensor with a host copy: " + tg_.tensors[t].name);
  if (!allocate_tensor(t, may_evict)) return false;
  host_buffer_of(t);
  EmitArgs a;
  a.stream = Stream::H2D;
  a.op = StepOp::Prefetch;
  a.tensor = tg_.tensors[t].name;
  a.duration = costs_.h2d_ns(tg_.tensors[t].bytes(costs_.sub_batch));
  a.writes = {t};
  a.host_tensor = t;
  emit(a);
  s.fresh = true;
  const std::int64_t bytes = tg_.tensors[t].bytes(costs_.sub_batch);
  res_.prefetch_bytes += bytes;
  if (tg_.tensors[t].host_input) res_.input_bytes += bytes;
  return true;
}

bool Scheduler::ensure_resident(int t) {
  if (tg_.tensors[t].resident()) return true;
  TState& s = st_[t];
  if (s.on_device) return true;
  if (s.dropped) return recompute(tg_.tensors[t].layer);
  return prefetch(t, true);
}

bool Scheduler::recompute(int layer) {
  const int y = tg_.y_of[layer];
  const int ftask = costs_.forward_task[layer];
  const Task& f = tg_.tasks[ftask];
  const std::vector<int> srcs = tg_.recompute_reads(layer);
  lock(srcs, +1);
  lock({y}, +1);
  bool ok = true;
  for (int x : srcs) ok = ok && ensure_resident(x);
  ok = ok && allocate_tensor(y, true);
  std::size_t idx = 0;
  int ws = -1;
  ReadySet ws_waits = kNoneReady;
  if (ok && f.conv_kernel) ok = choose_and_allocate_workspace(ftask, &idx, &ws, &ws_waits);
  if (ok) {
    EmitArgs a;
    a.op = StepOp::Recompute;
    a.layer = g_.layers[layer].name();
    a.reads = srcs;
    a.writes = {y};
    a.workspace = ws;
    a.workspace_waits = ws_waits;
    if (f.conv_kernel) {
      const ConvConfig& c = costs_.tasks[ftask].front[idx];
      a.duration = c.time_ns;
      for (const auto& m : c.micro) a.config.push_back({m.algo, m.micro_batch});
    } else {
      a.duration = task_time(ftask);
    }
    int id = emit(a);
    if (ws >= 0) arena_.release(buffers_[ws].offset, ReadySet{id, -1, -1}, timeline_.step(id).end);
    res_.recompute_ns += a.duration;
    res_.recompute_steps += 1;
    if (in_.record_stages) res_.recomputed_at[pos_].push_back(y);
    st_[y].dropped = false;
    st_[y].fresh = true;
  }
  lock(srcs, -1);
  lock({y}, -1);
  return ok;
}

// Everything not resident leaves the device (offloaded if its value is not elsewhere), and the
// current task starts again in an empty dynamic region, where it fits by the lower bound. A
// strategy that may not offload keeps what only a copy could save, and may still not fit.
void Scheduler::defragment() {
  res_.defragmentations += 1;
  std::vector<int> on;
  for (const auto& blk : arena_.blocks())
    if (blk.owner >= 0 && blk.owner < kWorkspaceOwner && !tg_.tensors[blk.owner].resident() &&
        (strategy_.may_offload() || clean(blk.owner)))
      on.push_back(blk.owner);
  for (int t : on) {
    st_[t].lock = 0;
    evict(t);
  }
}

bool Scheduler::choose_and_allocate_workspace(int task, std::size_t* index, int* ws_buffer, ReadySet* ws_waits) {
  const TaskCost& cost = costs_.tasks[task];
  ConfigContext ctx;
  ctx.task = task;
  ctx.cost = &cost;
  ctx.largest_free = arena_.largest_free();
  ctx.fixed = task < static_cast<int>(in_.fixed_config.size()) ? in_.fixed_config[task] : -1;
  const std::size_t nf = cost.front.size();
  ctx.evict_delay.assign(nf, 0);
  ctx.prefetch_penalty.assign(nf, 0);
  if (ctx.fixed < 0) {
    // Eq. (5) terms. T_off: delay of making room for the workspace. T_pre: the next task that
    // needs a prefetch; if the workspace leaves too little free memory for that copy, it starts
    // only after this task, and is late by whatever the tasks in between cannot hide.
    std::int64_t pre_bytes = 0, pre_ns = 0, between_ns = 0;
    const int n = static_cast<int>(order_.size());
    for (int p = pos_ + 1; p < n && p <= pos_ + in_.lookahead; ++p) {
      const Task& s = tg_.tasks[order_[p]];
      for (int t : round_inputs(s)) {
        const TState& ts = st_[t];
        if (!tg_.tensors[t].resident() && !ts.on_device && !ts.dropped && ts.host_valid) {
          pre_bytes += align_up(tg_.tensors[t].bytes(costs_.sub_batch));
          pre_ns += costs_.h2d_ns(tg_.tensors[t].bytes(costs_.sub_batch));
        }
      }
      if (pre_bytes > 0) break;
      between_ns += task_time(order_[p]);
    }
    // Configurations that do not fit in free memory: the delay of making room for them. The
    // window search is linear in the arena's blocks, so at most kProbes of them are probed
    // (spread over the range, the fastest always among them); the others count as not fitting.
    constexpr std::size_t kProbes = 12;
    std::vector<std::size_t> over;
    for (std::size_t i = 0; i < nf; ++i)
      if (align_up(cost.front[i].workspace_bytes) > ctx.largest_free) over.push_back(i);
    std::vector<char> probe(nf, 0);
    if (strategy_.evict_on_demand() && !over.empty()) {
      if (over.size() <= kProbes) {
        for (auto i : over) probe[i] = 1;
      } else {
        for (std::size_t k = 0; k < kProbes; ++k) probe[over[(over.size() - 1) * k / (kProbes - 1)]] = 1;
      }
    }
    std::int64_t memo_size = -1, memo_delay = 0;
    for (std::size_t i = 0; i < nf; ++i) {
      const std::int64_t ws = align_up(cost.front[i].workspace_bytes);
      if (ws <= ctx.largest_free) {
        ctx.evict_delay[i] = 0;
      } else if (!probe[i]) {
        ctx.evict_delay[i] = kInf;
      } else if (ws == memo_size) {
        ctx.evict_delay[i] = memo_delay;
      } else {
        Window w = find_window(ws);
        ctx.evict_delay[i] = w.found ? w.delay : kInf;
        memo_size = ws;
        memo_delay = ctx.evict_delay[i];
      }
      if (ws > 0 && pre_bytes > 0 && arena_.free_bytes() - ws < pre_bytes)
        ctx.prefetch_penalty[i] = std::max<std::int64_t>(0, pre_ns - between_ns);
    }
  }
  std::size_t idx = ctx.fixed >= 0 ? static_cast<std::size_t>(ctx.fixed) : strategy_.choose_config(ctx);
  UCPLAN_CHECK(idx < nf, "configuration index within the front");
  // If the chosen workspace cannot be had, fall back to smaller ones (the smallest always fits
  // after defragmentation, by the lower bound).
  while (true) {
    const std::int64_t ws = align_up(cost.front[idx].workspace_bytes);
    if (ws == 0) {
      *index = idx;
      *ws_buffer = -1;
      return true;
    }
    ReadySet waits = kNoneReady;
    auto at = arena_.allocate(ws, kWorkspaceOwner, &waits);
    if (!at && (strategy_.evict_on_demand() || in_defrag_retry_) && make_room(ws))
      at = arena_.allocate(ws, kWorkspaceOwner, &waits);
    if (at) {
      *index = idx;
      *ws_buffer = new_buffer("workspace", *at, ws, false);
      *ws_waits = waits;
      res_.workspace_peak_bytes = std::max(res_.workspace_peak_bytes, ws);
      return true;
    }
    if (ctx.fixed >= 0 || idx == 0) return false;
    --idx;
  }
}

// What must come from the host for tensor t to be on the device: t itself, or, if t was dropped,
// whatever its recomputation needs (recursively, as deep as a segment may be).
void Scheduler::copies_needed(int t, int depth, std::vector<int>* out) const {
  if (tg_.tensors[t].resident()) return;
  const TState& s = st_[t];
  if (s.on_device) return;
  if (!s.dropped) {
    if (s.host_valid && std::find(out->begin(), out->end(), t) == out->end()) out->push_back(t);
    return;
  }
  if (depth > 16) return;
  const int layer = tg_.tensors[t].layer;
  for (int x : tg_.recompute_reads(layer)) copies_needed(x, depth + 1, out);
}

// Eq. (4): prefetch for a later task s now if starting after the current task would make s
// wait: T + T_alg(t) + Σ T_trans(d) > EST(s). Stops at the first task whose data could not be
// placed without evicting (moDNN Alg. 1 lines 16-17: a useless prefetch is worse than none).
void Scheduler::look_ahead(int pos, std::int64_t task_ns) {
  const PrefetchMode mode = strategy_.prefetch_mode();
  if (mode == PrefetchMode::OnDemand) return;
  // vDNN prefetches during the backward pass only, one layer ahead.
  if (mode == PrefetchMode::NextLayer && pos < bwd_start_ - 1) return;
  const int n = static_cast<int>(order_.size());
  const std::int64_t t_end = timeline_.stream_end(Stream::Compute) + task_ns;
  std::int64_t est = t_end;
  std::int64_t reserve = 0;
  const int current_layer = tg_.tasks[order_[pos]].layer;
  int next_layer = -1;
  for (int p = pos + 1; p < n && p <= pos + in_.lookahead; ++p) {
    const Task& s = tg_.tasks[order_[p]];
    if (mode == PrefetchMode::NextLayer) {
      // vDNN: only the tasks of the next layer in backward order, started now.
      if (s.layer != current_layer) {
        if (next_layer < 0)
          next_layer = s.layer;
        else if (s.layer != next_layer)
          break;
      }
    }
    // Its inputs still on the host, and those that the recomputation of dropped inputs needs.
    std::vector<int> missing;
    for (int t : round_inputs(s)) copies_needed(t, 0, &missing);
    std::int64_t bytes = 0, copy_ns = 0;
    for (int t : missing) {
      bytes += align_up(tg_.tensors[t].bytes(costs_.sub_batch));
      copy_ns += costs_.h2d_ns(tg_.tensors[t].bytes(costs_.sub_batch));
    }
    if (!missing.empty()) {
      bool start_now = true;
      if (mode == PrefetchMode::Eq4) {
        std::int64_t copy_free = timeline_.stream_end(Stream::H2D);
        if (!costs_.duplex) copy_free = std::max(copy_free, timeline_.stream_end(Stream::D2H));
        start_now = std::max(copy_free, t_end) + copy_ns > est;
      }
      if (start_now) {
        if (arena_.free_bytes() - bytes < reserve) break;
        for (int t : missing)
          if (!prefetch(t, false)) return;
      }
    }
    for (int t : s.writes) reserve += align_up(tg_.tensors[t].bytes(costs_.sub_batch));
    if (s.conv_kernel) reserve += align_up(costs_.tasks[s.id].min_workspace);
    est += task_time(s.id);
  }
}

bool Scheduler::run_task(int pos) {
  // Free space whose last users on every stream have ended by now merges into one block: any
  // step issued from here on starts no earlier than the compute stream, so waiting for the
  // merged history costs no time, and a short block list keeps allocation and eviction fast.
  const std::int64_t now = std::min(
      {timeline_.stream_end(Stream::Compute), timeline_.stream_end(Stream::H2D), timeline_.stream_end(Stream::D2H)});
  arena_.coalesce([&](const Arena::Block& b) { return b.ready_end <= now; });
  const int task = order_[pos];
  const Task& t = tg_.tasks[task];
  const std::vector<int> touched = tg_.touched(t);
  lock(touched, +1);
  bool ok = true;
  for (int d : round_inputs(t)) ok = ok && ensure_resident(d);
  if (ok && staged_) drop_unkept(pos);
  for (int d : t.writes)
    if (!tg_.tensors[d].resident()) ok = ok && allocate_tensor(d, true);
  std::size_t idx = 0;
  int ws = -1;
  ReadySet ws_waits = kNoneReady;
  if (ok && t.conv_kernel) ok = choose_and_allocate_workspace(task, &idx, &ws, &ws_waits);
  if (!ok) {
    lock(touched, -1);
    return false;
  }
  const std::int64_t duration = t.conv_kernel ? costs_.tasks[task].front[idx].time_ns : task_time(task);
  look_ahead(pos, duration);

  EmitArgs a;
  a.op = step_op_of(t.kind);
  a.layer = g_.layers[t.layer].name();
  a.duration = duration;
  a.reads = t.reads;
  a.writes = t.writes;
  a.accumulates = t.accumulates;
  a.workspace = ws;
  a.workspace_waits = ws_waits;
  if (t.conv_kernel)
    for (const auto& m : costs_.tasks[task].front[idx].micro) a.config.push_back({m.algo, m.micro_batch});
  const int id = emit(a);
  if (ws >= 0) arena_.release(buffers_[ws].offset, ReadySet{id, -1, -1}, timeline_.step(id).end);
  if (t.conv_kernel && !kernel_seen_[task]) {
    kernel_seen_[task] = 1;
    const TaskCost& c = costs_.tasks[task];
    PlanKernel k;
    k.layer = a.layer;
    k.op = step_op_name(a.op);
    k.config = a.config;
    k.workspace_bytes = c.front[idx].workspace_bytes;
    k.time_ns = c.front[idx].time_ns;
    k.undivided_ns = c.undivided_ns;
    k.baseline_ns = c.baseline_ns;
    res_.kernels.push_back(std::move(k));
  }
  for (int d : touched) st_[d].fresh = false;
  // Planned offloads start as soon as the value exists, overlapping the following tasks.
  for (int d : t.writes)
    if (strategy_.may_offload() && st_[d].decision == Residency::Offload && !uses_[d].empty() &&
        uses_[d].back() >= bwd_start_)
      offload(d);
  for (int d : t.accumulates) st_[d].host_valid = false;  // the host copy, if any, is stale
  lock(touched, -1);
  return true;
}

// A staged plan says, per position, which recomputable values stay into the next: the others go
// (what is used again later comes back by recomputation). Called when the task's inputs are on
// the device, so that values recomputed only to make them do not share memory with the task
// (the MILP's memory row counts the task's tensors and what is kept), and after the task.
void Scheduler::drop_unkept(int pos) {
  if (pos + 1 >= static_cast<int>(order_.size())) return;
  for (int d = 0; d < static_cast<int>(st_.size()); ++d) {
    TState& s = st_[d];
    if (s.decision != Residency::Recompute || !s.on_device || !s.produced || s.lock > 0) continue;
    if (s.next_use >= uses_[d].size()) continue;
    if (strategy_.keep_into(d, pos + 1).value_or(true)) continue;
    s.dropped = true;
    release_device_copy(d, false);
  }
}

void Scheduler::finish_position(int pos) {
  if (staged_) drop_unkept(pos);
  for (int d : users_at_[pos]) {
    TState& s = st_[d];
    while (s.next_use < uses_[d].size() && uses_[d][s.next_use] <= pos) ++s.next_use;
    if (s.next_use == uses_[d].size()) {
      if (s.on_device) release_device_copy(d, false);
      s.dropped = false;
      continue;
    }
    const int next = uses_[d][s.next_use];
    const bool crossing = pos < bwd_start_ && next >= bwd_start_;
    if (!crossing || !s.on_device || staged_) continue;
    if (s.decision == Residency::Offload && s.host_valid) {
      release_device_copy(d, true);
    } else if (s.decision == Residency::Recompute && tg_.tensors[d].kind == TensorKind::Activation &&
               !tg_.tensors[d].host_input) {
      s.dropped = true;
      release_device_copy(d, false);
    }
  }
}

ScheduleResult Scheduler::run() {
  const int nt = static_cast<int>(tg_.tensors.size());
  st_.assign(nt, TState{});
  for (int t = 0; t < nt; ++t) {
    st_[t].decision = strategy_.residency(t);
    if (tg_.tensors[t].host_input) st_[t].host_valid = true;
  }
  res_.evicted_dirty.assign(nt, 0);
  res_.stall_by_tensor.assign(nt, 0);
  staged_ = nt > 0 && strategy_.keep_into(0, 0).has_value();
  kernel_seen_.assign(tg_.tasks.size(), 0);
  compute_uses();

  // Weights and weight gradients: resident at the bottom for the whole program, laid out once
  // below the dynamic arena (not as arena blocks, which every allocation would walk past).
  resident_buffer_.assign(nt, -1);
  std::int64_t resident_end = 0;
  for (int t = 0; t < nt; ++t) {
    if (!tg_.tensors[t].resident()) continue;
    const std::int64_t size = align_up(tg_.tensors[t].bytes(1));
    resident_buffer_[t] = new_buffer(tg_.tensors[t].name, resident_end, size, true);
    resident_end += size;
  }
  if (resident_end > in_.budget_bytes) {
    res_.failure = fmt::format("the weights and their gradients ({} bytes) do not fit in the budget", resident_end);
    return res_;
  }
  arena_ = Arena(resident_end, in_.budget_bytes, in_.best_fit ? Arena::Fit::Best : Arena::Fit::First);

  step_limit_ = 8 * static_cast<int>(order_.size()) + 1000;
  std::int64_t planned = 0;
  for (int t = 0; t < nt; ++t) planned += st_[t].decision == Residency::Recompute;
  recompute_limit_ = 4 * planned + 64;
  // Branch and bound: the compute stream runs every remaining task at least at its fastest, so
  // a candidate whose compute end plus that exceeds the best round found cannot win.
  std::vector<std::int64_t> rest_ns(order_.size() + 1, 0);
  for (std::size_t p = order_.size(); p-- > 0;) rest_ns[p] = rest_ns[p + 1] + task_time(order_[p]);
  std::int64_t steps_seen = 0;
  if (in_.record_stages) {
    res_.on_device_at.assign(order_.size(), {});
    res_.recomputed_at.assign(order_.size(), {});
  }
  for (pos_ = 0; pos_ < static_cast<int>(order_.size()); ++pos_) {
    if (in_.record_stages)
      for (int t = 0; t < nt; ++t)
        if (st_[t].on_device && st_[t].produced && !tg_.tensors[t].resident()) res_.on_device_at[pos_].push_back(t);
    bool ok = run_task(pos_);
    // Defragmentation is moDNN's: strategies that never offload on demand fail as their
    // systems would (out of memory) instead of being rescued by it.
    if (!ok && strategy_.evict_on_demand()) {
      defragment();
      in_defrag_retry_ = true;
      ok = run_task(pos_);
      in_defrag_retry_ = false;
    }
    // A simulated step costs about ten times as much as an arena block looked at (measured on
    // ResNet-152 b256 at 12 and 40 GiB: ~3 µs a step, ~0.3 µs a block), so work tracks time.
    res_.work += 10 * (timeline_.size() - steps_seen);
    steps_seen = timeline_.size();
    if (timeline_.makespan() > in_.abandon_after_ns ||
        timeline_.stream_end(Stream::Compute) + rest_ns[pos_ + 1] > in_.abandon_after_ns) {
      res_.failure = "slower than a candidate already found";
      return res_;
    }
    if (runaway_) {
      res_.failure = fmt::format("recomputation thrashes at this budget ({} recomputations, {} steps for {} tasks)",
                                 res_.recompute_steps, timeline_.size(), order_.size());
      return res_;
    }
    if (!ok) {
      const Task& t = tg_.tasks[order_[pos_]];
      res_.failure = strategy_.evict_on_demand()
                         ? fmt::format(
                               "{} of layer {} does not fit even after everything else was offloaded (with the "
                               "inputs its recomputation needs at once)",
                               task_kind_name(t.kind), g_.layers[t.layer].name())
                         : fmt::format("out of memory at {} of layer {} (this strategy does not offload on demand)",
                                       task_kind_name(t.kind), g_.layers[t.layer].name());
      return res_;
    }
    finish_position(pos_);
  }
  for (int t = 0; t < nt; ++t)
    UCPLAN_CHECK(!st_[t].on_device || tg_.tensors[t].resident(),
                 "every tensor is dead at the end of a round: " + tg_.tensors[t].name);
  res_.round_ns = timeline_.makespan();
  const int round_steps = timeline_.size();

  // Final phase: the updates, once per iteration, after the last round.
  Timeline final_line;
  for (const Task& t : tg_.tasks) {
    if (t.round_task) continue;
    int fid = final_line.issue(Stream::Compute, task_time(t.id), kNoneReady);
    PlanStep ps;
    ps.id = round_steps + fid;
    ps.stream = Stream::Compute;
    ps.op = step_op_of(t.kind);
    ps.layer = g_.layers[t.layer].name();
    for (int r : t.reads) ps.reads.push_back(resident_buffer_[r]);
    for (int w : t.writes) ps.writes.push_back(resident_buffer_[w]);
    ps.start_ns = final_line.step(fid).start;
    ps.end_ns = final_line.step(fid).end;
    ps.final = true;
    meta_.push_back(std::move(ps));
  }
  res_.final_ns = final_line.makespan();
  for (int i = 0; i < round_steps; ++i) {
    meta_[i].start_ns = timeline_.step(i).start;
    meta_[i].end_ns = timeline_.step(i).end;
  }
  const int last = static_cast<int>(meta_.size()) - 1;
  for (auto& b : buffers_)
    if (b.resident) {
      b.first_step = 0;
      b.last_step = last;
    }
  drop_unused_buffers();
  for (auto& r : res_.recomputed_at) std::sort(r.begin(), r.end());
  res_.steps = std::move(meta_);
  res_.buffers = std::move(buffers_);
  res_.arena_bytes = arena_.high_water();
  res_.ok = true;
  return res_;
}

// --- strategies ---

class TableStrategy : public Strategy {
 public:
  TableStrategy(std::string name, std::vector<Residency> table, PrefetchMode prefetch, bool evict, bool by_gain,
                bool may_offload)
      : name_(std::move(name)),
        table_(std::move(table)),
        prefetch_(prefetch),
        evict_(evict),
        by_gain_(by_gain),
        may_offload_(may_offload) {
    if (!may_offload_)
      for (Residency& r : table_)
        if (r == Residency::Offload) r = Residency::Keep;
  }
  std::string name() const override { return name_; }
  Residency residency(int tensor) const override { return table_[tensor]; }
  PrefetchMode prefetch_mode() const override { return prefetch_; }
  bool evict_on_demand() const override { return evict_; }
  bool may_offload() const override { return may_offload_; }
  std::size_t choose_config(const ConfigContext& ctx) override {
    return by_gain_ ? choose_config_by_gain(ctx) : choose_fastest_fitting(ctx);
  }

 private:
  std::string name_;
  std::vector<Residency> table_;
  PrefetchMode prefetch_;
  bool evict_, by_gain_, may_offload_;
};

class StagedStrategy : public TableStrategy {
 public:
  StagedStrategy(const StagedPlan& plan, bool may_offload)
      : TableStrategy("staged", plan.table, PrefetchMode::Eq4, true, true, may_offload), keep_(plan.keep) {}
  std::optional<bool> keep_into(int tensor, int pos) const override {
    if (pos < 0 || pos >= static_cast<int>(keep_.size())) return true;
    return keep_[pos][tensor] != 0;
  }

 private:
  const std::vector<std::vector<char>>& keep_;
};

// Tensors read by some backward task: the only ones worth offloading or recomputing.
std::vector<char> backward_needed(const TaskGraph& tg) {
  std::vector<char> need(tg.tensors.size(), 0);
  for (const Task& t : tg.tasks)
    if (t.round_task && t.kind != TaskKind::Forward)
      for (int r : t.reads) need[r] = 1;
  return need;
}

bool consumed_by(const Graph& g, int layer, LayerType type) {
  for (int c : g.layers[layer].consumers)
    if (g.layers[c].type() == type) return true;
  return false;
}

// Chen et al. 2016's sqrt(N) checkpoints: among the route positions where a single activation
// carries everything forward (articulation points, so a segment can be recomputed from it
// alone), keep about every sqrt(N)-th (or every stride-th, if stride > 0) and recompute the rest.
std::vector<char> sqrt_checkpoints(const Graph& g, const TaskGraph& tg, int stride_asked = 0) {
  const int n = static_cast<int>(tg.route.size());
  std::vector<int> pos(g.layers.size());
  for (int i = 0; i < n; ++i) pos[tg.route[i]] = i;
  std::vector<int> last_consumer(n, -1);
  for (int i = 0; i < n; ++i)
    for (int c : g.layers[tg.route[i]].consumers) last_consumer[i] = std::max(last_consumer[i], pos[c]);
  // crossing[i]: activations produced at or before i and consumed after i.
  std::vector<int> diff(n + 1, 0);
  for (int i = 0; i < n; ++i)
    if (last_consumer[i] > i) {
      diff[i] += 1;
      diff[last_consumer[i]] -= 1;
    }
  std::vector<int> candidates;
  int crossing = 0;
  for (int i = 0; i < n; ++i) {
    crossing += diff[i];
    if (crossing == 1 && last_consumer[i] > i) candidates.push_back(i);
  }
  std::vector<char> keep(tg.tensors.size(), 0);
  if (candidates.empty()) {  // no articulation point: nothing can be recomputed from one tensor
    for (int l : tg.route) keep[tg.y_of[l]] = 1;
    return keep;
  }
  const int stride =
      stride_asked > 0 ? stride_asked : std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(n)))));
  int since = stride;
  for (int i : candidates) {
    if (++since >= stride) {
      keep[tg.y_of[tg.route[i]]] = 1;
      since = 0;
    }
  }
  return keep;
}

}  // namespace

ScheduleResult simulate_schedule(const ScheduleInput& in, Strategy& strategy) {
  Scheduler s(in, strategy);
  return s.run();
}

std::vector<std::string> strategy_names() {
  return {"ucplan", "keep-all", "vdnn-all", "vdnn-conv", "superneurons", "checkpoint-sqrt"};
}

std::unique_ptr<Strategy> make_table_strategy(std::string name, std::vector<Residency> table, PrefetchMode prefetch,
                                              bool evict_on_demand, bool by_gain, bool may_offload) {
  return std::make_unique<TableStrategy>(std::move(name), std::move(table), prefetch, evict_on_demand, by_gain,
                                         may_offload);
}

ScheduleResult simulate_staged(const ScheduleInput& in, const StagedPlan& plan, bool may_offload) {
  StagedStrategy strategy(plan, may_offload);
  return simulate_schedule(in, strategy);
}

namespace {

// Recomputation segments are bounded: a tensor whose recomputation would reach back more than
// kMaxSegment layers of recomputed tensors becomes a checkpoint. Without the bound, a residual
// stream (add, relu, add, ... with no convolution on it) would make the whole network one
// segment: quadratic recomputation and quadratic bookkeeping.
constexpr int kMaxSegment = 16;

void bound_segments(const Graph& g, const TaskGraph& tg, std::vector<Residency>& table) {
  std::vector<int> depth(g.layers.size(), 0);
  for (int l : tg.route) {
    const int y = tg.y_of[l];
    if (l == 0 || table[y] != Residency::Recompute) continue;
    int d = 0;
    for (int in : g.layers[l].inputs) d = std::max(d, depth[in]);
    if (d + 1 > kMaxSegment) {
      table[y] = Residency::Keep;
    } else {
      depth[l] = d + 1;
    }
  }
}

std::vector<Residency> baseline_table(const std::string& name, const Graph& g, const TaskGraph& tg) {
  const int nt = static_cast<int>(tg.tensors.size());
  std::vector<Residency> table(nt, Residency::Keep);
  const std::vector<char> need = backward_needed(tg);
  std::vector<char> sqrt_keep;
  if (name == "checkpoint-sqrt") sqrt_keep = sqrt_checkpoints(g, tg);
  for (int t = 0; t < nt; ++t) {
    const Tensor& x = tg.tensors[t];
    if (x.kind != TensorKind::Activation) continue;
    const int l = x.layer;
    const LayerType type = g.layers[l].type();
    // Recomputation covers whole segments back to a checkpoint, so it also drops activations no
    // backward task reads (e.g. an add output that only feeds a relu); offload only pays for
    // what backward reads.
    if (!need[t] && (name == "vdnn-all" || name == "vdnn-conv")) continue;
    if (name == "vdnn-all") {
      table[t] = Residency::Offload;
    } else if (name == "vdnn-conv") {
      if (consumed_by(g, l, LayerType::Conv)) table[t] = Residency::Offload;
    } else if (name == "superneurons") {
      // §3.3-3.4: conv outputs are the checkpoints, cached and offloaded when memory runs out;
      // the cheap layers' outputs are recomputed.
      if (l != 0 && type != LayerType::Conv && type != LayerType::SoftmaxLoss) table[t] = Residency::Recompute;
    } else if (name == "checkpoint-sqrt") {
      if (l != 0 && !sqrt_keep[t] && type != LayerType::SoftmaxLoss) table[t] = Residency::Recompute;
    }
  }
  bound_segments(g, tg, table);
  return table;
}

}  // namespace

std::unique_ptr<Strategy> make_baseline_strategy(const std::string& name, const Graph& g, const TaskGraph& tg,
                                                 const CostTable& /*costs*/) {
  std::vector<Residency> table = baseline_table(name, g, tg);
  if (name == "keep-all") return make_table_strategy(name, table, PrefetchMode::OnDemand, false, false);
  if (name == "vdnn-all" || name == "vdnn-conv")
    return make_table_strategy(name, table, PrefetchMode::NextLayer, false, false);
  if (name == "superneurons") return make_table_strategy(name, table, PrefetchMode::NextLayer, true, false);
  if (name == "checkpoint-sqrt") return make_table_strategy(name, table, PrefetchMode::OnDemand, false, false);
  UCPLAN_CHECK(false, "unknown baseline strategy " + name);
  return nullptr;
}

namespace {

bool better(const ScheduleResult& a, const ScheduleResult& b) {
  if (!b.ok) return a.ok;
  if (!a.ok) return false;
  auto key = [](const ScheduleResult& r) {
    return std::make_tuple(r.round_ns, r.offload_bytes + r.prefetch_bytes, r.recompute_ns, r.arena_bytes);
  };
  return key(a) < key(b);
}

// Arena placement, part of the search: moDNN's first fit, best fit, or two-ended (first fit, what
// the backward pass needs from the top down).
struct Placement {
  bool best_fit = false;
  bool two_ended = false;
};

// A residency table run with moDNN's mechanisms (Eq. 4 prefetch, Eq. 5 gain, offload on demand),
// abandoned as soon as it cannot beat `best` (branch and bound).
ScheduleResult simulate_ucplan_table(const ScheduleInput& in, const std::vector<Residency>& table, Placement placement,
                                     const ScheduleResult& best) {
  auto strategy = make_table_strategy("ucplan", table, PrefetchMode::Eq4, true, true, in.offload);
  ScheduleInput bounded = in;
  bounded.best_fit = placement.best_fit;
  bounded.two_ended = placement.two_ended;
  if (best.ok) bounded.abandon_after_ns = best.round_ns;
  return simulate_schedule(bounded, *strategy);
}

// Recomputing activation t re-runs its forward task (at its fastest configuration).
std::int64_t forward_ns(const TaskGraph& tg, const CostTable& costs, int t) {
  return costs.tasks[costs.forward_task[tg.tensors[t].layer]].time_ns;
}

// Local search over the residency table with moves in both directions, each judged by the
// simulator and kept only if it makes the round faster. The seeds above only ever move tensors
// off the device; here a recomputed or offloaded tensor is brought back to keep when the budget
// has room for it (most expensive to redo first), and a kept one is recomputed or offloaded
// when that frees memory the rest of the schedule can use (most bytes per nanosecond of
// recomputation first). Moves are tried in groups, split in halves when a group as a whole does
// not help (as delta debugging does), so a large network with few simulations to spare still
// gets every move considered; a small one gets them one by one. Passes repeat until none
// improves or the work budget (simulated steps plus arena blocks looked at: deterministic,
// unlike a time limit) is spent.
void refine_by_local_search(const ScheduleInput& in, ScheduleResult& best, std::vector<Residency>& best_table,
                            Placement placement, std::vector<ScheduleResult::Candidate>& log) {
  const Graph& g = *in.graph;
  const TaskGraph& tg = *in.tasks;
  const CostTable& costs = *in.costs;
  const int nt = static_cast<int>(tg.tensors.size());
  const std::vector<char> need = backward_needed(tg);
  constexpr int kMaxPasses = 4;
  const std::int64_t budget = in.local_search_budget;  // default: about 0.5 s of simulation on one core
  std::int64_t spent = 0, last_cost = std::max<std::int64_t>(best.work, 1);
  int tried = 0, accepted = 0;
  auto run = [&](const std::vector<Residency>& table) {
    ScheduleResult r = simulate_ucplan_table(in, table, placement, best);
    spent += r.work;
    last_cost = std::max<std::int64_t>(r.work, 1);
    ++tried;
    return r;
  };
  auto redo_ns = [&](int t) { return forward_ns(tg, costs, t); };
  // Tried in tiers: back to keep (the most expensive recomputation first), offloaded to
  // recomputed, recomputed to offloaded, then kept to recomputed or offloaded (most bytes freed
  // per nanosecond of recomputation first; an offload ranks as if it freed a thousandth).
  struct Move {
    int tensor;
    Residency to;
    int tier;         // smaller first
    double priority;  // within a tier, larger first
  };
  // Applies moves [lo, hi) together; if that does not help, each half on its own.
  std::function<void(const std::vector<Move>&, std::size_t, std::size_t)> try_moves =
      [&](const std::vector<Move>& moves, std::size_t lo, std::size_t hi) {
        if (spent > budget) return;
        std::vector<Residency> table = best_table;
        for (std::size_t i = lo; i < hi; ++i) table[moves[i].tensor] = moves[i].to;
        bound_segments(g, tg, table);
        if (table == best_table) return;
        ScheduleResult r = run(table);
        if (better(r, best)) {
          best = std::move(r);
          best_table = std::move(table);
          accepted += static_cast<int>(hi - lo);
          return;
        }
        if (hi - lo == 1) return;
        const std::size_t mid = lo + (hi - lo) / 2;
        try_moves(moves, lo, mid);
        try_moves(moves, mid, hi);
      };
  for (int pass = 0; pass < kMaxPasses && spent <= budget; ++pass) {
    std::vector<Move> moves;
    for (int t = 0; t < nt; ++t) {
      const Tensor& x = tg.tensors[t];
      if (x.kind != TensorKind::Activation || x.layer == 0 || x.host_input) continue;
      if (g.layers[x.layer].type() == LayerType::SoftmaxLoss) continue;
      const Residency r = best_table[t];
      const double bytes = static_cast<double>(x.bytes(costs.sub_batch));
      const double redo = static_cast<double>(std::max<std::int64_t>(redo_ns(t), 1));
      if (r != Residency::Keep) {
        moves.push_back({t, Residency::Keep, 0, redo});
      } else if (need[t]) {
        moves.push_back({t, Residency::Recompute, 3, bytes / redo});
        if (in.offload)
          moves.push_back({t, Residency::Offload, 3, bytes / redo * 1e-3});  // a copy costs more than its bytes suggest
      }
      if (r == Residency::Offload) moves.push_back({t, Residency::Recompute, 1, bytes / redo});
      if (r == Residency::Recompute && need[t] && in.offload) moves.push_back({t, Residency::Offload, 2, bytes / redo});
    }
    std::stable_sort(moves.begin(), moves.end(), [](const Move& a, const Move& b) {
      return a.tier != b.tier ? a.tier < b.tier : a.priority > b.priority;
    });
    // Two moves of one tensor never share a group: the later would overwrite the earlier.
    std::vector<Move> first, second;
    std::vector<char> seen(nt, 0);
    for (const Move& m : moves) (seen[m.tensor]++ ? second : first).push_back(m);
    const int accepted_before = accepted;
    for (const std::vector<Move>* list : {&first, &second}) {
      if (list->empty()) continue;
      // Groups as small as the budget left allows (every move alone when it allows that).
      const std::int64_t affordable = std::max<std::int64_t>((budget - spent) / last_cost / 2, 1);
      const std::size_t group = std::max<std::size_t>(1, (list->size() + affordable - 1) / affordable);
      for (std::size_t lo = 0; lo < list->size(); lo += group) try_moves(*list, lo, std::min(list->size(), lo + group));
    }
    log.push_back({fmt::format("local search pass {}: {} simulations, {} moves kept", pass + 1, tried,
                               accepted - accepted_before),
                   best.round_ns, ""});
    tried = 0;
    if (accepted == accepted_before) break;
  }
}

ScheduleResult search_ucplan(const ScheduleInput& in, std::vector<Residency>* table_out) {
  const Graph& g = *in.graph;
  const TaskGraph& tg = *in.tasks;
  const CostTable& costs = *in.costs;
  const int nt = static_cast<int>(tg.tensors.size());
  const std::vector<char> need = backward_needed(tg);
  constexpr std::int64_t kWorkBudget = 200'000'000;
  ScheduleResult best;
  std::vector<Residency> best_table;
  Placement placement{false, in.two_ended};  // the one the best was found with
  auto run = [&](const std::vector<Residency>& table) { return simulate_ucplan_table(in, table, placement, best); };
  // Every activation but the input and the loss may be recomputed, convolutions included: on a
  // fast device re-running a conv (microseconds) beats copying its output back over PCIe
  // (tens of microseconds a MiB). SuperNeurons §3.4 keeps conv outputs as checkpoints; the
  // segment bound (bound_segments) keeps chains through them from growing without bound.
  auto recomputable = [&](int t) {
    const Tensor& x = tg.tensors[t];
    if (x.kind != TensorKind::Activation || x.layer == 0 || x.host_input) return false;
    return g.layers[x.layer].type() != LayerType::SoftmaxLoss;
  };
  auto redo_ns = [&](int t) { return forward_ns(tg, costs, t); };
  auto copy_back_ns = [&](int t) { return costs.h2d_ns(tg.tensors[t].bytes(costs.sub_batch)); };
  // Recomputing y needs its producer's inputs later; an input that nothing else needs then
  // (no backward task reads it) would be kept alive only for that: recompute it too when that
  // is cheaper than copying it back, back to the nearest checkpoint (reverse route order).
  auto close_segments = [&](std::vector<Residency>& table) {
    for (auto it = tg.route.rbegin(); it != tg.route.rend(); ++it) {
      const int y = tg.y_of[*it];
      if (*it == 0 || table[y] != Residency::Recompute) continue;
      for (int x : tg.tasks[costs.forward_task[*it]].reads)
        if (!need[x] && recomputable(x) && table[x] == Residency::Keep && redo_ns(x) < copy_back_ns(x))
          table[x] = Residency::Recompute;
    }
    bound_segments(g, tg, table);
  };
  // Seeds, all run with moDNN's mechanisms (Eq. 4 prefetch, Eq. 5 gain, offload on demand):
  // moDNN itself (everything kept, offloaded when memory runs out), the baselines' decisions,
  // SuperNeurons with its checkpoints offloaded early instead of cached, and a cost-aware
  // table that recomputes whatever is cheaper to redo than to copy back.
  std::vector<std::vector<Residency>> seeds;
  std::vector<std::string> seed_names{"moDNN",
                                      "vdnn-conv decisions",
                                      "superneurons decisions",
                                      "checkpoint-sqrt decisions",
                                      "superneurons, checkpoints offloaded early",
                                      "recompute what is cheaper than a copy"};
  if (!in.offload) seed_names.erase(seed_names.begin() + 4);
  std::vector<ScheduleResult::Candidate> log;
  seeds.push_back(std::vector<Residency>(nt, Residency::Keep));
  for (const char* b : {"vdnn-conv", "superneurons", "checkpoint-sqrt"}) seeds.push_back(baseline_table(b, g, tg));
  std::vector<Residency> sn_offload = baseline_table("superneurons", g, tg);
  std::vector<Residency> cheap(nt, Residency::Keep);
  for (int t = 0; t < nt; ++t) {
    const Tensor& x = tg.tensors[t];
    if (x.kind == TensorKind::Activation && need[t] && sn_offload[t] == Residency::Keep && x.layer != 0)
      sn_offload[t] = Residency::Offload;
    if (recomputable(t) && need[t] && redo_ns(t) < copy_back_ns(t)) cheap[t] = Residency::Recompute;
  }
  close_segments(cheap);
  bound_segments(g, tg, sn_offload);
  if (in.offload) seeds.push_back(sn_offload);
  seeds.push_back(cheap);
  // Chen et al.'s segments at finer spacings than sqrt(N): every articulation point (a residual
  // block's output) kept, or every second or third, the rest recomputed. At tight budgets on a
  // fast device these beat offloading, and the local search starts near them.
  for (int stride : {1, 2, 3}) {
    const std::vector<char> keep = sqrt_checkpoints(g, tg, stride);
    std::vector<Residency> table(nt, Residency::Keep);
    for (int t = 0; t < nt; ++t)
      if (recomputable(t) && !keep[t]) table[t] = Residency::Recompute;
    bound_segments(g, tg, table);
    seeds.push_back(std::move(table));
    seed_names.push_back(fmt::format("checkpoint every {} articulation point(s)", stride));
  }

  // Improvement from a table: what the simulation had to offload on demand is offloaded early
  // instead (the copy then overlaps compute); what is cheaper to recompute than to copy back,
  // or stalled compute longer than recomputing it would take, is recomputed.
  auto improve = [&](const std::string& name, std::vector<Residency> table, ScheduleResult result,
                     std::vector<Residency>* out_table, std::int64_t* spent) {
    log.push_back({name, result.ok ? result.round_ns : 0, result.failure});
    for (int iteration = 0; iteration < 3 && result.ok && *spent <= kWorkBudget; ++iteration) {
      bool improved = false;
      std::vector<Residency> early = table;
      bool changed = false;
      for (int t = 0; t < nt && in.offload; ++t) {
        if (!result.evicted_dirty[t] || early[t] != Residency::Keep) continue;
        const TensorKind k = tg.tensors[t].kind;
        if ((k == TensorKind::Activation || k == TensorKind::Aux) && need[t]) {
          early[t] = Residency::Offload;
          changed = true;
        }
      }
      if (changed) {
        ScheduleResult r = run(early);
        *spent += r.work;
        log.push_back({name + " + early offload", r.ok ? r.round_ns : 0, r.failure});
        if (better(r, result)) {
          result = std::move(r);
          table = std::move(early);
          improved = true;
        }
      }
      std::vector<Residency> redo = table;
      changed = false;
      for (int t = 0; t < nt; ++t) {
        if (!recomputable(t) || redo[t] == Residency::Recompute) continue;
        const bool moved = redo[t] == Residency::Offload || result.evicted_dirty[t];
        if (moved && (redo_ns(t) < copy_back_ns(t) || result.stall_by_tensor[t] > redo_ns(t))) {
          redo[t] = Residency::Recompute;
          changed = true;
        }
      }
      if (changed) {
        close_segments(redo);
        ScheduleResult r = run(redo);
        *spent += r.work;
        log.push_back({name + " + recompute", r.ok ? r.round_ns : 0, r.failure});
        if (better(r, result)) {
          result = std::move(r);
          table = std::move(redo);
          improved = true;
        }
      }
      if (!improved) break;
    }
    *out_table = std::move(table);
    return result;
  };

  // Simulating costs time roughly in proportion to the arena blocks looked at while evicting;
  // past a budget of that work (deterministic, unlike a time limit) no further candidate is
  // started. The baselines' own schedules and moDNN's come first, so the result is never worse
  // than any baseline; the recompute-heavy candidates, the most expensive, come last.
  std::int64_t work = 0;
  auto consider = [&](ScheduleResult r, std::vector<Residency> table) {
    work += r.work;
    if (better(r, best)) {
      best = std::move(r);
      best_table = std::move(table);
    }
  };
  for (const char* name : {"keep-all", "vdnn-all", "vdnn-conv", "superneurons", "checkpoint-sqrt"}) {
    const std::string n = name;
    if (!in.offload && n != "keep-all" && n != "checkpoint-sqrt") continue;  // these offload
    auto strategy = make_baseline_strategy(name, g, tg, costs);
    ScheduleResult r = simulate_schedule(in, *strategy);
    log.push_back({std::string(name) + " (its own schedule)", r.ok ? r.round_ns : 0, r.failure});
    consider(std::move(r), baseline_table(name, g, tg));
  }
  // The winning baseline's decisions, run with moDNN's mechanisms and improved, come first.
  std::vector<std::size_t> order{
      0, 1, 4, 5, 2, 3, 6, 7, 8};  // moDNN, vdnn-conv, the cost-aware ones, SuperNeurons, sqrt, finer segments
  if (!in.offload) order = {0, 1, 4, 2, 3, 5, 6, 7};  // without the early-offload seed
  if (best.ok) {
    seeds.push_back(best_table);
    seed_names.push_back("best baseline's decisions");
    order.insert(order.begin(), seeds.size() - 1);
  }
  for (const std::vector<Residency>& extra : in.extra_seeds) {  // exact mode: the MILP's table first
    std::vector<Residency> table = extra;
    bound_segments(g, tg, table);
    seeds.push_back(std::move(table));
    seed_names.push_back("the MILP's decisions");
    order.insert(order.begin(), seeds.size() - 1);
  }
  if (!in.offload)
    for (auto& seed : seeds) std::replace(seed.begin(), seed.end(), Residency::Offload, Residency::Keep);
  int skipped = 0;
  for (std::size_t i : order) {
    if (work > kWorkBudget) {
      ++skipped;
      continue;
    }
    std::vector<Residency> table;
    ScheduleResult first = run(seeds[i]);
    work += first.work;
    ScheduleResult r = improve(seed_names[i], seeds[i], std::move(first), &table, &work);
    if (better(r, best)) {
      best = std::move(r);
      best_table = std::move(table);
    }
  }
  // Placement is part of the search too: the best decisions again with best-fit placement
  // (fewer, larger holes), improved from there.
  if (best.ok && work <= kWorkBudget) {
    const Placement was = placement;
    placement.best_fit = true;  // run() places best-fit from here on
    ScheduleResult first = run(best_table);
    work += first.work;
    std::vector<Residency> table;
    ScheduleResult r = improve("best decisions, best-fit placement", best_table, std::move(first), &table, &work);
    if (better(r, best)) {
      best = std::move(r);
      best_table = std::move(table);
    } else {
      placement = was;  // keep placing as the best was placed
    }
  }
  if (best.ok) refine_by_local_search(in, best, best_table, placement, log);
  best.candidates_skipped = skipped;
  best.best_fit = placement.best_fit;
  best.two_ended = placement.two_ended;
  best.search_log = std::move(log);
  if (table_out) *table_out = best_table;
  return best;
}

}  // namespace

// Independent branches, the fastest plan wins: without offload and (if allowed) with, so allowing
// offload never gives a slower plan than forbidding it; each with moDNN's placement and with
// two-ended placement. Each branch searches on its own: a branch's plan used as another's seed
// or bound steers that search elsewhere, not always to better plans.
ScheduleResult schedule_ucplan(const ScheduleInput& in, std::vector<Residency>* table_out, ScheduleResult* kept,
                               std::vector<Residency>* kept_table) {
  if (kept) *kept = ScheduleResult{};
  struct Branch {
    ScheduleInput in;
    std::string name;
    ScheduleResult result;
    std::vector<Residency> table;
  };
  std::vector<Branch> branches;
  for (const bool offload : {false, true}) {
    if (offload != in.offload && (in.quick || offload)) continue;
    for (const bool two_ended : {false, true}) {
      if (two_ended && in.quick) continue;
      Branch b{in,
               fmt::format("{}{}: ", offload ? "offload" : "no offload", two_ended ? ", two-ended placement" : ""),
               {},
               {}};
      b.in.offload = offload;
      b.in.two_ended = two_ended;
      branches.push_back(std::move(b));
    }
  }
  // The branches share nothing but const inputs: they run on as many threads as there are cores,
  // and are merged in a fixed order, so the result does not depend on the threads.
  auto search = [](Branch& b) { b.result = search_ucplan(b.in, &b.table); };
  const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, branches.size());
  std::vector<std::thread> pool;
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (std::size_t k = 0; k + 1 < threads; ++k)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next++) < branches.size();) {
        try {
          search(branches[i]);
        } catch (...) {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
      }
    });
  for (std::size_t i; (i = next++) < branches.size();) search(branches[i]);
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);

  ScheduleResult best;
  std::vector<Residency> best_table;
  std::vector<ScheduleResult::Candidate> log;
  int skipped = 0;
  for (Branch& b : branches) {
    for (auto& c : b.result.search_log) log.push_back({b.name + c.name, c.round_ns, c.why});
    skipped += b.result.candidates_skipped;
    if (kept && !b.in.offload && better(b.result, *kept)) {
      *kept = b.result;
      if (kept_table) *kept_table = b.table;
    }
    if (better(b.result, best)) {
      best = std::move(b.result);
      best_table = std::move(b.table);
    }
  }
  best.search_log = std::move(log);
  best.candidates_skipped = skipped;
  if (table_out) *table_out = std::move(best_table);
  return best;
}

}  // namespace ucplan
