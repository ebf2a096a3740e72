#!/usr/bin/env python3
"""What the H200 session measured (benchmarks/results/gpu-h200/session-35/), read back.
  python3 benchmarks/gpu_h200.py [BUILD]
Writes benchmarks/results/gpu-h200.md (a section of RESULTS.md):
  A. the validation (scripts/gpu-validate.sh resnet20 64) at 3c3c04a, the first on an H200;
  B. the two golden plans from measured H100 profiles, session 15's (1e2f2f7) beside today's, which
     carry the batch's input across rounds, replayed side by side;
  C. EfficientNet-B0 b32: keep-all beside the default, which differ only by the carried input; the
     same plans launched as CUDA graphs; and after global average pooling's backward left cuDNN;
  D. resnet20 b64 from the profile measured on the H200: measured over predicted, keep-all and the
     default at 100 / 50 / 25 % of the liveness peak;
  E. CUDA graphs (`ucplan run --cuda-graphs`) beside one launch per step, every plan of the second call,
     and where the time went in the copy-heavy plans (traces of the third call);
  F. model:h200 against the two profiles measured there, kernel by kernel (the fastest algorithm of
     each kernel and micro-batch, as the planner sees it);
  G. the launch gap `ucplan calibrate --fit launch` fits from the third call's traces, and resnet20
     keep-all predicted with it.
Every number is MEASURED on the H200 except predictions (from the plan) and part F's model column.
Parts F and G call BUILD's ucplan (model profiles, calibrate, compile); nothing runs on a GPU.
"""
import argparse
import collections
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import Cli, REPO, median, rel, table, work_dir, write_section  # noqa: E402
from gpu_results import launch_fit, load, ungzipped  # noqa: E402

S = os.path.join(REPO, "benchmarks", "results", "gpu-h200", "session-35")
PROFILES = os.path.join(REPO, "profiles", "h200")


def runs(folder, pattern):
    """{name: [median seconds per round]}, name = the run file's name less run- and -ROUND.json."""
    out = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(S, folder, pattern))):
        name = os.path.basename(path)[len("run-"):-len(".json")].rsplit("-", 1)[0]
        out[name].append(load(path))
    return out


def ms(seconds, digits=2):
    return f"{seconds * 1e3:.{digits}f}"


def med(reports):
    return median([r["median_seconds"] for r in reports])


def part_validation(out):
    r = load(os.path.join(S, "call1", "validate", "report.json"))
    rows = [[s["name"], s["status"], s["seconds"]] for s in r["steps"]]
    out.append("### A. The validation on an H200\n\n"
               f"`scripts/gpu-validate.sh OUT resnet20 64` from the bundle of 3c3c04a: **{r['verdict']}** in "
               f"{r['seconds']} s (the first run on an H200; plans that carry the batch's input across rounds, new "
               "since the last GPU session, pass `run --check`).\n\n" + table(["step", "status", "s"], rows, "llr"))


def part_golden(out):
    g = runs("call1/golden", "run-*.json")
    rows = []
    for net in ["resnet50-b128-h100measured-2914mb", "vgg16-b64-h100measured-1960mb"]:
        old, new = g[f"old-{net}"], g[f"new-{net}"]
        rows.append([f"`plans/{net}.json`", ms(old[0]["predicted_seconds"], 1), ms(new[0]["predicted_seconds"], 1),
                     " / ".join(ms(r["median_seconds"], 1) for r in old),
                     " / ".join(ms(r["median_seconds"], 1) for r in new),
                     f"{med(new) / med(old) - 1:+.1%}", f"{new[0]['device_memory_bytes'] / 1e9:.3f}"])
    out.append("### B. The golden plans from measured H100 profiles: session 15's beside today's\n\n"
               "Each plan as of 1e2f2f7 (session 15) and as of 3c3c04a (the batch's input carried across rounds, "
               "refined stage by stage), compiled from the same H100 profile, replayed in one call on the H200 "
               "(`ucplan run --iterations 20`, rounds a, b reversed, c; medians, ms):\n\n" +
               table(["plan", "predicted then", "predicted now", "measured then (a / b / c)",
                      "measured now (a / b / c)", "change", "device GB now"], rows, "lrrrrrr") +
               "\n\nThe plans' budgets are 2.914 and 1.960 GB (plan and reserve); the device memory held is the "
               "arena plus what the backend took beside it.")


