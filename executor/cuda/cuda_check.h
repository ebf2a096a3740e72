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
  int code() const { return code_; }                        // the library's status value
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

// Thrown for conditions found by ucplan itself (e.g. a dimension beyond cuDNN's 32-bit limits).
[[noreturn]] void throw_error(const std::string& what, CudaError::Kind kind = CudaError::Kind::Other);

}  // namespace ucplan::cuda

#define UCPLAN_CUDA(call) ::ucplan::cuda::check_status((call), #call, __FILE__, __LINE__)

namespace ucplan::cuda {

// Whether a CUDA device can be used; never aborts or throws. On false, *why (if not null) says
// why, e.g. "cudaGetDeviceCount: cudaErrorInsufficientDriver (...)" or "no CUDA device found".
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
  std::string name_;
  std::int64_t memory_bytes_ = 0;
  int sm_count_ = 0, clock_khz_ = 0, major_ = 0, minor_ = 0, async_engines_ = 0;
};

class Stream {
 public:
  Stream();  // non-blocking with respect to the legacy default stream
  ~Stream();
  Stream(Stream&& o) noexcept : s_(o.s_) { o.s_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void synchronize() const;
  void wait(cudaEvent_t e) const;  // later work on this stream waits for e

 private:
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = true);
  ~Event();
  Event(Event&& o) noexcept : e_(o.e_) { o.e_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) const;
  void synchronize() const;
  // Seconds from `start` to `end`, both recorded with timing and completed (synchronizes end).
  static double seconds_between(const Event& start, const Event& end);

 private:
  cudaEvent_t e_ = nullptr;
};

class CudnnHandle {
 public:
  CudnnHandle();
  ~CudnnHandle();
  CudnnHandle(CudnnHandle&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  CudnnHandle& operator=(CudnnHandle&& o) noexcept;
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  cudnnHandle_t get() const { return h_; }
  void set_stream(cudaStream_t s) const;

 private:
  cudnnHandle_t h_ = nullptr;
};

class CublasHandle {
 public:
  CublasHandle();
  ~CublasHandle();
  CublasHandle(CublasHandle&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  CublasHandle& operator=(CublasHandle&& o) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  cublasHandle_t get() const { return h_; }
  void set_stream(cudaStream_t s) const;

 private:
  cublasHandle_t h_ = nullptr;
};

// cudaMalloc'd memory; size 0 holds no allocation (get() is null). A failed allocation throws a
// CudaError whose out_of_memory() is true (the runtime's error state is cleared first).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }
  std::size_t bytes() const { return bytes_; }
  void reset();

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

// Page-locked host memory (cudaHostAlloc), so copies can be asynchronous and run at full speed.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(std::size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(PinnedBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr; o.bytes_ = 0; }
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  void* get() const { return p_; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }
  std::size_t bytes() const { return bytes_; }
  void reset();

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace ucplan::cuda
