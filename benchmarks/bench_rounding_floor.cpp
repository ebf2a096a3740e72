// How far two correct FP32 runs of a network's training step land apart, weight gradient by
// weight gradient: the reference `ucplan run --check` compares with (every convolution by gemm, as
// it runs for a cuDNN plan), against the same run with every convolution direct, and against the
// same run with every convolution's output jittered by kRoundingJitter (the check's rounding floor
// on cuda, replay.h RunOptions::rounding_floor). Prints one line per weight gradient: the two
// relative L2 distances and their ratio, then their range; benchmarks/results/gpu-h100/session-3/
// holds ResNet-20 and ResNet-50 at batch 64 beside an H100's cuDNN errors.
// Usage: bench_rounding_floor NETWORK BATCH   (the direct run is slow: minutes for ResNet-50 b64)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "executor/reference.h"
#include "executor/replay.h"
#include "planner/model/errors.h"
#include "planner/model/network.h"

using namespace ucplan;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bench_rounding_floor NETWORK BATCH\n");
    return 2;
  }
  try {
    const Graph g = build_graph(load_network(resolve_network_path(argv[1])), argv[1]);
    const std::int64_t batch = std::stoll(argv[2]);
    std::map<std::string, std::string> gemm, direct;
    for (const GraphLayer& l : g.layers)
      if (l.type() == LayerType::Conv)
        for (const char* op : {"forward", "backward_data", "backward_filter"}) {
          gemm[l.name() + ":" + op] = "gemm";
          direct[l.name() + ":" + op] = "direct";
        }
    auto timed = [&](const char* what, auto run) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = run();
      std::fprintf(stderr, "%s: %.1f s\n", what,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      return r;
    };
    const auto ref = timed("gemm", [&] { return reference_gradients(g, batch, batch, 0x5eed, gemm); });
    const auto jit = timed("gemm, jittered",
                           [&] { return reference_gradients(g, batch, batch, 0x5eed, gemm, {}, 1, kRoundingJitter); });
    const auto dir = timed("direct", [&] { return reference_gradients(g, batch, batch, 0x5eed, direct); });
    std::printf("%-32s %12s %12s %8s\n", "weight gradient", "direct", "jittered", "ratio");
    std::vector<double> ratios;
    for (const auto& [name, want] : ref.weight_gradients) {
      const double d = relative_l2_error(dir.weight_gradients.at(name), want);
      const double j = relative_l2_error(jit.weight_gradients.at(name), want);
      std::printf("%-32s %12.3e %12.3e %8.3f\n", name.c_str(), d, j, d > 0 ? j / d : 0.0);
      if (d > 0) ratios.push_back(j / d);
    }
    std::sort(ratios.begin(), ratios.end());
    if (!ratios.empty())
      std::printf("jittered / direct over %zu gradients: min %.2f, median %.2f, max %.2f\n", ratios.size(),
                  ratios.front(), ratios[ratios.size() / 2], ratios.back());
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "bench_rounding_floor: error: %s\n", e.what());
    return 2;
  }
}
