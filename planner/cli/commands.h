// The `ucplan` commands, each a function of a plain options struct (CLI11 stays in main.cpp,
// which keeps the heavy header in one translation unit). Each returns the exit code; user
// errors are thrown as UserError and turned into exit code 2 by main().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/model/precision.h"

namespace ucplan {

struct NetworksOptions {
  bool json = false;
};
int run_networks(const NetworksOptions& o);

// --precision: a Precision, or a UserError naming the option.
Precision parse_precision_option(const std::string& text);

struct InspectOptions {
  std::string network;
  std::int64_t batch = 1;
  bool json = false;
  std::string csv_steps;  // file for per-step live bytes, "" for none
  std::string precision = "fp32";
};
int run_inspect(const InspectOptions& o);

struct CompileOptions {
  std::string network;
  std::string profile;
  std::string budget;            // "12GiB"
  std::string reserve = "auto";  // kept out of the budget: SIZE, or auto (a profile's device_overhead_bytes)
  std::int64_t batch = 0;        // 0: the profile's batch
  std::string strategy = "ucplan";
  std::string sub_batch = "auto";
  std::vector<std::string> workspace;  // one for a plan; several side by side with --conv-only
  std::string micro_batches = "all";
  std::string output;
  std::string trace;
  std::string dump_after;  // pass name
  bool conv_only = false;  // conv configuration report only (no memory plan)
  std::string pareto;      // kernel name: print its Pareto front
  bool quiet = false;
  bool json = false;                // --conv-only: JSON report
  bool verbose = false;             // the ucplan search's candidates
  std::string solver = "default";   // fast | default | thorough | exact
  std::string offload = "allowed";  // allowed | never
  std::string time_limit;           // exact: "60s", "2min", "" for none
  std::string precision = "fp32";   // must be the profile's
  std::string loss_scale;           // "" for the precision's default
};
int run_compile(const CompileOptions& o);

struct CheckOptions {
  std::vector<std::string> plans;
  bool recompile = false;
};
int run_check(const CheckOptions& o);

struct ExplainOptions {
  std::string plan;
  std::string trace;
  std::string svg;
  bool json = false;
};
int run_explain(const ExplainOptions& o);

struct FrontierOptions {
  std::string network;
  std::string profile;
  std::int64_t batch = 0;  // 0: the profile's batch
  std::string strategy = "ucplan";
  std::string sub_batch = "auto";
  std::string solver = "default";  // fast | default | thorough (exact: refused, one MILP per point)
  int points = 12;
  bool json = false;
  std::string svg;
};
int run_frontier(const FrontierOptions& o);

struct CalibrateOptions {
  std::string profile;              // a measured profile
  std::vector<std::string> traces;  // `ucplan run --trace` of plans made from it
  std::string output;
  std::string fit = "all";  // all (what the traces can refit) | copies | launch
};
int run_calibrate(const CalibrateOptions& o);

}  // namespace ucplan
