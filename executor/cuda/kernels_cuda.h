// CUDA kernels: the same ops, layouts and semantics as the CPU reference (executor/cpu/kernels.h,
// whose dims structs they take), on device pointers, enqueued on the Context's stream (no call
// synchronizes except softmax_loss_forward's optional host read and conv_find).
//   - Convolution: cuDNN's legacy API with every algorithm it names (runner.h's lower-case enum
//     suffixes); groups, dilation; micro-batches by pointer offset along N with descriptors for
//     the micro-batch size, and beta = 1 for backward-filter so micro-batches and sub-batch
//     rounds accumulate (mu-cuDNN §II). Callers zero dw/db before the first round.
//   - fc: cuBLAS sgemm (row-major data, column-major BLAS: see kernels_cuda.cpp).
//   - pooling, relu, LRN, batch norm (training, spatial), softmax: cuDNN (but the backward of
//     global average pooling and ceil-mode sizes: small kernels); the rest: small CUDA kernels
//     (small_kernels.cu), templated on the data type (16-bit storage: see DataType below).
//   - Today's layer types (sigmoid, hardsigmoid, hardswish, SiLU, clip, GELU, mul, scale, layer
//     norm over channels, channel shuffle, slice): custom CUDA kernels, none cuDNN, declared in
//     modern_kernels.h (modern_kernels.cu) with the same conventions.
// `accumulate` means beta = 1 (dx += ...) and false beta = 0 (dx = ...), as on the CPU.
// NaN: relu, max pooling and dropout pass NaN on as the CPU does (its check mode poisons freed
// buffers with NaN).
// Numerics: FP32 compute throughout (16-bit storage: see DataType below) and, by default, no TF32
// (convolutions use CUDNN_FMA_MATH, cuBLAS its default math), so results are comparable with the
// CPU within FP32 rounding. A Context made with allow_tf32 = true lets cuDNN and cuBLAS use TF32
// tensor cores (10-bit mantissa inputs).
// Determinism: the small kernels use no atomics (the same bits run to run); cuDNN's convolution
// algorithms are deterministic except those conv_algo_deterministic() reports false for
// (backward-data algo_0, backward-filter algo_0 and algo_3 use atomics, per cuDNN's enum notes);
// max pooling uses CUDNN_POOLING_MAX_DETERMINISTIC. cuDNN does not document batch-norm backward's
// determinism (gpu_check.cpp tests it run to run).
// Errors: every call is checked; failures throw CudaError (cuda_check.h). A Context is not
// thread-safe; use one per thread/stream.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "executor/cpu/kernels.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/storage_type.h"

