// ucplan-profile (run as `ucplan profile ...`): measures or models a network's kernel and
// transfer costs and writes a ucplan-profile/1 file atomically. Exit codes: 0 ok, 1 a device
// failure (nothing written), 2 bad input.
#include <cstdio>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cpu_runner.h"
#include "executor/cpu/blas.h"
#include "planner/model/blas_env.h"
#include "model_device.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/program.h"
#include "planner/model/units.h"
#include "profile_network.h"
#ifdef UCPLAN_HAVE_CUDA
#include "cuda/cuda_runner.h"
#endif

namespace {

std::unique_ptr<ucplan::Runner> make_runner(const std::string& device, ucplan::Precision precision) {
  if (device == "cpu") return ucplan::make_cpu_runner();
  if (device.rfind("model:", 0) == 0) {
    const std::string name = device.substr(6);
    // A fitted model's factors are fitted at FP32 (model_device.h): at another precision it
    // would be its datasheet model under the fitted one's name.
    const ucplan::ModelDeviceSpec* spec = name.rfind("model:", 0) == 0 ? nullptr : ucplan::find_model_device(name);
    if (spec && !spec->fitted.empty() && precision != ucplan::Precision::FP32)
      throw ucplan::UserError("", "--precision",
                              fmt::format("model:{}'s factors are fitted at fp32 only; at {} profile with the "
                                          "datasheet model it corrects",
                                          name, ucplan::precision_name(precision)));
    return ucplan::make_model_runner(spec ? name : device);  // "model:model:x" is refused as unknown
  }
  if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
    const int index = ucplan::cuda_device_index(device, "cpu, cuda, cuda:N or model:NAME");
    // tf32: cuDNN and cuBLAS with tf32 tensor-op math. bf16 and fp16: conv and fc on 16-bit
    // tensors, the other layers as the backend runs them (versions.math says which).
#ifdef UCPLAN_HAVE_CUDA
    ucplan::CudaRunnerOptions options;
    options.allow_tf32 = precision == ucplan::Precision::TF32;
    options.storage = ucplan::storage_of(precision);
    options.pseudo_half = precision == ucplan::Precision::PseudoFP16;
    return ucplan::make_cuda_runner(index, options);
#else
    (void)index;
    (void)precision;
    throw ucplan::UserError("", "--device",
                            "this ucplan-profile was built without CUDA (configure with UCPLAN_WITH_CUDA=ON)");
#endif
  }
  std::string models;
  for (const auto& m : ucplan::model_device_names()) models += ", model:" + m;
  throw ucplan::UserError("", "--device", fmt::format("unknown device \"{}\" (cpu, cuda, cuda:N{})", device, models));
}

}  // namespace

