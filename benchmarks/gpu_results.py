#!/usr/bin/env python3
"""What a GPU session measured, read back and compared with what ucplan predicted.

  python3 benchmarks/gpu_results.py [BUILD] [--results D] [--profiles D]

Reads the files a GPU session brought back (scripts/gpu-measure.sh, scripts/gpu-validate.sh,
`ucplan run --trace`), by default benchmarks/results/gpu-h100/ and profiles/h100/, and writes
benchmarks/results/gpu-h100.md (a section of RESULTS.md):
  A. each plan's iteration, predicted from the measured profile vs measured by `ucplan run`, and its
     device memory (arena + the runtime's overhead, both measured) vs the budget it was given;
  B. the same per kind of step (forward, backward_data, ..., prefetch), from the measured traces;
  C. PyTorch on the same device (eager, activation checkpointing, save_on_cpu) beside the plans;
  D. mu-cuDNN's micro-batching (WR 64 MiB, undivided vs powerOfTwo) on whole iterations: AlexNet,
     ResNet-18, and DeepBench's 94 forward convolutions from their measured profiles;
  E. the model:h100 profile against the measured one, kernel by kernel and whole iterations, and
     model:h100-fit, corrected by the medians, with its factors fitted on all but one network;
  F. plan quality on the device (RESULTS/plan-quality/, scripts/gpu-plan-quality.sh): the default, exact mode
     and every baseline from a measured profile at shares of the liveness peak, replayed side by side; and
     the first session's plans beside today's at the same budgets;
  G. why the plans' copies run slower than predicted (plan-quality/copies-beside-load/): per copy from
     traces, PyTorch's copy bandwidths beside a load and in both directions, and two profiles whose copies
     were timed beside a load, their plans replayed beside those of the profile timed alone;
  H. a third session (session-3/): the first plan-quality session's default, today's default and exact
     mode side by side, and plans from a profile whose copies `ucplan calibrate` refit to traced runs;
  I. `run --check` of ResNet-50 plans against a fixed tolerance and against the rounding floor, beside
     the CPU's own gemm-versus-direct distances (session-3/checks/, bench_rounding_floor);
  J. a fourth session (session-4/): the golden plans from measured profiles replayed, the third session's
     default beside today's from the profiler's and from calibrated copies, where the copies' time goes
     (traces), scripts/gpu-measure.sh's calibration chain, and the validation at that commit;
  K. a fifth session (session-5/): scripts/gpu-session.sh's first run, the same replays at a later commit;
  L. a sixth session (session-6/): `run --check` of ResNet-50 b64 plans stage by stage, before and after
     the reference reused its buffers; the calibration chain at a later planner; --sub-batch 32 measured;
  M. an eighth session (session-8/): `run --check` of plans whose buffers the placement's search placed,
     the golden plans and part K's plan-quality replays at the planner with that search and its pools, the
     calibration chain again, and resnet20's idle time between kernels from traces;
  N. the launch gap `ucplan calibrate --fit launch` fits from the traces of sessions 3 and 8, and the
     predictions of part M's plans with it (computed here from those files; nothing runs on a GPU);
  O. a fifteenth session (session-15/): resnet20 b64 and VGG-16 b64, the default beside exact mode and the
     baselines at shares of the liveness peak, replayed side by side; `run --check` of an exact-mode plan and of
     plans split into sub-batches; the golden plans beside the eighth session's runs.
Every number here is MEASURED on the GPU except where a row says predicted or modelled. Parts D, E
and N call the CLI of BUILD (conv-only reports and model profiles); nothing runs on a GPU.
"""
import argparse
import glob
import gzip
import json
import math
import os
import re
import sys
import time
from statistics import geometric_mean

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Cli, REPO, fmt_bytes, median, rel, table, work_dir, write_section  # noqa: E402

GB = 1e9


def load(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return json.load(f)


def quantile(xs, q):
    """Linear-interpolated quantile of a non-empty list."""
    s = sorted(xs)
    i = q * (len(s) - 1)
    lo = math.floor(i)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


def ms(seconds, digits=1):
    return f"{seconds * 1e3:.{digits}f}"


def runs_of(results):
    """{(net, batch, share): (plan, run, trace or None)} for every run-NET-bB-SHARE.json."""
    out = {}
    for path in sorted(glob.glob(os.path.join(results, "run-*-b*-*.json"))):
        m = re.fullmatch(r"run-(\w+)-b(\d+)-(\w+)\.json", os.path.basename(path))
        if not m or m.group(1) == "mu":
            continue
        net, batch, share = m.group(1), int(m.group(2)), m.group(3)
        plan = os.path.join(results, f"plan-{net}-b{batch}-{share}.json")
        trace = os.path.join(results, f"trace-{net}-b{batch}-{share}.json")
        out[(net, batch, share)] = (load(plan), load(path), load(trace) if os.path.exists(trace) else None)
    return out


def reserve_of(profile):
    return int(profile["device"]["versions"].get("device_overhead_bytes", 0))


def step_counts(plan):
    c = {}
    for s in plan["steps"]:
        c[s["op"]] = c.get(s["op"], 0) + 1
    return c


# --- A. Iterations and memory ---------------------------------------------------------------------

def part_iterations(runs, profiles, out):
    rows = []
    ratios = []
    for (net, batch, share), (plan, run, _) in sorted(runs.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                                  -int(kv[0][2]))):
        prof = profiles.get((net, batch))
        reserve = reserve_of(prof) if prof else 0
        given = plan["options"]["budget_bytes"] + reserve
        host = sum(h["size"] for h in plan.get("host_buffers", []))
        c = step_counts(plan)
        used = run["arena_bytes"] + run["runtime_overhead_bytes"]
        ratios.append(run["measured_over_predicted"])
        rows.append([f"{net} b{batch}", f"{share} %", f"{plan['rounds']} x {plan['sub_batch']}",
                     c.get("recompute", 0), fmt_bytes(host), ms(run["predicted_seconds"]), ms(run["median_seconds"]),
                     f"{run['measured_over_predicted']:.3f}", f"{given / GB:.3f}", f"{run['arena_bytes'] / GB:.3f}",
                     f"{run['runtime_overhead_bytes'] / 1e6:.1f}", f"{used / GB:.3f}",
                     f"{(given - used) / 1e6:+.1f}"])
    s = ["### A. Iterations: predicted from the measured profile vs measured\n",
         "Each plan was compiled on the device from its measured profile (`scripts/gpu-measure.sh`: "
         "`ucplan profile NET --batch B --device cuda --sizes powerOfTwo --repeat 5`, then `ucplan compile` at the "
         "share of keep-all's peak plus the profile's reserve for the CUDA context and libraries) and replayed with "
         "`ucplan run PLAN --device cuda --iterations 20 --json` (median). Memory: the arena and the runtime's "
         "overhead beside it (context, cuDNN, cuBLAS, host-memory mapping: device memory in use minus what NVML saw "
         "in use before the process, minus the arena, largest seen) are both measured by `ucplan run`; \"used\" is "
         "their sum and \"left\" the budget given minus it (negative: over).\n",
         table(["network", "share of peak", "rounds x sub-batch", "recomputed steps", "host buffers",
                "predicted ms", "measured ms", "measured / predicted", "budget GB", "arena GB", "overhead MB",
                "used GB", "left MB"], rows, "llrrrrrrrrrrr")]
    over = [r for r in rows if r[-1].startswith("-")]
    s.append(f"\nMeasured over predicted: median **{median(ratios):.3f}**, from {min(ratios):.3f} to "
             f"{max(ratios):.3f} over {len(ratios)} plans.")
    if over:
        s.append(f" {len(over)} plan(s) used more device memory than their budget: "
                 + ", ".join(f"{r[0]} at {r[1]} ({r[-1]} MB)" for r in over)
                 + ". The runtime's overhead grows with the plan's pinned host buffers (the GPU maps their pages); "
                 "`ucplan compile` now leaves 2 MiB per GiB of host buffers for it on a measured CUDA profile "
                 "(these plans were compiled before that).")
    out.sections.append("\n".join(s))
    out.summary["measured_over_predicted"] = {"median": median(ratios), "min": min(ratios), "max": max(ratios)}


# --- B. Per kind of step --------------------------------------------------------------------------

def per_kind(plan, trace):
    """{kind: [predicted s, measured s, events]} over a measured trace's steps; also the compute stream's
    busy time and the iteration's span, predicted and measured."""
    dur = {s["id"]: (s["end_ns"] - s["start_ns"]) / 1e9 for s in plan["steps"]}
    kinds = {}
    busy = [0.0, 0.0]
    span = 0.0
    for e in trace["traceEvents"]:
        if e.get("ph") != "X" or "step" not in e.get("args", {}):
            continue
        k = kinds.setdefault(e["cat"], [0.0, 0.0, 0])
        k[0] += dur[e["args"]["step"]]
        k[1] += e["dur"] / 1e6
        k[2] += 1
        if e["tid"] == 1:
            busy[0] += dur[e["args"]["step"]]
            busy[1] += e["dur"] / 1e6
        span = max(span, (e["ts"] + e["dur"]) / 1e6)
    return kinds, busy, span


def part_kinds(runs, out):
    order = ["forward", "recompute", "backward_data", "backward_filter", "backward", "update", "offload", "prefetch"]
    rows = []
    for (net, batch, share), (plan, run, trace) in sorted(runs.items(), key=lambda kv: (kv[0][0], -int(kv[0][2]))):
        if trace is None:
            continue
        kinds, busy, span = per_kind(plan, trace)
        cells = []
        for k in order:
            if k in kinds and kinds[k][0] > 0:
                cells.append(f"{ms(kinds[k][1])} / {ms(kinds[k][0])} ({kinds[k][1] / kinds[k][0]:.2f})")
            else:
                cells.append("")
        idle = span - busy[1]
        rows.append([f"{net} b{batch} {share} %"] + cells + [f"{ms(busy[1])} of {ms(span)}", ms(idle)])
    s = ["### B. Per kind of step, from the measured traces\n",
         "`ucplan run PLAN --device cuda --trace T.json` times every step with CUDA events (one iteration). Each cell "
         "is measured / predicted ms summed over the steps of that kind in the iteration, and their ratio; "
         "`backward` is the other layers' backward (batch norm, ReLU, pooling, add, fc), `update` the SGD steps. "
         "Copies (offload, prefetch) run on their own streams beside compute; the last columns are the compute "
         "stream's busy time in the iteration's span and the rest (compute waiting for copies or launches).\n",
         table(["plan"] + order + ["compute busy ms", "compute idle ms"], rows, "l" + "r" * (len(order) + 2))]
    out.sections.append("\n".join(s))


# --- C. PyTorch beside ucplan ---------------------------------------------------------------------

