"""Device time by CUDA-graph replay, with the host-inclusive time beside it.

Standalone (torch only, no klineage imports): it runs in the candidate's harness, copied next
to it into the sandbox, and in the reference's process.

How one call of `fn` is timed:
- The inputs are copied into enough sets that together they are several times the L2 (at most
  MAX_SETS sets and MAX_SET_BYTES in all), and the calls rotate over them, so a kernel reads its
  inputs from memory, not from the cache of the previous call. Small inputs that would need
  more sets stay partly cache-resident: those regimes are launch-bound anyway.
- **Device time**: one CUDA graph captures a call on every set; a sample is `reps` replays
  between two CUDA events, divided by the calls. The host's launch path (Python, autotuner
  dispatch, wrappers) is not in it: the GPU runs the captured kernels back to back.
- **Host time**: the same calls launched eagerly between two events: what a user who calls the
  kernel from Python pays. When the GPU work is shorter than the launch path, this is the
  launch path.
- Both are warmed up first (autotuners tune, kernels compile before anything is captured), and
  each sample is at least TARGET_SAMPLE_MS long, so event resolution never matters.
Where capture fails (a host synchronisation, a CPU fallback) device time is not measured:
`method` says "events" and `capture_error` why.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from typing import Any

MAX_SETS = 32
MAX_SET_BYTES = 2 << 30
L2_MULTIPLE = 3  # the sets together are this many times the L2
TARGET_SAMPLE_MS = 1.0
MAX_REPS = 20000
EMPTY_LAUNCHES = 64


def _nbytes(values: list[Any]) -> int:
    import torch

    return sum(v.numel() * v.element_size() for v in values if isinstance(v, torch.Tensor))


def input_sets(inputs: list[Any], l2_bytes: int) -> list[list[Any]]:
    """The inputs and copies of them: together about L2_MULTIPLE x the L2, within the caps."""
    import torch

    size = _nbytes(inputs)
    if size == 0:
        return [inputs]
    k = math.ceil(L2_MULTIPLE * l2_bytes / size)
    k = max(1, min(k, MAX_SETS, MAX_SET_BYTES // size))
    sets = [inputs]
    for _ in range(k - 1):
        sets.append([v.clone() if isinstance(v, torch.Tensor) else v for v in inputs])
    return sets


def l2_bytes() -> int:
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 50 << 20))


def short(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


class Timer:
    """Times fn(*inputs) on the current CUDA device; see the module docstring."""

    def __init__(
        self,
        fn: Callable[..., Any],
        inputs: list[Any],
        *,
        warmup: int = 3,
        sets: list[list[Any]] | None = None,
    ) -> None:
        """sets: input sets built by input_sets() for an earlier Timer of the same inputs
        (timers of several configs share them); built from inputs when not given."""
        import torch

        self.fn = fn
        self.sets = sets if sets is not None else input_sets(inputs, l2_bytes())
        self.graph: Any = None
        self.capture_error: str | None = None
        self._outs: list[Any] = []
        with torch.no_grad():
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(warmup):
                    for s in self.sets:
                        fn(*s)
            torch.cuda.current_stream().wait_stream(stream)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    # Outputs stay referenced: their memory belongs to the graph's pool.
                    self._outs = [fn(*s) for s in self.sets]
                self.graph = graph
            except Exception as e:
                self.capture_error = short(e)
                torch.cuda.synchronize()
        self.calls = len(self.sets)
        self.device_reps = self._reps(self._replay) if self.graph is not None else 0
        self.host_reps = self._reps(self._eager)

    # one batch of calls ---------------------------------------------------------------------
    def _replay(self) -> None:
        self.graph.replay()

    def _eager(self) -> None:
        for s in self.sets:
            self.fn(*s)

    def _elapsed(self, batch: Callable[[], None], reps: int) -> float:
        import torch

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.no_grad():
            start.record()
            for _ in range(reps):
                batch()
            end.record()
            end.synchronize()
        return float(start.elapsed_time(end))

    def _reps(self, batch: Callable[[], None]) -> int:
        self._elapsed(batch, 1)
        one = max(self._elapsed(batch, 1), 1e-4)
        return max(1, min(MAX_REPS, math.ceil(TARGET_SAMPLE_MS / one)))

    # samples --------------------------------------------------------------------------------
    def device_samples(self, n: int) -> list[float]:
        """ms per call, n samples; empty when the forward could not be captured."""
        if self.graph is None:
            return []
        per = self.device_reps * self.calls
        return [self._elapsed(self._replay, self.device_reps) / per for _ in range(n)]

    def host_samples(self, n: int) -> list[float]:
        per = self.host_reps * self.calls
        return [self._elapsed(self._eager, self.host_reps) / per for _ in range(n)]


def empty_launch_ms(samples: int = 5) -> float:
    """Device time of one empty kernel, replayed from a graph of EMPTY_LAUNCHES of them: the
    floor under which a regime's time is launch cost, not work."""
    import torch

    torch.cuda._sleep(0)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(EMPTY_LAUNCHES):
            torch.cuda._sleep(0)
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(samples):
        start.record()
        for _ in range(20):
            graph.replay()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) / (20 * EMPTY_LAUNCHES))
    return float(statistics.median(out))


def quantiles(xs: list[float]) -> tuple[float, float, float]:
    """p20, p50, p80 (the middle value repeated for one sample)."""
    if not xs:
        return (math.nan, math.nan, math.nan)
    if len(xs) == 1:
        return (xs[0], xs[0], xs[0])
    q = statistics.quantiles(xs, n=10, method="inclusive")
    return (q[1], statistics.median(xs), q[7])
