// GPU self-check of the CUDA backend against the CPU reference kernels (STYLE.md #8): every op on
// small shapes, every cuDNN convolution algorithm, accumulation (beta = 1), micro-batches by
// pointer offset (also at 4-byte-aligned offsets), the descriptor cache, every op but conv, fc and
// sgd at each storage type (fp32, bf16, fp16: a context of that data type against the CPU's
// emulation of it), 16-bit conv and fc, the device's 16-bit conversions against
// executor/cpu/half.h, and a smoke test of the CUDA Runner (measure, transfers, duplex, cuDNN's
// own ranking). Any mismatch or unexpected
// failure exits 1. Without a device: "SKIP: ..." and exit 0, or with --require-device (or
// UCPLAN_REQUIRE_GPU=1) "FAIL: ..." and exit 3; a driver too old for the runtime always fails
// (exit 4). See cuda_check.h check_program_device_gate().
//
// Built as build/bin/ucplan-gpu-check wherever CUDA is (executor/CMakeLists.txt); run it on a GPU
// machine (UCPLAN_GPU_CHECK_VERBOSE=1 prints every comparison).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "executor/cpu/half.h"
#include "executor/cpu/kernels.h"
#include "executor/cuda/cuda_check.h"
#include "executor/cuda/kernels_cuda.h"
#include "executor/cuda/modern_kernels.h"
#include "executor/cuda/small_kernels.h"
#include "planner/model/errors.h"
#include "planner/ir/graph.h"
#include "planner/model/network.h"
#include "profiler/check_networks.h"
#include "profiler/cuda/cuda_runner.h"

namespace {

using namespace ucplan;
using cuda::Context;
using cuda::DeviceBuffer;

int g_failures = 0;
int g_checks = 0;
bool g_verbose = false;

std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// Copies on the context's (non-blocking) stream: the legacy default stream that plain cudaMemcpy
// uses does not order itself with it.
Context* g_ctx = nullptr;

template <typename T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<std::size_t>(v.size() * sizeof(T), 1));
  UCPLAN_CUDA(cudaMemcpyAsync(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice, g_ctx->stream()));
  UCPLAN_CUDA(cudaStreamSynchronize(g_ctx->stream()));
  return b;
}

template <typename T>
std::vector<T> download(Context& ctx, const DeviceBuffer& b, std::size_t n) {
  std::vector<T> v(n);
  UCPLAN_CUDA(cudaMemcpyAsync(v.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost, ctx.stream()));
  UCPLAN_CUDA(cudaStreamSynchronize(ctx.stream()));
  return v;
}

// ---- 16-bit storage ----

// The same values as the 16-bit type holds, as floats (what the CPU emulation computes on).
std::vector<float> rounded(std::vector<float> v, cpu::Half t) {
  for (auto& x : v) x = cpu::round_to(t, x);
  return v;
}
DeviceBuffer upload16(const std::vector<float>& v, cpu::Half t) {
  std::vector<std::uint16_t> h(v.size());
  cpu::narrow(t, v.data(), h.data(), static_cast<std::int64_t>(v.size()));
  return upload(h);
}
std::vector<float> download16(Context& ctx, const DeviceBuffer& b, std::size_t n, cpu::Half t) {
  const auto h = download<std::uint16_t>(ctx, b, n);
  std::vector<float> v(n);
  cpu::widen(t, h.data(), v.data(), static_cast<std::int64_t>(n));
  return v;
}

// The element type of a check's activations and gradients (kernels_cuda.h DataType), and the CPU
// emulation of it (executor/cpu_ops.h run_emulated): 16-bit inputs widened exactly, the FP32 CPU
// kernel, what it writes rounded to nearest even. FP32 operands (parameters, statistics, the loss's
// probabilities, dgamma) are plain floats at every type.
struct Elem {
  cuda::DataType type = cuda::DataType::Float;
  bool half() const { return type != cuda::DataType::Float; }
  cpu::Half half_type() const { return type == cuda::DataType::BFloat16 ? cpu::Half::BF16 : cpu::Half::FP16; }
  std::string name() const { return !half() ? "fp32" : type == cuda::DataType::BFloat16 ? "bf16" : "fp16"; }
  // The values the type holds: random inputs as the device stores them, and FP32 CPU results as
  // the emulation stores them.
  std::vector<float> held(std::vector<float> v) const { return half() ? rounded(std::move(v), half_type()) : v; }
  DeviceBuffer up(const std::vector<float>& v) const { return half() ? upload16(v, half_type()) : upload(v); }
  DeviceBuffer buffer(std::size_t n) const { return DeviceBuffer(n * cuda::element_bytes(type)); }
  std::vector<float> down(Context& ctx, const DeviceBuffer& b, std::size_t n) const {
    return half() ? download16(ctx, b, n, half_type()) : download<float>(ctx, b, n);
  }
  // The tolerance of a stored 16-bit result whose FP32 check allows `fp32`: exact stays exact (the
  // same FP32 value rounds the same way); a difference may move the rounding by one unit in the
  // last place, 2u relative (u: 2^-8 at bf16, 2^-11 at fp16).
  double tol(double fp32) const {
    if (!half() || fp32 == 0) return fp32;
    return fp32 + 2 * (type == cuda::DataType::BFloat16 ? 0x1p-8 : 0x1p-11);
  }
};

// max |ref - got| / max(max |ref|, 1e-6): the error relative to the data's scale.
void check(const std::string& what, const std::vector<float>& ref, const std::vector<float>& got, double tol) {
  ++g_checks;
  double scale = 1e-6, err = 0;
  for (float r : ref) scale = std::max(scale, static_cast<double>(std::fabs(r)));
  bool nan = false;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i]) != std::isnan(ref[i])) nan = true;
    if (!std::isnan(ref[i])) err = std::max(err, std::fabs(static_cast<double>(ref[i]) - got[i]));
  }
  const double rel = err / scale;
  const bool ok = !nan && rel <= tol;
  if (!ok) ++g_failures;
  if (!ok || g_verbose)
    std::printf("%s %-60s rel err %.3g (tol %.1g)%s\n", ok ? "ok  " : "FAIL", what.c_str(), rel, tol,
                nan ? " NaN mismatch" : "");
}

void check_bytes(const std::string& what, const std::vector<std::uint8_t>& ref, const std::vector<std::uint8_t>& got) {
  ++g_checks;
  const bool ok = ref == got;
  if (!ok) ++g_failures;
  if (!ok || g_verbose) std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
}

// A check of `total` values of which `wrong` differ.
void check_count(const std::string& what, int wrong, std::size_t total) {
  ++g_checks;
  if (wrong) ++g_failures;
  if (wrong || g_verbose)
    std::printf("%s %s: %d of %zu values differ\n", wrong ? "FAIL" : "ok  ", what.c_str(), wrong, total);
}

void fail(const std::string& what) {
  ++g_checks;
  ++g_failures;
  std::printf("FAIL %s\n", what.c_str());
}

std::int64_t window_out(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, bool ceil_mode) {
  std::int64_t num = in + 2 * p - k;
  std::int64_t out = ceil_mode ? (num + s - 1) / s + 1 : num / s + 1;
  if (ceil_mode && (out - 1) * s >= in + p) --out;
  return out;
}

bool approximate_algo(const char* name) {
  return std::strncmp(name, "fft", 3) == 0 || std::strncmp(name, "winograd", 8) == 0;
}

// ---- convolution ----

