#include "profiler/cuda/cuda_runner.h"

#include <algorithm>
#include <numeric>
#include <chrono>
#include <cmath>
#include <functional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "executor/cuda/cuda_check.h"
#include "executor/cpu_ops.h"
#include "executor/cuda/kernels_cuda.h"
#include "executor/cuda/modern_kernels.h"
#include "executor/cuda/nvml.h"
#include "executor/cuda/small_kernels.h"
#include "planner/model/errors.h"
#include "profiler/profile_network.h"

namespace ucplan {
namespace {

using cuda::Context;
using cuda::ConvAlgo;
using cuda::CudaError;
using cuda::DeviceBuffer;
using cuda::Event;
using cuda::PinnedBuffer;
using cuda::Stream;

// ---- GraphLayer -> kernel dims (the same mapping the CPU runner and the executor make) ----

cuda::BnDims bn_dims(const GraphLayer& l, std::int64_t batch) {
  const Shape& x = l.in_shapes.at(0);
  return {batch, x.c, x.h, x.w, l.spec.bn.eps};
}

cuda::LrnDims lrn_dims(const GraphLayer& l, std::int64_t batch) {
  const Shape& x = l.in_shapes.at(0);
  const LrnParams& p = l.spec.lrn;
  return {batch, x.c, x.h, x.w, p.size, p.alpha, p.beta, p.k};
}

cuda::FcDims fc_dims(const GraphLayer& l, std::int64_t batch) {
  return {batch, l.in_shapes.at(0).elems(), l.spec.fc.out_features, l.spec.fc.bias};
}

bool conv_op_of(TaskKind op, cuda::ConvOp* out) {
  if (op == TaskKind::Forward)
    *out = cuda::ConvOp::Forward;
  else if (op == TaskKind::BackwardData)
    *out = cuda::ConvOp::BackwardData;
  else if (op == TaskKind::BackwardFilter)
    *out = cuda::ConvOp::BackwardFilter;
  else
    return false;
  return true;
}

// ---- measurement helpers ----

struct Unsupported {};  // thrown inside a measurement: record "unsupported"

struct Failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The device buffers of one measurement, freed when it ends.
class Buffers {
 public:
  explicit Buffers(Context& ctx) : ctx_(ctx) {}
  float* floats(std::int64_t count, float lo = -1.0f, float hi = 1.0f) {
    auto* p = static_cast<float*>(raw(count * static_cast<std::int64_t>(sizeof(float))));
    cuda::fill_uniform(ctx_, count, ++seed_, lo, hi, p);
    return p;
  }
  std::int32_t* labels(std::int64_t count, std::int64_t k) {
    auto* p = static_cast<std::int32_t*>(raw(count * static_cast<std::int64_t>(sizeof(std::int32_t))));
    cuda::fill_labels(ctx_, count, ++seed_, static_cast<std::int32_t>(k), p);
    return p;
  }
  std::uint8_t* bytes(std::int64_t count) { return static_cast<std::uint8_t*>(raw(count)); }
  void* raw(std::int64_t bytes) {
    buffers_.emplace_back(static_cast<std::size_t>(std::max<std::int64_t>(bytes, 0)));
    return buffers_.back().get();
  }

 private:
  Context& ctx_;
  std::vector<DeviceBuffer> buffers_;
  std::uint64_t seed_ = 0;
};

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

class CudaRunner final : public Runner {
 public:
  CudaRunner(int device_index, const CudaRunnerOptions& options)
      : options_(options),
        bus_id_(pci_bus_id(device_index)),
        used_before_(cuda::nvml_facts(bus_id_).memory_used_bytes),
        device_(device_index),
        free_with_context_(free_device_bytes()),
        ctx_(stream_.get(), options.allow_tf32),
        half_(options.storage != Storage::F32),
        half_type_(options.storage == Storage::BF16 ? cuda::DataType::BFloat16 : cuda::DataType::Half) {
    if (half_) half_ctx_ = std::make_unique<Context>(stream_.get(), false, half_type_, !options.pseudo_half);
    uuid_ = device_.uuid();  // NVML's, when it answers, replaces it (the same text)
    note_overhead();
    sample_conditions(true);
  }

  DeviceInfo device() override {
    DeviceInfo d;
    d.kind = "cuda";
    d.name = device_.name();
    d.memory_bytes = device_.memory_bytes();
    d.peak_flops = device_.peak_fp32_flops();
    const cuda::Versions v = cuda::library_versions();
    d.versions["cuda_runtime"] = v.cuda_runtime;
    // The driver's own version (NVML); driver_cuda: the newest CUDA version it supports.
    d.versions["driver"] = driver_version_.empty() ? "unknown (" + nvml_why_ + ")" : driver_version_;
    d.versions["driver_cuda"] = v.driver;
    d.versions["cudnn"] = v.cudnn;
    d.versions["cudnn_cudart"] = v.cudnn_cudart;
    d.versions["cublas"] = v.cublas;
    d.versions["compute_capability"] = fmt::format("{}.{}", device_.major(), device_.minor());
    d.versions["math"] =
        half_ ? fmt::format(
                    "{} storage: conv {} data with FLOAT compute ({}), fc cublasGemmEx CUBLAS_COMPUTE_32F; "
                    "other layers on 16-bit operands with FP32 compute",
                    storage_name(options_.storage), options_.storage == Storage::BF16 ? "BFLOAT16" : "HALF",
                    options_.pseudo_half ? "CUDNN_DEFAULT_MATH" : "CUDNN_TENSOR_OP_MATH")
        : options_.allow_tf32 ? "fp32 with tf32 tensor cores"
                              : "fp32 (no tf32)";
    d.versions["ucplan"] = UCPLAN_VERSION;
    return d;
  }