namespace ucplan::cuda {

using cpu::BnDims;
using cpu::ConvDims;
using cpu::ConvOp;
using cpu::FcDims;
using cpu::LrnDims;
using cpu::PoolDims;

// A cuDNN convolution algorithm for one op: id is the cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t.
struct ConvAlgo {
  ConvOp op = ConvOp::Forward;
  int id = 0;
  bool operator==(const ConvAlgo&) const = default;
};
// In runner.h's order: forward implicit_gemm, implicit_precomp_gemm, gemm, direct, fft,
// fft_tiling, winograd, winograd_nonfused; backward_data algo_0, algo_1, fft, fft_tiling, winograd,
// winograd_nonfused; backward_filter algo_0, algo_1, fft, algo_3, winograd_nonfused, fft_tiling.
std::vector<ConvAlgo> conv_algorithms(ConvOp op);
const char* conv_algo_name(ConvAlgo a);  // "implicit_gemm", "algo_0", ...
bool parse_conv_algo(ConvOp op, const std::string& name, ConvAlgo* out);
bool conv_algo_deterministic(ConvAlgo a);
const char* conv_op_name(ConvOp op);  // "forward" | "backward_data" | "backward_filter"

// Output size of a convolution (the same formula as the graph and the CPU kernels).
std::int64_t conv_out_h(const ConvDims& d);
std::int64_t conv_out_w(const ConvDims& d);

// The data type of a Context (DataType, storage_type.h) is the element type of the activations
// and gradients its ops read and write (precision.h storage), behind the same float* signatures at
// every precision. In a 16-bit context they point to 16-bit elements: conv x, w, bias, y, dx, dy and
// conv dw, dbias (cuDNN requires the filter gradient in the data's type: callers accumulate it into
// their FP32 gradient); fc x, w, bias, y, dx, dy; and the x, y, dy, dx (mul's s and ds) of every
// other op here and in modern_kernels.h. FP32 at every precision: fc dw and dbias (GemmEx writes
// them in FP32), batch norm's and layer norm's gamma, beta, saved statistics and their gradients,
// scale's gamma and dgamma, the loss's prob, sgd's w and dw, and the fills. Compute is FP32 (cuDNN's
// PSEUDO_HALF / PSEUDO_BFLOAT16 configurations, cuBLAS GemmEx with CUBLAS_COMPUTE_32F, the small
// kernels' float arithmetic) and every 16-bit store rounds to nearest even once, so an op gives the
// CPU backend's emulation (executor/cpu_ops.h run_emulated): bit for bit where its FP32 kernel gives
// the CPU's bits (the small and modern kernels, storage_type.h), else within the FP32 differences
// above and one rounding. cuDNN serves relu, pooling and batch norm at 16 bits; LRN and the
// softmax's probabilities use the small kernels there.
// Handles bound to one stream, the math mode, and the descriptor cache: descriptors are made
// once per op shape (dims + micro-batch size) and reused, so replaying a plan creates none after
// its first step.
class Context {
 public:
  // Creates cuDNN and cuBLAS handles on the current device, bound to `stream`.
  // tensor_op_math (16-bit data only): CUDNN_TENSOR_OP_MATH (fp16, bf16: true-half algorithms);
  // false: CUDNN_DEFAULT_MATH (pseudo-fp16: cuDNN may also pick its FP32-compute kernels, FFT).
  explicit Context(cudaStream_t stream, bool allow_tf32 = false, DataType data = DataType::Float,
                   bool tensor_op_math = true);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cudaStream_t stream() const { return stream_; }
  void set_stream(cudaStream_t stream);  // rebinds both handles
  cudnnHandle_t cudnn() const { return cudnn_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }
  bool allow_tf32() const { return allow_tf32_; }
  DataType data_type() const { return data_; }
  bool tensor_op_math() const { return tensor_op_math_; }
  // A device scratch buffer of at least `bytes`, owned by the context (grown on demand; growing
  // synchronizes the stream first). Used for the loss value; callers may use it for anything
  // that does not outlive their next Context call.
  void* scratch(std::size_t bytes);
  std::size_t cached_descriptor_sets() const;  // for tests: how many op shapes are cached

  struct Cache;  // kernels_cuda.cpp
  Cache& cache() { return *cache_; }