void check_conv(Context& ctx, const cpu::ConvDims& d, const std::string& label) {
  const std::int64_t ho = d.ho(), wo = d.wo();
  const std::size_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.k * ho * wo, nw = d.k * (d.c / d.groups) * d.kh * d.kw;
  auto x = random_floats(nx, 1), w = random_floats(nw, 2), b = random_floats(d.k, 3), dy = random_floats(ny, 4);
  auto dx0 = random_floats(nx, 5), dw0 = random_floats(nw, 6), db0 = random_floats(d.k, 7);
  // CPU reference (direct).
  std::vector<char> cws(static_cast<std::size_t>(
      std::max<std::int64_t>({cpu::conv_workspace_bytes(d, cpu::ConvOp::Forward, cpu::ConvAlgo::Direct),
                              cpu::conv_workspace_bytes(d, cpu::ConvOp::BackwardData, cpu::ConvAlgo::Direct),
                              cpu::conv_workspace_bytes(d, cpu::ConvOp::BackwardFilter, cpu::ConvAlgo::Direct), 1})));
  std::vector<float> y_ref(ny), dx_ref = dx0, dw_ref = dw0, db_ref = db0;
  cpu::conv_forward(d, cpu::ConvAlgo::Direct, x.data(), w.data(), d.bias ? b.data() : nullptr, y_ref.data(),
                    cws.data());
  cpu::conv_backward_data(d, cpu::ConvAlgo::Direct, dy.data(), w.data(), dx_ref.data(), true, cws.data());
  cpu::conv_backward_filter(d, cpu::ConvAlgo::Direct, x.data(), dy.data(), dw_ref.data(),
                            d.bias ? db_ref.data() : nullptr, cws.data());
  auto X = upload(x), W = upload(w), B = upload(b), DY = upload(dy);
  for (auto op : {cuda::ConvOp::Forward, cuda::ConvOp::BackwardData, cuda::ConvOp::BackwardFilter}) {
    int supported = 0;
    for (cuda::ConvAlgo a : cuda::conv_algorithms(op)) {
      const std::string what = label + " " + cuda::conv_op_name(op) + " " + cuda::conv_algo_name(a);
      const double tol = approximate_algo(cuda::conv_algo_name(a)) ? 2e-3 : 1e-4;
      try {
        std::size_t ws = 0;
        if (!cuda::conv_workspace(ctx, d, a, &ws)) {
          if (g_verbose) std::printf("     %-60s unsupported\n", what.c_str());
          continue;
        }
        DeviceBuffer WS(ws);
        if (op == cuda::ConvOp::Forward) {
          DeviceBuffer Y(ny * sizeof(float));
          cuda::conv_forward(ctx, d, a, X.as<float>(), W.as<float>(), B.as<float>(), Y.as<float>(), WS.get(), ws);
          check(what, y_ref, download<float>(ctx, Y, ny), tol);
        } else if (op == cuda::ConvOp::BackwardData) {
          auto DX = upload(dx0);  // accumulate = true: dx0 + dconv
          cuda::conv_backward_data(ctx, d, a, DY.as<float>(), W.as<float>(), DX.as<float>(), true, WS.get(), ws);
          check(what + " (beta 1)", dx_ref, download<float>(ctx, DX, nx), tol);
        } else {
          auto DW = upload(dw0), DB = upload(db0);  // always beta = 1
          cuda::conv_backward_filter(ctx, d, a, X.as<float>(), DY.as<float>(), DW.as<float>(), DB.as<float>(), WS.get(),
                                     ws);
          auto dw = download<float>(ctx, DW, nw);
          check(what + " dw", dw_ref, dw, tol);
          if (d.bias) check(what + " db", db_ref, download<float>(ctx, DB, d.k), 1e-5);
          // cuDNN's perf results say whether the algorithm is deterministic here; the table of
          // its documentation is only the fallback (and a disagreement is worth a note).
          const std::optional<bool> said = cuda::conv_deterministic(ctx, d, a);
          if (said && *said != cuda::conv_algo_deterministic(a))
            std::printf("note %-60s cuDNN reports it %sdeterministic, its documentation the opposite\n", what.c_str(),
                        *said ? "" : "non");
          if (said.value_or(cuda::conv_algo_deterministic(a))) {  // the same bits on a second run
            auto DW2 = upload(dw0), DB2 = upload(db0);
            cuda::conv_backward_filter(ctx, d, a, X.as<float>(), DY.as<float>(), DW2.as<float>(), DB2.as<float>(),
                                       WS.get(), ws);
            check(what + " dw run to run", dw, download<float>(ctx, DW2, nw), 0);
          }
        }
        ++supported;
      } catch (const cuda::CudaError& e) {
        if (e.not_supported()) {
          std::printf("note %-60s workspace query ok but the call is unsupported: %s\n", what.c_str(), e.what());
          continue;
        }
        fail(what + ": " + e.what());
      }
    }
    if (supported == 0) fail(label + " " + cuda::conv_op_name(op) + ": no algorithm supported");
  }

  // Micro-batches by pointer offset: [(algo, 1), (algo, n - 1)] for every algorithm, so the
  // second call starts at an offset of c*h*w floats (only 4-byte aligned when that is odd).
  if (d.n < 2) return;
  for (auto op : {cuda::ConvOp::Forward, cuda::ConvOp::BackwardData, cuda::ConvOp::BackwardFilter}) {
    for (cuda::ConvAlgo a : cuda::conv_algorithms(op)) {
      const std::vector<cuda::MicroConfig> config{{a, 1}, {a, d.n - 1}};
      const std::string what = label + " micro " + cuda::conv_op_name(op) + " " + cuda::conv_algo_name(a) + " [1," +
                               std::to_string(d.n - 1) + "]";
      const double tol = approximate_algo(cuda::conv_algo_name(a)) ? 2e-3 : 1e-4;
      try {
        std::size_t ws = 0;
        if (!cuda::conv_workspace_micro(ctx, d, config, &ws)) continue;
        DeviceBuffer WS(ws);
        if (op == cuda::ConvOp::Forward) {
          DeviceBuffer Y(ny * sizeof(float));
          cuda::conv_forward_micro(ctx, d, config, X.as<float>(), W.as<float>(), B.as<float>(), Y.as<float>(), WS.get(),
                                   ws);
          check(what, y_ref, download<float>(ctx, Y, ny), tol);
        } else if (op == cuda::ConvOp::BackwardData) {
          auto DX = upload(dx0);
          cuda::conv_backward_data_micro(ctx, d, config, DY.as<float>(), W.as<float>(), DX.as<float>(), true, WS.get(),
                                         ws);
          check(what, dx_ref, download<float>(ctx, DX, nx), tol);
        } else {
          auto DW = upload(dw0), DB = upload(db0);
          cuda::conv_backward_filter_micro(ctx, d, config, X.as<float>(), DY.as<float>(), DW.as<float>(),
                                           DB.as<float>(), WS.get(), ws);
          check(what + " dw", dw_ref, download<float>(ctx, DW, nw), tol);
          if (d.bias) check(what + " db", db_ref, download<float>(ctx, DB, d.k), 1e-5);
        }
      } catch (const cuda::CudaError& e) {
        // Worth knowing: an algorithm that refuses a 4-byte-aligned micro-batch pointer.
        if (e.not_supported())
          std::printf("note %-60s unsupported at this offset: %s\n", what.c_str(), e.what());
        else
          fail(what + ": " + e.what());
      }
    }
  }
}

// ---- pooling ----

void check_pool(Context& ctx, const Elem& e, cpu::PoolDims d, bool ceil_mode, const std::string& label,
                bool ties = false) {
  d.ho = window_out(d.h, d.kh, d.sh, d.ph, ceil_mode);
  d.wo = window_out(d.w, d.kw, d.sw, d.pw, ceil_mode);
  const std::size_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.c * d.ho * d.wo;
  auto x = e.held(ties ? std::vector<float>(nx, 0.5f) : random_floats(nx, 11));
  auto dy = e.held(random_floats(ny, 12)), dx0 = e.held(random_floats(nx, 13));
  std::vector<float> y_ref(ny), dx_ref = dx0;
  cpu::pool_forward(d, x.data(), y_ref.data());
  y_ref = e.held(y_ref);
  cpu::pool_backward(d, x.data(), y_ref.data(), dy.data(), dx_ref.data(), true);
  dx_ref = e.held(dx_ref);
  auto X = e.up(x), DY = e.up(dy), DX = e.up(dx0);
  DeviceBuffer Y = e.buffer(ny);
  cuda::pool_forward(ctx, d, X.as<float>(), Y.as<float>());
  auto y = e.down(ctx, Y, ny);
  check(label + " forward", y_ref, y, d.max ? 0 : e.tol(1e-6));
  cuda::pool_backward(ctx, d, X.as<float>(), Y.as<float>(), DY.as<float>(), DX.as<float>(), true);
  check(label + " backward (beta 1)", dx_ref, e.down(ctx, DX, nx), e.tol(1e-6));
  if (!d.max) {  // average: x and y may be absent
    auto DX2 = e.up(dx0);
    cuda::pool_backward(ctx, d, nullptr, nullptr, DY.as<float>(), DX2.as<float>(), true);
    check(label + " backward without x, y", dx_ref, e.down(ctx, DX2, nx), e.tol(1e-6));
  }
}

