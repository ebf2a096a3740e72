#!/usr/bin/env python3
"""Convolution configuration optimizer (mu-cuDNN §III-IV): WR / WD policies and micro-batch policies.

  python3 benchmarks/conv_configs.py [BUILD]      (BUILD: the build folder, default build/)

Measures, through the ucplan CLI:
  A. AlexNet at batch 256 on a model:p100 profile (--sizes all): total conv time per workspace
     setting (wr:8/64/512MiB, wd:120MiB) and micro-batch policy, speedup vs undivided (Figs. 9, 11),
     the WD division of 120 MiB (Fig. 12) and the per-kernel configurations under wr:64MiB (Fig. 10);
  B. DeepBench's 94 training convolutions at 4x their batch on model:v100 (powerOfTwo, wr:64MiB):
     forward speedup vs undivided, min / mean / max and distribution (Fig. 8);
  C. ResNet-20 at batch 64 on a MEASURED CPU profile (--repeat 3): profiling time, WR 16/64 MiB and
     WD vs undivided, and per conv kernel the fastest undivided vs micro-batched choice under 16 MiB;
  D. timings: WD ILP solve time for ResNet-152 at batch 128 (powerOfTwo fronts, median of 5), DP
     time with the `all` policy at B = 256 (median of 3), and the bench_conv_config program.
Writes benchmarks/results/conv_configs.md and regenerates benchmarks/RESULTS.md.
"""
import argparse
import csv
import json
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (Cli, MiB, GiB, REPO, by_filter_table, fmt_bytes, fmt_config, fmt_ms, machine_note,  # noqa: E402
                     median, rel, table, work_dir, write_section, load_average)

POLICIES = ["undivided", "powerOfTwo", "all"]


def results_by(rep):
    """{(setting, policy): result} of a --conv-only --json report."""
    return {(r["setting"], r["policy"]): r for r in rep["results"]}


def speedup(base_ns, ns):
    return base_ns / ns if ns else float("nan")


def conv_only(cli, net, profile, settings, extra=()):
    args = ["ucplan", "compile", net, "--profile", profile, "--conv-only", "--json"]
    for s in settings:
        args += ["--workspace", s]
    return cli.json(args + list(extra))


# --- A. AlexNet -----------------------------------------------------------------------------------

