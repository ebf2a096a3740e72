#include "search.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "offsets.h"
#include "parallel.h"
#include "planner/model/errors.h"
#include "planner/model/units.h"
#include "segments.h"
#include "strategies.h"

namespace ucplan {
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

}  // namespace

// Within a branch the search simulates many tables more than once: the descents after its kicks
// come back to tables tried before (resnet20 b64 at 50 % of the peak, model:h100: 48 % of the
// compile's 62,000 simulations repeated one of the same branch). A simulation is deterministic,
// so a repeat returns what the first returned, but for the branch-and-bound bound, which may
// differ: the first records the bound it reached at each round position and the work spent by
// then (ScheduleInput::record_bounds), so a repeat against a tighter bound is abandoned where the
// first would have been, with the work spent by then, and one against a looser bound gets the
// first's result, unless the first was abandoned before it ended (then it is simulated again).
// The search's work counter, and so its course, stay as without the memo. One memo per branch,
// used by one thread; a simulation of another input (another budget, pool, placement, offload,
// configurations or look-ahead) is told apart. On every network: ResNet-152 b256 at 12 GiB
// repeats fewer tables (6 % of its simulations) and compiles 5 % faster with it; the
// 10,455-layer ResNet fills its 32 MiB with a few dozen and compiles in the same time and memory.
struct SimulationMemo {
  struct Entry {
    std::vector<Residency> table;
    Placement placement;
    std::int64_t budget_bytes = 0, pool_bytes = 0;
    bool offload = false;
    std::int64_t bound = 0;  // the abandon_after_ns it ran with
    ScheduleResult result;
  };
  const Graph* graph = nullptr;
  const TaskGraph* tasks = nullptr;
  const CostTable* costs = nullptr;
  std::int64_t batch = 0;
  int lookahead = 0;
  std::vector<int> fixed_config;
  std::unordered_map<std::uint64_t, std::vector<Entry>> entries;  // by hash of the table and the input
  std::size_t bytes = 0;                                          // what the entries hold, about
  static std::size_t bytes_of(const Entry& e) {
    const ScheduleResult& r = e.result;
    return sizeof(Entry) + e.table.capacity() * sizeof(Residency) + r.failure.capacity() +
           r.recomputations.capacity() * sizeof(int) + r.evicted_dirty.capacity() +
           (r.stall_by_tensor.capacity() + r.bound_at.capacity() + r.work_at.capacity()) * sizeof(std::int64_t);
  }
  // Past this no entry is added (lookups go on). Measured on densenet40 b64 at 25 % of the peak,
  // model:h100: 20.0 s and 39 MB resident without a memo; 17.2 s and 53 MB with 8 MiB per memo,
  // 15.5 s and 97 MB with 32 MiB, 14.7 s and 150 MB unbounded (resnet50 b64, measured H100
  // profile, 50 %: 74.2 s and 31 MB, 59.4 s and 119 MB with 32 MiB, 54.4 s and 267 MB unbounded).
  static constexpr std::size_t kMaxBytes = std::size_t{32} << 20;

  explicit SimulationMemo(const ScheduleInput& in)
      : graph(in.graph),
        tasks(in.tasks),
        costs(in.costs),
        batch(in.batch),
        lookahead(in.lookahead),
        fixed_config(in.fixed_config) {}
  bool serves(const ScheduleInput& in) const {
    return !in.record_plan && !in.record_stages && in.graph == graph && in.tasks == tasks && in.costs == costs &&
           in.batch == batch && in.lookahead == lookahead && in.fixed_config == fixed_config;
  }
  static std::uint64_t hash(const ScheduleInput& in, const std::vector<Residency>& table, Placement placement) {
    std::uint64_t h = 0xCBF29CE484222325ULL;  // FNV-1a
    auto mix = [&h](std::uint64_t v) {
      h ^= v;
      h *= 0x100000001B3ULL;
    };
    for (Residency r : table) mix(static_cast<std::uint64_t>(r));
    mix(static_cast<std::uint64_t>(in.budget_bytes));
    mix(static_cast<std::uint64_t>(in.pool_bytes));
    mix(in.offload + 2 * placement.best_fit + 4 * placement.two_ended + 8 * in.carry_input);
    return h;
  }
  Entry* find(const ScheduleInput& in, const std::vector<Residency>& table, Placement placement, std::uint64_t h) {
    auto it = entries.find(h);
    if (it == entries.end()) return nullptr;
    for (Entry& e : it->second)
      if (e.placement.best_fit == placement.best_fit && e.placement.two_ended == placement.two_ended &&
          e.budget_bytes == in.budget_bytes && e.pool_bytes == in.pool_bytes && e.offload == in.offload &&
          e.table == table)
        return &e;
    return nullptr;
  }
  // A simulation of `table` against `bound`: in `seen` (its earlier entry, which it replaces), or
  // a new entry while the memo holds less than kMaxBytes.
  void remember(Entry* seen, std::uint64_t h, const ScheduleInput& in, const std::vector<Residency>& table,
                Placement placement, std::int64_t bound, const ScheduleResult& r) {
    if (seen) {
      bytes -= bytes_of(*seen);
      seen->result = r;
      seen->bound = bound;
      bytes += bytes_of(*seen);
    } else if (bytes < kMaxBytes) {
      std::vector<Entry>& same = entries[h];
      same.push_back({table, placement, in.budget_bytes, in.pool_bytes, in.offload, bound, r});
      bytes += bytes_of(same.back());
    }
  }
  // What the entry's simulation returns against `bound`, if it can be known from it.
  static std::optional<ScheduleResult> against(const Entry& e, std::int64_t bound) {
    const std::vector<std::int64_t>& at = e.result.bound_at;
    for (std::size_t p = 0; p < at.size(); ++p)
      if (at[p] > bound) return abandoned_schedule(e.result.work_at[p]);
    if (!at.empty() && at.back() > e.bound) return std::nullopt;  // the first was abandoned, this one would not be
    return e.result;
  }
};

