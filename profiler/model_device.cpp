#include "profiler/model_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "planner/model/errors.h"

namespace ucplan {

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kGiB = std::int64_t{1} << 30;

// model:h100 with the factors fitted to the H100's measured profiles (model_device.h, FITTED
// DEVICES): the medians of measured / modelled seconds per (layer type, op) over every entry the
// two profiles share, to 3 decimals (tests/model/fitted.py recomputes them from profiles/h100/).
ModelDeviceSpec h100_fit(const ModelDeviceSpec& h100) {
  ModelDeviceSpec d = h100;
  d.name = "h100-fit";
  d.fitted = {{"add", "backward", 1.410},
              {"add", "forward", 3.701},
              {"bn", "backward", 1.007},
              {"bn", "forward", 0.943},
              {"bn", "update", 1.317},
              {"conv", "backward_data", 1.108},
              {"conv", "backward_filter", 1.522},
              {"conv", "forward", 1.272},
              {"conv", "update", 1.073},
              {"dropout", "backward", 1.378},
              {"dropout", "forward", 1.309},
              {"fc", "backward_data", 0.298},
              {"fc", "backward_filter", 2.836},
              {"fc", "forward", 0.198},
              {"fc", "update", 1.006},
              {"lrn", "backward", 1.928},
              {"lrn", "forward", 2.993},
              {"pool", "backward", 3.934},
              {"pool", "forward", 1.298},
              {"relu", "backward", 1.063},
              {"relu", "forward", 1.183},
              {"softmax_loss", "backward", 1.462},
              {"softmax_loss", "forward", 4.581}};
  d.fitted_from =
      "profiles/h100/{resnet50-b128,vgg16-b64,alexnet-b256,resnet18-b128}.json (H100 80GB HBM3, cuDNN 9.14, "
      "2026-11-24)";
  return d;
}

// The numbers and their sources are listed in model_device.h.
const std::vector<ModelDeviceSpec>& all_devices() {
  static const std::vector<ModelDeviceSpec> devices = [] {
    std::vector<ModelDeviceSpec> v = {
        {.name = "k40",
         .full_name = "NVIDIA Tesla K40 GK110B at 745 MHz base clock",
         .fp32_flops = 4.29e12,
         .mem_bandwidth = 288e9,
         .memory_bytes = 12 * kGiB,
         .h2d_bandwidth = 10.0e9,
         .d2h_bandwidth = 10.0e9,
         .link_latency_s = 10e-6,
         .kernel_launch_s = 5e-6,
         .duplex = true,
         .sm_count = 15,
         .compute_efficiency = 0.40,
         .memory_efficiency = 0.70},
        {.name = "p100",
         .full_name = "NVIDIA Tesla P100-SXM2 16GB",
         .fp32_flops = 10.6e12,
         .mem_bandwidth = 732e9,
         .memory_bytes = 16 * kGiB,
         .h2d_bandwidth = 12e9,
         .d2h_bandwidth = 12e9,
         .link_latency_s = 10e-6,
         .kernel_launch_s = 4e-6,
         .duplex = true,
         .sm_count = 56,
         .compute_efficiency = 1.0,
         .memory_efficiency = 0.75},
        {.name = "v100",
         .full_name = "NVIDIA Tesla V100-SXM2 16GB",
         .fp32_flops = 15.7e12,
         .mem_bandwidth = 900e9,
         .memory_bytes = 16 * kGiB,
         .h2d_bandwidth = 12e9,
         .d2h_bandwidth = 12e9,
         .link_latency_s = 10e-6,
         .kernel_launch_s = 4e-6,
         .duplex = true,
         .sm_count = 80,
         .compute_efficiency = 1.0,
         .memory_efficiency = 0.85,
         .fp16_tensor_flops = 125e12},
        {.name = "a100",
         .full_name = "NVIDIA A100-SXM4 80GB",
         .fp32_flops = 19.5e12,
         .mem_bandwidth = 2.039e12,
         .memory_bytes = 81920 * kMiB,
         .h2d_bandwidth = 25e9,
         .d2h_bandwidth = 25e9,
         .link_latency_s = 9e-6,
         .kernel_launch_s = 3e-6,
         .duplex = true,
         .sm_count = 108,
         .compute_efficiency = 0.90,
         .memory_efficiency = 0.88,
         .tf32_tensor_flops = 156e12,
         .bf16_tensor_flops = 312e12,
         .fp16_tensor_flops = 312e12},
        {.name = "h100",
         .full_name = "NVIDIA H100 SXM5 80GB",
         .fp32_flops = 66.9e12,
         .mem_bandwidth = 3.35e12,
         .memory_bytes = 81559 * kMiB,
         .h2d_bandwidth = 50e9,
         .d2h_bandwidth = 50e9,
         .link_latency_s = 8e-6,
         .kernel_launch_s = 3e-6,
         .duplex = true,
         .sm_count = 132,
         .compute_efficiency = 0.85,
         .memory_efficiency = 0.88,
         .tf32_tensor_flops = 494.7e12,
         .bf16_tensor_flops = 989.4e12,
         .fp16_tensor_flops = 989.4e12},
        {.name = "h200",
         .full_name = "NVIDIA H200 SXM 141GB",
         .fp32_flops = 66.9e12,
         .mem_bandwidth = 4.8e12,
         .memory_bytes = 143771 * kMiB,
         .h2d_bandwidth = 50e9,
         .d2h_bandwidth = 50e9,
         .link_latency_s = 8e-6,
         .kernel_launch_s = 3e-6,
         .duplex = true,
         .sm_count = 132,
         .compute_efficiency = 0.85,
         .memory_efficiency = 0.88,
         .tf32_tensor_flops = 494.7e12,
         .bf16_tensor_flops = 989.4e12,
         .fp16_tensor_flops = 989.4e12},
    };
    v.push_back(h100_fit(*std::find_if(v.begin(), v.end(), [](const ModelDeviceSpec& d) { return d.name == "h100"; })));
    return v;
  }();
  return devices;
}

// ---------------------------------------------------------------------------------------------
// One kernel of an op: what it computes and moves, and how well its main loop uses the GPU.

constexpr double kWaveOutputsPerSm = 8192;  // w_half = sm_count * this
constexpr double kDepthHalf = 16;           // depth(d) = d / (d + this)
constexpr double kElementwiseEfficiency = 0.5;

struct Kernel {
  double flops = 0;  // arithmetic performed
  double bytes = 0;  // device memory read + written
  double e_algo = kElementwiseEfficiency;
  double work = 0;   // parallel output elements; 0: no saturation term
  double depth = 0;  // GEMM reduction depth per output; 0: no depth term
  double launches = 1;
  bool tensor = false;  // a GEMM that runs on tensor cores where the device has them for the precision
  // Device memory its operands take at once; 0: `bytes` (each read or written once). A kernel
  // of two passes over its input (batch and layer norm) reads more than it holds.
  double resident = 0;
};

// Tensor-core FLOP/s of a device at a precision, 0 where it has none (then the math runs on the
// FP32 units: TF32 is FP32 before Ampere, and bf16 kernels without tensor cores run at the FP32
// rate; pseudo-fp16 multiplies fp16 on the tensor cores with FP32 accumulation, as fp16 does).
double tensor_flops(const ModelDeviceSpec& d, Precision p) {
  switch (p) {
    case Precision::TF32:
      return d.tf32_tensor_flops;
    case Precision::BF16:
      return d.bf16_tensor_flops;
    case Precision::FP16:
    case Precision::PseudoFP16:
      return d.fp16_tensor_flops;
    default:
      return 0;
  }
}

double kernel_seconds(const ModelDeviceSpec& d, const Kernel& k, Precision p) {
  const double tc = k.tensor ? tensor_flops(d, p) : 0;
  double e = k.e_algo * (tc > 0 ? d.tensor_efficiency : d.compute_efficiency);
  if (k.work > 0) e *= k.work / (k.work + d.sm_count * kWaveOutputsPerSm);
  if (k.depth > 0) e *= k.depth / (k.depth + kDepthHalf);
  double compute = k.flops > 0 ? k.flops / ((tc > 0 ? tc : d.fp32_flops) * e) : 0.0;
  double memory = k.bytes / (d.mem_bandwidth * d.memory_efficiency);
  return std::max(compute, memory) + k.launches * d.kernel_launch_s;
}

// ---------------------------------------------------------------------------------------------
// Convolutions. Tensors are float32 (the only DType, network.h); spectra are complex64.

constexpr double kFloat = 4;    // bytes
constexpr double kComplex = 8;  // bytes

// Fraction of peak each algorithm's main kernel reaches at saturation (ASSUMPTIONS, see the
// header): the GEMM family in cuDNN's order of quality, the fast algorithms on their reduced
// arithmetic.
constexpr double kImplicitGemm = 0.45;
constexpr double kImplicitPrecompGemm = 0.70;
constexpr double kBwdDataAlgo0 = 0.45;
constexpr double kBwdDataAlgo1 = 0.65;
constexpr double kBwdFilterAlgo0 = 0.40;
constexpr double kBwdFilterAlgo1 = 0.55;
constexpr double kBwdFilterAlgo3 = 0.60;
constexpr double kExplicitSgemm = 0.80;
constexpr double kFftPointwise = 0.45;
constexpr double kFftTilingPointwise = 0.40;
constexpr double kWinogradFused = 0.55;
constexpr double kWinogradNonfusedGemm = 0.75;
constexpr double kTransform = 0.5;  // FFT / Winograd transforms: memory-bound in practice

constexpr std::int64_t kFftMaxPadded = 256;  // cuDNN: H + 2*pad <= 256 for FFT
constexpr std::int64_t kFftTile = 32;        // cuDNN FFT_TILING: 32x32 tiles, filter <= 32

enum class ConvOp { Forward, BackwardData, BackwardFilter };

// Shapes of one convolution layer.
struct ConvShape {
  std::int64_t c, h, w, k, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw, g;
  std::int64_t cg() const { return c / g; }
  std::int64_t kg() const { return k / g; }
};

ConvShape conv_shape(const GraphLayer& l) {
  const Shape x = l.in_shapes.at(0);
  const ConvParams& p = l.spec.conv;
  return {x.c,         x.h,         x.w,      l.out.c,  l.out.h,       l.out.w,       p.kernel[0], p.kernel[1],
          p.stride[0], p.stride[1], p.pad[0], p.pad[1], p.dilation[0], p.dilation[1], p.groups};
}

// What an op reads, writes and parallelises over, in elements (b = micro-batch).
struct ConvRoles {
  double read_elems = 0, write_elems = 0;  // tensors read (data and filter) and written
  double filter_elems = 0;
  double work = 0;                    // parallel outputs (see the header)
  double depth = 0;                   // GEMM reduction depth; 0 for filter gradients
  double channel_depth = 0;           // per-group channels summed over in the transformed
                                      // domain (FFT, Winograd); 0 for filter gradients
  std::int64_t out_h = 0, out_w = 0;  // spatial size of the op's result planes
  // Planes an FFT/Winograd algorithm transforms: data planes in and out (per micro-batch) and
  // filter planes (K*Cg) in or out.
  double data_in_planes = 0, filter_in_planes = 0, data_out_planes = 0, filter_out_planes = 0;
  // Planes whose count carries the batch parallelism of the transformed-domain GEMM (the result
  // planes; for filter gradients the dY planes, spread over the SMs by split-K as in `work`).
  double batch_planes = 0;
};

ConvRoles conv_roles(const ConvShape& s, ConvOp op, double b) {
  ConvRoles r;
  const double x = b * static_cast<double>(s.c * s.h * s.w);
  const double y = b * static_cast<double>(s.k * s.ho * s.wo);
  const double f = static_cast<double>(s.k * s.cg() * s.kh * s.kw);
  const double kgcg = static_cast<double>(s.k * s.cg());
  r.filter_elems = f;
  switch (op) {
    case ConvOp::Forward:  // X, W -> Y
      r.read_elems = x + f;
      r.write_elems = y;
      r.work = y;
      r.depth = static_cast<double>(s.cg() * s.kh * s.kw);
      r.channel_depth = static_cast<double>(s.cg());
      r.out_h = s.ho;
      r.out_w = s.wo;
      r.data_in_planes = b * static_cast<double>(s.c);
      r.filter_in_planes = kgcg;
      r.data_out_planes = b * static_cast<double>(s.k);
      r.batch_planes = r.data_out_planes;
      break;
    case ConvOp::BackwardData:  // dY, W -> dX
      r.read_elems = y + f;
      r.write_elems = x;
      r.work = x;
      r.depth = std::max(1.0, static_cast<double>(s.kg() * s.kh * s.kw) / static_cast<double>(s.sh * s.sw));
      r.channel_depth = static_cast<double>(s.kg());
      r.out_h = s.h;
      r.out_w = s.w;
      r.data_in_planes = b * static_cast<double>(s.k);
      r.filter_in_planes = kgcg;
      r.data_out_planes = b * static_cast<double>(s.c);
      r.batch_planes = r.data_out_planes;
      break;
    case ConvOp::BackwardFilter:  // X, dY -> dW
      r.read_elems = x + y;
      r.write_elems = f;
      r.work = std::max(f, y);
      r.out_h = s.ho;
      r.out_w = s.wo;
      r.data_in_planes = b * static_cast<double>(s.c + s.k);
      r.filter_out_planes = kgcg;
      r.batch_planes = b * static_cast<double>(s.k);
      break;
  }
  return r;
}

// Smallest n >= x whose prime factors are 2, 3, 5, 7 (cuFFT's fast radices).
std::int64_t fft_size(std::int64_t x) {
  for (std::int64_t n = std::max<std::int64_t>(x, 1);; ++n) {
    std::int64_t m = n;
    for (std::int64_t p : {2, 3, 5, 7})
      while (m % p == 0) m /= p;
    if (m == 1) return n;
  }
}

double ceil_div(std::int64_t a, std::int64_t b) { return static_cast<double>((a + b - 1) / b); }

struct ConvCost {
  bool supported = true;
  std::vector<Kernel> kernels;
  double workspace = 0;  // bytes
};

// A one-kernel algorithm of the GEMM family (implicit GEMM, cuDNN algo_0/1/3, fused Winograd).
ConvCost single_kernel(const ConvRoles& r, double flops, double e, double workspace, double eb, bool tensor) {
  ConvCost c;
  c.workspace = workspace;
  c.kernels.push_back({.flops = flops,
                       .bytes = eb * (r.read_elems + r.write_elems) + workspace,
                       .e_algo = e,
                       .work = r.work,
                       .depth = r.depth,
                       .tensor = tensor});
  return c;
}

// FFT convolution, whole planes (tiles = 1) or tile by tile (fft_tiling).
ConvCost fft_cost(const ConvShape& s, const ConvRoles& r, double b, bool tiling, double eb) {
  ConvCost c;
  if (s.sh != 1 || s.sw != 1 || s.dh != 1 || s.dw != 1 || s.kh <= s.ph || s.kw <= s.pw) c.supported = false;
  const std::int64_t nh = fft_size(s.h + 2 * s.ph), nw = fft_size(s.w + 2 * s.pw);
  std::int64_t th = nh, tw = nw;
  double tiles = 1;
  if (tiling) {
    if (s.kh > kFftTile || s.kw > kFftTile) c.supported = false;
    if (nh > kFftTile) {
      th = kFftTile;
      tiles *= ceil_div(r.out_h, std::max<std::int64_t>(1, kFftTile - s.kh + 1));
    }
    if (nw > kFftTile) {
      tw = kFftTile;
      tiles *= ceil_div(r.out_w, std::max<std::int64_t>(1, kFftTile - s.kw + 1));
    }
  } else if (s.h + 2 * s.ph > kFftMaxPadded || s.w + 2 * s.pw > kFftMaxPadded) {
    c.supported = false;
  }
  if (!c.supported) return c;
  const double points = static_cast<double>(th * (tw / 2 + 1));  // complex points per plane (tile)
  const double plane_fft_flops = 2.5 * static_cast<double>(th * tw) * std::log2(static_cast<double>(th * tw));
  const double in_spectra = r.data_in_planes * tiles + r.filter_in_planes;
  const double out_spectra = r.data_out_planes * tiles + r.filter_out_planes;
  const double pointwise_work = std::max(r.batch_planes * tiles, r.filter_out_planes) * points;
  // Forward transforms: spectra written twice (row pass, column pass).
  c.kernels.push_back({.flops = in_spectra * plane_fft_flops,
                       .bytes = eb * r.read_elems + 2 * kComplex * points * in_spectra,
                       .e_algo = kTransform,
                       .launches = tiles});
  // Pointwise complex multiply-accumulate over the channel pairs, 8 flops per complex MAC.
  c.kernels.push_back({.flops = 8 * b * static_cast<double>(s.k * s.cg()) * points * tiles,
                       .bytes = kComplex * points * tiles *
                                (r.data_in_planes + r.data_out_planes + r.filter_in_planes + r.filter_out_planes),
                       .e_algo = tiling ? kFftTilingPointwise : kFftPointwise,
                       .work = pointwise_work,
                       .depth = r.channel_depth,
                       .launches = tiles});
  // Inverse transforms.
  c.kernels.push_back({.flops = out_spectra * plane_fft_flops,
                       .bytes = 2 * kComplex * points * out_spectra + eb * r.write_elems,
                       .e_algo = kTransform,
                       .launches = tiles});
  c.workspace = (b * static_cast<double>(s.cg() + s.kg()) + static_cast<double>(s.kg() * s.cg())) * points * kComplex;
  return c;
}

// Winograd without fusion: transforms, 36 batched GEMMs, inverse transform.
ConvCost winograd_nonfused_cost(const ConvShape& s, const ConvRoles& r, double b, double eb) {
  ConvCost c;
  const bool square35 = s.kh == s.kw && (s.kh == 3 || s.kh == 5);
  if (!square35 || s.sh != 1 || s.sw != 1 || s.dh != 1 || s.dw != 1) {
    c.supported = false;
    return c;
  }
  constexpr std::int64_t alpha = 6;  // F(4x4,3x3) and F(2x2,5x5) both use 6x6 tiles
  const std::int64_t m = alpha - s.kh + 1;
  const double a2 = static_cast<double>(alpha * alpha);
  const double tiles = ceil_div(r.out_h, m) * ceil_div(r.out_w, m);
  const double in_t = (r.data_in_planes * tiles + r.filter_in_planes) * a2;
  const double out_t = (r.data_out_planes * tiles + r.filter_out_planes) * a2;
  c.kernels.push_back({.bytes = eb * r.read_elems + kFloat * (+in_t), .e_algo = kTransform, .launches = 2});
  c.kernels.push_back({.flops = 2 * b * static_cast<double>(s.k * s.cg()) * tiles * a2,
                       .bytes = kFloat * (in_t + out_t),
                       .e_algo = kWinogradNonfusedGemm,
                       .work = std::max(r.batch_planes * tiles, r.filter_out_planes) * a2,
                       .depth = r.channel_depth,
                       .tensor = true});
  c.kernels.push_back({.bytes = kFloat * out_t + eb * r.write_elems, .e_algo = kTransform});
  c.workspace = (b * static_cast<double>(s.cg() + s.kg()) * tiles + static_cast<double>(s.kg() * s.cg())) * a2 * kFloat;
  return c;
}

ConvCost conv_cost(const GraphLayer& l, ConvOp op, const std::string& algo, double b, Precision p, bool* known) {
  *known = true;
  const double eb = storage_bytes(storage_of(p));  // data tensors; filters are read from their copy
  const ConvShape s = conv_shape(l);
  const ConvRoles r = conv_roles(s, op, b);
  const double direct = b * (op == ConvOp::Forward        ? l.forward_flops
                             : op == ConvOp::BackwardData ? l.backward_data_flops
                                                          : l.backward_filter_flops);
  const double index_buffer = 4.0 * static_cast<double>(s.cg() * s.kh * s.kw);  // int32 indices
  const bool stride1 = s.sh == 1 && s.sw == 1 && s.dh == 1 && s.dw == 1;
  ConvCost unsupported;
  unsupported.supported = false;

  // cuDNN's half configurations (mu-cuDNN Table I): true half (here fp16 and bf16 with tensor-op
  // math) has GEMM and Winograd algorithms; pseudo-half (FP32 compute) also FFT.
  const bool fft_ok = p != Precision::FP16 && p != Precision::BF16;
  if (algo == "fft" || algo == "fft_tiling") {
    if (!fft_ok) return unsupported;
    return fft_cost(s, r, b, algo == "fft_tiling", eb);
  }
  if (algo == "winograd_nonfused") return winograd_nonfused_cost(s, r, b, eb);
  switch (op) {
    case ConvOp::Forward:
      if (algo == "implicit_gemm") return single_kernel(r, direct, kImplicitGemm, 0, eb, false);
      if (algo == "implicit_precomp_gemm")
        return single_kernel(r, direct, kImplicitPrecompGemm, index_buffer, eb, true);
      if (algo == "direct") return unsupported;
      if (algo == "gemm") {
        // im2col writes the lowered matrix, then one SGEMM reads it.
        const double lowered = eb * b * static_cast<double>(s.c * s.kh * s.kw * s.ho * s.wo);
        ConvCost c;
        c.workspace = lowered / static_cast<double>(s.g);
        c.kernels.push_back({.bytes = eb * static_cast<double>(s.c * s.h * s.w) * b + lowered, .e_algo = kTransform});
        c.kernels.push_back({.flops = direct,
                             .bytes = lowered + eb * (r.filter_elems + r.write_elems),
                             .e_algo = kExplicitSgemm,
                             .work = r.work,
                             .depth = r.depth,
                             .tensor = true});
        return c;
      }
      break;
    case ConvOp::BackwardData:
      if (algo == "algo_0") return single_kernel(r, direct, kBwdDataAlgo0, 0, eb, false);
      if (algo == "algo_1") return single_kernel(r, direct, kBwdDataAlgo1, index_buffer, eb, true);
      break;
    case ConvOp::BackwardFilter:
      if (algo == "algo_0") return single_kernel(r, direct, kBwdFilterAlgo0, 0, eb, false);
      if (algo == "algo_1") return single_kernel(r, direct, kBwdFilterAlgo1, index_buffer, eb, true);
      if (algo == "algo_3") return single_kernel(r, direct, kBwdFilterAlgo3, index_buffer, eb, false);
      break;
  }
  if (algo == "winograd" && op != ConvOp::BackwardFilter) {
    if (!stride1 || s.kh != 3 || s.kw != 3) return unsupported;
    // F(2x2,3x3): 16 multiplies per 2x2 output tile per channel pair.
    const double tiles = ceil_div(r.out_h, 2) * ceil_div(r.out_w, 2);
    const double flops = 2 * b * static_cast<double>(s.k * s.cg()) * tiles * 16;
    return single_kernel(r, flops, kWinogradFused, static_cast<double>(s.kg() * s.cg()) * 16 * kFloat, eb, false);
  }
  *known = false;
  return unsupported;
}

const std::vector<std::string>& conv_algorithms(ConvOp op) {
  static const std::vector<std::string> fwd = {
      "implicit_gemm", "implicit_precomp_gemm", "gemm", "direct", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  static const std::vector<std::string> bwd_data = {"algo_0",     "algo_1",   "fft",
                                                    "fft_tiling", "winograd", "winograd_nonfused"};
  static const std::vector<std::string> bwd_filter = {"algo_0",    "algo_1", "fft", "algo_3", "winograd_nonfused",
                                                      "fft_tiling"};
  switch (op) {
    case ConvOp::Forward:
      return fwd;
    case ConvOp::BackwardData:
      return bwd_data;
    case ConvOp::BackwardFilter:
      return bwd_filter;
  }
  return fwd;
}

bool conv_op_of(TaskKind op, ConvOp* out) {
  if (op == TaskKind::Forward)
    *out = ConvOp::Forward;
  else if (op == TaskKind::BackwardData)
    *out = ConvOp::BackwardData;
  else if (op == TaskKind::BackwardFilter)
    *out = ConvOp::BackwardFilter;
  else
    return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Other layers.

// Memory-bound kernels of non-conv layers; false when the layer has no such op.
bool other_kernels(const GraphLayer& l, TaskKind op, double b, double eb, std::vector<Kernel>* out) {
  double in = 0;
  for (const Shape& s : l.in_shapes) in += b * static_cast<double>(s.elems());
  const double y = b * static_cast<double>(l.out.elems());
  const bool fwd = op == TaskKind::Forward, bwd = op == TaskKind::Backward;
  if (!fwd && !bwd) return false;
  const double flops = b * (fwd ? l.forward_flops : l.backward_data_flops);
  Kernel k{.flops = flops};
  switch (l.type()) {
    case LayerType::Relu:  // backward reads Y and dY, writes dX
      k.bytes = eb * (fwd ? in + y : 2 * y + in);
      break;
    case LayerType::Pool:  // max backward reads X, Y, dY, writes dX; avg reads dY, writes dX
      k.bytes = eb * (fwd || l.spec.pool.mode == PoolMode::Avg ? in + y : 2 * in + 2 * y);
      break;
    case LayerType::BatchNorm:  // two passes: statistics, then normalisation
      k.bytes = eb * (fwd ? 2 * in + y : 3 * in + 2 * y);
      k.resident = eb * (fwd ? in + y : 2 * in + y);  // X and Y; backward X, dY and dX
      k.launches = 2;
      break;
    case LayerType::Lrn:  // backward reads X, Y, dY, writes dX
      k.bytes = eb * (fwd ? in + y : 2 * in + 2 * y);
      break;
    case LayerType::Dropout:  // + one byte of mask per element
      k.bytes = eb * (in + y) + y;
      break;
    case LayerType::Add:
    case LayerType::Concat:
    case LayerType::SoftmaxLoss:
    case LayerType::ChannelShuffle:
      k.bytes = eb * (in + y);
      break;
    case LayerType::Slice:  // backward writes the whole dX (zeros outside the slice)
      k.bytes = eb * (fwd ? 2 * y : y + in);
      break;
    case LayerType::Sigmoid:  // backward reads Y (or X) and dY, writes dX
    case LayerType::HardSigmoid:
    case LayerType::HardSwish:
    case LayerType::Silu:
    case LayerType::Clip:
    case LayerType::Gelu:
      k.bytes = eb * (fwd ? in + y : 3 * y);
      break;
    case LayerType::Mul:  // in = X + S; backward reads X, S, dY, writes dX and dS
      k.bytes = eb * (fwd ? in + y : 2 * in + y);
      k.launches = fwd ? 1 : 2;
      break;
    case LayerType::Scale:  // backward: dgamma (a reduction over the batch and plane) and dX
      k.bytes = eb * (fwd ? in + y : 2 * in + y);
      k.launches = fwd ? 1 : 2;
      break;
    case LayerType::LayerNorm:  // as bn: statistics, then normalisation
      k.bytes = eb * (fwd ? 2 * in + y : 3 * in + 2 * y);
      k.resident = eb * (fwd ? in + y : 2 * in + y);
      k.launches = 2;
      break;
    case LayerType::Input:
    case LayerType::Conv:
    case LayerType::Fc:
      return false;
  }
  out->push_back(k);
  return true;
}

// fc as an SGEMM (a 1x1 convolution over a 1x1 image).
bool fc_kernels(const GraphLayer& l, TaskKind op, double b, double eb, std::vector<Kernel>* out) {
  const double in_f = static_cast<double>(l.in_shapes.at(0).elems()), out_f = static_cast<double>(l.out.elems());
  const double x = b * in_f, y = b * out_f, w = static_cast<double>(l.weight_elems);
  Kernel k{.bytes = eb * (x + y + w), .e_algo = kExplicitSgemm, .tensor = true};
  if (op == TaskKind::Forward) {
    k.flops = b * l.forward_flops;
    k.work = y;
    k.depth = in_f;
  } else if (op == TaskKind::BackwardData) {
    k.flops = b * l.backward_data_flops;
    k.work = x;
    k.depth = out_f;
  } else if (op == TaskKind::BackwardFilter) {
    k.flops = b * l.backward_filter_flops;
    k.work = std::max(w, y);
  } else {
    return false;
  }
  out->push_back(k);
  return true;
}

Measurement failed(const std::string& reason) {
  Measurement m;
  m.status = "failed: " + reason;
  return m;
}

class ModelRunner final : public Runner {
 public:
  explicit ModelRunner(const ModelDeviceSpec& spec) : spec_(spec) {}

  DeviceInfo device() override {
    DeviceInfo d;
    d.kind = "model";
    d.name = spec_.fitted.empty()
                 ? fmt::format("model {} ({}, datasheet)", spec_.name, spec_.full_name)
                 : fmt::format("model {} ({}, datasheet x per-class factors fitted to measured profiles)", spec_.name,
                               spec_.full_name);
    d.memory_bytes = spec_.memory_bytes;
    d.peak_flops = spec_.fp32_flops;
    d.versions["model"] = kModelVersion;
    if (!spec_.fitted.empty()) d.versions["model_fitted_from"] = spec_.fitted_from;
    return d;
  }

  std::string source() const override { return "model:" + spec_.name; }

  std::vector<std::string> algorithms(const Graph& g, int layer, TaskKind op) override {
    if (layer < 0 || layer >= static_cast<int>(g.layers.size())) return {};
    const GraphLayer& l = g.layers[layer];
    if (!layer_has_task(l, op)) return {};
    if (op == TaskKind::Update) return {"sgd"};
    ConvOp cop;
    if (l.type() == LayerType::Conv && conv_op_of(op, &cop)) return conv_algorithms(cop);
    return {"default"};
  }

  Measurement measure(const Graph& g, int layer, TaskKind op, const std::string& algo, std::int64_t batch,
                      int repeats) override {
    Measurement m = modelled(g, layer, op, algo, batch, repeats);
    if (m.status != "ok" || spec_.fitted.empty() || g.precision != Precision::FP32) return m;
    const char* type = layer_type_name(g.layers[static_cast<std::size_t>(layer)].type());
    for (const FittedScale& f : spec_.fitted)
      if (f.type == type && f.op == task_kind_name(op)) m.seconds *= f.factor;
    return m;
  }

  std::vector<TransferPoint> measure_transfers(bool host_to_device, const std::vector<std::int64_t>& sizes) override {
    const double bw = host_to_device ? spec_.h2d_bandwidth : spec_.d2h_bandwidth;
    std::vector<TransferPoint> points;
    for (std::int64_t s : sizes) points.push_back({s, spec_.link_latency_s + static_cast<double>(s) / bw});
    return points;
  }

  bool measure_duplex() override { return spec_.duplex; }

 private:
  // The datasheet model's cost (the top of model_device.h).
  Measurement modelled(const Graph& g, int layer, TaskKind op, const std::string& algo, std::int64_t batch,
                       int /*repeats*/) const {
    if (layer < 0 || layer >= static_cast<int>(g.layers.size())) return failed(fmt::format("no layer {}", layer));
    const GraphLayer& l = g.layers[layer];
    const char* type = layer_type_name(l.type());
    if (op == TaskKind::Update) {
      if (algo != "sgd") return failed(fmt::format("unknown algorithm \"{}\" for update", algo));
      if (!l.has_weights()) return failed(fmt::format("a {} layer has no weights to update", type));
      // Read the weight and its gradient, write the weight.
      // At a low-precision storage, conv and fc also write their weights' copy.
      Kernel k{.bytes = 3.0 * static_cast<double>(l.params() * g.dtype_bytes) +
                        static_cast<double>(g.weight_copy_bytes(layer))};
      return ok({k}, 0, g.precision);
    }
    if (batch < 1) return failed(fmt::format("micro-batch {} (must be at least 1)", batch));
    const double b = static_cast<double>(batch);
    std::vector<Kernel> kernels;
    if (l.type() == LayerType::Conv) {
      ConvOp cop;
      if (!conv_op_of(op, &cop)) return failed(fmt::format("a conv layer has no op \"{}\"", task_kind_name(op)));
      bool known = false;
      ConvCost c = conv_cost(l, cop, algo, b, g.precision, &known);
      if (!known) return failed(fmt::format("unknown algorithm \"{}\" for conv {}", algo, task_kind_name(op)));
      if (!c.supported) {
        Measurement m;
        m.status = "unsupported";
        return m;
      }
      const ConvRoles r = conv_roles(conv_shape(l), cop, b);
      const double eb = storage_bytes(storage_of(g.precision));
      const double resident = eb * (r.read_elems + r.write_elems) + c.workspace;
      Measurement m = ok(c.kernels, c.workspace, g.precision);
      if (resident > static_cast<double>(spec_.memory_bytes)) {
        m.status = "out_of_memory";
        m.seconds = 0;
      }
      return m;
    }
    if (algo != "default")
      return failed(fmt::format("unknown algorithm \"{}\" for {} {}", algo, type, task_kind_name(op)));
    const double eb = storage_bytes(storage_of(g.precision));
    const bool has_op =
        l.type() == LayerType::Fc ? fc_kernels(l, op, b, eb, &kernels) : other_kernels(l, op, b, eb, &kernels);
    if (!has_op) return failed(fmt::format("a {} layer has no op \"{}\"", type, task_kind_name(op)));
    // Out of memory as a convolution is (above): its operands do not fit the device at once.
    double resident = 0;
    for (const Kernel& k : kernels) resident = std::max(resident, k.resident > 0 ? k.resident : k.bytes);
    Measurement m = ok(kernels, 0, g.precision);
    if (resident > static_cast<double>(spec_.memory_bytes)) {
      m.status = "out_of_memory";
      m.seconds = 0;
    }
    return m;
  }

  Measurement ok(const std::vector<Kernel>& kernels, double workspace, Precision p) const {
    Measurement m;
    for (const Kernel& k : kernels) m.seconds += kernel_seconds(spec_, k, p);
    m.spread = 0;
    m.workspace_bytes = static_cast<std::int64_t>(std::ceil(workspace));
    return m;
  }

  ModelDeviceSpec spec_;
};

}  // namespace

const ModelDeviceSpec* find_model_device(const std::string& name) {
  std::string n = name.starts_with("model:") ? name.substr(6) : name;
  for (const auto& d : all_devices())
    if (d.name == n) return &d;
  return nullptr;
}

std::vector<std::string> model_device_names() {
  std::vector<std::string> names;
  for (const auto& d : all_devices()) names.push_back(d.name);
  return names;
}

std::unique_ptr<Runner> make_model_runner(const std::string& name) {
  const ModelDeviceSpec* spec = find_model_device(name);
  if (!spec) {
    std::string known;
    for (const auto& n : model_device_names()) known += (known.empty() ? "model:" : ", model:") + n;
    throw UserError("", "--device", fmt::format("unknown model device \"{}\" (known: {})", name, known));
  }
  return std::make_unique<ModelRunner>(*spec);
}

}  // namespace ucplan
