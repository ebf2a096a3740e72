// The CPU backend: the "device" is one aligned host allocation (the arena); each stream is a
// thread taking its steps in order from a queue, so copies really overlap compute. A step
// starts once the steps it waits for, in the same round, have completed.
#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "backend.h"
#include "cpu/blas.h"
#include "cpu_ops.h"
#include "planner/model/errors.h"
#include "planner/model/units.h"

namespace ucplan {

namespace {

class CpuBackend : public Backend {
 public:
  explicit CpuBackend(const Graph& g) : g_(g), precision_(cpu_precision(g.precision, true)) {
    for (int s = 0; s < 3; ++s) threads_[s] = std::thread([this, s] { loop(s); });
  }
  ~CpuBackend() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    std::free(arena_);
  }

  std::string description() const override {
    return fmt::format("cpu ({}; streams are threads)", cpu::blas_description());
  }

  std::string device_name() const override { return cpu::cpu_device_name(); }

  void check_steps(const std::vector<ResolvedStep>& steps) const override {
    for (const ResolvedStep& s : steps)
      if (!s.config.empty()) check_configs(s, g_.layers[static_cast<std::size_t>(s.layer)]);
  }

  // The arena and the host buffers are both host memory here, every byte written (zeroed): a plan
  // that needs more than the host has left is refused before anything is allocated, rather than
  // ending in std::bad_alloc or the kernel's OOM killer.
  void allocate(std::int64_t arena_bytes, const std::vector<std::int64_t>& host_bytes) override {
    arena_bytes_ = std::max<std::int64_t>(arena_bytes, 256);
    // In 64 bits throughout (a plan may state any arena up to 2^63 - 1): sizes past what a host
    // could hold saturate, and are refused below.
    constexpr std::int64_t kMost = std::int64_t{1} << 62;
    const std::int64_t arena = std::min(arena_bytes_, kMost);
    const std::size_t size = static_cast<std::size_t>((arena + 255) / 256 * 256);
    std::int64_t host = 0;
    for (auto b : host_bytes) host = std::min(kMost, host + std::min(b, kMost));
    const std::int64_t available = host_memory_available();
    if (available > 0 && arena + host > available)
      throw UserError("", "--device cpu",
                      fmt::format("the plan's arena of {} and its host buffers of {} are more than the {} of host "
                                  "memory available",
                                  format_bytes(arena_bytes_), format_bytes(host), format_bytes(available)));
    arena_ = static_cast<char*>(std::aligned_alloc(256, size));
    if (!arena_)
      throw UserError("", "--device cpu", fmt::format("cannot allocate an arena of {}", format_bytes(arena_bytes_)));
    std::memset(arena_, 0, size);
    hosts_.clear();
    try {
      for (auto b : host_bytes) hosts_.emplace_back(static_cast<std::size_t>(b), 0);
    } catch (const std::bad_alloc&) {
      throw UserError("", "--device cpu", fmt::format("cannot allocate host buffers of {}", format_bytes(host)));
    }
  }
  void* host(int id) override { return hosts_.at(static_cast<std::size_t>(id)).data(); }
  void write(std::int64_t offset, const void* src, std::int64_t bytes) override {
    std::memcpy(arena_ + offset, src, static_cast<std::size_t>(bytes));
  }
  void read(std::int64_t offset, void* dst, std::int64_t bytes) override {
    std::memcpy(dst, arena_ + offset, static_cast<std::size_t>(bytes));
  }
  void fill(std::int64_t offset, std::int64_t bytes, unsigned char value) override {
    std::memset(arena_ + offset, value, static_cast<std::size_t>(bytes));
  }
  std::int64_t device_memory_bytes() override { return arena_bytes_; }

  void begin() override {
    std::lock_guard<std::mutex> lock(mu_);
    timeline_.clear();
    t0_ = std::chrono::steady_clock::now();
  }

