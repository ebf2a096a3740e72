// Precisions (issue 15): the 16-bit conversions against an independent decoder and exact
// round-to-nearest-even in double arithmetic; tensor bytes by type; profiles and plans that
// record the precision; run --check at bf16, fp16 and tf32 on the CPU (emulated storage), a
// broken bf16 plan still caught; GradScaler-style loss scaling.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "executor/backend.h"
#include "executor/cpu/half.h"
#include "executor/reference.h"
#include "executor/replay.h"
#include "planner/model/errors.h"
#include "planner/model/json_util.h"
#include "planner/model/plan.h"
#include "planner/ir/tasks.h"
#include "planner/passes/liveness.h"
#include "planner/passes/lower_bound.h"
#include "planner/passes/pipeline.h"
#include "planner/ir/route.h"
#include "planner/check/verify.h"
#include "profiler/cpu_runner.h"
#include "profiler/model_device.h"
#include "profiler/profile_network.h"
#include "plan_edit.h"
#include "planner_fixtures.h"
#include "planner_fixtures.h"
#include "test_nets.h"

using namespace ucplan;
using namespace ucplan::test;

namespace {

// --- The truth for the conversions, written independently of half.cpp ----------------------

struct Format {
  int exp_bits, man_bits;
};
constexpr Format kBf16{8, 7}, kFp16{5, 10};

// A 16-bit pattern's value from its fields (IEEE layout: sign, exponent, mantissa).
double decode(std::uint16_t h, Format f) {
  const int sign = h >> 15;
  const int e = (h >> f.man_bits) & ((1 << f.exp_bits) - 1);
  const int m = h & ((1 << f.man_bits) - 1);
  const int bias = (1 << (f.exp_bits - 1)) - 1;
  double v;
  if (e == (1 << f.exp_bits) - 1)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = std::ldexp(m, 1 - bias - f.man_bits);
  else
    v = std::ldexp((1 << f.man_bits) + m, e - bias - f.man_bits);
  return sign ? -v : v;
}

// Round to nearest, ties to the even pattern, over the table of every positive finite value;
// at or beyond the midpoint between the largest finite value and the next power of the format
// (where infinity stands), infinity (IEEE 754: the largest finite value has an odd mantissa).
std::uint16_t truth(float x, Format f) {
  const std::uint16_t inf = static_cast<std::uint16_t>(((1 << f.exp_bits) - 1) << f.man_bits);
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(static_cast<double>(x));
  static std::vector<double> tables[2];  // code i -> value, increasing; per format
  std::vector<double>& table = tables[f.man_bits == 7 ? 0 : 1];
  if (table.empty())
    for (std::uint16_t c = 0; c < inf; ++c) table.push_back(decode(c, f));
  const double max = table.back();
  const double beyond = max + (max - table[table.size() - 2]) / 2;
  if (a >= beyond) return sign | inf;
  if (a > max) return static_cast<std::uint16_t>(sign | (table.size() - 1));  // below the midpoint to infinity
  const auto hi = static_cast<std::size_t>(std::lower_bound(table.begin(), table.end(), a) - table.begin());
  if (table[hi] == a || hi == 0) return static_cast<std::uint16_t>(sign | hi);
  const std::size_t lo = hi - 1;
  const double dlo = a - table[lo], dhi = table[hi] - a;
  const std::size_t pick = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<std::uint16_t>(sign | pick);
}

std::uint16_t convert(float x, Format f) { return f.man_bits == 7 ? cpu::float_to_bf16(x) : cpu::float_to_fp16(x); }
float back(std::uint16_t h, Format f) { return f.man_bits == 7 ? cpu::bf16_to_float(h) : cpu::fp16_to_float(h); }

// Floats to test: every value of the format, every midpoint between neighbours (the ties), one
// float step either side of each, and random bit patterns.
std::vector<float> probe_floats(Format f) {
  std::vector<float> xs;
  const std::uint16_t inf = static_cast<std::uint16_t>(((1 << f.exp_bits) - 1) << f.man_bits);
  for (std::uint32_t c = 0; c + 1 < inf; ++c) {
    const double v = decode(static_cast<std::uint16_t>(c), f), w = decode(static_cast<std::uint16_t>(c + 1), f);
    const auto mid = static_cast<float>((v + w) / 2);  // exact: a few more bits than the format
    for (float x : {static_cast<float>(v), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY)}) {
      xs.push_back(x);
      xs.push_back(-x);
    }
  }
  std::mt19937 rng(15);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (!std::isnan(x)) xs.push_back(x);
  }
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, 3.4028235e38f, 1e-45f, 65504.0f, 65519.996f, 65520.0f})
    xs.push_back(x);
  return xs;
}

