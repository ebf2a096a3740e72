// The element types of activations and their gradients on the device (planner/model/precision.h
// storage): float, __nv_bfloat16 or __half, shared by the CUDA kernels (small_kernels.cu,
// modern_kernels.cu) and their host mirrors (namespace host in small_kernels.h, modern_kernels.h).
// A kernel templated on T loads with to_float (exact), computes in float or double as its FP32
// instantiation does, and stores with from_float<T> (round to nearest even), so for a kernel that
// never reads back what it stored, the 16-bit instantiation gives the bits of widen -> FP32 kernel
// -> narrow, the CPU backend's emulation (executor/cpu_ops.h run_emulated). At float both are the
// identity: the FP32 instantiation performs exactly the FP32 kernel's operations.
// On the device the conversions are CUDA's (__bfloat162float, __float2bfloat16_rn, __half2float,
// __float2half_rn); on the host (the mirrors, the tests) executor/cpu/half.h's, which the GPU
// check (profiler/cuda/gpu_check.cpp) compares with CUDA's bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "executor/cpu/half.h"

#if defined(__CUDACC__)
#define UCPLAN_HOST_DEVICE __host__ __device__
#else
#define UCPLAN_HOST_DEVICE
#endif

namespace ucplan::cuda {

// Element type of the data a Context's ops read and write (kernels_cuda.h states the contract).
enum class DataType { Float, Half, BFloat16 };

inline std::size_t element_bytes(DataType t) { return t == DataType::Float ? 4 : 2; }

UCPLAN_HOST_DEVICE inline float to_float(float v) { return v; }
UCPLAN_HOST_DEVICE inline float to_float(__nv_bfloat16 v) {
#if defined(__CUDA_ARCH__)
  return __bfloat162float(v);
#else
  return cpu::bf16_to_float(__bfloat16_as_ushort(v));
#endif
}
UCPLAN_HOST_DEVICE inline float to_float(__half v) {
#if defined(__CUDA_ARCH__)
  return __half2float(v);
#else
  return cpu::fp16_to_float(__half_as_ushort(v));
#endif
}

template <typename T>
UCPLAN_HOST_DEVICE T from_float(float v);
template <>
UCPLAN_HOST_DEVICE inline float from_float<float>(float v) {
  return v;
}
template <>
UCPLAN_HOST_DEVICE inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
#if defined(__CUDA_ARCH__)
  return __float2bfloat16_rn(v);
#else
  return __ushort_as_bfloat16(cpu::float_to_bf16(v));
#endif
}
template <>
UCPLAN_HOST_DEVICE inline __half from_float<__half>(float v) {
#if defined(__CUDA_ARCH__)
  return __float2half_rn(v);
#else
  return __ushort_as_half(cpu::float_to_fp16(v));
#endif
}

// Calls f(std::type_identity<T>{}) with the element type of t: how a launcher picks the
// instantiation of its kernel.
template <typename F>
decltype(auto) with_element_type(DataType t, F&& f) {
  switch (t) {
    case DataType::Half:
      return f(std::type_identity<__half>{});
    case DataType::BFloat16:
      return f(std::type_identity<__nv_bfloat16>{});
    case DataType::Float:
      break;
  }
  return f(std::type_identity<float>{});
}

}  // namespace ucplan::cuda
