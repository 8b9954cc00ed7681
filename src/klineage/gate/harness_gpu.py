"""The candidate harness's GPU commands: the CUDA-graph replay check, the device kernel list
and one round of timing. `self` is the harness (gate/harness.py), whose model, device, graphs,
timers and input sets these read and keep.

Copied beside the harness into the sandbox with harness_monitors.py and devtime.py
(gate/session.py HARNESS_SIBLINGS) and imported as a plain sibling: like them it imports nothing
from klineage, and torch only inside its functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import devtime as DEVTIME
from harness_monitors import STATE


def graph_check(
    self: Any, cmd: dict[str, Any], short_error: Callable[[BaseException], str]
) -> dict[str, Any]:
    """Capture forward in a CUDA graph on this regime's buffers, then for each input file:
    copy it into the captured buffers, replay, save the outputs. Host-side work (threads,
    caches, Python compute) does not survive replay: only the captured device work runs."""
    import torch

    regime = cmd["regime"]
    model = self.model(regime, cmd["init"])
    static = [
        v.to(self.device) if isinstance(v, torch.Tensor) else v
        for v in torch.load(cmd["inputs"][0], weights_only=True)["inputs"]
    ]
    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(3):
                model(*static)  # warm up: autotuners tune, kernels compile
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                out = model(*static)
        except Exception as e:
            return {
                "id": cmd["id"],
                "ok": False,
                "capture_failed": True,
                "error": short_error(e),
            }
    outs = list(out) if isinstance(out, list | tuple) else [out]
    files = []
    for path, dest in zip(cmd["inputs"][1:], cmd["outs"], strict=True):
        values = torch.load(path, weights_only=True)["inputs"]
        for dst, src in zip(static, values, strict=True):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src.to(self.device))
        graph.replay()
        torch.cuda.synchronize()
        torch.save(
            {
                "outputs": [
                    o.detach().to("cpu").clone() if isinstance(o, torch.Tensor) else o for o in outs
                ],
                "tuple": isinstance(out, list | tuple),
            },
            dest,
        )
        files.append(dest)
    self.graphs[regime] = (graph, static)
    return {"id": cmd["id"], "ok": True, "outs": files}


def kernels(self: Any, cmd: dict[str, Any]) -> dict[str, Any]:
    """The device kernels one forward ran, by name (profiler, CUDA activity)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    model = self.model(cmd["regime"], cmd["init"])
    values = [
        v.to(self.device) if isinstance(v, torch.Tensor) else v
        for v in torch.load(cmd["inputs"], weights_only=True)["inputs"]
    ]
    with torch.no_grad():
        model(*values)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            model(*values)
            torch.cuda.synchronize()
    names = sorted(
        {
            e.name
            for e in prof.events()
            if getattr(e, "device_type", None) is not None and "cuda" in str(e.device_type).lower()
        }
    )
    return {
        "id": cmd["id"],
        "ok": True,
        "device_kernels": names,
        "launched": sorted(STATE.kernels),
    }


def time_round(self: Any, cmd: dict[str, Any]) -> dict[str, Any]:
    """One round of timing on a regime (gate/devtime.py): device samples by graph replay,
    host samples by eager launches. The timer (input sets, captured graph) is built on the
    first round and kept, so later rounds are comparable. With force_config, every
    autotuned kernel runs that config of its table (the gate's config sweep); the input
    sets of a regime are shared by its configs, and a timer asked with keep=false is
    dropped after its samples (a sweep times each config once)."""
    import torch

    regime, force = cmd["regime"], cmd.get("force_config")
    key = regime if force is None else f"{regime}#{force}"
    STATE.force_config = force
    try:
        timer = self.timers.get(key)
        if timer is None:
            sets = self.input_sets.get(regime)
            if sets is None:
                values = [
                    v.to(self.device) if isinstance(v, torch.Tensor) else v
                    for v in torch.load(cmd["inputs"], weights_only=True)["inputs"]
                ]
                sets = self.input_sets[regime] = DEVTIME.input_sets(values, DEVTIME.l2_bytes())
            timer = DEVTIME.Timer(self.model(regime, cmd["init"]), sets[0], sets=sets)
            if cmd.get("keep", True):
                self.timers[key] = timer
        n = int(cmd["samples"])
        device, host = timer.device_samples(n), timer.host_samples(n)
    finally:
        STATE.force_config = None
    return {
        "id": cmd["id"],
        "ok": True,
        "device": device,
        "host": host,
        "capture_error": timer.capture_error,
        "sets": timer.calls,
        "picked": dict(STATE.picked),
        "forced": dict(STATE.forced),
    }
