// `ucplan compile`: the planner pipeline (passes/pipeline.h) and its report; `--conv-only`
// reports just the convolution configuration pass (mu-cuDNN §III) for one or more workspace
// settings and micro-batch policies side by side.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "progress_line.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/views/plan_views.h"
#include "planner/model/sha256.h"
#include "planner/model/units.h"
#include "planner/passes/conv_config.h"
#include "planner/passes/costs.h"
#include "planner/passes/liveness.h"
#include "planner/passes/pipeline.h"
#include "planner/ir/graph.h"
#include "planner/ir/route.h"
#include "planner/ir/tasks.h"
#include "report.h"

namespace ucplan {

namespace {

struct KernelChoice {
  std::string label;
  std::vector<MicroStep> config;
  std::int64_t time_ns = 0, workspace = 0;
};

struct SettingResult {
  std::string setting;
  SizesPolicy policy = SizesPolicy::Undivided;
  bool ok = false;
  std::string why;
  std::vector<KernelChoice> kernels;
  std::int64_t total_ns = 0, total_workspace = 0, max_workspace = 0;
  double solve_ms = 0;
  bool optimal = true;              // WD: proven optimal by the ILP
  std::int64_t configurations = 0;  // WD: ILP variables before reduction (configurations over all kernels)
};

// One workspace setting under one micro-batch policy: every conv kernel's choice.
SettingResult choose(const Graph& g, const TaskGraph& tg, const CostTable& ct, const WorkspaceOption& w,
                     const std::string& setting, SizesPolicy policy) {
  SettingResult r;
  r.setting = setting;
  r.policy = policy;
  std::vector<int> ids;
  std::vector<std::vector<ConvConfig>> fronts;
  for (const Task& t : tg.tasks)
    if (t.round_task && t.conv_kernel) {
      ids.push_back(t.id);
      fronts.push_back(ct.tasks[t.id].front);
    }
  std::vector<ConvConfig> chosen;
  auto start = std::chrono::steady_clock::now();
  if (w.kind == WorkspaceOption::Kind::WD) {
    auto sol = solve_wd(fronts, w.bytes);
    if (!sol) {
      r.why = "the kernels need more workspace together";
      return r;
    }
    for (std::size_t k = 0; k < ids.size(); ++k) chosen.push_back(fronts[k][sol->choice[k]]);
    r.optimal = sol->optimal;
    for (const auto& f : fronts) r.configurations += static_cast<std::int64_t>(f.size());
  } else {
    const std::int64_t limit = w.kind == WorkspaceOption::Kind::WR ? w.bytes : INT64_MAX;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      auto c = fastest_within(fronts[k], limit);
      if (!c) {
        r.why = fmt::format("{}:{} needs more than {}", g.layers[tg.tasks[ids[k]].layer].name(),
                            task_kind_name(tg.tasks[ids[k]].kind), format_bytes(limit));
        return r;
      }
      chosen.push_back(*c);
    }
  }
  r.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const Task& t = tg.tasks[ids[k]];
    KernelChoice kc;
    kc.label = fmt::format("{}:{}", g.layers[t.layer].name(), task_kind_name(t.kind));
    for (const auto& m : chosen[k].micro) kc.config.push_back({m.algo, m.micro_batch});
    kc.time_ns = chosen[k].time_ns;
    kc.workspace = chosen[k].workspace_bytes;
    r.total_ns += kc.time_ns;
    r.total_workspace += kc.workspace;
    r.max_workspace = std::max(r.max_workspace, kc.workspace);
    r.kernels.push_back(std::move(kc));
  }
  r.ok = true;
  return r;
}