def part_alexnet(cli, w, out):
    settings = ["wr:8MiB", "wr:64MiB", "wr:512MiB", "wd:120MiB"]
    prof_all = os.path.join(w, "alexnet-b256-p100-all.json")
    prof_p2 = os.path.join(w, "alexnet-b256-p100-powerOfTwo.json")
    for sizes, prof in (("all", prof_all), ("powerOfTwo", prof_p2)):
        cli.run(["ucplan", "profile", "alexnet", "--batch", "256", "--device", "model:p100", "--sizes", sizes,
                 "-o", prof])
    reps = [conv_only(cli, "alexnet", prof_all, settings) for _ in range(3)]
    rep = reps[0]
    for other in reps[1:]:   # the modelled part must not change between runs
        for a, b in zip(rep["results"], other["results"]):
            if {k: v for k, v in a.items() if k != "solve_ms"} != {k: v for k, v in b.items() if k != "solve_ms"}:
                out.anomalies.append("AlexNet --conv-only gave different configurations on a repeated run")
    rep_p2 = conv_only(cli, "alexnet", prof_p2, settings)
    R = results_by(rep)
    R2 = results_by(rep_p2)
    same_p2 = all(R[(s, p)]["total_time_ns"] == R2[(s, p)]["total_time_ns"] and
                  [k["config"] for k in R[(s, p)]["kernels"]] == [k["config"] for k in R2[(s, p)]["kernels"]]
                  for s in settings for p in ("undivided", "powerOfTwo"))
    nk = len(R[("wr:8MiB", "undivided")]["kernels"])
    cmd = (f"ucplan profile alexnet --batch 256 --device model:p100 --sizes all -o P\n"
           f"ucplan compile alexnet --profile P --conv-only --workspace wr:8MiB --workspace wr:64MiB "
           f"--workspace wr:512MiB --workspace wd:120MiB --json")
    s = []
    s.append("### A. AlexNet, batch 256, model:p100 (MODELLED; mu-cuDNN Figs. 9-12)\n")
    s.append("Produced by\n\n```\n" + cmd + "\n```\n")
    s.append(f"P is `{rel(prof_all)}` (`--sizes all`, so every micro-batch size 1..256 is costed; the `powerOfTwo` "
             f"and `undivided` policies use the subset of sizes). AlexNet has {nk} convolution kernels (conv1 has no "
             f"backward-data kernel). Times are the sum over kernels of the modelled kernel times; the workspace "
             f"column of WR is the sum of the per-kernel workspaces (each kernel owns its own, at most the limit), "
             f"of WD the total that the ILP divides.\n")
    rows = []
    for st in settings:
        u = R[(st, "undivided")]
        row = [f"`{st}`", fmt_ms(u["total_time_ns"]), fmt_bytes(u["total_workspace_bytes"])]
        for p in ("powerOfTwo", "all"):
            r = R[(st, p)]
            if not r["ok"]:
                row += [f"fails: {r['why']}", ""]
                continue
            row += [f"{fmt_ms(r['total_time_ns'])} ({speedup(u['total_time_ns'], r['total_time_ns']):.2f}x)",
                    fmt_bytes(r["total_workspace_bytes"])]
        rows.append(row)
    s.append("**Total convolution time per setting and policy** (ms; speedup vs `undivided` under the same setting):\n")
    s.append(table(["setting", "undivided", "workspace", "powerOfTwo", "workspace", "all", "workspace"], rows))
    base8 = R[("wr:8MiB", "undivided")]["total_time_ns"]
    base64 = R[("wr:64MiB", "undivided")]["total_time_ns"]
    wd_all = R[("wd:120MiB", "all")]["total_time_ns"]
    wd_p2 = R[("wd:120MiB", "powerOfTwo")]["total_time_ns"]
    wr64_all = R[("wr:64MiB", "all")]["total_time_ns"]
    wr64_p2 = R[("wr:64MiB", "powerOfTwo")]["total_time_ns"]
    s.append("")
    s.append(f"- WR 64 MiB, speedup vs undivided: `all` **{speedup(base64, wr64_all):.2f}x**, `powerOfTwo` "
             f"{speedup(base64, wr64_p2):.2f}x (paper, P100 convolutions alone: 1.63x).")
    s.append(f"- WD 120 MiB in total vs WR 8 MiB per kernel ({nk} x 8 MiB = {nk * 8} MiB, the paper's adjoined bars): "
             f"`all` **{speedup(base8, wd_all):.2f}x**, `powerOfTwo` {speedup(base8, wd_p2):.2f}x over WR 8 MiB "
             f"undivided (paper: 1.38x for convolutions); vs WR 64 MiB undivided ({nk} x 64 MiB = {nk * 64} MiB): "
             f"{speedup(base64, wd_all):.2f}x (`all`).")
    s.append(f"- The same report from a `--sizes powerOfTwo` profile (`{rel(prof_p2)}`) gives "
             f"{'identical' if same_p2 else 'DIFFERENT'} `undivided` and `powerOfTwo` totals and configurations.")
    if not same_p2:
        out.anomalies.append("AlexNet: the powerOfTwo policy gives different results from a --sizes all and a "
                             "--sizes powerOfTwo profile")

    # Fig. 12: the WD division.
    s.append("\n**WD division of 120 MiB** (Fig. 12; per kernel, `all` and `powerOfTwo` policies; WR 8 MiB undivided "
             "for reference):\n")
    wd_a = {k["kernel"]: k for k in R[("wd:120MiB", "all")]["kernels"]}
    wd_p = {k["kernel"]: k for k in R[("wd:120MiB", "powerOfTwo")]["kernels"]}
    wr8 = {k["kernel"]: k for k in R[("wr:8MiB", "undivided")]["kernels"]}
    total = 120 * MiB
    rows = []
    per_layer = {}
    for name, k in wd_a.items():
        layer = name.split(":")[0]
        per_layer[layer] = per_layer.get(layer, 0) + k["workspace_bytes"]
        rows.append([f"`{name}`", fmt_bytes(wr8[name]["workspace_bytes"]), fmt_ms(wr8[name]["time_ns"]),
                     f"`{fmt_config(k['config'])}`", fmt_bytes(k["workspace_bytes"]),
                     f"{100 * k['workspace_bytes'] / total:.1f} %", fmt_ms(k["time_ns"]),
                     f"`{fmt_config(wd_p[name]['config'])}`", fmt_bytes(wd_p[name]["workspace_bytes"]),
                     fmt_ms(wd_p[name]["time_ns"])])
    s.append(table(["kernel", "WR 8 MiB ws", "WR 8 MiB ms", "WD `all` configuration", "WD ws", "share of 120 MiB",
                    "WD ms", "WD `powerOfTwo` configuration", "ws", "ms"], rows, "lrrlrrrlrr"))
    shares = ", ".join(f"{l} {100 * b / total:.1f} %" for l, b in per_layer.items())
    s.append(f"\nShare of the 120 MiB per layer (`all`): {shares} (paper: conv2 + conv3 get 93.7 %). "
             f"Used: {fmt_bytes(R[('wd:120MiB', 'all')]['total_workspace_bytes'])}.")

    # Fig. 10: per-kernel configurations under wr:64MiB.
    s.append("\n**Per-kernel configurations under `wr:64MiB`** (Fig. 10-like; `algo@micro-batch xcount`, "
             "ms = modelled time of the kernel):\n")
    ks = {p: {k["kernel"]: k for k in R[("wr:64MiB", p)]["kernels"]} for p in POLICIES}
    rows = []
    for name in ks["undivided"]:
        u, p2, a = ks["undivided"][name], ks["powerOfTwo"][name], ks["all"][name]
        rows.append([f"`{name}`", f"`{fmt_config(u['config'])}`", fmt_ms(u["time_ns"]),
                     f"`{fmt_config(p2['config'])}`", fmt_bytes(p2["workspace_bytes"]), fmt_ms(p2["time_ns"]),
                     f"{speedup(u['time_ns'], p2['time_ns']):.2f}x",
                     f"`{fmt_config(a['config'])}`", fmt_bytes(a["workspace_bytes"]), fmt_ms(a["time_ns"]),
                     f"{speedup(u['time_ns'], a['time_ns']):.2f}x"])
    s.append(table(["kernel", "undivided", "ms", "powerOfTwo", "ws", "ms", "speedup", "all", "ws", "ms", "speedup"],
                   rows, "llrlrrrlrrr"))
    c2 = ks["all"].get("conv2:forward")
    if c2:
        s.append(f"\nconv2 forward (the paper's Fig. 10 kernel): undivided `{fmt_config(ks['undivided']['conv2:forward']['config'])}` "
                 f"{fmt_ms(ks['undivided']['conv2:forward']['time_ns'])} ms; powerOfTwo "
                 f"`{fmt_config(ks['powerOfTwo']['conv2:forward']['config'])}`; all `{fmt_config(c2['config'])}` "
                 f"{fmt_ms(c2['time_ns'])} ms = "
                 f"{speedup(ks['undivided']['conv2:forward']['time_ns'], c2['time_ns']):.2f}x (paper: FFT with micro-batches "
                 f"of 32 for powerOfTwo, Winograd added by all, 2.33x).")
    out.sections.append("\n".join(s))
    out.dp["alexnet"] = {p: [r["dp_ms"][p] for r in reps] for p in rep["dp_ms"]}
    out.dp_kernels["alexnet"] = nk
    out.summary["alexnet"] = {"wr64_all_speedup": speedup(base64, wr64_all), "wd120_all_vs_wr8": speedup(base8, wd_all)}


