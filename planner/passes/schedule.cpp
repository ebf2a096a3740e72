#include "schedule.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <iterator>
#include <memory>
#include <span>
#include <string_view>

#include <fmt/format.h>

#include "planner/model/errors.h"
#include "offsets.h"
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
    case Residency::Hold:
      return "recompute and hold";
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

std::int64_t prefetch_penalty_ns(std::int64_t free_bytes, std::int64_t ws_bytes, std::int64_t pre_bytes,
                                 std::int64_t pre_ns, std::int64_t between_ns) {
  if (ws_bytes <= 0 || pre_bytes <= 0 || free_bytes < pre_bytes || free_bytes - ws_bytes >= pre_bytes) return 0;
  return std::max<std::int64_t>(0, pre_ns - between_ns);
}

std::size_t choose_fastest_fitting(const ConfigContext& ctx) {
  const auto& front = ctx.cost->front;
  std::size_t best = 0;
  for (std::size_t i = 0; i < front.size(); ++i)
    if (front[i].workspace_bytes <= ctx.largest_free) best = i;
  return best;
}

struct ScheduleStatics {
  const TaskGraph* tasks = nullptr;
  const CostTable* costs = nullptr;
  std::vector<int> order;  // round task ids, in route order
  int bwd_start = 0;       // position of the first backward task
  // Per task id: reads + accumulates, and every tensor it touches (TaskGraph::touched).
  std::vector<std::vector<int>> inputs_of, touched_of;
  std::vector<std::vector<int>> recompute_reads;  // per layer of the route: TaskGraph::recompute_reads
  std::vector<std::vector<int>> uses;             // per tensor: positions whose task touches it (sorted)
  std::vector<std::int64_t> rest_ns;              // per position: the tasks from it on at their fastest
  // The look-ahead's view of the route, per position: its task's inputs (flat: position p's are
  // [inputs_from[p], inputs_from[p + 1])), and over the positions before it, the sums of what
  // their tasks allocate at least (outputs, aligned, and a conv's smallest workspace) and of their
  // times at their fastest. The look-ahead looks at its whole window on every task; the tasks'
  // own records lie far apart in memory.
  std::vector<int> inputs_flat, inputs_from;
  std::vector<std::int64_t> reserve_before, time_before;
  // Per tensor: the positions where it is an input, as often as it is one there (a task may read
  // a tensor it also accumulates into); flat as inputs_flat.
  std::vector<int> input_at_flat, input_at_from;
  // Per tensor, at the costs' sub-batch: whether it is resident, its bytes (and aligned), and its
  // copies' times. Looked up on every look at a task; the Tensor records (names and all) are
  // far apart in memory and the copy times a fit to evaluate.
  std::vector<char> resident;
  std::vector<std::int64_t> bytes, aligned_bytes, h2d_ns, d2h_ns;
  std::vector<int> layer_of;  // per tensor: the layer that makes it
};