void check_format(Format f) {
  int mismatches = 0;
  for (float x : probe_floats(f)) {
    const std::uint16_t want = truth(x, f), got = convert(x, f);
    if (got != want && ++mismatches <= 5) {
      CAPTURE(x);
      CHECK(got == want);
    }
  }
  CHECK(mismatches == 0);
  // Back to float: exact, for every finite pattern.
  for (std::uint32_t c = 0; c < 0x10000; ++c) {
    const double v = decode(static_cast<std::uint16_t>(c), f);
    if (std::isnan(v))
      CHECK(std::isnan(back(static_cast<std::uint16_t>(c), f)));
    else
      CHECK(static_cast<double>(back(static_cast<std::uint16_t>(c), f)) == v);
  }
}

// --- Planning and running at a precision --------------------------------------------------------

// CPU profiles with deterministic times (planner_fixtures.h): the plans, and so what these tests
// exercise, must not depend on how loaded the machine is (under ASan the measured times differ
// enough to change plans).
Profile cpu_profile(const Network& net, std::int64_t batch, Precision p) {
  return deterministic_cpu_profile(net, batch, p);
}

Plan compile(const Network& net, const Profile& prof, std::int64_t budget, const std::string& strategy = "ucplan",
             const std::string& sub_batch = "any", const std::string& loss_scale = "") {
  CompileInput in = input_for(net, prof, budget, strategy, sub_batch);
  in.options.loss_scale = loss_scale;
  return make_plan(in).plan;
}

struct Run {
  RunReport report;
  std::vector<float> first_weights;  // the first weighted layer's FP32 master after the run
};

Run replay(const Plan& plan, bool poison = true, int iterations = 1, bool fp32_floor = false) {
  const Graph g = build_graph(plan.network, "test", plan.precision);
  auto backend = make_cpu_backend(g);
  RunOptions o;
  o.iterations = iterations;
  o.check = true;
  o.poison = poison;
  o.tolerance = default_check_tolerance(plan.precision, false);
  o.fp32_floor = fp32_floor;
  Run r{replay_plan(plan, *backend, o), {}};
  for (const auto& b : plan.buffers)
    if (b.resident && b.tensor.rfind("W:", 0) == 0) {
      const GraphLayer& l = g.layers[static_cast<std::size_t>(g.index_of(b.tensor.substr(2)))];
      r.first_weights.resize(static_cast<std::size_t>(l.params()));
      backend->read(b.offset, r.first_weights.data(), static_cast<std::int64_t>(r.first_weights.size() * 4));
      break;
    }
  return r;
}

}  // namespace

