#!/usr/bin/env python3
"""Regenerates the error inputs that are derived from real profiles and plans (profile_*, compile_*,
plan_*, profile_command_*), for when the profile or plan format changes:

  UCPLAN_BIN=build/bin/ucplan python3 tests/error/make_inputs.py

1. inputs/chain3-b4-k40.json: `ucplan profile` of tests/data/chain3.json, batch 4, model:k40, undivided;
   inputs/chain3-b4-k40-1mib.json: `ucplan compile` of it under 1 MiB (both valid, kept small).
2. Each case NAME.json is one of them (or the chain3 network) with one defect, and NAME.cmd the arguments.
The NAME.expected files are not touched: run run_error_tests.sh afterwards and review any change.
"""
import os
import subprocess
import sys

D = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("UCPLAN_BIN") or sys.exit("set UCPLAN_BIN to the ucplan binary")
OUT = "-o /tmp/ucplan-error-test-output.json"


def ucplan(*args):
    subprocess.run([BIN, *args], check=True, cwd=D, stdout=subprocess.DEVNULL)


def sub(text, old, new):
    assert text.count(old) == 1, f"expected {old!r} once"
    return text.replace(old, new)


os.makedirs(os.path.join(D, "inputs"), exist_ok=True)
ucplan("profile", "../data/chain3.json", "--batch", "4", "--device", "model:k40", "--sizes", "undivided",
       "-o", "inputs/chain3-b4-k40.json")
ucplan("compile", "../data/chain3.json", "--profile", "inputs/chain3-b4-k40.json", "--budget", "1MiB", "-q",
       "-o", "inputs/chain3-b4-k40-1mib.json")
# A batch-norm variant, profiled at powers of two up to 4 (so batch 2 is costable but not the whole batch).
ucplan("profile", "inputs/chain3bn.json", "--batch", "4", "--device", "model:k40", "--sizes", "powerOfTwo",
       "-o", "inputs/chain3bn-b4-k40.json")
prof = open(os.path.join(D, "inputs/chain3-b4-k40.json")).read()
plan = open(os.path.join(D, "inputs/chain3-b4-k40-1mib.json")).read()
net = open(os.path.join(D, "../data/chain3.json")).read()

COMPILE_P = "compile @DIR/../data/chain3.json --profile @FILE --budget 1GiB " + OUT  # input: a profile
COMPILE_N = "compile @FILE --profile @DIR/inputs/chain3-b4-k40.json "                 # input: the network
cases = {
    # Profile files, read by `ucplan compile`.
    "profile_invalid_json": (sub(prof, '"sizes": [4],\n', '"sizes": [4]\n'), COMPILE_P),
    "profile_wrong_format": (sub(prof, '"format": "ucplan-profile/1"', '"format": "ucplan-plan/1"'), COMPILE_P),
    "profile_source_device_mismatch": (sub(prof, '"source": "model:k40"', '"source": "measured"'), COMPILE_P),
    "profile_ok_cost_without_seconds": (sub(prof, '"algo":"fft","batch":4,"status":"ok","seconds":3.8056293706293704e-05,',
                                            '"algo":"fft","batch":4,"status":"ok",'), COMPILE_P),
    "profile_negative_seconds": (sub(prof, '"algo":"gemm","batch":4,"status":"ok","seconds":1.6',
                                     '"algo":"gemm","batch":4,"status":"ok","seconds":-1.6'), COMPILE_P),
    "profile_unknown_field": (sub(prof, '"layers": ["relu"],', '"layer": ["relu"],'), COMPILE_P),
    # Compile options.
    "compile_budget_without_unit": (net, COMPILE_N + "--budget 12 " + OUT),
    "compile_budget_below_lower_bound": (net, COMPILE_N + "--budget 2KiB " + OUT),
    "compile_unknown_strategy": (net, COMPILE_N + "--budget 1MiB --strategy vdnn " + OUT),
    "compile_bad_workspace": (net, COMPILE_N + "--budget 1MiB --workspace wr:64 " + OUT),
    "compile_precision_mismatch": (net, COMPILE_N + "--budget 1MiB --precision bf16 " + OUT),
    "compile_bad_loss_scale": (net, COMPILE_N + "--budget 1MiB --loss-scale static:x " + OUT),
    "compile_sub_batch_not_dividing": (net, COMPILE_N + "--budget 1MiB --sub-batch 3 " + OUT),
    "compile_profile_for_another_network": (
        sub(sub(net, '"name": "chain3"', '"name": "chain3-wide"'), '"out_channels": 4', '"out_channels": 8'),
        COMPILE_N + "--budget 1MiB " + OUT),
    # Plan files, read by `ucplan check` and `ucplan run`. A plan that reads but fails verification
    # makes `check` print FAIL and exit 1, so `check` is tested on malformed files only.
    "plan_check_invalid_json": (sub(plan, '"end_ns":24004},\n', '"end_ns":24004}\n'), "check @FILE"),
    "plan_check_wrong_format": (sub(plan, '"format": "ucplan-plan/1"', '"format": "ucplan-plan/2"'), "check @FILE"),
    "plan_check_step_missing_stream": (sub(plan, '{"id":2,"stream":"compute","op":"forward"', '{"id":2,"op":"forward"'),
                                       "check @FILE"),
    "plan_run_invalid_json": (sub(plan, '"end_ns":24004},\n', '"end_ns":24004}\n'), "run @FILE --iterations 1"),
    "plan_run_wrong_format": (sub(plan, '"format": "ucplan-plan/1"', '"format": "ucplan-plan/2"'), "run @FILE --iterations 1"),
    # The fc forward reads buffer 5 (Y:conv) instead of 7 (Y:relu).
    "plan_run_invalid_step": (sub(plan, '"layer":"fc","reads":[7,2]', '"layer":"fc","reads":[5,2]'), "run @FILE --iterations 1"),
    # dY:relu placed on the bytes of Y:relu while it is still live.
    "plan_run_overlapping_buffers": (sub(plan, '{"id":12,"tensor":"dY:relu","offset":5632', '{"id":12,"tensor":"dY:relu","offset":4608'),
                                     "run @FILE --iterations 1"),
    # `ucplan profile` options.
    "profile_command_unknown_device": (net, "profile @FILE --batch 4 --device tpu " + OUT),
    "profile_bad_precision": (net, "profile @FILE --batch 4 --device model:h100 --precision fp8 " + OUT),
    "profile_command_missing_batch": (net, "profile @FILE --device model:k40 " + OUT),
    "profile_command_unknown_sizes": (net, "profile @FILE --batch 4 --device model:k40 --sizes some " + OUT),
}
for name, (text, cmd) in cases.items():
    with open(os.path.join(D, name + ".json"), "w") as f:
        f.write(text)
    with open(os.path.join(D, name + ".cmd"), "w") as f:
        f.write(cmd + "\n")
print(f"{len(cases)} cases written; now run: UCPLAN_BIN={BIN} bash {D}/run_error_tests.sh")
