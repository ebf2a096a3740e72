#!/usr/bin/env python3
"""Networks at the sizes the loader allows stay cheap to read and to print: reading a file of n
layers and ordering a graph of n layers that read one input take time linear in n (they were
quadratic: 400,000 layers took 24 s to parse, 100,000 layers reading the input 33 s to order), and
so do profiling and compiling a chain (10^5 layers: 9 s and 66 s), so four times the layers may take
at most eight times as long; inspect's table keeps every line short
however long a layer's name or input list (a concat of 20,000 inputs printed 2.6 GB), while --json
gives them whole; a name with a control character is refused, and a folder said to be one.
Usage: large_networks.py UCPLAN"""
import json
import os
import subprocess
import sys
import tempfile
import time

from checks import check, finish  # tests/cli/checks.py

ucplan = sys.argv[1]


def network(layers, labels=4):
    return {"format": "ucplan-network/1", "name": "large", "input": {"shape": [1, 2, 2]}, "labels": labels,
            "layers": layers + [{"name": "loss", "type": "softmax_loss", "inputs": [layers[-1]["name"]]}]}


def chain(n):  # relu after relu
    return network([{"name": f"r{k}", "type": "relu", "inputs": [f"r{k - 1}" if k else "data"]} for k in range(n)])


def wide(n):  # n relus of the input, then one of them to the loss; the others end there
    layers = [{"name": f"r{k}", "type": "relu", "inputs": ["data"]} for k in range(n)]
    return network(layers + [{"name": "sum", "type": "add", "inputs": ["r0", "r1"]}])


def seconds(path):
    start = time.monotonic()
    r = subprocess.run([ucplan, "inspect", path, "--batch", "1", "--json"], capture_output=True, text=True)
    check(r.returncode == 0, f"inspect {os.path.basename(path)}: {r.stderr.strip()}")
    return time.monotonic() - start


with tempfile.TemporaryDirectory() as tmp:
    for name, make, small in (("chain", chain, 50000), ("wide", wide, 25000)):
        times = []
        for n in (small, 4 * small):
            path = os.path.join(tmp, f"{name}-{n}.json")
            with open(path, "w") as f:
                json.dump(make(n), f)
            times.append(min(seconds(path) for _ in range(2)))
        print(f"{name}: {small} layers {times[0]:.2f} s, {4 * small} layers {times[1]:.2f} s")
        check(times[1] < 8 * times[0], f"{name}: four times the layers took {times[1] / times[0]:.1f} times as long")

    # Profiling and compiling a chain: linear too (the profiler searched each signature's list of
    # layers, the verifier looked each step's layer up one by one: 10^5 layers took 9 s and 66 s).
    times = []
    for n in (10000, 40000):
        net, prof, plan = (os.path.join(tmp, f"{what}-{n}.json") for what in ("net", "prof", "plan"))
        with open(net, "w") as f:
            json.dump(chain(n), f)
        start = time.monotonic()
        r = subprocess.run([ucplan, "profile", net, "--batch", "1", "--device", "model:h100", "-o", prof],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"profile of {n} layers: {r.stderr.strip()}")
        r = subprocess.run([ucplan, "compile", net, "--profile", prof, "--budget", "4KiB", "-q", "-o", plan],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"compile of {n} layers: {r.stderr.strip()}")
        times.append(time.monotonic() - start)
    print(f"profile and compile: 10000 layers {times[0]:.2f} s, 40000 layers {times[1]:.2f} s")
    check(times[1] < 8 * times[0], f"four times the layers took {times[1] / times[0]:.1f} times as long")

    # A concat of 20,000 inputs, one of them with a 100,000-character name.
    n = 20000
    layers = [{"name": f"r{k}" if k else "x" * 100000, "type": "relu", "inputs": ["data"]} for k in range(n)]
    cat = {"name": "cat", "type": "concat", "inputs": [l["name"] for l in layers]}
    path = os.path.join(tmp, "cat.json")
    with open(path, "w") as f:
        json.dump(network(layers + [cat], labels=4 * n), f)
    r = subprocess.run([ucplan, "inspect", path, "--batch", "1"], capture_output=True, text=True)
    widest = max(len(line) for line in r.stdout.splitlines()) if r.stdout else 0
    check(r.returncode == 0 and widest <= 600 and len(r.stdout) < n * 600,
          f"inspect's table: exit {r.returncode}, {len(r.stdout)} characters, widest line {widest}")
    check(f"... ({n} in all)" in r.stdout, "the concat's inputs are not cut with their count")
    r = subprocess.run([ucplan, "inspect", path, "--batch", "1", "--json"], capture_output=True, text=True)
    listed = next(l for l in json.loads(r.stdout)["layers"] if l["name"] == "cat")
    check(listed["inputs"] == ",".join(cat["inputs"]), "--json does not give the inputs whole")

    bad = network([{"name": "r\x1b[2J\nfake", "type": "relu", "inputs": ["data"]}])
    path = os.path.join(tmp, "ctrl.json")
    with open(path, "w") as f:
        json.dump(bad, f)
    r = subprocess.run([ucplan, "inspect", path], capture_output=True, text=True)
    check(r.returncode == 2 and "layers[0].name: \"r\\x1b[2J\\nfake\" holds a control character" in r.stderr,
          f"a control character in a name: exit {r.returncode}, {r.stderr.strip()!r}")

    # A folder where a network file is named: said so, not "no such file".
    os.makedirs(os.path.join(tmp, "folder.json"))
    r = subprocess.run([ucplan, "inspect", os.path.join(tmp, "folder.json")], capture_output=True, text=True)
    check(r.returncode == 2 and r.stderr.strip().endswith("folder.json: is a folder, not a network file"),
          f"a folder as the network: exit {r.returncode}, {r.stderr.strip()!r}")

finish("large networks: ")
