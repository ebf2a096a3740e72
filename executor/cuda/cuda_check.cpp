#include "executor/cuda/cuda_check.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace ucplan::cuda {
namespace {

// __FILE__ may be absolute; messages name the file from the source tree's top folder.
std::string short_file(const char* file) {
  std::string f = file;
  for (const char* top : {"/executor/", "/profiler/", "/planner/", "/tests/"}) {
    auto at = f.rfind(top);
    if (at != std::string::npos) return f.substr(at + 1);
  }
  return f;
}

[[noreturn]] void fail(const char* library, int code, const std::string& text, CudaError::Kind kind, const char* call,
                       const char* file, int line) {
  throw CudaError(fmt::format("{} failed at {}:{}: {}", call, short_file(file), line, text), library, code, kind);
}

}  // namespace

std::string status_text(cudaError_t status) {
  return fmt::format("{} ({})", cudaGetErrorName(status), cudaGetErrorString(status));
}

std::string status_text(cublasStatus_t status) {
  return fmt::format("{} ({})", cublasGetStatusName(status), cublasGetStatusString(status));
}

std::string status_text(cudnnStatus_t status) {
  // cudnnGetErrorString gives the enum's name; cuDNN 9 keeps a more specific message per thread.
  std::string text = cudnnGetErrorString(status);
  char last[512] = {0};
  cudnnGetLastErrorString(last, sizeof(last));
  if (last[0] != '\0') text += fmt::format(" ({})", last);
  return text;
}

bool is_not_supported(cudnnStatus_t status) {
  if (CUDNN_STATUS_CATEGORY(static_cast<int>(status)) != CUDNN_STATUS_NOT_SUPPORTED) return false;
  // These say the installation is broken (driver, runtime, architecture, missing sub-library),
  // not that an algorithm cannot handle the shape: reporting them as "unsupported" would hide it.
  switch (status) {
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      return false;
    default:
      return true;
  }
}

bool is_sticky(cudaError_t status) {
  switch (status) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorECCUncorrectable:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
    case cudaErrorDevicesUnavailable:
      return true;
    default:
      return false;
  }
}

void check_status(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  // Clear the runtime's last-error state for errors that do not poison the context (an
  // allocation failure, say), so the next check does not report this one again.
  cudaGetLastError();
  auto kind = status == cudaErrorMemoryAllocation ? CudaError::Kind::OutOfMemory : CudaError::Kind::Other;
  fail("cuda", static_cast<int>(status), status_text(status), kind, call, file, line);
}

void check_status(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  auto kind = status == CUBLAS_STATUS_ALLOC_FAILED    ? CudaError::Kind::OutOfMemory
              : status == CUBLAS_STATUS_NOT_SUPPORTED ? CudaError::Kind::NotSupported
                                                      : CudaError::Kind::Other;
  fail("cublas", static_cast<int>(status), status_text(status), kind, call, file, line);
}

void check_status(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  auto kind = CudaError::Kind::Other;
  if (status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
      status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED)
    kind = CudaError::Kind::OutOfMemory;
  else if (is_not_supported(status))
    kind = CudaError::Kind::NotSupported;
  fail("cudnn", static_cast<int>(status), status_text(status), kind, call, file, line);
}

void throw_error(const std::string& what, CudaError::Kind kind) { throw CudaError(what, "ucplan", 0, kind); }

namespace {
std::string cuda_version_text(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }
}  // namespace

const char* device_status_name(DeviceStatus s) {
  switch (s) {
    case DeviceStatus::Available:
      return "available";
    case DeviceStatus::NoDriver:
      return "no driver";
    case DeviceStatus::DriverTooOld:
      return "driver too old";
    case DeviceStatus::NoDevice:
      return "no device";
    case DeviceStatus::Error:
      return "error";
  }
  return "error";
}

DeviceStatus classify_device(cudaError_t count_status, int count, int driver_version, int runtime_version) {
  if (count_status == cudaSuccess) return count > 0 ? DeviceStatus::Available : DeviceStatus::NoDevice;
  if (count_status == cudaErrorNoDevice) return DeviceStatus::NoDevice;
  // The runtime answers InsufficientDriver both without any driver and with one too old for it.
  if (count_status == cudaErrorInsufficientDriver)
    return driver_version <= 0 ? DeviceStatus::NoDriver : DeviceStatus::DriverTooOld;
  if (count_status == cudaErrorCompatNotSupportedOnDevice) return DeviceStatus::DriverTooOld;
  if (driver_version > 0 && runtime_version > driver_version) return DeviceStatus::DriverTooOld;
  return DeviceStatus::Error;
}