// cuDNN (floor sizes) and the small kernels (ceil sizes cuDNN does not produce).
void check_pools(Context& ctx, const Elem& e) {
  const std::string t = e.name() + " ";
  check_pool(ctx, e,
             {.n = 2, .c = 3, .h = 9, .w = 9, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .max = true}, false,
             t + "max 3x3 s2 p1");
  check_pool(ctx, e, {.n = 2, .c = 3, .h = 8, .w = 8, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .max = true}, true,
             t + "max ceil 8->4");
  check_pool(ctx, e,
             {.n = 2, .c = 3, .h = 9, .w = 9, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .max = false},
             false, t + "avg incl pad");
  check_pool(ctx, e,
             {.n = 2,
              .c = 3,
              .h = 9,
              .w = 9,
              .kh = 3,
              .kw = 3,
              .sh = 2,
              .sw = 2,
              .ph = 1,
              .pw = 1,
              .max = false,
              .count_include_pad = false},
             false, t + "avg excl pad");
  check_pool(ctx, e,
             {.n = 2, .c = 3, .h = 8, .w = 8, .kh = 3, .kw = 3, .sh = 2, .sw = 2, .ph = 1, .pw = 1, .max = false}, true,
             t + "avg ceil incl pad");
  check_pool(ctx, e, {.n = 1, .c = 2, .h = 6, .w = 6, .kh = 2, .kw = 2, .sh = 1, .sw = 1, .max = true}, false,
             t + "max ties", true);
  check_pool(ctx, e, {.n = 2, .c = 4, .h = 7, .w = 7, .kh = 7, .kw = 7, .max = false}, false, t + "global avg 7x7");
}

// ---- 16-bit conv and fc (issue 15) ----

// A 16-bit context's conv (HALF/BFLOAT16 descriptors, FLOAT compute, tensor-op math) and fc
// (cublasGemmEx, CUBLAS_COMPUTE_32F) against FP32 CPU kernels on the same 16-bit values, the
// results rounded as the CPU emulation rounds them: the two may differ by the accumulation order
// and one rounding of the result, a few units of the type's roundoff.
void check_half(cuda::DataType type) {
  const cpu::Half t = type == cuda::DataType::BFloat16 ? cpu::Half::BF16 : cpu::Half::FP16;
  const std::string name = type == cuda::DataType::BFloat16 ? "bf16" : "fp16";
  const double tol = 8 * (t == cpu::Half::BF16 ? 0x1p-8 : 0x1p-11);
  cuda::Stream stream;
  Context ctx(stream.get(), false, type, true);
  Context* outer = g_ctx;
  g_ctx = &ctx;
  const cpu::ConvDims d{.n = 4, .c = 8, .h = 9, .w = 9, .k = 16, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .bias = true};
  const std::size_t nx = d.n * d.c * d.h * d.w, ny = d.n * d.k * d.ho() * d.wo(), nw = d.k * d.c * d.kh * d.kw;
  const auto x = rounded(random_floats(nx, 21), t), w = rounded(random_floats(nw, 22), t),
             b = rounded(random_floats(d.k, 23), t), dy = rounded(random_floats(ny, 24), t);
  std::vector<char> cws(static_cast<std::size_t>(
      std::max<std::int64_t>({cpu::conv_workspace_bytes(d, cpu::ConvOp::Forward, cpu::ConvAlgo::Direct),
                              cpu::conv_workspace_bytes(d, cpu::ConvOp::BackwardData, cpu::ConvAlgo::Direct),
                              cpu::conv_workspace_bytes(d, cpu::ConvOp::BackwardFilter, cpu::ConvAlgo::Direct), 1})));
  std::vector<float> y_ref(ny), dx_ref(nx), dw_ref(nw, 0.0f), db_ref(d.k, 0.0f);
  cpu::conv_forward(d, cpu::ConvAlgo::Direct, x.data(), w.data(), b.data(), y_ref.data(), cws.data());
  cpu::conv_backward_data(d, cpu::ConvAlgo::Direct, dy.data(), w.data(), dx_ref.data(), false, cws.data());
  cpu::conv_backward_filter(d, cpu::ConvAlgo::Direct, x.data(), dy.data(), dw_ref.data(), db_ref.data(), cws.data());
  auto X = upload16(x, t), W = upload16(w, t), B = upload16(b, t), DY = upload16(dy, t);
  DeviceBuffer Y(ny * 2), DX(nx * 2), DW(nw * 2), DB(static_cast<std::size_t>(d.k) * 2);
  UCPLAN_CUDA(cudaMemsetAsync(DW.get(), 0, nw * 2, ctx.stream()));
  UCPLAN_CUDA(cudaMemsetAsync(DB.get(), 0, static_cast<std::size_t>(d.k) * 2, ctx.stream()));
  cuda::ConvAlgo fwd, data, filter;
  cuda::parse_conv_algo(cuda::ConvOp::Forward, "implicit_precomp_gemm", &fwd);
  cuda::parse_conv_algo(cuda::ConvOp::BackwardData, "algo_1", &data);
  cuda::parse_conv_algo(cuda::ConvOp::BackwardFilter, "algo_1", &filter);
  std::size_t need = 0, most = 0;
  for (cuda::ConvAlgo a : {fwd, data, filter}) {
    if (!cuda::conv_workspace(ctx, d, a, &need)) fail(name + " conv: " + cuda::conv_algo_name(a) + " unsupported");
    most = std::max(most, need);
  }
  DeviceBuffer WS(std::max<std::size_t>(most, 1));
  auto f = [](const DeviceBuffer& buf) { return buf.as<float>(); };  // 16-bit elements behind float*
  cuda::conv_forward(ctx, d, fwd, f(X), f(W), f(B), f(Y), WS.get(), most);
  cuda::conv_backward_data(ctx, d, data, f(DY), f(W), f(DX), false, WS.get(), most);
  cuda::conv_backward_filter(ctx, d, filter, f(X), f(DY), f(DW), f(DB), WS.get(), most);
  check(name + " conv forward", rounded(y_ref, t), download16(ctx, Y, ny, t), tol);
  check(name + " conv backward_data", rounded(dx_ref, t), download16(ctx, DX, nx, t), tol);
  check(name + " conv backward_filter", rounded(dw_ref, t), download16(ctx, DW, nw, t), tol);
  check(name + " conv backward_filter bias", rounded(db_ref, t), download16(ctx, DB, d.k, t), tol);
  // fc: y and dx in 16 bits, dw and db in FP32 (accumulated: beta = 1 on zeros).
  const cpu::FcDims fd{6, 40, 10, true};
  const auto fx = rounded(random_floats(fd.n * fd.in, 31), t), fw = rounded(random_floats(fd.out * fd.in, 32), t),
             fb = rounded(random_floats(fd.out, 33), t), fdy = rounded(random_floats(fd.n * fd.out, 34), t);
  std::vector<float> fy_ref(fd.n * fd.out), fdx_ref(fd.n * fd.in), fdw_ref(fd.out * fd.in, 0.0f), fdb_ref(fd.out, 0.0f);
  cpu::fc_forward(fd, fx.data(), fw.data(), fb.data(), fy_ref.data());
  cpu::fc_backward_data(fd, fdy.data(), fw.data(), fdx_ref.data(), false);
  cpu::fc_backward_filter(fd, fx.data(), fdy.data(), fdw_ref.data(), fdb_ref.data());
  auto FX = upload16(fx, t), FW = upload16(fw, t), FB = upload16(fb, t), FDY = upload16(fdy, t);
  DeviceBuffer FY(fy_ref.size() * 2), FDX(fdx_ref.size() * 2);
  auto FDW = upload(std::vector<float>(fdw_ref.size(), 0.0f)), FDB = upload(std::vector<float>(fd.out, 0.0f));
  cuda::fc_forward(ctx, fd, f(FX), f(FW), f(FB), f(FY));
  cuda::fc_backward_data(ctx, fd, f(FDY), f(FW), f(FDX), false);
  cuda::fc_backward_filter(ctx, fd, f(FX), f(FDY), f(FDW), f(FDB));
  check(name + " fc forward", rounded(fy_ref, t), download16(ctx, FY, fy_ref.size(), t), tol);
  check(name + " fc backward_data", rounded(fdx_ref, t), download16(ctx, FDX, fdx_ref.size(), t), tol);
  check(name + " fc backward_filter (FP32)", fdw_ref, download<float>(ctx, FDW, fdw_ref.size()), 1e-5);
  check(name + " fc bias gradient (FP32)", fdb_ref, download<float>(ctx, FDB, fdb_ref.size()), 1e-5);
  g_ctx = outer;
}