// `asked`: --micro-batches, as parse_plan_options read it.
int conv_only_report(const CompileOptions& o, SizesPolicy asked, const Network& net, const std::string& net_path,
                     const Profile& prof) {
  const Graph g = build_graph(net, net_path, prof.precision);
  const TaskGraph tg = build_tasks(g, construct_route(g));
  const std::int64_t batch = o.batch > 0 ? o.batch : prof.batch;
  std::vector<std::string> settings = o.workspace.empty() ? std::vector<std::string>{"dynamic"} : o.workspace;
  // The policies the profile's sizes and --micro-batches allow, coarsest first: undivided is cuDNN
  // alone.
  auto allowed = [&](SizesPolicy p) {  // the enum runs from the finest (All) to the coarsest
    return static_cast<int>(p) >= static_cast<int>(prof.sizes_policy) && static_cast<int>(p) >= static_cast<int>(asked);
  };
  std::vector<SizesPolicy> policies;
  for (const SizesPolicy p : {SizesPolicy::Undivided, SizesPolicy::PowerOfTwo, SizesPolicy::All})
    if (allowed(p)) policies.push_back(p);
  std::vector<SettingResult> results;
  std::map<std::string, double> dp_ms;
  OrderedJson pareto;  // --pareto with --json
  for (const SizesPolicy policy : policies) {
    auto start = std::chrono::steady_clock::now();
    const CostTable ct = build_cost_table(g, tg, prof, o.profile, batch, policy);
    dp_ms[sizes_policy_name(policy)] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    for (const auto& s : settings) results.push_back(choose(g, tg, ct, parse_workspace_option(s), s, policy));
    if (!o.pareto.empty() && policy == policies.back()) {
      bool found = false;
      for (const Task& t : tg.tasks) {
        if (!t.conv_kernel || !t.round_task) continue;
        if (fmt::format("{}:{}", g.layers[t.layer].name(), task_kind_name(t.kind)) != o.pareto) continue;
        found = true;
        Table tab({"workspace", "time", "configuration"}, {true, true, false});
        OrderedJson entries = OrderedJson::array();
        for (const auto& c : ct.tasks[t.id].front) {
          std::vector<MicroStep> ms;
          OrderedJson cfg = OrderedJson::array();
          for (const auto& m : c.micro) {
            ms.push_back({m.algo, m.micro_batch});
            cfg.push_back(OrderedJson::array({m.algo, m.micro_batch}));
          }
          tab.add({format_bytes(c.workspace_bytes), format_ns(c.time_ns), config_text(ms)});
          entries.push_back({{"config", cfg}, {"time_ns", c.time_ns}, {"workspace_bytes", c.workspace_bytes}});
        }
        if (o.json)
          pareto = {{"kernel", o.pareto}, {"policy", sizes_policy_name(policy)}, {"front", std::move(entries)}};
        else
          fmt::print("Pareto front of {} at batch {} ({} policy, {} configurations; mu-cuDNN Fig. 6):\n{}\n", o.pareto,
                     batch, sizes_policy_name(policy), ct.tasks[t.id].front.size(), tab.str());
      }
      if (!found)
        throw UserError(
            "", "--pareto",
            fmt::format("no conv kernel \"{}\" (use LAYER:forward|backward_data|backward_filter)", o.pareto));
    }
  }
  auto undivided_of = [&](const std::string& setting) -> const SettingResult* {
    for (const auto& r : results)
      if (r.setting == setting && r.policy == SizesPolicy::Undivided) return &r;
    return nullptr;
  };
  if (o.json) {
    OrderedJson j;
    j["network"] = g.net.name;
    j["batch"] = batch;
    j["profile_source"] = prof.source;
    j["dp_ms"] = dp_ms;
    OrderedJson rs = OrderedJson::array();
    for (const auto& r : results) {
      OrderedJson ks = OrderedJson::array();
      const SettingResult* u = undivided_of(r.setting);
      for (std::size_t k = 0; k < r.kernels.size(); ++k) {
        const auto& kc = r.kernels[k];
        OrderedJson cfg = OrderedJson::array();
        for (const auto& m : kc.config) cfg.push_back(OrderedJson::array({m.algo, m.batch}));
        OrderedJson kj = {
            {"kernel", kc.label}, {"config", cfg}, {"time_ns", kc.time_ns}, {"workspace_bytes", kc.workspace}};
        if (u && u->ok) kj["undivided_time_ns"] = u->kernels[k].time_ns;
        ks.push_back(std::move(kj));
      }
      OrderedJson rj = {{"setting", r.setting},
                        {"policy", sizes_policy_name(r.policy)},
                        {"ok", r.ok},
                        {"why", r.why},
                        {"total_time_ns", r.total_ns},
                        {"total_workspace_bytes", r.total_workspace},
                        {"solve_ms", r.solve_ms}};
      if (r.setting.rfind("wd:", 0) == 0) {
        rj["ilp_optimal"] = r.optimal;
        rj["ilp_configurations"] = r.configurations;
      }
      rj["kernels"] = std::move(ks);
      rs.push_back(std::move(rj));
    }
    j["results"] = std::move(rs);
    if (!pareto.is_null()) j["pareto"] = std::move(pareto);
    fmt::print("{}", dump_json(j));
    return 0;
  }
  fmt::print("Convolution kernels of {} at batch {} ({} kernels), costs {} ({})\n", g.net.name, batch,
             results.empty() ? 0 : results.front().kernels.size(), prof.measured() ? "measured" : "MODELLED",
             prof.source);
  std::vector<std::string> header{"setting"};
  for (const SizesPolicy p : policies) header.push_back(sizes_policy_name(p));
  Table totals(header, std::vector<bool>(header.size(), true));
  for (const auto& s : settings) {
    std::vector<std::string> row{s};
    const SettingResult* u = undivided_of(s);
    for (const SizesPolicy p : policies)
      for (const auto& r : results)
        if (r.setting == s && r.policy == p) {
          if (!r.ok)
            row.push_back("infeasible");
          else if (p == SizesPolicy::Undivided || !u || !u->ok)
            row.push_back(format_ns(r.total_ns));
          else
            row.push_back(fmt::format(
                "{} ({:.2f}x)", format_ns(r.total_ns),
                static_cast<double>(u->total_ns) / static_cast<double>(std::max<std::int64_t>(r.total_ns, 1))));
        }
    totals.add(row);
  }
  fmt::print("\nTotal convolution time (sum over kernels; speedup vs undivided under the same setting):\n{}",
             totals.str());
  std::string dp;
  for (const auto& [p, ms] : dp_ms) dp += fmt::format("{}{} {:.1f} ms", dp.empty() ? "" : ", ", p, ms);
  fmt::print("Pareto-front DP time: {}\n", dp);
  const SizesPolicy finest = policies.back();
  for (const auto& r : results) {
    if (r.policy != finest) continue;
    const SettingResult* u = undivided_of(r.setting);
    fmt::print(
        "\n{} with {} micro-batches{}:\n", r.setting, sizes_policy_name(finest),
        r.setting.rfind("wd:", 0) == 0
            ? fmt::format(
                  " (ILP over {} configurations solved in {:.1f} ms, {}; the division of the total is the workspace "
                  "column; 'undivided' is this kernel in the WD solution without micro-batches, which may give it "
                  "more of the total, so a kernel can be slower than that while the sum is faster)",
                  r.configurations, r.solve_ms, r.optimal ? "proven optimal" : "not proven optimal")
            : "");
    if (!r.ok) {
      fmt::print("  infeasible: {}\n", r.why);
      continue;
    }
    Table t({"kernel", "configuration", "workspace", "share", "time", "undivided", "speedup"},
            {false, false, true, true, true, true, true});
    for (std::size_t k = 0; k < r.kernels.size(); ++k) {
      const auto& kc = r.kernels[k];
      std::string ut = "-", sp = "-";
      if (u && u->ok) {
        ut = format_ns(u->kernels[k].time_ns);
        sp = fmt::format("{:.2f}x", static_cast<double>(u->kernels[k].time_ns) /
                                        static_cast<double>(std::max<std::int64_t>(kc.time_ns, 1)));
      }
      std::string share = r.total_workspace > 0 ? fmt::format("{:.1f} %", 100.0 * static_cast<double>(kc.workspace) /
                                                                              static_cast<double>(r.total_workspace))
                                                : "-";
      t.add({kc.label, config_text(kc.config), format_bytes(kc.workspace), share, format_ns(kc.time_ns), ut, sp});
    }
    fmt::print("{}total workspace {} (largest {}), total time {}\n", t.str(), format_bytes(r.total_workspace),
               format_bytes(r.max_workspace), format_ns(r.total_ns));
  }
  return 0;
}

