#!/usr/bin/env python3
"""`ucplan calibrate` refits a measured profile's copies from measured traces. Against copies made
up here from known lines (host-to-device 7 us + bytes / 20 GB/s, device-to-host 3 us + bytes /
12.5 GB/s, each within half a microsecond of its line), the fit must recover them; copies that a
copy in the other direction overlaps for more than half their time must be left out (they are made
five times slower here, so including them would show); the profile must keep everything else, record
the profiler's own fit beside the new one and read back; a trace from another device is refused;
the order of the traces must change
nothing; calibrating a calibrated profile must still name the profiler's fit as the bench; and a plan
from a calibrated profile says so in its notes. The launch gap: from compute kernels made up here
(three in five follow the one before after 1.7 us, give or take 0.03; the rest wait 3 to 20 us
more; an update round after the round), the fit must be within 0.05 us of 1.7 and count exactly the
short gaps; --fit launch leaves the copies as they were, --fit copies the gap absent; a plan from
the gapped profile has an ideal longer by at least the gap per compute step, and says why; a plan of
short kernels from a measured CUDA profile without a gap says how to calibrate one. A plan that
offloads, from a measured CUDA profile whose copies are the profiler's, says how to calibrate them;
from that profile calibrated, or without offload, it does not.
Usage: calibrate.py UCPLAN_BIN MEASURED_PROFILE MEASURED_CUDA_PROFILE"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

from checks import check, finish  # tests/cli/checks.py

ucplan, profile_path, cuda_profile_path = sys.argv[1:4]
profile = json.load(open(profile_path))
H2D = (7e-6, 20e9)
D2H = (3e-6, 12.5e9)


def copy_event(cat, step, ts_us, dur_us, nbytes):
    return {"name": f"{cat} t{step}", "cat": cat, "ph": "X", "pid": 1, "tid": 2 if cat == "prefetch" else 3,
            "ts": ts_us, "dur": dur_us, "args": {"step": step, "round": 0, "bytes": nbytes}}


def trace(network, timeline, copies):
    return {"displayTimeUnit": "ms",
            "otherData": {"network": network, "timeline": timeline, "profile_source": "measured",
                          "budget_bytes": 1 << 30, "rounds": 1},
            "traceEvents": [{"name": "thread_name", "ph": "M", "pid": 1, "tid": tid, "args": {"name": name}}
                            for tid, name in ((1, "compute"), (2, "h2d"), (3, "d2h"))] +
                           [{"name": "forward conv1", "cat": "forward", "ph": "X", "pid": 1, "tid": 1, "ts": 0.0,
                             "dur": 5.0, "args": {"step": 0, "round": 0}}] + copies}


def made_up(seed):
    """Copies one after another on each stream; every fourth pair of copies starts together, both
    ways at once, and takes five times its line (overlapped: to be left out)."""
    events, t_h2d, t_d2h = [], 100.0, 100.0
    for k in range(24):
        nbytes = (1 << 20) * (1 + (k * 7 + seed) % 16)
        noise = 0.25 * (((k * 13 + seed) % 5) - 2)  # -0.5 .. +0.5 us
        up = (H2D[0] + nbytes / H2D[1]) * 1e6
        down = (D2H[0] + nbytes / D2H[1]) * 1e6
        if k % 4 == 3:
            start, slow = max(t_h2d, t_d2h) + 10, 5 * max(up, down)
            events.append(copy_event("offload", 100 + k, start, slow, nbytes))
            events.append(copy_event("prefetch", 200 + k, start, slow, nbytes))
            t_h2d = t_d2h = start + slow + 10
            continue
        events.append(copy_event("prefetch", 200 + k, t_h2d, (up + noise), nbytes))
        t_h2d += (up + noise) + 10
        start = max(t_d2h, t_h2d) + 10  # after the prefetch: alone
        events.append(copy_event("offload", 300 + k, start, (down + noise), nbytes))
        t_d2h = t_h2d = start + (down + noise) + 10
    return events


GAP_US = 1.7


def kernels(seed, count=300):
    """Compute kernels of one round, then the updates (round -1), as `ucplan run --trace` writes them."""
    events, t = [], 1000.0
    for k in range(count):
        rnd = 0 if k < count - 40 else -1
        dur = 5.0 + (k * 11 + seed) % 30
        events.append({"name": f"forward l{k}", "cat": "forward" if rnd == 0 else "update", "ph": "X", "pid": 1,
                       "tid": 1, "ts": t, "dur": dur, "args": {"step": k, "round": rnd}})
        if k == count - 41:
            wait = 500.0  # between the round and its updates: not a gap of one round
        elif (k * 7 + seed) % 5 < 3:
            wait = GAP_US + 0.03 * (((k * 13 + seed) % 3) - 1)
        else:
            wait = GAP_US + 3.0 + (k * 17 + seed) % 18
        t += dur + wait
    return events


def short_gaps(path):
    """The gaps of a trace file's compute kernels within one round that are the made-up launch gap."""
    ks = sorted((e for e in json.load(open(path))["traceEvents"] if e.get("tid") == 1 and e.get("ph") == "X"),
                key=lambda e: e["ts"])
    return sum(1 for x, y in zip(ks, ks[1:])
               if x["args"]["round"] == y["args"]["round"] and 0 <= y["ts"] - x["ts"] - x["dur"] < GAP_US + 0.1)