// ---- the other layers ----
// At each element type: the kernel on the device against the CPU kernel on the same values, its
// 16-bit results rounded as the emulation stores them (Elem). Bitwise checks stay bitwise.

void check_layers(Context& ctx, const Elem& e) {
  const std::string t = e.name() + " ";
  // relu
  {
    const std::int64_t n = 1000;
    auto x = e.held(random_floats(n, 21)), dy = e.held(random_floats(n, 22)), dx0 = e.held(random_floats(n, 23));
    std::vector<float> y_ref(n), dx_ref = dx0;
    cpu::relu_forward(n, x.data(), y_ref.data());
    cpu::relu_backward(n, y_ref.data(), dy.data(), dx_ref.data(), true);
    auto X = e.up(x), DY = e.up(dy), DX = e.up(dx0);
    DeviceBuffer Y = e.buffer(n);
    cuda::relu_forward(ctx, n, X.as<float>(), Y.as<float>());
    check(t + "relu forward", y_ref, e.down(ctx, Y, n), 0);
    cuda::relu_backward(ctx, n, Y.as<float>(), DY.as<float>(), DX.as<float>(), true);
    check(t + "relu backward (beta 1)", e.held(dx_ref), e.down(ctx, DX, n), e.tol(1e-7));
  }
  // batch norm: x, y, dy, dx of the type; gamma, beta, saved and their gradients FP32
  {
    cpu::BnDims d{4, 3, 5, 6, 1e-5};
    const std::size_t n = d.n * d.c * d.h * d.w;
    auto x = e.held(random_floats(n, 31, -2, 3)), g = random_floats(d.c, 32, 0.5, 1.5), b = random_floats(d.c, 33);
    auto dy = e.held(random_floats(n, 34)), dx0 = e.held(random_floats(n, 35)), dgb0 = random_floats(2 * d.c, 36);
    std::vector<float> y_ref(n), saved_ref(2 * d.c), dx_ref = dx0, dgb_ref = dgb0, ys_ref(n);
    cpu::bn_forward_training(d, x.data(), g.data(), b.data(), y_ref.data(), saved_ref.data());
    cpu::bn_backward(d, x.data(), g.data(), saved_ref.data(), dy.data(), dx_ref.data(), dgb_ref.data(), true);
    auto X = e.up(x), G = upload(g), B = upload(b), DY = e.up(dy), DX = e.up(dx0), DGB = upload(dgb0);
    DeviceBuffer Y = e.buffer(n), S(2 * d.c * sizeof(float)), YS = e.buffer(n);
    cuda::bn_forward_training(ctx, d, X.as<float>(), G.as<float>(), B.as<float>(), Y.as<float>(), S.as<float>());
    check(t + "bn forward_training y", e.held(y_ref), e.down(ctx, Y, n), e.tol(1e-5));
    check(t + "bn forward_training saved [mean, inv_std]", saved_ref, download<float>(ctx, S, 2 * d.c), 1e-5);
    cuda::bn_backward(ctx, d, X.as<float>(), G.as<float>(), S.as<float>(), DY.as<float>(), DX.as<float>(),
                      DGB.as<float>(), true);
    check(t + "bn backward dx (beta 1)", e.held(dx_ref), e.down(ctx, DX, n), e.tol(1e-4));
    check(t + "bn backward dgamma, dbeta (accumulated)", dgb_ref, download<float>(ctx, DGB, 2 * d.c), 1e-4);
    {  // run to run: cuDNN does not document batch-norm backward as deterministic
      auto dx1 = e.down(ctx, DX, n);
      auto DX2 = e.up(dx0), DGB2 = upload(dgb0);
      cuda::bn_backward(ctx, d, X.as<float>(), G.as<float>(), S.as<float>(), DY.as<float>(), DX2.as<float>(),
                        DGB2.as<float>(), true);
      check(t + "bn backward dx run to run", dx1, e.down(ctx, DX2, n), 0);
    }
    // Recompute from the CPU's saved statistics: the same operations, so the same bits.
    auto SREF = upload(saved_ref);
    cpu::bn_forward_saved(d, x.data(), g.data(), b.data(), saved_ref.data(), ys_ref.data());
    cuda::bn_forward_saved(ctx, d, X.as<float>(), G.as<float>(), B.as<float>(), SREF.as<float>(), YS.as<float>());
    check(t + "bn forward_saved (bitwise)", e.held(ys_ref), e.down(ctx, YS, n), 0);
  }
  // LRN: at FP32 size 5 goes to cuDNN, 4 (even) and 3-with-tiny-k to the small kernels; at 16 bits
  // all go to the small kernels.
  for (const auto& [size, k] : std::vector<std::pair<std::int64_t, double>>{{5, 1.0}, {4, 2.0}, {3, 1e-6}, {1, 1.0}}) {
    cpu::LrnDims d{2, 7, 3, 4, size, 1e-2, 0.75, k};
    const std::size_t n = d.n * d.c * d.h * d.w;
    auto x = e.held(random_floats(n, 41, -3, 3)), dy = e.held(random_floats(n, 42)), dx0 = e.held(random_floats(n, 43));
    std::vector<float> y_ref(n), dx_ref = dx0;
    cpu::lrn_forward(d, x.data(), y_ref.data());
    y_ref = e.held(y_ref);
    cpu::lrn_backward(d, x.data(), y_ref.data(), dy.data(), dx_ref.data(), true);
    auto X = e.up(x), DY = e.up(dy), DX = e.up(dx0);
    DeviceBuffer Y = e.buffer(n);
    const std::string label = t + "lrn size " + std::to_string(size) + " k " + std::to_string(k);
    cuda::lrn_forward(ctx, d, X.as<float>(), Y.as<float>());
    check(label + " forward", y_ref, e.down(ctx, Y, n), e.tol(1e-5));
    cuda::lrn_backward(ctx, d, X.as<float>(), Y.as<float>(), DY.as<float>(), DX.as<float>(), true);
    check(label + " backward (beta 1)", e.held(dx_ref), e.down(ctx, DX, n), e.tol(1e-4));
  }
  // dropout: the same mask as the CPU, bit for bit.
  {
    const std::int64_t n = 3, per = 257, first = 2, count = n * per;
    const double ratio = 0.3;
    auto x = e.held(random_floats(count, 61)), dy = e.held(random_floats(count, 62));
    auto dx0 = e.held(random_floats(count, 63));
    std::vector<float> y_ref(count), dx_ref = dx0, ya_ref(count);
    std::vector<std::uint8_t> mask_ref(count);
    cpu::dropout_forward(n, per, first, ratio, 99, x.data(), y_ref.data(), mask_ref.data());
    cpu::dropout_apply(count, ratio, mask_ref.data(), x.data(), ya_ref.data());
    cpu::dropout_backward(count, ratio, mask_ref.data(), dy.data(), dx_ref.data(), true);
    auto X = e.up(x), DY = e.up(dy), DX = e.up(dx0);
    DeviceBuffer Y = e.buffer(count), YA = e.buffer(count), M(count);
    cuda::dropout_forward(ctx, n, per, first, ratio, 99, X.as<float>(), Y.as<float>(), M.as<std::uint8_t>());
    check_bytes(t + "dropout mask (same as CPU)", mask_ref, download<std::uint8_t>(ctx, M, count));
    check(t + "dropout forward (bitwise)", e.held(y_ref), e.down(ctx, Y, count), 0);
    cuda::dropout_apply(ctx, count, ratio, M.as<std::uint8_t>(), X.as<float>(), YA.as<float>());
    check(t + "dropout apply (bitwise)", e.held(ya_ref), e.down(ctx, YA, count), 0);
    cuda::dropout_backward(ctx, count, ratio, M.as<std::uint8_t>(), DY.as<float>(), DX.as<float>(), true);
    check(t + "dropout backward (beta 1, bitwise)", e.held(dx_ref), e.down(ctx, DX, count), 0);
  }
  // add with 3 and 10 inputs (two groups of the summing kernel; at 16 bits their partial sum in FP32)
  for (int inputs : {3, 10}) {
    const std::int64_t n = 999;
    std::vector<std::vector<float>> xs;
    std::vector<DeviceBuffer> XS;
    std::vector<const float*> xp, xg;
    for (int i = 0; i < inputs; ++i) xs.push_back(e.held(random_floats(n, 70 + i)));
    for (int i = 0; i < inputs; ++i) {
      XS.push_back(e.up(xs[i]));
      xp.push_back(xs[i].data());
      xg.push_back(XS.back().as<float>());
    }
    std::vector<float> y_ref(n);
    cpu::add_forward(n, xp, y_ref.data());
    DeviceBuffer Y = e.buffer(n);
    cuda::add_forward(ctx, n, xg, Y.as<float>());
    check(t + "add forward " + std::to_string(inputs) + " inputs (bitwise)", e.held(y_ref), e.down(ctx, Y, n), 0);
    auto dx0 = e.held(random_floats(n, 80));
    std::vector<float> dx_ref = dx0;
    cpu::add_backward(n, xs[0].data(), dx_ref.data(), true);
    auto DX = e.up(dx0);
    cuda::add_backward(ctx, n, XS[0].as<float>(), DX.as<float>(), true);
    check(t + "add backward (beta 1, bitwise)", e.held(dx_ref), e.down(ctx, DX, n), 0);
  }
  // concat
  {
    const std::int64_t n = 2, hw = 6;
    const std::vector<std::int64_t> cs{2, 3, 1};
    std::vector<std::vector<float>> xs;
    std::vector<DeviceBuffer> XS;
    std::vector<const float*> xp, xg;
    for (std::size_t i = 0; i < cs.size(); ++i) xs.push_back(e.held(random_floats(n * cs[i] * hw, 90 + i)));
    for (auto& v : xs) {
      XS.push_back(e.up(v));
      xp.push_back(v.data());
      xg.push_back(XS.back().as<float>());
    }
    const std::size_t ny = n * 6 * hw;
    std::vector<float> y_ref(ny);
    cpu::concat_forward(n, hw, cs, xp, y_ref.data());
    DeviceBuffer Y = e.buffer(ny);
    cuda::concat_forward(ctx, n, hw, cs, xg, Y.as<float>());
    check(t + "concat forward (bitwise)", y_ref, e.down(ctx, Y, ny), 0);
    for (bool acc : {false, true}) {
      auto dx0 = e.held(random_floats(n * cs[1] * hw, 95));
      std::vector<float> dx_ref = dx0;
      cpu::concat_backward(n, hw, cs, 1, y_ref.data(), dx_ref.data(), acc);
      auto DX = e.up(dx0);
      cuda::concat_backward(ctx, n, hw, cs, 1, Y.as<float>(), DX.as<float>(), acc);
      check(t + "concat backward input 1" + (acc ? " (beta 1)" : ""), e.held(dx_ref), e.down(ctx, DX, dx0.size()), 0);
    }
  }
  // softmax loss: x and dx of the type, prob FP32 (at 16 bits from the loss kernel, not cuDNN)
  {
    const std::int64_t n = 4, k = 10;
    auto x = e.held(random_floats(n * k, 101, -5, 5)), dx0 = e.held(random_floats(n * k, 102));
    std::vector<std::int32_t> labels{3, 0, 9, 5};
    std::vector<float> prob_ref(n * k), dx_ref = dx0;
    const double loss_ref = cpu::softmax_loss_forward(n, k, x.data(), labels.data(), prob_ref.data());
    cpu::softmax_loss_backward(n, k, prob_ref.data(), labels.data(), 0.125, dx_ref.data(), true);
    auto X = e.up(x), L = upload(labels), DX = e.up(dx0);
    DeviceBuffer P(n * k * sizeof(float));
    const double loss = cuda::softmax_loss_forward(ctx, n, k, X.as<float>(), L.as<std::int32_t>(), P.as<float>());
    check(t + "softmax prob", prob_ref, download<float>(ctx, P, n * k), 1e-6);
    check(t + "softmax loss", {static_cast<float>(loss_ref)}, {static_cast<float>(loss)}, 1e-6);
    cuda::softmax_loss_backward(ctx, n, k, P.as<float>(), L.as<std::int32_t>(), 0.125, DX.as<float>(), true);
    check(t + "softmax loss backward (beta 1)", e.held(dx_ref), e.down(ctx, DX, n * k), e.tol(1e-6));
  }
}

