// The ucplan search: the residency decisions (keep, offload early, recompute) per tensor that
// make the schedule engine's round fastest under the budget, judged by the engine itself.
#pragma once

#include <vector>

#include "schedule.h"

namespace ucplan {

// The ucplan strategy: moDNN scheduling (Eq. 4 prefetch, Eq. 5 gain, offload on demand) plus a
// search over per-tensor residency decisions (keep / offload early / recompute) judged by the
// simulator itself, seeded with the baselines' decisions (so its predicted time is never worse
// than theirs) and, in the branches without offload, with checkpoints chosen by dynamic
// programming (segments.h) at several shares of the memory. Four branches, on as many threads
// as there are cores: without and (if in.offload) with offload, each with moDNN's placement and
// with two-ended placement (ScheduleInput::two_ended); those without offload first, the better
// of their plans seeding those with; the fastest plan wins (in.quick: only the branch with
// offload as allowed and moDNN's placement, seeded by the dynamic programming too). On networks
// under kReferenceLayers layers two more branches, without and (if in.offload) with offload,
// place buffers only after scheduling (ScheduleInput::pool_bytes); their plans compete but seed
// nothing. Returns the best result found (and its decisions in `table`); `kept`, if given,
// receives the best of the branches without offload (and `kept_table` its decisions), which exact
// mode reads back as the MILP's first incumbent.
ScheduleResult schedule_ucplan(const ScheduleInput& in, std::vector<Residency>* table = nullptr,
                               ScheduleResult* kept = nullptr, std::vector<Residency>* kept_table = nullptr);

// A plan `from`, found by schedule_ucplan with decisions `table`, refined stage by stage: what
// stays on the device into each round position (StagedPlan), searched locally from what the
// table keeps there. Returns a faster plan, recorded, or a result that is not ok when none was
// found. Called on the plan of each of the default's searches for networks under kReferenceLayers
// (pipeline.cpp). In a pool (ScheduleInput::pool_bytes) a move is taken only if its plan's buffers
// fit once placed; each placement's search counts in the local-search work it spends.
ScheduleResult refine_stages(const ScheduleInput& in, const std::vector<Residency>& table, const ScheduleResult& from);

// Where no table of the search fits (a tight budget without offload: resnet20 b16 at fp16 and 35 %
// of its peak), a plan may still: every input recomputed in every stage and nothing kept between
// stages (exact mode's first incumbent), then refined stage by stage as refine_stages does.
// Returns that plan, recorded, or a result that is not ok (with the engine's reason) where even it
// does not fit. Offload is not used.
ScheduleResult schedule_recompute_every_stage(const ScheduleInput& in);

// ResNet-152's layers (516): the network the search's work budget is set for (its compile must
// stay under a second). Smaller networks get more work (schedule_ucplan) and a second search
// (pipeline.cpp); larger ones neither.
constexpr std::int64_t kReferenceLayers = 512;

}  // namespace ucplan
