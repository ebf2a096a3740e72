// The CUDA backend's foundation (STYLE.md #9): one checked-call macro for CUDA runtime, cuBLAS and
// cuDNN calls, and RAII types for the device, library handles, streams, events and buffers.
//
//   UCPLAN_CUDA(cudaMalloc(&p, bytes));          // throws CudaError on failure:
//   "cudaMalloc(&p, bytes) failed at executor/cuda/x.cpp:12: cudaErrorMemoryAllocation (out of memory)"
//
// A failed call is a CudaError (std::runtime_error) that keeps the library, the numeric status
// and a classification (out of memory / not supported / other), so callers such as the profiler
// can record "out_of_memory" or "unsupported" instead of failing. Nothing in this header aborts:
// on a machine without a driver or GPU, cuda_device_available() returns false with the reason.
// Destructors never throw (a failure while releasing is ignored: the context is already broken).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

namespace ucplan::cuda {

class CudaError : public std::runtime_error {
 public:
  enum class Kind { Other, OutOfMemory, NotSupported };
  CudaError(std::string message, std::string library, int code, Kind kind)
      : std::runtime_error(std::move(message)), library_(std::move(library)), code_(code), kind_(kind) {}
  const std::string& library() const { return library_; }  // "cuda" | "cublas" | "cudnn" | "ucplan"
  int code() const { return code_; }                       // the library's status value
  Kind kind() const { return kind_; }
  bool out_of_memory() const { return kind_ == Kind::OutOfMemory; }
  bool not_supported() const { return kind_ == Kind::NotSupported; }

 private:
  std::string library_;
  int code_;
  Kind kind_;
};

// One overload per library: the macro below picks it by the status type of the call.
void check_status(cudaError_t status, const char* call, const char* file, int line);
void check_status(cublasStatus_t status, const char* call, const char* file, int line);
void check_status(cudnnStatus_t status, const char* call, const char* file, int line);

// "cudaErrorMemoryAllocation (out of memory)", "CUDNN_STATUS_NOT_SUPPORTED_SHAPE (...)", ...
std::string status_text(cudaError_t status);
std::string status_text(cublasStatus_t status);
std::string status_text(cudnnStatus_t status);
bool is_not_supported(cudnnStatus_t status);  // any status of cuDNN 9's NOT_SUPPORTED category

// Whether an error leaves the CUDA context unusable, so that every later call fails with it
// (illegal address, launch failure, misaligned address, illegal instruction, hardware stack
// error, uncorrectable ECC error, device assert, launch timeout): a profiler must stop there.
bool is_sticky(cudaError_t status);

// Thrown for conditions found by ucplan itself (e.g. a dimension beyond cuDNN's 32-bit limits).
[[noreturn]] void throw_error(const std::string& what, CudaError::Kind kind = CudaError::Kind::Other);

}  // namespace ucplan::cuda

#define UCPLAN_CUDA(call) ::ucplan::cuda::check_status((call), #call, __FILE__, __LINE__)

namespace ucplan::cuda {

// Whether a CUDA device can be used, and if not, which of the causes that need different fixes:
// no NVIDIA driver loaded (a machine without a GPU), a driver too old for this CUDA runtime
// (update the driver, or build with an older toolkit), no device visible (none installed, or
// hidden by CUDA_VISIBLE_DEVICES), or another error (permissions, a driver/module mismatch).
enum class DeviceStatus { Available, NoDriver, DriverTooOld, NoDevice, Error };
const char* device_status_name(DeviceStatus s);  // "available", "no driver", "driver too old", ...
// The classification alone, from cudaGetDeviceCount's status and count, cudaDriverGetVersion
// (0: no driver) and cudaRuntimeGetVersion (e.g. 13000).
DeviceStatus classify_device(cudaError_t count_status, int count, int driver_version, int runtime_version);
struct DeviceProbe {
  DeviceStatus status = DeviceStatus::Error;
  std::string why;  // empty when available
};
DeviceProbe probe_device();  // never throws

// The start of a GPU check program (ucplan-gpu-check, ucplan-cuda-check): returns -1 when a device
// can be used. Otherwise prints one line and returns the exit code: a driver too old is always a
// failure (4: a driver means a GPU is meant to be used); no driver or no device is "SKIP" (0),
// unless `required` (--require-device or UCPLAN_REQUIRE_GPU=1), then "FAIL" (3); another error
// fails (1).
int check_program_device_gate(const char* program, bool required);
bool device_required_by_environment();  // UCPLAN_REQUIRE_GPU set and not "0"

// Whether a CUDA device can be used; never aborts or throws. On false, *why (if not null) says
// why, e.g. "driver too old: cudaGetDeviceCount: cudaErrorInsufficientDriver (...)" or "no device: ...".
bool cuda_device_available(std::string* why = nullptr);
int device_count();  // 0 when none can be used

// Library versions as text ("13.0", "9.19.0", ...); never throws. `driver` is the CUDA version
// the installed driver supports ("none" without a driver); cudnn_cudart is the CUDA runtime
// version cuDNN was built against.
struct Versions {
  std::string cuda_runtime, driver, cudnn, cudnn_cudart, cublas;
};
Versions library_versions();

// Selects a device for the calling thread and reads its properties.
class Device {
 public:
  explicit Device(int index);
  int index() const { return index_; }
  const std::string& name() const { return name_; }
  std::int64_t memory_bytes() const { return memory_bytes_; }
  int sm_count() const { return sm_count_; }
  int clock_khz() const { return clock_khz_; }  // peak SM clock (cudaDevAttrClockRate)
  int major() const { return major_; }
  int minor() const { return minor_; }
  int async_engine_count() const { return async_engines_; }  // copy engines (2: both directions)
  const std::string& uuid() const { return uuid_; }  // "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as NVML writes it
  // FP32 FMA lanes per SM for this compute capability (0 when unknown).
  int fp32_lanes_per_sm() const;
  // Peak FP32 FLOP/s = SMs x clock x FP32 lanes per SM x 2 (an FMA is two FLOPs); 0 when unknown.
  // H100 SXM: 132 x 1.98 GHz x 128 x 2 = 66.9 TFLOP/s, the datasheet's figure.
  double peak_fp32_flops() const;
  void select() const;  // cudaSetDevice(index) again (for another thread)
  void synchronize() const;
  // Free and total device memory now.
  std::int64_t free_bytes() const;