// fc and sgd in FP32 (16-bit fc: check_half; sgd updates the FP32 master weights at every precision).
void check_fc_and_sgd(Context& ctx) {
  for (bool bias : {true, false}) {
    cpu::FcDims d{5, 13, 7, bias};
    auto x = random_floats(d.n * d.in, 51), w = random_floats(d.out * d.in, 52), b = random_floats(d.out, 53);
    auto dy = random_floats(d.n * d.out, 54), dx0 = random_floats(d.n * d.in, 55),
         dw0 = random_floats(d.out * d.in, 56), db0 = random_floats(d.out, 57);
    std::vector<float> y_ref(d.n * d.out), dx_ref = dx0, dw_ref = dw0, db_ref = db0;
    cpu::fc_forward(d, x.data(), w.data(), b.data(), y_ref.data());
    cpu::fc_backward_data(d, dy.data(), w.data(), dx_ref.data(), true);
    cpu::fc_backward_filter(d, x.data(), dy.data(), dw_ref.data(), db_ref.data());
    auto X = upload(x), W = upload(w), B = upload(b), DY = upload(dy), DX = upload(dx0), DW = upload(dw0),
         DB = upload(db0);
    DeviceBuffer Y(d.n * d.out * sizeof(float));
    const std::string label = bias ? "fc (bias)" : "fc";
    cuda::fc_forward(ctx, d, X.as<float>(), W.as<float>(), B.as<float>(), Y.as<float>());
    check(label + " forward", y_ref, download<float>(ctx, Y, d.n * d.out), 1e-5);
    cuda::fc_backward_data(ctx, d, DY.as<float>(), W.as<float>(), DX.as<float>(), true);
    check(label + " backward_data (beta 1)", dx_ref, download<float>(ctx, DX, d.n * d.in), 1e-5);
    cuda::fc_backward_filter(ctx, d, X.as<float>(), DY.as<float>(), DW.as<float>(), DB.as<float>());
    check(label + " backward_filter dw (accumulated)", dw_ref, download<float>(ctx, DW, d.out * d.in), 1e-5);
    check(label + " backward_filter db (accumulated)", db_ref, download<float>(ctx, DB, d.out), 1e-5);
  }
  {
    const std::int64_t n = 777;
    auto w = random_floats(n, 111), dw = random_floats(n, 112);
    std::vector<float> w_ref = w;
    cpu::sgd_update(n, 0.05, dw.data(), w_ref.data());
    auto W = upload(w), DW = upload(dw);
    cuda::sgd_update(ctx, n, 0.05, DW.as<float>(), W.as<float>());
    check("sgd (bitwise)", w_ref, download<float>(ctx, W, n), 0);
  }
}

// ---- today's layer types (modern_kernels.cu) ----
// Bitwise where modern_kernels.h promises the CPU's bits. The plane reductions (double sums in a
// warp's order) agree with the CPU's float sums to float rounding, and with cuda::host's emulation
// of the same threads (what tests/test_cuda_modern_host.cpp checks without a GPU) to the bit; they
// are also compared run to run. At 16 bits the emulation is the FP32 host threads on the same
// values, rounded where the result is stored in 16 bits (tests/test_cuda_storage_host.cpp shows
// that the 16-bit host threads give exactly that).

