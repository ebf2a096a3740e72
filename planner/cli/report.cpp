#include "report.h"

#include "planner/views/plan_views.h"

#include <algorithm>

#include <fmt/format.h>

namespace ucplan {

Table::Table(std::vector<std::string> header, std::vector<bool> right_aligned)
    : header_(std::move(header)), right_(std::move(right_aligned)) {
  right_.resize(header_.size(), false);
}

void Table::add(std::vector<std::string> row) {
  row.resize(header_.size());
  // Every row is padded to the widest cell: one cell of a million characters (a layer's name)
  // would make every row that wide.
  for (std::string& cell : row) cell = cut_text(cell, 200);
  rows_.push_back(std::move(row));
}

std::string cut_text(const std::string& text, std::size_t width) {
  if (text.size() <= width) return text;
  std::size_t cut = width > 3 ? width - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
  return text.substr(0, cut) + "...";
}

std::string Table::str() const {
  std::vector<std::size_t> width(header_.size(), 0);
  for (std::size_t c = 0; c < header_.size(); ++c) width[c] = header_[c].size();
  for (const auto& r : rows_)
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (std::size_t c = 0; c < r.size(); ++c) {
      std::string pad(width[c] - r[c].size(), ' ');
      bool last = c + 1 == r.size();
      if (right_[c])
        out += pad + r[c];
      else
        out += last ? r[c] : r[c] + pad;
      if (!last) out += "  ";
    }
    return out + "\n";
  };
  std::string out = line(header_);
  std::vector<std::string> rule;
  for (auto w : width) rule.push_back(std::string(w, '-'));
  out += line(rule);
  for (const auto& r : rows_) out += line(r);
  return out;
}

std::string format_flops(double f) {
  if (f >= 1e12) return fmt::format("{:.2f} TFLOP", f / 1e12);
  if (f >= 1e9) return fmt::format("{:.2f} GFLOP", f / 1e9);
  if (f >= 1e6) return fmt::format("{:.2f} MFLOP", f / 1e6);
  if (f >= 1e3) return fmt::format("{:.2f} kFLOP", f / 1e3);
  return fmt::format("{:.0f} FLOP", f);
}

}  // namespace ucplan

#include <map>

#include "planner/model/plan.h"
#include "planner/model/units.h"

