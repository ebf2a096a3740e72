// ucplan-run (run as `ucplan run ...`): verifies a plan, replays it on a device and reports
// measured against predicted time and memory; with --check, poisons what the plan frees and
// compares weight gradients with a reference run. Exit codes: 0 ok, 1 the check or the device
// failed, 2 bad input.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "backend.h"
#include "executor/cpu/blas.h"
#include "planner/model/blas_env.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/program.h"
#include "planner/views/plan_views.h"
#include "planner/model/units.h"
#include "planner/check/verify.h"
#include "replay.h"

int main(int argc, char** argv) {
  ucplan::ensure_blas_environment(argv, ucplan::cpu::blas_core_type_for_this_cpu());
  CLI::App app{
      "ucplan run: replay a plan on a device (cpu or cuda) and report measured vs predicted time, peak memory "
      "and bytes moved; --check poisons (NaN) every region the plan frees or offloads and compares the weight "
      "gradients with a reference run without micro-batching, offload or recomputation (in the plan's sub-batch "
      "rounds, so batch-norm statistics are per sub-batch in both), and each checked iteration's weights with "
      "w - lr x dW."};
  app.name("ucplan run");
  std::string plan_path, device = "cpu", trace;
  int iterations = 5;
  bool check = false, no_verify = false, json = false, no_poison = false, exact = false, graphs = false;
  double tolerance = 1e-3, lr = 0.01;
  app.add_option("plan", plan_path, "plan file made by `ucplan compile`")->required();
  app.add_option("--device,-d", device, "cpu (default) | cuda | cuda:N");
  app.add_option("--iterations,-n", iterations,
                 "timed iterations after one warm-up (default 5); the median is reported")
      ->transform(ucplan::whole_number(1, 100000));
  app.add_flag("--check", check,
               "poison freed/offloaded regions and compare weight gradients with a reference run (CPU)");
  auto* tolerance_option = app.add_option(
      "--tolerance", tolerance,
      "--check: largest allowed relative L2 error of a weight gradient, |got - want| / |want| (default "
      "1e-3 on cpu, 1e-2 on cuda: the CPU reference rounds differently from cuDNN, and batch-norm backward "
      "amplifies that; at another precision at least 8 units of its roundoff: 3.1e-2 at bf16, 3.9e-3 at fp16 and "
      "tf32); on cuda a gradient may also differ by twice its floor: the distance of a reference run with every "
      "convolution's FP32 rounding jittered, and at bf16 and fp16 that of the emulated reference from an FP32 one "
      "(batch norm amplifies both with depth: a correct bf16 resnet20 passed at 0.3 on an H200)");
  app.add_option("--lr", lr, "SGD learning rate of the updates (default 0.01)");
  app.add_option("--trace", trace,
                 "write the measured timeline of the last iteration as a Chrome trace to FILE (each copy with its "
                 "bytes: what `ucplan calibrate` refits a profile's copy costs from)");
  app.add_flag("--json", json, "print the report as JSON");
  app.add_flag(
      "--exact", exact,
      "cuda: refuse a conv configuration the device cannot run as planned (unsupported, or a larger workspace than "
      "the plan gives) instead of substituting cuDNN's best-ranked algorithm that fits");
  app.add_flag("--cuda-graphs,!--no-cuda-graphs", graphs,
               "cuda: from the second iteration on, launch each round and the final steps as a CUDA graph captured "
               "once (one more warm-up iteration, which captures), instead of a few host calls per step: the device "
               "no longer waits for the host between short kernels (default: off)");
  app.add_flag("--no-verify", no_verify,
               "replay a plan the verifier refuses for its schedule (lifetimes, versions, waits, order), to see "
               "what --check's poisoning catches; a plan whose steps would reach outside their buffers is still "
               "refused");
  app.add_flag("--no-poison", no_poison, "--check without poisoning (tells a wrong kernel from a wrong plan)");
  return ucplan::run_program(app, "ucplan run", argc, argv, [&] {
    if (!(tolerance >= 0 && std::isfinite(tolerance)))
      throw ucplan::UserError("", "--tolerance",
                              fmt::format("a relative error must be a finite number, 0 or more, got {}", tolerance));
    // As PyTorch's SGD, which refuses a negative one; the updates multiply in FP32, where a larger
    // one is infinite.
    if (!(lr >= 0 && lr <= std::numeric_limits<float>::max()))
      throw ucplan::UserError(
          "", "--lr", fmt::format("a learning rate must be a number from 0 to 3.4e38 (what FP32 holds), got {}", lr));
    // Options that change only what --check or the CUDA backend does are refused where they would be
    // ignored, so that a user who gives them is not misled into trusting a run they did not shape.
    if (!check && tolerance_option->count() > 0)
      throw ucplan::UserError("", "--tolerance", "only with --check (it is the gradients' allowed error)");
    if (!check && no_poison) throw ucplan::UserError("", "--no-poison", "only with --check");
    if (exact && device.rfind("cuda", 0) != 0)
      throw ucplan::UserError("", "--exact",
                              "only with --device cuda (the CPU runs every configuration as planned, or refuses "
                              "the plan)");
    if (graphs && device.rfind("cuda", 0) != 0)
      throw ucplan::UserError("", "--cuda-graphs", fmt::format("CUDA graphs need --device cuda, not {}", device));
    // The trace is checked before the run, so that a bad path costs no iterations.
    ucplan::check_outputs({{"--trace", trace}}, {{"the plan", plan_path}});
    const ucplan::Plan plan = ucplan::load_plan(plan_path);
    if (!no_verify) {
      const std::string error = ucplan::find_plan_error(plan);
      if (!error.empty()) throw ucplan::UserError(plan_path, "", "the plan is invalid: " + error);
    } else {
      // Without the verifier's schedule rules, but never a replay that reads or writes outside its
      // buffers (a crash, not a failed check).
      std::string schedule_error;
      const std::string unsafe = ucplan::find_unsafe_plan_error(plan, &schedule_error);
      if (!unsafe.empty())
        throw ucplan::UserError(
            plan_path, "",
            "not replayed even with --no-verify (its steps would reach outside their buffers): " + unsafe);
      if (!schedule_error.empty())
        std::fprintf(stderr, "ucplan run: --no-verify: replaying a plan the verifier refuses: %s\n",
                     schedule_error.c_str());
    }
    const ucplan::Graph g = ucplan::build_graph(plan.network, plan_path, plan.precision);
    // The CPU backend and --check's reference multiply with OpenBLAS: its buffers first.
    if (device == "cpu" || check)
      if (const std::string why = ucplan::cpu::prepare_blas(ucplan::kBlasBufferBytes); !why.empty())
        throw ucplan::UserError("", "", why);
    std::unique_ptr<ucplan::Backend> backend;
    if (device == "cpu") {
      backend = ucplan::make_cpu_backend(g);
    } else if (device == "cuda" || device.rfind("cuda:", 0) == 0) {
      const int index = ucplan::cuda_device_index(device, "cpu, cuda or cuda:N");
#ifdef UCPLAN_HAVE_CUDA
      backend = ucplan::make_cuda_backend(g, index, exact, graphs);
#else
      (void)index;
      throw ucplan::UserError("", "--device", "this ucplan-run was built without CUDA");
#endif
    } else {
      throw ucplan::UserError("", "--device", fmt::format("unknown device \"{}\" (cpu, cuda, cuda:N)", device));
    }
    // On cuda the reference (CPU, reference_conv_algo_cpu's algorithms) differs from cuDNN by
    // FP32 rounding that batch-norm backward amplifies up to ~10^3-fold (README): 1e-2, or twice
    // the rounding floor where a deeper network amplifies more (RunOptions::rounding_floor), still
    // tells a scheduling error (NaN from poison, or O(1)) from rounding.
    if (tolerance_option->count() == 0) tolerance = ucplan::default_check_tolerance(plan.precision, device != "cpu");
    ucplan::RunOptions o;
    o.iterations = iterations;
    o.check = check;
    o.poison = !no_poison;
    o.tolerance = tolerance;
    o.lr = lr;
    o.fp32_floor = device != "cpu";      // the CPU replays the emulation itself: its errors are 0
    o.rounding_floor = device != "cpu";  // ... and the reference's kernels: it sums in the same order
    o.progress = [](const std::string& line) { std::fprintf(stderr, "ucplan run: %s\n", line.c_str()); };
    if (check) o.host_bytes_available = ucplan::host_memory_available();
    const ucplan::RunReport r = ucplan::replay_plan(plan, *backend, o);
    // What each gradient's floor is the distance of (RunOptions): the larger of these.
    std::vector<std::string> floor_of;
    if (o.fp32_floor && ucplan::low_precision_storage(plan.precision))
      floor_of.push_back("the emulated reference from an FP32 reference");
    if (o.rounding_floor) floor_of.push_back("a reference with every convolution's FP32 rounding jittered");
    if (!trace.empty()) {
      const ucplan::RunDevice ran_on{device == "cpu" ? "cpu" : "cuda", backend->device_name()};
      ucplan::write_file_atomically(trace, ucplan::chrome_trace(plan, &r.timeline, &ran_on));
    }
    const double ratio = r.predicted_seconds > 0 ? r.median_seconds / r.predicted_seconds : 0;
    if (json) {
      ucplan::OrderedJson j = {{"plan", plan_path},
                               {"backend", r.backend},
                               {"profile_source", plan.profile_source},
                               {"iterations", r.iteration_seconds},
                               {"median_seconds", r.median_seconds},
                               {"predicted_seconds", r.predicted_seconds},
                               {"measured_over_predicted", ratio},
                               {"arena_bytes", r.arena_bytes},
                               {"device_memory_bytes", r.device_memory_bytes},
                               {"runtime_overhead_bytes", backend->runtime_overhead_bytes()},
                               {"notes", backend->notes()},
                               {"plan_peak_bytes", plan.summary.peak_bytes},
                               {"budget_bytes", plan.budget_bytes},
                               {"bytes_h2d", r.bytes_h2d},
                               {"bytes_d2h", r.bytes_d2h},
                               {"precision", ucplan::precision_name(plan.precision)},
                               {"loss_scale",
                                {{"option", r.loss_scale},
                                 {"initial", r.initial_loss_scale},
                                 {"final", r.final_loss_scale},
                                 {"steps", r.steps},
                                 {"skipped_steps", r.skipped_steps}}}};
      if (r.checked) {
        ucplan::OrderedJson per = ucplan::OrderedJson::object();
        ucplan::OrderedJson floors = ucplan::OrderedJson::object();
        for (const auto& e : r.errors) {
          per[e.tensor] = e.max_rel_error;
          if (r.floor_checked) floors[e.tensor] = e.floor;
        }
        j["check"] = {{"passed", r.passed},
                      {"max_rel_error", r.fault.empty() ? r.max_rel_error : -1.0},
                      {"worst_tensor", r.worst_tensor},
                      {"tolerance", tolerance},
                      {"fault", r.fault},
                      {"errors", per}};
        if (r.floor_checked)
          j["check"]["floor"] = {{"factor", ucplan::kFloorFactor},
                                 {"of", floor_of},
                                 {"worst_share_of_limit", r.worst_share_of_limit},
                                 {"worst_share_tensor", r.worst_share_tensor},
                                 {"floors", floors}};
      }
      fmt::print("{}", ucplan::dump_json(j));
    } else {
      fmt::print("{} on {}\n", plan_path, r.backend);
      std::string all;
      for (double s : r.iteration_seconds) all += (all.empty() ? "" : ", ") + ucplan::format_seconds(s);
      fmt::print(
          "  iteration   measured median {} over {} iteration{} ({}); predicted {} ({}): measured/predicted {:.2f}\n",
          ucplan::format_seconds(r.median_seconds), r.iteration_seconds.size(),
          r.iteration_seconds.size() == 1 ? "" : "s", all, ucplan::format_seconds(r.predicted_seconds),
          plan.profile_source == "measured" ? "from measured costs" : "from a MODELLED profile", ratio);
      fmt::print("  memory      device memory held {} (arena {}); plan peak {}; budget {}\n",
                 ucplan::format_bytes(r.device_memory_bytes), ucplan::format_bytes(r.arena_bytes),
                 ucplan::format_bytes(plan.summary.peak_bytes), ucplan::format_bytes(plan.budget_bytes));
      if (const std::int64_t overhead = backend->runtime_overhead_bytes(); overhead > 0)
        fmt::print(
            "  runtime     CUDA context, cuDNN, cuBLAS and loaded kernels {} beside the arena: {} in all (a measured "
            "profile's device_overhead_bytes is kept out of the budget by `ucplan compile`)\n",
            ucplan::format_bytes(overhead), ucplan::format_bytes(overhead + r.arena_bytes));
      fmt::print("  transfers   host->device {}, device->host {} per iteration\n", ucplan::format_bytes(r.bytes_h2d),
                 ucplan::format_bytes(r.bytes_d2h));
      for (const auto& n : backend->notes()) fmt::print("  note        {}\n", n);
      if (plan.precision != ucplan::Precision::FP32)
        fmt::print("  precision   {}: activations and gradients {} ({}), FP32 master weights and accumulation\n",
                   ucplan::precision_name(plan.precision), ucplan::storage_name(ucplan::storage_of(plan.precision)),
                   device == "cpu" && ucplan::low_precision_storage(plan.precision)
                       ? "emulated: rounded to nearest even on every store"
                       : "native");
      if (r.loss_scale != "none")
        fmt::print("  loss scale  {}: {:g} at the start, {:g} at the end; {} of {} steps skipped (inf/NaN gradients)\n",
                   r.loss_scale, r.initial_loss_scale, r.final_loss_scale, r.skipped_steps, r.steps);
      if (r.checked && !r.fault.empty())
        fmt::print("  check       FAILED: {}\n", r.fault);
      else if (r.checked)
        fmt::print(
            "  check       {}: weight gradients of {} iterations vs reference run, max relative error {:.2e} ({}), "
            "tolerance {:.1e}{}{}; input buffers intact{}\n",
            r.passed ? "PASSED" : "FAILED", r.checked_iterations, r.max_rel_error, r.worst_tensor, tolerance,
            r.floor_checked ? fmt::format(" or {:g}x the gradient's floor (below)", ucplan::kFloorFactor) : "",
            tolerance_option->count() ? " (--tolerance)"
            : plan.precision == ucplan::Precision::FP32
                ? ""
                : fmt::format(" (8 x {}'s unit roundoff {:.1e})", ucplan::precision_name(plan.precision),
                              ucplan::unit_roundoff(plan.precision)),
            r.overflow_checked
                ? fmt::format("; {} checked iteration(s) overflowed in both runs (skipped step)", r.overflow_checked)
                : "");
      if (r.checked && plan.sub_batch_changes_statistics)
        fmt::print(
            "  statistics  batch-norm statistics per sub-batch of {} (the plan's {} rounds), in the reference too\n",
            plan.sub_batch, plan.rounds);
      if (r.checked && r.fault.empty() && r.floor_checked)
        fmt::print(
            "  floor       each gradient may differ from the reference by {:g}x the distance of {} (or the tolerance): "
            "the worst used {:.0f} % of its limit ({})\n",
            ucplan::kFloorFactor, fmt::join(floor_of, ", or of "), 100 * r.worst_share_of_limit, r.worst_share_tensor);
    }
    return r.passed ? 0 : 1;
  });
}
