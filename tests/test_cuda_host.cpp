// Host-side parts of the CUDA backend that a machine without a GPU can test: what the checks and
// the backends say when no device can be used, and why, and what they refuse before a device is
// touched.
#include <doctest/doctest.h>

#include <string>

#include "executor/backend.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/nvml.h"
#include "executor/replay.h"
#include "planner/ir/program.h"
#include "planner/model/errors.h"

using namespace ucplan;
using cuda::DeviceStatus;

TEST_CASE("device classification tells no driver, a driver too old and no device apart") {
  // The runtime says InsufficientDriver both without a driver (version 0) and with an old one.
  CHECK(cuda::classify_device(cudaErrorInsufficientDriver, 0, 0, 13000) == DeviceStatus::NoDriver);
  CHECK(cuda::classify_device(cudaErrorInsufficientDriver, 0, 12080, 13000) == DeviceStatus::DriverTooOld);
  CHECK(cuda::classify_device(cudaErrorNoDevice, 0, 13000, 13000) == DeviceStatus::NoDevice);
  CHECK(cuda::classify_device(cudaSuccess, 0, 13000, 13000) == DeviceStatus::NoDevice);
  CHECK(cuda::classify_device(cudaSuccess, 2, 13000, 13000) == DeviceStatus::Available);
  CHECK(cuda::classify_device(cudaErrorNotPermitted, 0, 13000, 13000) == DeviceStatus::Error);
  CHECK(std::string(cuda::device_status_name(DeviceStatus::DriverTooOld)) == "driver too old");
}

TEST_CASE("without a usable device the probe says why, and the gate skips or fails as asked") {
  const cuda::DeviceProbe p = cuda::probe_device();
  if (p.status == DeviceStatus::Available) return;                 // a GPU machine: nothing to test here
  CHECK(p.why.rfind(cuda::device_status_name(p.status), 0) == 0);  // the reason starts with the class
  CHECK(cuda::check_program_device_gate("test", false) == (p.status == DeviceStatus::DriverTooOld ? 4
                                                           : p.status == DeviceStatus::Error      ? 1
                                                                                                  : 0));
  CHECK(cuda::check_program_device_gate("test", true) == (p.status == DeviceStatus::DriverTooOld ? 4
                                                          : p.status == DeviceStatus::Error      ? 1
                                                                                                 : 3));
}

TEST_CASE("NVML facts come from libnvidia-ml when it loads, and say why not when it does not") {
  const cuda::NvmlFacts missing = cuda::nvml_facts("0000:3B:00.0", "libnvidia-ml-not-installed.so.1");
  CHECK_FALSE(missing.available);
  CHECK(missing.why.find("cannot load libnvidia-ml-not-installed.so.1") != std::string::npos);

  const cuda::NvmlFacts f = cuda::nvml_facts("0000:3B:00.0", UCPLAN_FAKE_NVML);
  REQUIRE(f.available);
  CHECK(f.values.at("driver_version") == "580.159.03");
  CHECK(f.values.at("gpu_uuid") == "GPU-12345678-abcd-ef01-2345-6789abcdef01");
  CHECK(f.values.at("sm_clock_mhz") == "1755");
  CHECK(f.values.at("sm_clock_max_mhz") == "1980");
  CHECK(f.values.at("mem_clock_mhz") == "2619");
  CHECK(f.values.at("power_limit_w") == "700");
  CHECK(f.values.at("power_draw_w") == "123");
  CHECK(f.values.at("temperature_c") == "41");
  CHECK(f.values.at("ecc") == "on");
  CHECK(f.values.at("mig") == "n/a");  // NOT_SUPPORTED
  CHECK(f.values.at("clock_event_reasons") == "0x1");
  CHECK(f.memory_used_bytes == 555745280);
  CHECK(f.memory_total_bytes == 85520809984);

  const cuda::NvmlFacts other = cuda::nvml_facts("0000:00:01.0", UCPLAN_FAKE_NVML);
  CHECK_FALSE(other.available);
  CHECK(other.why.find("Not Found") != std::string::npos);
}

TEST_CASE("sticky CUDA errors are told from recoverable ones") {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorMisalignedAddress, cudaErrorAssert,
                        cudaErrorECCUncorrectable, cudaErrorLaunchTimeout})
    CHECK(cuda::is_sticky(e));
  // An allocation failure or a bad argument leaves the context usable: the next measurement runs.
  for (cudaError_t e : {cudaSuccess, cudaErrorMemoryAllocation, cudaErrorInvalidValue, cudaErrorNotSupported})
    CHECK_FALSE(cuda::is_sticky(e));
}

TEST_CASE("a plan with another device's conv algorithms is refused before the CUDA backend allocates") {
  // CudaBackend::check_steps, which replay_plan calls before allocate(): the golden CPU plan
  // (CPU algorithm names) is refused naming a step, its layer and the algorithm; a plan from the
  // H100 model (cuDNN's names) passes.
  auto steps_of = [](const std::string& name) {
    const Plan plan = load_plan(std::string(UCPLAN_SOURCE_DIR) + "/plans/" + name);
    const Program program = derive_program(plan);
    return std::make_pair(program.graph, resolve_steps(plan, program));
  };
  const auto [cpu_graph, cpu_steps] = steps_of("resnet20-b64-cpu-16mib.json");
  std::string error;
  try {
    check_cuda_algorithms(cpu_graph, cpu_steps, "--device cuda:0");
  } catch (const UserError& e) {
    error = e.what();
  }
  CHECK(error.find("--device cuda:0") != std::string::npos);
  CHECK(error.find("is not a cuDNN") != std::string::npos);
  CHECK(error.find("step ") != std::string::npos);
  const auto [h100_graph, h100_steps] = steps_of("resnet20-b64-h100-bf16-16mib.json");
  CHECK_NOTHROW(check_cuda_algorithms(h100_graph, h100_steps, "--device cuda:0"));
}
