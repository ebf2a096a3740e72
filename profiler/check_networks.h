// Small networks the GPU checks replay (profiler/cuda/gpu_check.cpp, and scripts/gpu-validate.sh
// through `ucplan-gpu-check --print-network modern|classic`) and the tests use too
// (tests/test_nets.h), so each is written once.
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

// The layer types of the classic CNNs with every CUDA path they take: conv with bias, batch norm,
// relu, LRN (AlexNet's size 5), a ceil-mode max pool (a size cuDNN's floor formula does not give:
// the small kernel), a grouped conv, a residual add, a concat, an average pool without padding in
// the divisor, fc, dropout and the softmax loss.
inline constexpr const char* kClassicNetwork =
    R"({"format": "ucplan-network/1", "name": "classic", "input": {"name": "data", "shape": [3, 15, 15]}, "labels": 10,
 "layers": [
  {"name": "conv1", "type": "conv", "inputs": ["data"], "out_channels": 8, "kernel": 3, "pad": 1, "bias": true},
  {"name": "bn1", "type": "bn", "inputs": ["conv1"]},
  {"name": "relu1", "type": "relu", "inputs": ["bn1"]},
  {"name": "norm1", "type": "lrn", "inputs": ["relu1"], "size": 5},
  {"name": "pool1", "type": "pool", "inputs": ["norm1"], "mode": "max", "kernel": 3, "stride": 2, "ceil_mode": true},
  {"name": "conv2", "type": "conv", "inputs": ["pool1"], "out_channels": 8, "kernel": 3, "pad": 1, "groups": 2},
  {"name": "add", "type": "add", "inputs": ["pool1", "conv2"]},
  {"name": "cat", "type": "concat", "inputs": ["add", "pool1"]},
  {"name": "pool2", "type": "pool", "inputs": ["cat"], "mode": "avg", "kernel": 2, "stride": 2, "count_include_pad": false},
  {"name": "fc", "type": "fc", "inputs": ["pool2"], "out_features": 10},
  {"name": "drop", "type": "dropout", "inputs": ["fc"], "ratio": 0.5},
  {"name": "loss", "type": "softmax_loss", "inputs": ["drop"]}]})";

}  // namespace ucplan