namespace ucplan {

std::string config_text(const std::vector<MicroStep>& config) {
  std::string out;
  std::size_t i = 0;
  while (i < config.size()) {
    std::size_t j = i;
    while (j < config.size() && config[j] == config[i]) ++j;
    if (!out.empty()) out += ", ";
    out += fmt::format("{}x{}", config[i].algo, config[i].batch);
    if (j - i > 1) out += fmt::format(" (x{})", j - i);
    i = j;
  }
  return out;
}

std::string plan_summary(const Plan& p) {
  const PlanSummary& s = p.summary;
  std::string out;
  out += fmt::format("{}: batch {} = {} round{} of {}, budget {}, strategy {}\n", p.network.name, p.batch, p.rounds,
                     p.rounds == 1 ? "" : "s", p.sub_batch, format_bytes(p.budget_bytes), p.strategy);
  out += fmt::format("  times         predicted from {} costs ({})\n",
                     p.profile_source == "measured" ? "measured" : "MODELLED",
                     p.profile_source == "measured" ? p.device : p.profile_source);
  if (p.precision != Precision::FP32)
    out += fmt::format(
        "  precision     {}: activations and gradients {}, {} math with FP32 accumulation; loss scale {}\n",
        precision_name(p.precision), storage_name(storage_of(p.precision)), math_name(p.precision), p.loss_scale);
  double overhead =
      s.ideal_ns > 0 ? static_cast<double>(s.predicted_ns - s.ideal_ns) / static_cast<double>(s.ideal_ns) : 0;
  out += fmt::format("  iteration     {} predicted; ideal {} (unlimited memory, fastest configurations): overhead {}\n",
                     format_ns(s.predicted_ns), format_ns(s.ideal_ns), format_percent(overhead));
  // Where the overhead comes from, from the plan's own steps: predicted - ideal =
  // rounds x (recomputation + compute waiting + conv configurations slower than the fastest) +
  // the rest (smaller sub-batches, the final updates' own waits).
  if (s.predicted_ns > s.ideal_ns) {
    std::int64_t busy = 0, redo = 0;
    for (const auto& st : p.steps) {
      if (st.final || st.stream != Stream::Compute) continue;
      busy += st.end_ns - st.start_ns;
      if (st.op == StepOp::Recompute) redo += st.end_ns - st.start_ns;
    }
    const std::int64_t wait = std::max<std::int64_t>(s.round_ns - busy, 0);
    // Each conv kernel of the round at its configuration instead of the fastest one (the ideal's):
    // what the workspace the budget leaves it costs.
    std::int64_t configs = 0;
    for (const PlanKernel& k : p.kernels)
      if (k.fastest_ns > 0) configs += k.time_ns - k.fastest_ns;
    const std::int64_t rest = s.predicted_ns - s.ideal_ns - p.rounds * (redo + wait + configs);
    const auto share = [&](std::int64_t ns) {
      return fmt::format("{} ({})", format_ns(ns),
                         format_percent(static_cast<double>(ns) / static_cast<double>(s.ideal_ns)));
    };
    out += fmt::format(
        "  overhead      from recomputation {}, compute waiting for copies or memory {}, conv configurations with "
        "less workspace than the fastest {}, sub-batch rounds and updates {}; `ucplan frontier` shows what more "
        "memory would buy\n",
        share(p.rounds * redo), share(p.rounds * wait), share(p.rounds * configs), share(rest));
  }
  out += fmt::format("  memory        peak {} of the {} budget; lower bound {} (moDNN Eq. 2)\n",
                     format_bytes(s.peak_bytes), format_bytes(p.budget_bytes), format_bytes(s.lower_bound_bytes));
  // The trace and the SVG draw bytes in use; the peak above is the arena, which also holds the
  // gaps between buffers: say so, or the two numbers seem to disagree.
  const std::int64_t in_use = max_bytes_in_use(p);
  if (in_use < s.peak_bytes)
    out += fmt::format(
        "                at most {} in use at once (the trace's and the SVG's peak); the other {} of the arena "
        "are gaps between buffers (fragmentation)\n",
        format_bytes(in_use), format_bytes(s.peak_bytes - in_use));
  // At a budget with room, this wait is all the overhead: say what it is, or that the plan carries
  // the batch's input across rounds (plan.h) so that the first layer waits for nothing.
  const std::int64_t input_wait_ns = first_layer_wait_ns(p);
  const auto carried = std::find_if(p.buffers.begin(), p.buffers.end(), [](const PlanBuffer& b) { return b.carried; });
  std::string input_wait;
  if (input_wait_ns > 0)
    input_wait = fmt::format("; the first layer waits {} for them{}", format_ns(input_wait_ns),
                             p.rounds > 1 ? " over the rounds" : "");
  else if (carried != p.buffers.end())
    input_wait = fmt::format(
        "; {} carried across rounds: {} held throughout, the next {} copied in while the "
        "round computes",
        carried->tensor, format_bytes(carried->size), p.rounds > 1 ? "round's slice" : "batch");
  out += fmt::format("  transfers     offload {}, prefetch {} (of which inputs {}{}) per iteration\n",
                     format_bytes(s.offload_bytes), format_bytes(s.prefetch_bytes), format_bytes(s.input_bytes),
                     input_wait);
  out += fmt::format("  recompute     {} step{} per round, {} per iteration\n", s.recompute_steps,
                     s.recompute_steps == 1 ? "" : "s", format_ns(s.recompute_ns));
  out += fmt::format("  sub-batch     {} (moDNN Eq. 3 suggests {}){}\n", p.sub_batch, p.modnn_sub_batch,
                     p.sub_batch_changes_statistics ? "; batch-norm statistics are per sub-batch" : "");
  out += fmt::format("  workspace     {}; largest {}\n", p.workspace_policy, format_bytes(s.workspace_peak_bytes));
  for (const auto& n : p.notes) out += "  note          " + n + "\n";
  return out;
}

std::string plan_decisions(const Plan& p) {
  struct Row {
    std::string offload, prefetch, recompute, forward, backward;
    std::int64_t offload_bytes = 0;
    int offloads = 0, prefetches = 0, recomputes = 0;
  };
  std::map<std::string, Row> rows;
  std::map<std::string, std::int64_t> buffer_size;
  for (const auto& b : p.buffers) buffer_size[b.tensor] = std::max(buffer_size[b.tensor], b.size);
  auto layer_of = [](const std::string& tensor) {
    auto c = tensor.find(':');
    return c == std::string::npos ? tensor : tensor.substr(c + 1);
  };
  for (const auto& s : p.steps) {
    if (s.op == StepOp::Offload) {
      Row& r = rows[layer_of(s.tensor)];
      r.offloads++;
      r.offload += (r.offload.empty() ? "" : " ") + s.tensor.substr(0, s.tensor.find(':'));
    } else if (s.op == StepOp::Prefetch) {
      rows[layer_of(s.tensor)].prefetches++;
    } else if (s.op == StepOp::Recompute) {
      rows[s.layer].recomputes++;
    }
  }
  for (const auto& k : p.kernels) {
    Row& r = rows[k.layer];
    std::string text = fmt::format("{} {} ({})",
                                   k.op == StepOp::Forward        ? ""
                                   : k.op == StepOp::BackwardData ? "data:"
                                                                  : "filter:",
                                   config_text(k.config), format_bytes(k.workspace_bytes));
    if (k.op == StepOp::Forward)
      r.forward = config_text(k.config) + " (" + format_bytes(k.workspace_bytes) + ")";
    else
      r.backward += (r.backward.empty() ? "" : "; ") + text;
  }
  Table t({"layer", "type", "offloaded", "prefetches", "recomputed", "forward config (workspace)", "backward configs"});
  for (const auto& l : p.network.layers) {
    Row& r = rows[l.name];
    t.add({l.name, layer_type_name(l.type), r.offload.empty() ? "-" : r.offload,
           r.prefetches ? std::to_string(r.prefetches) : "-", r.recomputes ? fmt::format("{}x", r.recomputes) : "-",
           r.forward.empty() ? "-" : r.forward, r.backward.empty() ? "-" : r.backward});
  }
  return t.str();
}

}  // namespace ucplan
