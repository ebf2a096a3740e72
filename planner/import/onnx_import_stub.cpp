// Built when CMake did not find libonnx-dev: `ucplan import` explains how to get it.
#include "onnx_import.h"

#include "planner/model/errors.h"

namespace ucplan {

namespace {
[[noreturn]] void unavailable(const std::string& file) {
  throw UserError(file, "", "this ucplan was built without ONNX support (install libonnx-dev and reconfigure: scripts/setup.sh does both)");
}
}  // namespace

Network import_onnx_file(const std::string& path, const ImportOptions&) { unavailable(path); }
Network import_onnx_bytes(const std::string&, const std::string& file_for_errors, const ImportOptions&) { unavailable(file_for_errors); }
bool onnx_import_available() { return false; }

}  // namespace ucplan