def part_torch(results, runs, out):
    rows = []
    for path in sorted(glob.glob(os.path.join(results, "torch-*-b*.jsonl"))):
        m = re.fullmatch(r"torch-(\w+)-b(\d+)\.jsonl", os.path.basename(path))
        net, batch = m.group(1), int(m.group(2))
        with open(path) as f:
            torch_rows = [json.loads(line) for line in f if line.strip()]
        for t in torch_rows:
            if "median_seconds" not in t:
                continue
            rows.append([f"{net} b{batch}", f"PyTorch {t['mode']}", ms(t["median_seconds"]),
                         f"{t['device_used_bytes'] / GB:.2f}", f"{t['peak_allocated_bytes'] / GB:.2f}",
                         f"torch {t['torch']}, cuDNN {t['cudnn']}"])
        for (n, b, share), (plan, run, _) in sorted(runs.items(), key=lambda kv: -int(kv[0][2])):
            if (n, b) != (net, batch):
                continue
            rows.append([f"{net} b{batch}", f"ucplan at {share} % of peak", ms(run["median_seconds"]),
                         f"{(run['arena_bytes'] + run['runtime_overhead_bytes']) / GB:.2f}", f"{run['arena_bytes'] / GB:.2f} (arena)",
                         f"{plan['rounds']} x {plan['sub_batch']}, {step_counts(plan).get('recompute', 0)} recomputed, "
                         f"{fmt_bytes(run['bytes_d2h'])} offloaded"])
    s = ["### C. PyTorch on the same device\n",
         "`benchmarks/torch_side_by_side.py NET BATCH` (run by `scripts/gpu-measure.sh` right after ucplan's runs): "
         "torchvision's model, FP32 with TF32 off, `cudnn.benchmark = True`, SGD, the batch copied from pinned "
         "host memory each iteration; median of 20 iterations after 3 warm-up ones. `eager` keeps everything; "
         "`checkpoint` is `torch.utils.checkpoint` around every residual block (ResNet) or every feature stage up "
         "to its max pool (VGG); `save_on_cpu` offloads every saved "
         "activation to pinned host memory (`torch.autograd.graph.save_on_cpu(pin_memory=True)`). Device memory: "
         "PyTorch's is what the driver reports in use after the timed iterations (`cudaMemGetInfo` total minus "
         "free: context, libraries, the caching allocator's reserve, and whatever the device held before the "
         "process, so it overstates PyTorch's share by that much), ucplan's the arena plus its measured overhead "
         "(as in part A); the next column is PyTorch's peak allocated tensors and "
         "ucplan's arena. ucplan's AlexNet is the zoo's (grouped convolutions, LRN), not torchvision's, so their "
         "times are not comparable.\n",
         table(["network", "run", "ms / iteration", "device memory GB", "peak tensors GB", "notes"], rows,
               "llrrrl")]
    out.sections.append("\n".join(s))


# --- D. mu-cuDNN on the device --------------------------------------------------------------------

def conv_time(trace):
    """Seconds of conv and fc steps (those with a configuration) in a measured trace."""
    return sum(e["dur"] / 1e6 for e in trace["traceEvents"]
               if e.get("ph") == "X" and "config" in e.get("args", {}))


def part_mu(cli, results, profiles_dir, w, out):
    rows = []
    for net, paper in (("alexnet", "1.40x iteration, 1.63x convolutions (P100, Caffe)"),
                       ("resnet18", "1.21x iteration (P100, Caffe)")):
        u = os.path.join(results, f"run-mu-{net}-undivided.json")
        p = os.path.join(results, f"run-mu-{net}-powerOfTwo.json")
        if not (os.path.exists(u) and os.path.exists(p)):
            continue
        ru, rp = load(u), load(p)
        tu = load(os.path.join(results, f"trace-mu-{net}-undivided.json"))
        tp = load(os.path.join(results, f"trace-mu-{net}-powerOfTwo.json"))
        plan = load(os.path.join(results, f"plan-mu-{net}-powerOfTwo.json"))
        rows.append([f"{net} b{plan['options']['batch']}", ms(ru["median_seconds"]), ms(rp["median_seconds"]),
                     f"{ru['median_seconds'] / rp['median_seconds']:.2f}x", ms(conv_time(tu)), ms(conv_time(tp)),
                     f"{conv_time(tu) / conv_time(tp):.2f}x",
                     f"{ru['predicted_seconds'] / rp['predicted_seconds']:.2f}x", paper])
    s = ["### D. mu-cuDNN's micro-batches on the device (WR 64 MiB)\n",
         "Keep-all plans with every conv kernel's workspace limited to 64 MiB, `--micro-batches undivided` (what "
         "cuDNN alone would pick) vs `powerOfTwo` (mu-cuDNN), compiled from measured profiles and run with "
         "`ucplan run --iterations 20`; the conv columns sum the conv and fc steps of one traced iteration.\n",
         table(["network", "undivided ms", "powerOfTwo ms", "iteration speedup", "conv ms undivided",
                "conv ms powerOfTwo", "conv speedup", "predicted speedup", "paper"], rows, "lrrrrrrrl")]

    # DeepBench: the measured profiles' forward kernels under WR 64 MiB, and the model's choice.
    res = []
    for path in sorted(glob.glob(os.path.join(profiles_dir, "deepbench", "conv*-b*.json"))):
        m = re.fullmatch(r"conv(\d+)-b(\d+)\.json", os.path.basename(path))
        idx, batch = int(m.group(1)), int(m.group(2))
        net = f"deepbench/conv{idx:02d}"
        fw = forward_speedup(cli, net, path)
        model = os.path.join(w, f"conv{idx:02d}-b{batch}-h100.json")
        if not os.path.exists(model):
            cli.run(["ucplan", "profile", net, "--batch", str(batch), "--device", "model:h100", "--sizes",
                     "powerOfTwo", "-o", model])
        fm = forward_speedup(cli, net, model)
        res.append({"idx": idx, "batch": batch, "measured": fw, "model": fm})
    if res:
        sp = [r["measured"][0] for r in res]
        spm = [r["model"][0] for r in res]
        agree = sum(1 for r in res if (r["measured"][0] > 1.0005) == (r["model"][0] > 1.0005))
        s.append(f"\n**DeepBench's 94 training convolutions** (`profiles/h100/deepbench/`, measured at 4x the CSV's "
                 f"batch with powerOfTwo micro-batches, 3 repeats; `ucplan compile deepbench/convNN --profile P "
                 f"--conv-only --workspace wr:64MiB --json`): the forward kernel's powerOfTwo configuration over the "
                 f"undivided one, from measured kernel times: **min {min(sp):.2f}x, geometric mean {geometric_mean(sp):.2f}x, "
                 f"median {median(sp):.2f}x, max {max(sp):.2f}x**; {sum(1 for x in sp if x > 1.0005)} of "
                 f"{len(sp)} layers are divided (paper, V100 FP16 with Tensor Cores and cuDNN 7.1: mean 1.60x, up "
                 f"to 4.54x; these are FP32 without TF32 on cuDNN 9). The model:h100 profile of the same layers "
                 f"predicts geometric mean {geometric_mean(spm):.2f}x, max {max(spm):.2f}x, and agrees on whether to divide "
                 f"for {agree} of {len(res)} layers.\n")
        bins = [(0, 1.0005, "1.00x (not divided)"), (1.0005, 1.1, "1.00-1.10x"), (1.1, 1.25, "1.10-1.25x"),
                (1.25, 1.5, "1.25-1.50x"), (1.5, 2.0, "1.50-2.00x"), (2.0, 1e9, "> 2.00x")]
        rows = [[label, sum(1 for x in sp if lo <= x < hi), sum(1 for x in spm if lo <= x < hi)]
                for lo, hi, label in bins]
        s.append(table(["forward speedup", "layers (measured)", "layers (model:h100)"], rows, "lrr"))
        out.summary["deepbench_measured"] = {"min": min(sp), "geomean": geometric_mean(sp), "max": max(sp)}
    out.sections.append("\n".join(s))


def forward_speedup(cli, net, profile):
    """(undivided / powerOfTwo forward time under WR 64 MiB, config) of a conv-only report."""
    rep = cli.json(["ucplan", "compile", net, "--profile", profile, "--conv-only", "--workspace", "wr:64MiB",
                    "--json"])
    by = {(r["setting"], r["policy"]): r for r in rep["results"]}
    k = {p: next(k for k in by[("wr:64MiB", p)]["kernels"] if k["kernel"].endswith(":forward"))
         for p in ("undivided", "powerOfTwo")}
    return k["undivided"]["time_ns"] / k["powerOfTwo"]["time_ns"], k["powerOfTwo"]["config"]


# --- E. The model against the device --------------------------------------------------------------

def costs(profile):
    """{(signature, op, algo, batch): seconds} of a profile's ok entries."""
    out = {}
    for sig in profile["signatures"]:
        for c in sig["costs"]:
            if c.get("status") == "ok":
                out[(sig["signature"], c["op"], c["algo"], c["batch"])] = (sig["type"], c["seconds"])
    return out


def part_model(cli, profiles_dir, runs, w, out):
    groups = {}
    whole = []
    for path in sorted(glob.glob(os.path.join(profiles_dir, "*-b*.json"))):
        m = re.fullmatch(r"(\w+)-b(\d+)\.json", os.path.basename(path))
        net, batch = m.group(1), int(m.group(2))
        measured = load(path)
        model_path = os.path.join(w, f"{net}-b{batch}-h100.json")
        if not os.path.exists(model_path):
            cli.run(["ucplan", "profile", net, "--batch", str(batch), "--device", "model:h100", "--sizes",
                     "powerOfTwo", "-o", model_path])
        model = costs(load(model_path))
        for key, (kind, sec) in costs(measured).items():
            if key in model and model[key][1] > 0:
                op = key[1] if kind in ("conv", "fc") else "all"
                groups.setdefault((kind, op), []).append(sec / model[key][1])
        # Whole iterations: keep-all plans from either profile, and the measured keep-all run.
        run = runs.get((net, batch, "100"))
        if run:
            keep = os.path.join(w, f"{net}-b{batch}-model-keep.json")
            cli.run(["ucplan", "compile", net, "--profile", model_path, "--budget", "64GiB", "--strategy", "keep-all",
                     "-o", keep])
            predicted_model = load(keep)["summary"]["predicted_ns"] / 1e9
            whole.append([f"{net} b{batch}", ms(run[1]["median_seconds"]), ms(run[1]["predicted_seconds"]),
                          ms(predicted_model), f"{run[1]['median_seconds'] / predicted_model:.2f}"])
    rows = []
    for (kind, op), r in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        rows.append([kind, op, len(r), f"{quantile(r, 0.1):.2f}", f"{median(r):.2f}", f"{quantile(r, 0.9):.2f}",
                     f"{min(r):.2f}", f"{max(r):.2f}"])
    allr = [x for r in groups.values() for x in r]
    s = ["### E. The model:h100 profile against the device\n",
         "For every network profiled on the device (`profiles/h100/NET-bB.json`), the same network profiled with "
         "`ucplan profile NET --batch B --device model:h100 --sizes powerOfTwo` (MODELLED), entry by entry "
         "(signature, op, algorithm, micro-batch, both ok): measured seconds over modelled seconds.\n",
         table(["layer type", "op", "entries", "p10", "median", "p90", "min", "max"], rows, "llrrrrrr"),
         f"\nAll {len(allr)} entries: median {median(allr):.2f}, p10 {quantile(allr, 0.1):.2f}, p90 "
         f"{quantile(allr, 0.9):.2f}. The model is a roofline with per-algorithm efficiencies; it is kept for planning "
         "without a device, and a measured profile replaces it wherever one exists.\n"]
    if whole:
        s.append("Whole keep-all iterations: measured, predicted from the measured profile, and predicted from "
                 "model:h100:\n")
        s.append(table(["network", "measured ms", "predicted (measured profile) ms", "predicted (model:h100) ms",
                        "measured / model"], whole))
        s.append(part_model_fitted(cli, profiles_dir, runs, w))
    out.sections.append("\n".join(s))


