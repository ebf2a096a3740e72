// Host-side parts of the CUDA backend that a machine without a GPU can test: what the checks and
// the backends say when no device can be used, and why.
#include <doctest/doctest.h>

#include "executor/cuda/cuda_check.h"

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
  if (p.status == DeviceStatus::Available) return;  // a GPU machine: nothing to test here
  CHECK(p.why.rfind(cuda::device_status_name(p.status), 0) == 0);  // the reason starts with the class
  CHECK(cuda::check_program_device_gate("test", false) == (p.status == DeviceStatus::DriverTooOld ? 4 : p.status == DeviceStatus::Error ? 1 : 0));
  CHECK(cuda::check_program_device_gate("test", true) == (p.status == DeviceStatus::DriverTooOld ? 4 : p.status == DeviceStatus::Error ? 1 : 3));
}