  std::string source() const override { return "measured"; }

  std::vector<std::string> algorithms(const Graph& g, int layer, TaskKind op) override {
    if (layer < 0 || layer >= static_cast<int>(g.layers.size())) return {};
    const GraphLayer& l = g.layers[layer];
    if (op == TaskKind::Update) return l.has_weights() ? std::vector<std::string>{"sgd"} : std::vector<std::string>{};
    if (l.type() == LayerType::Input) return {};
    if (l.type() != LayerType::Conv) return {"default"};
    cuda::ConvOp cop;
    if (!conv_op_of(op, &cop)) return {};
    std::vector<std::string> names;
    for (ConvAlgo a : cuda::conv_algorithms(cop)) names.push_back(cuda::conv_algo_name(a));
    return names;
  }

  Measurement measure(const Graph& g, int layer, TaskKind op, const std::string& algo, std::int64_t batch,
                      int repeats) override {
    Measurement m;
    auto what = [&] {
      return fmt::format("{} {} {} micro-batch {}",
                         layer >= 0 && layer < static_cast<int>(g.layers.size()) ? g.layers[layer].name() : "?",
                         task_kind_name(op), algo, batch);
    };
    try {
      device_.select();
      Buffers buffers(ctx_);
      std::function<void()> run = prepare(g, layer, op, algo, batch, buffers, &m);
      time(run, std::max(repeats, 1), &m);
      // A fault in the last timed run surfaces here at the latest, before the buffers go.
      stream_.synchronize();
    } catch (const Unsupported&) {
      m.status = "unsupported";
    } catch (const CudaError& e) {
      if (e.library() == "cuda" && cuda::is_sticky(static_cast<cudaError_t>(e.code()))) device_failed(what(), e.what());
      if (e.out_of_memory())
        m.status = "out_of_memory";
      else if (e.not_supported())
        m.status = "unsupported";
      else
        m.status = std::string("failed: ") + e.what();
    } catch (const std::exception& e) {
      m.status = std::string("failed: ") + e.what();
    }
    if (m.status != "ok") m.seconds = m.spread = 0;
    // A failed call can leave work queued on buffers being freed: wait for the stream before the
    // next measurement. A cuDNN or cuBLAS failure may hide a sticky CUDA error: after it, every
    // later measurement would fail too, so profiling stops here, naming this one.
    if (m.status != "ok") {
      const cudaError_t e = cudaStreamSynchronize(stream_.get());
      const cudaError_t last = cudaGetLastError();
      if (cuda::is_sticky(e) || cuda::is_sticky(last))
        device_failed(what(), cuda::status_text(cuda::is_sticky(e) ? e : last) + " (after: " + m.status + ")");
    }
    sample_conditions(false);
    return m;
  }

  std::map<std::string, std::string> conditions() override {
    sample_conditions(true);
    note_overhead();
    std::map<std::string, std::string> c;
    c["timing"] = fmt::format(
        "CUDA events: {} warm-up runs, {} calibration runs, then per sample k back-to-back runs between one event "
        "pair, k "
        "for at least {:.0f} ms a sample (at most {}); the profile's repeat samples, median; seconds = sample / k",
        options_.warmup, kCalibrationRuns, kMinSampleSeconds * 1e3, kMaxRunsPerSample);
    c["l2_flush"] = "no (warm L2: runs reuse the same buffers, as back-to-back kernels of an iteration do)";
    c["micro_batch_alignment"] =
        "conv micro-batches measured at the worst offset replay gives them: gcd(per-sample bytes, 256)";
    c["gpu_uuid"] = uuid_;
    for (const char* k : {"power_limit_w", "ecc", "mig", "sm_clock_max_mhz"})
      c[k] = static_facts_.count(k) ? static_facts_.at(k) : "n/a";
    if (clock_min_ > 0)
      c["sm_clock_mhz_while_measuring"] =
          clock_min_ == clock_max_ ? std::to_string(clock_min_) : fmt::format("{}-{}", clock_min_, clock_max_);
    else
      c["sm_clock_mhz_while_measuring"] = "unknown (" + nvml_why_ + ")";
    if (power_max_ > 0) c["power_draw_w_max"] = std::to_string(power_max_);
    if (temperature_max_ > 0) c["temperature_c_max"] = std::to_string(temperature_max_);
    if (!clock_events_.empty()) c["clock_event_reasons_seen"] = clock_events_;
    // What the CUDA context, cuDNN, cuBLAS and the kernels they loaded hold on the device:
    // `ucplan compile` subtracts it from --budget (README: the budget is the device memory given).
    c["device_overhead_bytes"] = std::to_string(overhead_);
    c["device_overhead_method"] =
        used_before_ >= 0
            ? "device memory in use (cudaMemGetInfo) minus NVML's before the context, largest seen, and at least "
              "the drop in free memory since the context alone"
            : "device memory in use (cudaMemGetInfo), largest seen; NVML unavailable, so other processes count too";
    std::string nondet;
    for (const auto& a : nondeterministic_) nondet += (nondet.empty() ? "" : " ") + a;
    c["nondeterministic_algorithms"] = nondet.empty() ? "none" : nondet;
    return c;
  }