def part_model_fitted(cli, profiles_dir, runs, w):
    """model:h100-fit (profiler/model_device.h, FITTED DEVICES) and its factors fitted on all but one network,
    that network's keep-all iteration predicted from them against what it measured."""
    fitted_on = ["resnet50-b128", "vgg16-b64", "alexnet-b256", "resnet18-b128"]
    pairs = {}
    for name in fitted_on:
        net, batch = name.rsplit("-b", 1)
        pairs[name] = (costs(load(os.path.join(profiles_dir, f"{name}.json"))),
                       load(os.path.join(w, f"{net}-b{batch}-h100.json")))

    def factors(names):
        ratios = {}
        for name in names:
            measured, model = pairs[name][0], costs(pairs[name][1])
            for key, (kind, sec) in measured.items():
                if key in model and model[key][1] > 0:
                    ratios.setdefault((kind, key[1]), []).append(sec / model[key][1])
        return {k: median(v) for k, v in ratios.items()}

    def keep_all(net, batch, profile, name):
        to = os.path.join(w, f"{name}-keep.json")
        cli.run(["ucplan", "compile", net, "--batch", str(batch), "--profile", profile, "--budget", "64GiB",
                 "--strategy", "keep-all", "-q", "-o", to])
        return load(to)["summary"]["predicted_ns"] * 1e-9

    rows = []
    for name in fitted_on:
        net, batch = name.rsplit("-b", 1)
        run = runs.get((net, int(batch), "100"))
        if not run:
            continue
        f = factors([n for n in fitted_on if n != name])
        model = json.loads(json.dumps(pairs[name][1]))
        for sig in model["signatures"]:
            for c in sig["costs"]:
                if c.get("status") == "ok" and (sig["type"], c["op"]) in f:
                    c["seconds"] *= f[(sig["type"], c["op"])]
        held_out = os.path.join(w, f"{name}-held-out-fit.json")
        with open(held_out, "w") as g:
            json.dump(model, g)
        fit_profile = os.path.join(w, f"{name}-h100-fit.json")
        cli.run(["ucplan", "profile", net, "--batch", batch, "--device", "model:h100-fit", "--sizes", "powerOfTwo",
                 "-o", fit_profile])
        measured = run[1]["median_seconds"]
        plain = keep_all(net, batch, os.path.join(w, f"{net}-b{batch}-h100.json"), f"{name}-plain")
        fit = keep_all(net, batch, fit_profile, f"{name}-fit")
        out_of = keep_all(net, batch, held_out, f"{name}-held-out")
        rows.append([f"{net} b{batch}", ms(measured), f"{ms(plain)} ({measured / plain:.2f}x)",
                     f"{ms(fit)} ({measured / fit:.2f}x)", f"{ms(out_of)} ({measured / out_of:.2f}x)"])
    every = factors(fitted_on)
    frows = [[kind, op, f"{every[(kind, op)]:.3f}"] for kind, op in sorted(every)]
    return ("\n**model:h100-fit** is model:h100 with each (layer type, op) at FP32 scaled by the median of measured "
            f"over modelled seconds over the {len(fitted_on)} networks' shared entries (tests/model/fitted.py checks "
            "its factors against these medians):\n\n" + table(["layer type", "op", "factor"], frows, "llr") +
            "\n\nKeep-all iterations, measured and predicted (measured / predicted): from model:h100, from "
            "model:h100-fit, and from factors fitted on the other networks only (the network held out):\n\n" +
            table(["network", "measured ms", "model:h100", "model:h100-fit", "fitted without it"], rows, "lrrrr"))
    out.summary["model_over_measured_median"] = median(allr)


# --- F. Plan quality on the device -----------------------------------------------------------------

QUALITY_STRATEGIES = ["ucplan", "exact", "keep-all", "vdnn-all", "vdnn-conv", "superneurons", "checkpoint-sqrt"]


def measured_pair(quality, name):
    """The two rounds' medians (s) of one plan's runs, or None when it has none."""
    paths = [os.path.join(quality, f"run-{name}-{r}.json") for r in "ab"]
    if not all(os.path.exists(p) for p in paths):
        return None
    return [load(p)["median_seconds"] for p in paths]


def part_plan_quality(quality, out):
    plans = load(os.path.join(quality, "plans.json"))
    shares = sorted({int(n.rsplit("-", 1)[1]) for n in plans if not n.startswith("side-")}, reverse=True)
    rows, spread, measured, rounds = [], [], {}, {}
    for share in shares:
        row = [f"{share} %"]
        for st in QUALITY_STRATEGIES:
            name = f"{st}-{share}"
            pair = measured_pair(quality, name) if name in plans else None
            if pair is None:
                row.append("no plan")
                continue
            m = sum(pair) / 2
            measured[(share, st)] = m
            rounds[(share, st)] = pair
            spread.append(abs(pair[0] - pair[1]) / min(pair))
            ideal = plans[name]["summary"]["ideal_ns"] / 1e9
            pred = plans[name]["summary"]["predicted_ns"] / 1e9
            row.append(f"{ms(m)} ({ms(pred)}) {100 * (m / ideal - 1):+.1f} %")
        rows.append(row)
    # The verdicts, from the measurements alone.
    lost = [(s, st, measured[(s, st)], measured[(s, "ucplan")]) for (s, st) in measured
            if st not in ("ucplan", "exact") and measured[(s, st)] < measured[(s, "ucplan")]]
    # Slower with more budget: every run of the smaller budget faster than every run of the larger one.
    non_monotone = [(st, a, b) for st in QUALITY_STRATEGIES for a, b in zip(shares, shares[1:])
                    if (a, st) in rounds and (b, st) in rounds and max(rounds[(b, st)]) < min(rounds[(a, st)])]
    gaps = [(s, measured[(s, "exact")] - measured[(s, "ucplan")]) for s in shares if (s, "exact") in measured]
    some = next(iter(plans.values()))
    prof = load(os.path.join(quality, "profile-resnet50-b64.json"))
    s = ["### F. Plan quality on the device: the default, exact mode and every baseline\n",
         f"ResNet-50 batch {some['options']['batch']} on a profile measured on the device "
         f"(`{rel(os.path.join(quality, 'profile-resnet50-b64.json'))}`, {prof['date']}), compiled here by "
         "`scripts/gpu-plan-quality.sh compile` at shares of the liveness peak (the arena's budget; exact mode with "
         "`--time-limit 60s`) and replayed there by `scripts/gpu-plan-quality.sh run`: `ucplan run --device cuda "
         "--iterations 20 --json`, every plan twice, the second round in reverse order. Each cell: MEASURED ms (the "
         "mean of the two rounds' medians), the predicted ms in brackets, and the measured overhead over the plan's "
         f"ideal ({ms(some['summary']['ideal_ns'] / 1e9)} ms: every kernel at its fastest measured configuration, "
         "nothing recomputed or waited for). keep-all has no plan at these budgets: the liveness peak leaves no room "
         "for workspaces.\n",
         table(["share of the liveness peak"] + QUALITY_STRATEGIES, rows, "l" + "r" * len(QUALITY_STRATEGIES)),
         f"\nThe two rounds differ by at most {100 * max(spread):.1f} % (median {100 * median(spread):.2f} %). "
         + ("The default is faster than every baseline at every share, measured. " if not lost else
            "Baselines faster than the default, measured: " + ", ".join(
                f"{st} at {sh} % ({ms(a)} vs {ms(b)} ms)" for sh, st, a, b in lost) + ". ")
         + ("No column is slower with more budget, measured (no pair where both runs of the smaller budget beat both "
            "of the larger). " if not non_monotone else
            "Slower with more budget (both runs of the smaller budget faster than both of the larger): " + ", ".join(
                f"{st} {a} -> {b} %" for st, a, b in non_monotone) + ". ")
         + "Exact mode minus the default, measured: " + ", ".join(f"{sh} %: {1e3 * g:+.1f} ms" for sh, g in gaps)
         + " (negative: exact mode faster)."]
    # Side by side at batch 128: the plans of the first GPU session's planner, today's default, exact mode.
    side = sorted({n.split("-")[2] for n in plans if n.startswith("side-")}, key=int)
    srows = []
    for share in side:
        cells = [f"{share} %"]
        for who in ("old", "new", "exact"):
            name = f"side-{who}-{share}"
            pair = measured_pair(quality, name)
            summ = plans[name]["summary"]
            cells.append(f"{ms(sum(pair) / 2)} ({ms(summ['predicted_ns'] / 1e9)}), "
                         f"{fmt_bytes(summ['offload_bytes'])} offloaded")
        srows.append(cells)
    if srows:
        s += ["\nThe same measured ResNet-50 b128 profile as part A (`profiles/h100/resnet50-b128.json`), at the arena "
              "budgets of part A's 25 % and 50 % plans: part A's plans (`old`, the planner of the first GPU session), "
              "today's default (`new`) and exact mode (`--time-limit 60s`), replayed side by side in one call, "
              "interleaved (old, new, exact, then exact, new, old). MEASURED ms (mean of the two rounds' medians of 20), "
              "predicted in brackets:\n",
              table(["share of keep-all's peak", "old default", "today's default", "exact mode"], srows, "lrrr")]
    out.sections.append("\n".join(s))
    out.summary["plan_quality_lost_to_baselines"] = len(lost)


# --- G. Why the plans' copies run slower than the profile says ----------------------------------

def copy_ratios(predicted_ns, trace):
    """{(kind, alone|overlapped): [measured s, predicted s, copies]} over the copies of a measured trace
    (predicted_ns: step id -> the plan's predicted ns); overlapped: a copy in the other direction ran beside
    it for more than half of its time."""
    copies = [e for e in trace["traceEvents"]
              if e.get("ph") == "X" and e.get("cat") in ("offload", "prefetch") and "step" in e.get("args", {})]
    out = {}
    for e in copies:
        shared = sum(min(o["ts"] + o["dur"], e["ts"] + e["dur"]) - max(o["ts"], e["ts"]) for o in copies
                     if o["tid"] != e["tid"] and o["ts"] < e["ts"] + e["dur"] and e["ts"] < o["ts"] + o["dur"])
        k = out.setdefault((e["cat"], "overlapped" if shared > e["dur"] / 2 else "alone"), [0.0, 0.0, 0])
        k[0] += e["dur"] / 1e6
        k[1] += predicted_ns[str(e["args"]["step"])] / 1e9
        k[2] += 1
    return out