def run(*args):
    return subprocess.run([ucplan, *args], capture_output=True, text=True)


with tempfile.TemporaryDirectory() as tmp:
    a, b = os.path.join(tmp, "a.json"), os.path.join(tmp, "b.json")
    json.dump(trace(profile["network"], "measured", made_up(0)), open(a, "w"))
    json.dump(trace(profile["network"], "measured", made_up(5)), open(b, "w"))
    out1, out2, out3 = (os.path.join(tmp, f"p{i}.json") for i in (1, 2, 3))
    r = run("calibrate", profile_path, "-t", a, "-t", b, "-o", out1)
    check(r.returncode == 0, f"calibrate: exit {r.returncode}: {r.stderr.strip()}")
    print(r.stdout, end="")
    cal = json.load(open(out1))
    for name, (lat, bw) in (("h2d", H2D), ("d2h", D2H)):
        t = cal["transfer"][name]
        check(abs(t["bytes_per_second"] / bw - 1) < 0.01,
              f"{name}: fitted {t['bytes_per_second'] / 1e9:.3f} GB/s, made with {bw / 1e9:.3f}")
        check(abs(t["latency_seconds"] - lat) < 0.5e-6,
              f"{name}: fitted latency {t['latency_seconds'] * 1e6:.2f} us, made with {lat * 1e6:.2f}")
        c = t.get("calibration", {})
        bench = profile["transfer"][name]
        check(c.get("traces") == 2 and c.get("copies") == len(t["points"]) == 36 and c.get("overlapped") == 12,
              f"{name}: calibration record {c}, {len(t['points'])} points: expected 36 copies alone from 2 traces, "
              "12 overlapped")
        check(c.get("bench_bytes_per_second") == bench["bytes_per_second"] and
              c.get("bench_latency_seconds") == bench["latency_seconds"],
              f"{name}: the profiler's fit is not kept beside the new one: {c}")
    rest = {k: v for k, v in cal.items() if k != "transfer"}
    check(rest == {k: v for k, v in profile.items() if k != "transfer"}, "calibrate changed more than the copies")
    check(cal["transfer"]["duplex"] == profile["transfer"]["duplex"], "calibrate changed duplex")

    # A trace that names the device it ran on must name the profile's; one from another device is
    # refused, naming both (a trace from before runs recorded their device is taken on trust).
    device = profile["device"]
    for kind, name, ok in ((device["kind"], device["name"], True), (device["kind"], device["name"] + " (another)", False),
                           ("cuda", device["name"], device["kind"] == "cuda")):
        on = json.load(open(a))
        on["otherData"]["device"] = {"kind": kind, "name": name}
        on_path = os.path.join(tmp, "on.json")
        json.dump(on, open(on_path, "w"))
        r = run("calibrate", profile_path, "-t", on_path, "-o", out2)
        if ok:
            check(r.returncode == 0 and open(out2).read() != "", f"a run on the profile's device refused: {r.stderr}")
        else:
            check(r.returncode == 2 and "but the profile was measured on" in r.stderr and name in r.stderr,
                  f"a run on {kind} {name!r} calibrated a profile of {device['kind']} {device['name']!r}: "
                  f"exit {r.returncode}, {r.stderr.strip()}")

    # A copy of a trace is the same run, not a second one.
    shutil.copy(a, os.path.join(tmp, "copy.json"))
    r = run("calibrate", profile_path, "-t", a, "-t", os.path.join(tmp, "copy.json"), "-o", out2)
    check(r.returncode == 2 and "holds the same bytes as" in r.stderr and r.stderr.count("\n") == 1,
          f"a trace and its copy: exit {r.returncode}, {r.stderr.strip()!r}")

    # The order of the traces changes nothing.
    r = run("calibrate", profile_path, "-t", b, "-t", a, "-o", out2)
    check(r.returncode == 0 and open(out1).read() == open(out2).read(), "the order of the traces changed the profile")

    # The calibrated profile plans (it reads back) and calibrates again with the profiler's fit as the bench.
    r = run("calibrate", out1, "-t", a, "-o", out3)
    check(r.returncode == 0, f"calibrating a calibrated profile: {r.stderr.strip()}")
    if r.returncode == 0:
        again = json.load(open(out3))["transfer"]["h2d"]["calibration"]
        check(again["bench_bytes_per_second"] == profile["transfer"]["h2d"]["bytes_per_second"] and again["traces"] == 1,
              f"calibrating again: {again}")
    r = run("compile", profile["network"], "--profile", out1, "--budget", "1GiB", "--strategy", "keep-all", "-q", "-o",
            os.path.join(tmp, "plan.json"))
    check(r.returncode == 0, f"compile from the calibrated profile: {r.stderr.strip()}")
    if r.returncode == 0:
        notes = json.load(open(os.path.join(tmp, "plan.json")))["notes"]
        check(any(n.startswith("copy times are calibrated to traced runs") for n in notes),
              f"the plan does not say its copies are calibrated: {notes}")

    # Kernels 2 ms apart fit a "launch gap" no profile holds: refused (exit 2, one line, nothing
    # written), where a profile was written that compile then refused to read.
    slow = [dict(e, ts=e["ts"] * 1000) for e in kernels(0)]  # every wait (1.7-22.7 us) a thousand times longer
    slow_trace, slow_out = os.path.join(tmp, "slow.json"), os.path.join(tmp, "slow-profile.json")
    json.dump(trace(profile["network"], "measured", slow), open(slow_trace, "w"))
    r = run("calibrate", profile_path, "-t", slow_trace, "--fit", "launch", "-o", slow_out)
    check(r.returncode == 2 and r.stderr.count("\n") == 1 and "more than a launch takes" in r.stderr and
          not os.path.exists(slow_out),
          f"calibrate with kernels milliseconds apart: exit {r.returncode}, {r.stderr.strip()!r}, "
          f"file written: {os.path.exists(slow_out)}")

    # The launch gap, alone and beside the copies.
    la, lb = os.path.join(tmp, "la.json"), os.path.join(tmp, "lb.json")
    json.dump(trace(profile["network"], "measured", kernels(0) + made_up(0)), open(la, "w"))
    json.dump(trace(profile["network"], "measured", kernels(3)), open(lb, "w"))
    gapped = os.path.join(tmp, "gapped.json")
    r = run("calibrate", profile_path, "-t", la, "-t", lb, "--fit", "launch", "-o", gapped)
    check(r.returncode == 0, f"calibrate --fit launch: exit {r.returncode}: {r.stderr.strip()}")
    if r.returncode == 0:
        g = json.load(open(gapped))
        gap = g.get("launch_gap", {})
        check(abs(gap.get("seconds", 0) * 1e6 - GAP_US) < 0.05,
              f"launch gap fitted {gap.get('seconds', 0) * 1e6:.3f} us, made with {GAP_US}")
        want = short_gaps(la) + short_gaps(lb)
        check(gap.get("gaps") == want and gap.get("traces") == 2,
              f"launch gap record {gap}: expected {want} short gaps from 2 traces")
        check({k: v for k, v in g.items() if k != "launch_gap"} == profile, "--fit launch changed more than the gap")
        r = run("compile", profile["network"], "--profile", gapped, "--budget", "1GiB", "--strategy", "keep-all", "-q",
                "-o", os.path.join(tmp, "gplan.json"))
        r0 = run("compile", profile["network"], "--profile", profile_path, "--budget", "1GiB", "--strategy",
                 "keep-all", "-q", "-o", os.path.join(tmp, "plan0.json"))
        check(r.returncode == 0 and r0.returncode == 0, f"compile from the gapped profile: {r.stderr.strip()}")
        if r.returncode == 0 and r0.returncode == 0:
            gp, p0 = (json.load(open(os.path.join(tmp, f))) for f in ("gplan.json", "plan0.json"))
            compute = sum(1 for st in gp["steps"] if st["stream"] == "compute")
            grew = gp["summary"]["ideal_ns"] - p0["summary"]["ideal_ns"]
            check(grew >= compute * round(gap["seconds"] * 1e9),
                  f"the ideal grew {grew} ns with the gap, less than {compute} compute steps x the gap")
            check(any(n.startswith("every kernel's time includes a launch gap") for n in gp["notes"]),
                  f"the plan does not say its kernels include the gap: {gp['notes']}")
    both = os.path.join(tmp, "both.json")
    r = run("calibrate", profile_path, "-t", la, "-o", both)
    check(r.returncode == 0, f"calibrate copies and gap: {r.stderr.strip()}")
    if r.returncode == 0:
        g = json.load(open(both))
        check("launch_gap" in g and "calibration" in g["transfer"]["h2d"], "the default fit refit not both")
    r = run("calibrate", profile_path, "-t", la, "--fit", "copies", "-o", both)
    check(r.returncode == 0 and "launch_gap" not in json.load(open(both)), "--fit copies fitted a launch gap")

    # The advice to calibrate: a measured CUDA profile (ResNet-20 b64 on an H100), plans that offload
    # (vdnn-all: every conv input) and that do not (keep-all), from the profile as measured and
    # calibrated. Baselines, not searches: this test also runs under the sanitizers.
    cuda = json.load(open(cuda_profile_path))
    cuda_cal = os.path.join(tmp, "cuda-calibrated.json")
    ta = os.path.join(tmp, "cuda-trace.json")
    json.dump(trace(cuda["network"], "measured", made_up(0)), open(ta, "w"))
    r = run("calibrate", cuda_profile_path, "-t", ta, "-o", cuda_cal)
    check(r.returncode == 0, f"calibrate the CUDA profile: {r.stderr.strip()}")
    advice = "copy times are the profiler's, each copy timed alone"
    for prof, strategy, want in ((cuda_profile_path, "vdnn-all", True), (cuda_profile_path, "keep-all", False),
                                 (cuda_cal, "vdnn-all", False)):
        plan_path = os.path.join(tmp, "cuda-plan.json")
        r = run("compile", cuda["network"], "--profile", prof, "--budget", "64GiB", "--strategy", strategy, "-q",
                "-o", plan_path)
        check(r.returncode == 0, f"compile {strategy} from {os.path.basename(prof)}: {r.stderr.strip()}")
        if r.returncode != 0:
            continue
        plan = json.load(open(plan_path))
        offloads = plan["summary"]["offload_bytes"] > 0
        check(offloads == (strategy == "vdnn-all"), f"{strategy} from {os.path.basename(prof)}: offload "
              f"{plan['summary']['offload_bytes']} B; the test needs a plan that offloads and one that does not")
        has = any(n.startswith(advice) for n in plan["notes"])
        check(has == want, f"{strategy} from {os.path.basename(prof)}: the advice to calibrate is "
              f"{'missing' if want else 'there'}: {plan['notes']}")

    # The launch gap's advice: resnet20 b64's 210 short kernels on an H100 would take about 7 % longer
    # with it, so a plan from the profile as measured says how to calibrate it, and one from the
    # profile calibrated with a gap says it has one instead.
    gap_advice = "kernel times are the profiler's, which leave out the compute stream's idle time"
    cuda_gapped = os.path.join(tmp, "cuda-gapped.json")
    tg = os.path.join(tmp, "cuda-kernels.json")
    json.dump(trace(cuda["network"], "measured", kernels(0)), open(tg, "w"))
    r = run("calibrate", cuda_profile_path, "-t", tg, "--fit", "launch", "-o", cuda_gapped)
    check(r.returncode == 0, f"calibrate the CUDA profile's gap: {r.stderr.strip()}")
    for prof, want in ((cuda_profile_path, True), (cuda_gapped, False)):
        plan_path = os.path.join(tmp, "cuda-plan.json")
        r = run("compile", cuda["network"], "--profile", prof, "--budget", "64GiB", "--strategy", "keep-all", "-q",
                "-o", plan_path)
        if r.returncode != 0:
            check(False, f"keep-all from {os.path.basename(prof)}: {r.stderr.strip()}")
            continue
        notes = json.load(open(plan_path))["notes"]
        check(any(n.startswith(gap_advice) for n in notes) == want and
              any(n.startswith("every kernel's time includes a launch gap") for n in notes) != want,
              f"keep-all from {os.path.basename(prof)}: the launch gap's advice should be "
              f"{'there' if want else 'replaced by the gap'}: {notes}")

