// JSON form of a network, for the model library's own readers and writers (profile and plan
// embed the network). Includes nlohmann/json: keep it out of widely included headers.
#pragma once

#include <string>

#include "json_util.h"
#include "network.h"

namespace ucplan {

OrderedJson network_to_json(const Network& net);
// `at` is the reader for the network object (the whole file, or `plan.network`).
Network network_from_json(const JsonReader& at);

}  // namespace ucplan