def part_copies(d, quality, out):
    rows = []
    predicted = load(os.path.join(d, "copy-steps-predicted-ns.json"))
    for name in ("ucplan-25", "exact-50"):
        trace = load(os.path.join(d, f"trace-{name}.json"))
        for (kind, how), (m, p, n) in sorted(copy_ratios(predicted[name], trace).items()):
            rows.append([name.replace("-", " at ") + " %", kind, how, n, ms(m), ms(p), f"{m / p:.3f}"])
    torch_lines = []
    for name in ("torch-copies-beside-load.txt", "torch-duplex.txt"):
        with open(os.path.join(d, name)) as f:
            torch_lines += [line.strip() for line in f if line.strip()]
    loads = []
    for load_name, what in (("memset", "memsets over 256 MiB"), ("add", "element-wise adds over 2 x 128 MiB")):
        sub = os.path.join(d, load_name)
        plans = load(os.path.join(sub, "plans.json"))
        tr = load(os.path.join(sub, "profile-resnet50-b64-loaded.json"))["transfer"]
        for share in sorted({int(n.split("-")[1]) for n in plans}, reverse=True):
            cells = [what if share == 50 else "", f"{share} %"]
            for who, run in (("alone", "ucplan"), ("loaded", "cal")):
                pair = measured_pair(sub, f"{run}-{share}")
                m = sum(pair) / 2
                pred = plans[f"{who}-{share}"]["summary"]["predicted_ns"] / 1e9
                cells += [ms(pred), ms(m), f"{m / pred:.3f}"]
            if share == 50:
                cells.append(f"{tr['h2d']['bytes_per_second'] / GB:.1f} / {tr['d2h']['bytes_per_second'] / GB:.1f}"
                             f"{'' if tr['duplex'] else ', not duplex'}")
            else:
                cells.append("")
            loads.append(cells)
    alone = load(os.path.join(quality, "profile-resnet50-b64.json"))["transfer"]
    s = ["### G. Why the plans' copies run slower than the profile says\n",
         "Part F's plans run 1.00-1.05x their prediction, the most where they copy the most. Per copy, from "
         "`ucplan run --trace` of two of them (measured vs predicted, summed; `overlapped`: a copy in the other "
         "direction ran beside it for more than half of its time):\n",
         table(["plan", "copy", "", "copies", "measured ms", "predicted ms", "ratio"], rows, "lllrrrr"),
         "\nSo copies are slower even alone. PyTorch on the device, independent of ucplan "
         "(`benchmarks/torch_copies_beside_load.py`, `benchmarks/torch_duplex.py`):\n",
         "\n".join(f"    {line}" for line in torch_lines),
         "\nA device-to-host copy beside a memory-bound kernel runs at 50 GB/s instead of 55; host-to-device ones do "
         "not slow; both directions at once take 1.10-1.26x the longer alone (the profiler called a device duplex "
         "below 1.3x; now below 1.5x, the midpoint between two copy engines and one). Two tries at timing the "
         "profile's copies beside a load on another stream, each replayed "
         "beside plans from the profile timed alone (fit alone: h2d "
         f"{alone['h2d']['bytes_per_second'] / GB:.1f}, d2h {alone['d2h']['bytes_per_second'] / GB:.1f} GB/s; MEASURED ms, "
         "mean of two rounds' medians of 20):\n",
         table(["load", "share", "alone: predicted", "measured", "ratio", "beside the load: predicted", "measured",
                "ratio", "fit h2d / d2h GB/s"], loads, "llrrrrrrr"),
         "\nNeither load reproduces what the plans show: memsets slow host-to-device copies (not device-to-host) "
         "and made the predictions right on average (1.005-1.010) by errors that cancel; the adds slowed neither "
         "direction, and that profile's duplex test said no (1.3x was within the noise of the 1.10-1.26x above), which "
         "serialises copies and happened to win at 25 %. The profiler is unchanged: what it needs is a model of "
         "copies in both directions at once and a load that is the plan's own kernels (or a fit to the traces)."]
    out.sections.append("\n".join(s))


# --- H, I. The third GPU session: today's planner, calibrated copies, the check's rounding floor ---

def pair_cell(d, name, plans):
    pair = measured_pair(d, name)
    summ = plans[name]["summary"]
    m = sum(pair) / 2
    return m, f"{ms(m)} ({ms(summ['predicted_ns'] / 1e9)}), {fmt_bytes(summ['offload_bytes'])}", pair


def part_session3(d, out):
    plans = load(os.path.join(d, "plans.json"))
    date = open(os.path.join(d, "date.txt")).read().strip()[:10]
    rows, spread, then_now = [], [], []
    for share in (100, 85, 70, 50, 35, 25):
        cells, got = [f"{share} %"], {}
        for who in ("then-ucplan", "now-ucplan", "now-exact", "cal-ucplan"):
            name = f"{who}-{share}"
            if name not in plans:
                cells.append("")
                continue
            got[who], text, pair = pair_cell(d, name, plans)
            spread.append(abs(pair[0] - pair[1]) / min(pair))
            cells.append(text)
        then_now.append((share, got["now-ucplan"] - got["then-ucplan"], got["now-exact"] - got["now-ucplan"]))
        rows.append(cells)
    s = ["### H. Today's planner on the device, and copies calibrated from its own runs\n",
         f"Third H100 session ({date}; machine as above, nvidia-smi: "
         f"{open(os.path.join(d, 'gpu-before.txt')).read().splitlines()[1].split(',')[0]}). ResNet-50 b64 on part F's "
         "measured profile at the same arena budgets (shares of the liveness peak), every plan replayed twice in "
         "one call (`scripts/gpu-plan-quality.sh run`: 20 iterations, the second round in reverse order). `then`: "
         "part F's default, recompiled bit for bit by the planner of that session (commit f790666); `now`: the default and exact mode (`--time-limit 60s`) of commit e38530f; `hand fit`: "
         "the default from the profile with its copy lines refit by hand to part G's two traces (h2d 51.6 GB/s + "
         "7.5 us, d2h 48.7 GB/s + 4.0 us instead of 55.4 and 55.1 GB/s). Each cell: MEASURED ms (mean of the two "
         "rounds' medians), predicted ms in brackets, bytes offloaded per iteration:\n",
         table(["share", "then: default", "now: default", "now: exact mode", "hand fit: default"], rows, "lrrrr"),
         f"\nThe two rounds differ by at most {100 * max(spread):.1f} % (median {100 * median(spread):.2f} %). "
         "Now minus then, measured: " + ", ".join(f"{sh} %: {1e3 * a:+.1f} ms" for sh, a, _ in then_now)
         + ". Exact mode minus the default: " + ", ".join(f"{sh} %: {1e3 * b:+.1f} ms" for sh, _, b in then_now)
         + ". The default and exact mode are within 0.3 ms of each other at every share, measured, as predicted; "
         "at 25 % the plan from the hand-fit copy lines is faster than both by 4 ms: the profile's copies, not the "
         "search, were what limited the plans there."]
    cal = os.path.join(d, "calibrated")
    crows = []
    for share in (35, 25, 20):
        cells = [f"{share} %"]
        for who in ("now-ucplan", "calib-ucplan"):
            m, text, _ = pair_cell(cal, f"{who}-{share}", plans)
            pred = plans[f"{who}-{share}"]["summary"]["predicted_ns"] / 1e9
            cells += [text, f"{m / pred:.3f}"]
        crows.append(cells)
    with open(os.path.join(cal, "calibrate.txt")) as f:
        calibrate_lines = [line.rstrip() for line in f if line.strip()]
    s += ["\nThen the product's way (`ucplan calibrate`, commit 609a959): the profile calibrated from two of the "
          "runs above (`ucplan run --trace` of the default at 25 % and exact mode at 35 %; their copies' bytes added "
          "from the plans, as `run --trace` now records them), the default compiled from it at 35, 25 and 20 % of "
          "the peak (the same `--budget`; the arena's differs by the host buffers' mapping), and both plans of each "
          "share replayed side by side in a later call (MEASURED ms, predicted in brackets, offloaded bytes; "
          "measured over predicted):\n",
          table(["share", "profiler's copies", "measured / predicted", "calibrated copies", "measured / predicted"],
                crows, "lrrrr"),
          "\nThe same call traced the default at 25 % again with the new binary and calibrated on the device from "
          "that one trace:\n",
          "\n".join(f"    {line}" for line in calibrate_lines)]
    out.sections.append("\n".join(s))

    # I. run --check of ResNet-50 on cuda: a fixed tolerance against the rounding floor.
    chk = os.path.join(d, "checks")
    floors = {}
    for line in open(os.path.join(chk, "floors-resnet50-b64.txt")):
        parts = line.split()
        if len(parts) == 4 and parts[0].startswith("dW:"):
            floors[parts[0]] = (float(parts[1]), float(parts[2]))
    irows = []
    for name in ("now-ucplan-100", "then-ucplan-25", "now-exact-25", "cal-ucplan-25"):
        c = load(os.path.join(chk, f"check-{name}-fixed-tolerance.json"))["check"]
        e = c["errors"]
        by_direct = sorted(e[k] / floors[k][0] for k in e if k in floors and floors[k][0] > 0)
        by_jitter = sorted(e[k] / floors[k][1] for k in e if k in floors and floors[k][1] > 0)
        irows.append([name, "FAILED" if not c["passed"] else "passed", f"{c['max_rel_error']:.2e}",
                      f"{by_direct[0]:.2f} - {by_direct[-1]:.2f}", f"{by_jitter[0]:.2f} - {by_jitter[-1]:.2f}"])
    fixed = load(os.path.join(chk, "check-now-exact-25-rounding-floor.json"))["check"]
    d_all = [v[0] for v in floors.values()]
    s = ["### I. `run --check` on ResNet-50: a fixed tolerance, then the rounding floor\n",
         "`ucplan run PLAN --device cuda --check --json` compares the weight gradients of two iterations with a CPU "
         "reference (gemm for every cuDNN algorithm). With the fixed 1e-2 of earlier sessions every ResNet-50 b64 "
         "plan failed, keep-all included. Beside them, two correct FP32 runs on the CPU "
         "(`build/bin/bench_rounding_floor resnet50 64`, `checks/floors-resnet50-b64.txt`): gemm against direct "
         f"convolutions differ by up to {max(d_all):.1e}. Per plan, the cuDNN run's error over those two floors, "
         "gradient by gradient:\n",
         table(["plan", "fixed 1e-2", "largest error", "error / (gemm vs direct)", "error / jittered floor"], irows,
               "llrrr"),
         f"\nWith the rounding floor (commit 609a959: a gradient may differ by twice the distance of a reference "
         f"with every conv output jittered by 2^-23) exact mode's plan at 25 % passed: largest error "
         f"{fixed['max_rel_error']:.2e} ({fixed['worst_tensor']}), the worst gradient at "
         f"{100 * fixed['floor']['worst_share_of_limit']:.0f} % of its limit."]
    out.sections.append("\n".join(s))


# --- J. The fourth GPU session: today's default on the device, the golden plans, the calibration chain ---

def trace_split(plan, trace):
    """Predicted and measured ms of one traced iteration: its span, the compute stream's busy time, and
    each copy direction's summed time."""
    dur = {s["id"]: (s["end_ns"] - s["start_ns"]) / 1e6 for s in plan["steps"]}
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X" and "step" in e.get("args", {})]
    t0 = min(e["ts"] for e in ev)
    got = {"busy": [0.0, 0.0], "offload": [0.0, 0.0], "prefetch": [0.0, 0.0]}
    for e in ev:
        key = "busy" if e["tid"] == 1 else e["cat"]
        if key in got:
            got[key][0] += dur[e["args"]["step"]]
            got[key][1] += e["dur"] / 1e3
    got["span"] = [plan["summary"]["predicted_ns"] / 1e6, max(e["ts"] + e["dur"] - t0 for e in ev) / 1e3]
    return got


def golden_memory(r, name):
    """A replay `r` of the golden plan plans/NAME: the device memory it used (arena plus the runtime's
    measured overhead) and its budget (the replayed plan's, not today's in plans/, plus the reserve of
    the measured profile the plan was compiled from), in bytes."""
    plan = load(os.path.join(REPO, "plans", name))
    net, batch = plan["network"]["name"], plan["options"]["batch"]
    reserve = reserve_of(load(os.path.join(REPO, "profiles", "h100", f"{net}-b{batch}.json")))
    return r["arena_bytes"] + r["runtime_overhead_bytes"], r["budget_bytes"] + reserve