void check_modern_layers(Context& ctx, const Elem& e) {
  const std::string t = e.name() + " ";
  // The point-wise activations over [-8, 8], their kinks and a NaN (check mode's poison).
  {
    using cpu::Activation;
    auto x = random_floats(1000, 121, -8, 8);
    for (float k : {-3.0f, 3.0f, 0.0f, 6.0f, std::nanf("")}) x.push_back(k);
    x = e.held(x);
    const auto n = static_cast<std::int64_t>(x.size());
    auto dy = e.held(random_floats(x.size(), 122)), dx0 = e.held(random_floats(x.size(), 123));
    auto X = e.up(x), DY = e.up(dy);
    DeviceBuffer Y = e.buffer(x.size());
    const std::pair<const char*, cpu::ActivationDims> fs[] = {
        {"sigmoid", {Activation::Sigmoid}},       {"hardsigmoid", {Activation::HardSigmoid, 0.2f, 0.5f}},
        {"hardswish", {Activation::HardSwish}},   {"silu", {Activation::Silu}},
        {"clip", {Activation::Clip, 0.0f, 6.0f}}, {"gelu", {Activation::Gelu}},
        {"gelu tanh", {Activation::GeluTanh}}};
    for (const auto& [name, d] : fs) {
      // CUDA's expf/erff/tanhf differ from glibc's by ulps; the piecewise-linear ones are exact.
      const bool exact = d.f == Activation::HardSigmoid || d.f == Activation::HardSwish || d.f == Activation::Clip;
      const double tol = exact ? 0 : e.tol(2e-6);
      std::vector<float> y_ref(x.size());
      cpu::activation_forward(d, n, x.data(), y_ref.data());
      y_ref = e.held(y_ref);
      cuda::activation_forward(ctx, d, n, X.as<float>(), Y.as<float>());
      check(t + name + " forward" + (exact ? " (bitwise)" : ""), y_ref, e.down(ctx, Y, x.size()), tol);
      const bool reads_y = cpu::activation_backward_reads_y(d.f);
      for (bool acc : {false, true}) {
        std::vector<float> dx_ref = dx0;
        cpu::activation_backward(d, n, reads_y ? y_ref.data() : x.data(), dy.data(), dx_ref.data(), acc);
        auto V = e.up(reads_y ? y_ref : x), DX = e.up(dx0);
        cuda::activation_backward(ctx, d, n, V.as<float>(), DY.as<float>(), DX.as<float>(), acc);
        check(t + name + " backward" + (acc ? " (beta 1)" : ""), e.held(dx_ref), e.down(ctx, DX, x.size()), tol);
      }
    }
  }
  // mul: s of x's shape and per (sample, channel); dx and ds each alone (the other operand absent).
  for (bool per_channel : {false, true}) {
    const cpu::MulDims d{3, 5, 7 * 9, per_channel};
    const std::size_t nx = d.n * d.c * d.plane, ns = per_channel ? d.n * d.c : nx;
    const std::string label = t + (per_channel ? "mul per channel" : "mul");
    auto x = e.held(random_floats(nx, 131)), s = e.held(random_floats(ns, 132)), dy = e.held(random_floats(nx, 133));
    auto dx0 = e.held(random_floats(nx, 134)), ds0 = e.held(random_floats(ns, 135));
    std::vector<float> y_ref(nx), dx_ref = dx0, ds_ref = ds0;
    cpu::mul_forward(d, x.data(), s.data(), y_ref.data());
    cpu::mul_backward(d, x.data(), s.data(), dy.data(), dx_ref.data(), true, ds_ref.data(), true);
    auto X = e.up(x), S = e.up(s), DY = e.up(dy);
    DeviceBuffer Y = e.buffer(nx);
    cuda::mul_forward(ctx, d, X.as<float>(), S.as<float>(), Y.as<float>());
    check(label + " forward (bitwise)", e.held(y_ref), e.down(ctx, Y, nx), 0);
    auto DX = e.up(dx0), DS = e.up(ds0);
    cuda::mul_backward(ctx, d, X.as<float>(), S.as<float>(), DY.as<float>(), DX.as<float>(), true, DS.as<float>(),
                       true);
    check(label + " backward dx (beta 1, bitwise)", e.held(dx_ref), e.down(ctx, DX, nx), 0);
    const auto ds = e.down(ctx, DS, ns);
    check(label + " backward ds (beta 1)", e.held(ds_ref), ds, per_channel ? e.tol(1e-5) : 0);
    std::vector<float> dx_emu = dx0, ds_emu = ds0;
    cuda::host::mul_backward(d, x.data(), s.data(), dy.data(), dx_emu.data(), true, ds_emu.data(), true);
    check(label + " backward ds = host emulation (bitwise)", e.held(ds_emu), ds, 0);
    std::vector<float> dx_ow(nx), ds_ow(ns);
    cpu::mul_backward(d, nullptr, s.data(), dy.data(), dx_ow.data(), false, nullptr, false);
    cpu::mul_backward(d, x.data(), nullptr, dy.data(), nullptr, false, ds_ow.data(), false);
    auto DX2 = e.up(dx0), DS2 = e.up(ds0);
    cuda::mul_backward(ctx, d, nullptr, S.as<float>(), DY.as<float>(), DX2.as<float>(), false, nullptr, false);
    cuda::mul_backward(ctx, d, X.as<float>(), nullptr, DY.as<float>(), nullptr, false, DS2.as<float>(), false);
    check(label + " backward dx alone (bitwise)", e.held(dx_ow), e.down(ctx, DX2, nx), 0);
    check(label + " backward ds alone", e.held(ds_ow), e.down(ctx, DS2, ns), per_channel ? e.tol(1e-5) : 0);
    auto DS3 = e.up(ds0);
    cuda::mul_backward(ctx, d, X.as<float>(), nullptr, DY.as<float>(), nullptr, false, DS3.as<float>(), true);
    check(label + " backward ds run to run", ds, e.down(ctx, DS3, ns), 0);
  }
  // scale: x, y, dy, dx of the type; gamma and dgamma FP32
  {
    const std::int64_t n = 4, c = 6, plane = 5 * 13;
    const std::size_t count = n * c * plane;
    auto x = e.held(random_floats(count, 141)), g = random_floats(c, 142, 0.5, 1.5);
    auto dy = e.held(random_floats(count, 143)), dx0 = e.held(random_floats(count, 144)), dg0 = random_floats(c, 145);
    std::vector<float> y_ref(count), dx_ref = dx0, dg_ref = dg0;
    cpu::scale_forward(n, c, plane, x.data(), g.data(), y_ref.data());
    cpu::scale_backward(n, c, plane, x.data(), g.data(), dy.data(), dx_ref.data(), true, dg_ref.data());
    auto X = e.up(x), G = upload(g), DY = e.up(dy), DX = e.up(dx0), DG = upload(dg0);
    DeviceBuffer Y = e.buffer(count);
    cuda::scale_forward(ctx, n, c, plane, X.as<float>(), G.as<float>(), Y.as<float>());
    check(t + "scale forward (bitwise)", e.held(y_ref), e.down(ctx, Y, count), 0);
    cuda::scale_backward(ctx, n, c, plane, X.as<float>(), G.as<float>(), DY.as<float>(), DX.as<float>(), true,
                         DG.as<float>());
    check(t + "scale backward dx (beta 1, bitwise)", e.held(dx_ref), e.down(ctx, DX, count), 0);
    const auto dg = download<float>(ctx, DG, c);
    check(t + "scale backward dgamma (accumulated)", dg_ref, dg, 1e-5);
    std::vector<float> dg_emu = dg0;
    cuda::host::scale_backward<float>(n, c, plane, x.data(), nullptr, dy.data(), nullptr, false, dg_emu.data());
    check(t + "scale backward dgamma = host emulation (bitwise)", dg_emu, dg, 0);
    auto DG2 = upload(dg0);  // no dx: gamma is not given
    cuda::scale_backward(ctx, n, c, plane, X.as<float>(), nullptr, DY.as<float>(), nullptr, false, DG2.as<float>());
    check(t + "scale backward dgamma without dx, run to run", dg, download<float>(ctx, DG2, c), 0);
  }
  // layer norm: plane 35 (lanes wrap once) and 1x1 with many channels; statistics FP32
  for (const cpu::LnDims d : {cpu::LnDims{3, 6, 5, 7, 1e-5}, cpu::LnDims{4, 48, 1, 1, 1e-6}}) {
    const std::string label = t + "layer norm c " + std::to_string(d.c);
    const std::size_t count = d.n * d.c * d.h * d.w, stats = 2 * d.n * d.h * d.w;
    auto x = e.held(random_floats(count, 151, -2, 3)), gb = random_floats(2 * d.c, 152, 0.5, 1.5);
    auto dy = e.held(random_floats(count, 153)), dx0 = e.held(random_floats(count, 154));
    auto dgb0 = random_floats(2 * d.c, 155);
    std::vector<float> y_ref(count), s_ref(stats), dx_ref = dx0, dgb_ref = dgb0;
    cpu::ln_forward_training(d, x.data(), gb.data(), gb.data() + d.c, y_ref.data(), s_ref.data());
    cpu::ln_backward(d, x.data(), gb.data(), s_ref.data(), dy.data(), dx_ref.data(), dgb_ref.data(), true);
    auto X = e.up(x), GB = upload(gb), DY = e.up(dy), DX = e.up(dx0), DGB = upload(dgb0);
    DeviceBuffer Y = e.buffer(count), Y2 = e.buffer(count), S(stats * sizeof(float));
    cuda::ln_forward_training(ctx, d, X.as<float>(), GB.as<float>(), GB.as<float>() + d.c, Y.as<float>(),
                              S.as<float>());
    const auto y = e.down(ctx, Y, count);
    check(label + " forward_training saved [mean, inv_std] (bitwise)", s_ref, download<float>(ctx, S, stats), 0);
    check(label + " forward_training y (bitwise)", e.held(y_ref), y, 0);
    cuda::ln_forward_saved(ctx, d, X.as<float>(), GB.as<float>(), GB.as<float>() + d.c, S.as<float>(), Y2.as<float>());
    check(label + " recompute = forward (bitwise)", y, e.down(ctx, Y2, count), 0);
    cuda::ln_backward(ctx, d, X.as<float>(), GB.as<float>(), S.as<float>(), DY.as<float>(), DX.as<float>(),
                      DGB.as<float>(), true);
    check(label + " backward dx (beta 1, bitwise)", e.held(dx_ref), e.down(ctx, DX, count), 0);
    const auto dgb = download<float>(ctx, DGB, 2 * d.c);
    check(label + " backward dgamma, dbeta (accumulated)", dgb_ref, dgb, 1e-5);
    std::vector<float> dgb_emu = dgb0;
    const auto s_gpu = download<float>(ctx, S, stats);
    cuda::host::ln_backward<float>(d, x.data(), gb.data(), s_gpu.data(), dy.data(), nullptr, dgb_emu.data(), true);
    check(label + " backward dgamma, dbeta = host emulation (bitwise)", dgb_emu, dgb, 0);
    auto DGB2 = upload(dgb0);  // no dx
    cuda::ln_backward(ctx, d, X.as<float>(), GB.as<float>(), S.as<float>(), DY.as<float>(), nullptr, DGB2.as<float>(),
                      true);
    check(label + " backward dgamma, dbeta without dx, run to run", dgb, download<float>(ctx, DGB2, 2 * d.c), 0);
  }
  // channel shuffle and slice: moves, so bitwise
  {
    const std::int64_t n = 2, c = 6, plane = 11;
    const std::size_t count = n * c * plane;
    auto x = e.held(random_floats(count, 161)), dx0 = e.held(random_floats(count, 162));
    auto X = e.up(x);
    DeviceBuffer Y = e.buffer(count);
    for (std::int64_t groups : {2, 3}) {
      const std::string label = t + "channel shuffle g" + std::to_string(groups);
      std::vector<float> y_ref(count);
      cpu::channel_shuffle_forward(n, c, plane, groups, x.data(), y_ref.data());
      cuda::channel_shuffle_forward(ctx, n, c, plane, groups, X.as<float>(), Y.as<float>());
      check(label + " forward (bitwise)", y_ref, e.down(ctx, Y, count), 0);
      for (bool acc : {false, true}) {
        std::vector<float> dx_ref = dx0;
        cpu::channel_shuffle_backward(n, c, plane, groups, y_ref.data(), dx_ref.data(), acc);
        auto DX = e.up(dx0);
        cuda::channel_shuffle_backward(ctx, n, c, plane, groups, Y.as<float>(), DX.as<float>(), acc);
        check(label + " backward" + (acc ? " (beta 1)" : ""), e.held(dx_ref), e.down(ctx, DX, count), 0);
      }
    }
    const std::int64_t begin = 2, end = 5;
    const std::size_t ny = n * (end - begin) * plane;
    std::vector<float> y_ref(ny);
    cpu::slice_forward(n, c, plane, begin, end, x.data(), y_ref.data());
    cuda::slice_forward(ctx, n, c, plane, begin, end, X.as<float>(), Y.as<float>());
    check(t + "slice [2, 5) forward (bitwise)", y_ref, e.down(ctx, Y, ny), 0);
    auto DY = e.up(y_ref);
    for (bool acc : {false, true}) {
      std::vector<float> dx_ref = dx0;
      cpu::slice_backward(n, c, plane, begin, end, y_ref.data(), dx_ref.data(), acc);
      auto DX = e.up(dx0);
      cuda::slice_backward(ctx, n, c, plane, begin, end, DY.as<float>(), DX.as<float>(), acc);
      check(t + "slice [2, 5) backward" + (acc ? " (beta 1)" : " (zeros outside)"), e.held(dx_ref),
            e.down(ctx, DX, count), 0);
    }
  }
}

