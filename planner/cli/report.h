// Plain-text tables for the CLI's reports: columns padded to their widest cell, numbers
// right-aligned.
#pragma once

#include <string>
#include <vector>

namespace ucplan {

class Table {
 public:
  explicit Table(std::vector<std::string> header, std::vector<bool> right_aligned = {});
  void add(std::vector<std::string> row);
  std::string str() const;
  std::size_t rows() const { return rows_.size(); }

 private:
  std::vector<std::string> header_;
  std::vector<bool> right_;
  std::vector<std::vector<std::string>> rows_;
};

std::string with_thousands(long long v);   // 1234567 -> "1,234,567"
std::string format_flops(double flops);     // 1.2e9 -> "1.20 GFLOP"

}  // namespace ucplan