# Traces from anywhere (seeded): each valid trace with one to three fields set to an edge value.
# Calibrate must either write a profile that the planner then reads, or refuse with one line,
# exit 2 and no file; never crash.
EDGES = [0, -1, -1e-9, 1e-300, 1e300, 1e308, -1e308, 2**53, 2**63 - 1, -(2**63), 2**64, 0.5, "x", None, [], {}, True]


def mutated(rng, base):
    events = json.loads(json.dumps(base))
    for _ in range(rng.randint(1, 3)):
        e = rng.choice(events["traceEvents"])
        where = e["args"] if "args" in e and rng.random() < 0.4 else e
        key = rng.choice(sorted(where)) if where else "ts"
        if rng.random() < 0.15:
            where.pop(key, None)
        else:
            where[key] = rng.choice(EDGES)
    return events


with tempfile.TemporaryDirectory() as tmp:
    rng = random.Random(1)
    base = trace(profile["network"], "measured", kernels(0) + made_up(0))
    t_path, out = os.path.join(tmp, "t.json"), os.path.join(tmp, "out.json")
    outcomes = {"written": 0, "refused": 0}
    for k in range(60):
        json.dump(mutated(rng, base), open(t_path, "w"))
        if os.path.exists(out):
            os.remove(out)
        r = run("calibrate", profile_path, "-t", t_path, "-o", out)
        if r.returncode == 0:
            outcomes["written"] += 1
            r2 = run("compile", profile["network"], "--profile", out, "--conv-only")
            check(r2.returncode == 0, f"mutant {k}: calibrate wrote a profile that compile refuses: {r2.stderr.strip()}")
        else:
            outcomes["refused"] += 1
            check(r.returncode == 2 and r.stderr.count("\n") == 1 and not os.path.exists(out),
                  f"mutant {k}: exit {r.returncode}, {r.stderr.strip()!r}, file written: {os.path.exists(out)}")
    print(f"adversarial traces: {outcomes['written']} calibrated, {outcomes['refused']} refused")
    # Times a profile cannot hold are refused where they are read, not written for compile to refuse:
    # a copy of 0 s (an infinite bandwidth) or over 1000 s, a kernel over 1000 s, and a start so
    # large that the end overflows (found by the calibrate review; each once wrote a profile).
    bad_times = (("a copy of 0 s", "prefetch", {"dur": 0}, "a copy's time must be more than 0"),
                 ("a copy of 2000 s", "offload", {"dur": 2e9}, "at most 1000 s"),
                 ("a kernel of 2000 s", None, {"dur": 2e9}, "a kernel's time"),
                 ("an end past FP64", "prefetch", {"ts": 1e308, "dur": 1e308}, "within a day"))
    for what, cat, changes, said in bad_times:
        events = json.loads(json.dumps(base))
        kernel = lambda x: x.get("tid") == 1 and x.get("ph") == "X"  # noqa: E731
        e = next(x for x in events["traceEvents"] if (x.get("cat") == cat if cat else kernel(x)))
        e.update(changes)
        json.dump(events, open(t_path, "w"))
        if os.path.exists(out):
            os.remove(out)
        r = run("calibrate", profile_path, "-t", t_path, "-o", out)
        check(r.returncode == 2 and said in r.stderr and not os.path.exists(out),
              f"{what}: exit 2 naming it, nothing written; got {r.returncode} {r.stderr.strip()!r}")

finish("calibrate: ")
