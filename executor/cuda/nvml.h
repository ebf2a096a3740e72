// Facts about an NVIDIA GPU from NVML, for the metadata of measured profiles and the validation
// report: the driver's own version (not the CUDA version it supports), the GPU's UUID, its clocks
// and their limits, power limit and draw, temperature, ECC and MIG modes, and the device memory
// in use. libnvidia-ml.so.1 comes with the driver, not the toolkit, so it is loaded with dlopen
// at run time: programs link and run without it, and say why the facts are missing.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ucplan::cuda {

struct NvmlFacts {
  bool available = false;
  std::string why;  // when not available
  // driver_version, gpu_uuid, sm_clock_mhz, sm_clock_max_mhz, mem_clock_mhz, power_limit_w,
  // power_draw_w, temperature_c, ecc (on|off), mig (on|off), clock_event_reasons (hex); "n/a"
  // where the GPU does not report one.
  std::map<std::string, std::string> values;
  std::int64_t memory_used_bytes = -1;  // by every process on the GPU; -1 unknown
  std::int64_t memory_total_bytes = -1;
};

// The GPU at this PCI bus id ("0000:3B:00.0", cudaDeviceGetPCIBusId's form). Never throws.
NvmlFacts nvml_facts(const std::string& pci_bus_id, const char* library = "libnvidia-ml.so.1");

}  // namespace ucplan::cuda
