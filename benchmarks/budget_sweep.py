#!/usr/bin/env python3
"""Memory planner: predicted overhead of every strategy over a sweep of budgets (moDNN §V, SuperNeurons).

  python3 benchmarks/budget_sweep.py [BUILD] [--budgets N]     (BUILD: the build folder, default build/)

Measures, through the ucplan CLI:
  A. ResNet-50 at batch 128 and VGG-16 at batch 256 on model:k40 and model:h100 profiles: N budgets
     (default 12), geometric from the moDNN lower bound (`ucplan inspect --json`) to keep-all's peak
     (`ucplan compile --strategy keep-all` with a huge budget, then `ucplan explain --json`), for each
     strategy: whether it fits, the predicted overhead vs ideal, and `ucplan check` of every plan.
     ResNet-50 has batch-norm: swept with --sub-batch auto (never splits) and --sub-batch any.
  B. moDNN's setting: model:k40, 12 GiB, VGG-16 / VGG-19 / ResNet-34 at batch 256: ucplan,
     vdnn-all and vdnn-conv with --sub-batch auto and --sub-batch 256; geometric means.
  C. Compile time (wall clock, median of 3): ResNet-152 b256 at 12 and 40 GiB, and a deep ResNet
     of 10^4 layers (networks/generate.py deep-resnet) at batch 16, 12 GiB, on model:k40.
All plan numbers are MODELLED (model:NAME profiles); only part C's compile times are measured.
Writes benchmarks/results/budget_sweep.md and regenerates benchmarks/RESULTS.md.
"""
import argparse
import json
import math
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import (Cli, MiB, GiB, REPO, deep_resnet, fmt_bytes, machine_note, median, rel, table,  # noqa: E402
                     work_dir, write_section, load_average)

STRATEGIES = ["ucplan", "keep-all", "vdnn-all", "vdnn-conv", "superneurons", "checkpoint-sqrt"]
EPS = 0.0005   # overheads closer than 0.05 percentage points count as equal


def profile(cli, w, net, batch, dev):
    p = os.path.join(w, f"{os.path.basename(net).replace('.json', '')}-b{batch}-{dev}.json")
    cli.run(["ucplan", "profile", net, "--batch", str(batch), "--device", f"model:{dev}", "-o", p])
    return p


def compile_plan(cli, net, prof, budget, strategy, sub_batch, plan):
    args = ["ucplan", "compile", net, "--profile", prof, "--budget", budget, "--strategy", strategy,
            "--sub-batch", sub_batch, "-q", "-o", plan]
    rc, so, se, dt = cli.run(args, check=False, timed=True)
    if rc == 0:
        e = cli.json(["ucplan", "explain", plan, "--json"])
        e["compile_s"] = dt
        return e
    if rc != 2:
        sys.exit(f"error: {cli.show(args)} exited {rc}: {se.strip()}")
    return {"fail": se.strip().replace("ucplan: error: --budget: ", "")}


def check_plans(cli, plans):
    """{plan: 'ok' | 'FAIL: why'} from one `ucplan check` run over all of them."""
    if not plans:
        return {}
    rc, so, se, _ = cli.run(["ucplan", "check"] + plans, check=False)
    res = {}
    for line in so.splitlines():
        m = re.match(r"(ok|FAIL)\s+(.*?): (.*)$", line)
        if m:
            res[os.path.abspath(os.path.join(REPO, m.group(2)))] = "ok" if m.group(1) == "ok" else "FAIL: " + m.group(3)
    for p in plans:
        res.setdefault(os.path.abspath(p), f"not reported by check (rc {rc}: {se.strip()})")
    return res


def cell(r):
    if "fail" in r:
        return "no"
    rounds = "" if r["rounds"] == 1 else f" ({r['sub_batch']}x{r['rounds']})"
    return f"+{100 * r['overhead']:.1f} %{rounds}"