// The device's 16-bit conversions are half.h's, which the host mirrors and the CPU emulation use:
// narrowing (the weights' copy, and every kernel's store) bit for bit on values that are ties of
// either type, subnormals, values that overflow fp16, infinities and random bit patterns (NaN: a
// NaN, whose payload CUDA makes canonical); widening (every kernel's load) through
// launch_accumulate_widened onto zeros.
void check_conversions(Context& ctx) {
  std::vector<float> v{0.0f,     -0.0f,      1.0f,      65504.0f, 65519.0f, 65520.0f,  -70000.0f, 0x1p-24f,
                       0x1p-25f, 0x1.8p-25f, 0x1p-126f, 3e38f,    INFINITY, -INFINITY, NAN};
  for (int bits : {7, 10})  // 1 + 2^-(m+1) and the next ones: ties to even, both ways
    for (float k : {1.0f, 3.0f, 5.0f}) v.push_back(1.0f + k * std::ldexp(1.0f, -(bits + 1)));
  std::mt19937 gen(7);
  for (int i = 0; i < 4096; ++i) v.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(gen())));
  const auto n = static_cast<std::int64_t>(v.size());
  for (cuda::DataType type : {cuda::DataType::BFloat16, cuda::DataType::Half}) {
    const Elem e{type};
    std::vector<std::uint16_t> want(v.size());
    cpu::narrow(e.half_type(), v.data(), want.data(), n);
    auto V = upload(v);
    DeviceBuffer H(v.size() * 2);
    cuda::detail::launch_narrow(ctx.stream(), type, n, V.as<float>(), H.get());
    const auto got = download<std::uint16_t>(ctx, H, v.size());
    int wrong = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::array<float, 2> w{};
      cpu::widen(e.half_type(), &want[i], &w[0], 1);
      cpu::widen(e.half_type(), &got[i], &w[1], 1);
      if (got[i] != want[i] && !(std::isnan(w[0]) && std::isnan(w[1]))) ++wrong;
    }
    check_count(e.name() + " narrow = executor/cpu/half.h (bitwise)", wrong, v.size());
    // check() measures errors relative to the largest value, which infinities make useless here.
    std::vector<float> widened(v.size());
    cpu::widen(e.half_type(), got.data(), widened.data(), n);
    auto Z = upload(std::vector<float>(v.size(), 0.0f));
    cuda::detail::launch_accumulate_widened(ctx.stream(), type, n, H.get(), Z.as<float>());
    const auto z = download<float>(ctx, Z, v.size());
    wrong = 0;
    for (std::size_t i = 0; i < v.size(); ++i)  // 0 + -0 is +0, and NaN is any NaN
      if (!(z[i] == widened[i] || (std::isnan(z[i]) && std::isnan(widened[i])))) ++wrong;
    check_count(e.name() + " widen = executor/cpu/half.h", wrong, v.size());
  }
}