TEST_SUITE("precision: conversions") {
  TEST_CASE("bf16: every value, tie and neighbour of a tie, and random floats, as exact rounding says") {
    check_format(kBf16);
  }
  TEST_CASE("fp16: the same, with subnormals and overflow to infinity") { check_format(kFp16); }

  TEST_CASE("known bit patterns") {
    CHECK(cpu::float_to_bf16(1.0f) == 0x3f80);
    CHECK(cpu::float_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie, even below
    CHECK(cpu::float_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie, even above
    CHECK(cpu::float_to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);  // just above the tie
    CHECK(cpu::float_to_bf16(3.4028235e38f) == 0x7f80);                      // FLT_MAX rounds up to inf
    CHECK((cpu::float_to_bf16(NAN) & 0x7fff) > 0x7f80);                      // NaN stays NaN
    CHECK(cpu::float_to_fp16(1.0f) == 0x3c00);
    CHECK(cpu::float_to_fp16(65504.0f) == 0x7bff);
    CHECK(cpu::float_to_fp16(65519.0f) == 0x7bff);
    CHECK(cpu::float_to_fp16(65520.0f) == 0x7c00);    // the midpoint to "65536": infinity
    CHECK(cpu::float_to_fp16(0x1p-24f) == 0x0001);    // the smallest subnormal
    CHECK(cpu::float_to_fp16(0x1p-25f) == 0x0000);    // tie between 0 and 2^-24: even (0)
    CHECK(cpu::float_to_fp16(0x1.8p-24f) == 0x0002);  // tie between 1 and 2 units: even (2)
    CHECK(cpu::float_to_fp16(-0x1p-14f) == 0x8400);   // the smallest normal, negative
    CHECK(cpu::fp16_to_float(0x0001) == 0x1p-24f);
    CHECK(cpu::fp16_to_float(0x7bff) == 65504.0f);
    CHECK(std::isinf(cpu::fp16_to_float(0xfc00)));
    // Poison (0xFF bytes) is NaN in both 16-bit types, as in FP32.
    CHECK(std::isnan(cpu::bf16_to_float(0xffff)));
    CHECK(std::isnan(cpu::fp16_to_float(0xffff)));
  }

  TEST_CASE("tf32: normal floats round to 10 mantissa bits, ties to even (nearbyint in double)") {
    std::mt19937 rng(32);
    int bad = 0;
    for (int i = 0; i < 200000; ++i) {
      const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
      if (!std::isnormal(x) || std::fabs(x) > 3e38f) continue;
      const double q = std::ldexp(1.0, std::ilogb(x) - 10);  // the tf32 unit at x's binade
      const double want = std::nearbyint(static_cast<double>(x) / q) * q;
      bad += static_cast<double>(cpu::round_to_tf32(x)) != want;
    }
    CHECK(bad == 0);
    CHECK(cpu::round_to_tf32(std::bit_cast<float>(0x3f801000u)) == 1.0f);  // tie, even below
  }
}

TEST_SUITE("precision: model") {
  TEST_CASE("names, storage and roundoff") {
    for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16, Precision::PseudoFP16}) {
      Precision back = Precision::FP32;
      CHECK(parse_precision(precision_name(p), &back));
      CHECK(back == p);
    }
    Precision unused;
    CHECK_FALSE(parse_precision("fp8", &unused));
    CHECK(storage_bytes(storage_of(Precision::TF32)) == 4);
    CHECK(storage_bytes(storage_of(Precision::PseudoFP16)) == 2);
    // u = 2^-(mantissa bits + 1), as the decoder above counts them.
    CHECK(unit_roundoff(Precision::BF16) == std::ldexp(1.0, -(kBf16.man_bits + 1)));
    CHECK(unit_roundoff(Precision::FP16) == std::ldexp(1.0, -(kFp16.man_bits + 1)));
    CHECK(loss_scale_error("static:1024") == "");
    CHECK(loss_scale_error("static:0") != "");
    CHECK(loss_scale_error("static:") != "");
    CHECK(loss_scale_error("sometimes") != "");
    // The updates divide by the scale: its reciprocal must be a finite FP32 value too.
    CHECK(loss_scale_error("static:1e-45") != "");
    CHECK(loss_scale_error("static:3e-39") == "");
    CHECK(std::isfinite(1.0F / static_cast<float>(3e-39)));
    CHECK(loss_scale_error("static:3.4e38") == "");
    CHECK(loss_scale_error("static:3.5e38") != "");
    CHECK(parse_loss_scale("dynamic").scale == 65536.0);  // GradScaler's init_scale
  }

  TEST_CASE("tensor bytes follow their type") {
    const Network net = parse_network_text(kChain, "test");
    const Graph g32 = build_graph(net, "test"), g16 = build_graph(net, "test", Precision::BF16);
    const TaskGraph t32 = build_tasks(g32, construct_route(g32)), t16 = build_tasks(g16, construct_route(g16));
    REQUIRE(t32.tensors.size() == t16.tensors.size());
    for (std::size_t i = 0; i < t32.tensors.size(); ++i) {
      const Tensor &a = t32.tensors[i], &b = t16.tensors[i];
      CAPTURE(a.name);
      const GraphLayer& l = g32.layers[static_cast<std::size_t>(a.layer)];
      const bool gemm = l.type() == LayerType::Conv || l.type() == LayerType::Fc;
      switch (a.kind) {
        case TensorKind::Activation:  // elements x 4 bytes, x 2 at bf16; the loss's output stays FP32
          CHECK(a.bytes_per_sample == l.out.elems() * 4);
          CHECK(b.bytes_per_sample == (l.type() == LayerType::SoftmaxLoss ? a.bytes_per_sample : l.out.elems() * 2));
          break;
        case TensorKind::Gradient:
          CHECK(b.bytes_per_sample == l.out.elems() * 2);
          break;
        case TensorKind::Weight:  // FP32 master, + the bf16 copy for conv and fc
          CHECK(a.fixed_bytes == l.params() * 4);
          CHECK(b.fixed_bytes == l.params() * 4 + (gemm ? l.params() * 2 : 0));
          break;
        default:  // weight gradients, bn statistics, dropout masks, labels: unchanged
          CHECK(a.bytes(3) == b.bytes(3));
      }
    }
    // Liveness at bf16: at most the FP32 peak, more than half of it (FP32 weights and gradients).
    const Liveness l32 = compute_liveness(t32, 8), l16 = compute_liveness(t16, 8);
    CHECK(l16.liveness_peak < l32.liveness_peak);
    CHECK(2 * l16.liveness_peak > l32.liveness_peak);
    CHECK(layer_signature(g16, 1).ends_with(" bf16"));
    CHECK(layer_signature(g32, 1).ends_with(" float32"));
  }

  TEST_CASE("a plan records its precision; its bytes are checked at it; another precision's profile is refused") {
    const Network net = parse_network_text(kResidual, "test");
    auto runner = make_model_runner("h100");
    ProfileOptions o;
    o.batch = 4;
    o.precision = Precision::FP16;
    const Profile prof = profile_network(net, "test", *runner, o);
    const Plan p = compile(net, prof, std::int64_t{1} << 30);
    CHECK(p.precision == Precision::FP16);
    CHECK(p.loss_scale == "dynamic");
    CHECK(find_plan_error(p) == "");
    // The JSON text carries both and reads back to the same plan.
    const std::string text = plan_to_json_text(p);
    CHECK(text.find("\"precision\":\"fp16\",\"loss_scale\":\"dynamic\"") != std::string::npos);
    const std::string path = "/tmp/ucplan-test-precision-plan.json";
    write_file_atomically(path, text);
    const Plan read = load_plan(path);
    CHECK(read.precision == Precision::FP16);
    CHECK(read.loss_scale == "dynamic");
    CHECK(plan_to_json_text(read) == text);
    // The same plan said to be fp32: its 2-byte activation buffers are too small for FP32.
    Plan wrong = p;
    wrong.precision = Precision::FP32;
    CHECK(find_plan_error(wrong) != "");
    // A profile at fp16 with --precision bf16.
    CompileInput in;
    in.network = net;
    in.network_file = "test";
    in.profile = prof;
    in.profile_path = "p.json";
    in.budget_bytes = std::int64_t{1} << 30;
    in.precision = Precision::BF16;
    CHECK_THROWS_WITH_AS(make_plan(in), doctest::Contains("the profile is at fp16"), UserError);
  }

  TEST_CASE("model devices: tensor cores make half precision faster where the device has them") {
    const Network net = parse_network_text(kChain, "test");
    auto seconds = [&](const char* device, Precision p) {
      auto runner = make_model_runner(device);
      const Graph g = build_graph(net, "test", p);
      return runner->measure(g, g.index_of("c2"), TaskKind::Forward, "implicit_precomp_gemm", 256, 1).seconds;
    };
    CHECK(seconds("h100", Precision::BF16) < seconds("h100", Precision::FP32));
    CHECK(seconds("h100", Precision::TF32) < seconds("h100", Precision::FP32));
    CHECK(seconds("v100", Precision::FP16) < seconds("v100", Precision::FP32));
    CHECK(seconds("v100", Precision::TF32) == seconds("v100", Precision::FP32));  // no TF32 before Ampere
    CHECK(seconds("k40", Precision::FP16) <= seconds("k40", Precision::FP32));    // only fewer bytes
    // True half has no FFT (mu-cuDNN Table I); pseudo-half does.
    auto runner = make_model_runner("v100");
    const Graph g16 = build_graph(net, "test", Precision::FP16), gp = build_graph(net, "test", Precision::PseudoFP16);
    CHECK(runner->measure(g16, g16.index_of("c2"), TaskKind::Forward, "fft", 8, 1).status == "unsupported");
    CHECK(runner->measure(gp, gp.index_of("c2"), TaskKind::Forward, "fft", 8, 1).status == "ok");
  }
}

