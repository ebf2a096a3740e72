#include "cpu_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <new>
#include <random>
#include <thread>
#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

#include "executor/cpu/blas.h"
#include "executor/cpu_ops.h"
#include "planner/model/blas_env.h"
#include "planner/model/errors.h"
#include "profile_network.h"

namespace ucplan {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void fill(std::vector<float>& v, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : v) x = u(rng);
}

// The elements of every buffer an op of layer l at micro-batch n may touch (4 bytes each: floats,
// and the int32 labels), in one place for the memory check and the allocation. At an emulated
// precision (cpu_ops.h) the op runs as the backend runs it: conversions included, the weights
// followed by room for their copy in the storage type.
struct OpBuffers {
  std::vector<std::size_t> in;  // each input, and as many for its gradient
  std::size_t out = 0;          // the output, and as many for its gradient
  std::size_t w = 0, dw = 0, aux = 0, ws = 0, labels = 0;

  OpBuffers(const GraphLayer& l, std::int64_t n, const CpuPrecision& precision, std::int64_t ws_bytes)
      : out(static_cast<std::size_t>(out_elems(l) * n)),
        w(static_cast<std::size_t>(l.params() * (precision.half ? 2 : 1))),
        dw(static_cast<std::size_t>(l.params())),
        aux(static_cast<std::size_t>((l.aux_bytes_fixed + l.aux_bytes_per_sample * n) / 4 + 1)),
        ws(static_cast<std::size_t>(ws_bytes / 4 + 1)),
        labels(static_cast<std::size_t>(n)) {
    for (std::size_t i = 0; i < l.in_shapes.size(); ++i) in.push_back(static_cast<std::size_t>(in_elems(l, i) * n));
  }
  double bytes() const {
    double e = 2.0 * static_cast<double>(out) + static_cast<double>(w + dw + aux + ws + labels);
    for (std::size_t x : in) e += 2.0 * static_cast<double>(x);
    return 4 * e;
  }
};

// One op of layer l at micro-batch n, timed into m (CpuRunner::measure, after its checks).
void measure_into(const GraphLayer& l, StepOp op, const std::string& algo, std::int64_t n,
                  const CpuPrecision& precision, const OpBuffers& sizes, int repeats, Measurement& m) {
  std::vector<std::vector<float>> xs(l.in_shapes.size()), dxs(l.in_shapes.size());
  LayerArgs a;
  a.n = n;
  a.total_batch = n;
  for (std::size_t i = 0; i < l.in_shapes.size(); ++i) {
    xs[i].resize(sizes.in[i]);
    fill(xs[i], 11 + static_cast<std::uint32_t>(i));
    dxs[i].assign(xs[i].size(), 0.0f);
    a.x.push_back(xs[i].data());
    a.dx.push_back(dxs[i].data());
    a.dx_accumulate.push_back(0);
  }
  std::vector<float> y(sizes.out), dy(sizes.out), w(sizes.w), dw(sizes.dw);
  fill(y, 3);
  fill(dy, 5);
  fill(w, 7);
  for (auto& v : w) v *= 0.1f;
  std::vector<float> aux(sizes.aux);
  std::vector<std::int32_t> labels(sizes.labels);
  for (std::int64_t i = 0; i < n; ++i) labels[i] = static_cast<std::int32_t>(i % std::max<std::int64_t>(1, l.out.c));
  a.y = y.data();
  a.dy = dy.data();
  a.w = w.data();
  a.dw = dw.data();
  a.aux = aux.data();
  a.labels = labels.data();
  std::vector<float> ws(sizes.ws);
  a.workspace = ws.data();
  a.workspace_bytes = static_cast<std::int64_t>(ws.size() * sizeof(float));
  // Backward ops read what their forward saved (bn statistics, dropout mask, softmax output).
  auto run = [&](StepOp o, const std::string& al) {
    if (!precision.active()) return run_layer_op_cpu(l, o, al, a);
    run_emulated(l, o, a, precision, [&](const LayerArgs& b) { run_layer_op_cpu(l, o, al, b); });
  };
  if (op != StepOp::Forward && op != StepOp::Update)
    run(StepOp::Forward, algo == "default" || l.type() != LayerType::Conv ? algo : "direct");
  std::vector<double> times;
  run(op, algo);  // warm-up
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_seconds();
    run(op, algo);
    times.push_back(now_seconds() - t0);
  }
  median_and_spread(times, &m.seconds, &m.spread);
}

// CPU time so far, in seconds: the whole machine's busy time (/proc/stat's first line: all but
// idle and iowait; steal included, as time the hypervisor gave others), and this process's own.
struct CpuTimes {
  double machine_busy = -1, own = 0, wall = 0;
};
CpuTimes cpu_times() {
  CpuTimes t;
  t.wall = now_seconds();
  rusage self{};
  if (::getrusage(RUSAGE_SELF, &self) == 0)
    t.own = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec) +
            static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) * 1e-6;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal && cpu == "cpu")
    t.machine_busy = (user + nice + system + irq + softirq + steal) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  return t;
}

