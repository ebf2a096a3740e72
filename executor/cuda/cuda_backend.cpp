// The CUDA replay backend (backend.h): one cudaMalloc arena, pinned host buffers, a compute stream
// whose cuDNN/cuBLAS handles live in one cuda::Context, and two copy streams (h2d, d2h). It runs
// the same ops with the same operand roles as the CPU backend (cpu_backend.cpp, cpu_ops.cpp), on
// the kernels of kernels_cuda.h, so the two are compared step for step (STYLE.md #8).
//
// Events. Every submission takes a slot of two timing events from a pool that is reused from one
// begin() to the next: `start` is recorded after the step's waits are satisfied, `end` after its
// op and, in check mode, its poisoning. A wait is a cudaStreamWaitEvent on the waited step's `end`
// of the current phase (round, or the final steps); steps come in id order, so it is recorded
// already. A waited step that was not submitted since the last barrier() has completed, so there
// is nothing to wait for. Times are ns since a `begin` event recorded by begin(); barrier() reads
// those of the earlier rounds while the device still runs the current one, end() the rest, so
// little host work lies between the device's rounds.
//
// CUDA graphs (make_cuda_backend's `graphs`). A plan is a static schedule, so from the second
// iteration on (the first settles conv configurations, scratch and library workspaces, all of
// which may synchronize) each phase without poisoning, a round or the final steps, is captured
// once into a CUDA graph (stream capture, relaxed mode, the copy streams forked from and joined
// back into the compute stream) and later iterations launch it: one launch instead of a few host
// calls per step, so the device no longer idles while the host enqueues short kernels (the launch
// gap of ucplan calibrate). Timing stays per step: the slots' events are recorded as external
// event nodes of the graph, and `begin` right before the phase's first work (a graph's launch
// included). A phase whose context (sub-batch, seed, learning rate, loss scale) or steps differ
// from those captured is captured again; a capture that fails gives graphs up for the run, with
// a note, and the phase's steps are enqueued one by one as without graphs.
//
// Storage. At bf16 and fp16 (planner/model/precision.h) the arena holds activations and their
// gradients in 16 bits and every op reads and writes them there: conv and fc natively (cuDNN and
// cuBLAS with FP32 compute), every other layer through the Context's 16-bit data type
// (kernels_cuda.h: the small and modern kernels templated on the storage type, cuDNN's relu,
// pooling and batch norm on 16-bit descriptors), which gives the CPU backend's emulation
// (cpu_ops.h run_emulated) step for step. Nothing is widened into scratch. Device memory outside
// the arena, besides the CUDA context and libraries (the profile's reserve): the loss (one
// double); the Context's scratch (per-sample losses, 8 bytes a sample; batch norm recompute's
// statistics, 8 bytes a channel; scale's and layer norm's partial sums, 8 or 16 bytes a (sample,
// channel); at 16 bits fc's bias-gradient ones, 6 bytes a sample, and the FP32 partial sums of an
// add of more than 8 inputs, 4 bytes an element); and at 16 bits conv backward-filter's 16-bit
// filter gradient, 2 bytes a parameter of the largest conv layer (run_conv_half says why).
//
// Errors. submit() only enqueues; a failure (a CudaError, or a plan that does not fit this
// device, e.g. CPU algorithm names) is kept with the step it happened in, later submissions are
// skipped, and barrier()/end() rethrow it. Faults inside kernels surface at barrier()'s stream
// synchronisation (CUDA_LAUNCH_BLOCKING=1 moves them to the step's submit()).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <exception>
#include <unordered_map>

#include <fmt/format.h>

#include "executor/backend.h"
#include "executor/cpu_ops.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels_cuda.h"
#include "executor/cuda/modern_kernels.h"
#include "executor/cuda/nvml.h"
#include "executor/cuda/small_kernels.h"
#include "executor/substitute.h"
#include "planner/model/errors.h"
#include "planner/model/units.h"