std::shared_ptr<const ScheduleStatics> make_schedule_statics(const Graph& g, const TaskGraph& tg,
                                                             const CostTable& costs) {
  auto sx = std::make_shared<ScheduleStatics>();
  sx->tasks = &tg;
  sx->costs = &costs;
  for (const Task& t : tg.tasks)
    if (t.round_task) sx->order.push_back(t.id);
  const std::size_t n = sx->order.size();
  sx->bwd_start = static_cast<int>(n);
  for (std::size_t p = 0; p < n; ++p)
    if (tg.tasks[sx->order[p]].kind != TaskKind::Forward) {
      sx->bwd_start = static_cast<int>(p);
      break;
    }
  sx->inputs_of.assign(tg.tasks.size(), {});
  sx->touched_of.assign(tg.tasks.size(), {});
  for (int task : sx->order) {
    const Task& t = tg.tasks[task];
    sx->inputs_of[task] = t.reads;
    sx->inputs_of[task].insert(sx->inputs_of[task].end(), t.accumulates.begin(), t.accumulates.end());
    sx->touched_of[task] = tg.touched(t);
  }
  sx->recompute_reads.assign(g.layers.size(), {});
  for (int l : tg.route)
    if (tg.forward_of[l] >= 0) sx->recompute_reads[l] = tg.recompute_reads(l);
  sx->uses.assign(tg.tensors.size(), {});
  for (std::size_t p = 0; p < n; ++p)
    for (int t : sx->touched_of[sx->order[p]])
      if (!tg.tensors[t].resident()) sx->uses[t].push_back(static_cast<int>(p));
  for (auto& u : sx->uses) u.erase(std::unique(u.begin(), u.end()), u.end());  // ascending already
  const std::size_t nt = tg.tensors.size();
  sx->resident.resize(nt);
  sx->bytes.resize(nt);
  sx->aligned_bytes.resize(nt);
  sx->h2d_ns.resize(nt);
  sx->d2h_ns.resize(nt);
  sx->layer_of.resize(nt);
  for (std::size_t t = 0; t < nt; ++t) {
    sx->resident[t] = tg.tensors[t].resident();
    sx->bytes[t] = tg.tensors[t].bytes(costs.sub_batch);
    sx->aligned_bytes[t] = align_up(sx->bytes[t]);
    sx->h2d_ns[t] = costs.h2d_ns(sx->bytes[t]);
    sx->d2h_ns[t] = costs.d2h_ns(sx->bytes[t]);
    sx->layer_of[t] = tg.tensors[t].layer;
  }
  sx->rest_ns.assign(n + 1, 0);
  for (std::size_t p = n; p-- > 0;) sx->rest_ns[p] = sx->rest_ns[p + 1] + costs.tasks[sx->order[p]].time_ns;
  sx->inputs_from.assign(1, 0);
  sx->reserve_before.assign(1, 0);
  sx->time_before.assign(1, 0);
  for (int task : sx->order) {
    const Task& t = tg.tasks[task];
    const std::vector<int>& in = sx->inputs_of[task];
    sx->inputs_flat.insert(sx->inputs_flat.end(), in.begin(), in.end());
    sx->inputs_from.push_back(static_cast<int>(sx->inputs_flat.size()));
    std::int64_t reserve = 0;
    for (int w : t.writes) reserve += sx->aligned_bytes[w];
    if (t.conv_kernel) reserve += align_up(costs.tasks[task].min_workspace);
    sx->reserve_before.push_back(sx->reserve_before.back() + reserve);
    sx->time_before.push_back(sx->time_before.back() + costs.tasks[task].time_ns);
  }
  sx->input_at_from.assign(nt + 1, 0);
  for (int t : sx->inputs_flat) ++sx->input_at_from[t + 1];
  for (std::size_t t = 0; t < nt; ++t) sx->input_at_from[t + 1] += sx->input_at_from[t];
  sx->input_at_flat.resize(sx->inputs_flat.size());
  std::vector<int> next(sx->input_at_from.begin(), sx->input_at_from.end() - 1);
  for (std::size_t p = 0; p < n; ++p)
    for (int i = sx->inputs_from[p]; i < sx->inputs_from[p + 1]; ++i)
      sx->input_at_flat[next[sx->inputs_flat[i]]++] = static_cast<int>(p);
  return sx;
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
      : in_(in),
        g_(*in.graph),
        tg_(*in.tasks),
        costs_(*in.costs),
        strategy_(strategy),
        statics_(in.statics ? in.statics : make_schedule_statics(g_, tg_, costs_)),
        order_(statics_->order),
        bwd_start_(statics_->bwd_start),
        inputs_of_(statics_->inputs_of),
        touched_of_(statics_->touched_of),
        recompute_reads_(statics_->recompute_reads),
        resident_(statics_->resident),
        bytes_(statics_->bytes),
        aligned_bytes_(statics_->aligned_bytes),
        h2d_ns_(statics_->h2d_ns),
        d2h_ns_(statics_->d2h_ns),
        arena_(0, 0) {
    UCPLAN_CHECK(statics_->tasks == &tg_ && statics_->costs == &costs_,
                 "a simulation's statics were made for its task graph and costs");
  }

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
    bool held = false;  // Hold, recomputed in the backward pass: no longer dropped to make room
  };

  struct EmitArgs {
    Stream stream = Stream::Compute;
    StepOp op = StepOp::Forward;
    std::string_view layer, tensor;  // views of the graph's names, copied only into a recorded plan
    std::int64_t duration = 0;
    std::span<const int> reads, writes, accumulates;  // tensor ids (views: the emit call reads them)
    int workspace = -1;                               // plan buffer id
    ReadySet workspace_waits = kNoneReady;
    int host_tensor = -1;  // offload/prefetch: the tensor whose host buffer is used
    bool ahead = false;    // prefetch of the next round's slice into a carried buffer
    std::vector<MicroStep> config;
    std::int64_t config_workspace = -1;  // a recomputed convolution: what its configuration needs
  };

  // --- set-up ---
  void compute_uses();
  int new_buffer(std::string_view tensor, std::int64_t offset, std::int64_t size, bool resident);
  int host_buffer_of(int t);
  void drop_unused_buffers();

  // --- mechanism ---
  int emit(const EmitArgs& a);
  void record_step(const EmitArgs& a, int id);
  bool allocate_tensor(int t, bool may_evict);
  BlockView view(const Arena::Block& blk) const;
  // `views`: the arena's blocks as view() sees them now (fill_views), where the caller searches
  // several sizes with nothing changed in between; null: filled here.
  Window find_window(std::int64_t size, const std::vector<BlockView>* views = nullptr) const;
  void fill_views(std::vector<BlockView>* views) const;
  Window find_pool_victims(std::int64_t need, std::int64_t now, std::int64_t copy_free) const;
  bool make_room(std::int64_t size, const std::vector<BlockView>* views = nullptr);
  void evict(int t);
  void offload(int t);
  void release_device_copy(int t, bool keep_value_on_host);
  ReadySet accesses(const TState& s) const;
  bool evictable(int owner) const;
  bool clean(int t) const;
  bool droppable(int t) const;
  bool ensure_resident(int t);
  bool prefetch(int t, bool may_evict);
  void copy_in(int t, bool ahead);
  bool recompute(int layer);
  void defragment();

  // --- Alg. 1 ---
  bool run_task(int pos);
  bool choose_and_allocate_workspace(int task, std::size_t* index, int* ws_buffer, ReadySet* ws_waits);
  void look_ahead(int pos, std::int64_t task_ns);
  bool copies_needed(int t, int depth, std::vector<int>* out) const;
  // copies_needed's precondition, kept in walkable_ for the look-ahead (and counted per position
  // in walkable_inputs_): called wherever a tensor's on_device, dropped or host_valid changes.
  void note_state(int t) {
    const TState& s = st_[t];
    const bool walkable = !resident_[t] && !s.on_device && (s.dropped || s.host_valid);
    if (walkable == (walkable_[t] != 0)) return;
    walkable_[t] = walkable;
    for (int i = statics_->input_at_from[t]; i < statics_->input_at_from[t + 1]; ++i) {
      const int p = statics_->input_at_flat[i];
      walkable_inputs_[p] += walkable ? 1 : -1;
      const std::uint64_t bit = std::uint64_t{1} << (p % 64);
      if (walkable_inputs_[p] > 0)
        positions_to_walk_[p / 64] |= bit;
      else
        positions_to_walk_[p / 64] &= ~bit;
    }
  }
  // The first position from `from` on with a walkable input; `end` when none before it.
  int next_to_walk(int from, int end) const;
  void finish_position(int pos);
  void drop_unkept(int pos);
  std::int64_t task_time(int task) const;
  const std::vector<int>& round_inputs(const Task& t) const { return inputs_of_[t.id]; }  // reads + accumulates
  void lock(std::span<const int> ts, int delta);
  // Round positions needing tensor t (compute_uses), ascending; tensors needed at a position.
  std::span<const int> uses(int t) const {
    return {uses_flat_.data() + uses_at_[t], static_cast<std::size_t>(uses_at_[t + 1] - uses_at_[t])};
  }
  std::span<const int> users_at(int pos) const {
    return {users_flat_.data() + users_from_[pos], static_cast<std::size_t>(users_from_[pos + 1] - users_from_[pos])};
  }

  const ScheduleInput& in_;
  const Graph& g_;
  const TaskGraph& tg_;
  const CostTable& costs_;
  Strategy& strategy_;
  std::shared_ptr<const ScheduleStatics> statics_;  // in_.statics, or made for this simulation
  const std::vector<int>& order_;                   // round task ids
  const int bwd_start_;
  // Per round task (by id), computed once instead of on every look at the task (the look-ahead
  // window looks at each task many times): reads + accumulates, and every tensor it touches.
  const std::vector<std::vector<int>>& inputs_of_;
  const std::vector<std::vector<int>>& touched_of_;
  const std::vector<std::vector<int>>& recompute_reads_;  // per layer of the route
  const std::vector<char>& resident_;                     // per tensor, as ScheduleStatics
  const std::vector<std::int64_t>& bytes_;
  const std::vector<std::int64_t>& aligned_bytes_;
  const std::vector<std::int64_t>& h2d_ns_;
  const std::vector<std::int64_t>& d2h_ns_;
  Arena arena_;
  Timeline timeline_;
  std::vector<PlanStep> meta_;  // per timeline step: what it does (times filled at the end)
  std::vector<TState> st_;
  // Per tensor, the round positions needing it (flat: tensor t's are [uses_at_[t], uses_at_[t+1]));
  // per position, the tensors with a use there (likewise). Flat arrays: a simulation builds them
  // anew for its strategy's decisions, and one vector per tensor cost an allocation each.
  std::vector<int> uses_flat_, uses_at_, users_flat_, users_from_;
  std::vector<int> scratch_missing_;  // reused by look_ahead
  // copies_needed's memory: per tensor, the smallest depth it was walked from in the current
  // walk (stamped walk_) and whether that found a value on the host, and the smallest depth a
  // walk from it found nothing in the current look-ahead (stamped look_).
  mutable std::vector<int> walked_depth_, walked_in_, empty_depth_, empty_in_;
  mutable std::vector<char> walked_found_;
  mutable int walk_ = 0, look_ = 0;
  // Per tensor: whether copies_needed may walk it (off the device, and dropped or on the host).
  // Most of the look-ahead's inputs are on the device or not yet made: a byte each keeps that
  // test out of their (far larger) states.
  std::vector<char> walkable_;
  // Per position: how many of its task's inputs are walkable, and a bit set of those with any.
  // The look-ahead walks only those: at the others it would find nothing to fetch.
  std::vector<int> walkable_inputs_;
  std::vector<std::uint64_t> positions_to_walk_;
  std::vector<std::size_t> scratch_over_;  // reused by choose_and_allocate_workspace
  std::vector<char> scratch_probe_;
  ConfigContext scratch_ctx_;
  int pos_ = 0;                                   // current position
  mutable ScheduleResult res_;                    // mutable for the work counter of the (const) window search
  mutable std::vector<BlockView> scratch_views_;  // reused by find_window
  std::vector<BlockView> probe_views_;            // reused by choose_and_allocate_workspace
  mutable std::vector<std::size_t> scratch_maxq_, scratch_minq_;
  std::vector<PlanBuffer> buffers_;
  std::vector<char> kernel_seen_;
  std::vector<int> resident_buffer_;  // per tensor: plan buffer of a resident tensor
  std::vector<int> carried_buffer_;   // per tensor: plan buffer carrying it across rounds (-1: none)
  bool in_defrag_retry_ = false;
  bool staged_ = false;               // the strategy gives a per-stage plan (Strategy::keep_into)
  std::vector<int> recomputed_ids_;   // a staged plan's tensors decided Recompute, ascending (drop_unkept)
  int step_limit_ = 0;                // steps a round may take before it counts as a runaway
  std::int64_t recompute_limit_ = 0;  // recomputations a round may take likewise
  bool runaway_ = false;
};

