// ONNX import (issue 16): an ONNX ModelProto's graph -> a ucplan Network. Only the graph's
// structure and shapes are read, never weights: shapes come from the graph's inputs, the
// initializers' dims (an initializer whose data is stripped or stored externally still has its
// dims), value_info and the ops' attributes (never ONNX's shape inference, which crashes on
// malformed graphs). Operators map to the layer types of network.h; Identity, constant reshapes,
// flattening before a fully connected layer and no-op pools fold away; anything else, and any
// dimension or window beyond what a network file may hold (kMaxDim), is a UserError naming the
// file, the node (index, name, op type) and what ucplan supports. The result has passed
// build_graph().
// The header keeps protobuf and ONNX out of its includers.
#pragma once

#include <string>

#include "planner/model/network.h"

namespace ucplan {

struct ImportOptions {
  std::string name;  // network name; "" takes the file's stem
};

// Reads and imports an ONNX file; a missing file, a file that is not ONNX, an unsupported node
// or a shape ucplan cannot represent is a UserError.
Network import_onnx_file(const std::string& path, const ImportOptions& options);
// The same for a serialized ModelProto already in memory (tests build models in C++).
Network import_onnx_bytes(const std::string& bytes, const std::string& file_for_errors, const ImportOptions& options);

}  // namespace ucplan
