#include "precision.h"

#include <cfloat>

#include <cmath>
#include <cstdlib>

namespace ucplan {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP32:
      return "fp32";
    case Precision::TF32:
      return "tf32";
    case Precision::BF16:
      return "bf16";
    case Precision::FP16:
      return "fp16";
    case Precision::PseudoFP16:
      return "pseudo-fp16";
  }
  return "?";
}

bool parse_precision(const std::string& name, Precision* out) {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16, Precision::PseudoFP16})
    if (name == precision_name(p)) {
      *out = p;
      return true;
    }
  return false;
}

const char* precision_choices() { return "fp32 | tf32 | bf16 | fp16 | pseudo-fp16"; }

Storage storage_of(Precision p) {
  switch (p) {
    case Precision::BF16:
      return Storage::BF16;
    case Precision::FP16:
    case Precision::PseudoFP16:
      return Storage::F16;
    default:
      return Storage::F32;
  }
}

int storage_bytes(Storage s) { return s == Storage::F32 ? 4 : 2; }

const char* storage_name(Storage s) {
  switch (s) {
    case Storage::F32:
      return "float32";
    case Storage::BF16:
      return "bfloat16";
    case Storage::F16:
      return "float16";
  }
  return "?";
}

bool low_precision_storage(Precision p) { return storage_of(p) != Storage::F32; }

const char* math_name(Precision p) { return p == Precision::PseudoFP16 ? "fp16" : precision_name(p); }

bool needs_loss_scaling(Precision p) { return storage_of(p) == Storage::F16; }

double unit_roundoff(Precision p) {
  switch (p) {
    case Precision::FP32:
      return std::ldexp(1.0, -24);
    case Precision::BF16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -11);  // tf32 and fp16: 10 stored mantissa bits
  }
}

std::string loss_scale_error(const std::string& text) {
  if (text == "none" || text == "dynamic") return "";
  if (text.rfind("static:", 0) == 0) {
    const std::string num = text.substr(7);
    char* end = nullptr;
    const double s = num.empty() ? 0 : std::strtod(num.c_str(), &end);
    // The updates divide by S (GradScaler's unscale): 1 / S must be a finite FP32 value too.
    if (!num.empty() && end && *end == '\0' && std::isfinite(s) && s >= 1 / static_cast<double>(FLT_MAX) &&
        s <= FLT_MAX)
      return "";
    return "static:S needs a scale S that FP32 holds with its reciprocal (from 2.9e-39 to 3.4e38), got \"" + num + "\"";
  }
  return "expected none, dynamic or static:S, got \"" + text + "\"";
}

LossScale parse_loss_scale(const std::string& text) {
  LossScale ls;
  if (text == "dynamic") {
    ls.kind = LossScale::Kind::Dynamic;
    ls.scale = 65536.0;  // GradScaler's init_scale
  } else if (text.rfind("static:", 0) == 0) {
    ls.kind = LossScale::Kind::Static;
    ls.scale = std::strtod(text.c_str() + 7, nullptr);
  }
  return ls;
}

const char* default_loss_scale(Precision p) { return needs_loss_scaling(p) ? "dynamic" : "none"; }

const char* signature_dtype(Precision p) { return p == Precision::FP32 ? "float32" : precision_name(p); }

}  // namespace ucplan
