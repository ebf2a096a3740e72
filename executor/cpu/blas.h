// OpenBLAS set-up. OpenBLAS 0.3.21 misdetects the virtual CPUs this runs on (the hypervisor
// hides the model) and falls back to its slowest kernels; the core type can only be chosen by
// the OPENBLAS_CORETYPE environment variable before the library initialises. So the programs
// that multiply start with ensure_blas_environment(argv, blas_core_type_for_this_cpu())
// (planner/model/blas_env.h): when the variable is unset it is set from the CPU's flags and the
// program re-executed once.
#pragma once

#include <cstddef>
#include <string>

namespace ucplan::cpu {

// The core type for OPENBLAS_CORETYPE from the CPU's flags (AVX-512 -> SkylakeX, AVX2 ->
// Haswell), or null.
const char* blas_core_type_for_this_cpu();
std::string blas_description();  // e.g. "OpenBLAS 0.3.21 (Haswell, 2 threads)"
std::string blas_version();      // e.g. "0.3.21"
int blas_threads();
// Called before a program's first product (profile on the CPU, run on the CPU or with --check):
// under a finite address-space limit, whether OpenBLAS's work buffers (`buffer_bytes` a thread,
// kBlasBufferBytes in planner/model/blas_env.h) would fit, reserved for a moment; then a product
// on every thread, so OpenBLAS holds its buffers before anything else can take the room. Returns
// why not ("" if they fit): OpenBLAS would otherwise retry forever.
std::string prepare_blas(std::size_t buffer_bytes);
// This CPU as a profile measured on it names its device: "MODEL NAME (N threads)", the model from
// /proc/cpuinfo and the threads OpenBLAS runs.
std::string cpu_device_name();
// Single-precision GEMM throughput on this machine, measured on n x n x n (median of repeats).
double measure_sgemm_gflops(int n = 1024, int repeats = 5);

}  // namespace ucplan::cpu
