// Tensors and tasks of one training iteration (moDNN §II-2, the TDFG). Per layer l: activation
// Y_l, its gradient dY_l, weights W_l and weight gradient dW_l (always resident, as in moDNN),
// and for bn/dropout an auxiliary tensor kept from forward to backward. Tasks: F_l; backward
// B_l, split for conv and fc into backward-filter then backward-data; an update per weighted
// layer. What each backward task reads is exact per layer type, since liveness depends on it:
//   relu: Y; max-pool: X, Y; avg-pool: nothing; bn: X, saved stats, gamma; lrn: X, Y;
//   conv/fc: X (for dW) and W (for dX); add, concat: nothing; dropout: mask;
//   softmax_loss: Y and labels.   (every backward also reads dY_l, except softmax_loss)
// The network input and its labels are host-provided (copied in each round); so is the
// gradient of a sink that is not a loss (a benchmark network without a head). A gradient that
// nothing would use (no weights behind it) is neither created nor computed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph.h"
#include "planner/model/plan.h"

namespace ucplan {

enum class TensorKind { Activation, Gradient, Aux, Weight, WeightGrad, Labels };
const char* tensor_kind_name(TensorKind k);

struct Tensor {
  int id = -1;
  TensorKind kind = TensorKind::Activation;
  int layer = -1;
  std::string name;                   // "Y:conv1", "dY:conv1", "aux:bn1", "W:fc", "dW:fc", "labels"
  std::int64_t bytes_per_sample = 0;  // size at (sub-)batch b: bytes_per_sample * b + fixed_bytes
  std::int64_t fixed_bytes = 0;
  bool host_input = false;  // provided in host memory at the start of each round

  std::int64_t bytes(std::int64_t batch) const { return bytes_per_sample * batch + fixed_bytes; }
  bool resident() const { return kind == TensorKind::Weight || kind == TensorKind::WeightGrad; }
};

enum class TaskKind { Forward, Backward, BackwardData, BackwardFilter, Update };
const char* task_kind_name(TaskKind k);  // "forward", "backward", "backward_data", ...

struct Task {
  int id = -1;
  TaskKind kind = TaskKind::Forward;
  int layer = -1;
  std::vector<int> reads;        // tensors read (inputs, weights, saved state)
  std::vector<int> writes;       // tensors written from scratch
  std::vector<int> accumulates;  // gradients added to (another consumer wrote them first)
  bool round_task = true;        // false for updates, which run once after all rounds
  bool conv_kernel = false;      // forward / backward-data / backward-filter of a conv layer
};

struct TaskGraph {
  std::vector<Tensor> tensors;
  std::vector<Task> tasks;  // forward in route order, backward in reverse route order, updates
  std::vector<int> route;   // forward order of graph layers (input first)
  std::vector<int> y_of, dy_of, aux_of, w_of, dw_of;  // per graph layer: tensor id or -1
  std::vector<int> forward_of;                        // per graph layer: its forward task id, -1 for the input
  int labels = -1;                                    // tensor id or -1 (no loss layer)

  // What recomputing layer l's output reads: its forward task's reads plus its saved state
  // (dropout's mask, layer norm's statistics), which a recomputation reuses and never rewrites.
  std::vector<int> recompute_reads(int layer) const;

  std::int64_t resident_bytes() const;  // weights and weight gradients
  // Tensors a task touches (reads, writes and accumulates), without duplicates.
  std::vector<int> touched(const Task& t) const;
};

// The plan step op that runs a task.
StepOp step_op_of(TaskKind k);
// Whether a layer has tasks of this kind (what a profiler costs): conv and fc split their backward
// into data and filter, every other layer but the input has one backward, update needs weights.
bool layer_has_task(const GraphLayer& l, TaskKind k);

// `route` must be a topological order of g's layers starting with the input (route.h makes one;
// any other valid order works too). Throws a CHECK failure on an invalid order (a bug).
TaskGraph build_tasks(const Graph& g, const std::vector<int>& route);

}  // namespace ucplan