def part_session4(d, out):
    plans = load(os.path.join(d, "plans.json"))
    dates = [open(os.path.join(d, f"call{i}-date.txt")).read().strip() for i in (1, 2)]
    gpu = open(os.path.join(d, "call1-gpu-before.txt")).read().splitlines()[1].split(",")[0]
    version = open(os.path.join(d, "version.txt")).read().strip()[:7]
    s = ["### J. The fourth session: today's default on the device, the golden plans, the calibration chain\n",
         f"Fourth H100 session ({dates[0][:10]}, two calls at {dates[0][11:16]} and {dates[1][11:16]} UTC; "
         f"nvidia-smi: {gpu}), the bundle of commit {version} (the planner of 87f4425). Every number is "
         "MEASURED except those in brackets, which are the plans' predictions.\n"]
    grow = []
    for name in sorted(os.listdir(os.path.join(d, "golden"))):
        r = load(os.path.join(d, "golden", name))
        used, given = golden_memory(r, name[4:])
        grow.append([f"`plans/{name[4:]}`", ms(r["median_seconds"]), ms(r["predicted_seconds"]),
                     f"{r['measured_over_predicted']:.3f}", f"{used / GB:.3f}", f"{given / GB:.3f}"])
    s += ["The golden plans compiled from measured H100 profiles (`profiles/h100/`), replayed (`ucplan run "
          "--device cuda --iterations 20 --json`, median); device memory is the arena plus the runtime's "
          "measured overhead (as in part A), the budget the plan's plus the profile's reserve:\n",
          table(["plan", "measured ms", "predicted ms", "measured / predicted", "device memory GB", "budget GB"],
                grow, "lrrrrr")]

    r2 = os.path.join(d, "replays-2")
    r1 = os.path.join(d, "replays-1")
    rows, spread, again = [], [], []
    for share in (100, 85, 70, 50, 35, 25):
        cells = [f"{share} %"]
        for who in ("now-ucplan", "head-ucplan", "headcal-ucplan"):
            name = f"{who}-{share}"
            if measured_pair(r2, name) is None:  # at 100 % today's plan is the third session's, byte for byte
                cells.append("the same plan" if who == "head-ucplan" else "")
                continue
            _, text, pair = pair_cell(r2, name, plans)
            spread.append(abs(pair[0] - pair[1]) / min(pair))
            first = measured_pair(r1, name)
            if first:
                again.append(abs(sum(first) - sum(pair)) / sum(pair))
            cells.append(text)
        rows.append(cells)
    s += ["\nResNet-50 b64 on part F's measured profile at part F's arena budgets, side by side in the second "
          "call (`scripts/gpu-plan-quality.sh run`, two rounds). `third session`: that session's default (part "
          "H's `now`, whose prediction equals its exact mode's at every share); `today`: the default of "
          f"{version}, from the same profile; `today, calibrated`: the same default from "
          "`profiles/h100/calibrated/resnet50-b64.json` (part H's `ucplan calibrate` of two traced runs), at the "
          "same `--budget`. Each cell: MEASURED ms (mean of the two rounds' medians), predicted ms in brackets, "
          "bytes offloaded per iteration:\n",
          table(["share", "third session: default", "today: default", "today, calibrated: default"], rows, "lrrr"),
          f"\nThe two rounds differ by at most {100 * max(spread):.1f} % (median {100 * median(spread):.2f} %); "
          f"the first call replayed the first two columns too, and their means differ from the second call's by "
          f"at most {100 * max(again):.1f} %."]

    trows = []
    for name in ("now-ucplan-100", "now-ucplan-85", "head-ucplan-85", "headcal-ucplan-85", "now-ucplan-70",
                 "head-ucplan-70"):
        plan = load(os.path.join(d, "traces", f"plan-{name}.json.gz"))
        got = trace_split(plan, load(os.path.join(d, "traces", f"trace-{name}.json.gz")))
        got["waiting"] = [got["span"][i] - got["busy"][i] for i in (0, 1)]
        cells = [f"{got[k][1]:.1f} ({got[k][0]:.1f})" for k in ("span", "busy", "waiting", "offload", "prefetch")]
        ratios = " / ".join(f"{got[k][1] / max(got[k][0], 1e-9):.2f}" for k in ("offload", "prefetch"))
        trows.append([name] + cells + [ratios])
    s += ["\nWhere the time goes: one traced iteration of six of those plans (`ucplan run --trace`, CUDA events "
          "per step). Measured ms, predicted in brackets: the iteration's span, the compute stream's busy time, "
          "the rest (compute waiting), and each copy direction's summed time with its measured / predicted "
          "ratio (`now`: the third session's default, `head`: today's, `headcal`: today's from the calibrated "
          "profile). Almost no copy overlapped one in the other direction:\n",
          table(["plan", "span", "compute busy", "compute waiting", "offloads", "prefetches",
                 "copies measured / predicted"], trows, "lrrrrrr")]

    m = os.path.join(d, "measure")
    mrows = []
    for suffix, what in (("25", "the profiler's copies"), ("25-calibrated", "calibrated from its trace")):
        run = load(os.path.join(m, f"run-resnet50-b64-{suffix}.json"))
        plan = load(os.path.join(m, f"plan-resnet50-b64-{suffix}.json.gz"))
        mrows.append([what, ms(run["median_seconds"]), ms(plan["summary"]["predicted_ns"] / 1e9),
                      f"{run['measured_over_predicted']:.3f}", fmt_bytes(plan["summary"]["offload_bytes"])])
    log = open(os.path.join(m, "log.txt")).read()
    t_profile = re.search(r"ucplan profile resnet50 .*\n(?:[^=].*\n)*== exit 0 in ([\d.]+) s", log).group(1)
    s += [f"\n`scripts/gpu-measure.sh OUT resnet50:64:25` (without PyTorch), its first run on a GPU: a new "
          f"measured profile ({t_profile} s), the default at 25 % of the keep-all peak plus the profile's reserve, "
          "that plan traced, the profile calibrated to its copies (`ucplan calibrate`), the default compiled "
          "again from it and both replayed (medians of 20):\n",
          table(["plan from", "measured ms", "predicted ms", "ratio", "offloaded"], mrows, "lrrrr")]
    v = open(os.path.join(d, "validation-report.md")).read().splitlines()
    s += [f"\n`scripts/gpu-validate.sh` at {version}: {v[0].split(': ')[-1]}, {v[2].split(', ')[-1].rstrip('.')}"
          " (`session-4/validation-report.md`). `ucplan-cuda-check` of a ResNet-50 b8 keep-all plan did not "
          "finish within its 150 s (its CPU side runs direct convolutions), so the rounding floor on a deep "
          "network is still checked through `run --check` only (part I)."]
    out.sections.append("\n".join(s))


def part_session5(d, s4, out):
    """The fifth session: scripts/gpu-session.sh from a bundle, read beside the fourth session's runs."""
    plans, old_plans = load(os.path.join(d, "plans.json")), load(os.path.join(s4, "plans.json"))
    date = open(os.path.join(d, "date.txt")).read().strip()
    gpu = open(os.path.join(d, "gpu-before.txt")).read().splitlines()[1].split(",")[0]
    version = open(os.path.join(d, "version.txt")).read().strip()[:7]
    steps = {n: (int(rc), int(t)) for n, rc, t in (line.split() for line in open(os.path.join(d, "steps.txt")))}
    s = ["### K. The fifth session: `scripts/gpu-session.sh` at a later planner\n",
         f"Fifth H100 session ({date[:10]}, {date[11:16]} UTC; nvidia-smi: {gpu}), the bundle of commit {version}: "
         "`scripts/gpu-session.sh`'s first run on a GPU, in one call ("
         + ", ".join(f"{n} {t} s" + ("" if rc == 0 else f" (exit {rc})") for n, (rc, t) in steps.items())
         + ("" if "measure" in steps else "; the fourth, `measure`, did not fit in the call")
         + "). Every number is MEASURED except those in brackets, which are the plans' predictions. Parts J and K "
         "ran on different machines of the same kind, so a difference between them is a comparison across "
         "sessions, not side by side.\n"]
    grow = []
    for name in sorted(os.listdir(os.path.join(d, "golden"))):
        r = load(os.path.join(d, "golden", name))
        before = load(os.path.join(s4, "golden", name))
        used, given = golden_memory(r, name[4:])
        grow.append([f"`plans/{name[4:]}`", f"{ms(r['median_seconds'])} ({ms(r['predicted_seconds'])})",
                     f"{ms(before['median_seconds'])} ({ms(before['predicted_seconds'])})",
                     f"{r['measured_over_predicted']:.3f}", f"{used / GB:.3f}", f"{given / GB:.3f}"])
    s += ["The golden plans from measured profiles, replayed (20 iterations, median); the fourth session's run of "
          "the plan then in `plans/` beside it (the ResNet-50 plan has changed since: held values and holds in "
          "the local search), device memory as arena plus the runtime's measured overhead, and the budget as "
          "the plan's plus the profile's reserve (as in part J):\n",
          table(["plan", "today ms", "fourth session ms", "today measured / predicted", "device memory GB",
                 "budget GB"], grow, "lrrrrr")]

    r4 = os.path.join(s4, "replays-2")
    r5 = os.path.join(d, "replays")
    rows, spread, drift = [], [], []
    for share in (85, 70, 50, 35, 25):
        cells = [f"{share} %"]
        for who, old in (("measured", "head-ucplan"), ("calibrated", "headcal-ucplan")):
            name = f"{who}-{share}"
            now_m, now_text, pair = pair_cell(r5, name, plans)
            spread.append(abs(pair[0] - pair[1]) / min(pair))
            then_m, then_text, _ = pair_cell(r4, f"{old}-{share}", old_plans)
            same = plans[name]["summary"] == old_plans[f"{old}-{share}"]["summary"]
            if same:
                drift.append(abs(now_m - then_m) / then_m)
            cells += [now_text, then_text + (" (the same plan)" if same else "")]
        rows.append(cells)
    s += ["\nResNet-50 b64 on part F's measured profile at part F's arena budgets (`--reserve 0B`), today's default "
          "from the profiler's copies and from `profiles/h100/calibrated/resnet50-b64.json`, replayed side by "
          "side in this call (`scripts/gpu-plan-quality.sh run`, two rounds, the second reversed), beside the "
          "fourth session's runs of that session's default from the same profiles (part J). Each cell: MEASURED "
          "ms (mean of the two rounds' medians), predicted ms in brackets, bytes offloaded per iteration; `the "
          "same plan` where the plan's summary is unchanged:\n",
          table(["share", "today, profiler's copies", "fourth session", "today, calibrated", "fourth session"],
                rows, "lrrrr"),
          f"\nThe two rounds differ by at most {100 * max(spread):.1f} % (median {100 * median(spread):.2f} %). The "
          f"plans unchanged since the fourth session measure within {100 * max(drift):.2f} % of what that session "
          f"measured (median {100 * median(drift):.2f} %): the spread between machines and sessions that any "
          "change across parts J and K must exceed to count."]
    v = open(os.path.join(d, "validation-report.md")).read().splitlines()
    check = open(os.path.join(d, "check-measured-25.txt")).read().strip()
    s += [f"\n`scripts/gpu-validate.sh` at {version}: {v[0].split(': ')[-1]}, {v[2].split(', ')[-1].rstrip('.')}"
          " (`session-5/validation-report.md`); every replay above ran `CudaBackend::check_steps` (cuDNN's "
          f"algorithms and workspaces for every conv step) before allocating. Not done: {check}"]
    out.sections.append("\n".join(s))


def check_stages(path):
    """A `run --check` stderr with timestamps: the seconds of each stage, the wall time and the exit."""
    text = open(path).read()
    stages = [float(x) for x in re.findall(r"ran(?: on the CPU)? in ([\d.]+) s", text)]
    m = re.search(r"real\s+(\d+)m([\d.]+)s", text)
    return stages, int(m.group(1)) * 60 + float(m.group(2)), int(re.search(r"exit (\d+)", text).group(1))


def chain_cells(folder, suffix, over_ideal=False):
    """One plan of scripts/gpu-measure.sh's calibration chain (resnet50 b64): measured ms (predicted), the ratio,
    and with `over_ideal` the measured time over the plan's own ideal; and that ideal in seconds."""
    run = load(os.path.join(folder, f"run-resnet50-b64-{suffix}.json"))
    plan = load(os.path.join(folder, f"plan-resnet50-b64-{suffix}.json.gz"))
    ideal = plan["summary"]["ideal_ns"] / 1e9
    cells = [f"{ms(run['median_seconds'])} ({ms(plan['summary']['predicted_ns'] / 1e9)})",
             f"{run['measured_over_predicted']:.3f}"]
    if over_ideal:
        cells.append(f"{100 * (run['median_seconds'] / ideal - 1):+.1f} %")
    return cells, ideal