std::int64_t Scheduler::task_time(int task) const { return costs_.tasks[task].time_ns; }

void Scheduler::lock(std::span<const int> ts, int delta) {
  for (int t : ts)
    if (!resident_[t]) st_[t].lock += delta;
}

// Uses of each tensor by round position, extended for recomputation: a tensor that may be
// dropped and recomputed needs its producer's inputs (and saved state) wherever it is needed
// itself after it was first produced. The statics hold the uses before extension; what the
// decisions add goes to `extra`, merged in at the end.
void Scheduler::compute_uses() {
  const int nt = static_cast<int>(tg_.tensors.size());
  const auto& base = statics_->uses;
  std::vector<std::vector<int>> extra(static_cast<std::size_t>(nt));  // empty vectors allocate nothing
  std::vector<int> merged, need;
  auto merge = [&](int t, std::vector<int>& out) {  // base and extra, ascending, each once
    std::vector<int>& e = extra[t];
    std::sort(e.begin(), e.end());
    e.erase(std::unique(e.begin(), e.end()), e.end());
    out.clear();
    std::set_union(base[t].begin(), base[t].end(), e.begin(), e.end(), std::back_inserter(out));
  };
  // Reverse route order: a recomputed tensor's consumers come later in the route, so their
  // extensions are known before the tensor's own producer inputs are extended.
  for (auto it = tg_.route.rbegin(); it != tg_.route.rend(); ++it) {
    const int l = *it;
    const int y = tg_.y_of[l];
    if (l == 0 || !recomputed(st_[y].decision)) continue;
    merge(y, merged);
    if (merged.empty()) continue;
    const int produced_at = merged.front();  // the forward task itself
    // Held from its first recomputation in the backward pass: needed no later than that.
    auto end = merged.end();
    if (st_[y].decision == Residency::Hold) {
      end = std::lower_bound(merged.begin(), merged.end(), bwd_start_);
      if (end != merged.end()) ++end;
    }
    need.assign(std::upper_bound(merged.begin(), end, produced_at), end);
    for (int x : recompute_reads_[l]) {
      if (resident_[x]) continue;
      extra[x].insert(extra[x].end(), need.begin(), need.end());
    }
  }
  uses_at_.assign(static_cast<std::size_t>(nt) + 1, 0);
  uses_flat_.clear();
  for (int t = 0; t < nt; ++t) {
    if (extra[t].empty()) {
      uses_flat_.insert(uses_flat_.end(), base[t].begin(), base[t].end());
    } else {
      merge(t, merged);
      uses_flat_.insert(uses_flat_.end(), merged.begin(), merged.end());
    }
    uses_at_[t + 1] = static_cast<int>(uses_flat_.size());
  }
  // Tensors by position, in tensor order within a position (a counting sort).
  users_from_.assign(order_.size() + 1, 0);
  for (int p : uses_flat_) ++users_from_[p + 1];
  for (std::size_t p = 0; p < order_.size(); ++p) users_from_[p + 1] += users_from_[p];
  users_flat_.assign(uses_flat_.size(), 0);
  std::vector<int> fill(users_from_.begin(), users_from_.end() - 1);
  for (int t = 0; t < nt; ++t)
    for (int p : uses(t)) users_flat_[fill[p]++] = t;
}