class CpuRunner : public Runner {
 public:
  CpuRunner() : at_start_(cpu_times()) {}
  // How busy the rest of the machine kept its cores while measuring: what shared_cpu_warning
  // (profile.h) reads. Not for a run under a second (the kernel counts in ticks of 10 ms).
  std::map<std::string, std::string> conditions() override {
    const CpuTimes end = cpu_times();
    const double wall = end.wall - at_start_.wall;
    if (at_start_.machine_busy < 0 || end.machine_busy < 0 || wall < 1.0) return {};
    const double others = std::max(0.0, (end.machine_busy - at_start_.machine_busy - (end.own - at_start_.own)) / wall);
    return {{"cpu_busy_others", fmt::format("{:.2f}", others)},
            {"cpu_cores", std::to_string(::sysconf(_SC_NPROCESSORS_ONLN))},
            {"measured_seconds", fmt::format("{:.1f}", wall)}};
  }
  DeviceInfo device() override {
    if (!device_.kind.empty()) return device_;
    device_.kind = "cpu";
    device_.name = cpu::cpu_device_name();
    device_.memory_bytes = static_cast<std::int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGE_SIZE);
    device_.peak_flops = cpu::measure_sgemm_gflops(512, 5) * 1e9;  // measured, not a datasheet number
    device_.versions["ucplan"] = UCPLAN_VERSION;
    device_.versions["openblas"] = cpu::blas_description();
    return device_;
  }
  std::string source() const override { return "measured"; }

  std::vector<std::string> algorithms(const Graph& g, int layer, TaskKind op) override {
    if (op == TaskKind::Update) return {"sgd"};
    if (g.layers[layer].type() == LayerType::Conv) return conv_algorithms_cpu();
    return {"default"};
  }

  Measurement measure(const Graph& g, int layer, TaskKind kind, const std::string& algo, std::int64_t batch,
                      int repeats) override {
    const GraphLayer& l = g.layers[layer];
    Measurement m;
    if (!layer_has_task(l, kind)) {
      m.status = fmt::format("failed: a {} layer has no op \"{}\"", layer_type_name(l.type()), task_kind_name(kind));
      return m;
    }
    const StepOp op = step_op_of(kind);
    const std::int64_t n = std::max<std::int64_t>(batch, 1);
    if (!layer_op_supported_cpu(l, op, algo, n)) {
      m.status = "unsupported";
      return m;
    }
    // Like a device's, host memory ends: an op whose buffers exceed it is out_of_memory, as the CUDA
    // runner records one that cudaMalloc refuses (the planner then uses smaller micro-batches or says
    // what is missing), rather than the profiler aborting or the kernel's OOM killer ending it.
    const CpuPrecision precision = cpu_precision(g.precision, true);
    const std::int64_t ws_bytes = layer_op_workspace_cpu(l, op, algo, n);
    m.workspace_bytes = ws_bytes;
    const OpBuffers sizes(l, n, precision, ws_bytes);
    if (sizes.bytes() >
        static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE))) {
      m.status = "out_of_memory";
      return m;
    }
    try {
      measure_into(l, op, algo, n, precision, sizes, repeats, m);
    } catch (const std::bad_alloc&) {  // more than the memory left, less than the machine's
      m.status = "out_of_memory";
      m.seconds = m.spread = 0;
    }
    return m;
  }

  std::vector<TransferPoint> measure_transfers(bool, const std::vector<std::int64_t>& sizes) override {
    std::vector<TransferPoint> out;
    const std::int64_t biggest = *std::max_element(sizes.begin(), sizes.end());
    std::vector<char> src(static_cast<std::size_t>(biggest), 1), dst(static_cast<std::size_t>(biggest), 0);
    for (auto bytes : sizes) {
      std::vector<double> t;
      std::memcpy(dst.data(), src.data(), static_cast<std::size_t>(bytes));
      for (int r = 0; r < 5; ++r) {
        const double t0 = now_seconds();
        std::memcpy(dst.data(), src.data(), static_cast<std::size_t>(bytes));
        t.push_back(now_seconds() - t0);
      }
      double med, spread;
      median_and_spread(t, &med, &spread);
      out.push_back({bytes, med});
    }
    return out;
  }

  // Two copies at once (two threads, as the CPU backend's two copy streams) vs one alone.
  bool measure_duplex() override {
    const std::size_t bytes = 32u << 20;
    std::vector<char> a(bytes, 1), b(bytes, 0), c(bytes, 2), d(bytes, 0);
    auto one = [&] { std::memcpy(b.data(), a.data(), bytes); };
    one();
    double t0 = now_seconds();
    one();
    const double alone = now_seconds() - t0;
    t0 = now_seconds();
    std::thread other([&] { std::memcpy(d.data(), c.data(), bytes); });
    one();
    other.join();
    const double both = now_seconds() - t0;
    return both < 1.3 * alone;
  }

 private:
  DeviceInfo device_;
  CpuTimes at_start_;
};

}  // namespace

std::unique_ptr<Runner> make_cpu_runner() {
  if (const std::string why = cpu::prepare_blas(kBlasBufferBytes); !why.empty()) throw UserError("", "", why);
  return std::make_unique<CpuRunner>();
}

}  // namespace ucplan
