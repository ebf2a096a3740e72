// SHA-256 (FIPS 180-4) of a byte string, as lowercase hex. Plans record the hashes of the
// network and profile they were made from, so `ucplan check --recompile` can tell stale inputs.
#pragma once

#include <string>
#include <string_view>

namespace ucplan {

std::string sha256_hex(std::string_view data);

}  // namespace ucplan