DeviceProbe probe_device() {
  int n = 0, driver = 0, runtime = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
  cudaGetLastError();
  DeviceProbe p;
  p.status = classify_device(e, n, driver, runtime);
  const std::string versions = fmt::format(
      "{}, the runtime is CUDA {}",
      driver > 0 ? "the driver supports CUDA " + cuda_version_text(driver) : std::string("no NVIDIA driver is loaded"),
      cuda_version_text(runtime));
  switch (p.status) {
    case DeviceStatus::Available:
      break;
    case DeviceStatus::NoDevice:
      p.why = e == cudaSuccess ? "no CUDA device found (cudaGetDeviceCount returned 0)"
                               : fmt::format("cudaGetDeviceCount: {}", status_text(e));
      if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"))
        p.why += fmt::format(" (CUDA_VISIBLE_DEVICES=\"{}\")", v);
      break;
    case DeviceStatus::DriverTooOld:
      p.why = fmt::format("cudaGetDeviceCount: {}; {}: install a driver for CUDA {} or later", status_text(e), versions,
                          cuda_version_text(runtime));
      break;
    default:
      p.why = fmt::format("cudaGetDeviceCount: {}; {}", status_text(e), versions);
      break;
  }
  if (!p.why.empty()) p.why = std::string(device_status_name(p.status)) + ": " + p.why;
  return p;
}

bool device_required_by_environment() {
  const char* v = std::getenv("UCPLAN_REQUIRE_GPU");
  return v && *v && std::string(v) != "0";
}

int check_program_device_gate(const char* program, bool required) {
  const DeviceProbe p = probe_device();
  switch (p.status) {
    case DeviceStatus::Available:
      return -1;
    case DeviceStatus::DriverTooOld:
      std::printf("FAIL: %s: %s\n", program, p.why.c_str());
      return 4;
    case DeviceStatus::NoDriver:
    case DeviceStatus::NoDevice:
      if (!required) {
        std::printf("SKIP: %s: %s (--require-device or UCPLAN_REQUIRE_GPU=1 makes this a failure)\n", program,
                    p.why.c_str());
        return 0;
      }
      std::printf("FAIL: %s: a GPU is required: %s\n", program, p.why.c_str());
      return 3;
    case DeviceStatus::Error:
      break;
  }
  std::printf("FAIL: %s: %s\n", program, p.why.c_str());
  return 1;
}

bool cuda_device_available(std::string* why) {
  const DeviceProbe p = probe_device();
  if (why) *why = p.why;
  return p.status == DeviceStatus::Available;
}

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