  std::vector<TransferPoint> measure_transfers(bool host_to_device, const std::vector<std::int64_t>& sizes) override {
    std::vector<TransferPoint> points;
    if (sizes.empty()) return points;
    const std::int64_t biggest = std::max<std::int64_t>(*std::max_element(sizes.begin(), sizes.end()), 1);
    PinnedBuffer host;
    DeviceBuffer dev;
    try {
      device_.select();
      host = PinnedBuffer(static_cast<std::size_t>(biggest));
      dev = DeviceBuffer(static_cast<std::size_t>(biggest));
      std::fill_n(static_cast<unsigned char*>(host.get()), biggest, static_cast<unsigned char>(1));
    } catch (const std::exception&) {
      host.reset();
      dev.reset();  // too big at once: per size below
    }
    for (std::int64_t s : sizes) {
      try {
        PinnedBuffer h;
        DeviceBuffer d;
        void* hp = host.get();
        void* dp = dev.get();
        if (!hp || !dp) {
          h = PinnedBuffer(static_cast<std::size_t>(std::max<std::int64_t>(s, 1)));
          d = DeviceBuffer(static_cast<std::size_t>(std::max<std::int64_t>(s, 1)));
          hp = h.get();
          dp = d.get();
        }
        points.push_back({s, copy_seconds(host_to_device, hp, dp, s, 5)});
      } catch (const std::exception&) {
        // This size cannot be allocated or copied: leave it out of the fit.
        if (cudaStreamSynchronize(stream_.get()) != cudaSuccess) cudaGetLastError();
      }
    }
    return points;
  }

  bool measure_duplex() override {
    try {
      device_.select();
      const std::size_t bytes = std::size_t{64} << 20;
      PinnedBuffer up_host(bytes), down_host(bytes);
      DeviceBuffer up_dev(bytes), down_dev(bytes);
      std::fill_n(static_cast<unsigned char*>(up_host.get()), bytes, static_cast<unsigned char>(1));
      const auto n = static_cast<std::int64_t>(bytes);
      const double h2d = copy_seconds(true, up_host.get(), up_dev.get(), n, 3);
      const double d2h = copy_seconds(false, down_host.get(), down_dev.get(), n, 3);
      Stream other;
      Event start, other_done(false), end;
      std::vector<double> both;
      for (int r = 0; r < 4; ++r) {  // the first is a warm-up
        start.record(stream_.get());
        other.wait(start.get());
        UCPLAN_CUDA(cudaMemcpyAsync(up_dev.get(), up_host.get(), bytes, cudaMemcpyHostToDevice, stream_.get()));
        UCPLAN_CUDA(cudaMemcpyAsync(down_host.get(), down_dev.get(), bytes, cudaMemcpyDeviceToHost, other.get()));
        other_done.record(other.get());
        stream_.wait(other_done.get());
        end.record(stream_.get());
        const double s = Event::seconds_between(start, end);
        if (r > 0) both.push_back(s);
      }
      // Two copy engines take ~1.0x the longer copy, one ~2x: the midpoint decides. (It was 1.3x, but
      // PyTorch measures 1.10-1.26x on an H100, two engines, and one of twelve profiles measured there
      // in a session said "not duplex", so its plans serialised every copy.)
      return median_of(both) < 1.5 * std::max(h2d, d2h);
    } catch (const std::exception&) {
      if (cudaDeviceSynchronize() != cudaSuccess) cudaGetLastError();
      return device_.async_engine_count() >= 2;  // what the hardware says, when it cannot be measured
    }
  }

 private:
  // Median seconds of `repeats` copies of `bytes` after one warm-up copy.
  double copy_seconds(bool host_to_device, void* host, void* dev, std::int64_t bytes, int repeats) {
    Event start, end;
    std::vector<double> times;
    const auto n = static_cast<std::size_t>(bytes);
    for (int r = 0; r <= repeats; ++r) {
      start.record(stream_.get());
      if (host_to_device)
        UCPLAN_CUDA(cudaMemcpyAsync(dev, host, n, cudaMemcpyHostToDevice, stream_.get()));
      else
        UCPLAN_CUDA(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, stream_.get()));
      end.record(stream_.get());
      const double s = Event::seconds_between(start, end);
      if (r > 0) times.push_back(s);
    }
    return median_of(times);
  }

  // Back-to-back runs between one event pair, so that host API time and launch latency (a
  // start event on an idle stream, a synchronisation per run) are not measured: a calibration
  // run after the warm-up gives k, the runs per sample for at least kMinSampleSeconds.
  void time(const std::function<void()>& run, int repeats, Measurement* m) {
    for (int i = 0; i < options_.warmup; ++i) run();
    stream_.synchronize();
    // Calibration: 10 back-to-back runs, so launch latency does not inflate the estimate of a
    // short kernel (which would make its samples shorter than intended).
    Event start, end;
    start.record(stream_.get());
    for (int i = 0; i < kCalibrationRuns; ++i) run();
    end.record(stream_.get());
    const double once = Event::seconds_between(start, end) / kCalibrationRuns;
    const int k = static_cast<int>(
        std::clamp(std::ceil(kMinSampleSeconds / std::max(once, 1e-9)), 1.0, static_cast<double>(kMaxRunsPerSample)));
    std::vector<double> times;
    times.reserve(static_cast<std::size_t>(repeats));
    for (int r = 0; r < repeats; ++r) {
      start.record(stream_.get());
      for (int i = 0; i < k; ++i) run();
      end.record(stream_.get());
      times.push_back(Event::seconds_between(start, end) / k);
    }
    m->seconds = median_of(times);
    const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
    m->spread = m->seconds > 0 ? (*hi - *lo) / m->seconds : 0;
    m->status = "ok";
  }