// ---- the runner ----

// Every op of every layer of g measured (a failure or an op with no measurement fails the check).
void measure_every_op(Runner& runner, const Graph& g) {
  for (int li = 1; li < static_cast<int>(g.layers.size()); ++li) {
    const GraphLayer& l = g.layers[li];
    for (const TaskKind op :
         {TaskKind::Forward, TaskKind::Backward, TaskKind::BackwardData, TaskKind::BackwardFilter, TaskKind::Update}) {
      if (!layer_has_task(l, op)) continue;
      const std::string name = task_kind_name(op);
      int ok = 0;
      for (const auto& algo : runner.algorithms(g, li, op)) {
        Measurement m = runner.measure(g, li, op, algo, op == TaskKind::Update ? 0 : 4, 5);
        if (m.status == "ok") ++ok;
        if (g_verbose || m.status.starts_with("failed"))
          std::printf("  %-6s %-16s %-22s %-14s %9.2f us  spread %.2f  ws %lld\n", l.name().c_str(), name.c_str(),
                      algo.c_str(), m.status.c_str(), m.seconds * 1e6, m.spread,
                      static_cast<long long>(m.workspace_bytes));
        if (m.status.starts_with("failed")) fail("runner " + l.name() + " " + name + " " + algo + ": " + m.status);
      }
      if (ok == 0) fail("runner " + l.name() + " " + name + ": no algorithm measured");
    }
  }
}

void check_runner() {
  Graph g = build_graph(parse_network_text(kClassicNetwork, "classic.json"), "classic.json");
  auto runner = make_cuda_runner(0);
  DeviceInfo d = runner->device();
  std::printf("device: %s, %.1f GiB, peak %.1f TFLOP/s FP32\n", d.name.c_str(),
              static_cast<double>(d.memory_bytes) / (1 << 30), d.peak_flops * 1e-12);
  for (const auto& [k, v] : d.versions) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  measure_every_op(*runner, g);
  measure_every_op(*runner, build_graph(parse_network_text(kModernNetwork, "modern.json"), "modern.json"));
  // An impossible allocation is out_of_memory, not a failure (a 1x1 conv on a huge batch).
  Measurement big = runner->measure(g, 1, TaskKind::Forward, "implicit_gemm", std::int64_t{1} << 26, 1);
  if (big.status != "out_of_memory" && big.status != "unsupported") fail("runner huge batch: " + big.status);
  std::printf("runner huge batch: %s\n", big.status.c_str());
  for (bool h2d : {true, false}) {
    auto pts = runner->measure_transfers(h2d, {1 << 10, 1 << 20, 1 << 26});
    for (const auto& p : pts)
      std::printf("transfer %s %10lld bytes: %9.2f us (%.1f GB/s)\n", h2d ? "h2d" : "d2h",
                  static_cast<long long>(p.bytes), p.seconds * 1e6, static_cast<double>(p.bytes) / p.seconds * 1e-9);
    if (pts.size() != 3) fail("transfers: a size is missing");
  }
  std::printf("duplex: %s\n", runner->measure_duplex() ? "yes" : "no");
  for (const auto& [name, s] : cudnn_find_forward(g, 1, 32))
    std::printf("cudnn find forward conv1 b32: %-22s %9.2f us\n", name.c_str(), s * 1e6);
  for (const auto& [name, s] : cudnn_find_backward_filter(g, 1, 32))
    std::printf("cudnn find backward_filter conv1 b32: %-22s %9.2f us\n", name.c_str(), s * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a log up to the line before a crash
  g_verbose = std::getenv("UCPLAN_GPU_CHECK_VERBOSE") != nullptr;
  bool required = cuda::device_required_by_environment();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--require-device") == 0) {
      required = true;
    } else if (std::strcmp(argv[i], "--print-network") == 0 && i + 1 < argc &&
               (std::strcmp(argv[i + 1], "modern") == 0 || std::strcmp(argv[i + 1], "classic") == 0)) {
      // The networks scripts/gpu-validate.sh replays (no GPU needed).
      std::printf("%s\n", std::strcmp(argv[i + 1], "modern") == 0 ? kModernNetwork : kClassicNetwork);
      return 0;
    } else {
      std::fprintf(stderr, "usage: ucplan-gpu-check [--require-device] | --print-network modern|classic\n");
      return 2;
    }
  }
  if (const int code = cuda::check_program_device_gate("ucplan-gpu-check", required); code >= 0) return code;
  try {
    cuda::Device device(0);
    cuda::Stream stream;
    Context ctx(stream.get());
    g_ctx = &ctx;
    std::printf("checking the CUDA kernels on %s against the CPU reference\n", device.name().c_str());
    // Convolutions: padding, stride, groups, dilation, depthwise, 1x1, odd c*h*w for the offsets.
    check_conv(ctx, {.n = 3, .c = 4, .h = 9, .w = 7, .k = 6, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .bias = true},
               "3x3 p1");
    check_conv(ctx, {.n = 2, .c = 3, .h = 11, .w = 11, .k = 5, .kh = 5, .kw = 5, .sh = 2, .sw = 2, .bias = true},
               "5x5 s2");
    check_conv(
        ctx,
        {.n = 3, .c = 4, .h = 8, .w = 8, .k = 6, .kh = 3, .kw = 3, .ph = 2, .pw = 2, .dh = 2, .dw = 2, .groups = 2},
        "3x3 d2 g2");
    check_conv(ctx, {.n = 2, .c = 6, .h = 7, .w = 7, .k = 6, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .groups = 6},
               "depthwise");
    check_conv(ctx, {.n = 4, .c = 8, .h = 5, .w = 5, .k = 16, .bias = true}, "1x1");
    check_conv(ctx, {.n = 3, .c = 3, .h = 7, .w = 7, .k = 4, .kh = 3, .kw = 3}, "odd offsets 3x7x7");
    // The descriptor cache: replaying the same shapes creates nothing new.
    const std::size_t cached = ctx.cached_descriptor_sets();
    check_conv(ctx, {.n = 3, .c = 4, .h = 9, .w = 7, .k = 6, .kh = 3, .kw = 3, .ph = 1, .pw = 1, .bias = true},
               "3x3 p1 again");
    if (ctx.cached_descriptor_sets() != cached) fail("descriptor cache grew on a replay");
    check_fc_and_sgd(ctx);
    check_conversions(ctx);
    // Pooling, the other layers and today's layer types at each storage type (a context of that
    // data type), conv and fc in 16 bits.
    for (cuda::DataType type : {cuda::DataType::Float, cuda::DataType::BFloat16, cuda::DataType::Half}) {
      const Elem e{type};
      std::optional<Context> typed;
      if (e.half()) typed.emplace(stream.get(), false, type, true);
      Context& c = typed ? *typed : ctx;
      g_ctx = &c;
      check_pools(c, e);
      check_layers(c, e);
      check_modern_layers(c, e);
    }
    g_ctx = &ctx;
    // One section's exception (a cuDNN refusal, say) fails that section, named, and the rest run.
    auto section = [&](const char* name, auto&& run) {
      try {
        run();
      } catch (const std::exception& e) {
        fail(std::string(name) + ": exception: " + e.what());
      }
      g_ctx = &ctx;
    };
    section("fp16 conv and fc", [] { check_half(cuda::DataType::Half); });
    section("bf16 conv and fc", [] { check_half(cuda::DataType::BFloat16); });
    section("runner", [] { check_runner(); });
  } catch (const std::exception& e) {
    fail(std::string("exception: ") + e.what());
  }
  std::printf("%d checks, %d failed\n", g_checks, g_failures);
  return g_failures == 0 ? 0 : 1;
}
