// Small networks the GPU checks replay (profiler/cuda/gpu_check.cpp, and scripts/gpu-validate.sh
// through `ucplan-gpu-check --print-network modern`) and the tests use too (tests/test_nets.h), so
// each is written once.
#pragma once

namespace ucplan {

// Every layer type of today's CNNs: hardswish, a squeeze-and-excitation gate (hardsigmoid, mul by
// one value per channel), a depthwise conv, SiLU, layer norm over channels, GELU (erf and tanh),
// layer scale, ShuffleNet's split (slice), ReLU6 (clip), sigmoid, an element-wise mul, and a
// channel shuffle.
inline constexpr const char* kModernNetwork =
    R"({"format": "ucplan-network/1", "name": "modern", "input": {"shape": [3, 16, 16]}, "labels": 10,
 "layers": [
  {"name": "c1", "type": "conv", "inputs": ["data"], "out_channels": 16, "kernel": 3, "pad": 1, "bias": false},
  {"name": "b1", "type": "bn", "inputs": ["c1"]},
  {"name": "h1", "type": "hardswish", "inputs": ["b1"]},
  {"name": "sp", "type": "pool", "inputs": ["h1"], "mode": "avg", "global": true},
  {"name": "sf1", "type": "conv", "inputs": ["sp"], "out_channels": 4, "kernel": 1},
  {"name": "sr", "type": "relu", "inputs": ["sf1"]},
  {"name": "sf2", "type": "conv", "inputs": ["sr"], "out_channels": 16, "kernel": 1},
  {"name": "sg", "type": "hardsigmoid", "inputs": ["sf2"]},
  {"name": "se", "type": "mul", "inputs": ["h1", "sg"]},
  {"name": "c2", "type": "conv", "inputs": ["se"], "out_channels": 16, "kernel": 3, "pad": 1, "groups": 16},
  {"name": "s2", "type": "silu", "inputs": ["c2"]},
  {"name": "ln", "type": "layer_norm", "inputs": ["s2"], "eps": 1e-6},
  {"name": "g1", "type": "gelu", "inputs": ["ln"]},
  {"name": "ls", "type": "scale", "inputs": ["g1"]},
  {"name": "add1", "type": "add", "inputs": ["ls", "se"]},
  {"name": "sl1", "type": "slice", "inputs": ["add1"], "begin": 0, "end": 8},
  {"name": "sl2", "type": "slice", "inputs": ["add1"], "begin": 8, "end": 16},
  {"name": "c3", "type": "conv", "inputs": ["sl2"], "out_channels": 8, "kernel": 1},
  {"name": "r6", "type": "clip", "inputs": ["c3"], "min": 0, "max": 6},
  {"name": "gate", "type": "sigmoid", "inputs": ["r6"]},
  {"name": "m2", "type": "mul", "inputs": ["c3", "gate"]},
  {"name": "cat", "type": "concat", "inputs": ["sl1", "m2"]},
  {"name": "sh", "type": "channel_shuffle", "inputs": ["cat"], "groups": 2},
  {"name": "p", "type": "pool", "inputs": ["sh"], "mode": "max", "kernel": 2, "stride": 2},
  {"name": "g2", "type": "gelu", "inputs": ["p"], "approximate": "tanh"},
  {"name": "fc", "type": "fc", "inputs": ["g2"], "out_features": 10},
  {"name": "loss", "type": "softmax_loss", "inputs": ["fc"]}]})";

}  // namespace ucplan