  // Allocates and fills the op's buffers (running the forward op where the backward reads its
  // results) and returns the op to time. Throws Unsupported, Failed or CudaError.
  std::function<void()> prepare(const Graph& g, int layer, TaskKind op, const std::string& algo, std::int64_t batch,
                                Buffers& b, Measurement* m) {
    if (layer < 0 || layer >= static_cast<int>(g.layers.size())) throw Failed(fmt::format("no layer {}", layer));
    const GraphLayer& l = g.layers[layer];
    const char* type = layer_type_name(l.type());
    Context& ctx = ctx_;
    if (op == TaskKind::Update) {
      if (algo != "sgd") throw Failed(fmt::format("unknown algorithm \"{}\" for update", algo));
      if (!l.has_weights()) throw Failed(fmt::format("a {} layer has no weights to update", type));
      const std::int64_t count = l.params();
      float* w = b.floats(2 * count);  // room for the 16-bit copy after the master
      const float* dw = b.floats(count);
      const bool copy = half_ && (l.type() == LayerType::Conv || l.type() == LayerType::Fc);
      const cuda::DataType kind = half_type_;
      cudaStream_t st = stream_.get();
      return [&ctx, count, w, dw, copy, kind, st] {
        cuda::sgd_update(ctx, count, 0.01, dw, w);
        if (copy) cuda::detail::launch_narrow(st, kind, count, w, w + count);  // the backend refreshes it
      };
    }
    if (batch < 1) throw Failed(fmt::format("micro-batch {} (must be at least 1)", batch));
    if (l.type() == LayerType::Conv) return prepare_conv(l, op, algo, batch, b, m);
    return prepare_layer(g, layer, op, algo, batch, b);
  }