TEST_SUITE("precision: run --check on the CPU") {
  TEST_CASE("bf16, fp16, tf32: keep-all, a tight budget and the lower bound pass the check") {
    for (Precision prec : {Precision::BF16, Precision::FP16, Precision::TF32}) {
      for (const char* text : {kChain, kResidual, kConcat}) {
        const Network net = parse_network_text(text, "test");
        const Profile prof = cpu_profile(net, 8, prec);
        const Graph g = build_graph(net, "test", prec);
        const std::int64_t bound = memory_lower_bound(build_tasks(g, construct_route(g)), 1).bytes;
        const std::int64_t peak = compile(net, prof, std::int64_t{1} << 40, "keep-all", "auto").summary.peak_bytes;
        // Under the sanitizers keep-all and the lower bound, not the budget between (kGridStride).
        const std::int64_t budgets[] = {4 * peak, bound + (peak - bound) / 5, bound};
        for (std::size_t i = 0; i < std::size(budgets); i += ucplan::test::kGridStride) {
          const std::int64_t budget = budgets[i];
          CAPTURE(precision_name(prec));
          CAPTURE(net.name);
          CAPTURE(budget);
          const Plan p = compile(net, prof, budget);
          const Run r = replay(p);
          CHECK(r.report.passed);
          CHECK(r.report.checked_iterations == 2);
          // The plan's run and the reference run the same CPU emulation, in the same rounds: a
          // value rounded twice or read stale (a unit of bf16, 3.9e-3) must not hide under the
          // check's default tolerance (3.1e-2 at bf16).
          CHECK(r.report.max_rel_error < 1e-5);
          CHECK(r.report.skipped_steps == 0);
        }
      }
    }
  }

  TEST_CASE("the emulation is real: bf16 gradients differ from FP32 ones by about bf16's roundoff") {
    // The reference run at two precisions from the same weights and batch.
    const Network net = parse_network_text(kResidual, "test");
    const auto g32 = build_graph(net, "test"), g16 = build_graph(net, "test", Precision::BF16);
    const ReferenceResult a = reference_gradients(g32, 8, 8, 7), b = reference_gradients(g16, 8, 8, 7);
    double diff = 0, norm = 0;
    for (const auto& [name, want] : a.weight_gradients) {
      const auto& got = b.weight_gradients.at(name);
      for (std::size_t i = 0; i < want.size(); ++i) {
        diff += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
        norm += want[i] * static_cast<double>(want[i]);
      }
    }
    const double rel = std::sqrt(diff / norm);
    // Far above FP32 reassociation (1e-6), within a few dozen units of bf16's roundoff 2^-8.
    CHECK(rel > 1e-4);
    CHECK(rel < 32 * unit_roundoff(Precision::BF16));
  }

  TEST_CASE("a broken bf16 plan: refused by the verifier, and caught by the check without it") {
    const Network net = parse_network_text(kChain, "test");
    const Profile prof = cpu_profile(net, 8, Precision::BF16);
    const std::int64_t peak = compile(net, prof, std::int64_t{1} << 40, "keep-all", "auto").summary.peak_bytes;
    const Plan good = compile(net, prof, peak * 85 / 100, "vdnn-all", "auto");
    REQUIRE(good.summary.offload_bytes > 0);
    REQUIRE(replay(good).report.passed);
    // Two live activations on the same bytes.
    Plan p = good;
    bool done = false;
    for (std::size_t i = 0; i < p.buffers.size() && !done; ++i)
      for (std::size_t j = i + 1; j < p.buffers.size() && !done; ++j) {
        PlanBuffer& a = p.buffers[i];
        PlanBuffer& b = p.buffers[j];
        if (a.resident || b.resident || a.tensor.rfind("Y:", 0) != 0 || b.tensor.rfind("Y:", 0) != 0) continue;
        if (b.first_step > a.last_step || a.first_step > b.last_step || b.size < a.size) continue;
        b.offset = a.offset;
        done = true;
      }
    REQUIRE(done);
    CHECK(find_plan_error(p).find("while both live") != std::string::npos);
    CHECK_FALSE(replay(p).report.passed);
    // An activation declared dead right after it is written: poison (0xFFFF, NaN in bf16) shows it.
    Plan q = good;
    REQUIRE(free_an_activation_early(q));
    const Run r = replay(q);
    CHECK_FALSE(r.report.passed);
    CHECK(r.report.max_rel_error > 1.0);
  }
}

