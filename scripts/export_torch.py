#!/usr/bin/env python3
"""PyTorch -> ucplan: exports a model's graph to ONNX without its weights, then runs
`ucplan import` on it. Needs torch (and torchvision for its model names); not run in CI.

  scripts/export_torch.py resnet50 --input 3x224x224 -o resnet50.json
  scripts/export_torch.py mypackage.models:make_net --input 3x32x32 -o mynet.json --onnx mynet.onnx

MODEL is a torchvision.models name (built with weights=None) or MODULE:FACTORY, a function that
returns a torch.nn.Module when called without arguments. The export is in training mode by
default (Dropout and the auxiliary classifiers of Inception v3 and GoogLeNet stay in the graph,
batch-norm in its training form), since ucplan plans training; --eval exports the inference
graph instead. The ONNX file keeps no weights: every initializer's data is dropped and its dims
kept, which is all that `ucplan import` reads. After the import, the parameter count of the network file is compared
with the module's and a difference is an error (exit 1).
Exit codes: 0 ok, 1 the counts differ, 2 bad arguments or a failed export or import.
"""
import argparse
import importlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(message):
    print(f"export_torch.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="torchvision.models name (e.g. resnet50) or MODULE:FACTORY")
    p.add_argument("--input", required=True, help="input shape per sample, CxHxW (e.g. 3x224x224)")
    p.add_argument("-o", "--output", required=True, help="ucplan network JSON to write")
    p.add_argument("--name", help="network name (default: the model name)")
    p.add_argument("--onnx", help="also keep the weight-free ONNX file here")
    p.add_argument("--opset", type=int, default=17,
                   help="ONNX opset (default 17, the newest ucplan's ONNX 1.12 reads; LayerNormalization needs 17)")
    p.add_argument("--batch", type=int, default=2,
                   help="batch size of the export (default 2: batch-norm in training needs more than one value per "
                        "channel; ucplan plans any batch)")
    p.add_argument("--no-aux", action="store_true",
                   help="drop Inception v3's and GoogLeNet's auxiliary classifiers (implied by --eval; GoogLeNet needs it: "
                        "PyTorch cannot export its 14x14 -> 4x4 adaptive pooling)")
    p.add_argument("--eval", action="store_true", help="export the inference graph (no Dropout) instead of the training one")
    p.add_argument("--ucplan", help="the ucplan binary (default: build/bin/ucplan of this checkout, else ucplan on PATH)")
    # A bad command line is one line on stderr and exit code 2, as for ucplan itself.
    p.error = lambda message: fail(f"{message} (see --help)")
    a = p.parse_args(argv)
    m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", a.input)
    if not m or min(int(v) for v in m.groups()) < 1:
        fail(f"--input: expected CxHxW with positive sizes, e.g. 3x224x224, got \"{a.input}\"")
    a.shape = tuple(int(v) for v in m.groups())
    if a.batch < 1:
        fail(f"--batch: must be positive, got {a.batch}")
    if not re.fullmatch(r"[A-Za-z_][\w.]*(:[A-Za-z_]\w*)?", a.model):
        fail(f"MODEL: expected a torchvision model name or MODULE:FACTORY, got \"{a.model}\"")
    a.name = a.name or a.model.replace(":", ".").split(".")[-1]
    return a


def find_ucplan(given):
    if given:
        return given
    built = os.path.join(ROOT, "build", "bin", "ucplan")
    if os.access(built, os.X_OK):
        return built
    found = shutil.which("ucplan")
    if not found:
        fail("no ucplan binary: build it (scripts/setup.sh) or pass --ucplan PATH")
    return found


def build_module(name):
    if ":" in name:
        module_name, factory = name.split(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            fail(f"MODEL: cannot import {module_name}: {e}")
        if not hasattr(module, factory):
            fail(f"MODEL: {module_name} has no {factory}")
        return getattr(module, factory)()
    try:
        import torchvision
    except ImportError:
        fail("torchvision model names need torchvision (pip install torchvision), or pass MODULE:FACTORY")
    models = torchvision.models
    if hasattr(models, "get_model"):
        try:
            return models.get_model(name, weights=None)
        except ValueError:
            fail(f"MODEL: torchvision has no model \"{name}\" (see torchvision.models.list_models())")
    if not hasattr(models, name):
        fail(f"MODEL: torchvision has no model \"{name}\"")
    return getattr(models, name)(weights=None)


def identity_stochastic_depth(module):
    """Stochastic depth (EfficientNet, ConvNeXt) drops whole residual branches at random in
    training; ucplan counts it as the identity, as its cost is one multiply by a per-sample
    scalar. With p = 0 PyTorch returns the input unchanged, so the export has no random ops."""
    try:
        from torchvision.ops import StochasticDepth
    except ImportError:
        return 0
    count = 0
    for m in module.modules():
        if isinstance(m, StochasticDepth) and m.p != 0.0:
            m.p = 0.0
            count += 1
    return count


def export(module, args, path):
    import torch
    x = torch.zeros((args.batch,) + args.shape)
    kwargs = dict(opset_version=args.opset, input_names=["data"], do_constant_folding=True)
    params = inspect.signature(torch.onnx.export).parameters
    if "dynamo" in params:
        kwargs["dynamo"] = False  # the TorchScript exporter: fixed shapes, opsets ONNX 1.12 knows
    if args.eval:
        module.eval()
        # PRESERVE, not EVAL: an EVAL export folds batch-norm into the convolutions before it,
        # which changes the network that is trained.
        kwargs["training"] = torch.onnx.TrainingMode.PRESERVE
    else:
        module.train()
        kwargs["training"] = torch.onnx.TrainingMode.TRAINING
        kwargs["do_constant_folding"] = False  # PyTorch refuses to fold in training mode
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter warns once per batch-norm layer in training mode
        torch.onnx.export(module, (x,), path, **kwargs)


def strip_weights(path):
    """Drops the data of every initializer with more than 16 elements, keeping its dims (all that
    ucplan import reads); small ones (Reshape shapes, scalars) stay, since their values matter."""
    import onnx
    model = onnx.load(path)
    for t in model.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if n > 16:
            for field in ("raw_data", "float_data", "double_data", "int32_data", "int64_data"):
                t.ClearField(field)
            t.ClearField("data_location")
            t.ClearField("external_data")
    onnx.save(model, path)


def main(argv):
    args = parse_args(argv)
    ucplan = find_ucplan(args.ucplan)
    try:
        import torch  # noqa: F401
    except ImportError:
        fail("needs PyTorch: pip install torch torchvision (several GB; CPU is enough)")
    module = build_module(args.model)
    if (args.eval or args.no_aux) and getattr(module, "aux_logits", False):
        # Inception v3 and GoogLeNet run their auxiliary classifiers only in training.
        module.aux_logits = False
        for aux in ("AuxLogits", "aux1", "aux2"):
            if hasattr(module, aux):
                setattr(module, aux, None)
    params = sum(p.numel() for p in module.parameters())
    if identity_stochastic_depth(module):
        print(f"{args.model}: stochastic depth exported as the identity (ucplan counts it so)")
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = args.onnx or os.path.join(tmp, args.name + ".onnx")
        try:
            export(module, args, onnx_path)
            strip_weights(onnx_path)
        except Exception as e:  # the exporter's errors are many; one line for the user
            fail(f"torch.onnx.export of {args.model} failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        r = subprocess.run([ucplan, "import", onnx_path, "-o", args.output, "--name", args.name])
        if r.returncode != 0:
            sys.exit(2)
    r = subprocess.run([ucplan, "inspect", args.output, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"ucplan inspect {args.output}: {r.stderr.strip()}")
    got = json.loads(r.stdout)["totals"]["parameters"]
    print(f"{args.model}: {params:,} parameters in PyTorch, {got:,} in {args.output}")
    if got != params:
        print(f"export_torch.py: error: the parameter counts differ by {got - params:,}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