  // A layer's op other than a convolution's, on the context of the storage type, as the backend
  // runs it: at bf16/fp16 the 16-bit one, whose ops read and write their activations and gradients
  // in 16 bits (kernels_cuda.h; the buffers, filled as floats, hold other values then, not other
  // work), FP32 elsewhere.
  std::function<void()> prepare_layer(const Graph& g, int layer, TaskKind op, const std::string& algo,
                                      std::int64_t batch, Buffers& b) {
    const GraphLayer& l = g.layers[layer];
    const char* type = layer_type_name(l.type());
    Context& ctx = half_ ? *half_ctx_ : ctx_;
    if (algo != "default")
      throw Failed(fmt::format("unknown algorithm \"{}\" for {} {}", algo, type, task_kind_name(op)));
    const bool forward = op == TaskKind::Forward;
    const bool fc = l.type() == LayerType::Fc;
    if (!forward && op != (fc ? TaskKind::BackwardData : TaskKind::Backward) && !(fc && op == TaskKind::BackwardFilter))
      throw Failed(fmt::format("a {} layer has no op \"{}\"", type, task_kind_name(op)));
    const std::int64_t in_count = batch * (l.in_shapes.empty() ? 0 : l.in_shapes[0].elems());
    const std::int64_t out_count = batch * l.out.elems();

    switch (l.type()) {
      case LayerType::Input:
        throw Failed("the input layer has no ops");
      case LayerType::Conv:
        break;  // above
      case LayerType::Fc: {
        const cuda::FcDims d = fc_dims(l, batch);
        // At bf16/fp16: 16-bit x, w, bias, y, dx, dy; FP32 dw, db.
        const float* w = b.floats(d.in * d.out);
        if (forward) {
          const float* x = b.floats(in_count);
          const float* bias = b.floats(d.out);
          float* y = b.floats(out_count);
          return [&ctx, d, x, w, bias, y] { cuda::fc_forward(ctx, d, x, w, bias, y); };
        }
        const float* dy = b.floats(out_count);
        if (op == TaskKind::BackwardData) {
          float* dx = b.floats(in_count);
          return [&ctx, d, dy, w, dx] { cuda::fc_backward_data(ctx, d, dy, w, dx, false); };
        }
        const float* x = b.floats(in_count);
        float* dw = b.floats(d.in * d.out);
        float* db = b.floats(d.out);
        return [&ctx, d, x, dy, dw, db] { cuda::fc_backward_filter(ctx, d, x, dy, dw, db); };
      }
      case LayerType::Relu: {
        const float* x = b.floats(in_count);
        float* y = b.floats(out_count);
        if (forward) return [&ctx, out_count, x, y] { cuda::relu_forward(ctx, out_count, x, y); };
        cuda::relu_forward(ctx, out_count, x, y);
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        return [&ctx, out_count, y, dy, dx] { cuda::relu_backward(ctx, out_count, y, dy, dx, false); };
      }
      case LayerType::Pool: {
        const cuda::PoolDims d = pool_dims(l, batch);
        const float* x = b.floats(in_count);
        float* y = b.floats(out_count);
        if (forward) return [&ctx, d, x, y] { cuda::pool_forward(ctx, d, x, y); };
        cuda::pool_forward(ctx, d, x, y);
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        return [&ctx, d, x, y, dy, dx] { cuda::pool_backward(ctx, d, x, y, dy, dx, false); };
      }
      case LayerType::BatchNorm: {
        const cuda::BnDims d = bn_dims(l, batch);
        const float* x = b.floats(in_count);
        const float* gamma = b.floats(d.c, 0.5f, 1.5f);
        const float* beta = b.floats(d.c);
        float* y = b.floats(out_count);
        float* saved = b.floats(2 * d.c);
        if (forward)
          return [&ctx, d, x, gamma, beta, y, saved] { cuda::bn_forward_training(ctx, d, x, gamma, beta, y, saved); };
        cuda::bn_forward_training(ctx, d, x, gamma, beta, y, saved);
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        float* dgb = b.floats(2 * d.c);
        return
            [&ctx, d, x, gamma, saved, dy, dx, dgb] { cuda::bn_backward(ctx, d, x, gamma, saved, dy, dx, dgb, false); };
      }
      case LayerType::Lrn: {
        const cuda::LrnDims d = lrn_dims(l, batch);
        const float* x = b.floats(in_count);
        float* y = b.floats(out_count);
        if (forward) return [&ctx, d, x, y] { cuda::lrn_forward(ctx, d, x, y); };
        cuda::lrn_forward(ctx, d, x, y);
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        return [&ctx, d, x, y, dy, dx] { cuda::lrn_backward(ctx, d, x, y, dy, dx, false); };
      }
      case LayerType::Dropout: {
        const double ratio = l.spec.dropout.ratio;
        const std::int64_t per_sample = l.out.elems();
        const float* x = b.floats(in_count);
        float* y = b.floats(out_count);
        std::uint8_t* mask = b.bytes(out_count);
        if (forward)
          return [&ctx, batch, per_sample, ratio, x, y, mask] {
            cuda::dropout_forward(ctx, batch, per_sample, 0, ratio, 12345, x, y, mask);
          };
        cuda::dropout_forward(ctx, batch, per_sample, 0, ratio, 12345, x, y, mask);
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        return [&ctx, out_count, ratio, mask, dy, dx] {
          cuda::dropout_backward(ctx, out_count, ratio, mask, dy, dx, false);
        };
      }
      case LayerType::Add: {
        if (forward) {
          std::vector<const float*> xs;
          for (std::size_t i = 0; i < l.inputs.size(); ++i) xs.push_back(b.floats(out_count));
          float* y = b.floats(out_count);
          return [&ctx, out_count, xs, y] { cuda::add_forward(ctx, out_count, xs, y); };
        }
        // Every input receives the gradient.
        const float* dy = b.floats(out_count);
        std::vector<float*> dxs;
        for (std::size_t i = 0; i < l.inputs.size(); ++i) dxs.push_back(b.floats(out_count));
        return [&ctx, out_count, dy, dxs] {
          for (float* dx : dxs) cuda::add_backward(ctx, out_count, dy, dx, false);
        };
      }
      case LayerType::Concat: {
        std::vector<std::int64_t> cs;
        for (const Shape& s : l.in_shapes) cs.push_back(s.c);
        const std::int64_t hw = l.out.h * l.out.w;
        if (forward) {
          std::vector<const float*> xs;
          for (std::int64_t c : cs) xs.push_back(b.floats(batch * c * hw));
          float* y = b.floats(out_count);
          return [&ctx, batch, hw, cs, xs, y] { cuda::concat_forward(ctx, batch, hw, cs, xs, y); };
        }
        const float* dy = b.floats(out_count);
        std::vector<float*> dxs;
        for (std::int64_t c : cs) dxs.push_back(b.floats(batch * c * hw));
        return [&ctx, batch, hw, cs, dy, dxs] {
          for (std::size_t i = 0; i < dxs.size(); ++i) cuda::concat_backward(ctx, batch, hw, cs, i, dy, dxs[i], false);
        };
      }
      case LayerType::SoftmaxLoss: {
        const std::int64_t k = l.in_shapes.at(0).elems();
        const float* x = b.floats(in_count);
        const std::int32_t* labels = b.labels(batch, k);
        float* prob = b.floats(in_count);
        auto* loss = static_cast<double*>(b.raw(sizeof(double)));
        ctx.scratch(static_cast<std::size_t>(batch) * sizeof(double));  // grow it now, not while timing
        if (forward)
          return [&ctx, batch, k, x, labels, prob, loss] {
            cuda::softmax_loss_forward(ctx, batch, k, x, labels, prob, loss);
          };
        cuda::softmax_loss_forward(ctx, batch, k, x, labels, prob, loss);
        float* dx = b.floats(in_count);
        const double scale = 1.0 / static_cast<double>(batch);
        return [&ctx, batch, k, prob, labels, scale, dx] {
          cuda::softmax_loss_backward(ctx, batch, k, prob, labels, scale, dx, false);
        };
      }
      case LayerType::Sigmoid:
      case LayerType::HardSigmoid:
      case LayerType::HardSwish:
      case LayerType::Silu:
      case LayerType::Clip:
      case LayerType::Gelu: {
        const cpu::ActivationDims d = activation_dims(l);
        const float* x = b.floats(in_count, -4.0f, 4.0f);  // across the kinks of the piecewise ones
        float* y = b.floats(out_count);
        if (forward) return [&ctx, d, out_count, x, y] { cuda::activation_forward(ctx, d, out_count, x, y); };
        cuda::activation_forward(ctx, d, out_count, x, y);
        const float* v = cpu::activation_backward_reads_y(d.f) ? y : x;
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        return [&ctx, d, out_count, v, dy, dx] { cuda::activation_backward(ctx, d, out_count, v, dy, dx, false); };
      }
      case LayerType::Mul: {
        const cpu::MulDims d = mul_dims(l, batch);
        const std::int64_t s_count = batch * l.in_shapes.at(1).elems();
        const float* x = b.floats(in_count);
        const float* s = b.floats(s_count);
        if (forward) {
          float* y = b.floats(out_count);
          return [&ctx, d, x, s, y] { cuda::mul_forward(ctx, d, x, s, y); };
        }
        // Both inputs receive the gradient (an SE gate's two branches both train).
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        float* ds = b.floats(s_count);
        return [&ctx, d, x, s, dy, dx, ds] { cuda::mul_backward(ctx, d, x, s, dy, dx, false, ds, false); };
      }
      case LayerType::Scale: {
        const Shape& sh = l.out;
        const std::int64_t plane = sh.h * sh.w;
        const float* x = b.floats(in_count);
        const float* gamma = b.floats(sh.c, 0.5f, 1.5f);
        if (forward) {
          float* y = b.floats(out_count);
          return [&ctx, batch, sh, plane, x, gamma, y] { cuda::scale_forward(ctx, batch, sh.c, plane, x, gamma, y); };
        }
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        float* dgamma = b.floats(sh.c);
        ctx.scratch(cuda::scale_backward_scratch_bytes(batch, sh.c));  // grow it now, not while timing
        return [&ctx, batch, sh, plane, x, gamma, dy, dx, dgamma] {
          cuda::scale_backward(ctx, batch, sh.c, plane, x, gamma, dy, dx, false, dgamma);
        };
      }
      case LayerType::LayerNorm: {
        const Shape& sh = l.out;
        const cpu::LnDims d{batch, sh.c, sh.h, sh.w, l.spec.ln.eps};
        const float* x = b.floats(in_count);
        const float* gb = b.floats(2 * sh.c, 0.5f, 1.5f);  // gamma, then beta
        float* y = b.floats(out_count);
        float* saved = b.floats(2 * batch * sh.h * sh.w);
        if (forward)
          return [&ctx, d, x, gb, y, saved] { cuda::ln_forward_training(ctx, d, x, gb, gb + d.c, y, saved); };
        cuda::ln_forward_training(ctx, d, x, gb, gb + d.c, y, saved);
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        float* dgb = b.floats(2 * sh.c);
        ctx.scratch(cuda::ln_backward_scratch_bytes(d));  // grow it now, not while timing
        return [&ctx, d, x, gb, saved, dy, dx, dgb] { cuda::ln_backward(ctx, d, x, gb, saved, dy, dx, dgb, false); };
      }
      case LayerType::ChannelShuffle: {
        const std::int64_t c = l.out.c, plane = l.out.h * l.out.w, groups = l.spec.shuffle.groups;
        if (forward) {
          const float* x = b.floats(in_count);
          float* y = b.floats(out_count);
          return [&ctx, batch, c, plane, groups, x, y] {
            cuda::channel_shuffle_forward(ctx, batch, c, plane, groups, x, y);
          };
        }
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);
        return [&ctx, batch, c, plane, groups, dy, dx] {
          cuda::channel_shuffle_backward(ctx, batch, c, plane, groups, dy, dx, false);
        };
      }
      case LayerType::Slice: {
        const Shape& x_shape = l.in_shapes.at(0);
        const std::int64_t c = x_shape.c, plane = x_shape.h * x_shape.w;
        const std::int64_t begin = l.spec.slice.begin, end = l.spec.slice.end;
        if (forward) {
          const float* x = b.floats(in_count);
          float* y = b.floats(out_count);
          return [&ctx, batch, c, plane, begin, end, x, y] {
            cuda::slice_forward(ctx, batch, c, plane, begin, end, x, y);
          };
        }
        const float* dy = b.floats(out_count);
        float* dx = b.floats(in_count);  // an overwrite: the channels outside the range get zeros
        return [&ctx, batch, c, plane, begin, end, dy, dx] {
          cuda::slice_backward(ctx, batch, c, plane, begin, end, dy, dx, false);
        };
      }
    }
    throw Failed(fmt::format("a {} layer has no op \"{}\"", type, task_kind_name(op)));
  }