// compile -v: every candidate the search simulated, with its round time or why it failed.
void print_search_log(std::FILE* to, const std::vector<CandidateOutcome>& candidates) {
  for (const auto& c : candidates)
    for (const auto& cand : c.search)
      fmt::print(to, "  search        sub-batch {}: {:<52} {}\n", c.sub_batch, cand.name,
                 cand.round_ns ? format_ns(cand.round_ns) + " per round" : "no: " + cand.why);
}

}  // namespace

int run_compile(const CompileOptions& o) {
  // The plan's options, parsed once (a wrong one costs no loading); the stages read only these.
  const PlanOptions options =
      parse_plan_options({o.strategy, o.sub_batch, o.workspace.empty() ? "dynamic" : o.workspace.front(),
                          o.micro_batches, o.solver, o.time_limit, o.offload, o.loss_scale, o.dump_after});
  const std::string net_path = resolve_network_path(o.network);
  const Network net = load_network(net_path);
  const Profile prof = load_profile(o.profile);
  const Precision precision = parse_precision_option(o.precision);
  if (precision != prof.precision)
    throw UserError(o.profile, "precision",
                    fmt::format("the profile is at {}, --precision asks for {}{}: a plan needs a profile of its own "
                                "precision (ucplan profile ... --precision {})",
                                precision_name(prof.precision), precision_name(precision),
                                precision == Precision::FP32 ? " (the default)" : "", precision_name(precision)));
  if (o.conv_only) {
    // What shapes a plan and not the configurations alone is refused, not ignored.
    const std::pair<bool, const char*> plan_only[] = {{!o.output.empty(), "-o"},
                                                      {!o.trace.empty(), "--trace"},
                                                      {!o.budget.empty(), "--budget"},
                                                      {o.reserve != "auto", "--reserve"},
                                                      {o.strategy != "ucplan", "--strategy"},
                                                      {o.sub_batch != "auto", "--sub-batch"},
                                                      {o.solver != "default", "--solver"},
                                                      {!o.time_limit.empty(), "--time-limit"},
                                                      {o.offload != "allowed", "--offload"},
                                                      {!o.dump_after.empty(), "--dump-after"},
                                                      {!o.loss_scale.empty(), "--loss-scale"},
                                                      {o.quiet, "-q"},
                                                      {o.verbose, "-v"}};
    for (const auto& [given, name] : plan_only)
      if (given)
        throw UserError("", name,
                        "--conv-only makes no plan: it prints a report of the convolutions' configurations (with "
                        "--json, as JSON), which this option does not change");
    return conv_only_report(o, options.micro_batches, net, net_path, prof);
  }
  if (!o.pareto.empty()) throw UserError("", "--pareto", "only with --conv-only");
  if (o.json) throw UserError("", "--json", "only with --conv-only (a plan is JSON already: -o PLAN.json)");
  if (precision == Precision::FP32 && !o.loss_scale.empty() && o.loss_scale != "none")
    throw UserError("", "--loss-scale",
                    "FP32 plans run without loss scaling, and do not record one: scale the loss at --precision "
                    "fp16, pseudo-fp16, bf16 or tf32");
  if (o.workspace.size() > 1)
    throw UserError("", "--workspace", "give one setting for a plan (several only with --conv-only)");
  if (o.budget.empty())
    throw UserError("", "--budget", "required: the device memory budget, e.g. --budget 12GiB (or 50%, or device)");
  // Spaces and tabs around a value are skipped, as units.h's numbers skip them.
  auto trimmed = [](const std::string& s) {
    const std::size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
    return a == std::string::npos ? std::string_view() : std::string_view(s).substr(a, b - a + 1);
  };
  const std::string_view budget_text = trimmed(o.budget);
  if (!budget_text.empty() && budget_text.front() == '-')
    throw UserError("", "--budget",
                    budget_text.find('%') != std::string_view::npos
                        ? fmt::format("a share of the liveness peak must be more than 0 % and at most 1000000 %, got "
                                      "\"{}\"",
                                      o.budget)
                        : fmt::format("a budget must be more than 0 bytes, got \"{}\"", o.budget));
  // The budget is the device memory the user gives: what the CUDA context and libraries take
  // (measured by the profiler) is not the arena's.
  std::int64_t reserve = 0;
  std::string reserve_source = "--reserve";
  if (trimmed(o.reserve) == "auto") {
    auto it = prof.device.versions.find("device_overhead_bytes");
    if (it != prof.device.versions.end()) {
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
      if (ec != std::errc() || end != it->second.data() + it->second.size() || v < 0)
        throw UserError(o.profile, "device.versions.device_overhead_bytes",
                        fmt::format("\"{}\" is not a byte count", it->second));
      reserve = v;
      reserve_source = "measured by the profile";
    }
  } else {
    std::string why;
    auto r = parse_bytes(o.reserve, &why);
    if (!r || *r < 0) throw UserError("", "--reserve", size_error(o.reserve, why, "512MiB, or auto"));
    reserve = *r;
  }
  std::optional<std::int64_t> budget;
  std::string budget_share;  // for --budget N% or device: what it came to, for the report
  const std::optional<NumberAndUnit> budget_number = split_number(o.budget);
  if (budget_text.find('%') != std::string_view::npos) {
    // A share of the network's liveness peak at this batch (`ucplan inspect`), the scale of the
    // issue's and the benchmarks' budgets: the plan's arena gets that share, the reserve comes on top.
    if (!budget_number || budget_number->unit != "%")
      throw UserError("", "--budget",
                      fmt::format("\"{}\" is not a share of the liveness peak (e.g. 50%) nor a size with a unit "
                                  "(e.g. 12GiB)",
                                  o.budget));
    const auto share = static_cast<double>(budget_number->value);
    if (!(share > 0) || share > 1e6)
      throw UserError(
          "", "--budget",
          fmt::format("a share of the liveness peak must be more than 0 % and at most 1000000 %, got \"{}\"",
                      o.budget));
    const Graph g = build_graph(net, net_path, precision);
    const std::int64_t batch = o.batch > 0 ? o.batch : prof.batch;
    const std::int64_t peak = compute_liveness(build_tasks(g, construct_route(g)), batch).liveness_peak;
    const double bytes = std::floor(static_cast<double>(peak) * share / 100.0);
    if (bytes >= 0x1p62)  // past what a plan's sizes count (and a double converts exactly)
      throw UserError(
          "", "--budget",
          fmt::format("{} of the liveness peak ({}) is more memory than any device has", o.budget, format_bytes(peak)));
    const auto arena = static_cast<std::int64_t>(bytes);
    if (arena <= 0)
      throw UserError("", "--budget",
                      fmt::format("{} of the liveness peak ({}) is 0 bytes", o.budget, format_bytes(peak)));
    if (reserve > std::numeric_limits<std::int64_t>::max() - arena)
      throw UserError("", "--reserve",
                      fmt::format("{} on top of {} of the liveness peak is more memory than any device has",
                                  format_bytes(reserve), o.budget));
    budget = arena + reserve;
    budget_share = fmt::format("{:g} % of the liveness peak {} at batch {}: {} for the plan", share, format_bytes(peak),
                               batch, format_bytes(arena));
  } else if (budget_text == "device") {
    // The whole memory of the profile's device (a measured CUDA profile's total, a model's
    // datasheet), the reserve coming out of it as from any budget.
    if (prof.device.memory_bytes <= 0)
      throw UserError(o.profile, "device.memory_bytes",
                      "the profile does not say how much memory its device has: give --budget a size (e.g. 12GiB)");
    budget = prof.device.memory_bytes;
    budget_share = fmt::format("the memory of the profile's device, {}: {}", prof.device.name, format_bytes(*budget));
  } else {
    std::string why;
    budget = parse_bytes(o.budget, &why);
    if (!budget && budget_number && budget_number->unit.empty() && budget_number->value == 0)
      throw UserError("", "--budget", fmt::format("a budget must be more than 0 bytes, got \"{}\"", o.budget));
    if (!budget && budget_number && budget_number->unit.empty())
      throw UserError("", "--budget",
                      fmt::format("\"{}\" has no unit: write {}GiB, {}MiB, or {}% of the liveness peak", o.budget,
                                  budget_number->number, budget_number->number, budget_number->number));
    if (!budget)
      throw UserError("", "--budget",
                      why.empty() ? fmt::format("\"{}\" is not a size with a unit (e.g. 12GiB, 512MiB), a share "
                                                "of the liveness peak (e.g. 50%) nor device",
                                                o.budget)
                                  : fmt::format("\"{}\" is {}", o.budget, why));
    if (*budget <= 0)
      throw UserError("", "--budget", fmt::format("a budget must be more than 0 bytes, got \"{}\"", o.budget));
  }
  if (reserve >= *budget)
    throw UserError(
        "", reserve_source == "--reserve" ? "--reserve" : "--budget",
        fmt::format("{} leaves nothing for the plan: {} of it are reserved for the CUDA context, cuDNN and "
                    "cuBLAS ({})",
                    format_bytes(*budget), format_bytes(reserve),
                    reserve_source == "--reserve" ? "as --reserve asks" : reserve_source + "; --reserve changes it"));
  if (o.output.empty() && o.dump_after.empty() && o.trace.empty())
    throw UserError("", "-o", "give -o PLAN.json (or --dump-after STAGE / --trace FILE to only look)");
  // Every output is checked before the work starts, so that a bad one costs no compile and
  // leaves no other output behind.
  check_outputs({{"-o", o.output}, {"--trace", o.trace}},
                {{"the network", net_path}, {"the profile (--profile)", o.profile}});

  CompileInput in;
  in.network = net;
  in.network_file = net_path;
  in.profile = prof;
  in.profile_path = o.profile;
  in.profile_in_plan = path_from_output(o.profile, o.output);
  in.profile_sha256 = sha256_hex(read_file_bytes(o.profile));
  in.batch = o.batch;
  in.budget_bytes = *budget - reserve;  // the plan's budget: the arena's
  in.precision = precision;
  in.options = options;
  in.stop_after_dump = !o.dump_after.empty() && o.output.empty() && o.trace.empty();
  auto start = std::chrono::steady_clock::now();
  // When no plan is found: with -v, why each candidate failed, before the error itself; without,
  // the error says that -v would list them.
  std::vector<CandidateOutcome> tried_in_vain;
  in.failed_candidates = &tried_in_vain;
  ProgressLine line;  // on a terminal: what the compile is doing, and for how long
  if (line.enabled()) in.progress = [&line](const std::string& what) { line.show(what); };
  auto plan_or_explain = [&](const CompileInput& at) {
    try {
      return make_plan(at);
    } catch (const UserError& e) {
      line.clear();  // before -v's log of candidates and the error line
      const bool searched = std::any_of(tried_in_vain.begin(), tried_in_vain.end(),
                                        [](const CandidateOutcome& c) { return !c.search.empty(); });
      if (o.verbose) print_search_log(stderr, tried_in_vain);
      if (!searched || o.verbose) throw;
      throw UserError(e.file(), e.where(), e.reason() + "; -v lists every candidate tried and why it failed");
    }
  };
  CompileResult r = plan_or_explain(in);
  // Pinned host memory costs device memory too: the GPU maps every page of it. Measured on an H100
  // (driver 580), the runtime's overhead beside the arena grew 1.2-1.8 MB per GB of the plan's host
  // buffers (resnet50 b128: 132.2 MB with 77 MB of them, 138.1 MB with 3.4 GB), which put a plan
  // at 25 % of its peak 4 MB over its budget. On a measured CUDA profile the arena therefore also
  // leaves 8 bytes per 4 KiB page of host buffers (2 MiB per GiB, above what was measured); the
  // host buffers depend on the schedule, so a plan over it is made again with less.
  std::int64_t page_tables = 0;
  if (prof.device.kind == "cuda")
    for (int again = 0; again < 4; ++again) {
      std::int64_t host = 0;
      for (const auto& h : r.plan.host_buffers) host += h.size;
      page_tables = (host + 511) / 512;
      const std::int64_t over = r.plan.arena_bytes + page_tables - (*budget - reserve);
      if (over <= 0 || in.budget_bytes - over <= 0) break;
      in.budget_bytes -= over;
      // Exact mode's time limit is the whole compile's: a plan made again gets what is left of it
      // (at least a second, or the limit if shorter), not the whole limit once more; and the bounds
      // its MILPs proved at the larger budget hold at the smaller one too.
      for (const auto& c : r.candidates) {
        if (!c.milp) continue;
        in.milp_seconds += c.milp_seconds;
        if (c.milp_result.solved()) {
          std::int64_t& known = in.milp_bounds[c.sub_batch];
          known = std::max(known, c.milp_result.bound_round_ns);
        }
      }
      r = plan_or_explain(in);
    }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  line.clear();
  if (!o.dump_after.empty()) fmt::print("{}", r.dump);
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!o.output.empty()) outputs.emplace_back(o.output, plan_to_json_text(r.plan));
  if (!o.trace.empty()) outputs.emplace_back(o.trace, chrome_trace(r.plan));
  write_files_atomically(outputs);
  if (!o.quiet && o.dump_after.empty()) {
    fmt::print("{}", plan_summary(r.plan));
    if (reserve > 0)
      fmt::print(
          "  reserve       {} of the {} budget kept for the CUDA context, cuDNN and cuBLAS ({}){}: the plan's budget "
          "is {}\n",
          format_bytes(reserve), format_bytes(*budget), reserve_source,
          page_tables > 0 ? fmt::format(", and {} for the GPU's mapping of the plan's pinned host buffers",
                                        format_bytes(page_tables))
                          : "",
          format_bytes(r.plan.budget_bytes));
    if (!budget_share.empty()) fmt::print("  budget        --budget {}: {}\n", o.budget, budget_share);
    // A budget the profiled device cannot hold gives a plan it cannot run (its arena alone is over
    // the device's memory): said, not refused, since a budget may be asked of a device on purpose.
    const std::int64_t device_bytes = prof.device.memory_bytes;
    if (device_bytes > 0 && r.plan.summary.peak_bytes + reserve > device_bytes)
      fmt::print(
          "  device        the plan's arena ({}){} more than the memory of the profile's device, {}, {}: it cannot "
          "run there\n",
          format_bytes(r.plan.summary.peak_bytes),
          reserve > 0 ? fmt::format(" and the reserve ({}) are", format_bytes(reserve)) : std::string(" is"),
          prof.device.name, format_bytes(device_bytes));
    std::string tried;
    for (const auto& c : r.candidates)
      tried +=
          fmt::format("{}{}: {}", tried.empty() ? "" : "; ", c.sub_batch, c.ok ? format_ns(c.predicted_ns) : c.why);
    fmt::print("  candidates    {}\n", tried);
    for (const auto& c : r.candidates)
      for (const RematMilpResult* m : c.milps())
        if (!m->infeasible_why.empty())
          fmt::print("  exact mode    sub-batch {}: {}no MILP solved, no {}plan fits: {}\n", c.sub_batch,
                     m->offload ? "with offload, " : "", m->offload ? "" : "recompute-only ", m->infeasible_why);
        else
          fmt::print(
              "  exact mode    sub-batch {}: {}MILP of {} variables and {} rows {} in {} ({} nodes, first incumbent: "
              "{}{}){}\n",
              c.sub_batch, m->offload ? "with offload, " : "", m->variables, m->rows, remat_milp_status_name(m->status),
              format_seconds(m->seconds), m->nodes,
              m->started_from_plan ? "the default search's best plan without offload"
                                   : "recompute every input in every stage",
              m->plain_fallback ? "; CBC's full strategy crashed, plain branch and bound finished" : "",
              m->table.empty() ? std::string()
                               : fmt::format("; lower bound on a {}round {}, its own solution {}",
                                             m->offload ? "" : "recompute-only ",
                                             format_ns(m->any_plan_bound_round_ns()), format_ns(m->solution_round_ns)));
    if (o.verbose) print_search_log(stdout, r.candidates);
    // What would help: a batch-norm network is split into sub-batches only when asked; when the
    // plan loses more than 5 % and splitting would be faster, say so (statistics then change).
    double hint_seconds = 0;
    bool hint_shown = false;  // the "would help" line, which the estimates' time is for
    const double overhead =
        static_cast<double>(r.plan.summary.predicted_ns) / static_cast<double>(r.plan.summary.ideal_ns) - 1;
    if (options.sub_batch.kind == SubBatchOption::Kind::Auto &&
        std::any_of(r.plan.network.layers.begin(), r.plan.network.layers.end(),
                    [](const Layer& l) { return l.type == LayerType::BatchNorm; }) &&
        overhead > 0.05) {
      // Halving and quartering the batch, each with one search branch (quick): a compile with
      // --sub-batch N runs that branch among others, so it can only do better than the figure.
      // On very deep networks that would cost more than the compile itself (the 10^4-layer ResNet:
      // 25 s for a 9 s compile), so there is no hint there.
      constexpr std::size_t kHintLayers = 2000;
      // Half the local search's work: ResNet-152 b256 on model:k40 at 12 GiB took 0.95 s with the
      // whole and 0.78 s with half (0.78 s with a quarter too: the rest is not the search), the
      // estimates the same at 6, 8, 10, 12 and 16 GiB and ResNet-50 b128's 2 GiB one +4.1 % over
      // the ideal instead of +3.5 %.
      constexpr double kHintWork = 0.5;
      // Both estimates at once, each on its own thread (each compile's search is single-threaded
      // when quick); a sub-batch without a plan gives none.
      std::vector<std::optional<Plan>> estimates(2);
      std::vector<std::exception_ptr> failed(2);
      std::vector<std::thread> threads;
      line.show("the report: estimating the plans at half and a quarter of the batch");
      const auto hints_start = std::chrono::steady_clock::now();
      for (std::size_t k = 0; k < estimates.size(); ++k) {
        const std::int64_t n = r.plan.batch >> (k + 1);
        if (r.plan.network.layers.size() > kHintLayers || n < 1 || r.plan.batch % n != 0) continue;
        CompileInput at = in;
        at.options.sub_batch = {SubBatchOption::Kind::Size, n};
        at.options.dump_after.clear();
        at.progress = nullptr;             // the hints run on two threads at once; the line shows the compile's steps
        at.options.solver = Solver::Fast;  // a hint: one branch, not another exact solve or thorough search
        at.options.time_limit_s = 0;
        at.options.search_work = kHintWork;
        threads.emplace_back([at, &slot = estimates[k], &failure = failed[k]] {
          try {
            slot = make_plan(at).plan;
          } catch (const UserError&) {
          } catch (...) {
            failure = std::current_exception();  // a bug, not bad input: reported as the compile's own would be
          }
        });
      }
      for (auto& t : threads) t.join();
      line.clear();
      hint_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - hints_start).count();
      for (auto& f : failed)
        if (f) std::rethrow_exception(f);
      std::optional<Plan> split;
      for (auto& p : estimates)
        if (p && (!split || p->summary.predicted_ns < split->summary.predicted_ns)) split = std::move(p);
      hint_shown = split && split->summary.predicted_ns < r.plan.summary.predicted_ns;
      if (hint_shown)
        fmt::print(
            "  would help    --sub-batch {}: {} or less, in {} rounds ({} over the ideal), with batch-norm statistics "
            "per sub-batch\n",
            split->sub_batch, format_ns(split->summary.predicted_ns), split->rounds,
            format_percent(
                static_cast<double>(split->summary.predicted_ns) / static_cast<double>(split->summary.ideal_ns) - 1));
    }
    fmt::print("  compiled in   {}{}{}\n", format_seconds(seconds),
               hint_shown ? fmt::format(" (and {} for the estimates above)", format_seconds(hint_seconds)) : "",
               o.output.empty() ? "" : ", plan written to " + o.output);
  }
  return 0;
}

}  // namespace ucplan
