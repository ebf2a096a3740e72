#!/usr/bin/env python3
"""PyTorch's training iteration on the same GPU, the same network and batch as a ucplan plan.

The independent truth ucplan is held against: torchvision's model (the zoo's networks are
torchvision's, networks/generate.py), eager mode with cudnn.benchmark on, FP32 with TF32 off
(the math ucplan's FP32 plans use: cuDNN FMA math, cuBLAS pedantic), plain SGD, cross-entropy
loss. Each iteration copies the batch from pinned host memory to the device first, as a ucplan
plan's input prefetch does. Modes:
  eager        plain autograd
  checkpoint   torch.utils.checkpoint (use_reentrant=False) around every residual block (resnets),
               or every stage of the feature extractor up to its max pool (vgg, alexnet)
  save_on_cpu  torch.autograd.graph.save_on_cpu(pin_memory=True): every saved activation offloaded
Prints one JSON object per mode: median and every iteration time (s), peak memory allocated and
reserved by PyTorch's allocator, and the device memory in use from the driver (cudaMemGetInfo:
context, cuDNN, cuBLAS included) at the peak.
Usage: python3 benchmarks/torch_side_by_side.py NETWORK BATCH [--modes eager,checkpoint,save_on_cpu]
                                                [--iterations 20] [--warmup 3]
Needs a GPU and PyTorch with torchvision: run it on the device machine, never in CI.
"""
import argparse
import json
import statistics
import sys
import time


def build(torch, torchvision, network):
    models = torchvision.models
    if network.startswith("resnet") and hasattr(models, network):
        return getattr(models, network)(num_classes=1000), "resnet"
    if network == "vgg16":
        return models.vgg16(num_classes=1000), "vgg"
    if network == "alexnet":
        return models.alexnet(num_classes=1000), "alexnet"
    raise SystemExit(f"torch_side_by_side: no torchvision model for {network}")


def checkpointed(torch, model, kind):
    """The model with torch.utils.checkpoint around every residual block (resnet) or layer."""
    from torch.utils.checkpoint import checkpoint

    class Wrapped(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return checkpoint(self.inner, x, use_reentrant=False)

    for m in model.modules():  # an in-place ReLU would overwrite what a checkpoint recomputes from
        if hasattr(m, "inplace"):
            m.inplace = False
    if kind == "resnet":
        for name in ["layer1", "layer2", "layer3", "layer4"]:
            seq = getattr(model, name)
            for i in range(len(seq)):
                seq[i] = Wrapped(seq[i])
    else:  # one checkpoint per stage of the feature extractor, each ending at a max pool
        stages, cur = [], []
        for layer in model.features:
            cur.append(layer)
            if isinstance(layer, torch.nn.MaxPool2d):
                stages.append(Wrapped(torch.nn.Sequential(*cur)))
                cur = []
        model.features = torch.nn.Sequential(*stages, *cur)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("network")
    ap.add_argument("batch", type=int)
    ap.add_argument("--modes", default="eager,checkpoint,save_on_cpu")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.01)
    a = ap.parse_args()
    import torch
    import torchvision

    if not torch.cuda.is_available():
        print("torch_side_by_side: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    for mode in a.modes.split(","):
        torch.manual_seed(0)
        model, kind = build(torch, torchvision, a.network)
        if mode == "checkpoint":
            model = checkpointed(torch, model, kind)
        model = model.to(dev).train()
        opt = torch.optim.SGD(model.parameters(), lr=a.lr)
        loss_fn = torch.nn.CrossEntropyLoss()
        x_host = torch.randn(a.batch, 3, 224, 224).pin_memory()
        y_host = torch.randint(0, 1000, (a.batch,)).pin_memory()

        def step():
            x = x_host.to(dev, non_blocking=True)
            y = y_host.to(dev, non_blocking=True)
            opt.zero_grad(set_to_none=False)
            if mode == "save_on_cpu":
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    loss = loss_fn(model(x), y)
            else:
                loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()

        try:
            for _ in range(a.warmup):
                step()
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            free0, total = torch.cuda.mem_get_info()
            times = []
            for _ in range(a.iterations):
                t0 = time.perf_counter()
                step()
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            free1, _ = torch.cuda.mem_get_info()
            r = {"network": a.network, "batch": a.batch, "mode": mode, "median_seconds": statistics.median(times),
                 "iterations": times, "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                 "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
                 "device_used_bytes": total - min(free0, free1), "device": torch.cuda.get_device_name(),
                 "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "tf32": False}
        except torch.cuda.OutOfMemoryError as e:
            r = {"network": a.network, "batch": a.batch, "mode": mode, "error": f"out of memory: {e}"[:300]}
        print(json.dumps(r), flush=True)
        del model, opt
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