  std::function<void()> prepare_conv(const GraphLayer& l, TaskKind op, const std::string& algo, std::int64_t batch,
                                     Buffers& b, Measurement* m) {
    cuda::ConvOp cop;
    if (!conv_op_of(op, &cop)) throw Failed(fmt::format("a conv layer has no op \"{}\"", task_kind_name(op)));
    ConvAlgo a;
    if (!cuda::parse_conv_algo(cop, algo, &a))
      throw Failed(fmt::format("unknown algorithm \"{}\" for conv {}", algo, task_kind_name(op)));
    const cuda::ConvDims d = conv_dims(l, batch);
    Context& ctx = half_ ? *half_ctx_ : ctx_;  // 16-bit tensors at bf16/fp16 (PSEUDO_HALF)
    const std::int64_t eb = half_ ? 2 : 4;
    std::size_t ws = 0;
    if (!cuda::conv_workspace(ctx, d, a, &ws)) throw Unsupported{};
    m->workspace_bytes = static_cast<std::int64_t>(ws);
    // cuDNN's own word on determinism for these dims and this math type (its heuristics' perf
    // results), not a table: recorded in the profile's nondeterministic_algorithms.
    // A failing query leaves determinism unknown; it does not fail the measurement (a sticky
    // error would show in the measurement itself).
    try {
      if (const std::optional<bool> det = cuda::conv_deterministic(ctx, d, a); det && !*det)
        nondeterministic_.insert(std::string(task_kind_name(op)) + ":" + algo);
    } catch (const CudaError&) {
    }
    const std::int64_t nx = batch * d.c * d.h * d.w;
    const std::int64_t ny = batch * d.k * cuda::conv_out_h(d) * cuda::conv_out_w(d);
    const std::int64_t nw = d.k * (d.c / d.groups) * d.kh * d.kw;
    // x/dx and y/dy at the offset replay gives a micro-batch after the first (profile_network.h):
    // one that starts a multiple of the layer's granule in, 4-byte aligned (verify.h
    // cudnn_micro_batch_granule: with an odd number of 16-bit values a sample, an even number).
    const std::int64_t x_bytes = d.c * d.h * d.w * eb, y_bytes = d.k * cuda::conv_out_h(d) * cuda::conv_out_w(d) * eb;
    const std::int64_t granule =
        std::max(4 / std::gcd(x_bytes, std::int64_t{4}), 4 / std::gcd(y_bytes, std::int64_t{4}));
    const std::int64_t x_off = micro_batch_misalignment(granule * x_bytes);
    const std::int64_t y_off = micro_batch_misalignment(granule * y_bytes);
    auto offset = [](float* p, std::int64_t bytes) {
      return reinterpret_cast<float*>(reinterpret_cast<char*>(p) + bytes);
    };
    auto xs = [&] { return offset(b.floats(nx + 64), x_off); };
    auto ys = [&] { return offset(b.floats(ny + 64), y_off); };
    void* work = b.raw(static_cast<std::int64_t>(ws));
    switch (cop) {
      case cuda::ConvOp::Forward: {
        const float* w = b.floats(nw);
        const float* x = xs();
        const float* bias = d.bias ? b.floats(d.k) : nullptr;
        float* y = ys();
        return [&ctx, d, a, x, w, bias, y, work, ws] { cuda::conv_forward(ctx, d, a, x, w, bias, y, work, ws); };
      }
      case cuda::ConvOp::BackwardData: {
        const float* w = b.floats(nw);
        const float* dy = ys();
        float* dx = xs();
        return [&ctx, d, a, dy, w, dx, work, ws] { cuda::conv_backward_data(ctx, d, a, dy, w, dx, false, work, ws); };
      }
      case cuda::ConvOp::BackwardFilter: {
        const float* x = xs();
        const float* dy = ys();
        float* dw = b.floats(nw);
        float* db = d.bias ? b.floats(d.k) : nullptr;
        if (half_) {
          // As the backend: a 16-bit gradient per micro-batch, from zero, added into the FP32 one.
          const std::int64_t params = nw + (d.bias ? d.k : 0);
          void* dw16 = b.raw(params * 2);
          float* dw32 = b.floats(params);
          float* db16 = d.bias ? reinterpret_cast<float*>(static_cast<char*>(dw16) + nw * 2) : nullptr;
          const cuda::DataType kind = half_type_;
          cudaStream_t st = stream_.get();
          return [&ctx, d, a, x, dy, dw16, db16, dw32, params, kind, st, work, ws] {
            UCPLAN_CUDA(cudaMemsetAsync(dw16, 0, static_cast<std::size_t>(params) * 2, st));
            cuda::conv_backward_filter(ctx, d, a, x, dy, static_cast<float*>(dw16), db16, work, ws);
            cuda::detail::launch_accumulate_widened(st, kind, params, dw16, dw32);
          };
        }
        return
            [&ctx, d, a, x, dy, dw, db, work, ws] { cuda::conv_backward_filter(ctx, d, a, x, dy, dw, db, work, ws); };
      }
    }
    throw Failed("unknown conv op");
  }