def part_session6(d, s4, out):
    """The sixth session: `run --check` of ResNet-50 b64 plans with progress lines, before and after the
    reference reused its buffers; the calibration chain at today's planner; --sub-batch 32 side by side."""
    date = open(os.path.join(d, "date.txt")).read().strip()
    s = ["### L. The sixth session: `run --check` of ResNet-50 b64 on the GPU, the calibration chain again\n",
         f"Sixth H100 session ({date[:10]}, four calls; `session-6/README.md` says what each ran). Every number "
         "is MEASURED except those in brackets, which are the plans' predictions.\n"]
    rows = []
    for call, name, what in (("check-1", "measured-25", "measured-25, fresh buffers per reference"),
                             ("check-2", "measured-25", "measured-25, reused buffers"),
                             ("check-2", "s6-calibrated-25", "the calibrated plan below, reused buffers"),
                             ("check-2", "measured-25-sb32", "measured-25 with --sub-batch 32, reused buffers"),
                             ("check-3", "measured-25", "measured-25, buffers handed back after their backward")):
        stages, wall, rc = check_stages(os.path.join(d, call, f"check-{name}.err"))
        report = open(os.path.join(d, call, f"check-{name}.txt")).read()
        share = re.search(r"the worst used (\d+) %", report).group(1)
        rows.append([what, f"{stages[0]:.1f}", " / ".join(f"{x:.1f}" for x in stages[1:3]),
                     f"{stages[3]:.1f}", " / ".join(f"{x:.1f}" for x in stages[4:6]), f"{wall:.0f}",
                     ("PASSED" if "PASSED" in report else "FAILED") + f", {share} % of its limit" +
                     ("" if rc == 0 else f" (exit {rc})")])
    rss = {}
    for line in open(os.path.join(d, "cpu-rss.txt")):
        if not line.startswith("#"):
            commit, _, _, kb, _ = line.split()
            rss[commit] = max(rss.get(commit, 0), int(kb) * 1024 / GB)
    cpu = open(os.path.join(d, "cpu-run.txt")).readline()
    blas = re.search(r"\((OpenBLAS[^;]*);", cpu).group(1)
    s += ["`ucplan run --device cuda --check --iterations 1` of the default at 25 % of the liveness peak from part "
          "F's measured profile (`--reserve 0B`), with the progress lines this session added: each checked "
          "iteration's plan on the GPU, then on the host's CPU the reference and the jittered reference (the "
          f"rounding floor), seconds each; the host has 16 cores ({blas}). The fifth session stopped this check "
          "at 150 s with nothing printed (part K). Before ca29595 each reference faulted in 19 GB of fresh pages "
          "(ResNet-50 b64's every value, gradient and saved state) and zeroed them on one thread; since, the "
          "references share one set of buffers (ca29595), and since 02d814d each layer's value and gradient goes "
          "back to the spares once its backward has run:\n",
          table(["plan, reference", "iteration 1: plan s", "references s", "iteration 2: plan s", "references s",
                 "wall s", "check"], rows, "lrrrrrl"),
          f"\nThe last run's peak resident memory on the host (VmHWM, sampled every 0.5 s): "
          f"{int(open(os.path.join(d, 'check-3', 'peak-kb.txt')).read()) * 1024 / GB:.1f} GB; the same check of "
          f"ResNet-50 b8 on the CPU machine peaks at {rss['02d814d']:.2f} GB with the spares, {rss['ca29595']:.2f} GB "
          "without (ca29595; `session-6/cpu-rss.txt`)."]

    m = os.path.join(d, "measure")
    m4 = os.path.join(s4, "measure")
    mrows = []
    for suffix, what in (("25", "the profiler's copies"), ("25-calibrated", "calibrated from its trace")):
        cells = [what]
        for folder in (m, m4):
            cells += chain_cells(folder, suffix)[0]
        mrows.append(cells)
    s += ["\n`scripts/gpu-measure.sh OUT resnet50:64:25` at today's planner (`UCPLAN_SESSION_STEPS=measure`), beside "
          "the fourth session's run of it (part J): each session profiled the device anew, so the two differ by "
          "profile, planner and machine; medians of 20:\n",
          table(["plan from", "today ms", "ratio", "fourth session ms", "ratio"], mrows, "lrrrr")]

    r = os.path.join(d, "replays")
    srows, med = [], {}
    for name, what in (("measured-25", "the full batch (1 round)"), ("measured-25-sb32", "--sub-batch 32 (2 rounds)")):
        runs = [load(os.path.join(r, f"run2-{name}-{x}.json")) for x in "ab"]
        plan = load(os.path.join(d, f"plan-{name}.json.gz"))
        med[name] = sum(x["median_seconds"] for x in runs) / 2
        srows.append([what, " / ".join(ms(x["median_seconds"], 2) for x in runs),
                      ms(plan["summary"]["predicted_ns"] / 1e9, 2), fmt_bytes(runs[0]["bytes_h2d"]),
                      fmt_bytes(plan["summary"]["peak_bytes"])])
    gain = 1 - med["measured-25-sb32"] / med["measured-25"]
    hint = re.search(r"would help\s+(--sub-batch 32: [\d.]+ ms or less)",
                     open(os.path.join(d, "compile-measured-25.txt")).read()).group(1)
    s += ["\nThe same budget with `--sub-batch 32` (batch-norm statistics over 32 samples instead of 64, so only when "
          f"asked): the compile report of the full-batch plan says `would help {hint}` (`compile-measured-25.txt`, "
          "compiled on the CPU machine), and compiled with it the plan predicts less still. Replayed side by side "
          f"in one call (20 iterations, order a b, b a), it is {100 * gain:.1f} % faster measured:\n",
          table(["ResNet-50 b64 at 25 %", "measured ms (a / b)", "predicted ms", "host->device", "plan peak"], srows,
                "lrrrr")]
    out.sections.append("\n".join(s))


def golden_beside(d, before, header):
    """A table of a session's golden-plan replays (d/golden/run-*.json) beside an earlier session's runs of them."""
    rows = []
    for name in sorted(os.listdir(os.path.join(d, "golden"))):
        now, then = load(os.path.join(d, "golden", name)), load(os.path.join(before, "golden", name))
        rows.append([f"`plans/{name[4:]}`", f"{ms(now['median_seconds'])} ({ms(now['predicted_seconds'])})",
                     f"{ms(then['median_seconds'])} ({ms(then['predicted_seconds'])})",
                     f"{100 * (now['median_seconds'] / then['median_seconds'] - 1):+.1f} %"])
    return table(["plan", "today ms", header, "change"], rows, "lrrr")


def part_session8(d, s5, out):
    """The eighth session: `run --check` of two plans the placement's search placed; the golden plans and the
    plan-quality replays at today's planner, read beside the fifth session's (part K)."""
    date = open(os.path.join(d, "date.txt")).read().strip()
    version = open(os.path.join(d, "version.txt")).read().strip()[:7]
    steps = [line.split() for line in open(os.path.join(d, "steps.txt"))]
    plans, old_plans = load(os.path.join(d, "plans.json")), load(os.path.join(s5, "plans.json"))
    s = ["### M. The eighth session: plans placed by the search, checked and replayed\n",
         f"Eighth H100 session ({date[:10]}, {date[11:16]} UTC), one call, the bundle of commit {version}: "
         "`session-8/go7.sh` (" + ", ".join(f"{n} {t} s" + ("" if rc == "0" else f" (exit {rc})")
                                          for n, rc, t in steps) +
         "). Every number is MEASURED except those in brackets, which are the plans' predictions.\n"]
    rows = []
    for what, plan, text, log in (
            ("resnet20 b64, 35 % of the liveness peak, measured profile", "plan-r20m-35.json.gz", "check-r20m-35.txt",
             "check-r20m-35.err"),
            ("ResNet-50 b64, 25 %, part F's measured profile", "plan-measured-25.json.gz", "check-measured-25.log",
             "check-measured-25.log")):
        notes = " ".join(load(os.path.join(d, plan))["notes"])
        nodes = re.search(r"MiniMalloc's manner, (\d+) nodes", notes).group(1)
        report = open(os.path.join(d, text)).read()
        stages = [float(x) for x in re.findall(r"ran(?: on the CPU)? in ([\d.]+) s", open(os.path.join(d, log)).read())]
        held = re.search(r"device memory held (\S+ \S+) \(arena (\S+ \S+)\); plan peak \S+ \S+; budget (\S+ \S+)",
                         report)
        share = re.search(r"the worst used (\d+) %", report).group(1)
        rows.append([what, nodes, f"{held.group(2)} of {held.group(3)}", f"{sum(stages):.1f}",
                     ("PASSED" if "PASSED" in report else "FAILED") + f", {share} % of its limit"])
    s += ["`ucplan run --device cuda --check --iterations 1` of two defaults whose buffers best fit in three orders "
          "did not fit in the budget and the search of `pack_below` placed (the compile report's note gives its "
          "nodes), compiled with `--reserve 0B`: the resnet20 plan on the CPU machine, the ResNet-50 plan on the "
          "GPU host by `scripts/gpu-session.sh check`. Seconds: the plan's two iterations and the CPU references, "
          "summed from the progress lines:\n",
          table(["plan", "search nodes", "arena of budget", "check s", "check"], rows, "lrrrl")]
    r = load(os.path.join(d, "run-r20m-35.json"))
    s += [f"\nThe resnet20 plan replayed (20 iterations): {ms(r['median_seconds'], 2)} ms ({ms(r['predicted_seconds'], 2)}), "
          f"measured / predicted {r['measured_over_predicted']:.3f}.\n"]

    s += ["The golden plans from measured profiles, replayed (20 iterations, median), beside the fifth session's "
          "runs of the golden plans then (part K):\n", golden_beside(d, s5, "fifth session ms")]

    rows, spread = [], []
    for share in (85, 70, 50, 35, 25):
        cells = [f"{share} %"]
        for who in ("measured", "calibrated"):
            name = f"{who}-{share}"
            now_m, now_text, pair = pair_cell(os.path.join(d, "replays"), name, plans)
            spread.append(abs(pair[0] - pair[1]) / min(pair))
            then_m, then_text, _ = pair_cell(os.path.join(s5, "replays"), name, old_plans)
            same = plans[name]["summary"] == old_plans[name]["summary"]
            cells += [now_text, then_text + (" (the same plan)" if same else ""), f"{100 * (now_m / then_m - 1):+.1f} %"]
        rows.append(cells)
    s += ["\nPart K's replays again: ResNet-50 b64 at part F's arena budgets (`--reserve 0B`), today's default from "
          "the profiler's copies and from `profiles/h100/calibrated/resnet50-b64.json`, compiled on the GPU host and "
          "replayed side by side in this call (two rounds, the second reversed), beside the fifth session's. Each "
          "cell: MEASURED ms (mean of the two rounds' medians), predicted ms in brackets, bytes offloaded per "
          "iteration:\n",
          table(["share", "today, profiler's copies", "fifth session", "change", "today, calibrated", "fifth session",
                 "change"], rows, "lrrrrrr"),
          f"\nThe two rounds differ by at most {100 * max(spread):.1f} % (median {100 * median(spread):.2f} %). Parts "
          "K and M ran on different machines of the same kind: part K measured plans unchanged since the fourth "
          "session within 0.65 % of that session, the spread a change across sessions must exceed to count."]

    mrows, ideals = [], []
    for suffix, what in (("25", "the profiler's copies"), ("25-calibrated", "calibrated from its trace")):
        cells = [what]
        for folder in (os.path.join(d, "measure"), os.path.join(os.path.dirname(d), "session-6", "measure")):
            got, ideal = chain_cells(folder, suffix, over_ideal=True)
            cells += got
            ideals.append(ideal)
        mrows.append(cells)
    when = open(os.path.join(d, "measure-date.txt")).read().strip()
    s += [f"\nA second call ({when[11:16]} UTC, the same bundle; `session-8/go8.sh`): `scripts/gpu-measure.sh OUT "
          "resnet50:64:25` (a new measured profile, the default at 25 %, its trace, the profile calibrated to it, "
          "the default again), beside the sixth session's run of it (part L). Each session profiled the device "
          f"anew, so the ideal differs ({ms(ideals[0])} and {ms(ideals[1])} ms, predicted); the measured overhead over "
          "the plan's own ideal compares them. Medians of 20:\n",
          table(["plan from", "today ms", "ratio", "measured over ideal", "sixth session ms", "ratio",
                 "measured over ideal"], mrows, "lrrrrrr")]

    lrows = []
    for name, what in (("r20m-keep", "keep-all (64 GiB)"), ("r20m-35", "the default at 35 %")):
        folder = os.path.join(d, "launch")
        plan = load(os.path.join(folder, f"plan-{name}.json.gz"))
        run = load(os.path.join(folder, f"run-{name}.json"))
        _, busy, span = per_kind(plan, load(os.path.join(folder, f"trace-{name}.json.gz")))
        steps = sum(1 for st in plan["steps"] if st["stream"] == "compute")
        gap = span - busy[1]
        lrows.append([what, f"{ms(run['median_seconds'], 2)} ({ms(run['predicted_seconds'], 2)})",
                      f"{ms(busy[1], 2)} ({ms(busy[0], 2)})", f"{ms(span, 2)}", str(steps),
                      f"{1e6 * gap / steps:.1f}"])
    when = open(os.path.join(d, "launch", "date.txt")).read().strip()
    s += [f"\nA third call ({when[11:16]} UTC, the same bundle; `session-8/go9.sh`): resnet20 b64 from "
          "`profiles/h100/resnet20-b64.json`, keep-all and the default at 35 % (`--reserve 0B`), replayed (20 "
          "iterations) and traced (a run of 3 iterations, `session-8/launch/`). Its measured / predicted "
          "(about 1.13, against 1.02-1.06 for ResNet-50) is the same without recomputation or copies, and the "
          "compute stream's kernels take what the profile says: the rest is the compute stream standing idle "
          "between kernels, about 2 us a step that the simulator does not model (a small network's kernels "
          "are short, so it weighs more). Measured ms, predicted in brackets:\n",
          table(["resnet20 b64", "iteration (median of 20)", "compute kernels (trace)", "traced span",
                 "compute steps", "idle us per compute step"], lrows, "lrrrrr")]
    out.sections.append("\n".join(s))


