#include "executor/cuda/kernels_cuda.h"

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "executor/cuda/small_kernels.h"

namespace ucplan::cuda {
namespace {

const float kOne = 1.0f;
const float kZero = 0.0f;
const float* beta_of(bool accumulate) { return accumulate ? &kOne : &kZero; }

// p advanced by `elems` elements of the context's data type (the float* of an activation or a
// gradient points to 16-bit elements in a 16-bit context).
template <typename P>
P* at(const Context& ctx, P* p, std::int64_t elems) {
  using Byte = std::conditional_t<std::is_const_v<P>, const char, char>;
  return reinterpret_cast<P*>(reinterpret_cast<Byte*>(p) +
                              elems * static_cast<std::int64_t>(element_bytes(ctx.data_type())));
}

// cuDNN's legacy descriptors and cuBLAS take int dimensions and strides.
int to_int(std::int64_t v, const char* what) {
  if (v < 0 || v > INT_MAX)
    throw_error(fmt::format("{} = {} is beyond cuDNN/cuBLAS's 32-bit limit", what, v), CudaError::Kind::NotSupported);
  return static_cast<int>(v);
}

// RAII for cuDNN descriptors.
template <typename T, cudnnStatus_t (*Create)(T*), auto Destroy>
class Desc {
 public:
  Desc() { UCPLAN_CUDA(Create(d_.out())); }
  T get() const { return d_.get(); }