namespace {

// A residency table run with moDNN's mechanisms (Eq. 4 prefetch, Eq. 5 gain, offload on demand),
// abandoned as soon as it cannot beat `best` (branch and bound). The search's simulations leave
// out the plan's record (ScheduleInput::record_plan); the winner of all branches is simulated
// again with it (recorded(), in schedule_ucplan).
ScheduleResult simulate_ucplan_table(const ScheduleInput& in, const std::vector<Residency>& table, Placement placement,
                                     const ScheduleResult& best, bool record_plan = false) {
  ScheduleInput bounded = in;
  bounded.best_fit = placement.best_fit;
  bounded.two_ended = placement.two_ended;
  bounded.record_plan = record_plan;
  if (best.ok) bounded.abandon_after_ns = best.round_ns;
  SimulationMemo* memo = in.memo && in.memo->serves(bounded) ? in.memo.get() : nullptr;
  std::uint64_t h = 0;
  SimulationMemo::Entry* seen = nullptr;
  if (memo) {
    h = SimulationMemo::hash(in, table, placement);
    seen = memo->find(in, table, placement, h);
    if (seen)
      if (std::optional<ScheduleResult> known = SimulationMemo::against(*seen, bounded.abandon_after_ns)) return *known;
    bounded.record_bounds = true;
  }
  auto strategy = make_table_strategy("ucplan", table, PrefetchMode::Eq4, true, true, in.offload);
  ScheduleResult r = simulate_schedule(bounded, *strategy);
  if (memo) memo->remember(seen, h, in, table, placement, bounded.abandon_after_ns, r);
  return r;
}

// `r`, found by simulate_ucplan_table without the plan's record, with it: the same table and
// placement simulated again, which gives the same schedule (the simulation is deterministic).
ScheduleResult recorded(const ScheduleInput& in, const std::vector<Residency>& table, Placement placement,
                        ScheduleResult r) {
  if (!r.ok || !r.steps.empty()) return r;
  ScheduleResult again = simulate_ucplan_table(in, table, placement, ScheduleResult{}, true);
  UCPLAN_CHECK(again.ok && again.round_ns == r.round_ns && again.arena_bytes == r.arena_bytes,
               "a table simulated again with the plan's record gives the same schedule");
  again.work = r.work;  // the search's bookkeeping, which a simulation does not set
  again.best_fit = r.best_fit;
  again.two_ended = r.two_ended;
  return again;
}

// A pool branch's plan (ScheduleInput::pool_bytes), found by a search that counted bytes, with its
// record and its buffers placed: its table simulated again in the pool of each slack of
// kPoolSlackShifts in turn, from the search's own (`own_shift`) on, until the placement fits the
// budget (offsets.h).
ScheduleResult place_pool_plan(const ScheduleInput& in, int own_shift, const std::vector<Residency>& table,
                               ScheduleResult r) {
  if (!r.ok) return r;
  std::vector<ScheduleResult::Candidate> log = std::move(r.search_log);
  for (const int shift : kPoolSlackShifts) {
    if (shift > own_shift) continue;
    ScheduleInput at = in;
    at.pool_bytes = ScheduleInput::pool_for(in.budget_bytes, shift);
    ScheduleResult placed = simulate_ucplan_table(at, table, Placement{}, ScheduleResult{}, true);
    log.push_back({fmt::format("the best decisions, {} held at most, placed", format_bytes(at.pool_bytes)),
                   placed.ok ? placed.round_ns : 0, placed.failure});
    if (placed.ok) {
      placed.work = r.work;
      placed.candidates_skipped = r.candidates_skipped;
      placed.search_log = std::move(log);
      return placed;
    }
  }
  ScheduleResult failed;
  failed.failure = log.back().why;
  failed.search_log = std::move(log);
  return failed;
}

// After a kick, moves are looked at again only within kWindow layers (route order) of the kicked
// tensors: see refine_by_local_search.
constexpr int kWindow = 3;

// Per layer, its position in the route.
std::vector<int> route_positions(const Graph& g, const TaskGraph& tg) {
  std::vector<int> at(g.layers.size(), 0);
  for (std::size_t i = 0; i < tg.route.size(); ++i) at[tg.route[i]] = static_cast<int>(i);
  return at;
}

// Per tensor: whether its layer lies within kWindow route positions of a layer of `changed`.
std::vector<char> near_tensors(const TaskGraph& tg, const std::vector<int>& route_at, const std::vector<int>& changed) {
  const int n = static_cast<int>(tg.route.size());
  std::vector<char> marked(tg.route.size(), 0);
  for (int c : changed) {
    const int r = route_at[tg.tensors[c].layer];
    for (int k = std::max(0, r - kWindow); k <= std::min(n - 1, r + kWindow); ++k) marked[k] = 1;
  }
  std::vector<char> near(tg.tensors.size(), 0);
  for (std::size_t t = 0; t < tg.tensors.size(); ++t) near[t] = marked[route_at[tg.tensors[t].layer]];
  return near;
}

// SplitMix64 (Steele, Lea and Flood 2014), uniform enough for kicks; seeded, so plans stay
// deterministic. random(n): a number in [0, n).
struct SplitMix64 {
  std::uint64_t state = 0x2545F4914F6CDD1DULL;
  std::uint64_t operator()(std::uint64_t n) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (z ^ (z >> 31)) % n;
  }
};

// Recomputing activation t re-runs its forward task (at its fastest configuration).
std::int64_t forward_ns(const TaskGraph& tg, const CostTable& costs, int t) {
  return costs.tasks[costs.forward_task[tg.tensors[t].layer]].time_ns;
}

// Local search over the residency table with moves in both directions, each judged by the
// simulator and kept only if it makes the round faster. The seeds above only ever move tensors
// off the device; here a recomputed or offloaded tensor is brought back to keep when the budget
// has room for it (most expensive to redo first), and a kept one is recomputed or offloaded
// when that frees memory the rest of the schedule can use (most bytes per nanosecond of
// recomputation first). A value the best plan recomputes more than once may be held from its
// recomputation on (Residency::Hold), and a held one recomputed again. Moves are tried in
// groups, split in halves when a group as a whole does not help (as delta debugging does), so a
// large network with few simulations to spare still gets every move considered; a small one gets
// them one by one. Passes repeat until none improves or the work budget (simulated steps plus
// arena blocks looked at: deterministic, unlike a time limit) is spent. `need`:
// backward_needed(), computed once by the search. `focus`, if given: only moves of these tensors
// are tried. `close_inputs`: a move alone that recomputes a value and does not help is tried again
// with the inputs kept only for that recomputation recomputed too (refine_by_local_search).
void descend(const ScheduleInput& in, const std::vector<char>& need, ScheduleResult& best,
             std::vector<Residency>& best_table, Placement placement, std::vector<ScheduleResult::Candidate>& log,
             std::int64_t& spent, const std::string& name, const std::vector<char>* focus = nullptr,
             bool close_inputs = false) {
  const Graph& g = *in.graph;
  const TaskGraph& tg = *in.tasks;
  const CostTable& costs = *in.costs;
  const int nt = static_cast<int>(tg.tensors.size());
  constexpr int kMaxPasses = 4;
  const std::int64_t budget = in.local_search_budget;  // default: about 0.5 s of simulation on one core
  std::int64_t last_cost = std::max<std::int64_t>(best.work, 1);
  int tried = 0, accepted = 0;
  auto run = [&](const std::vector<Residency>& table) {
    ScheduleResult r = simulate_ucplan_table(in, table, placement, best);
    spent += r.work;
    last_cost = std::max<std::int64_t>(r.work, 1);
    ++tried;
    return r;
  };
  auto redo_ns = [&](int t) { return forward_ns(tg, costs, t); };
  // Tried in tiers: back to keep (the most expensive recomputation first), offloaded or held to
  // recomputed and recomputed to held (the most recomputation time repeated first), recomputed to
  // offloaded, then kept to recomputed or offloaded (most bytes freed per nanosecond of
  // recomputation first; an offload ranks as if it freed a thousandth). Holds here, and not only
  // in hold_recomputed after the search, let a hold and a move it makes room for, or needs, be
  // found together: side by side with holds only after the search, on resnet20 b64 at every 3 %
  // from 100 to 25 % of the peak (model:h100 and model:v100) the overheads sum to 520.0 points
  // instead of 529.3 (5 budgets better, by up to 4.7 points; 4 worse, by up to 0.7); on resnet50
  // and densenet40 b64 and vgg16 b32 at 100 / 85 / 70 / 60 / 50 / 40 / 35 / 25 % to 640.5 instead
  // of 646.0 (6 better, 2 worse by up to 0.5); ResNet-152 b256 compiles in the same time.
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
        if (hi - lo == 1 && close_inputs && recomputed(moves[lo].to)) {  // the move with those inputs recomputed
          std::vector<Residency> closed = best_table;
          closed[moves[lo].tensor] = moves[lo].to;
          recompute_unneeded_inputs(g, tg, need, closed, {moves[lo].tensor});
          bound_segments(g, tg, closed);
          if (closed != table && closed != best_table) {
            ScheduleResult c = run(closed);
            if (better(c, best)) {
              best = std::move(c);
              best_table = std::move(closed);
              ++accepted;
            }
          }
        }
        if (hi - lo == 1) return;
        const std::size_t mid = lo + (hi - lo) / 2;
        try_moves(moves, lo, mid);
        try_moves(moves, mid, hi);
      };
  for (int pass = 0; pass < kMaxPasses && spent <= budget; ++pass) {
    std::vector<Move> moves;
    for (int t = 0; t < nt; ++t) {
      if (!recomputable(g, tg, t) || (focus && !(*focus)[t])) continue;
      const Tensor& x = tg.tensors[t];
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
      if (r == Residency::Offload || r == Residency::Hold) moves.push_back({t, Residency::Recompute, 1, bytes / redo});
      if (r == Residency::Recompute && best.recomputations[t] >= 2)  // its repeated recomputation time first
        moves.push_back({t, Residency::Hold, 1, (best.recomputations[t] - 1) * redo});
      if (recomputed(r) && need[t] && in.offload) moves.push_back({t, Residency::Offload, 2, bytes / redo});
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
    log.push_back(
        {fmt::format("{} pass {}: {} simulations, {} moves kept", name, pass + 1, tried, accepted - accepted_before),
         best.round_ns, ""});
    tried = 0;
    if (accepted == accepted_before) break;
  }
}

