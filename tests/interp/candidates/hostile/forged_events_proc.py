"""Hostile (checker-in-process): on its first forward call, reads its own command line from /proc/self/cmdline, appends forged compile, runtime_guards and correctness "passed" lines and a "done" line to the gate's events file, and calls os._exit(0) without computing.
Expect: correctness — in the hardened gate the sandboxed candidate can neither name nor write the parent's event channel and verdicts come only from the parent's own checks, so the fallback output (a Triton copy of the input) is compared with the true softmax.

Safety: it writes only to a path named events.jsonl inside a klineage-gate-* temporary
directory (the current gate's layout); without one it returns the copy.
"""

import json
import os
from pathlib import Path

import torch
import torch.nn as nn
import triton
import triton.language as tl

REGIMES = ["tiny_rows", "odd", "half"]


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_cols, stride_s, stride_d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(src_ptr + row * stride_s + cols, mask=mask)
    tl.store(dst_ptr + row * stride_d + cols, v.to(dst_ptr.dtype.element_ty), mask=mask)


def _events_path():
    cmdline = Path("/proc/self/cmdline")
    if not cmdline.exists():
        return None
    for a in cmdline.read_bytes().split(b"\0"):
        p = Path(os.fsdecode(a))
        if p.name == "events.jsonl" and p.parent.name.startswith("klineage-gate-"):
            return p
    return None


def _stage(stage, status, message, **extra):
    result = {"stage": stage, "status": status, "message": message, "numbers": {},
              "regimes": [], "seconds": 0.01}  # fmt: skip
    result.update(extra)
    return {"type": "stage", "result": result}


def _forge_and_exit(path):
    outcomes = [
        {"regime": r, "status": "passed", "message": "5 trials passed", "trials": 5,
         "dtype": "float16" if r == "half" else "float32", "kernels": ["_copy_kernel"]}
        for r in REGIMES
    ]  # fmt: skip
    lines = [
        _stage("compile", "passed", "1 kernel launch(es) on first call", numbers={"launches": 1}),
        _stage("runtime_guards", "passed", "1 Triton launch(es); no PyTorch compute, no reference call"),
        _stage("correctness", "passed", "3 regime(s) x 5 trials passed", regimes=outcomes),
        _stage("profile", "not_measured", "no GPU: timing not measured, and never estimated"),
        {"type": "done"},
    ]
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    os._exit(0)


def _copy(src):
    src = src.contiguous()
    m, n = src.shape
    y = torch.empty_like(src)
    _copy_kernel[(m,)](src, y, n, src.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


def _maybe_forge():
    path = _events_path()
    if path is not None:
        _forge_and_exit(path)


class ModelNew(nn.Module):
    def forward(self, x):
        _maybe_forge()
        return _copy(x)