 private:
  Owned<T, Destroy> d_;
};
using TensorDesc = Desc<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Desc<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Desc<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Desc<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActDesc = Desc<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;
using LrnDesc = Desc<cudnnLRNDescriptor_t, cudnnCreateLRNDescriptor, cudnnDestroyLRNDescriptor>;

// A packed NCHW tensor (float unless said otherwise). The whole tensor must fit cuDNN's int strides.
void set_tensor(const TensorDesc& t, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  to_int(n * c * h * w, "tensor elements");
  UCPLAN_CUDA(cudnnSetTensor4dDescriptor(t.get(), CUDNN_TENSOR_NCHW, type, to_int(n, "n"), to_int(c, "c"),
                                         to_int(h, "h"), to_int(w, "w")));
}

cudnnDataType_t cudnn_type(DataType t) {
  return t == DataType::Half ? CUDNN_DATA_HALF : t == DataType::BFloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}
cudaDataType_t cublas_type(DataType t) {
  return t == DataType::Half ? CUDA_R_16F : t == DataType::BFloat16 ? CUDA_R_16BF : CUDA_R_32F;
}

using ConvKey = std::array<std::int64_t, 14>;
ConvKey conv_key(const ConvDims& d) {
  return {d.n, d.c, d.h, d.w, d.k, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.dh, d.dw, d.groups};
}

struct ConvEntry {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  // (op, algorithm id) -> workspace bytes, or nullopt when cuDNN does not support it.
  std::map<std::pair<int, int>, std::optional<std::size_t>> workspace;
  // (op, algorithm id) -> cuDNN's determinism in the context's math type; nullopt: not listed.
  std::map<std::pair<int, int>, std::optional<bool>> deterministic;
};

using PoolKey = std::array<std::int64_t, 14>;
struct PoolEntry {
  PoolDesc desc;
  TensorDesc x, y;
  bool use_cudnn = true;  // false: cuDNN's output size differs (ceil mode): small kernel
};

}  // namespace

struct Context::Cache {
  std::map<ConvKey, ConvEntry> conv;
  std::map<std::array<std::int64_t, 5>, TensorDesc> tensors;  // n, c, h, w, cudnnDataType_t
  std::map<PoolKey, PoolEntry> pool;
  std::map<std::tuple<std::int64_t, double, double, double>, LrnDesc> lrn;
  std::optional<ActDesc> relu;
};

namespace {

const TensorDesc& tensor(Context& ctx, std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                         cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  auto& m = ctx.cache().tensors;
  std::array<std::int64_t, 5> key{n, c, h, w, static_cast<std::int64_t>(type)};
  auto it = m.find(key);
  if (it != m.end()) return it->second;
  TensorDesc t;
  set_tensor(t, n, c, h, w, type);
  return m.emplace(key, std::move(t)).first->second;
}

int conv_op_index(ConvOp op) { return static_cast<int>(op); }

ConvEntry& conv_entry(Context& ctx, const ConvDims& d) {
  auto& m = ctx.cache().conv;
  ConvKey key = conv_key(d);
  auto it = m.find(key);
  if (it != m.end()) return it->second;
  if (d.groups < 1 || d.c % d.groups != 0 || d.k % d.groups != 0)
    throw_error(fmt::format("conv: channels {} -> {} are not divisible by groups {}", d.c, d.k, d.groups));
  const std::int64_t ho = conv_out_h(d), wo = conv_out_w(d);
  if (ho < 1 || wo < 1) throw_error(fmt::format("conv: the kernel does not fit the input {}x{}", d.h, d.w));
  ConvEntry e;
  // The context's data type; the compute type is FLOAT at every precision (PSEUDO_HALF for 16-bit).
  const cudnnDataType_t type = cudnn_type(ctx.data_type());
  set_tensor(e.x, d.n, d.c, d.h, d.w, type);
  set_tensor(e.y, d.n, d.k, ho, wo, type);
  set_tensor(e.bias, 1, d.k, 1, 1, type);
  to_int(d.k * (d.c / d.groups) * d.kh * d.kw, "filter elements");
  UCPLAN_CUDA(cudnnSetFilter4dDescriptor(e.w.get(), type, CUDNN_TENSOR_NCHW, to_int(d.k, "k"),
                                         to_int(d.c / d.groups, "c/groups"), to_int(d.kh, "kh"), to_int(d.kw, "kw")));
  UCPLAN_CUDA(cudnnSetConvolution2dDescriptor(
      e.conv.get(), to_int(d.ph, "pad h"), to_int(d.pw, "pad w"), to_int(d.sh, "stride h"), to_int(d.sw, "stride w"),
      to_int(d.dh, "dilation h"), to_int(d.dw, "dilation w"), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  UCPLAN_CUDA(cudnnSetConvolutionGroupCount(e.conv.get(), to_int(d.groups, "groups")));
  // CUDNN_DEFAULT_MATH lets cuDNN run FP32 convolutions as TF32 on Ampere and later; FMA_MATH
  // keeps them in FP32 so they agree with the CPU reference within FP32 rounding.
  // 16-bit data: tensor cores (fp16, bf16), or whatever cuDNN offers for half data with FP32
  // compute (pseudo-fp16, mu-cuDNN's PSEUDO_HALF).
  const cudnnMathType_t math = ctx.data_type() != DataType::Float
                                   ? (ctx.tensor_op_math() ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH)
                               : ctx.allow_tf32() ? CUDNN_DEFAULT_MATH
                                                  : CUDNN_FMA_MATH;
  UCPLAN_CUDA(cudnnSetConvolutionMathType(e.conv.get(), math));
  // Our output size formula must be cuDNN's, or every descriptor below would be inconsistent.
  int n = 0, c = 0, h = 0, w = 0;
  UCPLAN_CUDA(cudnnGetConvolution2dForwardOutputDim(e.conv.get(), e.x.get(), e.w.get(), &n, &c, &h, &w));
  if (n != d.n || c != d.k || h != ho || w != wo)
    throw_error(fmt::format("conv: cuDNN's output {}x{}x{}x{} differs from the expected {}x{}x{}x{}", n, c, h, w, d.n,
                            d.k, ho, wo));
  return m.emplace(key, std::move(e)).first->second;
}

std::optional<std::size_t> query_workspace(Context& ctx, ConvEntry& e, ConvAlgo a) {
  auto key = std::make_pair(conv_op_index(a.op), a.id);
  auto it = e.workspace.find(key);
  if (it != e.workspace.end()) return it->second;
  std::size_t bytes = 0;
  cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
  const char* call = "";
  switch (a.op) {
    case ConvOp::Forward:
      call = "cudnnGetConvolutionForwardWorkspaceSize";
      st = cudnnGetConvolutionForwardWorkspaceSize(ctx.cudnn(), e.x.get(), e.w.get(), e.conv.get(), e.y.get(),
                                                   static_cast<cudnnConvolutionFwdAlgo_t>(a.id), &bytes);
      break;
    case ConvOp::BackwardData:
      call = "cudnnGetConvolutionBackwardDataWorkspaceSize";
      st = cudnnGetConvolutionBackwardDataWorkspaceSize(ctx.cudnn(), e.w.get(), e.y.get(), e.conv.get(), e.x.get(),
                                                        static_cast<cudnnConvolutionBwdDataAlgo_t>(a.id), &bytes);
      break;
    case ConvOp::BackwardFilter:
      call = "cudnnGetConvolutionBackwardFilterWorkspaceSize";
      st = cudnnGetConvolutionBackwardFilterWorkspaceSize(ctx.cudnn(), e.x.get(), e.y.get(), e.conv.get(), e.w.get(),
                                                          static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.id), &bytes);
      break;
  }
  std::optional<std::size_t> result;
  if (st == CUDNN_STATUS_SUCCESS)
    result = bytes;
  else if (!is_not_supported(st))
    check_status(st, fmt::format("{}({})", call, conv_algo_name(a)).c_str(), __FILE__, __LINE__);
  e.workspace.emplace(key, result);
  return result;
}

// The workspace the call needs, checked against what the caller gives.
std::size_t required_workspace(Context& ctx, ConvEntry& e, ConvAlgo a, ConvOp op, std::size_t given) {
  if (a.op != op)
    throw_error(
        fmt::format("conv: algorithm {} of {} used for {}", conv_algo_name(a), conv_op_name(a.op), conv_op_name(op)));
  auto need = query_workspace(ctx, e, a);
  if (!need)
    throw_error(
        fmt::format("conv {}: cuDNN does not support algorithm {} for these dims", conv_op_name(op), conv_algo_name(a)),
        CudaError::Kind::NotSupported);
  if (*need > given)
    throw_error(fmt::format("conv {} {}: workspace of {} bytes given, {} needed", conv_op_name(op), conv_algo_name(a),
                            given, *need));
  return *need;
}

struct AlgoName {
  ConvOp op;
  int id;
  const char* name;
  bool deterministic;
};
// runner.h's names and order; determinism as cuDNN's enum comments and documentation state.
const AlgoName kAlgos[] = {
    {ConvOp::Forward, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, "implicit_gemm", true},
    {ConvOp::Forward, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, "implicit_precomp_gemm", true},
    {ConvOp::Forward, CUDNN_CONVOLUTION_FWD_ALGO_GEMM, "gemm", true},
    {ConvOp::Forward, CUDNN_CONVOLUTION_FWD_ALGO_DIRECT, "direct", true},
    {ConvOp::Forward, CUDNN_CONVOLUTION_FWD_ALGO_FFT, "fft", true},
    {ConvOp::Forward, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING, "fft_tiling", true},
    {ConvOp::Forward, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, "winograd", true},
    {ConvOp::Forward, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused", true},
    {ConvOp::BackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, "algo_0", false},
    {ConvOp::BackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, "algo_1", true},
    {ConvOp::BackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, "fft", true},
    {ConvOp::BackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING, "fft_tiling", true},
    {ConvOp::BackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, "winograd", true},
    {ConvOp::BackwardData, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused", true},
    {ConvOp::BackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, "algo_0", false},
    {ConvOp::BackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, "algo_1", true},
    {ConvOp::BackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, "fft", true},
    {ConvOp::BackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3, "algo_3", false},
    {ConvOp::BackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED, "winograd_nonfused", true},
    {ConvOp::BackwardFilter, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING, "fft_tiling", true},
};

const AlgoName* find_algo(ConvAlgo a) {
  for (const auto& n : kAlgos)
    if (n.op == a.op && n.id == a.id) return &n;
  return nullptr;
}

void check_micro(const ConvDims& whole, const std::vector<MicroConfig>& config, ConvOp op) {
  std::int64_t sum = 0;
  for (const auto& m : config) {
    if (m.batch <= 0) throw_error(fmt::format("conv {}: micro-batch of {} samples", conv_op_name(op), m.batch));
    if (m.algo.op != op)
      throw_error(
          fmt::format("conv {}: micro-configuration uses a {} algorithm", conv_op_name(op), conv_op_name(m.algo.op)));
    sum += m.batch;
  }
  if (sum != whole.n)
    throw_error(
        fmt::format("conv {}: micro-batches add up to {} samples, the kernel has {}", conv_op_name(op), sum, whole.n));
}

ConvDims with_n(ConvDims d, std::int64_t n) {
  d.n = n;
  return d;
}

}  // namespace

// ---- algorithms ----

std::vector<ConvAlgo> conv_algorithms(ConvOp op) {
  std::vector<ConvAlgo> out;
  for (const auto& n : kAlgos)
    if (n.op == op) out.push_back({n.op, n.id});
  return out;
}

const char* conv_algo_name(ConvAlgo a) {
  const AlgoName* n = find_algo(a);
  return n ? n->name : "unknown";
}

bool parse_conv_algo(ConvOp op, const std::string& name, ConvAlgo* out) {
  for (const auto& n : kAlgos)
    if (n.op == op && name == n.name) {
      *out = {n.op, n.id};
      return true;
    }
  return false;
}

bool conv_algo_deterministic(ConvAlgo a) {
  const AlgoName* n = find_algo(a);
  return n ? n->deterministic : false;
}

const char* conv_op_name(ConvOp op) {
  switch (op) {
    case ConvOp::Forward:
      return "forward";
    case ConvOp::BackwardData:
      return "backward_data";
    case ConvOp::BackwardFilter:
      return "backward_filter";
  }
  return "unknown";
}

std::int64_t conv_out_h(const ConvDims& d) { return (d.h + 2 * d.ph - (d.dh * (d.kh - 1) + 1)) / d.sh + 1; }
std::int64_t conv_out_w(const ConvDims& d) { return (d.w + 2 * d.pw - (d.dw * (d.kw - 1) + 1)) / d.sw + 1; }

// ---- Context ----

Context::Context(cudaStream_t stream, bool allow_tf32, DataType data, bool tensor_op_math)
    : stream_(stream),
      allow_tf32_(allow_tf32),
      data_(data),
      tensor_op_math_(tensor_op_math),
      cache_(std::make_unique<Cache>()) {
  cudnn_.set_stream(stream);
  cublas_.set_stream(stream);
  // cuBLAS's default math keeps FP32 sgemm in FP32; TF32 only when asked for.
  UCPLAN_CUDA(cublasSetMathMode(cublas_.get(), allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
}

Context::~Context() = default;

void Context::set_stream(cudaStream_t stream) {
  cudnn_.set_stream(stream);
  cublas_.set_stream(stream);
  stream_ = stream;
}

void* Context::scratch(std::size_t bytes) {
  if (scratch_.bytes() < bytes) {
    UCPLAN_CUDA(cudaStreamSynchronize(stream_));  // the old buffer may still be in use
    scratch_.reset();
    scratch_ = DeviceBuffer(std::max<std::size_t>(bytes, 256));
  }
  return scratch_.get();
}

std::size_t Context::cached_descriptor_sets() const {
  return cache_->conv.size() + cache_->tensors.size() + cache_->pool.size() + cache_->lrn.size() +
         (cache_->relu ? 1 : 0);
}

// ---- convolution ----

bool conv_workspace(Context& ctx, const ConvDims& d, ConvAlgo a, std::size_t* bytes) {
  try {
    ConvEntry& e = conv_entry(ctx, d);
    auto need = query_workspace(ctx, e, a);
    if (!need) return false;
    *bytes = *need;
    return true;
  } catch (const CudaError& err) {
    if (err.not_supported()) return false;  // e.g. a tensor beyond the 32-bit limits
    throw;
  }
}

void conv_forward(Context& ctx, const ConvDims& d, ConvAlgo a, const float* x, const float* w, const float* bias,
                  float* y, void* workspace, std::size_t workspace_bytes) {
  if (d.n == 0) return;
  ConvEntry& e = conv_entry(ctx, d);
  required_workspace(ctx, e, a, ConvOp::Forward, workspace_bytes);
  UCPLAN_CUDA(cudnnConvolutionForward(ctx.cudnn(), &kOne, e.x.get(), x, e.w.get(), w, e.conv.get(),
                                      static_cast<cudnnConvolutionFwdAlgo_t>(a.id), workspace, workspace_bytes, &kZero,
                                      e.y.get(), y));
  if (d.bias) UCPLAN_CUDA(cudnnAddTensor(ctx.cudnn(), &kOne, e.bias.get(), bias, &kOne, e.y.get(), y));
}

void conv_backward_data(Context& ctx, const ConvDims& d, ConvAlgo a, const float* dy, const float* w, float* dx,
                        bool accumulate, void* workspace, std::size_t workspace_bytes) {
  if (d.n == 0) return;
  ConvEntry& e = conv_entry(ctx, d);
  required_workspace(ctx, e, a, ConvOp::BackwardData, workspace_bytes);
  UCPLAN_CUDA(cudnnConvolutionBackwardData(ctx.cudnn(), &kOne, e.w.get(), w, e.y.get(), dy, e.conv.get(),
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(a.id), workspace, workspace_bytes,
                                           beta_of(accumulate), e.x.get(), dx));
}

void conv_backward_filter(Context& ctx, const ConvDims& d, ConvAlgo a, const float* x, const float* dy, float* dw,
                          float* dbias, void* workspace, std::size_t workspace_bytes) {
  if (d.n == 0) return;
  ConvEntry& e = conv_entry(ctx, d);
  required_workspace(ctx, e, a, ConvOp::BackwardFilter, workspace_bytes);
  // beta = 1: micro-batches and sub-batch rounds add up (mu-cuDNN §II).
  UCPLAN_CUDA(cudnnConvolutionBackwardFilter(ctx.cudnn(), &kOne, e.x.get(), x, e.y.get(), dy, e.conv.get(),
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.id), workspace,
                                             workspace_bytes, &kOne, e.w.get(), dw));
  if (!d.bias || !dbias) return;
  if (ctx.data_type() == DataType::Float)
    UCPLAN_CUDA(cudnnConvolutionBackwardBias(ctx.cudnn(), &kOne, e.y.get(), dy, &kOne, e.bias.get(), dbias));
  else  // cuDNN 9 refuses 16-bit bias gradients (NOT_SUPPORTED on an H100, cuDNN 9.14)
    detail::launch_bias_gradient(ctx.stream(), ctx.data_type(), d.n, d.k, conv_out_h(d) * conv_out_w(d), dy, dbias,
                                 true);
}

bool conv_workspace_micro(Context& ctx, const ConvDims& whole, const std::vector<MicroConfig>& config,
                          std::size_t* bytes) {
  std::size_t most = 0;
  for (const auto& m : config) {
    std::size_t b = 0;
    if (!conv_workspace(ctx, with_n(whole, m.batch), m.algo, &b)) return false;
    most = std::max(most, b);
  }
  *bytes = most;
  return true;
}

void conv_forward_micro(Context& ctx, const ConvDims& whole, const std::vector<MicroConfig>& config, const float* x,
                        const float* w, const float* bias, float* y, void* workspace, std::size_t workspace_bytes) {
  check_micro(whole, config, ConvOp::Forward);
  const std::int64_t x_sample = whole.c * whole.h * whole.w, y_sample = whole.k * conv_out_h(whole) * conv_out_w(whole);
  std::int64_t first = 0;
  for (const auto& m : config) {
    conv_forward(ctx, with_n(whole, m.batch), m.algo, at(ctx, x, first * x_sample), w, bias,
                 at(ctx, y, first * y_sample), workspace, workspace_bytes);
    first += m.batch;
  }
}

void conv_backward_data_micro(Context& ctx, const ConvDims& whole, const std::vector<MicroConfig>& config,
                              const float* dy, const float* w, float* dx, bool accumulate, void* workspace,
                              std::size_t workspace_bytes) {
  check_micro(whole, config, ConvOp::BackwardData);
  const std::int64_t x_sample = whole.c * whole.h * whole.w, y_sample = whole.k * conv_out_h(whole) * conv_out_w(whole);
  std::int64_t first = 0;
  for (const auto& m : config) {
    conv_backward_data(ctx, with_n(whole, m.batch), m.algo, at(ctx, dy, first * y_sample), w,
                       at(ctx, dx, first * x_sample), accumulate, workspace, workspace_bytes);
    first += m.batch;
  }
}

void conv_backward_filter_micro(Context& ctx, const ConvDims& whole, const std::vector<MicroConfig>& config,
                                const float* x, const float* dy, float* dw, float* dbias, void* workspace,
                                std::size_t workspace_bytes) {
  check_micro(whole, config, ConvOp::BackwardFilter);
  const std::int64_t x_sample = whole.c * whole.h * whole.w, y_sample = whole.k * conv_out_h(whole) * conv_out_w(whole);
  std::int64_t first = 0;
  for (const auto& m : config) {
    conv_backward_filter(ctx, with_n(whole, m.batch), m.algo, at(ctx, x, first * x_sample),
                         at(ctx, dy, first * y_sample), dw, dbias, workspace, workspace_bytes);
    first += m.batch;
  }
}

namespace {

// The math type a perf result must have: with allow_tf32 anything cuDNN offers; without it no
// tensor-op math (TF32 for FP32 data), so a TF32 result never stands for an FP32 measurement.
// FMA and DEFAULT are both kept: cuDNN may report a plain FP32 kernel either way.
bool wanted_math(const Context& ctx, cudnnMathType_t m) {
  return ctx.allow_tf32() || ctx.data_type() != DataType::Float ||
         (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

// Perf results of one op, Find (runs every algorithm) or Get_v7 (heuristics only), with
// cudnnGetConvolution*AlgorithmMaxCount slots.
template <typename Perf>
std::vector<Perf> conv_perf(Context& ctx, ConvEntry& e, ConvOp op, bool find, const void* x, const void* w,
                            const void* y, void* work, std::size_t ws) {
  int count = 0;
  switch (op) {
    case ConvOp::Forward:
      UCPLAN_CUDA(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx.cudnn(), &count));
      break;
    case ConvOp::BackwardData:
      UCPLAN_CUDA(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx.cudnn(), &count));
      break;
    case ConvOp::BackwardFilter:
      UCPLAN_CUDA(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx.cudnn(), &count));
      break;
  }
  std::vector<Perf> perf(static_cast<std::size_t>(std::max(count, 1)));
  int returned = 0;
  const int n = static_cast<int>(perf.size());
  if constexpr (std::is_same_v<Perf, cudnnConvolutionFwdAlgoPerf_t>) {
    if (find)
      UCPLAN_CUDA(cudnnFindConvolutionForwardAlgorithmEx(ctx.cudnn(), e.x.get(), x, e.w.get(), w, e.conv.get(),
                                                         e.y.get(), const_cast<void*>(y), n, &returned, perf.data(),
                                                         work, ws));
    else
      UCPLAN_CUDA(cudnnGetConvolutionForwardAlgorithm_v7(ctx.cudnn(), e.x.get(), e.w.get(), e.conv.get(), e.y.get(), n,
                                                         &returned, perf.data()));
  } else if constexpr (std::is_same_v<Perf, cudnnConvolutionBwdDataAlgoPerf_t>) {
    if (find)
      UCPLAN_CUDA(cudnnFindConvolutionBackwardDataAlgorithmEx(ctx.cudnn(), e.w.get(), w, e.y.get(), y, e.conv.get(),
                                                              e.x.get(), const_cast<void*>(x), n, &returned,
                                                              perf.data(), work, ws));
    else
      UCPLAN_CUDA(cudnnGetConvolutionBackwardDataAlgorithm_v7(ctx.cudnn(), e.w.get(), e.y.get(), e.conv.get(),
                                                              e.x.get(), n, &returned, perf.data()));
  } else {
    if (find)
      UCPLAN_CUDA(cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx.cudnn(), e.x.get(), x, e.y.get(), y, e.conv.get(),
                                                                e.w.get(), const_cast<void*>(w), n, &returned,
                                                                perf.data(), work, ws));
    else
      UCPLAN_CUDA(cudnnGetConvolutionBackwardFilterAlgorithm_v7(ctx.cudnn(), e.x.get(), e.y.get(), e.conv.get(),
                                                                e.w.get(), n, &returned, perf.data()));
  }
  perf.resize(static_cast<std::size_t>(std::clamp(returned, 0, n)));
  return perf;
}

// Calls f(perf results) with the op's perf struct type.
template <typename F>
auto with_perf(Context& ctx, ConvEntry& e, ConvOp op, bool find, const void* x, const void* w, const void* y,
               void* work, std::size_t ws, F f) {
  switch (op) {
    case ConvOp::Forward:
      return f(conv_perf<cudnnConvolutionFwdAlgoPerf_t>(ctx, e, op, find, x, w, y, work, ws));
    case ConvOp::BackwardData:
      return f(conv_perf<cudnnConvolutionBwdDataAlgoPerf_t>(ctx, e, op, find, x, w, y, work, ws));
    case ConvOp::BackwardFilter:
      break;
  }
  return f(conv_perf<cudnnConvolutionBwdFilterAlgoPerf_t>(ctx, e, op, find, x, w, y, work, ws));
}

}  // namespace

std::vector<AlgoPerf> conv_find(Context& ctx, const ConvDims& d, ConvOp op, std::size_t workspace_limit) {
  ConvEntry& e = conv_entry(ctx, d);
  std::size_t ws = 0;
  for (ConvAlgo a : conv_algorithms(op)) {
    auto need = query_workspace(ctx, e, a);
    if (need && *need <= workspace_limit) ws = std::max(ws, *need);
  }
  const std::int64_t ho = conv_out_h(d), wo = conv_out_w(d);
  const std::int64_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.k * ho * wo, nw = d.k * (d.c / d.groups) * d.kh * d.kw;
  DeviceBuffer x(nx * sizeof(float)), y(ny * sizeof(float)), w(nw * sizeof(float)), work(ws);
  fill_uniform(ctx, nx, 1, -1, 1, x.as<float>());
  fill_uniform(ctx, ny, 2, -1, 1, y.as<float>());
  fill_uniform(ctx, nw, 3, -1, 1, w.as<float>());
  UCPLAN_CUDA(cudaStreamSynchronize(ctx.stream()));
  std::vector<AlgoPerf> out =
      with_perf(ctx, e, op, true, x.get(), w.get(), y.get(), work.get(), ws, [&](const auto& perf) {
        std::vector<AlgoPerf> r;
        for (const auto& p : perf) {
          if (p.status != CUDNN_STATUS_SUCCESS || p.time < 0 || !wanted_math(ctx, p.mathType)) continue;
          const int id = static_cast<int>(p.algo);
          if (std::any_of(r.begin(), r.end(), [&](const AlgoPerf& q) { return q.algo.id == id; }))
            continue;  // fastest kept
          r.push_back(
              {ConvAlgo{op, id}, static_cast<double>(p.time) * 1e-3, p.memory, p.determinism == CUDNN_DETERMINISTIC});
        }
        return r;
      });
  UCPLAN_CUDA(cudaStreamSynchronize(ctx.stream()));
  std::stable_sort(out.begin(), out.end(), [](const AlgoPerf& a, const AlgoPerf& b) { return a.seconds < b.seconds; });
  return out;
}

std::vector<ConvAlgo> conv_ranked(Context& ctx, const ConvDims& d, ConvOp op) {
  ConvEntry& e = conv_entry(ctx, d);
  std::vector<ConvAlgo> out;
  with_perf(ctx, e, op, false, nullptr, nullptr, nullptr, nullptr, 0, [&](const auto& perf) {
    for (const auto& p : perf) {
      const ConvAlgo a{op, static_cast<int>(p.algo)};
      if (p.status == CUDNN_STATUS_SUCCESS && wanted_math(ctx, p.mathType) &&
          std::find(out.begin(), out.end(), a) == out.end())
        out.push_back(a);
    }
    return 0;
  });
  for (ConvAlgo a : conv_algorithms(op))
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  return out;
}

std::optional<bool> conv_deterministic(Context& ctx, const ConvDims& d, ConvAlgo a) {
  ConvEntry& e = conv_entry(ctx, d);
  const auto key = std::make_pair(conv_op_index(a.op), a.id);
  if (auto it = e.deterministic.find(key); it != e.deterministic.end()) return it->second;
  with_perf(ctx, e, a.op, false, nullptr, nullptr, nullptr, nullptr, 0, [&](const auto& perf) {
    for (const auto& p : perf)
      if (p.status == CUDNN_STATUS_SUCCESS && wanted_math(ctx, p.mathType))
        e.deterministic.emplace(std::make_pair(conv_op_index(a.op), static_cast<int>(p.algo)),
                                p.determinism == CUDNN_DETERMINISTIC);
    return 0;
  });
  auto it = e.deterministic.find(key);
  std::optional<bool> result;
  if (it != e.deterministic.end()) result = it->second;
  e.deterministic.emplace(key, result);
  return result;
}

// ---- pooling ----

namespace {
PoolEntry& pool_entry(Context& ctx, const PoolDims& d) {
  auto& m = ctx.cache().pool;
  PoolKey key{d.n,  d.c,  d.h,  d.w,  d.kh, d.kw,          d.sh,
              d.sw, d.ph, d.pw, d.ho, d.wo, d.max ? 1 : 0, d.count_include_pad ? 1 : 0};
  auto it = m.find(key);
  if (it != m.end()) return it->second;
  PoolEntry e;
  // 16-bit data: cuDNN pools in FP32 (its pooling kernels for __half and __nv_bfloat16 data take a
  // float compute type) and rounds the result once, as the CPU emulation does.
  set_tensor(e.x, d.n, d.c, d.h, d.w, cudnn_type(ctx.data_type()));
  set_tensor(e.y, d.n, d.c, d.ho, d.wo, cudnn_type(ctx.data_type()));
  // Max: the deterministic mode sends each window's gradient to one position (the first maximum),
  // as the CPU reference does.
  cudnnPoolingMode_t mode = d.max                 ? CUDNN_POOLING_MAX_DETERMINISTIC
                            : d.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                  : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  UCPLAN_CUDA(cudnnSetPooling2dDescriptor(e.desc.get(), mode, CUDNN_PROPAGATE_NAN, to_int(d.kh, "kh"),
                                          to_int(d.kw, "kw"), to_int(d.ph, "pad h"), to_int(d.pw, "pad w"),
                                          to_int(d.sh, "stride h"), to_int(d.sw, "stride w")));
  int n = 0, c = 0, h = 0, w = 0;
  UCPLAN_CUDA(cudnnGetPooling2dForwardOutputDim(e.desc.get(), e.x.get(), &n, &c, &h, &w));
  // cuDNN rounds the output size down; a ceil-mode size it does not produce goes to the small
  // kernel, whose last windows are clipped exactly as the CPU reference clips them.
  e.use_cudnn = (h == d.ho && w == d.wo);
  return m.emplace(key, std::move(e)).first->second;
}

detail::PoolShape pool_shape(const PoolDims& d) {
  return {d.n * d.c, d.h, d.w, d.ho, d.wo, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.max, d.count_include_pad};
}
}  // namespace

void pool_forward(Context& ctx, const PoolDims& d, const float* x, float* y) {
  if (d.n == 0) return;
  PoolEntry& e = pool_entry(ctx, d);
  if (!e.use_cudnn) return detail::launch_pool_forward(ctx.stream(), ctx.data_type(), pool_shape(d), x, y);
  UCPLAN_CUDA(cudnnPoolingForward(ctx.cudnn(), e.desc.get(), &kOne, e.x.get(), x, &kZero, e.y.get(), y));
}

void pool_backward(Context& ctx, const PoolDims& d, const float* x, const float* y, const float* dy, float* dx,
                   bool accumulate) {
  if (d.n == 0) return;
  PoolEntry& e = pool_entry(ctx, d);
  // Global average pooling (one window, the whole plane: SE blocks, EfficientNet's and MobileNetV3's
  // squeeze) goes to the small kernel too, one thread per input element reading its one window's
  // gradient: cuDNN 9.14's backward took 6.2 ms for 32 planes of 112 x 112 at batch 32 on an H200
  // where its forward took 57 us, and 14.3 ms of EfficientNet-B0 b32's 41.9 ms iteration.
  const bool global_average = !d.max && d.ho == 1 && d.wo == 1 && d.kh >= d.h && d.kw >= d.w && d.ph == 0 && d.pw == 0;
  if (!e.use_cudnn || global_average)
    return detail::launch_pool_backward(ctx.stream(), ctx.data_type(), pool_shape(d), x, y, dy, dx, accumulate);
  // Average pooling reads neither x nor y, which the caller may have freed (liveness: avg-pool's
  // backward reads nothing); cuDNN still wants non-null pointers of the right shapes.
  const float* ys = y ? y : dy;
  const float* xs = x ? x : dx;
  UCPLAN_CUDA(cudnnPoolingBackward(ctx.cudnn(), e.desc.get(), &kOne, e.y.get(), ys, e.y.get(), dy, e.x.get(), xs,
                                   beta_of(accumulate), e.x.get(), dx));
}

// ---- relu ----

namespace {
cudnnActivationDescriptor_t relu_desc(Context& ctx) {
  auto& r = ctx.cache().relu;
  if (!r) {
    ActDesc a;
    UCPLAN_CUDA(cudnnSetActivationDescriptor(a.get(), CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0));
    r.emplace(std::move(a));
  }
  return r->get();
}

// Element-wise ops see `count` elements as [1][chunk][1][1] tensors of at most 2^30 elements.
template <typename F>
void in_chunks(std::int64_t count, F&& f) {
  const std::int64_t chunk = std::int64_t{1} << 30;
  for (std::int64_t first = 0; first < count; first += chunk) f(first, std::min(chunk, count - first));
}
}  // namespace

void relu_forward(Context& ctx, std::int64_t count, const float* x, float* y) {
  cudnnActivationDescriptor_t act = relu_desc(ctx);
  in_chunks(count, [&](std::int64_t first, std::int64_t n) {
    const TensorDesc& t = tensor(ctx, 1, n, 1, 1, cudnn_type(ctx.data_type()));
    UCPLAN_CUDA(cudnnActivationForward(ctx.cudnn(), act, &kOne, t.get(), at(ctx, x, first), &kZero, t.get(),
                                       at(ctx, y, first)));
  });
}

void relu_backward(Context& ctx, std::int64_t count, const float* y, const float* dy, float* dx, bool accumulate) {
  cudnnActivationDescriptor_t act = relu_desc(ctx);
  in_chunks(count, [&](std::int64_t first, std::int64_t n) {
    const TensorDesc& t = tensor(ctx, 1, n, 1, 1, cudnn_type(ctx.data_type()));
    // The backward reads only y (liveness frees x): y > 0 exactly where x > 0, so y stands in for x.
    const float* ys = at(ctx, y, first);
    UCPLAN_CUDA(cudnnActivationBackward(ctx.cudnn(), act, &kOne, t.get(), ys, t.get(), at(ctx, dy, first), t.get(), ys,
                                        beta_of(accumulate), t.get(), at(ctx, dx, first)));
  });
}

// ---- batch normalisation ----

void bn_forward_training(Context& ctx, const BnDims& d, const float* x, const float* gamma, const float* beta, float* y,
                         float* saved) {
  if (d.n == 0) return;
  // x and y in the data type, gamma, beta and the statistics FP32 at every precision (cuDNN's
  // PSEUDO_HALF and PSEUDO_BFLOAT16 configurations: libcudnn_ops 9 has bn_fw_tr_1C11 and
  // bn_bw_1C11 kernels for __half and __nv_bfloat16 data with float parameters and compute).
  const TensorDesc& t = tensor(ctx, d.n, d.c, d.h, d.w, cudnn_type(ctx.data_type()));
  const TensorDesc& p = tensor(ctx, 1, d.c, 1, 1);
  // No running averages (null pointers): the planner's runs are training steps only.
  UCPLAN_CUDA(cudnnBatchNormalizationForwardTraining(ctx.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, t.get(), x,
                                                     t.get(), y, p.get(), gamma, beta, 0.0, nullptr, nullptr, d.eps,
                                                     saved, saved + d.c));
}

void bn_forward_saved(Context& ctx, const BnDims& d, const float* x, const float* gamma, const float* beta,
                      const float* saved, float* y) {
  detail::launch_bn_forward_saved(ctx.stream(), ctx.data_type(), d.n, d.c, d.h * d.w, x, gamma, beta, saved, y);
}

void bn_backward(Context& ctx, const BnDims& d, const float* x, const float* gamma, const float* saved, const float* dy,
                 float* dx, float* dgamma_dbeta, bool accumulate) {
  if (d.n == 0) return;
  const TensorDesc& t = tensor(ctx, d.n, d.c, d.h, d.w, cudnn_type(ctx.data_type()));
  const TensorDesc& p = tensor(ctx, 1, d.c, 1, 1);
  UCPLAN_CUDA(cudnnBatchNormalizationBackward(ctx.cudnn(), CUDNN_BATCHNORM_SPATIAL, &kOne, beta_of(accumulate), &kOne,
                                              &kOne, t.get(), x, t.get(), dy, t.get(), dx, p.get(), gamma, dgamma_dbeta,
                                              dgamma_dbeta + d.c, d.eps, saved, saved + d.c));
}

// ---- LRN ----

namespace {
// cuDNN's window is [c - (size-1)/2, c + size/2]; the CPU's (PyTorch's) is [c - size/2,
// c + (size-1)/2]: the same for odd sizes only. Other sizes and parameters cuDNN rejects go to
// the small kernels, which compute exactly what the CPU computes; so does 16-bit data, for which
// cuDNN does not say in what precision LRN computes (the small kernels compute in FP32 and round
// once, as the CPU emulation does).
bool lrn_cudnn_matches(const Context& ctx, const LrnDims& d) {
  return ctx.data_type() == DataType::Float && d.size % 2 == 1 && d.size >= CUDNN_LRN_MIN_N &&
         d.size <= CUDNN_LRN_MAX_N && d.k >= CUDNN_LRN_MIN_K && d.beta >= CUDNN_LRN_MIN_BETA;
}

cudnnLRNDescriptor_t lrn_desc(Context& ctx, const LrnDims& d) {
  auto& m = ctx.cache().lrn;
  auto key = std::make_tuple(d.size, d.alpha, d.beta, d.k);
  auto it = m.find(key);
  if (it != m.end()) return it->second.get();
  LrnDesc l;
  // cuDNN divides alpha by the window size itself: y = x / (k + alpha/size * sum x^2)^beta.
  UCPLAN_CUDA(cudnnSetLRNDescriptor(l.get(), static_cast<unsigned>(d.size), d.alpha, d.beta, d.k));
  return m.emplace(key, std::move(l)).first->second.get();
}

detail::LrnShape lrn_shape(const LrnDims& d) {
  return detail::lrn_shape(d.n, d.c, d.h * d.w, d.size, d.alpha, d.beta, d.k);
}
}  // namespace

void lrn_forward(Context& ctx, const LrnDims& d, const float* x, float* y) {
  if (d.n == 0) return;
  if (!lrn_cudnn_matches(ctx, d)) return detail::launch_lrn_forward(ctx.stream(), ctx.data_type(), lrn_shape(d), x, y);
  cudnnLRNDescriptor_t l = lrn_desc(ctx, d);
  const TensorDesc& t = tensor(ctx, d.n, d.c, d.h, d.w);
  UCPLAN_CUDA(
      cudnnLRNCrossChannelForward(ctx.cudnn(), l, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, t.get(), x, &kZero, t.get(), y));
}

void lrn_backward(Context& ctx, const LrnDims& d, const float* x, const float* y, const float* dy, float* dx,
                  bool accumulate) {
  if (d.n == 0) return;
  if (!lrn_cudnn_matches(ctx, d))
    return detail::launch_lrn_backward(ctx.stream(), ctx.data_type(), lrn_shape(d), x, y, dy, dx, accumulate);
  cudnnLRNDescriptor_t l = lrn_desc(ctx, d);
  const TensorDesc& t = tensor(ctx, d.n, d.c, d.h, d.w);
  UCPLAN_CUDA(cudnnLRNCrossChannelBackward(ctx.cudnn(), l, CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, t.get(), y, t.get(), dy,
                                           t.get(), x, beta_of(accumulate), t.get(), dx));
}

// ---- fc ----
// cuBLAS is column-major: a row-major [r][c] matrix is, to cuBLAS, its c x r transpose with
// leading dimension c. So x [N][in] is X' (in x N, ld in), w [out][in] is W' (in x out, ld in),
// y [N][out] is Y' (out x N, ld out), and:
//   forward          Y' = W'^T X'        sgemm(T, N, m=out, n=N,   k=in)
//   backward-data    dX' = W' dY'        sgemm(N, N, m=in,  n=N,   k=out)
//   backward-filter  dW' += X' dY'^T     sgemm(N, T, m=in,  n=out, k=N), beta = 1

// 16-bit data (a context's DataType): cublasGemmEx with 16-bit A and B, FP32 compute
// (CUBLAS_COMPUTE_32F), C in `c_type`; alpha and beta are floats.
void gemm_ex(Context& ctx, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void* a, int lda,
             const void* b, int ldb, const float* beta, void* c, cudaDataType_t c_type, int ldc) {
  const cudaDataType_t t = cublas_type(ctx.data_type());
  UCPLAN_CUDA(cublasGemmEx(ctx.cublas(), ta, tb, m, n, k, &kOne, a, t, lda, b, t, ldb, beta, c, c_type, ldc,
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void fc_forward(Context& ctx, const FcDims& d, const float* x, const float* w, const float* bias, float* y) {
  if (d.n == 0) return;
  const int n = to_int(d.n, "fc n"), in = to_int(d.in, "fc in"), out = to_int(d.out, "fc out");
  const bool half = ctx.data_type() != DataType::Float;
  if (half)
    gemm_ex(ctx, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, &kZero, y, cublas_type(ctx.data_type()), out);
  else
    UCPLAN_CUDA(cublasSgemm(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &kOne, w, in, x, in, &kZero, y, out));
  if (d.bias) {
    const cudnnDataType_t type = cudnn_type(ctx.data_type());
    const TensorDesc& b = tensor(ctx, 1, d.out, 1, 1, type);
    const TensorDesc& t = tensor(ctx, d.n, d.out, 1, 1, type);
    UCPLAN_CUDA(cudnnAddTensor(ctx.cudnn(), &kOne, b.get(), bias, &kOne, t.get(), y));
  }
}

void fc_backward_data(Context& ctx, const FcDims& d, const float* dy, const float* w, float* dx, bool accumulate) {
  if (d.n == 0) return;
  const int n = to_int(d.n, "fc n"), in = to_int(d.in, "fc in"), out = to_int(d.out, "fc out");
  if (ctx.data_type() != DataType::Float)
    gemm_ex(ctx, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, w, in, dy, out, beta_of(accumulate), dx,
            cublas_type(ctx.data_type()), in);
  else
    UCPLAN_CUDA(cublasSgemm(ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &kOne, w, in, dy, out,
                            beta_of(accumulate), dx, in));
}

void fc_backward_filter(Context& ctx, const FcDims& d, const float* x, const float* dy, float* dw, float* dbias) {
  if (d.n == 0) return;
  const int n = to_int(d.n, "fc n"), in = to_int(d.in, "fc in"), out = to_int(d.out, "fc out");
  if (ctx.data_type() != DataType::Float) {
    // dW' += X' dY'^T with 16-bit X and dY into the FP32 gradient; dbias += dY' ones(N) likewise.
    gemm_ex(ctx, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x, in, dy, out, &kOne, dw, CUDA_R_32F, in);
    if (d.bias && dbias) {
      // The ones: N floats of 1 narrowed to the data type, in the context's scratch.
      auto* ones32 = static_cast<float*>(ctx.scratch(static_cast<std::size_t>(d.n) * 6));
      void* ones16 = ones32 + d.n;
      detail::launch_fill_uniform(ctx.stream(), d.n, 0, 1.0f, 1.0f, ones32);
      detail::launch_narrow(ctx.stream(), ctx.data_type(), d.n, ones32, ones16);
      gemm_ex(ctx, CUBLAS_OP_N, CUBLAS_OP_N, out, 1, n, dy, out, ones16, n, &kOne, dbias, CUDA_R_32F, out);
    }
    return;
  }
  UCPLAN_CUDA(cublasSgemm(ctx.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &kOne, x, in, dy, out, &kOne, dw, in));
  if (d.bias && dbias) {
    const TensorDesc& b = tensor(ctx, 1, d.out, 1, 1);
    const TensorDesc& t = tensor(ctx, d.n, d.out, 1, 1);
    UCPLAN_CUDA(cudnnConvolutionBackwardBias(ctx.cudnn(), &kOne, t.get(), dy, &kOne, b.get(), dbias));
  }
}

// ---- dropout ----

namespace {
// As the CPU: 1 / (1 - ratio), or 0 when everything is dropped.
float dropout_scale(double ratio) { return ratio < 1.0 ? static_cast<float>(1.0 / (1.0 - ratio)) : 0.0f; }
}  // namespace

std::uint64_t dropout_keep_hash(std::uint64_t seed, std::uint64_t index) { return detail::dropout_hash(seed, index); }

void dropout_forward(Context& ctx, std::int64_t n, std::int64_t per_sample, std::int64_t first_sample, double ratio,
                     std::uint64_t seed, const float* x, float* y, std::uint8_t* mask) {
  detail::launch_dropout_forward(ctx.stream(), ctx.data_type(), n * per_sample,
                                 static_cast<std::uint64_t>(first_sample * per_sample), seed, ratio,
                                 dropout_scale(ratio), x, y, mask);
}

void dropout_apply(Context& ctx, std::int64_t count, double ratio, const std::uint8_t* mask, const float* x, float* y) {
  detail::launch_dropout_apply(ctx.stream(), ctx.data_type(), count, dropout_scale(ratio), mask, x, y, false);
}

void dropout_backward(Context& ctx, std::int64_t count, double ratio, const std::uint8_t* mask, const float* dy,
                      float* dx, bool accumulate) {
  detail::launch_dropout_apply(ctx.stream(), ctx.data_type(), count, dropout_scale(ratio), mask, dy, dx, accumulate);
}

// ---- add, concat ----

void add_forward(Context& ctx, std::int64_t count, const std::vector<const float*>& xs, float* y) {
  const DataType t = ctx.data_type();
  if (xs.empty() && count > 0) UCPLAN_CUDA(cudaMemsetAsync(y, 0, count * element_bytes(t), ctx.stream()));
  // Inputs in groups of kMaxSumInputs; later groups add onto the partial sum, keeping the
  // left-to-right order. In FP32 that is y itself; 16-bit data would round each partial sum, so
  // more than one group sums into FP32 in the context's scratch (4 bytes per element, outside the
  // plan's arena; no network of the zoo adds more than 2 inputs), rounded into y once at the end.
  const bool staged = t != DataType::Float && xs.size() > static_cast<std::size_t>(detail::kMaxSumInputs);
  void* sum = staged ? ctx.scratch(static_cast<std::size_t>(count) * sizeof(float)) : y;
  for (std::size_t first = 0; first < xs.size(); first += detail::kMaxSumInputs) {
    detail::SumInputs in{};
    in.count = static_cast<int>(std::min<std::size_t>(detail::kMaxSumInputs, xs.size() - first));
    for (int j = 0; j < in.count; ++j) in.p[j] = xs[first + j];
    detail::launch_sum(ctx.stream(), t, staged ? DataType::Float : t, count, in, first > 0, sum);
  }
  if (staged) detail::launch_narrow(ctx.stream(), t, count, static_cast<const float*>(sum), y);
}

void add_backward(Context& ctx, std::int64_t count, const float* dy, float* dx, bool accumulate) {
  if (count <= 0) return;
  if (accumulate)
    detail::launch_add_inplace(ctx.stream(), ctx.data_type(), count, dy, dx);
  else
    UCPLAN_CUDA(
        cudaMemcpyAsync(dx, dy, count * element_bytes(ctx.data_type()), cudaMemcpyDeviceToDevice, ctx.stream()));
}

void concat_forward(Context& ctx, std::int64_t n, std::int64_t hw, const std::vector<std::int64_t>& cs,
                    const std::vector<const float*>& xs, float* y) {
  if (cs.size() != xs.size()) throw_error("concat: as many channel counts as inputs are needed");
  std::int64_t total = 0;
  for (auto c : cs) total += c;
  const std::size_t bytes = element_bytes(ctx.data_type());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const std::size_t width = cs[i] * hw * bytes;
    if (n > 0 && width > 0)
      UCPLAN_CUDA(cudaMemcpy2DAsync(at(ctx, y, offset * hw), total * hw * bytes, xs[i], width, width, n,
                                    cudaMemcpyDeviceToDevice, ctx.stream()));
    offset += cs[i];
  }
}

void concat_backward(Context& ctx, std::int64_t n, std::int64_t hw, const std::vector<std::int64_t>& cs, std::size_t i,
                     const float* dy, float* dx, bool accumulate) {
  if (i >= cs.size()) throw_error(fmt::format("concat: input {} of {}", i, cs.size()));
  std::int64_t total = 0, offset = 0;
  for (std::size_t j = 0; j < cs.size(); ++j) {
    if (j < i) offset += cs[j];
    total += cs[j];
  }
  const std::int64_t width = cs[i] * hw;
  if (n <= 0 || width <= 0) return;
  const std::size_t bytes = element_bytes(ctx.data_type());
  if (accumulate)
    detail::launch_copy_rows(ctx.stream(), ctx.data_type(), n, width, at(ctx, dy, offset * hw), total * hw, dx, width,
                             true);
  else
    UCPLAN_CUDA(cudaMemcpy2DAsync(dx, width * bytes, at(ctx, dy, offset * hw), total * hw * bytes, width * bytes, n,
                                  cudaMemcpyDeviceToDevice, ctx.stream()));
}

// ---- softmax loss ----

namespace {
// The loss from x in double, as the CPU computes it (not from the rounded prob). prob (FP32 at
// every precision) by cuDNN from FP32 x; from 16-bit x by the loss kernel itself, in double as the
// CPU computes it (cuDNN's softmax wants x and prob in one type).
void softmax_loss(Context& ctx, std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels, float* prob,
                  double* per_sample, double* loss_device) {
  if (ctx.data_type() != DataType::Float) {
    detail::launch_softmax_loss_sum(ctx.stream(), ctx.data_type(), n, k, x, labels, per_sample, loss_device, prob);
    return;
  }
  if (n > 0) {
    const TensorDesc& t = tensor(ctx, n, k, 1, 1);
    UCPLAN_CUDA(cudnnSoftmaxForward(ctx.cudnn(), CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, t.get(), x,
                                    &kZero, t.get(), prob));
  }
  detail::launch_softmax_loss_sum(ctx.stream(), DataType::Float, n, k, x, labels, per_sample, loss_device, nullptr);
}
}  // namespace

void softmax_loss_forward(Context& ctx, std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels,
                          float* prob, double* loss_device) {
  auto* per_sample = static_cast<double*>(ctx.scratch(std::max<std::int64_t>(n, 1) * sizeof(double)));
  softmax_loss(ctx, n, k, x, labels, prob, per_sample, loss_device);
}

double softmax_loss_forward(Context& ctx, std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels,
                            float* prob) {
  auto* loss = static_cast<double*>(ctx.scratch((n + 1) * sizeof(double)));
  softmax_loss(ctx, n, k, x, labels, prob, loss + 1, loss);
  double host = 0;
  UCPLAN_CUDA(cudaMemcpyAsync(&host, loss, sizeof(double), cudaMemcpyDeviceToHost, ctx.stream()));
  UCPLAN_CUDA(cudaStreamSynchronize(ctx.stream()));
  return host;
}

void softmax_loss_backward(Context& ctx, std::int64_t n, std::int64_t k, const float* prob, const std::int32_t* labels,
                           double scale, float* dx, bool accumulate) {
  detail::launch_softmax_loss_backward(ctx.stream(), ctx.data_type(), n, k, prob, labels, scale, dx, accumulate);
}

// ---- update, fills ----

void sgd_update(Context& ctx, std::int64_t count, double lr, const float* dw, float* w) {
  detail::launch_sgd(ctx.stream(), count, static_cast<float>(lr), dw, w);
}

void fill_uniform(Context& ctx, std::int64_t count, std::uint64_t seed, float lo, float hi, float* p) {
  detail::launch_fill_uniform(ctx.stream(), count, seed, lo, hi, p);
}

void fill_labels(Context& ctx, std::int64_t count, std::uint64_t seed, std::int32_t k, std::int32_t* labels) {
  detail::launch_fill_labels(ctx.stream(), count, seed, k, labels);
}

}  // namespace ucplan::cuda
