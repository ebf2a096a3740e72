// CPU reference kernels: forward and backward of every layer type, float32, NCHW.
// Convolution has real algorithms with different time/workspace trade-offs (Caffe con Troll
// §2.1): `direct` (no workspace) and `gemm` (lowering type 1: im2col of the micro-batch, then
// OpenBLAS sgemm per group and sample; workspace = the lowered matrix, so micro-batching shrinks
// it), plus `gemm_lift` (lowering type 3: sgemm on the unlowered input, then a k^2 lifting sum).
// Every backward-data kernel takes `accumulate`: false overwrites dx (beta = 0), true adds to it
// (beta = 1, for a tensor with several consumers). Backward-filter always accumulates into dw
// and db, so a kernel can run over micro-batches and sub-batch rounds; callers zero them first.
// Layouts: conv weight [K][C/groups][kh][kw]; fc weight [out][in] (x is [N][in]); bias [K].
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor/cpu/activation.h"

namespace ucplan::cpu {

struct ConvDims {
  std::int64_t n = 1, c = 1, h = 1, w = 1;  // input (n is the micro-batch)
  std::int64_t k = 1, kh = 1, kw = 1;       // output channels, kernel
  std::int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  std::int64_t groups = 1;
  bool bias = false;
  std::int64_t ho() const;  // output height
  std::int64_t wo() const;  // output width
};

enum class ConvOp { Forward, BackwardData, BackwardFilter };
enum class ConvAlgo { Direct, Gemm, GemmLift };
const char* conv_algo_name(ConvAlgo a);  // "direct", "gemm", "gemm_lift"
bool parse_conv_algo(const std::string& name, ConvAlgo* out);
std::vector<ConvAlgo> conv_algorithms();  // all of them, in a fixed order
// Whether the algorithm implements this op for these dims; an unsupported combination is
// recorded as such in a profile, never run. The answer is the same for the three ops: direct and
// gemm support everything; gemm_lift needs stride 1 and more than one tap (with one tap it is
// gemm without lowering; dilation is fine, the lifting just reads further away).
bool conv_supported(const ConvDims& d, ConvOp op, ConvAlgo a);
// Exactly the bytes the kernel writes in `workspace` (every one of them), the same for the three
// ops; 0 when unsupported. With cg = c/groups, kg = k/groups, taps = kh*kw, 4-byte floats:
//   direct     0
//   gemm       4 * n * cg*taps * ho*wo             (one group's lowered micro-batch), but 0 for
//                                                  1x1 stride-1 unpadded convs (x is its own lowering)
//   gemm_lift  4 * (kg*taps * cg + n * kg*taps * h*w)  (lowered kernel K^, then R^ of each sample)
std::int64_t conv_workspace_bytes(const ConvDims& d, ConvOp op, ConvAlgo a);

void conv_forward(const ConvDims& d, ConvAlgo a, const float* x, const float* w, const float* bias, float* y,
                  void* workspace);
void conv_backward_data(const ConvDims& d, ConvAlgo a, const float* dy, const float* w, float* dx, bool accumulate,
                        void* workspace);
// dbias may be null when d.bias is false.
void conv_backward_filter(const ConvDims& d, ConvAlgo a, const float* x, const float* dy, float* dw, float* dbias,
                          void* workspace);

struct PoolDims {
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, ph = 0, pw = 0;
  std::int64_t ho = 1, wo = 1;  // given (ceil or floor mode decided by the graph)
  bool max = true;
  bool count_include_pad = true;  // average pooling only
};
void pool_forward(const PoolDims& d, const float* x, float* y);
// Max: the gradient goes to the first position in the window whose x equals y (ties: lowest
// index), as cuDNN's deterministic mode does. x and y are unused for average pooling. Average
// divisors follow PyTorch (window clipped to the padded input, then to the input unless
// count_include_pad). A window with no input position (inconsistent sizes) yields 0.
void pool_backward(const PoolDims& d, const float* x, const float* y, const float* dy, float* dx, bool accumulate);

void relu_forward(std::int64_t count, const float* x, float* y);
void relu_backward(std::int64_t count, const float* y, const float* dy, float* dx, bool accumulate);

// Batch normalisation in training mode over (n, h, w) per channel; saved = [mean[c], inv_std[c]]
// with the biased variance, as cuDNN's training forward saves them.
struct BnDims {
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  double eps = 1e-5;
};
void bn_forward_training(const BnDims& d, const float* x, const float* gamma, const float* beta, float* y,
                         float* saved);
// Forward with saved statistics: what recomputation uses (same values as the training forward).
void bn_forward_saved(const BnDims& d, const float* x, const float* gamma, const float* beta, const float* saved,
                      float* y);
// dgamma_dbeta = [dgamma[c], dbeta[c]] (accumulated, like dw).
void bn_backward(const BnDims& d, const float* x, const float* gamma, const float* saved, const float* dy, float* dx,
                 float* dgamma_dbeta, bool accumulate);

struct LrnDims {
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  std::int64_t size = 5;
  double alpha = 1e-4, beta = 0.75, k = 1.0;
};
// Both directions allocate their own scratch (one sample's window sums; twice that, plus a
// plane, for backward): CPU-side memory that no plan accounts for.
void lrn_forward(const LrnDims& d, const float* x, float* y);
void lrn_backward(const LrnDims& d, const float* x, const float* y, const float* dy, float* dx, bool accumulate);

// y[n][out] = x[n][in] * w[out][in]^T + bias[out]
struct FcDims {
  std::int64_t n = 1, in = 1, out = 1;
  bool bias = true;
};
void fc_forward(const FcDims& d, const float* x, const float* w, const float* bias, float* y);
void fc_backward_data(const FcDims& d, const float* dy, const float* w, float* dx, bool accumulate);
void fc_backward_filter(const FcDims& d, const float* x, const float* dy, float* dw, float* dbias);

// Dropout: element e of sample s (global index within the whole batch, so micro-batching and
// sub-batching give the same mask) is kept iff hash(seed, s * per_sample + e) >= ratio;
// y = x * keep / (1 - ratio). mask holds one byte per element (1 kept, 0 dropped).
std::uint64_t dropout_keep_hash(std::uint64_t seed, std::uint64_t index);  // uniform in [0, 2^64)
void dropout_forward(std::int64_t n, std::int64_t per_sample, std::int64_t first_sample, double ratio,
                     std::uint64_t seed, const float* x, float* y, std::uint8_t* mask);
void dropout_apply(std::int64_t count, double ratio, const std::uint8_t* mask, const float* x, float* y);  // recompute
void dropout_backward(std::int64_t count, double ratio, const std::uint8_t* mask, const float* dy, float* dx,
                      bool accumulate);

// y = sum of inputs; backward: each dx_i (+)= dy.
void add_forward(std::int64_t count, const std::vector<const float*>& xs, float* y);
void add_backward(std::int64_t count, const float* dy, float* dx, bool accumulate);

// Channel concatenation of inputs with channels cs[i] (per-sample planes of hw elements).
void concat_forward(std::int64_t n, std::int64_t hw, const std::vector<std::int64_t>& cs,
                    const std::vector<const float*>& xs, float* y);
// Gradient slice of input i.
void concat_backward(std::int64_t n, std::int64_t hw, const std::vector<std::int64_t>& cs, std::size_t i,
                     const float* dy, float* dx, bool accumulate);

// Softmax + cross-entropy over k classes. prob = softmax(x); returns the summed loss of the n
// samples. Backward: dx (+)= scale * (prob - onehot(label)); scale is 1 / (whole batch size),
// so that sub-batch rounds add up to the gradient of the mean loss.
double softmax_loss_forward(std::int64_t n, std::int64_t k, const float* x, const std::int32_t* labels, float* prob);
void softmax_loss_backward(std::int64_t n, std::int64_t k, const float* prob, const std::int32_t* labels, double scale,
                           float* dx, bool accumulate);

// Point-wise activations (activation.h): y = f(x); backward dx (+)= dy * f'(v), where v is y
// or x as activation_backward_reads_y() says.
void activation_forward(const ActivationDims& d, std::int64_t count, const float* x, float* y);
void activation_backward(const ActivationDims& d, std::int64_t count, const float* v, const float* dy, float* dx,
                         bool accumulate);

// y = x * s, where s has x's shape or one value per sample and channel (squeeze-and-excitation).
// Backward: dx (+)= dy * s where dx is given (it needs s), ds (+)= dy * x, summed over each plane
// when s is per channel, where ds is given (it needs x). Either pointer may be null.
struct MulDims {
  std::int64_t n = 1, c = 1, plane = 1;  // x's shape: n x c x plane
  bool per_channel = false;              // s is n x c x 1
};
void mul_forward(const MulDims& d, const float* x, const float* s, float* y);
void mul_backward(const MulDims& d, const float* x, const float* s, const float* dy, float* dx, bool accumulate_dx,
                  float* ds, bool accumulate_ds);

// y = x * gamma[c] (ConvNeXt's layer scale). Backward: dgamma += sum of dy * x; dx (+)= dy * gamma
// where dx is given.
void scale_forward(std::int64_t n, std::int64_t c, std::int64_t plane, const float* x, const float* gamma, float* y);
void scale_backward(std::int64_t n, std::int64_t c, std::int64_t plane, const float* x, const float* gamma,
                    const float* dy, float* dx, bool accumulate, float* dgamma);

// Layer norm over the channels of each pixel: y = (x - mean) * inv_std * gamma[c] + beta[c], with
// the mean and the biased variance over c at each (sample, pixel). saved holds n * h * w means
// then n * h * w inverse standard deviations. The forward from saved statistics (recomputation)
// is bit-identical to the training forward. dgamma_dbeta (gamma's C, then beta's) accumulates.
struct LnDims {
  std::int64_t n = 1, c = 1, h = 1, w = 1;
  double eps = 1e-5;
};
void ln_forward_training(const LnDims& d, const float* x, const float* gamma, const float* beta, float* y,
                         float* saved);
void ln_forward_saved(const LnDims& d, const float* x, const float* gamma, const float* beta, const float* saved,
                      float* y);
void ln_backward(const LnDims& d, const float* x, const float* gamma, const float* saved, const float* dy, float* dx,
                 float* dgamma_dbeta, bool accumulate);

// Channel shuffle with g groups: output channel k * g + j is input channel j * (c / g) + k.
void channel_shuffle_forward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups, const float* x,
                             float* y);
void channel_shuffle_backward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t groups, const float* dy,
                              float* dx, bool accumulate);

// Channels [begin, end) of an input of c channels. Backward: dx's channels in the range (+)= dy;
// outside it an overwrite writes zeros and an accumulation adds nothing.
void slice_forward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin, std::int64_t end,
                   const float* x, float* y);
void slice_backward(std::int64_t n, std::int64_t c, std::int64_t plane, std::int64_t begin, std::int64_t end,
                    const float* dy, float* dx, bool accumulate);

// Plain SGD: w -= lr * dw.
void sgd_update(std::int64_t count, double lr, const float* dw, float* w);

}  // namespace ucplan::cpu
