// Small networks shared by the planner and executor tests: a chain with every single-input
// layer type (bn, lrn, max pool, dropout, fc), residual joins (add), a concat fan-out, and the
// ops of today's CNNs (MobileNetV3, EfficientNet, ConvNeXt, ShuffleNetV2).
#pragma once

#include "profiler/check_networks.h"

namespace ucplan::test {

// conv -> bn -> relu -> lrn -> maxpool -> conv -> relu -> fc -> dropout -> fc -> loss
inline const char* kChain =
    R"({"format": "ucplan-network/1", "name": "chain", "input": {"shape": [3, 16, 16]}, "labels": 10,
 "layers": [
  {"name": "c1", "type": "conv", "inputs": ["data"], "out_channels": 8, "kernel": 3, "pad": 1, "bias": false},
  {"name": "b1", "type": "bn", "inputs": ["c1"]},
  {"name": "r1", "type": "relu", "inputs": ["b1"]},
  {"name": "n1", "type": "lrn", "inputs": ["r1"], "size": 3},
  {"name": "p1", "type": "pool", "inputs": ["n1"], "mode": "max", "kernel": 2, "stride": 2},
  {"name": "c2", "type": "conv", "inputs": ["p1"], "out_channels": 16, "kernel": 3, "pad": 1},
  {"name": "r2", "type": "relu", "inputs": ["c2"]},
  {"name": "f1", "type": "fc", "inputs": ["r2"], "out_features": 32},
  {"name": "d1", "type": "dropout", "inputs": ["f1"]},
  {"name": "f2", "type": "fc", "inputs": ["d1"], "out_features": 10},
  {"name": "loss", "type": "softmax_loss", "inputs": ["f2"]}]})";

// Two residual blocks without batch-norm (so sub-batching is allowed by default).
inline const char* kResidual =
    R"({"format": "ucplan-network/1", "name": "residual", "input": {"shape": [3, 16, 16]}, "labels": 10,
 "layers": [
  {"name": "c0", "type": "conv", "inputs": ["data"], "out_channels": 8, "kernel": 3, "pad": 1},
  {"name": "r0", "type": "relu", "inputs": ["c0"]},
  {"name": "a1", "type": "conv", "inputs": ["r0"], "out_channels": 8, "kernel": 3, "pad": 1},
  {"name": "ar1", "type": "relu", "inputs": ["a1"]},
  {"name": "a2", "type": "conv", "inputs": ["ar1"], "out_channels": 8, "kernel": 3, "pad": 1},
  {"name": "add1", "type": "add", "inputs": ["a2", "r0"]},
  {"name": "s1", "type": "relu", "inputs": ["add1"]},
  {"name": "b1", "type": "conv", "inputs": ["s1"], "out_channels": 8, "kernel": 3, "pad": 1},
  {"name": "br1", "type": "relu", "inputs": ["b1"]},
  {"name": "b2", "type": "conv", "inputs": ["br1"], "out_channels": 8, "kernel": 3, "pad": 1},
  {"name": "add2", "type": "add", "inputs": ["b2", "s1"]},
  {"name": "s2", "type": "relu", "inputs": ["add2"]},
  {"name": "gp", "type": "pool", "inputs": ["s2"], "mode": "avg", "global": true},
  {"name": "fc", "type": "fc", "inputs": ["gp"], "out_features": 10},
  {"name": "loss", "type": "softmax_loss", "inputs": ["fc"]}]})";

// A fan-out joined by concat (DenseNet/Inception-like).
inline const char* kConcat =
    R"({"format": "ucplan-network/1", "name": "concat", "input": {"shape": [3, 16, 16]}, "labels": 10,
 "layers": [
  {"name": "c0", "type": "conv", "inputs": ["data"], "out_channels": 8, "kernel": 3, "pad": 1},
  {"name": "r0", "type": "relu", "inputs": ["c0"]},
  {"name": "ca", "type": "conv", "inputs": ["r0"], "out_channels": 4, "kernel": 1},
  {"name": "cb", "type": "conv", "inputs": ["r0"], "out_channels": 6, "kernel": 3, "pad": 1},
  {"name": "cat", "type": "concat", "inputs": ["r0", "ca", "cb"]},
  {"name": "c1", "type": "conv", "inputs": ["cat"], "out_channels": 8, "kernel": 3, "pad": 1, "stride": 2},
  {"name": "r1", "type": "relu", "inputs": ["c1"]},
  {"name": "ap", "type": "pool", "inputs": ["r1"], "mode": "avg", "kernel": 2, "stride": 2},
  {"name": "fc", "type": "fc", "inputs": ["ap"], "out_features": 10},
  {"name": "loss", "type": "softmax_loss", "inputs": ["fc"]}]})";

// Every layer type of today's CNNs (profiler/check_networks.h, which the GPU checks replay).
inline const char* kModern = kModernNetwork;

}  // namespace ucplan::test