  static constexpr double kMinSampleSeconds = 1e-3;
  static constexpr int kMaxRunsPerSample = 1000;
  static constexpr int kCalibrationRuns = 10;

  static std::string pci_bus_id(int index) {
    char bus[32] = {0};
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), index) != cudaSuccess) {
      cudaGetLastError();
      return "";
    }
    return bus;
  }

  [[noreturn]] void device_failed(const std::string& what, const std::string& error) {
    throw DeviceFailure(
        fmt::format("the device failed while measuring {}: {}; the CUDA context cannot be used any more, so "
                    "profiling stopped and no profile was written (rerun with CUDA_LAUNCH_BLOCKING=1, or "
                    "under compute-sanitizer, to see the failing kernel)",
                    what, error));
  }

  // Device memory the runtime, the libraries and their loaded kernels hold: in use now (no
  // measurement buffers are alive between measurements) minus what was in use before.
  // At least the drop in free memory since the context alone (the handles, their kernels): on an
  // H200 NVML's reading from before the context made the first term 0 (gpu-h200.md).
  void note_overhead() {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    const std::int64_t used = static_cast<std::int64_t>(total) - static_cast<std::int64_t>(free);
    overhead_ = std::max(overhead_, used - std::max<std::int64_t>(used_before_, 0));
    if (free_with_context_ >= 0) overhead_ = std::max(overhead_, free_with_context_ - static_cast<std::int64_t>(free));
  }

  static std::int64_t free_device_bytes() {
    std::size_t free = 0, total = 0;
    if (cudaMemGetInfo(&free, &total) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return static_cast<std::int64_t>(free);
  }

  // NVML facts at most once a second while measuring (and when forced): clock range, peak power
  // and temperature, the clock event reasons seen; the static facts the first time.
  void sample_conditions(bool force) {
    const auto now = std::chrono::steady_clock::now();
    if (!force && now - last_sample_ < std::chrono::seconds(1)) return;
    last_sample_ = now;
    if (bus_id_.empty()) {
      nvml_why_ = "no PCI bus id for the device";
      return;
    }
    const cuda::NvmlFacts f = cuda::nvml_facts(bus_id_);
    if (!f.available) {
      nvml_why_ = f.why;
      return;
    }
    auto number = [&](const char* key) {
      auto it = f.values.find(key);
      if (it == f.values.end() || it->second == "n/a") return -1;
      try {
        return std::stoi(it->second);
      } catch (...) {
        return -1;
      }
    };
    if (static_facts_.empty()) {
      static_facts_ = f.values;
      driver_version_ = f.values.at("driver_version");
      if (f.values.at("gpu_uuid") != "n/a") uuid_ = f.values.at("gpu_uuid");
    }
    const int clock = number("sm_clock_mhz");
    if (clock > 0) {
      clock_min_ = clock_min_ > 0 ? std::min(clock_min_, clock) : clock;
      clock_max_ = std::max(clock_max_, clock);
    }
    power_max_ = std::max(power_max_, number("power_draw_w"));
    temperature_max_ = std::max(temperature_max_, number("temperature_c"));
    const std::string reasons = f.values.at("clock_event_reasons");
    if (reasons != "n/a" && reasons != "0x0" && clock_events_.find(reasons) == std::string::npos)
      clock_events_ += (clock_events_.empty() ? "" : " ") + reasons;
  }

  CudaRunnerOptions options_;
  std::string bus_id_;
  std::int64_t used_before_;  // NVML: device memory in use before this process's context; -1 unknown
  cuda::Device device_;       // selects the device before the stream and handles are made
  // Free device memory with the context alone (before the stream, the handles and their kernels);
  // -1 unknown.
  std::int64_t free_with_context_;
  Stream stream_;
  Context ctx_;
  const bool half_;                    // bf16 / fp16 storage (options_.storage)
  const cuda::DataType half_type_;     // the 16-bit storage type (when half_)
  std::unique_ptr<Context> half_ctx_;  // every layer's ops at bf16 / fp16
  std::int64_t overhead_ = 0;
  std::string nvml_why_ = "NVML not queried", driver_version_, uuid_ = "unknown";
  std::map<std::string, std::string> static_facts_;
  int clock_min_ = 0, clock_max_ = 0, power_max_ = 0, temperature_max_ = 0;
  std::string clock_events_;
  std::chrono::steady_clock::time_point last_sample_{};
  std::set<std::string> nondeterministic_;  // "op:algorithm" cuDNN reported nondeterministic
};