# --- B. DeepBench ---------------------------------------------------------------------------------

def deepbench_layers():
    """[(index, N, filter 'HxW', shape text)] from networks/deepbench/README.md (cross-checked with the CSV)."""
    rows = []
    with open(os.path.join(REPO, "networks", "deepbench", "README.md")) as f:
        for line in f:
            m = re.match(r"\|\s*conv(\d+)\.json\s*\|(.*)\|\s*$", line)
            if not m:
                continue
            cells = [c.strip() for c in m.group(2).split("|")]
            n, c, h, wd, k, filt, pad, stride, outs = cells
            rows.append((int(m.group(1)), int(n), filt,
                         f"{c}x{h}x{wd} k{k} {filt} p{pad} s{stride}"))
    csv_path = "/work/shared/data/deepbench-conv-training.csv"
    if os.path.exists(csv_path):
        with open(csv_path) as f:
            ns = [int(r["n"]) for r in csv.DictReader(f)]
        if ns != [r[1] for r in rows]:
            sys.exit("error: networks/deepbench/README.md and the DeepBench CSV disagree on N")
    return rows


def part_deepbench(cli, w, out):
    layers = deepbench_layers()
    d = os.path.join(w, "deepbench")
    os.makedirs(d, exist_ok=True)
    res = []
    for idx, n, filt, shape in layers:
        net = f"deepbench/conv{idx:02d}"
        prof = os.path.join(d, f"conv{idx:02d}-b{4 * n}-v100.json")
        cli.run(["ucplan", "profile", net, "--batch", str(4 * n), "--device", "model:v100", "--sizes", "powerOfTwo",
                 "-o", prof])
        rep = conv_only(cli, net, prof, ["wr:64MiB"])
        R = results_by(rep)
        fw = {p: next(k for k in R[("wr:64MiB", p)]["kernels"] if k["kernel"].endswith(":forward"))
              for p in ("undivided", "powerOfTwo")}
        if fw["powerOfTwo"]["undivided_time_ns"] != fw["undivided"]["time_ns"]:
            out.anomalies.append(f"DeepBench conv{idx:02d}: undivided_time_ns of the powerOfTwo result "
                                 f"({fw['powerOfTwo']['undivided_time_ns']}) differs from the undivided result's time "
                                 f"({fw['undivided']['time_ns']})")
        res.append({"idx": idx, "n": n, "batch": 4 * n, "filter": filt, "shape": shape,
                    "u": fw["undivided"], "p": fw["powerOfTwo"],
                    "sp": speedup(fw["undivided"]["time_ns"], fw["powerOfTwo"]["time_ns"])})
    sps = [r["sp"] for r in res]
    s = []
    s.append("### B. DeepBench forward convolutions, model:v100, wr:64MiB (MODELLED; mu-cuDNN Fig. 8)\n")
    s.append("Produced by, for each of the 94 layers `networks/deepbench/convNN.json` with batch 4N (N from "
             "`networks/deepbench/README.md`, equal to the CSV's `n`):\n\n```\n"
             "ucplan profile deepbench/convNN --batch 4N --device model:v100 --sizes powerOfTwo -o P\n"
             "ucplan compile deepbench/convNN --profile P --conv-only --workspace wr:64MiB --json\n```\n")
    s.append(f"Speedup of the forward kernel's `powerOfTwo` configuration over the `undivided` one (both within "
             f"64 MiB): **min {min(sps):.2f}x, mean {sum(sps) / len(sps):.2f}x, geometric mean "
             f"{math.exp(sum(math.log(x) for x in sps) / len(sps)):.2f}x, median {median(sps):.2f}x, max "
             f"{max(sps):.2f}x** over {len(sps)} layers; {sum(1 for x in sps if x > 1.0005)} of them are divided "
             f"(paper, V100 in half precision with Tensor Cores: up to 4.54x, 1.60x on average; ucplan's model is "
             f"float32).\n")
    bins = [(0, 1.0005, "1.00x (not divided)"), (1.0005, 1.1, "1.00-1.10x"), (1.1, 1.25, "1.10-1.25x"),
            (1.25, 1.5, "1.25-1.50x"), (1.5, 2.0, "1.50-2.00x"), (2.0, 3.0, "2.00-3.00x"), (3.0, 1e9, "> 3.00x")]
    rows = [[label, sum(1 for x in sps if lo <= x < hi), "#" * sum(1 for x in sps if lo <= x < hi)]
            for lo, hi, label in bins]
    s.append("**Distribution** (number of layers per speedup range):\n")
    s.append(table(["speedup", "layers", ""], rows, "lrl"))
    s.append("\n**By filter size** (the paper's Fig. 8 groups):\n")
    s.append(by_filter_table(res))
    rows = [[f"conv{r['idx']:02d}", r["shape"], r["batch"], f"`{fmt_config(r['u']['config'])}`", fmt_ms(r["u"]["time_ns"], 3),
             f"`{fmt_config(r['p']['config'])}`", fmt_bytes(r["p"]["workspace_bytes"]), fmt_ms(r["p"]["time_ns"], 3),
             f"{r['sp']:.2f}x"] for r in res]
    s.append("\n<details><summary>Per layer (94 rows)</summary>\n")
    s.append(table(["layer", "C x H x W, K, filter, pad, stride", "batch", "undivided", "ms", "powerOfTwo", "ws", "ms",
                    "speedup"], rows, "llrlrlrrr"))
    s.append("\n</details>")
    out.sections.append("\n".join(s))
    out.summary["deepbench"] = {"min": min(sps), "mean": sum(sps) / len(sps), "max": max(sps)}