int main(int argc, char** argv) {
  ucplan::ensure_blas_environment(argv, ucplan::cpu::blas_core_type_for_this_cpu());
  CLI::App app{
      "ucplan profile: measure (cpu, cuda) or model (model:k40|p100|v100|a100|h100|h200) the cost of every kernel of a "
      "network's training iteration at every micro-batch size of a policy, with every algorithm, and the "
      "host<->device transfer costs; write them as a ucplan-profile/1 file."};
  app.name("ucplan profile");
  std::string network, device = "cpu", sizes = "powerOfTwo", cache, output, precision = "fp32";
  std::int64_t batch = 0;
  int repeat = 5;
  app.add_option("network", network, "zoo name or path to a network JSON file")->required();
  app.add_option("--batch,-b", batch, "mini-batch size in samples; micro-batch sizes up to it are measured")
      ->required()
      ->transform(ucplan::whole_number(std::int64_t{1}, ucplan::kMaxBatch));
  app.add_option(
      "--device,-d", device,
      "cpu (default) | cuda | cuda:N | model:k40 | model:p100 | model:v100 | model:a100 | model:h100 | model:h200 | "
      "model:h100-fit (model:h100 with per-layer-class factors fitted to an H100's measured profiles)");
  app.add_option(
      "--sizes", sizes,
      "micro-batch sizes to measure (mu-cuDNN §III-B): powerOfTwo (default: 1, 2, 4, ..., batch) | all (1..batch) | "
      "undivided (the batch only)");
  app.add_option("--repeat", repeat, "timed runs per measurement after a warm-up; the median is kept (default 5)")
      ->transform(ucplan::whole_number(1, 1000));
  app.add_option("--precision", precision,
                 "fp32 (default) | tf32 | bf16 | fp16 | pseudo-fp16: storage of activations and their gradients "
                 "(bf16, fp16: 2 bytes) and the math of conv and fc (tensor cores where the device has them), with "
                 "FP32 accumulation, master weights and batch-norm statistics; recorded in the profile");
  app.add_option("--cache", cache,
                 "folder of earlier measurements to reuse and extend (keyed by signature, device, versions); not used "
                 "by model:NAME, whose costs are computed");
  app.add_option("-o,--output", output, "profile file to write (atomically)")->required();
  return ucplan::run_program(app, "ucplan profile", argc, argv, [&] {
    try {
      const std::string path = ucplan::resolve_network_path(network);
      // Checked before measuring, so that a bad path costs no profile.
      ucplan::check_outputs({{"-o", output}}, {{"the network", path}});
      const ucplan::Network net = ucplan::load_network(path);
      ucplan::ProfileOptions o;
      if (!ucplan::parse_precision(precision, &o.precision))
        throw ucplan::UserError("", "--precision",
                                fmt::format("expected {}, got \"{}\"", ucplan::precision_choices(), precision));
      if (auto policy = ucplan::parse_sizes_policy(sizes))
        o.sizes = *policy;
      else
        throw ucplan::UserError("", "--sizes", fmt::format("expected all, powerOfTwo or undivided, got \"{}\"", sizes));
      auto runner = make_runner(device, o.precision);
      o.batch = batch;
      o.repeat = repeat;
      o.cache_dir = cache;
      if (!cache.empty() && runner->source() != "measured")
        fmt::print(stderr, "note: --cache is not used with {}: its costs are computed, not measured\n", device);
      if (app.count("--repeat") > 0 && runner->source() != "measured")
        fmt::print(stderr, "note: --repeat is not used with {}: its costs are computed once, not timed\n", device);
      o.progress = ::isatty(2);
      const ucplan::Profile p = ucplan::profile_network(net, path, *runner, o);
      ucplan::write_file_atomically(output, ucplan::profile_to_json_text(p));
      std::size_t n = 0, out_of_memory = 0, failed = 0;
      for (const auto& s : p.signatures)
        for (const auto& c : s.costs) {
          ++n;
          out_of_memory += c.status == "out_of_memory";
          failed += c.status.rfind("failed", 0) == 0;
        }
      // What did not run is said (compile plans around it: smaller sub-batches, other algorithms).
      std::string missing;
      if (out_of_memory > 0) missing += fmt::format(" ({} out of memory", out_of_memory);
      if (failed > 0) missing += fmt::format("{}{} failed", missing.empty() ? " (" : ", ", failed);
      if (!missing.empty()) missing += ")";
      fmt::print(
          "{}: {} signatures, {} costs{}, batch {} ({}, {}), {} on {}; h2d {:.2f} GB/s, d2h {:.2f} GB/s, duplex {} -> "
          "{}\n",
          p.network, p.signatures.size(), n, missing, p.batch, ucplan::sizes_policy_name(p.sizes_policy),
          ucplan::precision_name(p.precision), p.measured() ? "measured" : "MODELLED (" + p.source + ")", p.device.name,
          p.h2d.bytes_per_second / 1e9, p.d2h.bytes_per_second / 1e9, p.duplex ? "yes" : "no", output);
      if (const std::string shared = ucplan::shared_cpu_warning(p); !shared.empty())
        std::fprintf(stderr, "ucplan profile: note: %s\n", shared.c_str());
    } catch (const ucplan::DeviceFailure& e) {                          // a sticky device error: nothing was written
      std::fprintf(stderr, "\nucplan profile: error: %s\n", e.what());  // after an unfinished progress line
      return 1;
    }
    return 0;
  });
}