  void submit(const ResolvedStep& s, int round, const RunContext& ctx, bool poison) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (done_.size() <= static_cast<std::size_t>(s.id)) done_.resize(static_cast<std::size_t>(s.id) + 1, -1);
      // A new generation per submission of the same step, so waits refer to this round.
      queues_[static_cast<std::size_t>(s.stream)].push_back(Item{&s, round, ctx, poison, ++generation_});
      generation_of_[s.id] = generation_;
      pending_ += 1;
    }
    cv_.notify_all();
  }

  void barrier() override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return pending_ == 0 || error_; });
    if (error_) {
      // The queued steps belong to the caller, who may free them once this throws: drop those
      // not started, and wait for those running (their poison waits give up on an error).
      for (auto& q : queues_) {
        pending_ -= static_cast<std::int64_t>(q.size());
        q.clear();
      }
      cv_.wait(lock, [&] { return pending_ == 0; });
      std::exception_ptr e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }

  std::vector<MeasuredStep> end() override {
    barrier();
    std::lock_guard<std::mutex> lock(mu_);
    return timeline_;
  }

 private:
  struct Item {
    const ResolvedStep* step;
    int round;
    RunContext ctx;
    bool poison;
    std::int64_t generation;
  };

  // Steps are submitted in id order, so a wait always names a step already submitted for this
  // round: it is done once its completion generation reaches the one it was submitted with.
  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_ != nullptr;
  }
  bool done(int step) const {
    auto it = generation_of_.find(step);
    return it != generation_of_.end() && done_[static_cast<std::size_t>(step)] >= it->second;
  }

  void loop(int stream) {
    while (true) {
      Item item;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] {
          if (stop_) return true;
          if (queues_[stream].empty()) return false;
          for (int w : queues_[stream].front().step->waits)
            if (!done(w)) return false;
          return true;
        });
        if (stop_) return;
        item = queues_[stream].front();
        queues_[stream].pop_front();
      }
      const auto start = std::chrono::steady_clock::now();
      try {
        execute(item);
        if (item.poison && !item.step->poison_after.empty()) {
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] {
              if (stop_ || error_) return true;  // after a failure the waited steps may never run
              for (int w : item.step->poison_waits)
                if (!done(w)) return false;
              return true;
            });
            if (stop_) return;
          }
          if (!failed())
            for (const auto& [off, size] : item.step->poison_after)
              std::memset(arena_ + off, kPoisonByte, static_cast<std::size_t>(size));
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!error_) error_ = std::current_exception();
      }
      const auto end = std::chrono::steady_clock::now();
      {
        std::lock_guard<std::mutex> lock(mu_);
        done_[static_cast<std::size_t>(item.step->id)] = item.generation;
        timeline_.push_back({item.step->id, item.step->final ? -1 : item.round,
                             std::chrono::duration_cast<std::chrono::nanoseconds>(start - t0_).count(),
                             std::chrono::duration_cast<std::chrono::nanoseconds>(end - t0_).count()});
        pending_ -= 1;
      }
      cv_.notify_all();
    }
  }

  float* f(std::int64_t off) const { return off < 0 ? nullptr : reinterpret_cast<float*>(arena_ + off); }

  // Each micro-batch of a conv step: a CPU algorithm that supports the convolution within the
  // step's workspace.
  static void check_configs(const ResolvedStep& s, const GraphLayer& l) {
    const std::int64_t have = s.workspace < 0 ? 0 : s.workspace_bytes;
    for (const auto& m : s.config) {
      cpu::ConvAlgo algo;
      if (!cpu::parse_conv_algo(m.algo, &algo))
        throw UserError(
            "", "--device cpu",
            fmt::format("step {} ({} {}) uses \"{}\", which is not a CPU algorithm: compile the plan from a "
                        "profile of this device",
                        s.id, s.op, l.name(), m.algo));
      if (!layer_op_supported_cpu(l, s.op, m.algo, m.batch))
        throw UserError("", "--device cpu",
                        fmt::format("step {} ({} {}): the CPU algorithm \"{}\" does not support this "
                                    "convolution",
                                    s.id, s.op, l.name(), m.algo));
      const std::int64_t need = layer_op_workspace_cpu(l, s.op, m.algo, m.batch);
      if (need > have)
        throw UserError("", "--device cpu",
                        fmt::format("step {} ({} {}): \"{}\" on {} samples needs {} bytes of workspace, "
                                    "the plan gives {}",
                                    s.id, s.op, l.name(), m.algo, m.batch, need, have));
    }
  }

  void execute(const Item& item) {
    const ResolvedStep& s = *item.step;
    if (s.op == StepOp::Prefetch || s.op == StepOp::Offload) {
      // An input host buffer holds the whole batch: each round copies its own slice (backend.h).
      // The bounds are the verifier's promise; checked again here because a copy out of bounds
      // corrupts memory silently.
      const std::int64_t host_offset = ucplan::host_offset(s, item.round, item.ctx);
      auto& h = hosts_.at(static_cast<std::size_t>(s.host));
      UCPLAN_CHECK(s.bytes >= 0 && s.device >= 0 && s.device <= arena_bytes_ - s.bytes &&
                       host_offset <= static_cast<std::int64_t>(h.size()) - s.bytes,
                   fmt::format("step {}: a copy of {} bytes inside the arena and its host buffer", s.id, s.bytes));
      if (s.op == StepOp::Prefetch)
        std::memcpy(arena_ + s.device, h.data() + host_offset, static_cast<std::size_t>(s.bytes));
      else
        std::memcpy(h.data() + host_offset, arena_ + s.device, static_cast<std::size_t>(s.bytes));
      return;
    }
    const GraphLayer& l = g_.layers[static_cast<std::size_t>(s.layer)];
    LayerArgs a;
    for (auto off : s.x) a.x.push_back(f(off));
    a.y = f(s.y);
    a.w = f(s.w);
    a.dw = f(s.dw);
    a.aux = s.aux < 0 ? nullptr : arena_ + s.aux;
    a.dy = f(s.dy);
    for (auto off : s.dx) a.dx.push_back(f(off));
    a.dx_accumulate = s.dx_accumulate;
    a.labels = s.labels < 0 ? nullptr : reinterpret_cast<const std::int32_t*>(arena_ + s.labels);
    a.workspace = s.workspace < 0 ? nullptr : arena_ + s.workspace;
    a.workspace_bytes = s.workspace < 0 ? 0 : s.workspace_bytes;
    a.n = item.ctx.sub_batch;
    a.first_sample = static_cast<std::int64_t>(item.round) * item.ctx.sub_batch;
    a.total_batch = item.ctx.total_batch;
    a.seed = item.ctx.seed;
    a.lr = item.ctx.lr;
    a.loss_scale = item.ctx.loss_scale;
    check_configs(s, l);
    if (l.type() == LayerType::SoftmaxLoss && a.labels) {
      for (std::int64_t i = 0; i < a.n; ++i)
        if (a.labels[i] < 0 || a.labels[i] >= l.out.c)
          throw ExecutionFault(
              fmt::format("step {} ({} {}) reads label {} = {}: the labels' memory was overwritten or freed", s.id,
                          s.op, l.name(), a.first_sample + i, a.labels[i]));
    }
    auto run = [&](const LayerArgs& b) {
      if (!s.config.empty())
        run_conv_config_cpu(l, s.op, s.config, b);
      else
        run_layer_op_cpu(l, s.op, "default", b);
    };
    if (precision_.active())
      run_emulated(l, s.op, a, precision_, run);
    else
      run(a);
  }

  const Graph& g_;
  const CpuPrecision precision_;  // bf16/fp16 storage, tf32 math (cpu_ops.h)
  char* arena_ = nullptr;
  std::int64_t arena_bytes_ = 0;
  std::vector<std::vector<char>> hosts_;
  std::array<std::thread, 3> threads_;
  std::array<std::deque<Item>, 3> queues_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::int64_t pending_ = 0;
  std::int64_t generation_ = 0;
  std::vector<std::int64_t> done_;                       // per step: generation completed last
  std::unordered_map<int, std::int64_t> generation_of_;  // per step: generation submitted last
  std::exception_ptr error_;
  std::vector<MeasuredStep> timeline_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Graph& g) { return std::make_unique<CpuBackend>(g); }

std::int64_t host_memory_available() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  long long kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) break;
  std::fclose(f);
  return static_cast<std::int64_t>(kib) * 1024;
}

}  // namespace ucplan