# --- C. ResNet-20 on the CPU (measured) -----------------------------------------------------------

def part_resnet20_cpu(cli, w, out, runs=3):
    settings = ["wr:16MiB", "wr:64MiB", "wd:16MiB", "wd:64MiB"]
    profs, secs, loads = [], [], []
    for i in range(runs):
        prof = os.path.join(w, f"resnet20-b64-cpu-run{i + 1}.json")
        loads.append(load_average()[0])
        _, so, _, dt = cli.run(["ucplan", "profile", "resnet20", "--batch", "64", "--device", "cpu", "--sizes",
                                "powerOfTwo", "--repeat", "3", "-o", prof], timed=True)
        profs.append(prof)
        secs.append(dt)
    with open(profs[0]) as f:
        pj = json.load(f)
    reps = [conv_only(cli, "resnet20", p, settings) for p in profs]
    R = results_by(reps[0])
    s = []
    s.append("### C. ResNet-20, batch 64, on the CPU (MEASURED)\n")
    s.append("Produced by\n\n```\nucplan profile resnet20 --batch 64 --device cpu --sizes powerOfTwo --repeat 3 -o P\n"
             "ucplan compile resnet20 --profile P --conv-only --workspace wr:16MiB --workspace wr:64MiB "
             "--workspace wd:16MiB --workspace wd:64MiB --json\n```\n")
    versions = ", ".join(f"{k} {v}" for k, v in pj["device"]["versions"].items())
    s.append(f"Device: {pj['device']['name']} ({versions}). Every kernel time in the profile is the "
             f"median of 3 timed runs after a warm-up (`--repeat 3`). **The 2 cores were shared with other sessions** "
             f"(1-minute load average {', '.join(f'{x:.2f}' for x in loads)} at the start of each profiling run), so "
             f"kernel times are noisy. The profile was taken {runs} times without a cache: profiling took "
             f"**{median(secs):.1f} s** (median of {runs}; runs: {', '.join(f'{x:.1f}' for x in secs)} s, wall clock, "
             f"{len(pj['signatures'])} signatures, {sum(len(x['costs']) for x in pj['signatures'])} costs). The tables "
             f"use run 1 (`{rel(profs[0])}`); the spread over the 3 profiles is given per setting.\n")
    rows = []
    for st in settings:
        u, p = R[(st, "undivided")], R[(st, "powerOfTwo")]
        spread = [speedup(results_by(r)[(st, "undivided")]["total_time_ns"], results_by(r)[(st, "powerOfTwo")]["total_time_ns"])
                  for r in reps]
        rows.append([f"`{st}`", fmt_ms(u["total_time_ns"], 1), fmt_bytes(u["total_workspace_bytes"]),
                     fmt_ms(p["total_time_ns"], 1), fmt_bytes(p["total_workspace_bytes"]),
                     f"**{speedup(u['total_time_ns'], p['total_time_ns']):.2f}x**",
                     f"{min(spread):.2f}x - {max(spread):.2f}x"])
    s.append("**Total convolution time** (sum over the 62 conv kernels, ms, measured; speedup of `powerOfTwo` vs "
             "`undivided` under the same setting):\n")
    s.append(table(["setting", "undivided", "workspace", "powerOfTwo", "workspace", "speedup (run 1)",
                    f"speedup over {runs} profiles"], rows))
    wr16u = R[("wr:16MiB", "undivided")]["total_time_ns"]
    s.append(f"\nWD 16 MiB in total with micro-batches vs WR 16 MiB per kernel undivided: "
             f"{speedup(wr16u, R[('wd:16MiB', 'powerOfTwo')]['total_time_ns']):.2f}x; WD 64 MiB: "
             f"{speedup(wr16u, R[('wd:64MiB', 'powerOfTwo')]['total_time_ns']):.2f}x.")
    # Per conv kernel under a 16 MiB cap.
    ku = {k["kernel"]: k for k in R[("wr:16MiB", "undivided")]["kernels"]}
    kp = {k["kernel"]: k for k in R[("wr:16MiB", "powerOfTwo")]["kernels"]}
    rows, sps = [], []
    for name in ku:
        u, p = ku[name], kp[name]
        sp = speedup(u["time_ns"], p["time_ns"])
        sps.append(sp)
        rows.append([f"`{name}`", f"`{fmt_config(u['config'])}`", fmt_bytes(u["workspace_bytes"]), fmt_ms(u["time_ns"]),
                     f"`{fmt_config(p['config'])}`", fmt_bytes(p["workspace_bytes"]), fmt_ms(p["time_ns"]), f"{sp:.2f}x"])
    divided = sum(1 for k in kp.values() if len(k["config"]) > 1)
    algos = {}
    for k in ku.values():
        a = k["config"][0][0]
        algos[a] = algos.get(a, 0) + 1
    s.append(f"\n**Per conv kernel under a 16 MiB workspace cap** (`wr:16MiB`; fastest undivided choice vs fastest "
             f"micro-batched choice, measured ms): {divided} of {len(kp)} kernels are divided; speedup per kernel "
             f"min {min(sps):.2f}x, geometric mean {math.exp(sum(math.log(x) for x in sps) / len(sps)):.2f}x, "
             f"max {max(sps):.2f}x. The undivided choices within 16 MiB: "
             f"{', '.join(f'{a} x{n}' for a, n in sorted(algos.items(), key=lambda kv: -kv[1]))} (an algorithm whose "
             f"workspace at batch 64 exceeds 16 MiB is usable only on micro-batches).\n")
    s.append("<details><summary>Per kernel (62 rows)</summary>\n")
    s.append(table(["kernel", "undivided choice", "ws", "ms", "micro-batched choice", "ws", "ms", "speedup"], rows,
                   "llrrlrrr"))
    s.append("\n</details>")
    # End to end: replay whole training iterations with the undivided and the micro-batched choices.
    # The four plans are replayed in turn, 3 rounds of 3 timed iterations each, so that a change in the
    # machine's load affects them alike; the median is over the 9 timed iterations of a plan.
    rounds, per = 3, 3
    iters = rounds * per
    keys = [(st, mb) for st in ("wr:16MiB", "wr:64MiB") for mb in ("undivided", "powerOfTwo")]
    plans, times, predicted, loads = {}, {k: [] for k in keys}, {}, {k: [] for k in keys}
    for st, mb in keys:
        plans[(st, mb)] = os.path.join(w, f"resnet20-b64-cpu-{st.replace(':', '')}-{mb}.plan.json")
        cli.run(["ucplan", "compile", "resnet20", "--profile", profs[0], "--budget", "4GiB", "--workspace", st,
                 "--micro-batches", mb, "-q", "-o", plans[(st, mb)]])
    for _ in range(rounds):
        for k in keys:
            loads[k].append(load_average()[0])
            rj = json.loads(cli.run(["ucplan", "run", plans[k], "--device", "cpu", "--iterations", str(per),
                                     "--json"])[1])
            times[k] += rj["iterations"]
            predicted[k] = rj["predicted_seconds"]
    rows = []
    measured = {}
    for k in keys:
        measured[k] = median(times[k])
        rows.append([f"`{k[0]}`", k[1], f"{predicted[k] * 1e3:.0f}", f"**{measured[k] * 1e3:.0f}**",
                     f"{min(times[k]) * 1e3:.0f} - {max(times[k]) * 1e3:.0f}", f"{measured[k] / predicted[k]:.2f}",
                     ", ".join(f"{x:.1f}" for x in loads[k])])
    s.append(f"\n**End to end on the CPU** (MEASURED): whole training iterations replayed by "
             f"`ucplan compile resnet20 --profile P --budget 4GiB --workspace wr:SIZE --micro-batches POLICY -o PLAN` "
             f"and `ucplan run PLAN --device cpu --iterations {per} --json`, the four plans in turn, {rounds} times "
             f"(median of the {iters} timed iterations of a plan, each call after one warm-up iteration; predicted = "
             f"the plan's time from profile run 1; the whole iteration, not only convolutions):\n")
    s.append(table(["setting", "micro-batches", "predicted ms", f"measured ms (median of {iters})", "min - max",
                    "measured / predicted", "load avg (1 min) per round"], rows, "llrrrrr"))
    pred = {}
    for row in rows:
        pred[(row[0].strip("`"), row[1])] = float(row[2])
    s.append(f"\nSpeedup of the micro-batched plan over the undivided one, whole iterations: wr:16MiB measured "
             f"**{measured[('wr:16MiB', 'undivided')] / measured[('wr:16MiB', 'powerOfTwo')]:.2f}x** (predicted "
             f"{pred[('wr:16MiB', 'undivided')] / pred[('wr:16MiB', 'powerOfTwo')]:.2f}x), wr:64MiB measured "
             f"**{measured[('wr:64MiB', 'undivided')] / measured[('wr:64MiB', 'powerOfTwo')]:.2f}x** (predicted "
             f"{pred[('wr:64MiB', 'undivided')] / pred[('wr:64MiB', 'powerOfTwo')]:.2f}x).")
    def body(path):
        with open(path) as f:
            return [ln for ln in f if '"options"' not in ln and '"workspace_policy"' not in ln]
    for mb in ("undivided", "powerOfTwo"):
        a, b = ("wr:16MiB", mb), ("wr:64MiB", mb)
        if body(plans[a]) == body(plans[b]):
            s.append(f"\nThe two `{mb}` plans are identical apart from their options (every kernel's fastest choice "
                     f"already fits in 16 MiB), so the difference of their measured medians, {measured[a] * 1e3:.0f} vs "
                     f"{measured[b] * 1e3:.0f} ms, is the run-to-run noise of this shared machine.")
    out.timings["resnet20_cpu_run_speedup"] = {st: measured[(st, "undivided")] / measured[(st, "powerOfTwo")]
                                               for st in ("wr:16MiB", "wr:64MiB")}
    out.sections.append("\n".join(s))
    out.timings["resnet20_cpu_profile_s"] = median(secs)
    out.summary["resnet20"] = {st: speedup(R[(st, "undivided")]["total_time_ns"], R[(st, "powerOfTwo")]["total_time_ns"])
                               for st in settings}


