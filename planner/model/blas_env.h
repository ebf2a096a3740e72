// OpenBLAS in every ucplan program (the CPU kernels use it, and CBC links it): the threads it
// starts when it loads, and the address space they need.
#pragma once

#include <cstddef>

namespace ucplan {

// OpenBLAS 0.3.21 starts a worker thread per core when it loads, and each takes a work buffer of
// about 128 MiB at once (the main thread takes its own on its first product). Where the address
// space cannot hold one (a tight `ulimit -v`), it retries forever (OpenBLAS issue 5289): every
// program, `ucplan compile` too, hung at exit waiting for its workers, and a profile in its first
// product.
constexpr std::size_t kBlasBufferBytes = (128u << 20) + (1u << 20);  // 128 MiB and its alignment

// Called first thing in main. Under a finite address-space limit that leaves less than the
// workers' buffers and 256 MiB besides, and unless OPENBLAS_NUM_THREADS is set, the program runs
// itself again with OPENBLAS_NUM_THREADS=1 (no workers), saying so on stderr. With `core_type`
// (not null), OPENBLAS_CORETYPE is set to it where unset, in the same re-execution
// (executor/cpu/blas.h says why). A re-executed program never runs itself again.
void ensure_blas_environment(char** argv, const char* core_type);

}  // namespace ucplan
