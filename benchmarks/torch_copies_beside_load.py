# Why ucplan's in-plan copies run 6-14 % slower than its profile's fit: one reused 64 MiB pair (the profiler's way)
# vs a cycle over many distinct pinned buffers (a plan's way), alone and beside a memory-bound kernel on another stream.
import torch, statistics
dev = torch.device("cuda")
cs, ks = torch.cuda.Stream(), torch.cuda.Stream()
def per_copy(pairs, h2d, busy, reps=3):
    big = torch.empty(1 << 28, device=dev)  # 1 GiB for the memory-bound kernel
    ts = []
    for r in range(reps + 1):
        torch.cuda.synchronize()
        if busy:
            with torch.cuda.stream(ks):
                for _ in range(400): big.mul_(1.0001)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(cs):
            s.record(cs)
            for h, d in pairs:
                (d.copy_(h, non_blocking=True) if h2d else h.copy_(d, non_blocking=True))
            e.record(cs)
        torch.cuda.synchronize()
        if r: ts.append(s.elapsed_time(e) / 1e3)
    n = sum(h.numel() * 4 for h, _ in pairs)
    return n / statistics.median(ts) / 1e9
for mib, count in ((64, 1), (64, 48), (200, 15)):
    n = mib << 18
    pairs = [(torch.ones(n, pin_memory=True), torch.empty(n, device=dev)) for _ in range(count)]
    if count == 1: pairs = pairs * 16
    for h2d in (True, False):
        for busy in (False, True):
            print(f"{mib} MiB x {count} distinct buffers, {'h2d' if h2d else 'd2h'}, {'beside a memory-bound kernel' if busy else 'alone'}: {per_copy(pairs, h2d, busy):.1f} GB/s", flush=True)
    del pairs