// Iterated local search (Lourenco, Martin and Stuetzle, "Iterated Local Search", 2003): once the
// descent above finds no move that helps, a few decisions of the best table are changed at random
// (a kick: kept to recomputed or offloaded, recomputed or offloaded back to kept, or one recomputed
// more than once held, at even odds with kept) and the descent starts again from there; the better
// local optimum is kept. The generator is seeded, so the plan stays deterministic. Kicks go on
// while the work budget lasts, and for at most kKickShare times the work of the first descent: a
// small network, whose descent ends early, gets many; a large one, whose descent spends the
// budget, none.
// The descent after a kick tries only the moves of tensors within kWindow layers (route order) of
// the kicked ones, as ILS's "don't look bits" restrict a local search to where the perturbation
// was (Bentley 1992; Lourenco et al. §3.2): the rest of the table was a local optimum already.
// A kick then costs a few simulations instead of a pass over every tensor, so many more are
// tried in the same work. Measured on resnet20 b64 (model:v100 at 25 MiB, model:h100 at 35 and
// 25 MiB) and densenet40 b64 at 50 % of the peak: +62.4 / +15.9 / +41.7 / +8.7 % instead of
// +72.1 / +17.4 / +42.5 / +9.3 % (windows of 1, 2, 4, 6, 8 and 16 layers measured no better
// overall), in the same compile time.
// More kicks buy little: with 16 times kMaxKicks, kKickShare, kClosedKickShare and the work budget,
// resnet20 b64 on model:h100 at 25 / 35 / 50 / 70 % of the liveness peak compiled to +32.6 /
// +12.7 / +5.3 / +2.3 % instead of +33.8 / +14.2 / +5.5 / +2.3 %, in 59 / 39 / 32 / 33 s instead
// of 6 / 3 / 2 / 3 s. (The work budget alone, 10 or 50 times, changes nothing on a network this
// small: the kicks stop at kKickShare first.)
// Then a second round of kicks, for at most kClosedKickShare times the first descent's work more,
// in which a kick that recomputes a value also recomputes the inputs its recomputation reads
// that no backward task needs and that were kept only for it (recompute_unneeded_inputs: a batch
// norm's output under its ReLU, an add's): else dropping the value frees nothing. Its descents
// try a move that recomputes a value that way too when the move alone does not help. Kicks and
// moves to recompute reach only tensors some backward task reads, and the seeds alone recomputed
// the others, so the first round cannot trade a value kept inside a block for the block's output,
// which exact mode's plan for ResNet-20's first stage at 42 % of its peak does. The first round
// runs as before, so each branch ends at least as fast. Measured (MODELLED overheads, sums of
// percentage points): ResNet-20's first stage (b64, model:h100) at every whole per cent from 50 to
// 35 % of its peak 531.5 instead of 558.8, at 43 to 39 % +30.4 % (exact mode's plan at 42 and
// 39 %) instead of +35.8 %; resnet20 b64 every 3 % from 100 to 25 % 199.6 / 283.6 instead of
// 200.0 / 287.4 (model:h100 / model:v100), every whole per cent from 45 to 25 % 373.2 / 494.9
// instead of 370.4 / 504.3 (budgets slower than a smaller one: 6 / 0 instead of 5 / 4); resnet50
// and densenet40 b64 and vgg16 b32 at 100 / 85 / 70 / 50 / 35 / 25 % on both profiles 271.3
// instead of 273.1; those compiles about a fifth to a third longer (resnet20's 26 budgets on
// model:h100 73 s instead of 56 s on 2 cores; ResNet-152, whose descent spends the budget, kicks
// never and compiles as before). A second round of 16 times the first descent's work: 521.9 / 198.5 / 283.3
// in 50-70 % more time. One round of kicks, all closed: 520.3 / 207.3 / 286.9 (at 25 % of
// resnet20's peak +38.5 / +46.1 % instead of +36.9 / +44.8 %).
void refine_by_local_search(const ScheduleInput& in, const std::vector<char>& need, ScheduleResult& best,
                            std::vector<Residency>& best_table, Placement placement,
                            std::vector<ScheduleResult::Candidate>& log) {
  const Graph& g = *in.graph;
  const TaskGraph& tg = *in.tasks;
  std::int64_t spent = 0;
  descend(in, need, best, best_table, placement, log, spent, "local search");
  std::vector<int> movable;
  for (int t = 0; t < static_cast<int>(tg.tensors.size()); ++t)
    if (recomputable(g, tg, t) && need[t]) movable.push_back(t);
  if (movable.size() < 2) return;
  SplitMix64 next;
  // At most kKickShare times the work of the first descent, so kicks cost in proportion to it.
  constexpr int kMaxKicks = 1024;
  constexpr std::int64_t kKickShare = 16, kClosedKickShare = 8;
  const std::vector<int> route_at = route_positions(g, tg);
  // Kicks until `until` work is spent (or kMaxKicks); `closed`: with the inputs kept only for a
  // recomputation recomputed too.
  auto kick = [&](bool closed, std::int64_t until) {
    int kicks = 0, kept = 0;
    for (; kicks < kMaxKicks && spent <= until; ++kicks) {
      std::vector<Residency> table = best_table;
      const std::uint64_t changes = 2 + next(3);
      std::vector<int> kicked;
      for (std::uint64_t c = 0; c < changes; ++c) {
        const int t = movable[next(movable.size())];
        kicked.push_back(t);
        if (table[t] == Residency::Recompute && best.recomputations[t] >= 2 && next(2))
          table[t] = Residency::Hold;
        else if (table[t] != Residency::Keep)
          table[t] = Residency::Keep;
        else
          table[t] = in.offload && next(2) ? Residency::Offload : Residency::Recompute;
      }
      if (closed) {
        std::vector<int> dropped;
        for (int t : kicked)
          if (recomputed(table[t])) dropped.push_back(t);
        recompute_unneeded_inputs(g, tg, need, table, std::move(dropped));
      }
      bound_segments(g, tg, table);
      if (table == best_table) continue;
      ScheduleResult start = simulate_ucplan_table(in, table, placement, ScheduleResult{});
      spent += start.work;
      if (!start.ok) continue;
      std::vector<ScheduleResult::Candidate> unlogged;
      const std::vector<char> focus = near_tensors(tg, route_at, kicked);
      descend(in, need, start, table, placement, unlogged, spent, "kick", &focus, closed);
      if (better(start, best)) {
        best = std::move(start);
        best_table = std::move(table);
        ++kept;
      }
    }
    if (kicks > 0)
      log.push_back({fmt::format("iterated local search{}: {} kicks, {} kept",
                                 closed ? ", recomputing the inputs kept only for a recomputation" : "", kicks, kept),
                     best.round_ns, ""});
  };
  const std::int64_t first = spent;
  kick(false, std::min(in.local_search_budget, first * (1 + kKickShare)));
  kick(true, std::min(in.local_search_budget, spent + first * kClosedKickShare));
}