 private:
  int index_;
  std::string name_, uuid_;
  std::int64_t memory_bytes_ = 0;
  int sm_count_ = 0, clock_khz_ = 0, major_ = 0, minor_ = 0, async_engines_ = 0;
};

// Owns one CUDA, cuDNN or cuBLAS object and releases it exactly once with Release (whose status
// is ignored: see the top of this file). Moves, never copies; a null handle owns nothing.
//
//   Owned<cudaStream_t, cudaStreamDestroy> s;
//   UCPLAN_CUDA(cudaStreamCreate(s.out()));
template <typename T, auto Release>
class Owned {
 public:
  Owned() = default;
  explicit Owned(T h) : h_(h) {}
  ~Owned() { reset(); }
  Owned(Owned&& o) noexcept : h_(std::exchange(o.h_, T{})) {}
  Owned& operator=(Owned&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, T{});
    }
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T get() const { return h_; }
  T* out() {  // for the library's Create(&handle): releases what was held first
    reset();
    return &h_;
  }
  void reset() noexcept {
    if (h_) Release(std::exchange(h_, T{}));
  }

 private:
  T h_{};
};

class Stream {
 public:
  Stream();  // non-blocking with respect to the legacy default stream
  cudaStream_t get() const { return s_.get(); }
  void synchronize() const;
  void wait(cudaEvent_t e) const;  // later work on this stream waits for e

 private:
  Owned<cudaStream_t, cudaStreamDestroy> s_;
};

class Event {
 public:
  explicit Event(bool timing = true);
  cudaEvent_t get() const { return e_.get(); }
  void record(cudaStream_t s) const;
  void synchronize() const;
  // Seconds from `start` to `end`, both recorded with timing and completed (synchronizes end).
  static double seconds_between(const Event& start, const Event& end);

 private:
  Owned<cudaEvent_t, cudaEventDestroy> e_;
};

class CudnnHandle {
 public:
  CudnnHandle();
  cudnnHandle_t get() const { return h_.get(); }
  void set_stream(cudaStream_t s) const;

 private:
  Owned<cudnnHandle_t, cudnnDestroy> h_;
};

class CublasHandle {
 public:
  CublasHandle();
  cublasHandle_t get() const { return h_.get(); }
  void set_stream(cudaStream_t s) const;

 private:
  Owned<cublasHandle_t, cublasDestroy> h_;
};

// Memory from cudaMalloc (Device) or page-locked host memory from cudaHostAlloc (Pinned, so
// copies can be asynchronous and run at full speed). Size 0 holds no allocation (get() is null).
// A failed allocation throws a CudaError whose out_of_memory() is true (the runtime's error state
// is cleared first).
enum class MemoryKind { Device, Pinned };

template <MemoryKind K>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(std::size_t bytes);
  void* get() const { return p_.get(); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_.get());
  }
  std::size_t bytes() const { return p_.get() ? bytes_ : 0; }
  void reset() { p_.reset(); }

 private:
  std::conditional_t<K == MemoryKind::Device, Owned<void*, cudaFree>, Owned<void*, cudaFreeHost>> p_;
  std::size_t bytes_ = 0;
};
using DeviceBuffer = Buffer<MemoryKind::Device>;
using PinnedBuffer = Buffer<MemoryKind::Pinned>;

}  // namespace ucplan::cuda