int Scheduler::new_buffer(std::string_view tensor, std::int64_t offset, std::int64_t size, bool resident) {
  PlanBuffer b;
  b.id = static_cast<int>(buffers_.size());
  if (in_.record_plan) b.tensor = tensor;
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
  if (in_.record_plan) h.tensor = tensor.name;
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

// The plan's record of step `id` (what emit issued for `a`): its buffers, its configuration, and
// the first and last step of every buffer it touches.
void Scheduler::record_step(const EmitArgs& a, int id) {
  PlanStep ps;
  ps.id = id;
  ps.stream = a.stream;
  ps.op = a.op;
  ps.layer = a.layer;
  ps.tensor = a.tensor;
  ps.waits = timeline_.step(id).waits();
  auto buffers_of = [&](std::span<const int> ts) {
    std::vector<int> out;
    for (int t : ts) {
      int b = resident_[t] ? resident_buffer_[t] : st_[t].buffer;
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
  ps.config_workspace_bytes = a.config_workspace;
  ps.ahead = a.ahead;
  auto touch = [&](int b) {
    if (buffers_[b].first_step < 0) buffers_[b].first_step = id;
    buffers_[b].last_step = std::max(buffers_[b].last_step, id);
  };
  for (int b : ps.reads) touch(b);
  for (int b : ps.writes) touch(b);
  for (int b : ps.accumulates) touch(b);
  if (ps.workspace >= 0) touch(ps.workspace);
  meta_.push_back(std::move(ps));
}

int Scheduler::emit(const EmitArgs& a) {
  ReadySet waits = kNoneReady;
  for (int t : a.reads) {
    if (resident_[t]) continue;
    merge_into(waits, st_[t].writer);
    merge_into(waits, st_[t].alloc_waits);
  }
  auto for_write = [&](int t) {
    if (resident_[t]) return;
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
      if (!resident_[t] && st_[t].writer[static_cast<int>(Stream::H2D)] >= 0) res_.stall_by_tensor[t] += stall;
  }

  if (in_.record_plan) record_step(a, id);
  for (int t : a.reads) {
    if (resident_[t]) continue;
    merge_into(st_[t].readers, id, a.stream);
    st_[t].alloc_waits = kNoneReady;
    st_[t].access_end = std::max(st_[t].access_end, step.end);
  }
  auto wrote = [&](int t) {
    if (resident_[t]) return;
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
  if (resident_[owner]) return false;
  return st_[owner].lock == 0;
}

// Freeing it costs no copy: the host holds its value, it will be recomputed, or it has none yet.
bool Scheduler::clean(int t) const {
  const TState& s = st_[t];
  return s.host_valid || !s.produced || droppable(t);
}

// A tensor planned for recomputation may be dropped whenever it holds a value: its producer's
// inputs are kept alive for every later use of it (compute_uses). A held one (Hold) only until
// its recomputation in the backward pass: its inputs are kept alive to then, and it stays.
bool Scheduler::droppable(int t) const {
  const TState& s = st_[t];
  return recomputed(s.decision) && s.produced && !s.held;
}

void Scheduler::release_device_copy(int t, bool keep_value_on_host) {
  TState& s = st_[t];
  UCPLAN_CHECK(s.on_device, "release of a tensor on the device");
  if (s.buffer >= 0 && s.buffer == carried_buffer_[t]) {
    // The round is done with its slice in the carried buffer, which now takes the next round's
    // (plan.h); a later use copies the slice in again, into the arena.
    copy_in(t, true);
  } else {
    ReadySet ready = accesses(s);
    std::int64_t ready_end = s.access_end;
    if (keep_value_on_host && s.host_writer >= 0) {
      merge_into(ready, s.host_writer, Stream::D2H);
      ready_end = std::max(ready_end, s.host_writer_end);
    }
    arena_.release(s.offset, ready, ready_end);
  }
  s.on_device = false;
  s.buffer = -1;
  s.produced = false;
  s.fresh = false;
  s.writer = s.readers = s.alloc_waits = kNoneReady;
  s.access_end = 0;
  note_state(t);
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
    release_device_copy(t, false);  // notes the state
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
  a.duration = d2h_ns_[t];
  a.reads = std::span<const int>(&t, 1);
  a.host_tensor = t;
  host_buffer_of(t);
  emit(a);
  st_[t].host_valid = true;
  note_state(t);
  res_.offload_bytes += bytes_[t];
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
      b.dirty_ns = d2h_ns_[blk.owner];  // what an offload copies
      b.dirty_bytes = s.size;
    }
    if (s.fresh) b.fresh_bytes = s.size;
    if (s.next_use < uses(blk.owner).size()) b.next_use = uses(blk.owner)[s.next_use];
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
// A drop of what will be recomputed counts as free here. Counting its recomputation later (its
// producer's time, and that of any input dropped too) as a delay now was measured on the 44
// points of benchmarks/optimality.py part A: 463.2 -> 520.0 points in all (resnet20 b64 on the
// V100 model at 25 % of the peak: +58.2 -> +94.4 %), though ResNet-20's first stage alone at
// 25 MiB (H100 model) went from +39.1 to +36.1 % (+38.1 % as the first tie-break after the
// delay). Not kept: which drop costs least later depends on what the schedule does next.
// The search looks at every block's view once, and filling the views was about half its cost
// (the 10,455-layer ResNet), so a caller probing several sizes in one state (the workspace of
// each configuration, then making room for the chosen one) fills them once. The work counted
// is the same either way: it measures the search, and the search's budget must not depend on
// how the views were had.
void Scheduler::fill_views(std::vector<BlockView>* views) const {
  const auto& blocks = arena_.blocks();
  views->resize(blocks.size());
  for (std::size_t i = 0; i < blocks.size(); ++i) (*views)[i] = view(blocks[i]);
}

Window Scheduler::find_window(std::int64_t size, const std::vector<BlockView>* views) const {
  const auto& blocks = arena_.blocks();
  const std::size_t n = blocks.size();
  res_.work += static_cast<std::int64_t>(n);
  const std::int64_t now = timeline_.stream_end(Stream::Compute);
  std::int64_t copy_free = timeline_.stream_end(Stream::D2H);
  if (!costs_.duplex) copy_free = std::max(copy_free, timeline_.stream_end(Stream::H2D));
  if (in_.pool_bytes > 0) return find_pool_victims(size - arena_.free_bytes(), now, copy_free);
  if (!views) {
    fill_views(&scratch_views_);
    views = &scratch_views_;
  }
  UCPLAN_CHECK(views->size() == n, "the views are of the arena's blocks now");
  const std::vector<BlockView>& bs = *views;
  // The monotonic queues hold window indices (vectors with a moving head: indices only ever grow).
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
    if (bs[i].owner == kWallBlock) {
      reset(i + 1);
      continue;
    }
    while (j < n && total < size) {
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

// A pool has no addresses to keep whole (Arena::Fit::Pool): the tensors to evict are any set
// holding `need` bytes, taken one at a time by the window's own order (not fresh, least delay,
// needed furthest ahead, fewest bytes to copy), so a window and a set agree on a single block.
Window Scheduler::find_pool_victims(std::int64_t need, std::int64_t now, std::int64_t copy_free) const {
  Window w;
  if (need <= 0) {
    w.found = true;
    w.delay = 0;
    w.soonest_use = kNeverUsed;
    return w;
  }
  const auto& blocks = arena_.blocks();
  std::vector<BlockView>& bs = scratch_views_;
  bs.clear();
  std::int64_t there = 0;
  for (const Arena::Block& blk : blocks) {
    BlockView v = view(blk);
    if (v.owner == kWallBlock) continue;
    there += v.size;
    bs.push_back(v);
  }
  if (there < need) return w;
  auto delay_of = [&](const BlockView& v) {
    std::int64_t ready = v.ready_end;
    if (v.dirty_ns > 0) ready = std::max(ready, std::max(copy_free, now) + v.dirty_ns);
    return std::max<std::int64_t>(0, ready - now);
  };
  auto key = [&](const BlockView& v) {
    return std::make_tuple(v.fresh_bytes > 0, delay_of(v), -static_cast<std::int64_t>(v.next_use), v.dirty_bytes,
                           v.off);
  };
  std::sort(bs.begin(), bs.end(), [&](const BlockView& a, const BlockView& b) { return key(a) < key(b); });
  w.found = true;
  w.delay = 0;
  w.soonest_use = kNeverUsed;
  std::int64_t taken = 0, dirty_ns = 0;
  std::int64_t ready = 0;
  for (const BlockView& v : bs) {
    if (taken >= need) break;
    taken += v.size;
    w.owners.push_back(v.owner);
    w.fresh_bytes += v.fresh_bytes;
    w.dirty_bytes += v.dirty_bytes;
    dirty_ns += v.dirty_ns;
    ready = std::max(ready, v.ready_end);
    w.soonest_use = std::min(w.soonest_use, v.next_use);
  }
  if (dirty_ns > 0) ready = std::max(ready, std::max(copy_free, now) + dirty_ns);
  w.delay = std::max<std::int64_t>(0, ready - now);
  w.offset = 0;
  return w;
}

bool Scheduler::make_room(std::int64_t size, const std::vector<BlockView>* views) {
  Window w = find_window(size, views);
  if (!w.found) return false;
  for (int owner : w.owners) evict(owner);
  return true;
}

bool Scheduler::allocate_tensor(int t, bool may_evict) {
  TState& s = st_[t];
  UCPLAN_CHECK(!s.on_device, "allocation of a tensor already on the device");
  const std::int64_t size = align_up(std::max<std::int64_t>(1, bytes_[t]));
  ReadySet waits = kNoneReady;
  // Two-ended: what is kept for the backward pass (by the table, or by a staged plan into its
  // first backward stage) goes at the top.
  const bool kept_across =
      s.decision == Residency::Keep || (staged_ && strategy_.keep_into(t, bwd_start_).value_or(false));
  const bool top =
      in_.two_ended && pos_ < bwd_start_ && kept_across && !uses(t).empty() && uses(t).back() >= bwd_start_;
  auto at = arena_.allocate(size, t, &waits, top);
  if (!at && may_evict && (strategy_.evict_on_demand() || in_defrag_retry_)) {
    if (make_room(size)) at = arena_.allocate(size, t, &waits, top);
  }
  if (!at) return false;
  s.on_device = true;
  note_state(t);
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
  copy_in(t, false);
  s.fresh = true;
  return true;
}

// Copies a tensor's host copy into its device buffer on the host-to-device stream (`ahead`: the
// next round's slice of the batch's input into its carried buffer).
void Scheduler::copy_in(int t, bool ahead) {
  host_buffer_of(t);
  EmitArgs a;
  a.stream = Stream::H2D;
  a.op = StepOp::Prefetch;
  a.tensor = tg_.tensors[t].name;
  a.duration = h2d_ns_[t];
  a.writes = std::span<const int>(&t, 1);
  a.host_tensor = t;
  a.ahead = ahead;
  emit(a);
  res_.prefetch_bytes += bytes_[t];
  if (tg_.tensors[t].host_input) res_.input_bytes += bytes_[t];
}

bool Scheduler::ensure_resident(int t) {
  if (resident_[t]) return true;
  TState& s = st_[t];
  if (s.on_device) return true;
  if (s.dropped) return recompute(tg_.tensors[t].layer);
  return prefetch(t, true);
}

bool Scheduler::recompute(int layer) {
  const int y = tg_.y_of[layer];
  const int ftask = costs_.forward_task[layer];
  const Task& f = tg_.tasks[ftask];
  const std::vector<int>& srcs = recompute_reads_[layer];
  lock(srcs, +1);
  lock(std::span<const int>(&y, 1), +1);
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
    a.writes = std::span<const int>(&y, 1);
    a.workspace = ws;
    a.workspace_waits = ws_waits;
    if (f.conv_kernel) {
      const ConvConfig& c = costs_.tasks[ftask].front[idx];
      a.duration = c.time_ns;
      if (in_.record_plan)
        for (const auto& m : c.micro) a.config.push_back({m.algo, m.micro_batch});
      a.config_workspace = c.workspace_bytes;
    } else {
      a.duration = task_time(ftask);
    }
    int id = emit(a);
    if (ws >= 0) arena_.release(buffers_[ws].offset, ReadySet{id, -1, -1}, timeline_.step(id).end);
    res_.recompute_ns += a.duration;
    res_.recompute_steps += 1;
    res_.recomputations[y] += 1;
    if (st_[y].decision == Residency::Hold && pos_ >= bwd_start_) st_[y].held = true;
    if (in_.record_stages) res_.recomputed_at[pos_].push_back(y);
    st_[y].dropped = false;
    note_state(y);
    st_[y].fresh = true;
  }
  lock(srcs, -1);
  lock(std::span<const int>(&y, 1), -1);
  return ok;
}

// Everything not resident leaves the device (offloaded if its value is not elsewhere), and the
// current task starts again in an empty dynamic region, where it fits by the lower bound. A
// strategy that may not offload keeps what only a copy could save, and may still not fit.
void Scheduler::defragment() {
  res_.defragmentations += 1;
  std::vector<int> on;
  for (const auto& blk : arena_.blocks())
    if (blk.owner >= 0 && blk.owner < kWorkspaceOwner && !resident_[blk.owner] &&
        (strategy_.may_offload() || clean(blk.owner)))
      on.push_back(blk.owner);
  for (int t : on) {
    st_[t].lock = 0;
    evict(t);
  }
}

bool Scheduler::choose_and_allocate_workspace(int task, std::size_t* index, int* ws_buffer, ReadySet* ws_waits) {
  const TaskCost& cost = costs_.tasks[task];
  ConfigContext& ctx = scratch_ctx_;  // every field set here; its vectors keep their capacity
  ctx.task = task;
  ctx.cost = &cost;
  ctx.largest_free = arena_.largest_free();
  ctx.fixed = task < static_cast<int>(in_.fixed_config.size()) ? in_.fixed_config[task] : -1;
  const std::size_t nf = cost.front.size();
  // Nothing changes the arena or the tensors from here until a workspace is allocated or room
  // made for one, so every window search until then looks at the same views.
  probe_views_.clear();
  auto views = [&]() -> const std::vector<BlockView>* {
    if (in_.pool_bytes > 0) return nullptr;  // a pool's search does not use them
    if (probe_views_.empty()) fill_views(&probe_views_);
    return &probe_views_;
  };
  ctx.evict_delay.assign(nf, 0);
  ctx.prefetch_penalty.assign(nf, 0);
  if (ctx.fixed < 0) {
    // Eq. (5) terms. T_off: delay of making room for the workspace. T_pre: the next task that
    // needs a prefetch; if the workspace leaves too little free memory for that copy, it starts
    // only after this task, and is late by whatever the tasks in between cannot hide
    // (prefetch_penalty_ns). Only if the copy would fit without the workspace: where free memory
    // is short of it already, it starts after this task whatever the workspace (charged to
    // every workspace there, a full arena ran its convolutions at their smallest). Measured on
    // resnet20 b64 (model:h100 and model:v100, every whole per cent from 100 to 25 % of the peak,
    // 152 budgets): the overheads sum to 1366.9 points instead of 1372.9 (at 25 % on model:h100
    // +34.9 % instead of +36.9 %: 55 us of convolutions starved of workspace instead of 106 us;
    // at 40 % on model:v100 +15.9 % instead of +15.2 %); resnet50, densenet40 b64 and vgg16 b32
    // at the six shares of optimality.py on both, 271.2 instead of 271.3.
    std::int64_t pre_bytes = 0, pre_ns = 0;
    const int last = std::min(static_cast<int>(order_.size()) - 1, pos_ + in_.lookahead);
    int p = pos_ + 1;
    for (; p <= last; ++p) {
      p = next_to_walk(p, last + 1);  // a value to prefetch is walkable: the tasks before need none
      if (p > last) break;
      for (int i = statics_->inputs_from[p]; i < statics_->inputs_from[p + 1]; ++i) {
        const int t = statics_->inputs_flat[i];
        const TState& ts = st_[t];
        if (walkable_[t] && !ts.dropped && ts.host_valid) {
          pre_bytes += aligned_bytes_[t];
          pre_ns += h2d_ns_[t];
        }
      }
      if (pre_bytes > 0) break;
    }
    const std::int64_t between_ns = statics_->time_before[p] - statics_->time_before[pos_ + 1];
    // Configurations that do not fit in free memory: the delay of making room for them. The
    // window search is linear in the arena's blocks, so at most kProbes of them are probed
    // (spread over the range, the fastest always among them); the others count as not fitting.
    constexpr std::size_t kProbes = 12;
    std::vector<std::size_t>& over = scratch_over_;
    over.clear();
    for (std::size_t i = 0; i < nf; ++i)
      if (align_up(cost.front[i].workspace_bytes) > ctx.largest_free) over.push_back(i);
    std::vector<char>& probe = scratch_probe_;
    probe.assign(nf, 0);
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
        Window w = find_window(ws, views());
        ctx.evict_delay[i] = w.found ? w.delay : kInf;
        memo_size = ws;
        memo_delay = ctx.evict_delay[i];
      }
      ctx.prefetch_penalty[i] = prefetch_penalty_ns(arena_.free_bytes(), ws, pre_bytes, pre_ns, between_ns);
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
    if (!at && (strategy_.evict_on_demand() || in_defrag_retry_) && make_room(ws, views()))
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
// whatever its recomputation needs (recursively, as deep as a segment may be). Returns whether
// the walk from t reached a value on the host. Called only for a walkable t (walkable_: off the
// device, and dropped or on the host), which its callers test first.
bool Scheduler::copies_needed(int t, int depth, std::vector<int>* out) const {
  const TState& s = st_[t];
  if (!s.dropped) {
    if (std::find(out->begin(), out->end(), t) == out->end()) out->push_back(t);
    return true;
  }
  if (depth > 16) return false;
  // The look-ahead walks the same recomputation chains for each of its tasks, and residual and
  // concatenated branches reach a value by several paths. A walk from t that found nothing on
  // the host finds nothing again from as deep or deeper for the rest of the look-ahead (its
  // prefetches only bring values from the host); one that walked t already from as shallow
  // a depth has added all it can. So the answers, and their order, are those of walking every
  // path, as the look-ahead did before (byte-identical plans, a third fewer steps walked).
  if (empty_in_[t] == look_ && empty_depth_[t] <= depth) return false;
  if (walked_in_[t] == walk_ && walked_depth_[t] <= depth) return walked_found_[t] != 0;
  walked_in_[t] = walk_;
  walked_depth_[t] = depth;
  bool found = false;
  for (int x : recompute_reads_[statics_->layer_of[t]])
    if (walkable_[x]) found = copies_needed(x, depth + 1, out) || found;
  walked_found_[t] = found;
  if (!found) {
    empty_in_[t] = look_;
    empty_depth_[t] = depth;
  }
  return found;
}

// Eq. (4): prefetch for a later task s now if starting after the current task would make s
// wait: T + T_alg(t) + Σ T_trans(d) > EST(s). Stops at the first task whose data could not be
// placed without evicting (moDNN Alg. 1 lines 16-17: a useless prefetch is worse than none).
void Scheduler::look_ahead(int pos, std::int64_t task_ns) {
  const PrefetchMode mode = strategy_.prefetch_mode();
  if (mode == PrefetchMode::OnDemand) return;
  // vDNN prefetches during the backward pass only, one layer ahead.
  if (mode == PrefetchMode::NextLayer && pos < bwd_start_ - 1) return;
  const std::int64_t t_end = timeline_.stream_end(Stream::Compute) + task_ns;
  const int current_layer = tg_.tasks[order_[pos]].layer;
  int next_layer = -1;
  ++look_;
  const int last = std::min(static_cast<int>(order_.size()) - 1, pos + in_.lookahead);
  for (int p = pos + 1; p <= last; ++p) {
    if (mode == PrefetchMode::NextLayer) {
      // vDNN: only the tasks of the next layer in backward order, started now.
      const int layer = tg_.tasks[order_[p]].layer;
      if (layer != current_layer) {
        if (next_layer < 0)
          next_layer = layer;
        else if (layer != next_layer)
          break;
      }
    } else {
      p = next_to_walk(p, last + 1);  // a task none of whose inputs is walkable needs nothing fetched
      if (p > last) break;
    }
    // What the tasks before it in the window allocate at least (a prefetch leaves room for it),
    // and when it starts at the earliest (EST).
    const std::int64_t reserve = statics_->reserve_before[p] - statics_->reserve_before[pos + 1];
    const std::int64_t est = t_end + statics_->time_before[p] - statics_->time_before[pos + 1];
    // The task's inputs still on the host, and those that the recomputation of dropped inputs needs.
    std::vector<int>& missing = scratch_missing_;
    missing.clear();
    ++walk_;
    for (int i = statics_->inputs_from[p]; i < statics_->inputs_from[p + 1]; ++i) {
      const int t = statics_->inputs_flat[i];
      if (walkable_[t]) copies_needed(t, 0, &missing);
    }
    std::int64_t bytes = 0, copy_ns = 0;
    for (int t : missing) {
      bytes += aligned_bytes_[t];
      copy_ns += h2d_ns_[t];
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
  }
}

int Scheduler::next_to_walk(int from, int end) const {
  int w = from / 64;
  std::uint64_t bits = positions_to_walk_[w] & (~std::uint64_t{0} << (from % 64));
  while (bits == 0) {
    if (++w * 64 >= end) return end;
    bits = positions_to_walk_[w];
  }
  return std::min(end, w * 64 + std::countr_zero(bits));
}

bool Scheduler::run_task(int pos) {
  // Free space whose last users on every stream have ended by now merges into one block: any
  // step issued from here on starts no earlier than the compute stream, so waiting for the
  // merged history costs no time, and a short block list keeps allocation and eviction fast.
  const std::int64_t now = std::min(
      {timeline_.stream_end(Stream::Compute), timeline_.stream_end(Stream::H2D), timeline_.stream_end(Stream::D2H)});
  arena_.coalesce(now);
  const int task = order_[pos];
  const Task& t = tg_.tasks[task];
  const std::vector<int>& touched = touched_of_[task];
  lock(touched, +1);
  bool ok = true;
  for (int d : round_inputs(t)) ok = ok && ensure_resident(d);
  if (ok && staged_) drop_unkept(pos);
  for (int d : t.writes)
    if (!resident_[d]) ok = ok && allocate_tensor(d, true);
  std::size_t idx = 0;
  int ws = -1;
  ReadySet ws_waits = kNoneReady;
  if (ok && t.conv_kernel) ok = choose_and_allocate_workspace(task, &idx, &ws, &ws_waits);
  if (!ok) {
    lock(touched, -1);
    return false;
  }
  if (in_.record_stages) res_.config_at[pos] = t.conv_kernel ? static_cast<int>(idx) : -1;
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
  if (t.conv_kernel && in_.record_plan)
    for (const auto& m : costs_.tasks[task].front[idx].micro) a.config.push_back({m.algo, m.micro_batch});
  const int id = emit(a);
  if (ws >= 0) arena_.release(buffers_[ws].offset, ReadySet{id, -1, -1}, timeline_.step(id).end);
  if (t.conv_kernel && in_.record_plan && !kernel_seen_[task]) {
    kernel_seen_[task] = 1;
    const TaskCost& c = costs_.tasks[task];
    PlanKernel k;
    k.layer = a.layer;
    k.op = a.op;
    k.config = a.config;
    k.workspace_bytes = c.front[idx].workspace_bytes;
    k.time_ns = c.front[idx].time_ns;
    k.undivided_ns = c.undivided_ns;
    k.fastest_ns = c.time_ns;
    k.baseline_ns = c.baseline_ns;
    res_.kernels.push_back(std::move(k));
  }
  for (int d : touched) st_[d].fresh = false;
  // Planned offloads start as soon as the value exists, overlapping the following tasks.
  for (int d : t.writes)
    if (strategy_.may_offload() && st_[d].decision == Residency::Offload && !uses(d).empty() &&
        uses(d).back() >= bwd_start_)
      offload(d);
  for (int d : t.accumulates) {
    st_[d].host_valid = false;  // the host copy, if any, is stale
    note_state(d);
  }
  lock(touched, -1);
  return true;
}

// A staged plan says, per position, which recomputable values stay into the next: the others go
// (what is used again later comes back by recomputation). Called when the task's inputs are on
// the device, so that values recomputed only to make them do not share memory with the task
// (the MILP's memory row counts the task's tensors and what is kept), and after the task.
void Scheduler::drop_unkept(int pos) {
  if (pos + 1 >= static_cast<int>(order_.size())) return;
  for (int d : recomputed_ids_) {
    TState& s = st_[d];
    if (!s.on_device || !s.produced || s.lock > 0) continue;
    if (s.next_use >= uses(d).size()) continue;
    if (strategy_.keep_into(d, pos + 1).value_or(true)) continue;
    s.dropped = true;
    release_device_copy(d, false);  // notes the state
  }
}

void Scheduler::finish_position(int pos) {
  if (staged_) drop_unkept(pos);
  for (int d : users_at(pos)) {
    TState& s = st_[d];
    while (s.next_use < uses(d).size() && uses(d)[s.next_use] <= pos) ++s.next_use;
    if (s.next_use == uses(d).size()) {
      if (s.on_device) release_device_copy(d, false);
      s.dropped = false;
      note_state(d);
      continue;
    }
    const int next = uses(d)[s.next_use];
    const bool crossing = pos < bwd_start_ && next >= bwd_start_;
    if (crossing && s.on_device && s.buffer == carried_buffer_[d]) {  // the next round's slice comes in now
      release_device_copy(d, true);
      continue;
    }
    // A staged plan says itself what stays into each position, except for a held value: it is
    // dropped here as in a table's schedule, since its inputs' uses end at its first backward use
    // (compute_uses), and one kept past it and dropped on demand could not be recomputed.
    if (!crossing || !s.on_device || (staged_ && s.decision != Residency::Hold)) continue;
    if (s.decision == Residency::Offload && s.host_valid) {
      release_device_copy(d, true);
    } else if (recomputed(s.decision) && tg_.tensors[d].kind == TensorKind::Activation && !tg_.tensors[d].host_input) {
      s.dropped = true;
      release_device_copy(d, false);  // notes the state
    }
  }
}

ScheduleResult Scheduler::run() {
  const int nt = static_cast<int>(tg_.tensors.size());
  st_.assign(nt, TState{});
  walked_in_.assign(nt, 0);
  walked_depth_.assign(nt, 0);
  walked_found_.assign(nt, 0);
  empty_in_.assign(nt, 0);
  empty_depth_.assign(nt, 0);
  for (int t = 0; t < nt; ++t) {
    st_[t].decision = strategy_.residency(t);
    // Only a layer's output can be made again by running the layer: a gradient, saved state or
    // input planned for recomputation would be dropped with nothing to bring it back.
    const Tensor& x = tg_.tensors[t];
    UCPLAN_CHECK(!recomputed(st_[t].decision) ||
                     (x.kind == TensorKind::Activation && !x.host_input && x.layer >= 0 && tg_.y_of[x.layer] == t),
                 "a strategy plans " + x.name + " for recomputation, which only a layer's output can be");
    if (x.host_input) st_[t].host_valid = true;
  }
  walkable_.assign(nt, 0);
  walkable_inputs_.assign(order_.size(), 0);
  positions_to_walk_.assign((order_.size() + 63) / 64, 0);
  for (int t = 0; t < nt; ++t) note_state(t);
  res_.evicted_dirty.assign(nt, 0);
  res_.recomputations.assign(nt, 0);
  res_.stall_by_tensor.assign(nt, 0);
  staged_ = nt > 0 && strategy_.keep_into(0, 0).has_value();
  recomputed_ids_.clear();
  if (staged_)
    for (int t = 0; t < nt; ++t)
      if (st_[t].decision == Residency::Recompute) recomputed_ids_.push_back(t);
  kernel_seen_.assign(tg_.tasks.size(), 0);
  compute_uses();
  if (in_.record_plan) meta_.reserve(2 * order_.size() + 64);  // a round emits about one step per task plus its copies
  if (in_.record_bounds) {
    res_.bound_at.reserve(order_.size());
    res_.work_at.reserve(order_.size());
  }
  // A buffer per tensor and about one per position more (workspace, recomputations), allocated
  // once instead of grown one doubling at a time.
  buffers_.reserve(nt + 2 * order_.size());

  // Weights and weight gradients: resident at the bottom for the whole program, laid out once
  // below the dynamic arena (not as arena blocks, which every allocation would walk past).
  resident_buffer_.assign(nt, -1);
  std::int64_t resident_end = 0;
  for (int t = 0; t < nt; ++t) {
    if (!resident_[t]) continue;
    const std::int64_t size = align_up(tg_.tensors[t].bytes(1));
    resident_buffer_[t] = new_buffer(tg_.tensors[t].name, resident_end, size, true);
    resident_end += size;
  }
  if (resident_end > in_.budget_bytes) {
    res_.failure = fmt::format("the weights and their gradients ({} bytes) do not fit in the budget", resident_end);
    return std::move(res_);
  }
  // The batch's input that the round's first task reads, carried across rounds (ScheduleInput::
  // carry_input): above the resident buffers for the whole program, holding the round's slice
  // when it starts.
  carried_buffer_.assign(nt, -1);
  if (in_.carry_input)
    for (int t : carriable_inputs(tg_)) {
      const Tensor& x = tg_.tensors[t];
      const std::int64_t size = aligned_bytes_[t];
      carried_buffer_[t] = new_buffer(x.name, resident_end, size, false);
      buffers_.back().carried = true;
      TState& s = st_[t];
      s.on_device = s.produced = s.fresh = true;
      s.offset = resident_end;
      s.size = size;
      s.buffer = carried_buffer_[t];
      note_state(t);
      resident_end += size;
    }
  if (resident_end > in_.budget_bytes) {
    res_.failure = fmt::format("the weights, their gradients and the carried input ({} bytes) do not fit in the budget",
                               resident_end);
    return std::move(res_);
  }
  res_.pool_bytes = in_.pool_bytes;
  if (in_.pool_bytes > 0) {
    arena_ = Arena(resident_end, std::max(resident_end, in_.pool_bytes), Arena::Fit::Pool);
  } else {
    arena_ = Arena(resident_end, in_.budget_bytes, in_.best_fit ? Arena::Fit::Best : Arena::Fit::First);
  }

  step_limit_ = 8 * static_cast<int>(order_.size()) + 1000;
  std::int64_t planned = 0;
  for (int t = 0; t < nt; ++t) planned += recomputed(st_[t].decision);
  recompute_limit_ = 4 * planned + 64;
  // Branch and bound: the compute stream runs every remaining task at least at its fastest, so
  // a candidate whose compute end plus that exceeds the best round found cannot win.
  const std::vector<std::int64_t>& rest_ns = statics_->rest_ns;
  std::int64_t steps_seen = 0;
  if (in_.record_stages) {
    res_.on_device_at.assign(order_.size(), {});
    res_.recomputed_at.assign(order_.size(), {});
    res_.config_at.assign(order_.size(), -1);
  }
  for (pos_ = 0; pos_ < static_cast<int>(order_.size()); ++pos_) {
    if (in_.record_stages)
      for (int t = 0; t < nt; ++t)
        if (st_[t].on_device && st_[t].produced && !resident_[t]) res_.on_device_at[pos_].push_back(t);
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
    const std::int64_t bound =
        std::max(timeline_.makespan(), timeline_.stream_end(Stream::Compute) + rest_ns[pos_ + 1]);
    if (in_.record_bounds) {
      res_.bound_at.push_back(bound);
      res_.work_at.push_back(res_.work);
    }
    if (bound > in_.abandon_after_ns) {
      ScheduleResult abandoned = abandoned_schedule(res_.work);
      abandoned.bound_at = std::move(res_.bound_at);
      abandoned.work_at = std::move(res_.work_at);
      return abandoned;
    }
    if (runaway_) {
      res_.failure = fmt::format("recomputation thrashes at this budget ({} recomputations, {} steps for {} tasks)",
                                 res_.recompute_steps, timeline_.size(), order_.size());
      return std::move(res_);
    }
    if (!ok) {
      const Task& t = tg_.tasks[order_[pos_]];
      res_.failure = strategy_.evict_on_demand()
                         ? fmt::format(
                               "{} of layer {} does not fit even after everything else was {} (with the "
                               "inputs its recomputation needs at once)",
                               task_kind_name(t.kind), g_.layers[t.layer].name(),
                               strategy_.may_offload() ? "offloaded" : "dropped that may be recomputed")
                         : fmt::format("out of memory at {} of layer {} (this strategy does not offload on demand)",
                                       task_kind_name(t.kind), g_.layers[t.layer].name());
      return std::move(res_);
    }
    finish_position(pos_);
  }
  for (int t = 0; t < nt; ++t)
    UCPLAN_CHECK(!st_[t].on_device || resident_[t],
                 "every tensor is dead at the end of a round: " + tg_.tensors[t].name);
  res_.round_ns = timeline_.makespan();
  const int round_steps = timeline_.size();

  // Final phase: the updates, once per iteration, after the last round.
  Timeline final_line;
  for (const Task& t : tg_.tasks) {
    if (t.round_task) continue;
    int fid = final_line.issue(Stream::Compute, task_time(t.id), kNoneReady);
    if (!in_.record_plan) continue;
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
  for (auto& r : res_.recomputed_at) std::sort(r.begin(), r.end());
  if (in_.record_plan) {
    for (int i = 0; i < round_steps; ++i) {
      meta_[i].start_ns = timeline_.step(i).start;
      meta_[i].end_ns = timeline_.step(i).end;
    }
    const int last = static_cast<int>(meta_.size()) - 1;
    for (auto& b : buffers_)
      if (b.resident || b.carried) {
        b.first_step = 0;
        b.last_step = last;
      }
    drop_unused_buffers();
    res_.steps = std::move(meta_);
    res_.buffers = std::move(buffers_);
  }
  res_.arena_bytes = arena_.high_water();
  if (in_.pool_bytes > 0 && in_.record_plan) {  // the buffers get their offsets now
    const OffsetReassignment o = assign_offsets_after_scheduling(res_.buffers, res_.steps, in_.budget_bytes + 1, true);
    res_.placement_work = o.search_work;
    if (!o.applied) {
      res_.failure =
          fmt::format("its buffers do not fit the budget once placed ({} bytes in use at most)", res_.arena_bytes);
      return std::move(res_);
    }
    res_.arena_bytes = o.after_bytes;
    res_.placement_search_nodes = o.search_nodes;
  }
  res_.ok = true;
  return std::move(res_);
}

}  // namespace

std::vector<int> carriable_inputs(const TaskGraph& tg) {
  std::vector<int> out;
  const auto first = std::find_if(tg.tasks.begin(), tg.tasks.end(), [](const Task& t) { return t.round_task; });
  if (first == tg.tasks.end()) return out;
  for (int t : first->reads) {
    const Tensor& x = tg.tensors[static_cast<std::size_t>(t)];
    if (x.host_input && x.kind == TensorKind::Activation && std::find(out.begin(), out.end(), t) == out.end())
      out.push_back(t);
  }
  return out;
}

ScheduleResult abandoned_schedule(std::int64_t work) {
  ScheduleResult r;
  r.failure = "slower than a candidate already found";
  r.work = work;
  return r;
}

ScheduleResult simulate_schedule(const ScheduleInput& in, Strategy& strategy) {
  Scheduler s(in, strategy);
  return s.run();
}

}  // namespace ucplan