// Recompute -> Hold (schedule.h), one tensor at a time, for each tensor the best plan recomputes
// more than once (holding one recomputed once changes nothing), the most recomputation time
// repeated first, kept where the round gets faster, in passes until one keeps nothing. On
// ResNet-20's first stage (b64, model:h100) the default was +36.3 % at 42 % of its peak where
// exact mode, which keeps a value recomputed in one stage for the later ones, was +30.4 %: the
// local search's tables could not say that then. Descend tries holds too now; this pass stays for
// a large network, whose descent the work budget cuts short, and for what the last kicks left
// recomputed more than once. At most kMaxHoldTries simulations: ResNet-152 b256 at
// 12 GiB (model:h100) had 113 candidates in one branch, and its compile must stay under a second.
void hold_recomputed(const ScheduleInput& in, ScheduleResult& best, std::vector<Residency>& best_table,
                     Placement placement, std::vector<ScheduleResult::Candidate>& log) {
  constexpr int kMaxHoldPasses = 3, kMaxHoldTries = 48;
  int tried = 0, kept = 0;
  for (int pass = 0; pass < kMaxHoldPasses && tried < kMaxHoldTries; ++pass) {
    const int kept_before = kept;
    std::vector<std::pair<std::int64_t, int>> candidates;  // (recomputation time repeated, tensor)
    for (std::size_t t = 0; t < best_table.size(); ++t)
      if (best_table[t] == Residency::Recompute && best.recomputations[t] >= 2)
        candidates.push_back({(best.recomputations[t] - 1) * forward_ns(*in.tasks, *in.costs, static_cast<int>(t)),
                              static_cast<int>(t)});
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    for (const auto& [waste, t] : candidates) {
      if (tried == kMaxHoldTries) break;
      if (best.recomputations[t] < 2) continue;  // a hold kept before made it recomputed once
      std::vector<Residency> table = best_table;
      table[t] = Residency::Hold;
      ScheduleResult r = simulate_ucplan_table(in, table, placement, best);
      ++tried;
      if (better(r, best)) {
        best = std::move(r);
        best_table = std::move(table);
        ++kept;
      }
    }
    if (kept == kept_before) break;
  }
  if (tried > 0)
    log.push_back({fmt::format("holding what is recomputed more than once: {} simulations, {} kept", tried, kept),
                   best.round_ns, ""});
}