[[noreturn]] void no_device(const std::string& why) { throw UserError("", "--device cuda", "no CUDA device: " + why); }

// A context on the device for the cuDNN find functions.
struct FindSession {
  cuda::Device device;
  Stream stream;
  Context ctx;
  explicit FindSession(int index) : device(index), ctx(stream.get()) {}
};

std::unique_ptr<FindSession> open_session(int device_index) {
  std::string why;
  if (!cuda::cuda_device_available(&why)) no_device(why);
  try {
    return std::make_unique<FindSession>(device_index);
  } catch (const CudaError& e) {
    no_device(fmt::format("device {} cannot be used: {}", device_index, e.what()));
  }
}

std::vector<std::pair<std::string, double>> find(const Graph& g, int layer, std::int64_t batch, int device_index,
                                                 std::int64_t workspace_limit, cuda::ConvOp op) {
  if (layer < 0 || layer >= static_cast<int>(g.layers.size()) || g.layers[layer].type() != LayerType::Conv)
    throw std::invalid_argument(fmt::format("cudnn_find: layer {} is not a conv layer", layer));
  auto session = open_session(device_index);
  std::vector<std::pair<std::string, double>> out;
  for (const auto& p : cuda::conv_find(session->ctx, conv_dims(g.layers[layer], batch), op,
                                       static_cast<std::size_t>(std::max<std::int64_t>(workspace_limit, 0))))
    out.emplace_back(cuda::conv_algo_name(p.algo), p.seconds);
  return out;
}

}  // namespace

std::unique_ptr<Runner> make_cuda_runner(int device_index) {
  return make_cuda_runner(device_index, CudaRunnerOptions{});
}

std::unique_ptr<Runner> make_cuda_runner(int device_index, const CudaRunnerOptions& options) {
  std::string why;
  if (!cuda::cuda_device_available(&why)) no_device(why);
  try {
    return std::make_unique<CudaRunner>(device_index, options);
  } catch (const CudaError& e) {
    no_device(fmt::format("device {} cannot be used: {}", device_index, e.what()));
  }
}

std::vector<std::pair<std::string, double>> cudnn_find_forward(const Graph& g, int layer, std::int64_t batch,
                                                               int device_index, std::int64_t workspace_limit) {
  return find(g, layer, batch, device_index, workspace_limit, cuda::ConvOp::Forward);
}

std::vector<std::pair<std::string, double>> cudnn_find_backward_data(const Graph& g, int layer, std::int64_t batch,
                                                                     int device_index, std::int64_t workspace_limit) {
  return find(g, layer, batch, device_index, workspace_limit, cuda::ConvOp::BackwardData);
}

std::vector<std::pair<std::string, double>> cudnn_find_backward_filter(const Graph& g, int layer, std::int64_t batch,
                                                                       int device_index, std::int64_t workspace_limit) {
  return find(g, layer, batch, device_index, workspace_limit, cuda::ConvOp::BackwardFilter);
}

}  // namespace ucplan