# --- D. solve and DP times ------------------------------------------------------------------------

def part_timings(cli, w, out):
    s = []
    s.append("### D. Optimizer timings (MEASURED wall-clock work of the optimizer on MODELLED profiles)\n")
    s.append("All timings below are medians over the stated number of repeated runs, on the 2 shared cores "
             "(other sessions were running: see the load average in the header of this section); they are the "
             "`solve_ms` / `dp_ms` fields of `ucplan compile --conv-only --json`, i.e. the time of the ILP solve "
             "(CBC) or of the Pareto-front dynamic programme alone.\n")
    # ILP: ResNet-152 at batch 128, powerOfTwo fronts, model:p100.
    prof = os.path.join(w, "resnet152-b128-p100-powerOfTwo.json")
    cli.run(["ucplan", "profile", "resnet152", "--batch", "128", "--device", "model:p100", "--sizes", "powerOfTwo",
             "-o", prof])
    dump = cli.json(["ucplan", "compile", "resnet152", "--profile", prof, "--budget", "1000GiB", "--micro-batches",
                     "powerOfTwo", "--dump-after", "conv-configs", "-q"])
    fronts = [len(k["front"]) for k in dump["kernels"]]
    ws_min = sum(min(f["workspace_bytes"] for f in k["front"]) for k in dump["kernels"])
    ws_max = sum(max(f["workspace_bytes"] for f in k["front"]) for k in dump["kernels"])
    totals = ["256MiB", "1GiB", "2544MiB", "5088MiB", "10GiB", "20GiB"]
    settings = [f"wd:{t}" for t in totals]
    reps, walls = [], []
    for _ in range(5):
        args = ["ucplan", "compile", "resnet152", "--profile", prof, "--conv-only", "--json"]
        for st in settings:
            args += ["--workspace", st]
        _, so, _, dt = cli.run(args, timed=True)
        reps.append(json.loads(so))
        walls.append(dt)
    rows = []
    for st in settings:
        for p in ("undivided", "powerOfTwo"):
            rs = [results_by(r)[(st, p)] for r in reps]
            ms = [r["solve_ms"] for r in rs]
            r0 = rs[0]
            same = p == "powerOfTwo" and r0["total_time_ns"] == results_by(reps[0])[(st, "undivided")]["total_time_ns"]
            rows.append([f"`{st}`", p + (" (= undivided)" if same else ""), "yes" if r0["ok"] else f"no: {r0['why']}",
                         fmt_ms(r0["total_time_ns"], 1),
                         fmt_bytes(r0["total_workspace_bytes"]), f"**{median(ms):.2f}**", f"{min(ms):.2f} - {max(ms):.2f}"])
    s.append(f"**WD ILP solve time, ResNet-152 at batch 128, model:p100, powerOfTwo fronts** (median of 5 runs of "
             f"`ucplan compile resnet152 --profile P --conv-only --json --workspace wd:T ...` with all six totals in "
             f"one run; the modelled conv time is deterministic). {len(fronts)} kernels, Pareto fronts of "
             f"{min(fronts)}..{max(fronts)} configurations, {sum(fronts)} configurations in all (the ILP's variables "
             f"before any are excluded by the total); sums of the fronts' smallest and largest workspaces: "
             f"{fmt_bytes(ws_min)} and {fmt_bytes(ws_max)}. Whole-command wall clock (profile read, fronts, six "
             f"ILPs per policy, JSON): median {median(walls):.2f} s. Paper (GLPK): 716 ms for this case.\n")
    s.append(table(["WD total", "policy", "solved", "conv time (ms, MODELLED)", "workspace used",
                    "solve_ms (median of 5)", "min - max"], rows, "llllrrr"))
    if any("(= undivided)" in r[1] for r in rows):
        s.append("\n'(= undivided)': the ILP's optimum at this total uses no micro-batched configuration: on this "
                 "model the micro-batched points of a front need tens of MiB (e.g. `ucplan compile resnet152 --profile "
                 "P --conv-only --workspace wd:256MiB --pareto layer3.5.conv2:forward`: the cheapest micro-batched "
                 "point takes 27 MiB, undivided Winograd 4 MiB), too much for 464 kernels sharing 256 MiB.")
    out.timings["resnet152_wd_solve_ms_max_median"] = max(
        median([results_by(r)[(st, "powerOfTwo")]["solve_ms"] for r in reps]) for st in settings)
    # DP with the `all` policy at B = 256.
    prof50 = os.path.join(w, "resnet50-b256-p100-all.json")
    cli.run(["ucplan", "profile", "resnet50", "--batch", "256", "--device", "model:p100", "--sizes", "all",
             "-o", prof50])
    reps50 = [conv_only(cli, "resnet50", prof50, ["wr:64MiB"]) for _ in range(3)]
    out.dp["resnet50"] = {p: [r["dp_ms"][p] for r in reps50] for p in reps50[0]["dp_ms"]}
    out.dp_kernels["resnet50"] = len(reps50[0]["results"][0]["kernels"])
    rows = []
    for net in ("alexnet", "resnet50"):
        for p in POLICIES:
            v = out.dp[net][p]
            rows.append([net, out.dp_kernels[net], p, f"**{median(v):.1f}**" if p == "all" else f"{median(v):.1f}",
                         f"{min(v):.1f} - {max(v):.1f}"])
    s.append("\n**Pareto-front DP time at B = 256** (`dp_ms` of `ucplan compile NET --profile P --conv-only --json` on "
             "a `--sizes all` model:p100 profile at batch 256; median of 3 runs; the DP runs once per distinct "
             "kernel shape and policy):\n")
    s.append(table(["network", "kernels", "policy", "dp_ms (median of 3)", "min - max"], rows, "lrlrr"))
    # bench_conv_config.
    bench = cli.find("bench_conv_config")
    _, so, se, dt = cli.run([bench], timed=True)
    s.append(f"\n**`{rel(bench)}`** (the C++ micro-benchmark of the passes on synthetic fronts; its own medians of "
             f"11 runs; took {dt:.1f} s wall clock):\n")
    s.append("```\n" + so.rstrip() + "\n```")
    out.sections.append("\n".join(s))