 private:
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  cudaStream_t stream_;
  bool allow_tf32_;
  DataType data_ = DataType::Float;
  bool tensor_op_math_ = true;
  std::unique_ptr<Cache> cache_;
  DeviceBuffer scratch_;
};

// ---- convolution ----
// Workspace of `a` for these dims (d.n = the micro-batch). Returns false when cuDNN says the
// algorithm does not support them (any NOT_SUPPORTED status; also a dimension beyond cuDNN's
// 32-bit limits); other failures throw. Cached per (dims, algorithm).
bool conv_workspace(Context& ctx, const ConvDims& d, ConvAlgo a, std::size_t* bytes);
// One call over d.n samples. workspace_bytes must be >= conv_workspace(); an algorithm cuDNN
// rejects at run time throws a CudaError with not_supported().
void conv_forward(Context& ctx, const ConvDims& d, ConvAlgo a, const float* x, const float* w, const float* bias,
                  float* y, void* workspace, std::size_t workspace_bytes);
void conv_backward_data(Context& ctx, const ConvDims& d, ConvAlgo a, const float* dy, const float* w, float* dx,
                        bool accumulate, void* workspace, std::size_t workspace_bytes);
// Always accumulates into dw and dbias (beta = 1); dbias may be null when d.bias is false.
void conv_backward_filter(Context& ctx, const ConvDims& d, ConvAlgo a, const float* x, const float* dy, float* dw,
                          float* dbias, void* workspace, std::size_t workspace_bytes);

// mu-cuDNN's configuration: the kernel over whole.n samples as consecutive micro-batches
// [(algo, size), ...] whose sizes add up to whole.n, each a call on pointers offset along N.
struct MicroConfig {
  ConvAlgo algo;
  std::int64_t batch = 0;
};
// Largest workspace of the micro-configurations; false if any is unsupported.
bool conv_workspace_micro(Context& ctx, const ConvDims& whole, const std::vector<MicroConfig>& config,
                          std::size_t* bytes);
void conv_forward_micro(Context& ctx, const ConvDims& whole, const std::vector<MicroConfig>& config, const float* x,
                        const float* w, const float* bias, float* y, void* workspace, std::size_t workspace_bytes);
void conv_backward_data_micro(Context& ctx, const ConvDims& whole, const std::vector<MicroConfig>& config,
                              const float* dy, const float* w, float* dx, bool accumulate, void* workspace,
                              std::size_t workspace_bytes);
void conv_backward_filter_micro(Context& ctx, const ConvDims& whole, const std::vector<MicroConfig>& config,
                                const float* x, const float* dy, float* dw, float* dbias, void* workspace,
                                std::size_t workspace_bytes);

// cuDNN's own measurement of every algorithm (cudnnFindConvolution*AlgorithmEx) on scratch
// buffers it allocates, with a workspace of at most workspace_limit bytes; fastest first, only
// algorithms that ran. Synchronizes. For cross-checking the profiler's ranking on a GPU.
struct AlgoPerf {
  ConvAlgo algo;
  double seconds = 0;
  std::size_t workspace_bytes = 0;
  bool deterministic = true;
};
// Asks cuDNN with cudnnGetConvolution*AlgorithmMaxCount perf slots and keeps only results in the
// math the context asks for (no tensor-op math, i.e. no TF32, unless allow_tf32), one per
// algorithm (the fastest); determinism is cuDNN's per result.
std::vector<AlgoPerf> conv_find(Context& ctx, const ConvDims& d, ConvOp op, std::size_t workspace_limit);
// Whether cuDNN reports `a` deterministic for these dims in the context's math type, from its
// heuristics' perf results (cudnnGetConvolution*Algorithm_v7, nothing runs); nullopt when they do
// not list it.
std::optional<bool> conv_deterministic(Context& ctx, const ConvDims& d, ConvAlgo a);
// cuDNN's heuristic ranking of the op's algorithms for these dims in the context's math type
// (cudnnGetConvolution*Algorithm_v7; nothing runs), expected fastest first, then the algorithms it
// did not rank in conv_algorithms() order.
std::vector<ConvAlgo> conv_ranked(Context& ctx, const ConvDims& d, ConvOp op);

// ---- other layers (same contracts as executor/cpu/kernels.h) ----
void pool_forward(Context& ctx, const PoolDims& d, const float* x, float* y);
void pool_backward(Context& ctx, const PoolDims& d, const float* x, const float* y, const float* dy, float* dx,
                   bool accumulate);

void relu_forward(Context& ctx, std::int64_t count, const float* x, float* y);
void relu_backward(Context& ctx, std::int64_t count, const float* y, const float* dy, float* dx, bool accumulate);

// saved = [mean[c], inv_std[c]] (biased variance; cuDNN's saved inverse variance is
// 1 / sqrt(var + eps), the same quantity). No running averages are kept (training only).
void bn_forward_training(Context& ctx, const BnDims& d, const float* x, const float* gamma, const float* beta, float* y,
                         float* saved);
void bn_forward_saved(Context& ctx, const BnDims& d, const float* x, const float* gamma, const float* beta,
                      const float* saved, float* y);
// dgamma_dbeta = [dgamma[c], dbeta[c]], always accumulated.
void bn_backward(Context& ctx, const BnDims& d, const float* x, const float* gamma, const float* saved, const float* dy,
                 float* dx, float* dgamma_dbeta, bool accumulate);

// Cross-channel LRN, window [c - size/2, c + (size-1)/2] as the CPU (PyTorch): cuDNN for FP32 data
// of odd sizes up to 16 (where cuDNN's window [c - (size-1)/2, c + size/2] is the same), small
// kernels otherwise.
void lrn_forward(Context& ctx, const LrnDims& d, const float* x, float* y);
void lrn_backward(Context& ctx, const LrnDims& d, const float* x, const float* y, const float* dy, float* dx,
                  bool accumulate);

void fc_forward(Context& ctx, const FcDims& d, const float* x, const float* w, const float* bias, float* y);
void fc_backward_data(Context& ctx, const FcDims& d, const float* dy, const float* w, float* dx, bool accumulate);
void fc_backward_filter(Context& ctx, const FcDims& d, const float* x, const float* dy, float* dw, float* dbias);

// The same counter-based hash and keep rule as the CPU (cpu::dropout_keep_hash: SplitMix64's
// index-th output; kept iff (hash >> 11) * 2^-53 >= ratio), so both backends drop the same
// elements. Host copy of the device function, for tests.
std::uint64_t dropout_keep_hash(std::uint64_t seed, std::uint64_t index);
void dropout_forward(Context& ctx, std::int64_t n, std::int64_t per_sample, std::int64_t first_sample, double ratio,
                     std::uint64_t seed, const float* x, float* y, std::uint8_t* mask);
void dropout_apply(Context& ctx, std::int64_t count, double ratio, const std::uint8_t* mask, const float* x, float* y);
void dropout_backward(Context& ctx, std::int64_t count, double ratio, const std::uint8_t* mask, const float* dy,
                      float* dx, bool accumulate);

void add_forward(Context& ctx, std::int64_t count, const std::vector<const float*>& xs, float* y);
void add_backward(Context& ctx, std::int64_t count, const float* dy, float* dx, bool accumulate);

void concat_forward(Context& ctx, std::int64_t n, std::int64_t hw, const std::vector<std::int64_t>& cs,
                    const std::vector<const float*>& xs, float* y);
void concat_backward(Context& ctx, std::int64_t n, std::int64_t hw, const std::vector<std::int64_t>& cs, std::size_t i,
                     const float* dy, float* dx, bool accumulate);

// prob = softmax(x) over k classes (FP32 x: cuDNN, ACCURATE, INSTANCE; 16-bit x: the small kernel,
// in double as the CPU); *loss_device (one double on the
// device) = the summed loss of the n samples, computed from x in double as the CPU does; labels
// are int32 on the device (one outside [0, k) gives a NaN loss; the CPU aborts). Both forms use
// the context's scratch; the second also returns the loss on the host (synchronizes the stream).
void softmax_loss_forward(Context& ctx, std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels,
                          float* prob, double* loss_device);
double softmax_loss_forward(Context& ctx, std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels,
                            float* prob);
// dx (+)= scale * (prob - onehot(label)), scale = 1 / (whole batch size).
void softmax_loss_backward(Context& ctx, std::int64_t n, std::int64_t k, const float* prob, const std::int32_t* labels,
                           double scale, float* dx, bool accumulate);

// w -= lr * dw, FP32 at every precision (the master weights).
void sgd_update(Context& ctx, std::int64_t count, double lr, const float* dw, float* w);

// Deterministic pseudo-random fill (tests, profiling inputs): uniform in [lo, hi); labels in [0, k).
void fill_uniform(Context& ctx, std::int64_t count, std::uint64_t seed, float lo, float hi, float* p);
void fill_labels(Context& ctx, std::int64_t count, std::uint64_t seed, std::int32_t k, std::int32_t* labels);

}  // namespace ucplan::cuda