namespace ucplan {
namespace {

using cuda::CudaError;

bool conv_op_of(StepOp op, cuda::ConvOp* out) {
  if (op == StepOp::Forward || op == StepOp::Recompute)
    *out = cuda::ConvOp::Forward;
  else if (op == StepOp::BackwardData)
    *out = cuda::ConvOp::BackwardData;
  else if (op == StepOp::BackwardFilter)
    *out = cuda::ConvOp::BackwardFilter;
  else
    return false;
  return true;
}

// What a conv step's algorithm that cuDNN does not know for `op` means, and what to do.
std::string not_cudnn(const std::string& algo, cuda::ConvOp op) {
  return fmt::format(
      "\"{}\" is not a cuDNN {} algorithm: the plan was compiled for another device (compile it from a profile made "
      "with --device cuda)",
      algo, cuda::conv_op_name(op));
}

// One op of a layer other than a convolution, or an update: run_layer_op_cpu's semantics on
// device pointers (LayerArgs holds device pointers here). `loss` receives the summed loss.
void run_layer_op_cuda(cuda::Context& c, const GraphLayer& l, StepOp op, const LayerArgs& a, double* loss) {
  const std::int64_t n = a.n;
  const std::int64_t out = out_elems(l) * n;
  if (op == StepOp::Update) {
    cuda::sgd_update(c, l.params(), a.lr, a.dw, const_cast<float*>(a.w));
    return;
  }
  const bool fwd = op == StepOp::Forward || op == StepOp::Recompute;
  switch (l.type()) {
    case LayerType::Input:
      cuda::throw_error("the input layer has no ops");
      break;
    case LayerType::Conv:
      cuda::throw_error("a conv step without a micro-configuration");
      break;
    case LayerType::Fc: {
      cuda::FcDims d{n, in_elems(l, 0), l.spec.fc.out_features, l.spec.fc.bias};
      const float* bias = l.bias_elems && a.w ? a.w + l.weight_elems : nullptr;
      if (fwd)
        cuda::fc_forward(c, d, a.x[0], a.w, bias, a.y);
      else if (op == StepOp::BackwardData)
        cuda::fc_backward_data(c, d, a.dy, a.w, a.dx[0], a.dx_accumulate[0]);
      else
        cuda::fc_backward_filter(c, d, a.x[0], a.dy, a.dw, l.bias_elems && a.dw ? a.dw + l.weight_elems : nullptr);
      break;
    }
    case LayerType::Relu:
      if (fwd)
        cuda::relu_forward(c, out, a.x[0], a.y);
      else
        cuda::relu_backward(c, out, a.y, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    case LayerType::Pool: {
      const cuda::PoolDims d = pool_dims(l, n);
      if (fwd)
        cuda::pool_forward(c, d, a.x[0], a.y);
      else
        cuda::pool_backward(c, d, a.x.empty() ? nullptr : a.x[0], a.y, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::BatchNorm: {
      const Shape& s = l.out;
      cuda::BnDims d{n, s.c, s.h, s.w, l.spec.bn.eps};
      float* saved = static_cast<float*>(a.aux);
      if (op == StepOp::Forward) {
        cuda::bn_forward_training(c, d, a.x[0], a.w, a.w + s.c, a.y, saved);
      } else if (op == StepOp::Recompute) {
        // As on the CPU (cpu_ops.cpp): the profiled training forward, statistics to scratch (the
        // first use grows it, which synchronizes the stream once, in the warm-up iteration).
        auto* stats = static_cast<float*>(c.scratch(static_cast<std::size_t>(2 * s.c) * sizeof(float)));
        cuda::bn_forward_training(c, d, a.x[0], a.w, a.w + s.c, a.y, stats);
      } else
        cuda::bn_backward(c, d, a.x[0], a.w, saved, a.dy, a.dx[0], a.dw, a.dx_accumulate[0]);
      break;
    }
    case LayerType::Lrn: {
      const Shape& s = l.out;
      cuda::LrnDims d{n, s.c, s.h, s.w, l.spec.lrn.size, l.spec.lrn.alpha, l.spec.lrn.beta, l.spec.lrn.k};
      if (fwd)
        cuda::lrn_forward(c, d, a.x[0], a.y);
      else
        cuda::lrn_backward(c, d, a.x[0], a.y, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::Dropout: {
      auto* mask = static_cast<std::uint8_t*>(a.aux);
      const double ratio = l.spec.dropout.ratio;
      if (op == StepOp::Forward)
        cuda::dropout_forward(c, n, out_elems(l), a.first_sample, ratio, a.seed, a.x[0], a.y, mask);
      else if (op == StepOp::Recompute)
        cuda::dropout_apply(c, out, ratio, mask, a.x[0], a.y);
      else
        cuda::dropout_backward(c, out, ratio, mask, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::Add:
      if (fwd) {
        cuda::add_forward(c, out, a.x, a.y);
      } else {
        for (std::size_t i = 0; i < a.dx.size(); ++i)
          if (a.dx[i]) cuda::add_backward(c, out, a.dy, a.dx[i], a.dx_accumulate[i]);
      }
      break;
    case LayerType::Concat: {
      std::vector<std::int64_t> cs;
      for (const auto& s : l.in_shapes) cs.push_back(s.c);
      const std::int64_t hw = l.out.h * l.out.w;
      if (fwd) {
        cuda::concat_forward(c, n, hw, cs, a.x, a.y);
      } else {
        for (std::size_t i = 0; i < a.dx.size(); ++i)
          if (a.dx[i]) cuda::concat_backward(c, n, hw, cs, i, a.dy, a.dx[i], a.dx_accumulate[i]);
      }
      break;
    }
    case LayerType::SoftmaxLoss: {
      const std::int64_t k = l.out.c;
      // The per-sample losses go to the context's scratch buffer; the first call grows it, which
      // synchronizes the compute stream once (in the warm-up iteration).
      if (fwd)
        cuda::softmax_loss_forward(c, n, k, a.x[0], a.labels, a.y, loss);
      else
        cuda::softmax_loss_backward(c, n, k, a.y, a.labels, a.loss_scale / static_cast<double>(a.total_batch), a.dx[0],
                                    a.dx_accumulate[0]);
      break;
    }
    case LayerType::Sigmoid:
    case LayerType::HardSigmoid:
    case LayerType::HardSwish:
    case LayerType::Silu:
    case LayerType::Clip:
    case LayerType::Gelu: {
      const cpu::ActivationDims d = activation_dims(l);
      if (fwd)
        cuda::activation_forward(c, d, out, a.x[0], a.y);
      else
        cuda::activation_backward(c, d, out, cpu::activation_backward_reads_y(d.f) ? a.y : a.x[0], a.dy, a.dx[0],
                                  a.dx_accumulate[0]);
      break;
    }
    case LayerType::Mul: {  // backward: x is given only where ds is needed, s only where dx is
      const cpu::MulDims d = mul_dims(l, n);
      if (fwd)
        cuda::mul_forward(c, d, a.x[0], a.x[1], a.y);
      else
        cuda::mul_backward(c, d, a.x[0], a.x[1], a.dy, a.dx[0], a.dx_accumulate[0], a.dx[1], a.dx_accumulate[1]);
      break;
    }
    case LayerType::Scale: {  // backward: gamma is given only where dx is needed
      const Shape& s = l.out;
      if (fwd)
        cuda::scale_forward(c, n, s.c, s.h * s.w, a.x[0], a.w, a.y);
      else
        cuda::scale_backward(c, n, s.c, s.h * s.w, a.x[0], a.w, a.dy, a.dx[0], a.dx_accumulate[0], a.dw);
      break;
    }
    case LayerType::LayerNorm: {
      const Shape& s = l.out;
      const cpu::LnDims d{n, s.c, s.h, s.w, l.spec.ln.eps};
      float* saved = static_cast<float*>(a.aux);
      if (op == StepOp::Forward)
        cuda::ln_forward_training(c, d, a.x[0], a.w, a.w + s.c, a.y, saved);
      else if (op == StepOp::Recompute)  // from the saved statistics: bit-identical to the forward
        cuda::ln_forward_saved(c, d, a.x[0], a.w, a.w + s.c, saved, a.y);
      else
        cuda::ln_backward(c, d, a.x[0], a.w, saved, a.dy, a.dx[0], a.dw, a.dx_accumulate[0]);
      break;
    }
    case LayerType::ChannelShuffle: {
      const Shape& s = l.out;
      if (fwd)
        cuda::channel_shuffle_forward(c, n, s.c, s.h * s.w, l.spec.shuffle.groups, a.x[0], a.y);
      else
        cuda::channel_shuffle_backward(c, n, s.c, s.h * s.w, l.spec.shuffle.groups, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::Slice: {
      const Shape& x = l.in_shapes[0];
      const auto& sl = l.spec.slice;
      if (fwd)
        cuda::slice_forward(c, n, x.c, x.h * x.w, sl.begin, sl.end, a.x[0], a.y);
      else
        cuda::slice_backward(c, n, x.c, x.h * x.w, sl.begin, sl.end, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
  }
}

// A conv step's micro-configuration as cuDNN algorithms, checked once against this device.
struct ConvConfig {
  std::vector<MicroStep> source;  // the step's config it was made from
  std::int64_t sub_batch = 0;
  cuda::ConvOp op = cuda::ConvOp::Forward;
  std::vector<cuda::MicroConfig> micro;
};

struct Slot {
  cuda::Event start, end;  // timing enabled
  cuda::Event dep{false};  // while capturing: what other streams wait for (`end` is an external node)
  int step = -1;
  int round = 0;  // -1: a final step
  int stream = 0;
};

// A step as submitted in the current phase, to enqueue it directly if a graph is given up.
struct Submitted {
  const ResolvedStep* step;
  int round;
  RunContext ctx;
  bool poison;
};

// A captured phase and what it was captured for.
struct PhaseGraph {
  int phase = -1;
  RunContext ctx;  // its kernels' arguments (sub-batch, seed, learning rate, loss scale)
  std::size_t first_slot = 0;
  std::vector<std::pair<int, int>> steps;  // (step id, round) in submission order
  std::vector<std::array<int, 3>> slots;   // per slot from first_slot: step, round, stream
  cuda::Owned<cudaGraphExec_t, cudaGraphExecDestroy> exec;

  bool matches(int p, const RunContext& c, std::size_t first) const {
    return phase == p && ctx == c && first_slot == first;
  }
};

class CudaBackend : public Backend {
 public:
  // used_before: device memory in use before this process made its context (NVML), -1 unknown.
  CudaBackend(const Graph& g, int index, std::int64_t used_before, bool exact, bool graphs)
      : g_(g),
        index_(index),
        exact_(exact),
        used_before_(used_before),
        device_(index),
        free_before_(free_device_bytes()),
        ctx_(compute_.get(), /*allow_tf32=*/g.precision == Precision::TF32,
             storage_of(g.precision) == Storage::BF16  ? cuda::DataType::BFloat16
             : storage_of(g.precision) == Storage::F16 ? cuda::DataType::Half
                                                       : cuda::DataType::Float,
             /*tensor_op_math=*/g.precision != Precision::PseudoFP16),
        loss_(sizeof(double)),
        half_(low_precision_storage(g.precision)),
        graphs_enabled_(graphs) {
    description_ = fmt::format("cuda:{} ({}, cuDNN {}, {})", index_, device_.name(), cuda::library_versions().cudnn,
                               g.precision == Precision::TF32 ? "TF32 tensor-op math"
                               : half_ ? fmt::format("{}: 16-bit operands, FP32 compute{}", precision_name(g.precision),
                                                     g.precision == Precision::PseudoFP16 ? "" : ", tensor-op math")
                                       : std::string("no TF32"));
    note_memory_held();
  }

  ~CudaBackend() override {
    // Nothing may still run on memory about to be freed; a failure here means the context is
    // broken already, and destructors do not throw.
    for (cudaStream_t s : {compute_.get(), h2d_.get(), d2h_.get()}) cudaStreamSynchronize(s);
    cudaGetLastError();
  }

  // The first iteration settles what may synchronize; the second captures the graphs.
  int warmup_iterations() const override { return graphs_enabled_ ? 2 : 1; }

  std::string device_name() const override { return device_.name(); }

  std::string description() const override {
    return graphs_launched_ ? description_ + ", phases launched as CUDA graphs" : description_;
  }

  // The algorithm names only (check_cuda_algorithms): whether each fits its workspace here is a
  // question for cuDNN per step (conv_config), answered when the step is first submitted.
  void check_steps(const std::vector<ResolvedStep>& steps) const override {
    check_cuda_algorithms(g_, steps, device_option());
  }

  void allocate(std::int64_t arena_bytes, const std::vector<std::int64_t>& host_bytes) override {
    device_.select();
    synchronize_all();
    graphs_.clear();  // captured with the old arena's and host buffers' addresses
    hosts_.clear();
    arena_.reset();
    arena_bytes_ = std::max<std::int64_t>(arena_bytes, 256);
    try {
      arena_ = cuda::DeviceBuffer(static_cast<std::size_t>(arena_bytes_));
    } catch (const CudaError& e) {
      if (!e.out_of_memory()) throw;
      throw UserError("", device_option(),
                      fmt::format("cannot allocate an arena of {} on {} ({} free): {}", format_bytes(arena_bytes_),
                                  description_, format_bytes(free_device_bytes()), e.what()));
    }
    // Zeroed as the CPU backend's arena and host buffers are, so both start from the same bytes.
    UCPLAN_CUDA(cudaMemsetAsync(arena_.get(), 0, static_cast<std::size_t>(arena_bytes_), compute_.get()));
    UCPLAN_CUDA(cudaStreamSynchronize(compute_.get()));
    for (auto b : host_bytes) {
      hosts_.emplace_back(static_cast<std::size_t>(std::max<std::int64_t>(b, 1)));
      std::memset(hosts_.back().get(), 0, hosts_.back().bytes());
    }
    host_bytes_ = host_bytes;
    note_memory_held();
  }

  void* host(int id) override { return hosts_.at(static_cast<std::size_t>(id)).get(); }

  // Synchronous, on the compute stream (plain cudaMemcpy runs on the legacy default stream,
  // which does not order itself with the non-blocking streams).
  void write(std::int64_t offset, const void* src, std::int64_t bytes) override {
    check_range(offset, bytes, "write");
    synchronize_all();
    UCPLAN_CUDA(cudaMemcpyAsync(arena_ptr(offset), src, static_cast<std::size_t>(bytes), cudaMemcpyHostToDevice,
                                compute_.get()));
    UCPLAN_CUDA(cudaStreamSynchronize(compute_.get()));
  }
  void read(std::int64_t offset, void* dst, std::int64_t bytes) override {
    check_range(offset, bytes, "read");
    synchronize_all();
    UCPLAN_CUDA(cudaMemcpyAsync(dst, arena_ptr(offset), static_cast<std::size_t>(bytes), cudaMemcpyDeviceToHost,
                                compute_.get()));
    UCPLAN_CUDA(cudaStreamSynchronize(compute_.get()));
  }
  void fill(std::int64_t offset, std::int64_t bytes, unsigned char value) override {
    check_range(offset, bytes, "fill");
    synchronize_all();
    UCPLAN_CUDA(cudaMemsetAsync(arena_ptr(offset), value, static_cast<std::size_t>(bytes), compute_.get()));
    UCPLAN_CUDA(cudaStreamSynchronize(compute_.get()));
  }

  std::int64_t device_memory_bytes() override {
    note_memory_held();
    return std::max(held_bytes_, arena_bytes_);
  }

  std::vector<std::string> notes() const override { return notes_; }

  std::int64_t runtime_overhead_bytes() override {
    note_memory_held();
    return overhead_bytes_;
  }

  void begin() override {
    error_ = nullptr;
    used_ = synced_ = harvested_ = 0;
    timeline_.clear();
    std::fill(slot_of_.begin(), slot_of_.end(), -1);
    ++iteration_;
    phase_ = 0;
    mode_ = Mode::Undecided;
    submitted_.clear();
    begin_pending_ = true;  // recorded right before the iteration's first work (start_timing)
  }

  void submit(const ResolvedStep& s, int round, const RunContext& ctx, bool poison) override {
    if (error_) return;  // after a failure nothing more runs until barrier() reports it
    try {
      if (mode_ == Mode::Undecided) choose_mode(ctx, poison);
      if (mode_ == Mode::Replay) {
        const PhaseGraph& pg = *graph_;
        if (submitted_.size() < pg.steps.size() && pg.steps[submitted_.size()] == std::pair<int, int>{s.id, round}) {
          submitted_.push_back({&s, round, ctx, poison});
          return;
        }
        leave_graphs(fmt::format("step {} of round {} was not the captured phase's next step", s.id, round), false);
      }
      if (mode_ == Mode::Capture) {
        submitted_.push_back({&s, round, ctx, poison});
        try {
          enqueue(s, round, ctx, poison);
        } catch (const std::exception& e) {
          leave_graphs(fmt::format("capturing step {}: {}", s.id, e.what()), false);  // enqueues it directly
        }
        return;
      }
      enqueue(s, round, ctx, poison);
    } catch (const CudaError& e) {
      error_ = std::make_exception_ptr(CudaError(fmt::format("cuda:{} {}{}", index_, step_context(s, round), e.what()),
                                                 e.library(), e.code(), e.kind()));
    } catch (const UserError& e) {
      error_ = std::make_exception_ptr(UserError(e.file(), e.where(), step_context(s, round) + e.reason()));
    } catch (const std::exception& e) {
      error_ = std::make_exception_ptr(CudaError(fmt::format("cuda:{} {}{}", index_, step_context(s, round), e.what()),
                                                 "ucplan", 0, CudaError::Kind::Other));
    }
  }

  void barrier() override {
    try {
      if (!error_) finish_phase();
    } catch (const CudaError& e) {
      error_ = std::make_exception_ptr(CudaError(
          fmt::format("cuda:{} phase {} (a round, or the final steps) as a graph: {}", index_, phase_, e.what()),
          e.library(), e.code(), e.kind()));
    } catch (...) {  // a step enqueued directly after graphs were given up
      error_ = std::current_exception();
    }
    ++phase_;
    mode_ = Mode::Undecided;
    submitted_.clear();
    // The times of the phases before this one, read while the device still runs this one.
    try {
      harvest(synced_);
    } catch (const CudaError& e) {
      if (!error_)
        error_ = std::make_exception_ptr(CudaError(fmt::format("cuda:{} reading the step times: {}", index_, e.what()),
                                                   e.library(), e.code(), e.kind()));
    }
    for (const cuda::Stream* st : {&compute_, &h2d_, &d2h_}) {
      try {
        st->synchronize();
      } catch (const CudaError& e) {
        if (!error_)
          error_ = std::make_exception_ptr(CudaError(
              fmt::format("cuda:{} barrier: a step of {} failed on the device (CUDA_LAUNCH_BLOCKING=1 names it): {}",
                          index_, last_final_ ? "the final steps" : fmt::format("round {}", last_round_), e.what()),
              e.library(), e.code(), e.kind()));
      }
    }
    synced_ = used_;
    std::fill(slot_of_.begin(), slot_of_.end(), -1);  // every submitted step has completed
    if (error_) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

  std::vector<MeasuredStep> end() override {
    barrier();
    try {
      harvest(used_);
    } catch (const CudaError& e) {
      throw CudaError(fmt::format("cuda:{} end, reading the step times: {}", index_, e.what()), e.library(), e.code(),
                      e.kind());
    }
    return timeline_;
  }

 private:
  static std::int64_t free_device_bytes() {
    std::size_t free = 0, total = 0;
    UCPLAN_CUDA(cudaMemGetInfo(&free, &total));
    return static_cast<std::int64_t>(free);
  }

  // What this backend holds on the device: the arena, the handles, the descriptor caches'
  // workspace queries, the scratch buffer and the kernel modules loaded so far (lazy loading),
  // as the drop in free memory since it started (the CUDA context itself excluded).
  // The runtime's overhead: device memory in use beyond the arena, minus what was in use before
  // this process (NVML; without it, everything in use counts), and at least what this backend
  // holds beyond the arena: on an H200 NVML's reading from before the context left 0 to 21 MiB
  // where the backend alone held 80 to 112 MiB beyond its arena (gpu-h200.md).
  void note_memory_held() {
    std::size_t free = 0, total = 0;
    UCPLAN_CUDA(cudaMemGetInfo(&free, &total));
    held_bytes_ = std::max(held_bytes_, free_before_ - static_cast<std::int64_t>(free));
    const std::int64_t used = static_cast<std::int64_t>(total) - static_cast<std::int64_t>(free);
    const auto arena = static_cast<std::int64_t>(arena_.bytes());
    overhead_bytes_ =
        std::max({overhead_bytes_, used - std::max<std::int64_t>(used_before_, 0) - arena, held_bytes_ - arena});
  }

  // Records `begin` on the compute stream, once per iteration, right before its first work (a
  // graph's launch, or a step enqueued directly); the copy streams start no earlier, so no time is
  // negative.
  void start_timing() {
    if (!begin_pending_) return;
    begin_pending_ = false;
    begin_.record(compute_.get());
    h2d_.wait(begin_.get());
    d2h_.wait(begin_.get());
  }

  // At a phase's first submission: enqueue directly (graphs off, the first iteration, poisoning),
  // launch the graph captured for it, or capture one.
  void choose_mode(const RunContext& ctx, bool poison) {
    phase_first_slot_ = used_;
    graph_ = nullptr;
    if (!graphs_enabled_ || iteration_ < 2 || poison) {
      mode_ = Mode::Direct;
      start_timing();
      return;
    }
    for (auto& pg : graphs_)
      if (pg.matches(phase_, ctx, used_)) graph_ = &pg;
    if (graph_) {
      mode_ = Mode::Replay;
      return;
    }
    graphs_.erase(
        std::remove_if(graphs_.begin(), graphs_.end(), [&](const PhaseGraph& pg) { return pg.phase == phase_; }),
        graphs_.end());  // another context: captured again
    start_timing();
    mode_ = Mode::Capture;
    try {
      UCPLAN_CUDA(cudaStreamBeginCapture(compute_.get(), cudaStreamCaptureModeRelaxed));
      fork_.record(compute_.get());
      h2d_.wait(fork_.get());
      d2h_.wait(fork_.get());
    } catch (const CudaError& e) {
      leave_graphs(fmt::format("beginning a capture: {}", e.what()), false);
    }
  }

  // At a barrier: the captured phase made into a graph and launched, or the replayed one launched.
  void finish_phase() {
    if (mode_ == Mode::Capture) {
      cudaGraph_t graph = nullptr;
      cudaError_t rc = cudaSuccess;
      try {  // the copy streams joined back into the compute stream, which ends the capture
        join_h2d_.record(h2d_.get());
        compute_.wait(join_h2d_.get());
        join_d2h_.record(d2h_.get());
        compute_.wait(join_d2h_.get());
      } catch (const CudaError& e) {
        leave_graphs(fmt::format("joining the copy streams: {}", e.what()), false);
        return;
      }
      rc = cudaStreamEndCapture(compute_.get(), &graph);
      if (rc != cudaSuccess || !graph) {
        cudaGetLastError();
        leave_graphs(fmt::format("ending the capture: {}", cudaGetErrorString(rc)), true);
        return;
      }
      PhaseGraph pg;
      pg.phase = phase_;
      pg.ctx = submitted_.front().ctx;  // one context per phase: the first step's
      pg.first_slot = phase_first_slot_;
      for (const auto& x : submitted_) pg.steps.emplace_back(x.step->id, x.round);
      for (std::size_t k = phase_first_slot_; k < used_; ++k)
        pg.slots.push_back({slots_[k].step, slots_[k].round, slots_[k].stream});
      rc = cudaGraphInstantiate(pg.exec.out(), graph, 0);
      cudaGraphDestroy(graph);
      if (rc != cudaSuccess) {
        cudaGetLastError();
        leave_graphs(fmt::format("instantiating the graph: {}", cudaGetErrorString(rc)), true);
        return;
      }
      graphs_.push_back(std::move(pg));
      UCPLAN_CUDA(cudaGraphLaunch(graphs_.back().exec.get(), compute_.get()));
      graphs_launched_ = true;
    } else if (mode_ == Mode::Replay) {
      const PhaseGraph& pg = *graph_;
      if (submitted_.size() != pg.steps.size()) {
        leave_graphs(
            fmt::format("{} of the captured phase's {} steps were submitted", submitted_.size(), pg.steps.size()),
            false);
        return;
      }
      for (std::size_t i = 0; i < pg.slots.size(); ++i) {
        if (used_ == slots_.size()) slots_.emplace_back();
        Slot& slot = slots_[used_++];
        slot.step = pg.slots[i][0];
        slot.round = pg.slots[i][1];
        slot.stream = pg.slots[i][2];
      }
      start_timing();
      UCPLAN_CUDA(cudaGraphLaunch(pg.exec.get(), compute_.get()));
    }
  }

  // Gives graphs up for the rest of the run, with a note that says why, and enqueues the phase's
  // steps so far directly. ended: the capture in progress has been ended already.
  void leave_graphs(const std::string& why, bool ended) {
    if (mode_ == Mode::Capture && !ended) {
      cudaGraph_t graph = nullptr;
      cudaStreamEndCapture(compute_.get(), &graph);
      if (graph) cudaGraphDestroy(graph);
    }
    cudaGetLastError();  // capture errors are not sticky: the context goes on
    graphs_enabled_ = false;
    graph_ = nullptr;
    graphs_.clear();
    notes_.push_back(fmt::format("CUDA graphs given up ({}): steps enqueued one by one", why));
    mode_ = Mode::Direct;
    used_ = phase_first_slot_;
    std::fill(slot_of_.begin(), slot_of_.end(), -1);
    const std::vector<Submitted> again = std::move(submitted_);
    submitted_.clear();
    start_timing();
    for (const auto& x : again) enqueue(*x.step, x.round, x.ctx, x.poison);
  }

  // A slot's timing event: an external event node of the graph while capturing.
  void record_time(const cuda::Event& e, cudaStream_t st) const {
    if (mode_ == Mode::Capture)
      UCPLAN_CUDA(cudaEventRecordWithFlags(e.get(), st, cudaEventRecordExternal));
    else
      e.record(st);
  }

  std::string device_option() const { return fmt::format("--device cuda:{}", index_); }

  std::string step_context(const ResolvedStep& s, int round) const {
    std::string what = step_op_name(s.op);
    if (s.layer >= 0 && static_cast<std::size_t>(s.layer) < g_.layers.size())
      what += " " + g_.layers[static_cast<std::size_t>(s.layer)].name();
    return fmt::format("step {} ({}, {}): ", s.id, what, s.final ? "final" : fmt::format("round {}", round));
  }

  void synchronize_all() {
    compute_.synchronize();
    h2d_.synchronize();
    d2h_.synchronize();
  }

  void check_range(std::int64_t offset, std::int64_t bytes, const char* what) const {
    UCPLAN_CHECK(
        arena_.get() && offset >= 0 && bytes >= 0 && offset + bytes <= arena_bytes_,
        fmt::format("{} of {} bytes at {} is outside the arena of {} bytes", what, bytes, offset, arena_bytes_));
  }

  char* arena_ptr(std::int64_t offset) const { return arena_.as<char>() + offset; }
  float* f(std::int64_t offset) const { return offset < 0 ? nullptr : reinterpret_cast<float*>(arena_ptr(offset)); }

  cudaStream_t stream(int s) const {
    switch (s) {
      case 0:
        return compute_.get();
      case 1:
        return h2d_.get();
      case 2:
        return d2h_.get();
      default:
        cuda::throw_error(fmt::format("stream {} (0 compute, 1 h2d, 2 d2h)", s));
    }
  }

  std::int64_t ns_since_begin(const cuda::Event& e) const {
    float ms = 0;
    UCPLAN_CUDA(cudaEventElapsedTime(&ms, begin_.get(), e.get()));
    return std::llround(static_cast<double>(ms) * 1e6);
  }

  // Appends the times of slots [harvested_, upto), all completed, to the timeline.
  void harvest(std::size_t upto) {
    for (; harvested_ < upto; ++harvested_) {
      const Slot& k = slots_[harvested_];
      timeline_.push_back({k.step, k.round, ns_since_begin(k.start), ns_since_begin(k.end)});
    }
  }

  // The waited step's `end` in this phase, unless it ran on the same stream (already ordered) or
  // has not run since the last barrier (completed).
  void wait_for(cudaStream_t st, int stream_index, int step) {
    if (step < 0 || static_cast<std::size_t>(step) >= slot_of_.size()) return;
    const int k = slot_of_[static_cast<std::size_t>(step)];
    if (k < 0 || slots_[static_cast<std::size_t>(k)].stream == stream_index) return;
    const Slot& waited = slots_[static_cast<std::size_t>(k)];
    UCPLAN_CUDA(cudaStreamWaitEvent(st, (mode_ == Mode::Capture ? waited.dep : waited.end).get(), 0));
  }

  void enqueue(const ResolvedStep& s, int round, const RunContext& ctx, bool poison) {
    UCPLAN_CHECK(arena_.get(), "allocate() comes before submit()");
    UCPLAN_CHECK(s.id >= 0, "a resolved step has an id");
    const int si = static_cast<int>(s.stream);
    const cudaStream_t st = stream(si);
    last_round_ = round;
    last_final_ = s.final;
    if (used_ == slots_.size()) slots_.emplace_back();  // events made once, reused by later iterations
    const std::size_t k = used_++;
    Slot& slot = slots_[k];
    slot.step = s.id;
    slot.round = s.final ? -1 : round;
    slot.stream = si;
    try {
      for (int w : s.waits) wait_for(st, si, w);
      record_time(slot.start, st);
      run(s, round, ctx, st);
      if (poison && !s.poison_after.empty()) {
        for (int w : s.poison_waits) wait_for(st, si, w);
        for (const auto& [off, size] : s.poison_after) {
          check_range(off, size, "poison");
          UCPLAN_CUDA(cudaMemsetAsync(arena_ptr(off), kPoisonByte, static_cast<std::size_t>(size), st));
        }
      }
      record_time(slot.end, st);
      if (mode_ == Mode::Capture) slot.dep.record(st);
    } catch (...) {
      used_ = k;  // its `end` was never recorded: the step has no time, and the slot is free again
      throw;
    }
    if (slot_of_.size() <= static_cast<std::size_t>(s.id)) slot_of_.resize(static_cast<std::size_t>(s.id) + 1, -1);
    slot_of_[static_cast<std::size_t>(s.id)] = static_cast<int>(k);
  }

  void run(const ResolvedStep& s, int round, const RunContext& ctx, cudaStream_t st) {
    if (s.op == StepOp::Prefetch || s.op == StepOp::Offload) {
      const std::int64_t host_offset = ucplan::host_offset(s, round, ctx);
      if (s.host < 0 || static_cast<std::size_t>(s.host) >= hosts_.size() ||
          host_offset + s.bytes > host_bytes_[static_cast<std::size_t>(s.host)])
        cuda::throw_error(fmt::format("host buffer {}: {} bytes at {} are outside it", s.host, s.bytes, host_offset));
      check_range(s.device, s.bytes, step_op_name(s.op));
      char* h = hosts_[static_cast<std::size_t>(s.host)].as<char>() + host_offset;
      const auto bytes = static_cast<std::size_t>(s.bytes);
      if (s.op == StepOp::Prefetch)
        UCPLAN_CUDA(cudaMemcpyAsync(arena_ptr(s.device), h, bytes, cudaMemcpyHostToDevice, st));
      else
        UCPLAN_CUDA(cudaMemcpyAsync(h, arena_ptr(s.device), bytes, cudaMemcpyDeviceToHost, st));
      return;
    }
    if (s.stream != Stream::Compute)
      cuda::throw_error(fmt::format("compute op {} on stream {}: the handles are bound to the compute stream",
                                    step_op_name(s.op), stream_name(s.stream)));
    if (s.layer < 0 || static_cast<std::size_t>(s.layer) >= g_.layers.size())
      cuda::throw_error(fmt::format("no layer {}", s.layer));
    const GraphLayer& l = g_.layers[static_cast<std::size_t>(s.layer)];
    LayerArgs a;
    for (auto off : s.x) a.x.push_back(f(off));
    a.y = f(s.y);
    a.w = f(s.w);
    a.dw = f(s.dw);
    a.aux = s.aux < 0 ? nullptr : arena_ptr(s.aux);
    a.dy = f(s.dy);
    for (auto off : s.dx) a.dx.push_back(f(off));
    a.dx_accumulate = s.dx_accumulate;
    a.labels = s.labels < 0 ? nullptr : reinterpret_cast<const std::int32_t*>(arena_ptr(s.labels));
    a.workspace = s.workspace < 0 ? nullptr : arena_ptr(s.workspace);
    a.n = ctx.sub_batch;
    a.first_sample = static_cast<std::int64_t>(round) * ctx.sub_batch;
    a.total_batch = ctx.total_batch;
    a.seed = ctx.seed;
    a.lr = ctx.lr;
    a.loss_scale = ctx.loss_scale;
    auto op = [&](const LayerArgs& b) {
      if (!s.config.empty() && s.op != StepOp::Update)
        run_conv(s, l, b);
      else
        run_layer_op_cuda(ctx_, l, s.op, b, loss_.as<double>());
    };
    const bool gemm_layer = l.type() == LayerType::Conv || l.type() == LayerType::Fc;
    if (half_ && s.op != StepOp::Update && l.type() == LayerType::Conv)
      run_conv_half(s, l, a);
    else if (half_ && s.op != StepOp::Update && l.type() == LayerType::Fc)
      run_fc_half(l, s.op, a);
    else
      op(a);
    // The FP32 master weights changed: their 16-bit copy follows (graph.h), as on the CPU.
    if (half_ && s.op == StepOp::Update && gemm_layer)
      cuda::detail::launch_narrow(compute_.get(), ctx_.data_type(), l.params(), a.w,
                                  const_cast<float*>(a.w) + l.params());
  }

  // bf16 / fp16 convolutions natively: cuDNN on the 16-bit tensors with a FLOAT compute type
  // (the context's descriptors), weights and bias from their 16-bit copy after the FP32 master
  // (graph.h), micro-batches on byte offsets along N. Backward-filter writes each micro-batch's
  // filter (and bias) gradient in 16 bits (cuDNN wants the filter's type) into dw16_, which is
  // then added into the FP32 weight gradient, so micro-batches and rounds accumulate in FP32 as
  // on the CPU. dw16_ lies outside the arena: the plan sizes a step's workspace for cuDNN alone.
  void run_conv_half(const ResolvedStep& s, const GraphLayer& l, const LayerArgs& a) {
    const ConvConfig& c = conv_config(s, l, a.n);
    const auto ws = static_cast<std::size_t>(s.workspace < 0 ? 0 : s.workspace_bytes);
    const std::int64_t in_bytes = in_elems(l, 0) * 2, out_bytes = out_elems(l) * 2, params = l.params();
    auto at = [](const void* p, std::int64_t bytes) {
      return reinterpret_cast<float*>(const_cast<char*>(static_cast<const char*>(p)) + bytes);
    };
    const float* w16 = a.w ? at(a.w, params * 4) : nullptr;  // the copy, after the FP32 master
    const float* bias16 = w16 && l.bias_elems ? at(w16, l.weight_elems * 2) : nullptr;
    float* dw16 = c.op == cuda::ConvOp::BackwardFilter ? dw16_buffer(params) : nullptr;
    // As the FP32 path checks (kernels_cuda.cpp check_micro): micro-batches that do not make up
    // the step's samples would read and write past its tensors into their neighbours.
    std::int64_t samples = 0;
    for (const cuda::MicroConfig& m : c.micro) samples += m.batch;
    if (samples != a.n)
      cuda::throw_error(fmt::format("conv {}: micro-batches add up to {} samples, the kernel has {}",
                                    cuda::conv_op_name(c.op), samples, a.n));
    std::int64_t done = 0;
    for (const cuda::MicroConfig& m : c.micro) {
      const cuda::ConvDims d = conv_dims(l, m.batch);
      switch (c.op) {
        case cuda::ConvOp::Forward:
          cuda::conv_forward(ctx_, d, m.algo, at(a.x.at(0), done * in_bytes), w16, bias16, at(a.y, done * out_bytes),
                             a.workspace, ws);
          break;
        case cuda::ConvOp::BackwardData:
          cuda::conv_backward_data(ctx_, d, m.algo, at(a.dy, done * out_bytes), w16, at(a.dx.at(0), done * in_bytes),
                                   a.dx_accumulate.at(0) != 0, a.workspace, ws);
          break;
        case cuda::ConvOp::BackwardFilter:
          UCPLAN_CUDA(cudaMemsetAsync(dw16, 0, static_cast<std::size_t>(params) * 2, compute_.get()));
          cuda::conv_backward_filter(ctx_, d, m.algo, at(a.x.at(0), done * in_bytes), at(a.dy, done * out_bytes), dw16,
                                     l.bias_elems ? at(dw16, l.weight_elems * 2) : nullptr, a.workspace, ws);
          cuda::detail::launch_accumulate_widened(compute_.get(), ctx_.data_type(), params, dw16, a.dw);
          break;
      }
      done += m.batch;
    }
  }

  // fc natively: cublasGemmEx on the 16-bit tensors and weight copy with FP32 compute; the weight
  // and bias gradients are written in FP32 directly.
  void run_fc_half(const GraphLayer& l, StepOp op, const LayerArgs& a) {
    const cuda::FcDims d{a.n, in_elems(l, 0), l.spec.fc.out_features, l.spec.fc.bias};
    const float* w16 = a.w ? reinterpret_cast<const float*>(reinterpret_cast<const char*>(a.w + l.params())) : nullptr;
    const float* bias16 = w16 && l.bias_elems
                              ? reinterpret_cast<const float*>(reinterpret_cast<const char*>(w16) + l.weight_elems * 2)
                              : nullptr;
    if (op == StepOp::Forward || op == StepOp::Recompute)
      cuda::fc_forward(ctx_, d, a.x[0], w16, bias16, a.y);
    else if (op == StepOp::BackwardData)
      cuda::fc_backward_data(ctx_, d, a.dy, w16, a.dx[0], a.dx_accumulate[0]);
    else
      cuda::fc_backward_filter(ctx_, d, a.x[0], a.dy, a.dw, l.bias_elems && a.dw ? a.dw + l.weight_elems : nullptr);
  }

  // Room for `params` 16-bit gradients (growing it synchronizes: warm-up only), as float* like
  // every 16-bit operand of a Context call.
  float* dw16_buffer(std::int64_t params) {
    const auto bytes = static_cast<std::size_t>(std::max<std::int64_t>(params, 1)) * 2;
    if (dw16_.bytes() < bytes) {
      synchronize_all();
      dw16_ = cuda::DeviceBuffer(bytes);
    }
    return dw16_.as<float>();
  }

  void run_conv(const ResolvedStep& s, const GraphLayer& l, const LayerArgs& a) {
    const ConvConfig& c = conv_config(s, l, a.n);
    const cuda::ConvDims whole = conv_dims(l, a.n);
    const auto ws = static_cast<std::size_t>(s.workspace < 0 ? 0 : s.workspace_bytes);
    switch (c.op) {
      case cuda::ConvOp::Forward:
        cuda::conv_forward_micro(ctx_, whole, c.micro, a.x.at(0), a.w,
                                 l.bias_elems && a.w ? a.w + l.weight_elems : nullptr, a.y, a.workspace, ws);
        break;
      case cuda::ConvOp::BackwardData:
        cuda::conv_backward_data_micro(ctx_, whole, c.micro, a.dy, a.w, a.dx.at(0), a.dx_accumulate.at(0) != 0,
                                       a.workspace, ws);
        break;
      case cuda::ConvOp::BackwardFilter:  // always accumulates: the rounds and micro-batches add up in dW
        cuda::conv_backward_filter_micro(ctx_, whole, c.micro, a.x.at(0), a.dy, a.dw,
                                         l.bias_elems && a.dw ? a.dw + l.weight_elems : nullptr, a.workspace, ws);
        break;
    }
  }

  // The step's micro-configuration parsed and checked against cuDNN on this device, once per
  // step (its first run, in the warm-up iteration), before anything of the step runs. CPU
  // algorithm names are the user's error (a plan for another kind of device). A cuDNN algorithm
  // this device does not support, or whose workspace here exceeds the step's workspace buffer
  // (a plan from a modelled profile or another cuDNN), is replaced as substitute.h says, and
  // noted; with --exact it is refused.
  const ConvConfig& conv_config(const ResolvedStep& s, const GraphLayer& l, std::int64_t sub_batch) {
    auto it = conv_configs_.find(s.id);
    if (it != conv_configs_.end() && it->second.source == s.config && it->second.sub_batch == sub_batch)
      return it->second;
    ConvConfig c;
    c.source = s.config;
    c.sub_batch = sub_batch;
    if (!conv_op_of(s.op, &c.op)) cuda::throw_error(fmt::format("a conv layer has no op \"{}\"", step_op_name(s.op)));
    const std::int64_t given = s.workspace < 0 ? 0 : s.workspace_bytes;
    auto fit = [&](const cuda::ConvDims& d, cuda::ConvAlgo a) {
      std::size_t bytes = 0;
      return AlgoFit{cuda::conv_algo_name(a),
                     cuda::conv_workspace(ctx_, d, a, &bytes) ? std::optional<std::int64_t>(bytes) : std::nullopt};
    };
    for (const MicroStep& m : s.config) {
      cuda::ConvAlgo algo;
      if (!cuda::parse_conv_algo(c.op, m.algo, &algo)) throw UserError("", device_option(), not_cudnn(m.algo, c.op));
      const cuda::ConvDims d = conv_dims(l, m.batch);
      const AlgoFit planned = fit(d, algo);
      if (planned.workspace && *planned.workspace <= given) {
        c.micro.push_back({algo, m.batch});
        continue;
      }
      const std::string why = planned.workspace ? fmt::format("needs a workspace of {} bytes here, the plan gives {}",
                                                              *planned.workspace, given)
                                                : std::string("is not supported here for these dims");
      const std::string what =
          fmt::format("{} {} micro-batch {}: {} {}", l.name(), cuda::conv_op_name(c.op), m.batch, m.algo, why);
      const std::string reprofile = fmt::format(
          "compile the plan from a profile measured on this device (ucplan profile {} --device "
          "cuda:{})",
          g_.net.name, index_);
      if (exact_) throw UserError("", "--exact", fmt::format("{} on {}: {}", what, description_, reprofile));
      std::vector<AlgoFit> ranked;
      for (cuda::ConvAlgo a : cuda::conv_ranked(ctx_, d, c.op)) ranked.push_back(fit(d, a));
      const std::string chosen = choose_conv_algo(planned, ranked, given);
      cuda::ConvAlgo replacement;
      if (chosen.empty() || !cuda::parse_conv_algo(c.op, chosen, &replacement))
        throw UserError("", device_option(),
                        fmt::format("{}, and no cuDNN algorithm fits that workspace: {}", what, reprofile));
      notes_.push_back(fmt::format("{}: ran {} instead (cuDNN's best-ranked that fits); times differ from the plan's",
                                   what, chosen));
      c.micro.push_back({replacement, m.batch});
    }
    return conv_configs_[s.id] = std::move(c);
  }

  // Declaration order is construction order: the device is selected and its free memory read
  // before any stream, handle or buffer exists.
  const Graph g_;
  const int index_;
  const bool exact_;  // refuse configurations this device does not run as planned
  const std::int64_t used_before_;
  cuda::Device device_;
  const std::int64_t free_before_;
  cuda::Stream compute_, h2d_, d2h_;
  cuda::Context ctx_;        // cuDNN + cuBLAS handles on the compute stream, no TF32
  cuda::DeviceBuffer loss_;  // the softmax loss (one double), kept on the device
  const bool half_;          // bf16 / fp16 storage (run_conv_half, run_fc_half)
  cuda::DeviceBuffer dw16_;  // conv backward-filter's 16-bit filter gradient (run_conv_half)
  bool graphs_enabled_;      // capture and launch phases as CUDA graphs (the top of this file)
  cuda::Event begin_;
  std::string description_;
  std::vector<Slot> slots_;    // event pairs, reused from one begin() to the next
  std::size_t used_ = 0;       // slots taken since begin()
  std::size_t synced_ = 0;     // slots submitted before the last barrier(): completed
  std::size_t harvested_ = 0;  // slots whose times are in timeline_
  std::vector<int> slot_of_;   // per step id: its slot in this phase, -1 when not submitted
  cuda::DeviceBuffer arena_;
  std::int64_t arena_bytes_ = 0;
  std::vector<cuda::PinnedBuffer> hosts_;
  std::vector<std::int64_t> host_bytes_;
  std::unordered_map<int, ConvConfig> conv_configs_;
  std::exception_ptr error_;
  int last_round_ = 0;
  bool last_final_ = false;
  std::vector<MeasuredStep> timeline_;
  std::int64_t held_bytes_ = 0;
  std::int64_t overhead_bytes_ = 0;
  std::vector<std::string> notes_;  // substitutions, graphs given up
  // CUDA graphs (the top of this file).
  enum class Mode { Undecided, Direct, Capture, Replay };
  bool graphs_launched_ = false;
  bool begin_pending_ = false;
  int iteration_ = 0;  // begin() calls so far
  int phase_ = 0;      // phases (barriers) since begin()
  Mode mode_ = Mode::Undecided;
  std::size_t phase_first_slot_ = 0;
  std::vector<Submitted> submitted_;   // this phase's steps (capture, replay)
  std::vector<PhaseGraph> graphs_;     // per phase, launched while their context holds
  const PhaseGraph* graph_ = nullptr;  // the phase's, in Replay
  cuda::Event fork_{false}, join_h2d_{false}, join_d2h_{false};
};

}  // namespace

void check_cuda_algorithms(const Graph& g, const std::vector<ResolvedStep>& steps, const std::string& option) {
  for (const ResolvedStep& s : steps) {
    cuda::ConvOp op;
    if (s.config.empty() || !conv_op_of(s.op, &op)) continue;  // not a conv kernel: submit() says so
    for (const MicroStep& m : s.config) {
      cuda::ConvAlgo algo;
      if (!cuda::parse_conv_algo(op, m.algo, &algo))
        throw UserError("", option,
                        fmt::format("step {} ({} {}): {}", s.id, step_op_name(s.op),
                                    g.layers.at(static_cast<std::size_t>(s.layer)).name(), not_cudnn(m.algo, op)));
    }
  }
}

std::unique_ptr<Backend> make_cuda_backend(const Graph& g, int device_index, bool exact, bool graphs) {
  std::string why;
  if (!cuda::cuda_device_available(&why)) throw UserError("", "--device cuda", "no CUDA device: " + why);
  // Read before this process makes its context on the device, which cudaSetDevice does.
  char bus[32] = {0};
  std::int64_t used_before = -1;
  if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device_index) == cudaSuccess)
    used_before = cuda::nvml_facts(bus).memory_used_bytes;
  cudaGetLastError();
  try {
    return std::make_unique<CudaBackend>(g, device_index, used_before, exact, graphs);
  } catch (const CudaError& e) {
    throw UserError("", "--device cuda",
                    fmt::format("no CUDA device: device {} cannot be used: {}", device_index, e.what()));
  }
}

}  // namespace ucplan