def part_efficientnet(out):
    c1 = runs("call1/eff", "run-*.json")
    p1 = runs("call1/effprof", "run-*.json")
    c2 = runs("call2/eff", "run-*.json")
    rows = []
    for who, reports in [("keep-all", c1["eff-keep"]), ("default (input carried)", c1["eff-default"])]:
        rows.append(["model:h100 profile (call 1)", who, "step by step", ms(reports[0]["predicted_seconds"]),
                     ms(med(reports)), len(reports[0]["notes"])])
    for who, key in [("keep-all", "keep"), ("default (input carried)", "default")]:
        rows.append(["measured profile (call 1)", who, "step by step", ms(p1[key][0]["predicted_seconds"]),
                     ms(med(p1[key])), 0])
        for g in ["off", "on"]:
            reports = c2[f"eff-{key}-{g}"]
            rows.append(["measured profile (call 2)", who, "CUDA graphs" if g == "on" else "step by step",
                         ms(reports[0]["predicted_seconds"]), ms(med(reports)), 0])
    c4 = os.path.join(S, "call4")
    old = load(os.path.join(c4, "run-eff-default-old-plan.json"))
    rows.append(["measured profile (call 1), pool fix (call 4)", "default (input carried)", "step by step",
                 ms(old["predicted_seconds"]), ms(old["median_seconds"]), 0])
    for g, label in [("--no-cuda-graphs", "step by step"), ("--cuda-graphs", "CUDA graphs")]:
        r = load(os.path.join(c4, f"run-eff-default-new{g}.json"))
        rows.append(["profiled again with the pool fix (call 4)", "default (input carried)", label,
                     ms(r["predicted_seconds"]), ms(r["median_seconds"]), 0])
    t_keep = load(os.path.join(S, "call1", "eff", "trace-keep.json.gz"))
    t_def = load(os.path.join(S, "call1", "eff", "trace-default.json.gz"))

    def first_conv(trace):
        ev = sorted((e for e in trace["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])
        t0 = ev[0]["ts"]
        conv = next(e for e in ev if e.get("tid") == 1)
        return conv["ts"] - t0, conv["dur"]

    (k_at, k_dur), (d_at, d_dur) = first_conv(t_keep), first_conv(t_def)
    t_graphs = load(os.path.join(S, "call2", "trace-eff-default-graphs.json.gz"))
    g_at, g_dur = first_conv(t_graphs)
    keep, default = c2["eff-keep-off"] + p1["keep"], c2["eff-default-off"] + p1["default"]
    keep_g, default_g = c2["eff-keep-on"], c2["eff-default-on"]

    # The SE blocks' global average pools: backward before (cuDNN) and after (the small kernel).
    def pools(profile):
        return {sig["signature"]: {c["op"]: c["seconds"] for c in sig["costs"] if c.get("status") == "ok"}
                for sig in profile["signatures"] if sig["type"] == "pool"}

    before = pools(load(os.path.join(S, "call1", "effprof", "profile-cudnn-pool-backward.json.gz")))
    after = pools(load(os.path.join(PROFILES, "efficientnet_b0-b32.json")))
    big = max(before, key=lambda k: before[k]["backward"])
    share = sum(v["backward"] for v in before.values())
    out.append("### C. EfficientNet-B0 b32: the carried input, CUDA graphs, and global average pooling\n\n"
               "`tests/data/onnx/efficientnet_b0.onnx` imported (`session-35/efficientnet_b0.json`), batch 32. Plans "
               "at 64 GiB: keep-all copies the batch to the device before the first layer; the default carries it "
               "across rounds (the next batch copied in while the round computes). Medians of the rounds' medians "
               "(call 1: 50 iterations x 3 rounds; call 2: 30 x 2; call 4: 20 x 1), ms:\n\n" +
               table(["profile", "plan", "launch", "predicted", "measured", "substituted algorithms"], rows,
                     "lllrrr") +
               f"\n\n**The carried input buys nothing measured step by step**: keep-all {ms(med(keep))} ms, the "
               f"default {ms(med(default))} ms (calls 1 and 2 pooled; predicted "
               f"{ms(p1['keep'][0]['predicted_seconds'] - p1['default'][0]['predicted_seconds'])} ms apart). In "
               "call 1's traces (of the model:h100 plans: the same first convolution in both) the default's "
               f"first convolution starts at {d_at:.0f} us and takes {d_dur:.0f} us; "
               f"keep-all's starts at {k_at:.0f} us, after the input's copy, and takes {k_dur:.0f} us. Either way "
               "the device waits for the host to enqueue the iteration's first steps; keep-all hides that wait "
               "behind its copy. Launched as CUDA graphs (call 2's trace of the measured profile's plan), the "
               "default's first convolution starts at "
               f"{g_at:.0f} us and takes {g_dur:.0f} us, and the default measures {ms(med(default_g))} ms against "
               f"keep-all's {ms(med(keep_g))}; but keep-all as graphs is slower than step by step, so the best of "
               "each is the same.\n\n"
               f"The profile measured in call 1 put {share * 1e3:.1f} ms of backward into the {len(before)} shapes of "
               f"the SE blocks' global average pools (cuDNN {load(os.path.join(PROFILES, 'efficientnet_b0-b32.json'))['device']['versions']['cudnn']}"
               f": {before[big]['backward'] * 1e3:.2f} ms for `{big}`, whose forward took "
               f"{before[big]['forward'] * 1e6:.0f} us). That backward now runs on the small kernel (one thread per "
               f"input element): {after[big]['backward'] * 1e3:.2f} ms there, "
               f"{sum(v['backward'] for v in after.values()) * 1e3:.2f} ms for all of them, and the same plan "
               f"measures {med(p1['default']) / old['median_seconds']:.2f}x faster: {ms(med(p1['default']))} ms in call 1 "
               f"(the median of its {len(p1['default'])} rounds) against {ms(old['median_seconds'])} ms in call 4 "
               f"(one run, the median of its {len(old['iterations'])} iterations), two calls apart on the same machine, "
               "not side by side. The model:h100 "
               "profile's plans ran with substituted algorithms (workspaces it underestimates): their predictions "
               "are not to be trusted.")


def part_resnet20(out):
    c1 = runs("call1/r20", "run-*.json")
    rows, ratios, spread = [], [], []
    for name, label in [("keep", "keep-all at 64 GiB"), ("default-100", "default at 100 %"),
                        ("default-50", "default at 50 %"), ("default-25", "default at 25 %")]:
        reports = c1[name]
        p = reports[0]["predicted_seconds"]
        rows.append([label, ms(p), " / ".join(ms(r["median_seconds"]) for r in reports), f"{med(reports) / p:.2f}"])
        ratios.append(med(reports) / p)
        m = [r["median_seconds"] for r in reports]
        spread.append(max(m) / min(m) - 1)
    out.append("### D. resnet20 b64 from the profile measured on the H200\n\n"
               "`profiles/h200/resnet20-b64.json` (the validation's profile: powerOfTwo, repeat 5), plans compiled "
               "there at shares of the liveness peak (`--reserve 0B`), `ucplan run --iterations 100`, rounds a, b "
               "reversed, c, ms:\n\n" +
               table(["plan", "predicted", "measured (a / b / c)", "measured / predicted"], rows, "lrrr") +
               "\n\nAs on the H100 (gpu-h100.md part N), resnet20's kernels are short and the device idles between "
               "them while the host enqueues: measured over predicted "
               f"{min(ratios):.2f}-{max(ratios):.2f} here, a plan's rounds up to {max(spread):.0%} apart. "
               "The profile has no launch gap; `ucplan calibrate --fit launch` fits one from a trace.")


def gaps(trace):
    ev = sorted((e for e in trace["traceEvents"] if e.get("ph") == "X"), key=lambda e: e["ts"])
    comp = [e for e in ev if e.get("tid") == 1]
    idle = sum(b["ts"] - (a["ts"] + a["dur"]) for a, b in zip(comp, comp[1:]))
    copies = sum(e["dur"] for e in ev if e.get("tid") != 1)
    return idle, copies


def part_graphs(out):
    rows = []
    labels = {"keep": "resnet20 b64 keep-all", "default-100": "resnet20 b64, default at 100 %",
              "default-25": "resnet20 b64, default at 25 %", "r20-sb": "resnet20 b64 at 6 MiB, 4 rounds of 16",
              "eff-keep": "EfficientNet-B0 b32 keep-all", "eff-default": "EfficientNet-B0 b32, default",
              "resnet50-b128-h100measured-2914mb": "ResNet-50 b128 golden (2.914 GB)",
              "vgg16-b64-h100measured-1960mb": "VGG-16 b64 golden (1.960 GB, 4 rounds of 16)"}
    for folder, names in [("r20", ["keep", "default-100", "default-25", "r20-sb"]),
                          ("eff", ["eff-keep", "eff-default"]),
                          ("golden", ["resnet50-b128-h100measured-2914mb", "vgg16-b64-h100measured-1960mb"])]:
        c = runs(f"call2/{folder}", "run-*.json")
        for n in names:
            off, on = c[f"{n}-off"], c[f"{n}-on"]
            rows.append([labels[n], ms(off[0]["predicted_seconds"]), ms(med(off)), ms(med(on)),
                         f"{med(on) / med(off) - 1:+.1%}"])
    trows, idle = [], {}
    for n in ["resnet50-b128-h100measured-2914mb", "default-25", "r20-sb"]:
        cells = [labels[n]]
        for g in ["off", "on"]:
            idle[(n, g)], copies = gaps(load(os.path.join(S, "call3", f"trace-{n}-{g}.json.gz")))
            cells += [f"{idle[(n, g)] / 1e3:.2f}", f"{copies / 1e3:.2f}"]
        trows.append(cells)
    golden = load(os.path.join(REPO, "plans", "resnet50-b128-h100measured-2914mb.json"))
    copies = sum(1 for st in golden["steps"] if st["stream"] != "compute")
    waits = sum(len(st.get("waits", [])) for st in golden["steps"])
    weights = [float(line.split("relative L2 error ")[1].split()[0])
               for line in open(os.path.join(S, "call2", "check.txt"))
               if "CUDA graphs vs a launch per step" in line]
    r50 = "resnet50-b128-h100measured-2914mb"
    out.append("### E. CUDA graphs beside one launch per step\n\n"
               "`ucplan run PLAN --device cuda --no-cuda-graphs` and `--cuda-graphs` (each round and the final "
               "steps captured once, then launched), alternating, rounds a and b (b reversed); medians of the "
               "rounds' medians, ms. resnet20's plans 100 iterations (r20-sb: at 6 MiB in 4 rounds of 16), "
               "EfficientNet-B0's 30, the golden plans 20. `ucplan-cuda-check` ran four plans with graphs "
               "(resnet20 tight, r20-sb, the modern and classic check networks): weights within "
               f"{max(weights):.1e} of the run without graphs after 3 iterations, every timeline complete, every "
               "wait respected.\n\n" +
               table(["plan", "predicted", "step by step", "CUDA graphs", "change"], rows, "lrrrr") +
               "\n\nThe traces of the third call (the last of 3 iterations each): the compute stream's idle time and the "
               "copies' busy time, ms:\n\n" +
               table(["plan", "idle, step by step", "copies, step by step", "idle, graphs", "copies, graphs"],
                     trows, "lrrrr") +
               "\n\nGraphs win where the plan is a chain of short kernels with few copies (resnet20 keep-all, "
               "VGG-16 with sub-batches) and lose where the plan waits on many copies: ResNet-50's plan ("
               f"{copies} copies, {waits} waits) has its compute stream idle "
               f"{(idle[(r50, 'on')] - idle[(r50, 'off')]) / 1e3:.1f} ms longer, with the copies themselves as long. "
               "So `--cuda-graphs` stays opt-in. The resnet20 traces of one iteration disagree with the 100-"
               "iteration runs: on that device such a plan's iterations vary by more than graphs change them.")


def best_costs(profile):
    out = {}
    for sig in profile["signatures"]:
        for c in sig["costs"]:
            if c.get("status") != "ok":
                continue
            k = (sig["signature"], c["op"], c["batch"])
            if k not in out or c["seconds"] < out[k][1]:
                out[k] = (sig["type"], c["seconds"])
    return out


def part_model(cli, w, out):
    rows = []
    for net, batch, path, sizes in [("resnet20", 64, os.path.join(PROFILES, "resnet20-b64.json"), "powerOfTwo"),
                                    ("efficientnet_b0", 32, os.path.join(PROFILES, "efficientnet_b0-b32.json"),
                                     "undivided")]:
        network = net if net == "resnet20" else os.path.join(S, "efficientnet_b0.json")
        model_path = os.path.join(w, f"{net}-b{batch}-h200.json")
        cli.run(["ucplan", "profile", network, "--batch", str(batch), "--device", "model:h200", "--sizes", sizes,
                 "-o", model_path])
        measured, model = best_costs(load(path)), best_costs(load(model_path))
        groups = collections.defaultdict(list)
        for k, (kind, sec) in measured.items():
            if k in model and model[k][1] > 0:
                op = k[1] if kind in ("conv", "fc") else "all"
                groups[(kind, op)].append(sec / model[k][1])
        for (kind, op), r in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            rows.append([f"{net} b{batch}", kind, op, len(r), f"{median(r):.2f}", f"{min(r):.2f}", f"{max(r):.2f}"])
    out.append("### F. model:h200 against the H200\n\n"
               "Each kernel and micro-batch of the two measured profiles, its fastest algorithm measured over "
               "model:h200's fastest (`ucplan profile NET --device model:h200`, MODELLED):\n\n" +
               table(["network", "layer type", "op", "kernels", "median", "min", "max"], rows, "lllrrrr") +
               "\n\nAs on the H100 (gpu-h100.md part E, median 1.36 over 6,994 entries), the model is optimistic, "
               "most for convolution backward on small and grouped convolutions. model:h100-fit corrects model:h100 "
               "per (layer type, op) from four ImageNet networks measured on an H100 (gpu-h100.md part E); these two "
               "H200 profiles, a CIFAR network whose kernels are launch-bound and EfficientNet's grouped "
               "convolutions, are no basis for a fitted H200 device.")


def part_launch_gap(cli, w, out):
    profile = os.path.join(PROFILES, "resnet20-b64.json")
    rows, fitted = [], None
    for name, what in [("default-25", "resnet20 b64, default at 25 %"),
                       ("r20-sb", "resnet20 b64 at 6 MiB, 4 rounds of 16")]:
        trace = ungzipped(os.path.join(S, "call3", f"trace-{name}-off.json.gz"), w)
        to, gap_us, kept, every = launch_fit(cli, profile, trace, w, name)
        rows.append([what, f"{gap_us:.2f}", f"{kept} of {every}"])
        fitted = fitted or to
    keep = os.path.join(w, "keep-gapped.json")
    cli.run(["ucplan", "compile", "resnet20", "--batch", "64", "--profile", fitted, "--budget", "64GiB", "--strategy",
             "keep-all", "--reserve", "0B", "-q", "-o", keep])
    gapped = load(keep)["summary"]["predicted_ns"] * 1e-9
    c1, c2 = runs("call1/r20", "run-*.json"), runs("call2/r20", "run-*.json")
    profiled = c1["keep"][0]["predicted_seconds"]
    prow = []
    for what, reports in [("step by step (call 1)", c1["keep"]), ("step by step (call 2)", c2["keep-off"]),
                          ("CUDA graphs (call 2)", c2["keep-on"])]:
        prow.append([what, ms(med(reports)), f"{med(reports) / profiled:.2f}", f"{med(reports) / gapped:.2f}"])
    out.append("### G. The launch gap on the H200\n\n"
               "`ucplan calibrate profiles/h200/resnet20-b64.json -t TRACE --fit launch` from the third call's "
               "step-by-step traces (part N of gpu-h100.md says how the gap is fitted):\n\n" +
               table(["trace", "launch gap us", "gaps kept of all"], rows, "lrr") +
               f"\n\nresnet20 b64 keep-all is predicted {ms(profiled)} ms as profiled and {ms(gapped)} ms with the "
               "first trace's gap (its decisions do not depend on costs). Measured, ms, and measured over each "
               "prediction:\n\n" +
               table(["keep-all", "measured", "/ as profiled", "/ with the gap"], prow, "lrrr") +
               "\n\nThe gap closes part of the excess; the rest is the kernels taking longer in the plan than "
               "alone, and machines whose iterations differ from call to call (keep-all step by step: "
               f"{med(c2['keep-off']) / med(c1['keep']) - 1:+.0%} from call 1 to call 2).")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("build", nargs="?", default=os.path.join(REPO, "build"))
    a = ap.parse_args()
    cli = Cli(a.build)
    w = work_dir(a.build, "gpu_h200")
    machine = open(os.path.join(S, "call1", "machine.txt")).read().splitlines()
    sections = []
    part_validation(sections)
    part_golden(sections)
    part_efficientnet(sections)
    part_resnet20(sections)
    part_graphs(sections)
    part_model(cli, w, sections)
    part_launch_gap(cli, w, sections)
    v = load(os.path.join(PROFILES, "resnet20-b64.json"))["device"]["versions"]
    head = ("## gpu_h200.py: ucplan on an NVIDIA H200 (MEASURED)\n\n"
            f"`python3 benchmarks/gpu_h200.py {rel(a.build)}` reads `{rel(S)}/` (four device calls on 2026-11-30, "
            "what each ran: its README.md) and `profiles/h200/`. Device: NVIDIA H200 (141 GB), driver "
            f"{v.get('driver')}, CUDA {v.get('cuda_runtime')}, cuDNN {v.get('cudnn')}, cuBLAS {v.get('cublas')}, "
            f"ECC {v.get('ecc')}, SM clock {v.get('sm_clock_mhz_while_measuring')} MHz while profiling, FP32 "
            f"without TF32; {machine[0]} host cores.\n")
    write_section("gpu-h200.md", head + "\n" + "\n\n".join(sections))


if __name__ == "__main__":
    main()
