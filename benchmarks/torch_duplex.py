# PCIe copies on this GPU: each direction alone, both at once, and each beside a compute kernel (PyTorch, independent of ucplan).
import torch, statistics, json
dev = torch.device("cuda")
res = {}
def timed(fn, reps=20):
    ts = []
    for r in range(reps + 3):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(); s.record(); fn(); e.record(); torch.cuda.synchronize()
        if r >= 3: ts.append(s.elapsed_time(e) / 1e3)
    return statistics.median(ts)
a, b = torch.cuda.Stream(), torch.cuda.Stream()
x = torch.randn(8192, 8192, device=dev)
for mib in (4, 16, 64, 256):
    n = mib << 18
    hu = torch.ones(n, pin_memory=True); du = torch.empty(n, device=dev)
    hd = torch.empty(n, pin_memory=True); dd = torch.ones(n, device=dev)
    def up():
        with torch.cuda.stream(a): du.copy_(hu, non_blocking=True)
        torch.cuda.current_stream().wait_stream(a)
    def down():
        with torch.cuda.stream(b): hd.copy_(dd, non_blocking=True)
        torch.cuda.current_stream().wait_stream(b)
    def both():
        with torch.cuda.stream(a): du.copy_(hu, non_blocking=True)
        with torch.cuda.stream(b): hd.copy_(dd, non_blocking=True)
        torch.cuda.current_stream().wait_stream(a); torch.cuda.current_stream().wait_stream(b)
    def both_compute():
        with torch.cuda.stream(a): du.copy_(hu, non_blocking=True)
        with torch.cuda.stream(b): hd.copy_(dd, non_blocking=True)
        for _ in range(3): torch.mm(x, x)
        torch.cuda.current_stream().wait_stream(a); torch.cuda.current_stream().wait_stream(b)
    def compute():
        for _ in range(3): torch.mm(x, x)
    r = {k: timed(f) for k, f in [("h2d", up), ("d2h", down), ("both", both), ("both+compute", both_compute), ("compute", compute)]}
    r["h2d_GBps"] = n * 4 / r["h2d"] / 1e9; r["d2h_GBps"] = n * 4 / r["d2h"] / 1e9
    r["both_over_longer"] = r["both"] / max(r["h2d"], r["d2h"])
    res[mib] = r
    print(mib, "MiB", json.dumps({k: round(v, 6) for k, v in r.items()}), flush=True)
print("torch", torch.__version__, torch.cuda.get_device_name())
