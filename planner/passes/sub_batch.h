// Sub-batch size (moDNN §IV-A): rounds of b samples with weight gradients accumulated, so the
// batch (and SGD) is unchanged while activations shrink with b. Eq. (3) iterated with the
// profile,
//     b <- b * (M - S_W) / max_t M_min(t, b),   M_min per Eq. (1) with the fastest
//                                                configuration's workspace,
// gives moDNN's choice; the pipeline then simulates every feasible candidate and keeps the
// fastest plan. Splitting the pass changes batch-norm statistics (micro-batching inside a conv
// kernel does not), so a network with bn is split only when the user allows it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "costs.h"

namespace ucplan {

// --sub-batch: auto (any size, but the whole batch for a batch-norm network), any, or a size.
struct SubBatchOption {
  enum class Kind { Auto, Any, Size } kind = Kind::Auto;
  std::int64_t size = 0;  // Kind::Size
};
SubBatchOption parse_sub_batch_option(const std::string& text);  // throws UserError
std::string sub_batch_option_text(const SubBatchOption& o);      // auto | any | N

// Candidate sub-batch sizes: divisors of the batch the profile can cost, filtered by the
// option. Descending. Throws UserError for a size that is not a costable divisor.
std::vector<std::int64_t> sub_batch_candidates(const SubBatchOption& o, bool has_batch_norm,
                                               const std::vector<std::int64_t>& costable, std::int64_t batch);

// Eq. (1) with the fastest configuration's workspace, maximised over tasks: the most memory
// one task needs at this sub-batch (weights excluded).
std::int64_t max_task_bytes_fastest(const TaskGraph& tg, const CostTable& costs);
// Eq. (1) with the smallest workspace: the least memory any plan at this sub-batch needs,
// weights included (the lower bound at b, for this profile's algorithms).
std::int64_t min_plan_bytes(const TaskGraph& tg, const CostTable& costs);

// moDNN Eq. (3), iterated to a fixed point over the candidates (cost tables by size); where it
// cycles instead (4 -> 1 -> 4: the fastest workspace at 4 samples needs more than the room), the
// smallest size on the cycle.
std::int64_t modnn_sub_batch(const TaskGraph& tg, const std::map<std::int64_t, CostTable>& tables,
                             std::int64_t budget_bytes);

}  // namespace ucplan