def sweep(cli, w, net, batch, dev, modes, nb, out):
    prof = profile(cli, w, net, batch, dev)
    lb = cli.json(["ucplan", "inspect", net, "--batch", str(batch), "--json"])["totals"]["lower_bound_bytes"]
    keep_plan = os.path.join(w, f"{net}-b{batch}-{dev}-keep-all-huge.plan.json")
    cli.run(["ucplan", "compile", net, "--profile", prof, "--budget", "1000GiB", "--strategy", "keep-all",
             "--sub-batch", "auto", "-q", "-o", keep_plan])
    keep = cli.json(["ucplan", "explain", keep_plan, "--json"])
    peak = keep["peak_bytes"]
    lo, hi = math.ceil(lb / MiB), math.ceil(peak / MiB)
    budgets = sorted({math.ceil(lo * (hi / lo) ** (i / (nb - 1))) for i in range(nb)})
    sections = []
    for mode in modes:
        d = os.path.join(w, f"{net}-b{batch}-{dev}-{mode}")
        os.makedirs(d, exist_ok=True)
        grid = {}
        for b in budgets:
            for s in STRATEGIES:
                plan = os.path.join(d, f"{b}MiB-{s}.plan.json")
                grid[(b, s)] = compile_plan(cli, net, prof, f"{b}MiB", s, mode, plan)
                grid[(b, s)]["plan"] = plan
        plans = [grid[k]["plan"] for k in grid if "fail" not in grid[k]]
        checked = check_plans(cli, plans)
        for k, r in grid.items():
            if "fail" not in r:
                r["check"] = checked[os.path.abspath(r["plan"])]
        sections.append(render_sweep(net, batch, dev, mode, prof, lb, keep, budgets, grid, out))
    return sections


