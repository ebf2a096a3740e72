#!/usr/bin/env python3
"""PCIe copies on the device with PyTorch, independent of ucplan: each direction alone, both at once, and both
beside a compute kernel.

  python3 benchmarks/torch_duplex.py      (on the GPU machine; never in CI)

For 4, 16, 64 and 256 MiB: seconds of a host-to-device copy, a device-to-host copy, both on two streams at once,
both beside three 8192x8192 matrix products, and the products alone (CUDA events, median of 20 after 3 warm-up
runs); the bandwidths, and both-at-once over the longer alone (two copy engines: ~1.0, one: ~2.0). The output of
the H100 session is results/gpu-h100/plan-quality/copies-beside-load/torch-duplex.txt.
"""
import json
import statistics

import torch


def timed(fn, reps=20):
    ts = []
    for r in range(reps + 3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        if r >= 3:
            ts.append(s.elapsed_time(e) / 1e3)
    return statistics.median(ts)


def main():
    dev = torch.device("cuda")
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    x = torch.randn(8192, 8192, device=dev)
    for mib in (4, 16, 64, 256):
        n = mib << 18  # floats
        hu = torch.ones(n, pin_memory=True)
        du = torch.empty(n, device=dev)
        hd = torch.empty(n, pin_memory=True)
        dd = torch.ones(n, device=dev)

        def step(up, down, products):
            """Issues the copies asked for on their own streams and `products` matrix products, then
            makes the current stream wait for the copies."""
            def run():
                if up:
                    with torch.cuda.stream(a):
                        du.copy_(hu, non_blocking=True)
                if down:
                    with torch.cuda.stream(b):
                        hd.copy_(dd, non_blocking=True)
                for _ in range(products):
                    torch.mm(x, x)
                if up:
                    torch.cuda.current_stream().wait_stream(a)
                if down:
                    torch.cuda.current_stream().wait_stream(b)
            return run

        kinds = [("h2d", step(True, False, 0)), ("d2h", step(False, True, 0)), ("both", step(True, True, 0)),
                 ("both+compute", step(True, True, 3)), ("compute", step(False, False, 3))]
        r = {k: timed(f) for k, f in kinds}
        r["h2d_GBps"] = n * 4 / r["h2d"] / 1e9
        r["d2h_GBps"] = n * 4 / r["d2h"] / 1e9
        r["both_over_longer"] = r["both"] / max(r["h2d"], r["d2h"])
        print(mib, "MiB", json.dumps({k: round(v, 6) for k, v in r.items()}), flush=True)
    print("torch", torch.__version__, torch.cuda.get_device_name())


if __name__ == "__main__":
    main()
