// ucplan: the front door. Parses the command line (CLI11 lives only in the programs' mains and
// planner/model/program.h) and dispatches to the commands in commands.h; `profile`, `run` and
// `import` execute the sibling binaries ucplan-profile, ucplan-run and ucplan-import, so the
// planner never links CUDA nor ONNX. Exit codes: 0 ok, 1 a check failed,
// 2 bad input (a user error, one line on stderr).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "planner/model/blas_env.h"
#include "planner/model/errors.h"
#include "planner/model/network.h"
#include "planner/model/program.h"

namespace {

std::string self_directory() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  std::string path(buf);
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

int exec_sibling(const char* name, int argc, char** argv) {
  std::string path = self_directory() + "/" + name;
  std::vector<char*> args;
  args.push_back(const_cast<char*>(path.c_str()));
  for (int i = 2; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execv(path.c_str(), args.data());
  std::fprintf(stderr, "ucplan: error: cannot run %s (%s): is it built next to ucplan?\n", path.c_str(),
               std::strerror(errno));
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "profile") == 0) return exec_sibling("ucplan-profile", argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "run") == 0) return exec_sibling("ucplan-run", argc, argv);
  if (argc >= 2 && std::strcmp(argv[1], "import") == 0) return exec_sibling("ucplan-import", argc, argv);
  ucplan::ensure_blas_environment(argv, nullptr);  // CBC loads OpenBLAS, whose threads could hang the exit

  CLI::App app{"ucplan " UCPLAN_VERSION
               ": plans micro-batching, convolution algorithms, offload/prefetch and recomputation for training a "
               "convolutional network under a device-memory budget, as one static, checkable plan file."};
  app.set_version_flag("--version", std::string("ucplan ") + UCPLAN_VERSION);
  app.require_subcommand(1);
  app.footer(
      "Also:\n"
      "  ucplan profile NETWORK --batch B --device cpu|cuda|model:NAME -o PROFILE.json   (runs ucplan-profile)\n"
      "  ucplan run PLAN.json [--device cpu|cuda] [--check]                              (runs ucplan-run)\n"
      "NETWORK is a zoo name (see `ucplan networks`) or a path to a ucplan-network/1 JSON file.\n"
      "Sizes take a unit: B, KiB, MiB, GiB (binary) or KB, MB, GB (decimal), e.g. 12GiB.");
  app.add_subcommand("profile", "measure kernel and transfer costs (runs ucplan-profile; see ucplan profile --help)");
  app.add_subcommand("run", "replay a plan on a device (runs ucplan-run; see ucplan run --help)");
  app.add_subcommand(
      "import", "convert an ONNX model's graph into a ucplan network (runs ucplan-import; see ucplan import --help)");

  ucplan::NetworksOptions networks;
  auto* c_networks =
      app.add_subcommand("networks", "list the network zoo: layers, parameters, activation bytes per sample");
  c_networks->add_flag("--json", networks.json, "print JSON instead of a table");

  ucplan::InspectOptions inspect;
  auto* c_inspect = app.add_subcommand(
      "inspect",
      "per-layer shapes, parameters, FLOPs and activation bytes; totals: parameters, baseline peak, liveness "
      "peak and the moDNN lower bound");
  c_inspect->add_option("network", inspect.network, "zoo name or path to a network JSON file")->required();
  c_inspect->add_option("--batch,-b", inspect.batch, "mini-batch size in samples (default 1)")
      ->transform(ucplan::whole_number(std::int64_t{1}, ucplan::kMaxBatch));
  c_inspect->add_flag("--json", inspect.json, "print JSON instead of tables");
  c_inspect->add_option("--csv-steps", inspect.csv_steps,
                        "write per-step live bytes to FILE as CSV (step,phase,task,layer,live_bytes,live_tensors)");
  c_inspect->add_option("--precision", inspect.precision,
                        "fp32 (default) | tf32 | bf16 | fp16 | pseudo-fp16: bytes of every tensor follow its type "
                        "(bf16, fp16: activations and their gradients at 2 bytes)");

  ucplan::CompileOptions compile;
  auto* c_compile = app.add_subcommand("compile", "make a plan for a network, a profile and a memory budget");
  c_compile->add_option("network", compile.network, "zoo name or path to a network JSON file")->required();
  c_compile->add_option("--profile,-p", compile.profile, "profile JSON made by `ucplan profile` for this network")
      ->required();
  c_compile->add_option(
      "--budget", compile.budget,
      "device memory budget for the whole iteration (arena: activations, gradients, weights, "
      "workspaces), with unit, e.g. 12GiB (B, KiB, MiB, GiB, TiB; K, M, G, T are the same binary units; KB, MB, "
      "GB, TB are powers of 10); or a share of the network's liveness peak at this batch "
      "(`ucplan inspect`), e.g. 50%, which the plan's arena gets, the reserve coming on top; or device: all the "
      "memory of the profile's device (its total as measured, a model's datasheet), less the reserve");
  c_compile->add_option(
      "--reserve", compile.reserve,
      "device memory of the budget kept for the CUDA context, cuDNN and cuBLAS, with unit, or auto "
      "(default: the device_overhead_bytes a measured CUDA profile recorded, 0 for other profiles); the "
      "plan's arena gets the rest");
  c_compile->add_option("--batch,-b", compile.batch, "mini-batch size in samples (default: the profile's batch)")
      ->transform(ucplan::whole_number(std::int64_t{1}, ucplan::kMaxBatch));
  c_compile->add_option("--strategy", compile.strategy,
                        "ucplan (default) | keep-all | vdnn-all | vdnn-conv | superneurons | checkpoint-sqrt");
  c_compile->add_option("--sub-batch", compile.sub_batch,
                        "auto (default; never splits a network with batch-norm) | any (also splits batch-norm "
                        "networks, which changes their statistics) | N samples per round");
  c_compile->add_option("--workspace", compile.workspace,
                        "convolution workspace policy: dynamic (default: per step, by gain, moDNN Eq. 5) | wr:SIZE "
                        "(per-kernel limit, mu-cuDNN WR) | wd:SIZE (total over kernels, mu-cuDNN WD ILP); with "
                        "--conv-only it may be repeated to compare settings side by side");
  c_compile->add_option(
      "--micro-batches", compile.micro_batches,
      "micro-batch sizes conv kernels may use: all (default: every size in the profile) | powerOfTwo | "
      "undivided (cuDNN alone)");
  c_compile->add_option("-o,--output", compile.output, "plan file to write (written atomically)");
  c_compile->add_option("--trace", compile.trace,
                        "also write the predicted timeline as a Chrome trace (Perfetto) to FILE");
  c_compile->add_option("--dump-after", compile.dump_after,
                        "write the JSON of one pipeline stage to stdout: graph | liveness | lower-bound | conv-configs "
                        "| sub-batch | schedule; without -o or --trace the compile stops after that stage");
  c_compile->add_flag("--conv-only", compile.conv_only,
                      "only choose convolution configurations and report them (no memory plan)");
  c_compile->add_option(
      "--pareto", compile.pareto,
      "with --conv-only: print the Pareto front (time vs workspace) of one kernel, named LAYER:OP, e.g. conv2:forward");
  c_compile->add_flag("--quiet,-q", compile.quiet, "no report on stdout");
  c_compile->add_flag("--json", compile.json, "with --conv-only: print the report as JSON");
  c_compile->add_flag("--verbose,-v", compile.verbose,
                      "also list every candidate the ucplan search simulated, with its predicted time");
  c_compile->add_option(
      "--solver", compile.solver,
      "fast (the ucplan search, one branch: a quick plan, sometimes slower) | default (the ucplan search; for a "
      "network under 512 layers also a longer search with ten times the local-search work from its best plan, and "
      "fast's plan where faster) | "
      "thorough (the default with that longer search and fast's plan whatever the network's size: never slower than "
      "the default or fast; "
      "ResNet-152 and larger compile several times longer) | exact (thorough, then a rematerialisation MILP "
      "solved with CBC, whose solution leads the seeds of another longer search; the plan reports the MILP's "
      "proven lower bound)");
  c_compile->add_option("--time-limit", compile.time_limit,
                        "with --solver exact: the wall-clock limit of all the compile's MILP solves together (one per "
                        "sub-batch candidate, and again when a plan on a measured CUDA profile is made again to leave "
                        "room for the mapping of its host buffers), e.g. 60s or 2min (default: none, solve to "
                        "optimality); each stops within a second of what is left of it (at least a second, or the "
                        "limit if shorter), then the search seeded with its solution runs; a plan made within a "
                        "limit CBC reached may not be reproducible");
  c_compile->add_option("--offload", compile.offload,
                        "allowed (default: the ucplan search may copy activations to host memory and back) | never "
                        "(keep and recompute only; no plan is slower with allowed)");
  c_compile->add_option("--precision", compile.precision,
                        "fp32 (default) | tf32 | bf16 | fp16 | pseudo-fp16; must be the profile's (ucplan profile "
                        "--precision)");
  c_compile->add_option("--loss-scale", compile.loss_scale,
                        "none | static:S | dynamic (PyTorch GradScaler: skip a step with inf/NaN gradients and halve "
                        "the scale); default: dynamic at fp16 and pseudo-fp16, none otherwise");

  ucplan::CheckOptions check;
  auto* c_check = app.add_subcommand("check", "verify plans (independent re-simulation); exit 1 if any is invalid");
  c_check->add_option("plans", check.plans, "plan files")->required();
  c_check->add_flag(
      "--recompile", check.recompile,
      "also recompile each plan from its embedded inputs and the profile it names, and fail on any difference "
      "(of bytes; of content in a plan another tool reformatted)");

  ucplan::ExplainOptions explain;
  auto* c_explain =
      app.add_subcommand("explain", "report a plan: time vs ideal, memory vs budget and bound, per-layer decisions");
  c_explain->add_option("plan", explain.plan, "plan file")->required();
  c_explain->add_option("--trace", explain.trace, "write the predicted timeline as a Chrome trace (Perfetto) to FILE");
  c_explain->add_option("--svg", explain.svg, "write a memory-over-time plot (SVG) to FILE");
  c_explain->add_flag("--json", explain.json, "print the summary as JSON");

  ucplan::FrontierOptions frontier;
  auto* c_frontier = app.add_subcommand(
      "frontier",
      "the budget -> predicted time curve from the smallest budget with a plan to where more memory stops "
      "helping: where the knee is");
  c_frontier->add_option("network", frontier.network, "zoo name or path to a network JSON file")->required();
  c_frontier->add_option("--profile,-p", frontier.profile, "profile JSON made by `ucplan profile` for this network")
      ->required();
  c_frontier->add_option("--batch,-b", frontier.batch, "mini-batch size in samples (default: the profile's batch)")
      ->transform(ucplan::whole_number(std::int64_t{1}, ucplan::kMaxBatch));
  c_frontier->add_option("--strategy", frontier.strategy, "as for compile (default ucplan)");
  c_frontier->add_option("--sub-batch", frontier.sub_batch, "as for compile (default auto)");
  c_frontier->add_option("--solver", frontier.solver,
                         "as for compile: fast (a quick curve, one search branch per budget) | default | thorough "
                         "(default: default)");
  c_frontier->add_option("--points", frontier.points, "budgets, spaced geometrically (default 12, 2 to 200)")
      ->transform(ucplan::whole_number(2, 200));
  c_frontier->add_flag("--json", frontier.json, "print JSON instead of a table");
  c_frontier->add_option("--svg", frontier.svg, "also write the curve as an SVG plot to FILE");

  ucplan::CalibrateOptions calibrate;
  auto* c_calibrate = app.add_subcommand(
      "calibrate",
      "refit a measured profile from measured runs (ucplan run PLAN --trace T.json): the copy costs (the plan's "
      "copies beside its own kernels, which the profiler's copies alone do not see) and the launch gap (the "
      "compute stream's idle time between kernels, which the profiler's kernel times do not show)");
  c_calibrate->add_option("profile", calibrate.profile, "measured profile the plans were made from")->required();
  c_calibrate
      ->add_option("--trace,-t", calibrate.traces,
                   "a trace written by `ucplan run PLAN --trace T.json` (repeatable; for the copies, plans that "
                   "offload)")
      ->required();
  c_calibrate
      ->add_option("--fit", calibrate.fit,
                   "all: whatever the traces can refit (default) | copies: the copy costs only, an error if the "
                   "traces cannot | launch: the launch gap only")
      ->check(CLI::IsMember({"all", "copies", "launch"}));
  c_calibrate
      ->add_option("-o,--output", calibrate.output,
                   "calibrated profile to write (written atomically); it may be PROFILE itself, refitted in "
                   "place, after which plans made from the old one no longer pass check --recompile")
      ->required();

  // A mistyped command is named (CLI11 would say only that a subcommand is required).
  if (argc >= 2 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(c->get_name());
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      fmt::print(stderr, "ucplan: error: unknown command \"{}\": expected {} (see ucplan --help)\n",
                 ucplan::one_line(argv[1]), fmt::join(names, ", "));
      return 2;
    }
  }
  return ucplan::run_program(app, "ucplan", argc, argv, [&] {
    if (c_networks->parsed()) return ucplan::run_networks(networks);
    if (c_inspect->parsed()) return ucplan::run_inspect(inspect);
    if (c_compile->parsed()) return ucplan::run_compile(compile);
    if (c_check->parsed()) return ucplan::run_check(check);
    if (c_explain->parsed()) return ucplan::run_explain(explain);
    if (c_frontier->parsed()) return ucplan::run_frontier(frontier);
    if (c_calibrate->parsed()) return ucplan::run_calibrate(calibrate);
    return 2;  // not reached: require_subcommand(1)
  });
}
