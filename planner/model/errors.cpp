#include "errors.h"

#include <cstdio>
#include <cstdlib>

namespace ucplan {
namespace {
std::string join_message(const std::string& file, const std::string& where, const std::string& what) {
  std::string m;
  if (!file.empty()) m += file + ": ";
  if (!where.empty()) m += where + ": ";
  return m + what;
}
}  // namespace

UserError::UserError(std::string file, std::string where, std::string what)
    : std::runtime_error(join_message(file, where, what)),
      file_(std::move(file)),
      where_(std::move(where)),
      reason_(std::move(what)) {}

void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "ucplan internal error at %s:%d: check '%s' failed: %s\n", file, line, expr,
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ucplan
