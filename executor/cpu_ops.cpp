#include "cpu_ops.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "cpu/kernels.h"
#include "planner/model/errors.h"

namespace ucplan {

std::int64_t out_elems(const GraphLayer& l) { return l.out.elems(); }
std::int64_t in_elems(const GraphLayer& l, std::size_t i) { return l.in_shapes[i].elems(); }

cpu::ConvDims conv_dims(const GraphLayer& l, std::int64_t n) {
  const auto& c = l.spec.conv;
  const Shape& x = l.in_shapes[0];
  cpu::ConvDims d;
  d.n = n;
  d.c = x.c;
  d.h = x.h;
  d.w = x.w;
  d.k = c.out_channels;
  d.kh = c.kernel[0];
  d.kw = c.kernel[1];
  d.sh = c.stride[0];
  d.sw = c.stride[1];
  d.ph = c.pad[0];
  d.pw = c.pad[1];
  d.dh = c.dilation[0];
  d.dw = c.dilation[1];
  d.groups = c.groups;
  d.bias = c.bias;
  return d;
}

cpu::PoolDims pool_dims(const GraphLayer& l, std::int64_t n) {
  const auto& p = l.spec.pool;
  const Shape& x = l.in_shapes[0];
  cpu::PoolDims d;
  d.n = n;
  d.c = x.c;
  d.h = x.h;
  d.w = x.w;
  d.kh = p.kernel[0];
  d.kw = p.kernel[1];
  d.sh = p.stride[0];
  d.sw = p.stride[1];
  d.ph = p.pad[0];
  d.pw = p.pad[1];
  d.ho = l.out.h;
  d.wo = l.out.w;
  d.max = p.mode == PoolMode::Max;
  d.count_include_pad = p.count_include_pad;
  return d;
}

cpu::ActivationDims activation_dims(const GraphLayer& l) {
  cpu::ActivationDims d;
  switch (l.type()) {
    case LayerType::Sigmoid:
      d.f = cpu::Activation::Sigmoid;
      break;
    case LayerType::HardSigmoid:
      d.f = cpu::Activation::HardSigmoid;
      d.a = static_cast<float>(l.spec.hardsigmoid.alpha);
      d.b = static_cast<float>(l.spec.hardsigmoid.beta);
      break;
    case LayerType::HardSwish:
      d.f = cpu::Activation::HardSwish;
      break;
    case LayerType::Silu:
      d.f = cpu::Activation::Silu;
      break;
    case LayerType::Clip:
      d.f = cpu::Activation::Clip;
      d.a = static_cast<float>(l.spec.clip.min);
      d.b = static_cast<float>(l.spec.clip.max);
      break;
    case LayerType::Gelu:
      d.f = l.spec.gelu.tanh ? cpu::Activation::GeluTanh : cpu::Activation::Gelu;
      break;
    case LayerType::Input:
    case LayerType::Conv:
    case LayerType::Relu:
    case LayerType::Pool:
    case LayerType::BatchNorm:
    case LayerType::Lrn:
    case LayerType::Fc:
    case LayerType::Dropout:
    case LayerType::Add:
    case LayerType::Concat:
    case LayerType::SoftmaxLoss:
    case LayerType::Mul:
    case LayerType::Scale:
    case LayerType::LayerNorm:
    case LayerType::ChannelShuffle:
    case LayerType::Slice:
      UCPLAN_CHECK(false, std::string("not a point-wise activation: ") + layer_type_name(l.type()));
  }
  return d;
}

cpu::MulDims mul_dims(const GraphLayer& l, std::int64_t n) {
  const Shape& x = l.in_shapes[0];
  return cpu::MulDims{n, x.c, x.h * x.w, l.in_shapes[1].h * l.in_shapes[1].w == 1 && x.h * x.w != 1};
}

namespace {

cpu::ConvAlgo conv_algo(const std::string& name) {
  cpu::ConvAlgo a;
  UCPLAN_CHECK(cpu::parse_conv_algo(name, &a), "unknown CPU conv algorithm " + name);
  return a;
}

cpu::ConvOp conv_op(StepOp op) {
  if (op == StepOp::Forward || op == StepOp::Recompute) return cpu::ConvOp::Forward;
  if (op == StepOp::BackwardData) return cpu::ConvOp::BackwardData;
  UCPLAN_CHECK(op == StepOp::BackwardFilter, std::string("not a conv op: ") + step_op_name(op));
  return cpu::ConvOp::BackwardFilter;
}

}  // namespace

std::vector<std::string> conv_algorithms_cpu() {
  std::vector<std::string> out;
  for (auto a : cpu::conv_algorithms()) out.push_back(cpu::conv_algo_name(a));
  return out;
}

std::string reference_conv_algo_cpu(StepOp op, const std::string& algo) {
  cpu::ConvAlgo a;
  if (cpu::parse_conv_algo(algo, &a)) return algo;
  // cuDNN's names per op (runner.h); "gemm" and "direct" are forward names both backends share.
  static const char* const forward[] = {"implicit_gemm", "implicit_precomp_gemm", "fft", "fft_tiling",
                                        "winograd",      "winograd_nonfused"};
  static const char* const backward_data[] = {"algo_0", "algo_1", "fft", "fft_tiling", "winograd", "winograd_nonfused"};
  static const char* const backward_filter[] = {"algo_0", "algo_1", "fft", "algo_3", "winograd_nonfused", "fft_tiling"};
  auto known = [&](const auto& names) {
    return std::find(std::begin(names), std::end(names), algo) != std::end(names);
  };
  const bool cudnn = (op == StepOp::Forward || op == StepOp::Recompute) ? known(forward)
                     : op == StepOp::BackwardData                       ? known(backward_data)
                     : op == StepOp::BackwardFilter                     ? known(backward_filter)
                                                                        : false;
  return cudnn ? "gemm" : "";
}

bool layer_op_supported_cpu(const GraphLayer& l, StepOp op, const std::string& algo, std::int64_t n) {
  if (l.type() != LayerType::Conv || op == StepOp::Update) return true;
  cpu::ConvAlgo a;
  if (!cpu::parse_conv_algo(algo, &a)) return false;
  return cpu::conv_supported(conv_dims(l, n), conv_op(op), a);
}

std::int64_t layer_op_workspace_cpu(const GraphLayer& l, StepOp op, const std::string& algo, std::int64_t n) {
  if (l.type() != LayerType::Conv || op == StepOp::Update) return 0;
  return cpu::conv_workspace_bytes(conv_dims(l, n), conv_op(op), conv_algo(algo));
}

void run_layer_op_cpu(const GraphLayer& l, StepOp op, const std::string& algo, const LayerArgs& a) {
  const std::int64_t n = a.n;
  const std::int64_t out = out_elems(l) * n;
  if (op == StepOp::Update) {
    cpu::sgd_update(l.params(), a.lr, a.dw, const_cast<float*>(a.w));
    return;
  }
  const bool fwd = op == StepOp::Forward || op == StepOp::Recompute;
  switch (l.type()) {
    case LayerType::Input:
      UCPLAN_CHECK(false, "the input layer has no ops");
      break;
    case LayerType::Conv: {
      const cpu::ConvDims d = conv_dims(l, n);
      const cpu::ConvAlgo al = conv_algo(algo);
      UCPLAN_CHECK(
          cpu::conv_supported(d, conv_op(op), al) && cpu::conv_workspace_bytes(d, conv_op(op), al) <= a.workspace_bytes,
          "a conv kernel runs on a workspace at least as large as it needs");
      const float* bias = l.bias_elems && a.w ? a.w + l.weight_elems : nullptr;  // backward ops get no w
      if (fwd)
        cpu::conv_forward(d, al, a.x[0], a.w, bias, a.y, a.workspace);
      else if (op == StepOp::BackwardData)
        cpu::conv_backward_data(d, al, a.dy, a.w, a.dx[0], a.dx_accumulate[0], a.workspace);
      else
        cpu::conv_backward_filter(d, al, a.x[0], a.dy, a.dw, l.bias_elems && a.dw ? a.dw + l.weight_elems : nullptr,
                                  a.workspace);
      break;
    }
    case LayerType::Fc: {
      cpu::FcDims d{n, in_elems(l, 0), l.spec.fc.out_features, l.spec.fc.bias};
      const float* bias = l.bias_elems && a.w ? a.w + l.weight_elems : nullptr;  // backward ops get no w
      if (fwd)
        cpu::fc_forward(d, a.x[0], a.w, bias, a.y);
      else if (op == StepOp::BackwardData)
        cpu::fc_backward_data(d, a.dy, a.w, a.dx[0], a.dx_accumulate[0]);
      else
        cpu::fc_backward_filter(d, a.x[0], a.dy, a.dw, l.bias_elems && a.dw ? a.dw + l.weight_elems : nullptr);
      break;
    }
    case LayerType::Relu:
      if (fwd)
        cpu::relu_forward(out, a.x[0], a.y);
      else
        cpu::relu_backward(out, a.y, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    case LayerType::Pool: {
      const cpu::PoolDims d = pool_dims(l, n);
      if (fwd)
        cpu::pool_forward(d, a.x[0], a.y);
      else
        cpu::pool_backward(d, a.x.empty() ? nullptr : a.x[0], a.y, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::BatchNorm: {
      const Shape& s = l.out;
      cpu::BnDims d{n, s.c, s.h, s.w, l.spec.bn.eps};
      float* saved = static_cast<float*>(a.aux);
      if (op == StepOp::Forward) {
        cpu::bn_forward_training(d, a.x[0], a.w, a.w + s.c, a.y, saved);
      } else if (op == StepOp::Recompute) {
        // The training forward again, as profiled (the planner costs a recomputation as its
        // layer's forward), its statistics into scratch: the same x gives the same y, and the
        // saved statistics the backward reads stay untouched.
        static thread_local std::vector<float> stats;
        stats.resize(static_cast<std::size_t>(2 * s.c));
        cpu::bn_forward_training(d, a.x[0], a.w, a.w + s.c, a.y, stats.data());
      } else
        cpu::bn_backward(d, a.x[0], a.w, saved, a.dy, a.dx[0], a.dw, a.dx_accumulate[0]);
      break;
    }
    case LayerType::Lrn: {
      const Shape& s = l.out;
      cpu::LrnDims d{n, s.c, s.h, s.w, l.spec.lrn.size, l.spec.lrn.alpha, l.spec.lrn.beta, l.spec.lrn.k};
      if (fwd)
        cpu::lrn_forward(d, a.x[0], a.y);
      else
        cpu::lrn_backward(d, a.x[0], a.y, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::Dropout: {
      auto* mask = static_cast<std::uint8_t*>(a.aux);
      if (op == StepOp::Forward)
        cpu::dropout_forward(n, out_elems(l), a.first_sample, l.spec.dropout.ratio, a.seed, a.x[0], a.y, mask);
      else if (op == StepOp::Recompute)
        cpu::dropout_apply(out, l.spec.dropout.ratio, mask, a.x[0], a.y);
      else
        cpu::dropout_backward(out, l.spec.dropout.ratio, mask, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::Add:
      if (fwd) {
        cpu::add_forward(out, a.x, a.y);
      } else {
        for (std::size_t i = 0; i < a.dx.size(); ++i)
          if (a.dx[i]) cpu::add_backward(out, a.dy, a.dx[i], a.dx_accumulate[i]);
      }
      break;
    case LayerType::Concat: {
      std::vector<std::int64_t> cs;
      for (const auto& s : l.in_shapes) cs.push_back(s.c);
      const std::int64_t hw = l.out.h * l.out.w;
      if (fwd) {
        cpu::concat_forward(n, hw, cs, a.x, a.y);
      } else {
        for (std::size_t i = 0; i < a.dx.size(); ++i)
          if (a.dx[i]) cpu::concat_backward(n, hw, cs, i, a.dy, a.dx[i], a.dx_accumulate[i]);
      }
      break;
    }
    case LayerType::Sigmoid:
    case LayerType::HardSigmoid:
    case LayerType::HardSwish:
    case LayerType::Silu:
    case LayerType::Clip:
    case LayerType::Gelu: {
      const cpu::ActivationDims d = activation_dims(l);
      if (fwd)
        cpu::activation_forward(d, out, a.x[0], a.y);
      else
        cpu::activation_backward(d, out, cpu::activation_backward_reads_y(d.f) ? a.y : a.x[0], a.dy, a.dx[0],
                                 a.dx_accumulate[0]);
      break;
    }
    case LayerType::Mul: {
      const cpu::MulDims d = mul_dims(l, n);
      if (fwd)
        cpu::mul_forward(d, a.x[0], a.x[1], a.y);
      else
        cpu::mul_backward(d, a.x[0], a.x[1], a.dy, a.dx[0], a.dx_accumulate[0], a.dx[1], a.dx_accumulate[1]);
      break;
    }
    case LayerType::Scale: {
      const Shape& s = l.out;
      if (fwd)
        cpu::scale_forward(n, s.c, s.h * s.w, a.x[0], a.w, a.y);
      else
        cpu::scale_backward(n, s.c, s.h * s.w, a.x[0], a.w, a.dy, a.dx[0], a.dx_accumulate[0], a.dw);
      break;
    }
    case LayerType::LayerNorm: {
      const Shape& s = l.out;
      const cpu::LnDims d{n, s.c, s.h, s.w, l.spec.ln.eps};
      float* saved = static_cast<float*>(a.aux);
      if (op == StepOp::Forward)
        cpu::ln_forward_training(d, a.x[0], a.w, a.w + s.c, a.y, saved);
      else if (op == StepOp::Recompute)  // from the saved statistics: bit-identical to the forward
        cpu::ln_forward_saved(d, a.x[0], a.w, a.w + s.c, saved, a.y);
      else
        cpu::ln_backward(d, a.x[0], a.w, saved, a.dy, a.dx[0], a.dw, a.dx_accumulate[0]);
      break;
    }
    case LayerType::ChannelShuffle: {
      const Shape& s = l.out;
      if (fwd)
        cpu::channel_shuffle_forward(n, s.c, s.h * s.w, l.spec.shuffle.groups, a.x[0], a.y);
      else
        cpu::channel_shuffle_backward(n, s.c, s.h * s.w, l.spec.shuffle.groups, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::Slice: {
      const Shape& x = l.in_shapes[0];
      const auto& sl = l.spec.slice;
      if (fwd)
        cpu::slice_forward(n, x.c, x.h * x.w, sl.begin, sl.end, a.x[0], a.y);
      else
        cpu::slice_backward(n, x.c, x.h * x.w, sl.begin, sl.end, a.dy, a.dx[0], a.dx_accumulate[0]);
      break;
    }
    case LayerType::SoftmaxLoss: {
      const std::int64_t k = l.out.c;
      if (fwd)
        cpu::softmax_loss_forward(n, k, a.x[0], a.labels, a.y);
      else
        cpu::softmax_loss_backward(n, k, a.y, a.labels, a.loss_scale / static_cast<double>(a.total_batch), a.dx[0],
                                   a.dx_accumulate[0]);
      break;
    }
  }
}

CpuPrecision cpu_precision(Precision p, bool packed) {
  CpuPrecision c;
  c.packed = packed;
  c.tf32 = p == Precision::TF32;
  c.half = low_precision_storage(p);
  c.type = storage_of(p) == Storage::BF16 ? cpu::Half::BF16 : cpu::Half::FP16;
  return c;
}

void run_emulated(const GraphLayer& l, StepOp op, const LayerArgs& a, const CpuPrecision& p,
                  const std::function<void(const LayerArgs&)>& run) {
  const bool gemm_layer = l.type() == LayerType::Conv || l.type() == LayerType::Fc;
  const std::int64_t params = l.params();
  if (op == StepOp::Update) {
    run(a);
    // The FP32 master weights changed: their copy in the storage type follows (graph.h).
    if (p.half && p.packed && gemm_layer)
      cpu::narrow(p.type, a.w, reinterpret_cast<std::uint16_t*>(const_cast<float*>(a.w) + params), params);
    return;
  }
  const bool fwd = op == StepOp::Forward || op == StepOp::Recompute;
  const std::int64_t n = a.n, out = out_elems(l) * n;
  const bool y_fp32 = l.type() == LayerType::SoftmaxLoss;  // the loss's probabilities stay FP32
  auto load = [&](const float* src, std::int64_t count, bool tf32_operand) {
    std::vector<float> v(static_cast<std::size_t>(count));
    if (p.half && p.packed)
      cpu::widen(p.type, reinterpret_cast<const std::uint16_t*>(src), v.data(), count);
    else
      std::copy(src, src + count, v.begin());
    if (tf32_operand)
      for (auto& e : v) e = cpu::round_to_tf32(e);
    return v;
  };
  auto store = [&](const std::vector<float>& v, float* dst) {
    const auto count = static_cast<std::int64_t>(v.size());
    if (p.packed)
      cpu::narrow(p.type, v.data(), reinterpret_cast<std::uint16_t*>(dst), count);
    else
      for (std::int64_t i = 0; i < count; ++i) dst[i] = cpu::round_to(p.type, v[static_cast<std::size_t>(i)]);
  };
  // tf32 rounds what conv and fc multiply: X and dY, and W (below).
  const bool tf32_ops = p.tf32 && gemm_layer;
  LayerArgs s = a;
  std::vector<std::vector<float>> xs(a.x.size()), dxs(a.dx.size());
  std::vector<float> y, dy, w;
  for (std::size_t i = 0; i < a.x.size(); ++i)
    if (a.x[i] && (p.half || tf32_ops)) {
      xs[i] = load(a.x[i], in_elems(l, i) * n, tf32_ops);
      s.x[i] = xs[i].data();
    }
  if (a.dy && (p.half || tf32_ops)) {
    dy = load(a.dy, out, tf32_ops);
    s.dy = dy.data();
  }
  if (p.half) {
    if (a.y && !y_fp32) {
      y = fwd ? std::vector<float>(static_cast<std::size_t>(out)) : load(a.y, out, false);
      s.y = y.data();
    }
    for (std::size_t i = 0; i < a.dx.size(); ++i)
      if (a.dx[i]) {
        const std::int64_t count = in_elems(l, i) * n;
        dxs[i] = a.dx_accumulate[i] ? load(a.dx[i], count, false) : std::vector<float>(static_cast<std::size_t>(count));
        s.dx[i] = dxs[i].data();
      }
  }
  if (a.w && gemm_layer && (p.half || p.tf32)) {
    // conv and fc multiply the weights' low-precision value: the copy (packed), or the master
    // rounded as the copy would be.
    if (p.half && p.packed) {
      w.resize(static_cast<std::size_t>(params));
      cpu::widen(p.type, reinterpret_cast<const std::uint16_t*>(a.w + params), w.data(), params);
    } else {
      w.assign(a.w, a.w + params);
      for (auto& e : w) e = p.half ? cpu::round_to(p.type, e) : cpu::round_to_tf32(e);
    }
    s.w = w.data();
  }
  run(s);
  if (!p.half) return;
  if (fwd && a.y && !y_fp32) store(y, a.y);
  if (!fwd)
    for (std::size_t i = 0; i < a.dx.size(); ++i)
      if (a.dx[i]) store(dxs[i], a.dx[i]);
}

void run_conv_config_cpu(const GraphLayer& l, StepOp op, const std::vector<MicroStep>& config, const LayerArgs& a) {
  const std::int64_t in_per = in_elems(l, 0), out_per = out_elems(l);
  std::int64_t done = 0;
  for (const auto& m : config) {
    LayerArgs s = a;
    s.n = m.batch;
    s.first_sample = a.first_sample + done;
    if (!a.x.empty() && a.x[0]) s.x[0] = a.x[0] + done * in_per;
    if (a.y) s.y = a.y + done * out_per;
    if (a.dy) s.dy = a.dy + done * out_per;
    if (!a.dx.empty() && a.dx[0]) s.dx[0] = a.dx[0] + done * in_per;
    run_layer_op_cpu(l, op, m.algo, s);
    done += m.batch;
  }
  UCPLAN_CHECK(done == a.n, "micro-batches add up to the sub-batch");
}

}  // namespace ucplan
