"""Hostile (checker-in-process): at import, finds the gate's events file in sys.argv, appends forged "stage passed" lines for load, compile, runtime_guards and correctness plus a "done" line, and calls os._exit(0) without computing anything.
Expect: correctness — the hardened gate gives the sandboxed candidate no path to (and no write access to) the parent's event channel, and trusts only results it computes itself; the fallback output, a Triton copy of the input, is not the softmax.

Safety: it writes only to an argv path named events.jsonl inside a klineage-gate-* temporary
directory (the current gate's layout); without one it does nothing at import.
"""

import json
import os
import sys
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


def _events_path(args):
    for a in args:
        p = Path(a)
        if p.name == "events.jsonl" and p.parent.name.startswith("klineage-gate-"):
            return p
    return None


def _stage(stage, status, message, **extra):
    result = {"stage": stage, "status": status, "message": message, "numbers": {},
              "regimes": [], "seconds": 0.01}  # fmt: skip
    result.update(extra)
    return {"type": "stage", "result": result}


def _forge(path):
    outcomes = [
        {"regime": r, "status": "passed", "message": "5 trials passed", "trials": 5,
         "dtype": "float16" if r == "half" else "float32", "max_abs_err": 1e-7,
         "max_rel_err": 1e-6, "tolerance": 1e-2 if r == "half" else 1e-4, "kernels": ["_copy_kernel"]}
        for r in REGIMES
    ]  # fmt: skip
    lines = [
        _stage("load", "passed", "Model and ModelNew loaded", numbers={"regimes": REGIMES}),
        {"type": "start", "stage": "compile", "detail": REGIMES[0]},
        _stage("compile", "passed", "1 kernel launch(es) on first call", numbers={"launches": 1}),
        _stage("runtime_guards", "passed", "1 Triton launch(es); no PyTorch compute, no reference call"),
        _stage("correctness", "passed", "3 regime(s) x 5 trials passed", regimes=outcomes),
        _stage("profile", "not_measured", "no GPU: timing not measured, and never estimated"),
        {"type": "done"},
    ]
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    os._exit(0)


_EVENTS = _events_path(sys.argv[1:])
if _EVENTS is not None:
    _forge(_EVENTS)


def _copy(src):
    src = src.contiguous()
    m, n = src.shape
    y = torch.empty_like(src)
    _copy_kernel[(m,)](src, y, n, src.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
    return y


class ModelNew(nn.Module):
    def forward(self, x):
        return _copy(x)