def render_sweep(net, batch, dev, mode, prof, lb, keep, budgets, grid, out):
    tag = f"{net} b{batch} model:{dev} --sub-batch {mode}"
    mode_text = {"auto": "`--sub-batch auto`" + (": never splits the batch, because ResNet-50 has batch-norm"
                                                  if net.startswith("resnet") else
                                                  ": VGG-16 has no batch-norm, so auto may split the batch into rounds"),
                 "any": "`--sub-batch any`: may split the batch into sub-batches (rounds), which changes batch-norm "
                        "statistics"}[mode]
    s = [f"#### {net}, batch {batch}, model:{dev}, {mode_text}\n"]
    s.append(f"Lower bound (moDNN Eq. 2, `ucplan inspect {net} --batch {batch} --json`): {fmt_bytes(lb)}; keep-all "
             f"peak (`--strategy keep-all --budget 1000GiB --sub-batch auto`, then `ucplan explain --json`): "
             f"{fmt_bytes(keep['peak_bytes'])} at overhead +{100 * keep['overhead']:.2f} %; ideal "
             f"{keep['ideal_ns'] / 1e6:.1f} ms per iteration. Cells: predicted overhead over ideal (MODELLED), "
             f"`(sub-batch x rounds)` when the batch is split, `no` when the strategy finds no plan.\n")
    rows = []
    fails_ucplan_fit_other, beaten, check_bad = [], [], []
    ideals = set()
    for b in budgets:
        r_u = grid[(b, "ucplan")]
        row = [f"{b / 1024:.2f}", f"{b * MiB / lb:.2f}"]
        best = None
        for st in STRATEGIES:
            r = grid[(b, st)]
            row.append(cell(r))
            if "fail" not in r:
                ideals.add(r["ideal_ns"])
                if best is None or r["overhead"] < best[1] - EPS:
                    best = (st, r["overhead"])
                if r["check"] != "ok":
                    check_bad.append(f"{tag}: {st} at {b} MiB: {r['check']}")
        if "fail" in r_u:
            fits = [st for st in STRATEGIES[1:] if "fail" not in grid[(b, st)]]
            if fits:
                fails_ucplan_fit_other.append(f"{tag}: ucplan finds no plan at {b} MiB but {', '.join(fits)} do "
                                              f"({r_u['fail']})")
        else:
            for st in STRATEGIES[1:]:
                r = grid[(b, st)]
                if "fail" not in r and r["overhead"] < r_u["overhead"] - EPS:
                    beaten.append(f"{tag}: at {b} MiB {st} +{100 * r['overhead']:.2f} % beats ucplan "
                                  f"+{100 * r_u['overhead']:.2f} %")
        row.append(r_u.get("check", "-") if "fail" not in r_u else "-")
        row.append(best[0] if best else "-")
        rows.append(row)
    s.append(table(["budget GiB", "x bound"] + STRATEGIES + ["ucplan check", "best"], rows))
    # Smallest fitting budget per strategy, and monotonicity.
    first = []
    for st in STRATEGIES:
        ok = [b for b in budgets if "fail" not in grid[(b, st)]]
        first.append(f"{st} {ok[0] / 1024:.2f} GiB" if ok else f"{st} none")
        prev = None
        for b in budgets:
            r = grid[(b, st)]
            if "fail" in r:
                continue
            if prev is not None and r["overhead"] > prev[1] + EPS:
                out.notes.append(f"{tag}: {st} is slower with more memory: +{100 * prev[1]:.2f} % at {prev[0]} MiB, "
                                 f"+{100 * r['overhead']:.2f} % at {b} MiB")
            prev = (b, r["overhead"])
    s.append(f"\nSmallest budget of the sweep at which each strategy fits: {'; '.join(first)}.")
    n_u = sum(1 for b in budgets if "fail" not in grid[(b, "ucplan")])
    n_ok = sum(1 for b in budgets if "fail" not in grid[(b, "ucplan")] and grid[(b, "ucplan")]["check"] == "ok")
    n_all = sum(1 for k in grid if "fail" not in grid[k])
    n_all_ok = sum(1 for k in grid if "fail" not in grid[k] and grid[k]["check"] == "ok")
    s.append(f"`ucplan check`: {n_ok} of {n_u} ucplan plans valid ({n_all_ok} of {n_all} plans of all strategies).")
    if len(ideals) > 1:
        out.notes.append(f"{tag}: the ideal time differs between plans: {sorted(ideals)}")
    if any("fail" in r for r in grid.values()):
        s.append("\n<details><summary>Why strategies fail (largest failing budget's message per strategy)</summary>\n")
        last = {}
        for b in budgets:
            for st in STRATEGIES:
                if "fail" in grid[(b, st)]:
                    last[st] = (b, grid[(b, st)]["fail"])
        for st in STRATEGIES:
            if st in last:
                s.append(f"- {st} at {last[st][0]} MiB: {last[st][1]}")
        s.append("\n</details>")
    out.anomalies += check_bad + fails_ucplan_fit_other
    out.beaten += beaten
    out.summary[tag] = {"fits_from_GiB": {st: next((b / 1024 for b in budgets if "fail" not in grid[(b, st)]), None)
                                          for st in STRATEGIES},
                        "ucplan_valid": f"{n_ok}/{n_u}"}
    return "\n".join(s)