STRATEGIES = ("ucplan", "exact", "keep-all", "vdnn-all", "vdnn-conv", "superneurons", "checkpoint-sqrt")


def grid_runs(folder, rounds):
    """{share: {strategy: (round medians in s, predicted s)}} of a folder of run-STRATEGY-SHARE-ROUND.json."""
    got = {}
    for path in glob.glob(os.path.join(folder, f"run-*-{rounds[0]}.json")):
        strategy, share = os.path.basename(path)[4:-7].rsplit("-", 1)
        runs = [load(f"{path[:-7]}-{r}.json") for r in rounds]
        got.setdefault(share, {})[strategy] = ([r["median_seconds"] for r in runs], runs[0]["predicted_seconds"])
    return got


def part_session15(d, d8, out):
    """The fifteenth session: resnet20 b64 and VGG-16 b64 from measured H100 profiles, the default, exact mode and
    the baselines at shares of the liveness peak replayed side by side; `run --check` of plans of kinds no session
    had checked on the GPU; the golden plans beside the eighth session's runs of them."""
    machine = open(os.path.join(d, "machine.txt")).read()
    date = re.search(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d)", machine, re.M).group(1)
    version = open(os.path.join(d, "version.txt")).read().strip()
    s = ["### O. The fifteenth session: the default against exact mode and every baseline on resnet20 and VGG-16\n",
         f"Fifteenth session ({date[:10]}, {date[11:16]} UTC), three calls, each on a fresh NVIDIA H100 80GB HBM3 "
         f"machine, the bundle of commit {version}: `session-15/go15.sh`, `go15b.sh`, `go15c.sh` (plans compiled on the CPU machine, "
         "`--reserve 0B`, carried). Every number is MEASURED except those in brackets, which are the plans' "
         "predictions.\n"]
    s += ["The golden plans from measured profiles (unchanged since the eighth session), replayed (20 iterations, "
          "median) beside the eighth session's runs of them, so that this machine's numbers can be read beside "
          "parts K and M:\n", golden_beside(d, d8, "eighth session ms")]

    crows = []
    for name, what in (("r20-25", "resnet20 b64, the default at 25 %"),
                       ("r20-exact-25", "resnet20 b64, exact mode at 25 %"),
                       ("r20-sb", "resnet20 b64 at 6 MiB, `--sub-batch any`"),
                       ("alex-25", "AlexNet b256, the default at 25 %")):
        plan = load(os.path.join(d, "check", f"plan-{name}.json.gz"))
        report = open(os.path.join(d, "check", f"check-{name}.txt")).read()
        stages = [float(x) for x in re.findall(r"ran(?: on the CPU)? in ([\d.]+) s",
                                               open(os.path.join(d, "check", f"check-{name}.err")).read())]
        held = re.search(r"\(arena (\S+ \S+)\); plan peak \S+ \S+; budget (\S+ \S+)", report)
        share = re.search(r"the worst used (\d+) %", report).group(1)
        summ = plan["summary"]
        crows.append([what, str(plan["sub_batch"]), fmt_bytes(summ["offload_bytes"]), str(summ["recompute_steps"]),
                      f"{held.group(1)} of {held.group(2)}", f"{sum(stages):.1f}",
                      ("PASSED" if "PASSED" in report else "FAILED") + f", {share} % of its limit"])
    s += ["\n`ucplan run --device cuda --check --iterations 1` (weight gradients of two iterations against the CPU "
          "reference and its rounding floor, part I) of plans of kinds no earlier session checked on the GPU: an exact-"
          "mode plan, and two split into sub-batches (resnet20's batch-norm asked to by `--sub-batch any`; AlexNet "
          "has none, so the default splits it unasked). resnet20's plans come from "
          "`profiles/h100/calibrated/resnet20-b64.json`, AlexNet's from `profiles/h100/alexnet-b256.json`. Seconds: "
          "the plan's two iterations and the CPU references, summed from the progress lines:\n",
          table(["plan", "sub-batch", "offloaded", "recomputed steps", "arena of budget", "check s", "check"], crows,
                "lrrrrrl")]

    grid = grid_runs(os.path.join(d, "r20"), "abc")
    first = grid_runs(os.path.join(d, "r20-20"), "ab")
    spread20 = max(abs(v[0][0] - v[0][1]) / min(v[0]) for row in first.values() for v in row.values())
    order = ["inf", "100", "85", "70", "50", "35", "25"]
    rows, lost, fastest_lost = [], [], []
    for share in order:
        row = grid[share]
        cells = ["keep-all at 64 GiB" if share == "inf" else f"{share} %"]
        for strategy in STRATEGIES:
            if strategy not in row:
                cells.append("-")
                continue
            meds, pred = row[strategy]
            cells.append(f"{ms(median(meds), 2)} [{ms(min(meds), 2)}-{ms(max(meds), 2)}] ({ms(pred, 2)})")
        rows.append(cells)
        if share != "inf":
            mine = row["ucplan"][0]
            for strategy, (meds, _) in row.items():
                if strategy not in ("ucplan", "exact"):
                    if median(meds) < median(mine):
                        lost.append((share, strategy))
                    if min(meds) < max(mine):
                        fastest_lost.append((share, strategy))
    keep = median(grid["inf"]["keep-all"][0])
    over = {sh: 100 * (median(grid[sh]["ucplan"][0]) / keep - 1) for sh in order[1:]}
    apart = max(abs(grid[sh]["exact"][1] - grid[sh]["ucplan"][1]) for sh in order[1:])
    rounds = max(max(grid[sh][w][0]) / min(grid[sh][w][0]) - 1 for sh in order[1:] for w in ("ucplan", "exact"))
    s += ["\nresnet20 b64 from `profiles/h100/calibrated/resnet20-b64.json` (the measured profile with the launch gap "
          "of part N), every strategy of `scripts/gpu-plan-quality.sh compile` at 100 to 25 % of the liveness peak "
          "(exact mode with a 60 s limit; a dash: the strategy finds no plan), and keep-all at 64 GiB. A first call "
          f"replayed each plan for 20 iterations in two rounds, which differed by up to {100 * spread20:.0f} % "
          "(`session-15/r20-20/`); a second replayed each for 100 iterations in three rounds (a, b in reverse order, "
          "c). Each cell: the median of the three rounds' medians [the fastest and slowest round] (predicted), ms:\n",
          table(["share"] + list(STRATEGIES), rows, "lrrrrrrr"),
          "\nEvery baseline is measured slower than the default at every share "
          f"({'none lost' if not lost else 'lost: ' + ', '.join(f'{a} % {b}' for a, b in lost)}), and its fastest "
          "round slower than the default's slowest ("
          f"{'at every share' if not fastest_lost else 'except ' + ', '.join(f'{a} % {b}' for a, b in fastest_lost)}). "
          "The default's measured overhead over keep-all at 64 GiB: " +
          ", ".join(f"{sh} % {over[sh]:+.1f} %" for sh in order[1:]) +
          f". Keep-all at 64 GiB measured / predicted {keep / grid['inf']['keep-all'][1]:.3f} (part M: 1.136 from "
          "the profile without the gap). Exact mode's plans are predicted within "
          f"{max(1e6 * apart, 1):.0f} us of the default's at every share; measured, the two differ by less than their "
          "own rounds do (the slowest round of either up to "
          f"{100 * rounds:.0f} % over its fastest on this 4-5 ms iteration), so this call does not tell them apart.\n"]

    vgg = grid_runs(os.path.join(d, "vgg"), "ab")
    vrows, vlost = [], []
    for share in order[1:]:
        row = vgg[share]
        cells = [f"{share} %"]
        for strategy in ("ucplan", "exact", "keep-all", "vdnn-conv", "superneurons"):
            if strategy not in row:
                cells.append("-")
                continue
            meds, pred = row[strategy]
            cells.append(f"{ms(sum(meds) / 2)} ({ms(pred)})")
        vrows.append(cells)
        mine = sum(row["ucplan"][0]) / 2
        for strategy, (meds, _) in row.items():
            if strategy != "ucplan" and sum(meds) / 2 < mine:
                vlost.append(f"{share} % {strategy} by {100 * (mine / (sum(meds) / 2) - 1):.1f} %")
    vspread = max(abs(v[0][0] - v[0][1]) / min(v[0]) for row in vgg.values() for v in row.values())
    unreplayed = load(os.path.join(d, "vgg", "unreplayed.json"))["predicted_ns"]
    times = [t / row["ucplan"] for row in unreplayed.values() for w, t in row.items() if w != "ucplan"]
    s += ["VGG-16 b64 from `profiles/h100/vgg16-b64.json` likewise (no batch-norm, so every strategy may split the "
          "batch into sub-batches): the default, keep-all, vdnn-conv and superneurons at every share, and exact mode "
          "at 50 %, the one share where its plan was predicted faster than the default's. vdnn-all and "
          f"checkpoint-sqrt, predicted at {min(times):.2f} to {max(times):.2f} times the default's time "
          "(`session-15/vgg/unreplayed.json`), were left out for time. 20 iterations, two rounds (the second "
          f"reversed; they differ by at most {100 * vspread:.1f} %); each cell: the mean of the rounds' medians "
          "(predicted), ms:\n",
          table(["share", "ucplan", "exact", "keep-all", "vdnn-conv", "superneurons"], vrows, "lrrrrr"),
          "\nThe default measured slower than another plan: " + ("; ".join(vlost) if vlost else "nowhere") + "."]
    out.summary["session15_resnet20_lost_to_baselines"] = len(lost)
    out.summary["session15_vgg16_lost"] = vlost
    out.sections.append("\n".join(s))


