// Precision of a training iteration (`--precision`, recorded in profiles and plans). The
// semantics are PyTorch autocast's: FP32 master weights, their gradients and the optimizer
// state; conv and fc (and their gradients) in the low precision with FP32 accumulation;
// activations and their gradients stored in the storage type; batch-norm statistics and
// parameters and the loss in FP32. `pseudo-fp16` is mu-cuDNN §III-D's PSEUDO_HALF ("higher
// precision algorithms for half"): fp16 storage with an FP32 compute type, which cuDNN offers
// more algorithms for (FFT) than for true half.
#pragma once

#include <cstdint>
#include <string>

namespace ucplan {

enum class Precision { FP32, TF32, BF16, FP16, PseudoFP16 };
// What a tensor's elements are in memory.
enum class Storage { F32, BF16, F16 };

const char* precision_name(Precision p);  // fp32 | tf32 | bf16 | fp16 | pseudo-fp16
bool parse_precision(const std::string& name, Precision* out);
const char* precision_choices();  // "fp32 | tf32 | bf16 | fp16 | pseudo-fp16", for messages

Storage storage_of(Precision p);  // activations and their gradients
int storage_bytes(Storage s);
const char* storage_name(Storage s);  // float32 | bfloat16 | float16
bool low_precision_storage(Precision p);
// conv and fc multiply in this precision (tensor cores where the device has them) and
// accumulate in FP32: "fp32", "tf32", "bf16", "fp16".
const char* math_name(Precision p);
// fp16 storage: gradients underflow without loss scaling (PyTorch's GradScaler).
bool needs_loss_scaling(Precision p);
// Unit roundoff of the products conv and fc form (2^-t for t mantissa bits with the implicit
// one): fp32 2^-24, tf32 and fp16 2^-11, bf16 2^-8. The CPU check's tolerance is derived from it.
double unit_roundoff(Precision p);

// Loss scaling (`--loss-scale`): "none", "static:S" (every step scales the loss gradient by S and
// the weight gradients by 1/S) or "dynamic" (PyTorch's GradScaler: S starts at 2^16; a step with
// an inf or NaN weight gradient is skipped and halves S; 2000 good steps in a row double it).
struct LossScale {
  enum class Kind { None, Static, Dynamic } kind = Kind::None;
  double scale = 1;  // static: S; dynamic: the initial scale
  int growth_interval = 2000;
  double growth_factor = 2, backoff_factor = 0.5;
};
// "" when `text` is a valid option, else what is wrong.
std::string loss_scale_error(const std::string& text);
LossScale parse_loss_scale(const std::string& text);  // text must be valid
// The default for a precision: "dynamic" with fp16 storage, "none" otherwise.
const char* default_loss_scale(Precision p);

// A layer-signature suffix (graph.h): "float32" at fp32, the precision's name otherwise.
const char* signature_dtype(Precision p);

}  // namespace ucplan