def part_modnn(cli, w, out):
    nets = ["vgg16", "vgg19", "resnet34"]
    strategies = ["ucplan", "vdnn-all", "vdnn-conv"]
    modes = ["auto", "256"]
    d = os.path.join(w, "modnn")
    os.makedirs(d, exist_ok=True)
    res = {}
    for net in nets:
        prof = profile(cli, d, net, 256, "k40")
        for mode in modes:
            for st in strategies:
                plan = os.path.join(d, f"{net}-{st}-{mode}.plan.json")
                res[(net, st, mode)] = compile_plan(cli, net, prof, "12GiB", st, mode, plan)
                res[(net, st, mode)]["plan"] = plan
    checked = check_plans(cli, [r["plan"] for r in res.values() if "fail" not in r])
    s = ["### B. moDNN's setting: model:k40, 12 GiB, batch 256 (MODELLED; moDNN Fig. 7)\n"]
    s.append("Produced by `ucplan profile NET --batch 256 --device model:k40 -o P`, `ucplan compile NET --profile P "
             "--budget 12GiB --strategy S --sub-batch auto|256 -o PLAN`, `ucplan explain PLAN --json`. "
             "`--sub-batch 256` forbids splitting the batch (the harder case); with `auto` VGG may be split into "
             "rounds, ResNet-34 (batch-norm) never is. Cells: overhead over ideal, sub-batch x rounds when split, "
             "GiB offloaded per iteration.\n")
    rows = []
    for net in nets:
        row = [net]
        for mode in modes:
            for st in strategies:
                r = res[(net, st, mode)]
                if "fail" in r:
                    row.append("no plan")
                    out.notes.append(f"moDNN setting: {st} finds no plan for {net} b256 at 12 GiB with --sub-batch "
                                     f"{mode}: {r['fail']}")
                    continue
                if checked[os.path.abspath(r["plan"])] != "ok":
                    out.anomalies.append(f"moDNN setting: {net} {st} {mode}: {checked[os.path.abspath(r['plan'])]}")
                split = "" if r["rounds"] == 1 else f" ({r['sub_batch']}x{r['rounds']})"
                row.append(f"+{100 * r['overhead']:.2f} %{split}, {r['offload_bytes'] / GiB:.1f}")
        rows.append(row)
    gm = ["geometric mean of time / ideal"]
    gms = {}
    for mode in modes:
        for st in strategies:
            rs = [res[(n, st, mode)] for n in nets]
            if any("fail" in r for r in rs):
                gm.append("n/a (a network has no plan)")
                continue
            g = math.exp(sum(math.log(1 + r["overhead"]) for r in rs) / len(rs)) - 1
            gms[(st, mode)] = g
            gm.append(f"**+{100 * g:.2f} %**" if st == "ucplan" else f"+{100 * g:.2f} %")
    rows.append(gm)
    hdr = ["network"] + [f"{st} ({'auto' if m == 'auto' else 'no split'})" for m in modes for st in strategies]
    s.append(table(hdr, rows))
    s.append(f"\nucplan's geometric-mean overhead: **+{100 * gms[('ucplan', 'auto')]:.2f} %** with `--sub-batch auto`, "
             f"**+{100 * gms[('ucplan', '256')]:.2f} %** with `--sub-batch 256` (target <= 3 %; moDNN paper: 8 % for "
             f"moDNN and 40 % for vDNN on the five networks). `ucplan check`: "
             f"{sum(1 for v in checked.values() if v == 'ok')} of {len(checked)} plans valid.")
    out.summary["modnn"] = {f"{st} {m}": g for (st, m), g in gms.items()}
    return "\n".join(s)


def part_compile_time(cli, w, out, repeats=3):
    d = os.path.join(w, "compile-time")
    os.makedirs(d, exist_ok=True)
    deep, nlayers = deep_resnet(cli, d)
    cases = [("resnet152", "resnet152", 256, "12GiB"), ("resnet152", "resnet152", 256, "40GiB"),
             (f"deep ResNet ({nlayers} layers)", deep, 16, "12GiB")]
    profs = {}
    rows = []
    for label, net, batch, budget in cases:
        if (net, batch) not in profs:
            profs[(net, batch)] = profile(cli, d, net, batch, "k40")
        prof = profs[(net, batch)]
        plan = os.path.join(d, f"{os.path.basename(net).replace('.json', '')}-b{batch}-{budget}.plan.json")
        walls, inner, loads = [], [], []
        for _ in range(repeats):
            loads.append(load_average()[0])
            _, so, _, dt = cli.run(["ucplan", "compile", net, "--profile", prof, "--budget", budget, "-o", plan],
                                   timed=True)
            walls.append(dt)
            m = re.search(r"compiled in\s+([\d.]+)\s*(ms|s)", so)
            if m:
                inner.append(float(m.group(1)) * (1e-3 if m.group(2) == "ms" else 1))
        e = cli.json(["ucplan", "explain", plan, "--json"])
        rows.append([label, batch, budget, f"**{median(walls):.2f}**", f"{min(walls):.2f} - {max(walls):.2f}",
                     f"{median(inner):.2f}" if inner else "?", f"+{100 * e['overhead']:.1f} %",
                     f"{e['sub_batch']}x{e['rounds']}", ", ".join(f"{x:.1f}" for x in loads)])
        out.summary[f"compile {label} {budget}"] = median(walls)
    s = ["### C. Compile time (MEASURED wall clock; plans MODELLED on model:k40)\n"]
    s.append(f"`ucplan compile NET --profile P --budget B -o PLAN` (strategy ucplan), wall clock of the whole command "
             f"(reading the network and profile, planning, writing the plan), **median of {repeats} runs on the 2 "
             f"shared cores** (other sessions were running; the 1-minute load average at the start of each run is "
             f"given). 'compiled in' is the time the command reports for itself. The deep network is "
             f"`python3 networks/generate.py deep-resnet --n1 6 --n2 32 --n3 1000 --n4 6 -o {rel(deep)}`.\n")
    s.append(table(["network", "batch", "budget", f"wall s (median of {repeats})", "min - max", "'compiled in' s",
                    "overhead (MODELLED)", "sub-batch x rounds", "load avg"], rows, "lrlrrrrrr"))
    return "\n".join(s)