def ungzipped(path, w):
    """A path to the file's text: itself, or a copy unpacked into the work folder."""
    if not path.endswith(".gz"):
        return path
    to = os.path.join(w, os.path.basename(path)[:-3])
    with gzip.open(path, "rt") as f, open(to, "w") as g:
        g.write(f.read())
    return to


def launch_fit(cli, profile, trace, w, name):
    """`ucplan calibrate --fit launch` of one trace: the profile it writes, its gap (us), the gaps it kept and all."""
    to = os.path.join(w, f"launch-{name}.json")
    _, stdout, _, _ = cli.run(["ucplan", "calibrate", profile, "-t", trace, "--fit", "launch", "-o", to])
    every = int(re.search(r"of (\d+) between consecutive compute kernels", stdout).group(1))
    gap = load(to)["launch_gap"]
    return to, 1e6 * gap["seconds"], gap["gaps"], every


def part_launch_gap(cli, d3, d8, w, out):
    """N. The launch gap `ucplan calibrate` fits from the sessions' traces, and what the plans measured in part M
    are predicted to take with it."""
    r20 = os.path.join(REPO, "profiles", "h100", "resnet20-b64.json")
    r50_s8 = ungzipped(os.path.join(d8, "measure", "profile-resnet50-b64-calibrated.json.gz"), w)
    r50_s3 = os.path.join(os.path.dirname(d3), "plan-quality", "profile-resnet50-b64.json")
    fits, frows = {}, []
    for name, what, profile, trace in (
            ("keep", "session 8: resnet20 b64 keep-all", r20, os.path.join(d8, "launch", "trace-r20m-keep.json.gz")),
            ("35", "session 8: resnet20 b64, default at 35 %", r20, os.path.join(d8, "launch", "trace-r20m-35.json.gz")),
            ("r50", "session 8: ResNet-50 b64, default at 25 % (profiler's copies)", r50_s8,
             os.path.join(d8, "measure", "trace-resnet50-b64-25.json.gz")),
            ("s3-25", "session 3: ResNet-50 b64, default at 25 %", r50_s3,
             os.path.join(d3, "calibrated", "trace-now-ucplan-25-with-bytes.json")),
            ("s3-35", "session 3: ResNet-50 b64, exact mode at 35 %", r50_s3,
             os.path.join(d3, "calibrated", "trace-now-exact-35-with-bytes.json"))):
        fits[name] = launch_fit(cli, profile, ungzipped(trace, w), w, name)
        _, gap, kept, every = fits[name]
        frows.append([what, f"{gap:.2f}", f"{kept} of {every}"])
    s = ["### N. The launch gap: the compute stream's idle time between kernels, calibrated\n",
         "Part M found resnet20's kernels taking what the profile says and the compute stream idle between them. "
         "`ucplan calibrate PROFILE -t TRACE --fit launch` fits that gap from a measured trace (the median of the "
         "gaps between consecutive compute kernels within 1.5 times the longest of the shortest tenth: kernels that "
         "waited for nothing) and the cost table adds it to every kernel (costs.cpp). Fitted from each trace of "
         "sessions 3 and 8 alone (MEASURED gaps):\n",
         table(["trace", "launch gap us", "gaps kept of all"], frows, "lrr")]

    def compiled(profile, budget, name, *extra):
        to = os.path.join(w, f"launch-plan-{name}.json")
        cli.run(["ucplan", "compile", "resnet20", "--profile", profile, "--budget", f"{budget}B", "--reserve", "0B",
                 *extra, "-q", "-o", to])
        return load(to)

    prows = []

    def row(what, how, measured, predicted):
        """A row of the table below (seconds in); the ratio back."""
        prows.append([what, how, f"{ms(measured, 2)}", f"{ms(predicted, 2)}", f"{measured / predicted:.3f}"])
        return measured / predicted

    def as_measured_and_first_order(run, plan, gap_us, what, how):
        """The run's own prediction, then with the gap added to each of the plan's compute steps."""
        steps = sum(1 for st in plan["steps"] if st["stream"] == "compute")
        row(what, "as profiled (part M)", run["median_seconds"], run["predicted_seconds"])
        row(what, how + f" ({steps} compute steps)", run["median_seconds"],
            run["predicted_seconds"] + steps * gap_us * 1e-6)

    keep_run = load(os.path.join(d8, "launch", "run-r20m-keep.json"))
    keep_budget = load(os.path.join(d8, "launch", "plan-r20m-keep.json.gz"))["options"]["budget_bytes"]
    ratios = [row("resnet20 b64 keep-all", what, keep_run["median_seconds"],
                  compiled(profile, keep_budget, name, "--strategy", "keep-all")["summary"]["predicted_ns"] * 1e-9)
              for what, profile, name in (("as profiled (part M)", r20, "keep-0"),
                                          ("gap from its own trace", fits["keep"][0], "keep-own"),
                                          ("gap from the 35 % plan's trace", fits["35"][0], "keep-35"))]
    r35 = load(os.path.join(d8, "launch", "plan-r20m-35.json.gz"))
    for run_path, when in ((os.path.join(d8, "run-r20m-35.json"), "first call"),
                           (os.path.join(d8, "launch", "run-r20m-35.json"), "third call")):
        as_measured_and_first_order(load(run_path), r35, fits["keep"][1], f"resnet20 b64, default at 35 % ({when})",
                                    "+ keep-all's gap per step")
    as_measured_and_first_order(load(os.path.join(d8, "measure", "run-resnet50-b64-25-calibrated.json")),
                                load(os.path.join(d8, "measure", "plan-resnet50-b64-25-calibrated.json.gz")),
                                fits["r50"][1], "ResNet-50 b64, default at 25 %, calibrated copies",
                                "+ its trace's gap per step")
    new35 = compiled(fits["keep"][0], r35["options"]["budget_bytes"], "35-new")
    closed = 100 * (1 - (ratios[1] - 1) / (ratios[0] - 1))
    s += ["\nWhat the plans part M replayed are predicted to take with the gap, against what they MEASURED (medians "
          "of 20). Keep-all's decisions do not depend on the costs, so its plan is compiled again from the gapped "
          "profile; the other plans are the measured ones with the gap added to each compute step, an upper "
          "estimate of their prediction, since a step that waits for a copy may absorb it (a plan compiled from "
          "the gapped profile would differ: the default at 35 % from keep-all's gap recomputes "
          f"{new35['summary']['recompute_steps']} steps instead of {r35['summary']['recompute_steps']}, predicted "
          f"{ms(new35['summary']['predicted_ns'] * 1e-9, 2)} ms). MEASURED ms, predicted ms:\n",
          table(["plan", "prediction", "measured ms", "predicted ms", "measured / predicted"], prows, "llrrr"),
          f"\nThe gap is {min(f[1] for f in fits.values()):.2f} to {max(f[1] for f in fits.values()):.2f} us on "
          f"every trace of both sessions, and it closes {closed:.0f} % of resnet20 keep-all's excess over its "
          "prediction; what stays is the kernels taking longer in the plan than in the profile (part M: 4.16 "
          "against 4.01 ms) and gaps longer than the launch gap. `profiles/h100/calibrated/resnet20-b64.json` is the "
          "keep-all fit (tests/CMakeLists.txt reproduces it byte for byte). The golden plans and part F's "
          "profiles stay as profiled: a gap changes their plans, which a device session should measure first."]
    out.sections.append("\n".join(s))


class Out:
    def __init__(self):
        self.sections, self.summary = [], {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build"))
    ap.add_argument("--results", default=os.path.join(REPO, "benchmarks", "results", "gpu-h100"))
    ap.add_argument("--profiles", default=os.path.join(REPO, "profiles", "h100"))
    a = ap.parse_args()
    cli = Cli(a.build)
    w = work_dir(a.build, "gpu_results")
    t0 = time.perf_counter()
    profiles = {}
    for path in glob.glob(os.path.join(a.profiles, "*-b*.json")):
        m = re.fullmatch(r"(\w+)-b(\d+)\.json", os.path.basename(path))
        profiles[(m.group(1), int(m.group(2)))] = load(path)
    if not profiles:
        sys.exit(f"error: no measured profiles in {rel(a.profiles)}")
    dev = next(iter(profiles.values()))["device"]
    v = dev["versions"]
    date = min(p["date"] for p in profiles.values())
    runs = runs_of(a.results)
    out = Out()
    part_iterations(runs, profiles, out)
    part_kinds(runs, out)
    part_torch(a.results, runs, out)
    part_mu(cli, a.results, a.profiles, w, out)
    part_model(cli, a.profiles, runs, w, out)
    quality = os.path.join(a.results, "plan-quality")
    if os.path.isdir(quality):
        part_plan_quality(quality, out)
        if os.path.isdir(os.path.join(quality, "copies-beside-load")):
            part_copies(os.path.join(quality, "copies-beside-load"), quality, out)
    session3 = os.path.join(a.results, "session-3")
    if os.path.isdir(session3):
        part_session3(session3, out)
    session4 = os.path.join(a.results, "session-4")
    if os.path.isdir(session4):
        part_session4(session4, out)
    session5 = os.path.join(a.results, "session-5")
    if os.path.isdir(session5):
        part_session5(session5, session4, out)
    session6 = os.path.join(a.results, "session-6")
    if os.path.isdir(session6):
        part_session6(session6, session4, out)
    session8 = os.path.join(a.results, "session-8")
    if os.path.isdir(session8):
        part_session8(session8, session5, out)
        part_launch_gap(cli, session3, session8, w, out)
    session15 = os.path.join(a.results, "session-15")
    if os.path.isdir(session15):
        part_session15(session15, session8, out)
    head = [f"## gpu_results.py: ucplan on an {dev['name']} (MEASURED)\n",
            f"`python3 benchmarks/gpu_results.py {rel(a.build)}` reads what a GPU session brought back: "
            f"`{rel(a.results)}/` (plans, `ucplan run --json` reports, traces, PyTorch runs, the validation report) "
            f"and `{rel(a.profiles)}/` (measured profiles). Device: {dev['name']}, driver {v.get('driver')}, "
            f"CUDA {v.get('cuda_runtime')}, cuDNN {v.get('cudnn')}, cuBLAS {v.get('cublas')}, ECC "
            f"{v.get('ecc')}, SM clock {v.get('sm_clock_mhz_while_measuring')} MHz while profiling, FP32 without "
            f"TF32; measured on {date}. The measurements: `scripts/gpu-validate.sh` (validation, "
            f"`{rel(a.results)}/validation-report.md`), `scripts/gpu-measure.sh OUT resnet50:128:100,50,25 "
            f"vgg16:64:100,50,25 alexnet:256:100 resnet18:128:none resnet20:64:none` and the mu-cuDNN and DeepBench "
            f"runs of part D; part F's plan-quality runs came from a later session, parts H and I from a third, part J from a fourth, part K from a fifth, part L from a sixth, parts M and N from an eighth, part O from a fifteenth (their own dates below). This script took {time.perf_counter() - t0:.0f} s.\n"]
    write_section("gpu-h100.md", "\n".join(head) + "\n" + "\n\n".join(out.sections))
    print(json.dumps(out.summary, indent=1))


if __name__ == "__main__":
    main()
