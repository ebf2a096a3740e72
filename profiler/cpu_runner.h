// The CPU as a profiling device: times the CPU kernels (executor/cpu) on this machine. Its
// "transfers" are memcpy between host buffers, as the CPU backend's copy streams do.
#pragma once

#include <memory>

#include "runner.h"

namespace ucplan {

std::unique_ptr<Runner> make_cpu_runner();

}  // namespace ucplan