class Out:
    def __init__(self):
        self.anomalies, self.beaten, self.notes, self.summary = [], [], [], {}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default="build", help="build folder with bin/ucplan (default: build)")
    ap.add_argument("--budgets", type=int, default=12, help="budgets per sweep, geometric (default 12)")
    ap.add_argument("--skip-compile-time", action="store_true", help="leave out part C")
    a = ap.parse_args()
    t0 = time.perf_counter()
    cli = Cli(a.build)
    w = work_dir(a.build, "budget_sweep")
    out = Out()
    note = machine_note(cli)
    secs = ["### A. Budget sweeps (MODELLED)\n",
            f"For each network and device: `ucplan profile NET --batch B --device model:DEV -o P`; {a.budgets} budgets "
            f"spaced geometrically from the lower bound to keep-all's peak (rounded up to whole MiB); for each budget "
            f"and strategy `ucplan compile NET --profile P --budget BUDGET --strategy S --sub-batch MODE -o PLAN`, "
            f"`ucplan explain PLAN --json` (overhead = predicted / ideal - 1, ideal = every task at its fastest "
            f"configuration with unlimited memory) and one `ucplan check PLAN...` over all plans of the table. "
            f"'best' is the strategy with the smallest overhead (ties within 0.05 points go to the first column)."]
    for net, batch, modes in (("resnet50", 128, ["auto", "any"]), ("vgg16", 256, ["auto"])):
        for dev in ("k40", "h100"):
            secs += sweep(cli, w, net, batch, dev, modes, a.budgets, out)
    secs.append(part_modnn(cli, w, out))
    if not a.skip_compile_time:
        secs.append(part_compile_time(cli, w, out))
    total = time.perf_counter() - t0
    head = ["## budget_sweep.py: memory planner (moDNN, vDNN, SuperNeurons baselines)\n",
            f"`python3 benchmarks/budget_sweep.py {rel(a.build)}`; intermediate files (profiles, every plan) in "
            f"`{rel(w)}`. Machine: {note}. The script took **{total:.0f} s** wall clock.\n"]
    if out.anomalies:
        head.append("**Anomalies (a plan that fails `ucplan check`, or ucplan finding no plan where a baseline does):**"
                    "\n\n" + "\n".join(f"- {x}" for x in out.anomalies) + "\n")
    if out.beaten:
        head.append("**Budgets where a baseline strategy beats ucplan** (by more than 0.05 points):\n\n" +
                    "\n".join(f"- {x}" for x in out.beaten) + "\n")
    if out.notes:
        head.append("**Other observations:**\n\n" + "\n".join(f"- {x}" for x in out.notes) + "\n")
    write_section("budget_sweep.md", "\n".join(head) + "\n" + "\n\n".join(secs))
    print(json.dumps({"seconds": round(total, 1), "summary": out.summary, "anomalies": out.anomalies,
                      "beaten": out.beaten, "notes": out.notes}, indent=1))


if __name__ == "__main__":
    main()