// `checkpoints`: the tables of segments.h (schedule_ucplan's, the same for every branch), tried
// before the fixed seeds. `unheld_out`: the best table before hold_recomputed (the same table when
// it held nothing).
ScheduleResult search_ucplan(const ScheduleInput& in, const std::vector<ScheduleInput::Seed>& checkpoints,
                             std::vector<Residency>* table_out, std::vector<Residency>* unheld_out) {
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
  // Every activation but the input and the loss may be recomputed (recomputable()), convolutions
  // included: on a fast device re-running a conv (microseconds) beats copying its output back over PCIe
  // (tens of microseconds a MiB). SuperNeurons §3.4 keeps conv outputs as checkpoints; the
  // segment bound (bound_segments) keeps chains through them from growing without bound.
  auto redo_ns = [&](int t) { return forward_ns(tg, costs, t); };
  auto copy_back_ns = [&](int t) { return costs.h2d_ns(tg.tensors[t].bytes(costs.sub_batch)); };
  // Recomputing y needs its producer's inputs later; an input that nothing else needs then
  // (no backward task reads it) would be kept alive only for that: recompute it too when that
  // is cheaper than copying it back, back to the nearest checkpoint (reverse route order).
  auto close_segments = [&](std::vector<Residency>& table) {
    for (auto it = tg.route.rbegin(); it != tg.route.rend(); ++it) {
      const int y = tg.y_of[*it];
      if (*it == 0 || !recomputed(table[y])) continue;
      for (int x : tg.tasks[costs.forward_task[*it]].reads)
        if (!need[x] && recomputable(g, tg, x) && table[x] == Residency::Keep && redo_ns(x) < copy_back_ns(x))
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
    if (recomputable(g, tg, t) && need[t] && redo_ns(t) < copy_back_ns(t)) cheap[t] = Residency::Recompute;
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
      if (recomputable(g, tg, t) && !keep[t]) table[t] = Residency::Recompute;
    bound_segments(g, tg, table);
    seeds.push_back(std::move(table));
    seed_names.push_back(fmt::format("checkpoint every {} articulation point(s)", stride));
  }
  std::vector<std::size_t> dp_seeds;
  for (const ScheduleInput::Seed& c : checkpoints) {
    if (std::find(seeds.begin(), seeds.end(), c.table) != seeds.end()) continue;
    dp_seeds.push_back(seeds.size());
    seeds.push_back(c.table);
    seed_names.push_back(c.name);
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
        if (!recomputable(g, tg, t) || recomputed(redo[t])) continue;
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
  order.insert(order.begin(), dp_seeds.begin(), dp_seeds.end());
  if (best.ok) {
    seeds.push_back(best_table);
    seed_names.push_back("best baseline's decisions");
    order.insert(order.begin(), seeds.size() - 1);
  }
  for (const ScheduleInput::Seed& extra : in.extra_seeds) {  // the MILP's, the best without offload: first
    std::vector<Residency> table = extra.table;
    bound_segments(g, tg, table);
    seeds.push_back(std::move(table));
    seed_names.push_back(extra.name);
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
  // (fewer, larger holes), improved from there (a pool has no holes).
  if (best.ok && work <= kWorkBudget && in.pool_bytes == 0) {
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
  if (best.ok) refine_by_local_search(in, need, best, best_table, placement, log);
  if (unheld_out) *unheld_out = best_table;
  if (best.ok) hold_recomputed(in, best, best_table, placement, log);
  if (!best.ok) {  // why: moDNN's (everything kept, evicted on demand), else the first reason logged
    auto failed =
        std::find_if(log.begin(), log.end(), [](const auto& c) { return c.name == "moDNN" && !c.why.empty(); });
    if (failed == log.end())
      failed = std::find_if(log.begin(), log.end(), [](const auto& c) { return !c.why.empty(); });
    best.failure = failed != log.end() ? failed->why : "no residency table fits the budget";
  }
  best.candidates_skipped = skipped;
  best.best_fit = placement.best_fit;
  best.two_ended = placement.two_ended;
  best.search_log = std::move(log);
  if (table_out) *table_out = best_table;
  return best;
}

// The round's tasks, as the scheduler runs them (route order).
std::vector<int> round_order(const TaskGraph& tg) {
  std::vector<int> order;
  for (const Task& t : tg.tasks)
    if (t.round_task) order.push_back(t.id);
  return order;
}

// refine_stages' local search from a staged plan `plan` that `s` (record_stages set) runs as
// `best`; returns a faster plan, recorded, or a result that is not ok. `from` gives the plan to
// beat, its placement and its search log.
ScheduleResult refine_staged_plan(const ScheduleInput& in, ScheduleInput s, StagedPlan plan, ScheduleResult best,
                                  const ScheduleResult& from) {
  const Graph& g = *in.graph;
  const TaskGraph& tg = *in.tasks;
  const int nt = static_cast<int>(tg.tensors.size());
  const std::vector<int> order = round_order(tg);
  const int n = static_cast<int>(order.size());
  std::vector<std::vector<int>> uses(nt);  // per tensor: the round positions whose task reads it
  for (int p = 0; p < n; ++p)
    for (int x : tg.tasks[order[p]].reads) uses[x].push_back(p);
  const std::vector<char> need = backward_needed(tg);
  enum class Change { drop, keep, drop_kept, keep_throughout };
  struct Move {
    int tensor, lo, hi;  // positions [lo, hi]
    Change change;
  };
  // Whether recomputing t (as `table` says) may need a held value: a held value's inputs live only
  // to its first recomputation in the backward pass (the engine's uses), which a staged plan that
  // recomputes t elsewhere would outlast. Such moves are left out.
  std::vector<int> stack;
  auto reaches_hold = [&](const std::vector<Residency>& at_table, int t) {
    stack.assign(1, t);
    while (!stack.empty()) {
      const int y = stack.back();
      stack.pop_back();
      for (int x : tg.tasks[in.costs->forward_task[tg.tensors[y].layer]].reads) {
        if (at_table[x] == Residency::Hold) return true;
        if (at_table[x] == Residency::Recompute) stack.push_back(x);
      }
    }
    return false;
  };
  auto moves_of = [&](const StagedPlan& at, const ScheduleResult& result) {
    std::vector<Move> moves;
    std::vector<std::vector<int>> recomputed_at(nt);
    for (int p = 0; p < n; ++p)
      for (int t : result.recomputed_at[p]) recomputed_at[t].push_back(p);
    for (int t = 0; t < nt; ++t) {
      if (!recomputable(g, tg, t) || !need[t] || at.table[t] == Residency::Offload) continue;
      const std::vector<int>& u = uses[t];
      if (reaches_hold(at.table, t)) {
        if (at.table[t] == Residency::Recompute) moves.push_back({t, 0, -1, Change::keep_throughout});
        continue;
      }
      if (at.table[t] != Residency::Recompute) {
        for (std::size_t k = 1; k < u.size(); ++k)
          if (u[k] > u[k - 1] + 1) moves.push_back({t, u[k - 1] + 1, u[k], Change::drop_kept});
        continue;
      }
      moves.push_back({t, 0, -1, Change::keep_throughout});
      const std::vector<int>& r = recomputed_at[t];
      for (std::size_t k = 1; k < r.size(); ++k) moves.push_back({t, r[k - 1] + 1, r[k], Change::keep});
      for (std::size_t k = 1; k < u.size(); ++k) {
        if (u[k] <= u[k - 1] + 1) continue;
        bool kept_between = true;
        for (int p = u[k - 1] + 1; p <= u[k]; ++p) kept_between = kept_between && at.keep[p][t];
        if (kept_between) moves.push_back({t, u[k - 1] + 1, u[k], Change::drop});
      }
    }
    return moves;
  };
  auto apply = [&](StagedPlan& at, const Move& m, const ScheduleResult& result) {
    if (m.change == Change::keep_throughout) {
      at.table[m.tensor] = Residency::Keep;
      return;
    }
    if (m.change == Change::drop_kept) {  // on the device where it was, but in [lo, hi]
      at.table[m.tensor] = Residency::Recompute;
      bound_segments(g, tg, at.table);  // as the table's search bounds its recomputation chains
      for (int p = 0; p < n; ++p) at.keep[p][m.tensor] = 0;
      for (int p = 0; p < n; ++p)
        for (int x : result.on_device_at[p]) at.keep[p][x] = x == m.tensor ? 1 : at.keep[p][x];
    }
    for (int p = m.lo; p <= m.hi; ++p) at.keep[p][m.tensor] = m.change == Change::keep;
  };
  const std::int64_t budget = in.local_search_budget;
  std::int64_t spent = 0;
  int tried = 0, kicks = 0, kept = 0;
  // A pool counts bytes (ScheduleInput::pool_bytes); whether they fit the budget is known once the
  // buffers are placed, which a simulation with the plan's record does: a faster plan is taken
  // only if its buffers fit. The placement's search (offsets.h) counts in the work spent: in a
  // tight pool one visits up to 6 million buffers in its nodes and, fitting or not, takes seconds.
  auto placed = [&](const StagedPlan& at) {
    if (s.pool_bytes == 0) return true;
    ScheduleInput recorded_in = s;
    recorded_in.record_plan = true;
    ScheduleResult r = simulate_staged(recorded_in, at, s.offload);
    spent += r.work + r.placement_work;
    return r.ok;
  };
  // `check`: each move taken is placed (the first descent, which the kicks start from); a kick's
  // descent places only its end.
  auto descend_staged = [&](StagedPlan& at, ScheduleResult& result, bool check) {
    constexpr int kMaxPasses = 6;
    for (int pass = 0; pass < kMaxPasses && spent <= budget; ++pass) {
      bool improved = false;
      for (const Move& m : moves_of(at, result)) {
        if (spent > budget) break;
        StagedPlan next = at;
        apply(next, m, result);
        if (next.keep == at.keep && next.table == at.table) continue;
        ScheduleInput bounded = s;
        bounded.abandon_after_ns = result.round_ns;
        ScheduleResult r = simulate_staged(bounded, next, s.offload);
        spent += r.work;
        ++tried;
        if (better(r, result) && (!check || placed(next))) {
          result = std::move(r);
          at = std::move(next);
          improved = true;
        }
      }
      if (!improved) break;
    }
  };
  descend_staged(plan, best, true);
  constexpr int kStageKicks = 64;
  constexpr std::int64_t kKickShare = 16;
  const std::int64_t kick_budget = std::min(budget, spent * (1 + kKickShare));
  SplitMix64 random;
  for (; kicks < kStageKicks && spent <= kick_budget; ++kicks) {
    const std::vector<Move> moves = moves_of(plan, best);
    if (moves.size() < 2) break;
    StagedPlan next = plan;
    const std::uint64_t changes = 2 + random(2);
    for (std::uint64_t c = 0; c < changes; ++c) {  // each move's chain checked as the moves before left it
      const Move& m = moves[random(moves.size())];
      if (m.change == Change::keep_throughout || !reaches_hold(next.table, m.tensor)) apply(next, m, best);
    }
    ScheduleResult start = simulate_staged(s, next, s.offload);
    spent += start.work;
    if (!start.ok) continue;
    descend_staged(next, start, false);
    if (better(start, best) && placed(next)) {
      best = std::move(start);
      plan = std::move(next);
      ++kept;
    }
  }
  if (best.round_ns >= from.round_ns) return {};  // (a tie may count its bytes differently)
  s.record_plan = true;
  s.record_stages = false;
  ScheduleResult again = simulate_staged(s, plan, s.offload);
  // In a pool, the table's plan run stage by stage may be faster than the table itself but not fit
  // once placed (every move taken since was placed).
  if (!again.ok) return {};
  UCPLAN_CHECK(again.round_ns == best.round_ns,
               "a staged plan simulated again with its record gives the same schedule");
  again.best_fit = from.best_fit;
  again.two_ended = from.two_ended;
  again.search_log = from.search_log;
  again.search_log.push_back(
      {fmt::format("per-stage decisions: {} simulations, {} kicks, {} kept", tried, kicks, kept), again.round_ns, ""});
  return again;
}

// `in` prepared for refine_stages' simulations: the statics made once, `from`'s placement, the
// stages recorded.
ScheduleInput staged_input(const ScheduleInput& in, const ScheduleResult& from) {
  ScheduleInput s = in;
  if (!s.statics) s.statics = make_schedule_statics(*in.graph, *in.tasks, *in.costs);
  s.best_fit = from.best_fit;
  s.two_ended = from.two_ended;
  s.pool_bytes = from.pool_bytes;
  s.record_plan = false;
  s.record_stages = true;
  return s;
}

}  // namespace

// The best plan's decisions again, stage by stage (ScheduleInput::record_stages gives what is on
// the device at each round position), then a local search over those per-stage decisions, as exact
// mode's MILP makes them (Checkmate's S[t,i], remat_milp.h), judged by the simulator: a value
// recomputed twice kept on the device between the two recomputations (as Hold keeps it from the
// first, but only until the second); a recomputed value dropped between two of its uses and
// recomputed for the later; a kept or held one dropped between two of its uses (recomputed for the
// later, kept everywhere else; recomputation chains bounded as the table search bounds them); a
// recomputed one kept throughout. A residency table cannot say most of these: its Recompute drops
// a value after its forward uses and when memory runs out, its Hold keeps it to its last use.
// Moves are taken as soon as one makes the round faster, in passes, then iterated as
// refine_by_local_search does: kicks of two or three random moves, each followed by the descent,
// at most kStageKicks and 17 times the first descent's work. In a pool (pool_bytes), a move is
// taken only if the buffers of its plan fit the budget once placed (for a kick, its end).
// Measured on resnet20 b64 (model:h100 and model:v100, every 3 % from 100 to 25 % of the peak and
// 35 %, 54 budgets): the overheads sum to 525.9 points instead of 534.5 (6 budgets faster, by up
// to 2.8 points: +38.7 % instead of +41.5 % at 25 % on model:h100, +44.8 instead of +46.8 % on
// model:v100; none slower), the 54 compiles in 213 s instead of 200 s. Before the engine dropped
// held values at the crossing in a staged plan too (Scheduler::finish_position) it was 527.4; then,
// with the moves that reach a held value, which the engine cannot run (reaches_hold), 526.3, and
// without the moves that keep a recomputed value throughout, 527.7.
ScheduleResult refine_stages(const ScheduleInput& in, const std::vector<Residency>& table, const ScheduleResult& from) {
  const TaskGraph& tg = *in.tasks;
  const int nt = static_cast<int>(tg.tensors.size());
  ScheduleInput s = staged_input(in, from);
  // The table as its branch ran it: with on-demand offload or without, whichever is faster.
  ScheduleResult base;
  for (const bool offload : {false, true}) {
    if (offload && !in.offload) continue;
    auto strategy = make_table_strategy("ucplan", table, PrefetchMode::Eq4, true, true, offload);
    ScheduleResult r = simulate_schedule(s, *strategy);
    if (better(r, base)) {
      base = std::move(r);
      s.offload = offload;
    }
  }
  if (!base.ok) return {};
  const int n = static_cast<int>(round_order(tg).size());
  UCPLAN_CHECK(static_cast<int>(base.on_device_at.size()) == n, "a recorded plan has a stage per round task");
  StagedPlan plan;
  plan.table = table;
  plan.holds = true;
  plan.keep.assign(n, std::vector<char>(nt, 0));
  for (int p = 0; p < n; ++p)
    for (int t : base.on_device_at[p]) plan.keep[p][t] = 1;
  ScheduleResult best = simulate_staged(s, plan, s.offload);
  if (!best.ok) return {};
  return refine_staged_plan(in, s, std::move(plan), std::move(best), from);
}

ScheduleResult schedule_recompute_every_stage(const ScheduleInput& in) {
  const Graph& g = *in.graph;
  const TaskGraph& tg = *in.tasks;
  const int nt = static_cast<int>(tg.tensors.size());
  const std::vector<int> order = round_order(tg);
  const int n = static_cast<int>(order.size());
  std::vector<int> position(tg.tasks.size(), -1);
  for (int p = 0; p < n; ++p) position[order[p]] = p;
  // Born where its layer's forward task runs, last read at `last`; recomputed wherever read later,
  // never kept between (as exact mode's first incumbent, remat_milp.cpp).
  std::vector<int> last(nt, -1);
  for (int p = 0; p < n; ++p)
    for (int x : tg.tasks[order[p]].reads) last[x] = std::max(last[x], p);
  StagedPlan plan;
  plan.table.assign(nt, Residency::Keep);
  plan.keep.assign(n, std::vector<char>(nt, 1));
  for (int t = 0; t < nt; ++t) {
    if (!recomputable(g, tg, t)) continue;
    const int born = position[in.costs->forward_task[tg.tensors[t].layer]];
    if (born < 0 || last[t] <= born) continue;
    plan.table[t] = Residency::Recompute;
    for (int p = born + 1; p <= last[t]; ++p) plan.keep[p][t] = 0;
  }
  // Placed while scheduled (moDNN's first fit, then two-ended), or counted in bytes and placed
  // afterwards with more slack until it fits: on resnet20 b16 at fp16 and 35 % of its peak, exact
  // mode's plan of this kind fitted only so. The first way that fits is refined.
  std::vector<ScheduleResult> ways(2);
  ways[1].two_ended = true;
  for (const int shift : kPoolSlackShifts)
    ways.emplace_back().pool_bytes = ScheduleInput::pool_for(in.budget_bytes, shift);
  ScheduleResult failed;
  for (ScheduleResult& way : ways) {
    way.round_ns = std::numeric_limits<std::int64_t>::max();  // any plan beats none
    ScheduleInput s = staged_input(in, way);
    s.offload = false;
    s.record_plan = true;  // in a pool, whether it fits is known once placed
    ScheduleResult start = simulate_staged(s, plan, false);
    if (!start.ok) {
      if (failed.failure.empty()) failed = std::move(start);
      continue;
    }
    s.record_plan = false;
    start.best_fit = way.best_fit;
    start.two_ended = way.two_ended;
    start.pool_bytes = way.pool_bytes;
    start.search_log.push_back({"every input recomputed in every stage", start.round_ns, ""});
    ScheduleResult refined = refine_staged_plan(in, s, plan, start, start);  // its log: start's, then its line
    return refined.ok ? refined : start;
  }
  return failed;
}

// Branches, the fastest plan wins: without offload and (if allowed) with, so allowing offload never
// gives a slower plan than forbidding it; each with moDNN's placement and with two-ended placement.
// The branches without offload run first; the better of their plans is the first seed of the
// branches with offload, whose search then starts from a plan that needs no copy and adds copies
// where they pay. Measured on resnet20, resnet50 and densenet40 b64, model:h100 and model:v100:
// at 100 / 85 / 70 / 50 / 35 / 25 % of the peak the overheads sum to 476.1 points instead of
// 486.0, and at 90 / 80 / 60 / 45 / 40 / 30 % to 420.6 instead of 429.6, in the same time on 2
// cores (each phase runs two branches side by side, as the four did). Single points move both
// ways, by up to 5.4 points (the search is chaotic in its start); the sums are what improved. A
// seed from both branches without offload, or from the one with the same placement, measured
// 2.3 and 1.8 points worse on model:h100's 18 points.
ScheduleResult schedule_ucplan(const ScheduleInput& in, std::vector<Residency>* table_out, ScheduleResult* kept,
                               std::vector<Residency>* kept_table) {
  if (kept) *kept = ScheduleResult{};
  struct Branch {
    ScheduleInput in;
    std::string name;
    ScheduleResult result;
    std::vector<Residency> table;
    std::vector<Residency> unheld;        // the table before hold_recomputed
    std::vector<Residency> nothing_held;  // that table with every Hold a Recompute
    int pool_shift = 0;                   // a pool branch's slack (kPoolBranchShifts)
  };
  std::vector<Branch> branches;
  ScheduleInput shared = in;  // one set of statics for every simulation of every branch
  if (!shared.statics) shared.statics = make_schedule_statics(*in.graph, *in.tasks, *in.costs);
  // The local search's work budget is set for ResNet-152 (kReferenceLayers layers), whose compile
  // must stay under a second. A simulation's work grows with the layers, so a smaller network gets
  // the work of as many simulations as ResNet-152 gets, up to kMaxBudgetScale times the budget
  // (resnet50: 2.9x, resnet20: 4x). Measured on resnet20, resnet50 and densenet40 b64,
  // model:h100 and model:v100: at 100 / 85 / 70 / 50 / 35 / 25 % of the peak the overheads sum to
  // 454.5 points instead of 464.3, at 90 / 80 / 60 / 45 / 40 / 30 % to 383.0 instead of 394.1;
  // resnet50 b64 compiles in 1.1 s instead of 0.4 s.
  constexpr std::int64_t kMaxBudgetScale = 4;
  const std::int64_t layers = std::max<std::int64_t>(1, static_cast<std::int64_t>(in.tasks->route.size()));
  shared.local_search_budget =
      in.local_search_budget / layers * std::clamp(kReferenceLayers, layers, kMaxBudgetScale * layers);
  // Checkpoints chosen by dynamic programming (segments.h) for a share of the memory beyond the
  // weights: the model leaves out workspace and fragmentation, so several shares are tried, the
  // simulator judging each. At tight budgets these fit where search_ucplan's fixed strides do not
  // (resnet50 b64 at 35 % of the peak: the best seed 242 ms per round instead of 261 ms, on
  // model:v100). Measured on resnet20, resnet50 and densenet40 b64, model:h100 and model:v100: at
  // 100 / 85 / 70 / 50 / 35 / 25 % of the peak the overheads sum to 464.3 points instead of 476.1,
  // at 90 / 80 / 60 / 45 / 40 / 30 % to 394.1 instead of 420.6; of the 72 points 43 improved and
  // 13 got worse (by up to 2.1 points; the best by 5.4). Only the branches without offload (and
  // a quick search's one branch) take them: in those with offload, which start from the best plan
  // without, they changed the sums by 0.2 points at some cost in time.
  // Computed once here: they depend on the budget and the costs, not on the branch.
  std::vector<ScheduleInput::Seed> checkpoints;
  const std::vector<ChainLink> chain = route_chain(*in.graph, *in.tasks, *in.costs);
  const std::int64_t for_activations = in.budget_bytes - in.tasks->resident_bytes();
  for (int percent : {100, 90, 80, 70, 60, 50, 40, 30}) {
    std::vector<Residency> table = checkpoint_table(*in.graph, *in.tasks, chain, for_activations / 100 * percent);
    if (!table.empty())
      checkpoints.push_back(
          {fmt::format("checkpoints by dynamic programming, {} % of the memory", percent), std::move(table)});
  }
  const std::vector<ScheduleInput::Seed> no_checkpoints;
  for (const bool offload : {false, true}) {
    if (offload != in.offload && (in.quick || offload)) continue;
    for (const bool two_ended : {false, true}) {
      if (two_ended && in.quick) continue;
      Branch b;
      b.in = shared;
      b.name = fmt::format("{}{}: ", offload ? "offload" : "no offload", two_ended ? ", two-ended placement" : "");
      b.in.offload = offload;
      b.in.two_ended = two_ended;
      branches.push_back(std::move(b));
    }
  }
  // Without and with offload, also two pools each (ScheduleInput::pool_bytes): bytes counted,
  // buffers placed once the schedule is known. A pool holds 1/64 or 1/32 less than the budget at
  // once (kPoolBranchShifts), for the placement's own gaps; its plan is placed right after its
  // search (place_pool_plan), with more slack if it does not fit. Not for networks of
  // kReferenceLayers or more (the placement is quadratic in the buffers, and ResNet-152's compile
  // must stay under a second), nor in a quick search. Each phase then runs four branches on the
  // two cores. With the placement's search (offsets.h), the 1/64 pool fits where best fit alone
  // did not: resnet20 b64 (model:h100 and model:v100, 100 to 25 % of the peak every 3 % and 35 %,
  // 54 budgets) sums 549.1 points of overhead with the 1/32 pool alone, 538.8 with the 1/64 pool
  // alone (23 budgets better, 6 worse), 534.5 with both (23 better, none worse), in 201 s
  // instead of 165 s.
  // Measured on resnet20, resnet50 and densenet40 b64 (model:h100 and model:v100, 100 to 25 % of
  // the peak, 36 points): the overheads sum to 369.2 points with both pools, 389.8 with the one
  // without offload alone, 425.0 with neither; the 36 compiles take 259 s instead of 218 and 202.
  // Dropping the two-ended branches instead would give back that time (174 s) but not the
  // quality (396.3 points; resnet20 v100 at 25 %: +81.9 % instead of +58.2 %).
  if (!in.quick && layers < kReferenceLayers)
    for (const bool offload : {false, true})
      for (const int shift : kPoolBranchShifts) {
        if (offload && !in.offload) continue;
        Branch b;
        b.in = shared;
        b.name =
            fmt::format("{}, placed after scheduling (1/{} slack): ", offload ? "offload" : "no offload", 1 << shift);
        b.in.offload = offload;
        b.in.pool_bytes = ScheduleInput::pool_for(in.budget_bytes, shift);
        b.pool_shift = shift;
        branches.push_back(std::move(b));
      }
  // The branches of a phase share nothing but const inputs: they run on as many threads as there
  // are cores, and are merged in a fixed order, so the result does not depend on the threads.
  auto run_phase = [&](const std::vector<Branch*>& phase) {
    parallel_for(phase.size(), [&](std::size_t i) {
      Branch& b = *phase[i];
      b.in.memo = std::make_shared<SimulationMemo>(b.in);
      b.result = search_ucplan(b.in, !b.in.offload || b.in.quick ? checkpoints : no_checkpoints, &b.table, &b.unheld);
      b.nothing_held = b.unheld;
      std::replace(b.nothing_held.begin(), b.nothing_held.end(), Residency::Hold, Residency::Recompute);
      b.in.memo.reset();
      if (b.in.pool_bytes > 0) b.result = place_pool_plan(b.in, b.pool_shift, b.table, std::move(b.result));
    });
  };
  std::vector<Branch*> without, with;
  for (Branch& b : branches) (b.in.offload ? with : without).push_back(&b);
  run_phase(without);
  // The pool's plan competes for the win but seeds nothing (nor is it `kept`): the branches with
  // offload, and the longer search after this one, start where they would without it, so the pool
  // only adds a candidate (seeded from it, resnet50 b64 on model:h100 at 35 % of the peak ended
  // at +15.2 % instead of +13.6 %: the search is chaotic in its start).
  const Branch* top = nullptr;
  for (const Branch* b : without)
    if (b->in.pool_bytes == 0 && b->result.ok && (!top || better(b->result, top->result))) top = b;
  if (top)
    for (Branch* b : with) b->in.extra_seeds.push_back({"the best plan without offload", top->table});
  run_phase(with);

  // The winner's result moves into `best`; the other branches keep theirs, whose decisions are
  // placed again below too.
  std::vector<ScheduleResult::Candidate> log;
  int skipped = 0;
  Branch* won = nullptr;
  for (Branch& b : branches) {
    for (auto& c : b.result.search_log) log.push_back({b.name + c.name, c.round_ns, c.why});
    skipped += b.result.candidates_skipped;
    if (kept && !b.in.offload && b.in.pool_bytes == 0 && better(b.result, *kept)) {
      *kept = b.result;
      if (kept_table) *kept_table = b.table;
    }
    if (better(b.result, won ? won->result : ScheduleResult{})) won = &b;
  }
  ScheduleResult best;
  std::vector<Residency> best_table;
  if (won) {
    // Only the winner's plan is written out: it alone is simulated again with its record.
    best_table = won->table;
    const Placement placement{won->result.best_fit, won->result.two_ended};
    best = recorded(won->in, best_table, placement, std::move(won->result));
  } else {
    // No plan: the reason of the branch with offload as asked and moDNN's placement (the first such).
    for (const Branch& b : branches)
      if (b.in.offload == in.offload && !b.in.two_ended) {
        best.failure = b.result.failure;
        break;
      }
  }
  // Offsets after scheduling (offsets.h) close most of the gaps the simulation's placement leaves,
  // so a schedule simulated with a little more room than the budget may fit it once its buffers
  // are placed again: the best decisions, everything kept (moDNN), and the other branches' best
  // decisions (each with its own placement), with 1/128 up to 1/8 more; the fastest that fits
  // wins, with its buffers placed again. The other branches' tables cost a few simulations and
  // won once on 96 points (resnet20, vgg16, resnet50, densenet40 on model:h100 and model:v100 at
  // 100 to 25 % of the peak: vgg16 b32 at 40 %, +158.2 % instead of +162.0 %).
  const std::vector<Residency> all_kept(in.tasks->tensors.size(), Residency::Keep);
  struct Again {
    const std::vector<Residency>* table;
    Placement placement;
    std::string name;
    bool pool = false;    // a pool's plan: simulated with more bytes at once, placed within the budget
    bool offload = true;  // a pool's: as its branch (the others run with offload as allowed, in.offload)
  };
  const bool won_pool = best.pool_bytes > 0, won_offload = won && won->in.offload;
  std::vector<Again> again{
      {&best_table, Placement{best.best_fit, best.two_ended}, "the best decisions", won_pool, won_offload},
      {&all_kept, Placement{best.best_fit, best.two_ended}, "everything kept", won_pool, won_offload}};
  for (const Branch& b : branches)
    if (&b != won && b.result.ok)
      again.push_back({&b.table, Placement{b.result.best_fit, b.result.two_ended}, b.name + "its best decisions",
                       b.result.pool_bytes > 0, b.in.offload});
  // And each branch's decisions before it held values (hold_recomputed), and those with nothing
  // held (the local search holds values too): a table that holds less may use more room better
  // (ResNet-20's first stage at 35 % of its peak, model:h100: +60.7 % from the decisions before
  // holding placed again, +68.6 % without them; with holds in the local search, +60.7 % from
  // those with nothing held, +68.6 % without them).
  for (const Branch& b : branches) {
    if (!b.result.ok) continue;
    const Placement placement{b.result.best_fit, b.result.two_ended};
    if (b.unheld != b.table)
      again.push_back(
          {&b.unheld, placement, b.name + "its best decisions before holding", b.result.pool_bytes > 0, b.in.offload});
    if (b.nothing_held != b.unheld && b.nothing_held != b.table)
      again.push_back({&b.nothing_held, placement, b.name + "its best decisions, nothing held", b.result.pool_bytes > 0,
                       b.in.offload});
  }
  // When a pool won, everything kept is also tried as the first-fit branches place it.
  if (won_pool)
    for (const Branch& b : branches)
      if (b.result.ok && b.result.pool_bytes == 0) {
        again.push_back({&all_kept, Placement{b.result.best_fit, b.result.two_ended}, b.name + "everything kept"});
        break;
      }
  // Placed again, with the placement's search (offsets.h) where best fit does not fit, on
  // networks under kReferenceLayers only: on ResNet-152 b256 at 12 GiB it found nothing and took
  // 0.6 s of the compile with the report's sub-batch searches (1.1 s -> 1.7 s).
  const bool search_placement = layers < kReferenceLayers;
  // One candidate, with 1/128 up to 1/8 more room, against `bar` (the best plan so far): its lines
  // of the log, and its fastest plan that fits, if one beats `bar`.
  struct Outcome {
    std::vector<ScheduleResult::Candidate> log;
    std::optional<ScheduleResult> won;
  };
  auto try_again = [&](const Again& a, const ScheduleResult& bar) {
    Outcome out;
    const bool pool = a.pool;
    const bool offload = in.offload && (!pool || a.offload);
    auto strategy = make_table_strategy("ucplan", *a.table, PrefetchMode::Eq4, true, true, offload);
    for (int shift = 7; shift >= 3; --shift) {
      const ScheduleResult& now = out.won ? *out.won : bar;
      ScheduleInput room = shared;  // the branches' statics
      room.offload = offload;
      if (pool) {
        room.pool_bytes = in.budget_bytes + (in.budget_bytes >> shift);
      } else {
        room.budget_bytes = in.budget_bytes + (in.budget_bytes >> shift);
      }
      room.best_fit = a.placement.best_fit;
      room.two_ended = a.placement.two_ended;
      room.abandon_after_ns = now.round_ns;
      ScheduleResult r = simulate_schedule(room, *strategy);
      if (pool && !r.ok && r.round_ns > 0) break;  // it does not fit once placed: more room only uses more memory
      if (!r.ok || !better(r, now)) continue;
      std::vector<PlanBuffer> placed = r.buffers;
      const OffsetReassignment o =
          pool ? OffsetReassignment{true, r.arena_bytes, r.arena_bytes}
               : assign_offsets_after_scheduling(placed, r.steps, in.budget_bytes + 1, search_placement);
      const bool fits = o.applied;
      out.log.push_back({fmt::format("{} simulated with {} more room, placed again", a.name,
                                     format_bytes((pool ? room.pool_bytes : room.budget_bytes) - in.budget_bytes)),
                         fits ? r.round_ns : 0, fits ? "" : "does not fit the budget once placed again"});
      if (!fits) break;  // more room only uses more memory
      r.buffers = std::move(placed);
      r.simulated_arena_bytes = pool ? 0 : r.arena_bytes;
      r.arena_bytes = o.after_bytes;
      if (!pool) r.placement_search_nodes = o.search_nodes;
      r.best_fit = room.best_fit;
      r.two_ended = room.two_ended;
      out.won = std::move(r);
    }
    return out;
  };
  // In order, each candidate against the best plan of those before it. The best decisions come
  // first, alone (they win most often: ResNet-152 b256 at 12 GiB, 1/128 more room); then the others
  // side by side against the same best, their outcomes taken in order up to the first that wins,
  // and those after it run again against the new best. What is taken is what a loop over the
  // candidates one at a time would find (wins after the best decisions are rare).
  for (std::size_t k = 0; k < again.size() && best.ok;) {
    const std::size_t n = k == 0 ? 1 : again.size() - k;
    std::vector<Outcome> outcomes(n);
    parallel_for(n, [&](std::size_t i) { outcomes[i] = try_again(again[k + i], best); });
    for (Outcome& o : outcomes) {
      log.insert(log.end(), std::make_move_iterator(o.log.begin()), std::make_move_iterator(o.log.end()));
      const std::vector<Residency>* table = again[k++].table;
      if (!o.won) continue;
      best = std::move(*o.won);
      if (table != &best_table) best_table = *table;
      break;
    }
  }
  best.search_log = std::move(log);
  best.candidates_skipped = skipped;
  if (table_out) *table_out = std::move(best_table);
  return best;
}

}  // namespace ucplan