Versions library_versions() {
  Versions v;
  int runtime = 0, driver = 0;
  v.cuda_runtime = cudaRuntimeGetVersion(&runtime) == cudaSuccess ? cuda_version_text(runtime) : "unknown";
  v.driver =
      cudaDriverGetVersion(&driver) == cudaSuccess ? (driver > 0 ? cuda_version_text(driver) : "none") : "unknown";
  cudaGetLastError();
  // cuDNN 9 encodes versions as major * 10000 + minor * 100 + patch.
  std::size_t dnn = cudnnGetVersion();
  v.cudnn = fmt::format("{}.{}.{}", dnn / 10000, (dnn % 10000) / 100, dnn % 100);
  v.cudnn_cudart = cuda_version_text(static_cast<int>(cudnnGetCudartVersion()));
  int major = 0, minor = 0, patch = 0;
  if (cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
      cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
    v.cublas = fmt::format("{}.{}.{}", major, minor, patch);
  else
    v.cublas = "unknown";
  return v;
}

// ---- Device ----

Device::Device(int index) : index_(index) {
  int n = 0;
  UCPLAN_CUDA(cudaGetDeviceCount(&n));
  if (index < 0 || index >= n)
    throw_error(fmt::format("CUDA device {} does not exist ({} device{} found)", index, n, n == 1 ? "" : "s"));
  UCPLAN_CUDA(cudaSetDevice(index));
  cudaDeviceProp p;
  std::memset(&p, 0, sizeof(p));
  UCPLAN_CUDA(cudaGetDeviceProperties(&p, index));
  name_ = p.name;
  const auto* u = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
  uuid_ = "GPU-";
  for (int i = 0; i < 16; ++i) uuid_ += fmt::format("{}{:02x}", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
  memory_bytes_ = static_cast<std::int64_t>(p.totalGlobalMem);
  UCPLAN_CUDA(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, index));
  UCPLAN_CUDA(cudaDeviceGetAttribute(&clock_khz_, cudaDevAttrClockRate, index));
  UCPLAN_CUDA(cudaDeviceGetAttribute(&major_, cudaDevAttrComputeCapabilityMajor, index));
  UCPLAN_CUDA(cudaDeviceGetAttribute(&minor_, cudaDevAttrComputeCapabilityMinor, index));
  UCPLAN_CUDA(cudaDeviceGetAttribute(&async_engines_, cudaDevAttrAsyncEngineCount, index));
}

int Device::fp32_lanes_per_sm() const {
  // FP32 units per SM, from NVIDIA's architecture whitepapers (CUDA C Programming Guide,
  // "Arithmetic Instructions" throughput table: 32-bit floating-point add/multiply/FMA per SM).
  switch (major_) {
    case 7:
      return 64;  // Volta, Turing
    case 8:
      return minor_ == 0 ? 64 : 128;  // A100: 64; GA10x, Orin, Ada: 128
    case 9:
      return 128;  // Hopper
    case 10:
    case 11:
    case 12:
      return 128;  // Blackwell
    default:
      return 0;
  }
}

double Device::peak_fp32_flops() const {
  return static_cast<double>(sm_count_) * clock_khz_ * 1e3 * fp32_lanes_per_sm() * 2.0;
}

void Device::select() const { UCPLAN_CUDA(cudaSetDevice(index_)); }
void Device::synchronize() const { UCPLAN_CUDA(cudaDeviceSynchronize()); }

std::int64_t Device::free_bytes() const {
  std::size_t free = 0, total = 0;
  UCPLAN_CUDA(cudaMemGetInfo(&free, &total));
  return static_cast<std::int64_t>(free);
}

// ---- Stream, Event ----

Stream::Stream() { UCPLAN_CUDA(cudaStreamCreateWithFlags(s_.out(), cudaStreamNonBlocking)); }
void Stream::synchronize() const { UCPLAN_CUDA(cudaStreamSynchronize(get())); }
void Stream::wait(cudaEvent_t e) const { UCPLAN_CUDA(cudaStreamWaitEvent(get(), e, 0)); }

Event::Event(bool timing) {
  UCPLAN_CUDA(cudaEventCreateWithFlags(e_.out(), timing ? cudaEventDefault : cudaEventDisableTiming));
}
void Event::record(cudaStream_t s) const { UCPLAN_CUDA(cudaEventRecord(get(), s)); }
void Event::synchronize() const { UCPLAN_CUDA(cudaEventSynchronize(get())); }
double Event::seconds_between(const Event& start, const Event& end) {
  end.synchronize();
  float ms = 0;
  UCPLAN_CUDA(cudaEventElapsedTime(&ms, start.get(), end.get()));
  return static_cast<double>(ms) * 1e-3;
}

// ---- library handles ----

CudnnHandle::CudnnHandle() { UCPLAN_CUDA(cudnnCreate(h_.out())); }
void CudnnHandle::set_stream(cudaStream_t s) const { UCPLAN_CUDA(cudnnSetStream(get(), s)); }

CublasHandle::CublasHandle() { UCPLAN_CUDA(cublasCreate(h_.out())); }
void CublasHandle::set_stream(cudaStream_t s) const { UCPLAN_CUDA(cublasSetStream(get(), s)); }

// ---- buffers ----

template <MemoryKind K>
Buffer<K>::Buffer(std::size_t bytes) {
  if (bytes == 0) return;
  const bool device = K == MemoryKind::Device;
  void* p = nullptr;
  cudaError_t e = device ? cudaMalloc(&p, bytes) : cudaHostAlloc(&p, bytes, cudaHostAllocDefault);
  if (e != cudaSuccess) {
    cudaGetLastError();
    auto kind = e == cudaErrorMemoryAllocation ? CudaError::Kind::OutOfMemory : CudaError::Kind::Other;
    throw CudaError(
        fmt::format("{} of {} bytes failed: {}", device ? "cudaMalloc" : "cudaHostAlloc", bytes, status_text(e)),
        "cuda", static_cast<int>(e), kind);
  }
  p_ = decltype(p_)(p);
  bytes_ = bytes;
}
template class Buffer<MemoryKind::Device>;
template class Buffer<MemoryKind::Pinned>;

}  // namespace ucplan::cuda