TEST_SUITE("precision: loss scaling") {
  TEST_CASE("the 16-bit floor: each gradient's distance from FP32 is measured, and a broken plan still fails") {
    const Network net = parse_network_text(kResidual, "test");
    const Profile prof = cpu_profile(net, 8, Precision::BF16);
    const std::int64_t peak = compile(net, prof, std::int64_t{1} << 40, "keep-all", "auto").summary.peak_bytes;
    const Plan good = compile(net, prof, peak * 85 / 100, "vdnn-all", "auto");
    const Run r = replay(good, true, 1, true);
    CHECK(r.report.passed);
    CHECK(r.report.floor_checked);
    REQUIRE_FALSE(r.report.errors.empty());
    for (const auto& e : r.report.errors) {
      CAPTURE(e.tensor);
      // The CPU replays the emulation itself (only the FP32 weight-gradient sums reassociate); the
      // emulation is bf16-far from FP32.
      CHECK(e.max_rel_error < 1e-6);
      CHECK(e.floor > 1e-4);
      CHECK(e.floor < 32 * unit_roundoff(Precision::BF16));
    }
    // Poison read by a plan that frees an activation early is infinitely far, floor or not.
    Plan q = good;
    REQUIRE(free_an_activation_early(q));
    const Run broken = replay(q, true, 1, true);
    CHECK_FALSE(broken.report.passed);
    CHECK(broken.report.worst_share_of_limit > 1);
    // At FP32 there is no floor to measure.
    const Profile prof32 = cpu_profile(net, 8, Precision::FP32);
    CHECK_FALSE(
        replay(compile(net, prof32, std::int64_t{1} << 40, "keep-all", "auto"), true, 1, true).report.floor_checked);
  }

  TEST_CASE("the scaler follows GradScaler: halve and skip on inf/NaN, double after 2000 good steps") {
    LossScaler s(parse_loss_scale("dynamic"));
    for (int i = 0; i < 1999; ++i) CHECK(s.step(false));
    CHECK(s.scale == 65536.0);
    CHECK(s.step(false));
    CHECK(s.scale == 131072.0);
    CHECK_FALSE(s.step(true));
    CHECK(s.scale == 65536.0);
    CHECK(s.skipped == 1);
    for (int i = 0; i < 1999; ++i) s.step(false);  // the count restarted at the skip
    CHECK(s.scale == 65536.0);
    LossScaler fixed(parse_loss_scale("static:128"));
    CHECK_FALSE(fixed.step(true));
    CHECK(fixed.step(false));
    CHECK(fixed.scale == 128.0);
    CHECK_FALSE(LossScaler(parse_loss_scale("none")).active());
  }

  TEST_CASE("fp16: a scale that overflows skips every step, leaves the weights and checks nothing; a sane one trains") {
    const Network net = parse_network_text(kResidual, "test");
    const Profile prof = cpu_profile(net, 8, Precision::FP16);
    const Graph g = build_graph(net, "test", Precision::FP16);
    std::vector<float> initial(static_cast<std::size_t>(g.layers[1].params()));
    init_weights(g.layers[1], RunOptions{}.seed, initial.data());
    // 1e9 / batch 8 exceeds fp16's 65504 in the loss gradient itself: infinity.
    const Run big = replay(compile(net, prof, std::int64_t{1} << 30, "ucplan", "any", "static:1e9"), true, 2);
    CHECK(big.report.skipped_steps == big.report.steps);
    CHECK(big.report.steps == 3);
    // Both runs overflowed in every checked iteration: nothing was compared, which is no pass.
    CHECK_FALSE(big.report.passed);
    CAPTURE(big.report.fault);
    CHECK(big.report.fault.find("nothing was compared") != std::string::npos);
    CHECK(big.first_weights == initial);
    const Run ok = replay(compile(net, prof, std::int64_t{1} << 30, "ucplan", "any", "dynamic"), true, 2);
    CHECK(ok.report.skipped_steps == 0);
    CHECK(ok.report.passed);
    CHECK(ok.report.final_loss_scale == 65536.0);
    CHECK(ok.first_weights != initial);
    // Unscaled: the update equals the one without loss scaling, up to fp16 rounding of the
    // scaled gradients (bf16-free, so the weights agree to fp16's roundoff of the step).
    const Run none = replay(compile(net, prof, std::int64_t{1} << 30, "ucplan", "any", "none"), true, 2);
    double diff = 0, step = 0;
    for (std::size_t i = 0; i < initial.size(); ++i) {
      diff = std::max(diff, std::fabs(static_cast<double>(ok.first_weights[i] - none.first_weights[i])));
      step = std::max(step, std::fabs(static_cast<double>(none.first_weights[i] - initial[i])));
    }
    CHECK(step > 0);
    CHECK(diff <= 0.05 * step);
  }

  TEST_CASE("fp16, dynamic scale: iterations where both runs overflow compare nothing, and the check goes on") {
    // The fc's output summed 16 times: the loss gradient (at most 1 / batch 8 per logit) comes
    // back to the fc 16 times larger, 65536 x 16 / 8 = 131072 at the default scale and 65536 at
    // half of it, both over fp16's 65504; at a quarter it fits. So two steps overflow and skip.
    std::string layers, sum;
    for (int i = 0; i < 16; ++i) {
      layers += fmt::format(R"({{"name": "s{0}", "type": "slice", "inputs": ["fc"], "begin": 0, "end": 4}},)", i);
      sum += fmt::format(R"({}"s{}")", i == 0 ? "" : ", ", i);
    }
    const Network net = parse_network_text(
        fmt::format(R"({{"format": "ucplan-network/1", "name": "amplified", "input": {{"shape": [3, 8, 8]}},
 "labels": 4, "layers": [
  {{"name": "c1", "type": "conv", "inputs": ["data"], "out_channels": 8, "kernel": 3, "pad": 1}},
  {{"name": "r1", "type": "relu", "inputs": ["c1"]}},
  {{"name": "pool", "type": "pool", "inputs": ["r1"], "mode": "avg", "global": true}},
  {{"name": "fc", "type": "fc", "inputs": ["pool"], "out_features": 4}}, {}
  {{"name": "amp", "type": "add", "inputs": [{}]}},
  {{"name": "loss", "type": "softmax_loss", "inputs": ["amp"]}}]}})",
                    layers, sum),
        "test");
    const Profile prof = cpu_profile(net, 8, Precision::FP16);
    const Plan plan = compile(net, prof, std::int64_t{1} << 30, "ucplan", "any", "dynamic");
    // Five iterations after the warm-up: the first two overflow in both runs, the next two compare.
    const Run run = replay(plan, true, 5);
    CAPTURE(run.report.fault);
    CHECK(run.report.skipped_steps == 2);
    CHECK(run.report.overflow_checked == 2);
    CHECK(run.report.checked_iterations == 4);
    CHECK(run.report.passed);
    CHECK(run.report.final_loss_scale == 16384.0);
    // One iteration after the warm-up: both overflow, nothing compared, and the report says to run more.
    const Run short_run = replay(plan, true, 1);
    CHECK_FALSE(short_run.report.passed);
    CHECK(short_run.report.checked_iterations == 2);
    CHECK(short_run.report.fault.find("nothing was compared") != std::string::npos);
    CHECK(short_run.report.fault.find("give more iterations (-n)") != std::string::npos);
  }
}