class Out:
    def __init__(self):
        self.sections, self.anomalies = [], []
        self.dp, self.dp_kernels, self.timings, self.summary = {}, {}, {}, {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build", help="build folder with bin/ucplan (default: build)")
    ap.add_argument("--skip-cpu", action="store_true", help="leave out part C (the measured CPU profile)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    cli = Cli(a.build)
    w = work_dir(a.build, "conv_configs")
    out = Out()
    note = machine_note(cli)
    part_alexnet(cli, w, out)
    part_deepbench(cli, w, out)
    if not a.skip_cpu:
        part_resnet20_cpu(cli, w, out)
    part_timings(cli, w, out)
    total = time.perf_counter() - t0
    head = ["## conv_configs.py: convolution configuration optimizer (mu-cuDNN)\n",
            f"`python3 benchmarks/conv_configs.py {rel(a.build)}`; intermediate files in `{rel(w)}`. "
            f"Machine: {note}. The script took **{total:.0f} s** wall clock.\n"]
    if out.anomalies:
        head.append("**Anomalies found by the script:**\n\n" + "\n".join(f"- {x}" for x in out.anomalies) + "\n")
    write_section("conv_configs.md", "\n".join(head) + "\n" + "\n\n".join(out.sections))
    print(json.dumps({"seconds": round(total, 1), "summary": out.summary, "timings": out.timings,
                      "anomalies": out.anomalies}, indent=1))


if __name__ == "__main__":
    main()
