// Plain-text tables for the CLI's reports: columns padded to their widest cell, numbers
// right-aligned.
#pragma once

#include <string>
#include <vector>

namespace ucplan {

class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> right_aligned = {});
  void add(std::vector<std::string> row);  // a cell over 200 bytes is cut, ending in "..."
  std::string str() const;
  std::size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

std::string format_flops(double flops);  // 1.2e9 -> "1.20 GFLOP"
// `text` in at most `width` bytes: longer, it is cut at a character's start and ends in "...".
std::string cut_text(const std::string& text, std::size_t width);

}  // namespace ucplan

namespace ucplan {

struct Plan;
// The headline numbers of a plan: predicted vs ideal time, peak vs budget vs bound, bytes moved,
// recomputation, sub-batch and workspace policy. Says whether times are modelled or measured.
std::string plan_summary(const Plan& p);
// Per layer, what the plan does with it (explain): configurations, offload, prefetch, recompute.
std::string plan_decisions(const Plan& p);
// "fft x32, fft x32, ..." compressed to "fft x32 (x8)".
struct MicroStep;
std::string config_text(const std::vector<MicroStep>& config);

}  // namespace ucplan
