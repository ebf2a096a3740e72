#!/usr/bin/env python3
"""Why a plan's copies run slower than its profile's fit, with PyTorch, independent of ucplan.

  python3 benchmarks/torch_copies_beside_load.py      (on the GPU machine; never in CI)

Copy bandwidth (GB/s, CUDA events, median of 3 after a warm-up) of one reused 64 MiB buffer pair, as the
profiler measures, against a cycle over many distinct pinned buffers, as a plan copies; each direction alone and
beside a memory-bound kernel (400 in-place multiplies of 1 GiB) on another stream. The output of the H100 session
is results/gpu-h100/plan-quality/copies-beside-load/torch-copies-beside-load.txt.
"""
import statistics

import torch


def per_copy(pairs, h2d, busy, cs, ks, reps=3):
    dev = torch.device("cuda")
    big = torch.empty(1 << 28, device=dev)  # 1 GiB for the memory-bound kernel
    ts = []
    for r in range(reps + 1):
        torch.cuda.synchronize()
        if busy:
            with torch.cuda.stream(ks):
                for _ in range(400):
                    big.mul_(1.0001)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(cs):
            s.record(cs)
            for h, d in pairs:
                if h2d:
                    d.copy_(h, non_blocking=True)
                else:
                    h.copy_(d, non_blocking=True)
            e.record(cs)
        torch.cuda.synchronize()
        if r:
            ts.append(s.elapsed_time(e) / 1e3)
    n = sum(h.numel() * 4 for h, _ in pairs)
    return n / statistics.median(ts) / 1e9


def main():
    dev = torch.device("cuda")
    cs, ks = torch.cuda.Stream(), torch.cuda.Stream()
    for mib, count in ((64, 1), (64, 48), (200, 15)):
        n = mib << 18  # floats
        pairs = [(torch.ones(n, pin_memory=True), torch.empty(n, device=dev)) for _ in range(count)]
        if count == 1:
            pairs = pairs * 16  # the same pair 16 times
        for h2d in (True, False):
            for busy in (False, True):
                gbps = per_copy(pairs, h2d, busy, cs, ks)
                print(f"{mib} MiB x {count} distinct buffers, {'h2d' if h2d else 'd2h'}, "
                      f"{'beside a memory-bound kernel' if busy else 'alone'}: {gbps:.1f} GB/s", flush=True)
        del pairs


if __name__ == "__main__":
    main()
