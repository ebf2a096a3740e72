// The reference the check mode compares with: the same network, batch, sub-batch rounds,
// weights and inputs, run as plainly as possible: every tensor in its own host vector, layers
// in topological order, convolutions undivided, no offload, no recomputation, no shared memory.
// Independent of the plan's schedule by construction. Each conv kernel uses the algorithm the
// plan uses for it (its first micro-batch's), because batch-norm backward can amplify the
// rounding differences between algorithms by 10^3 (its dx is a small residual of large terms):
// comparing across algorithms would measure that, not the schedule. The algorithms themselves
// are checked against naive float64 code and finite differences in the kernel tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "planner/ir/graph.h"

namespace ucplan {

struct ReferenceResult {
  std::map<std::string, std::vector<float>> weight_gradients;  // "dW:layer" -> values
  double loss = 0;                                             // mean over the batch
};

// The storage a reference run fills: every layer's values, gradients and saved state, and the
// convolutions' workspace. A layer's value and gradient go back to `spare` once its backward has
// run (every layer that reads them ran before it), and the next value or gradient takes the
// smallest spare buffer that holds it before new memory is touched. `ucplan run --check` runs two
// to eight references of one network; given the same scratch, each after the first reuses the
// memory instead of faulting in fresh pages, which on ResNet-50 b64 took longer than the sums.
struct ReferenceScratch {
  std::vector<std::vector<float>> y, dy, spare;
  std::vector<std::vector<unsigned char>> aux;
  std::vector<float> workspace;
};

// The least host memory a reference run holds at once, in bytes: every layer's value for one
// sub-batch (all live at the end of its forward) and every layer's saved state.
std::int64_t reference_bytes_at_least(const Graph& g, std::int64_t sub_batch);

// conv_algo: "layer:op" (forward, backward_data, backward_filter) -> algorithm; "direct" if absent.
// weights: "W:layer" -> values to start from (a later iteration's); init_weights(seed) if absent.
// loss_scale: the loss gradient is multiplied by it (fp16 loss scaling), as in the plan's run.
// The graph's precision is emulated as the CPU backend does (cpu_ops.h run_emulated).
ReferenceResult reference_gradients(const Graph& g, std::int64_t batch, std::int64_t sub_batch, std::uint64_t seed,
                                    const std::map<std::string, std::string>& conv_algo = {},
                                    const std::map<std::string, std::vector<float>>& weights = {},
                                    double loss_scale = 1, double perturb = 0, ReferenceScratch* scratch = nullptr);

}  // namespace ucplan
