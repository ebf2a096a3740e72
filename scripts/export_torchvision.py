#!/usr/bin/env python3
"""Writes the weight-free ONNX files of torchvision's classification CNNs and the truth that
tests/test_import.cpp checks their import against, from PyTorch itself. Needs torch,
torchvision and onnx; not run in CI (its output is checked in under tests/data/onnx/).

  scripts/export_torchvision.py tests/data/onnx            # every model below, at 224x224 (Inception 299x299)
  scripts/export_torchvision.py tests/data/onnx resnet18   # some of them
  scripts/export_torchvision.py tests/data/onnx/small --input 3x64x64 convnext_tiny   # another input size

For each model: NAME.onnx (scripts/export_torch.py's export: training mode, opset 17, batch 2,
initializer data dropped, dims kept), and in torchvision.json its input shape, its parameter count
(sum of numel over model.parameters()) and the per-sample output shape of every Conv2d and Linear
call in the order a training forward makes them (forward hooks), which is the order of ucplan's
conv and fc layers after import. A Linear applied to [N, H, W, C] (ConvNeXt) is recorded as
[C, H, W], the 1x1 convolution ucplan imports it as.
"""
import json
import os
import sys
import types
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export_torch  # noqa: E402

MODELS = [
    "alexnet",
    "vgg11", "vgg11_bn", "vgg13", "vgg13_bn", "vgg16", "vgg16_bn", "vgg19", "vgg19_bn",
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
    "resnext50_32x4d", "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2",
    "densenet121", "densenet161", "densenet169", "densenet201",
    "inception_v3", "googlenet", "squeezenet1_0", "squeezenet1_1",
    "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
    "mnasnet0_5", "mnasnet0_75", "mnasnet1_0", "mnasnet1_3",
    "shufflenet_v2_x0_5", "shufflenet_v2_x1_0", "shufflenet_v2_x1_5", "shufflenet_v2_x2_0",
    "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4",
    "efficientnet_b5", "efficientnet_b6", "efficientnet_b7",
    "efficientnet_v2_s", "efficientnet_v2_m", "efficientnet_v2_l",
    "regnet_x_400mf", "regnet_x_800mf", "regnet_x_1_6gf", "regnet_x_3_2gf", "regnet_x_8gf", "regnet_x_16gf",
    "regnet_x_32gf",
    "regnet_y_400mf", "regnet_y_800mf", "regnet_y_1_6gf", "regnet_y_3_2gf", "regnet_y_8gf", "regnet_y_16gf",
    "regnet_y_32gf", "regnet_y_128gf",
    "convnext_tiny", "convnext_small", "convnext_base", "convnext_large",
]


def record(module, shape):
    """Per-sample output shapes of the Conv2d and Linear calls of one training forward."""
    import torch
    calls = []

    def hook(m, _inputs, out):
        s = list(out.shape[1:])
        if isinstance(m, torch.nn.Linear):
            s = [s[-1]] + s[:-1] if len(s) == 3 else [s[0], 1, 1]
        calls.append(["conv" if isinstance(m, torch.nn.Conv2d) else "fc", s])

    handles = [m.register_forward_hook(hook) for m in module.modules()
               if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    module.train()
    with torch.no_grad():
        module(torch.zeros((2,) + shape))
    for h in handles:
        h.remove()
    return calls


def main(argv):
    import argparse
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", help="folder for NAME.onnx and torchvision.json")
    p.add_argument("models", nargs="*", help="torchvision model names (default: all CNNs listed in this script)")
    p.add_argument("--input", help="CxHxW for every model (default 3x224x224, Inception v3 3x299x299)")
    a = p.parse_intermixed_args(argv)
    out, names = a.out, a.models or MODELS
    fixed = tuple(int(v) for v in a.input.split("x")) if a.input else None
    os.makedirs(out, exist_ok=True)
    truth_path = os.path.join(out, "torchvision.json")
    models = json.load(open(truth_path))["models"] if os.path.exists(truth_path) else {}
    import torch
    import torchvision
    torch.manual_seed(0)
    for name in names:
        shape = fixed or ((3, 299, 299) if name == "inception_v3" else (3, 224, 224))
        module = export_torch.build_module(name)
        if name == "googlenet":  # PyTorch cannot export its auxiliary classifiers
            module.aux_logits = False
            module.aux1 = module.aux2 = None
        export_torch.identity_stochastic_depth(module)
        params = sum(p.numel() for p in module.parameters())
        calls = record(module, shape)
        args = types.SimpleNamespace(batch=2, shape=shape, opset=17, eval=False)
        path = os.path.join(out, name + ".onnx")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_torch.export(module, args, path)
        export_torch.strip_weights(path)
        models[name] = {"input": list(shape), "parameters": params, "conv_fc_outputs": calls}
        print(f"{name}: {params:,} parameters, {len(calls)} conv/fc calls, {os.path.getsize(path):,} bytes", flush=True)
        del module
        with open(truth_path, "w") as f:
            f.write(json.dumps({"source": f"PyTorch {torch.__version__}, torchvision {torchvision.__version__}, "
                                          "CPU, scripts/export_torchvision.py",
                                "models": dict(sorted(models.items()))}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
