#include "report.h"

#include <algorithm>

#include <fmt/format.h>

namespace ucplan {

Table::Table(std::vector<std::string> header, std::vector<bool> right_aligned)
    : header_(std::move(header)), right_(std::move(right_aligned)) {
  right_.resize(header_.size(), false);
}

void Table::add(std::vector<std::string> row) {
  row.resize(header_.size());
  rows_.push_back(std::move(row));
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
      if (right_[c]) out += pad + r[c];
      else out += last ? r[c] : r[c] + pad;
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

std::string with_thousands(long long v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  std::string out;
  int n = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (n && n % 3 == 0) out += ',';
    out += *it;
    ++n;
  }
  if (v < 0) out += '-';
  std::reverse(out.begin(), out.end());
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
