"""Where bench jobs run: a local process pool (default) or a Ray cluster, one GPU per worker.

An optimize run is a sequence of gate calls, each depending on the last; runs are independent,
so jobs (problem, policy) fan out. On a GPU machine each local worker is pinned to one GPU
(CUDA_VISIBLE_DEVICES, inherited by the gate's child processes), so timings never share a
device. With Ray, each job is a task asking for one GPU (`num_gpus=1`), and Ray pins it.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Protocol

from klineage.bench.records import BenchJob, BenchRow
from klineage.errors import UsageError

Job = BenchJob


def _failed(job: Job, error: str) -> BenchRow:
    """The row of a job whose worker died: the row says so, the bench goes on."""
    return BenchRow.model_validate(
        {
            "problem": job.name,
            "policy": job.policy,
            "seed": job.seed,
            "success": False,
            "gate_calls": 0,
            "curve": [],
            "error": error,
        }
    )


class Executor(Protocol):
    def map(self, fn: Callable[[Job], BenchRow], jobs: list[Job]) -> Iterator[BenchRow]:
        """Results as jobs finish (any order)."""
        ...

    def close(self) -> None: ...


def _gpu_count() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    try:
        import torch

        return int(torch.cuda.device_count())
    except Exception:  # no torch or no driver: no GPUs
        return 0


def _pin(slots: Any) -> None:
    """Pool initializer: take a GPU id for this worker's lifetime."""
    os.environ["CUDA_VISIBLE_DEVICES"] = str(slots.get())


def _run(fn: Callable[[Job], BenchRow], job: Job) -> BenchRow:
    os.environ.update(job.env)
    return fn(job)


class LocalExecutor:
    def __init__(self, device: str, workers: int | None, per_gpu: int = 1) -> None:
        ctx = mp.get_context("spawn")  # torch and CUDA do not survive fork
        gpus = _gpu_count() if device == "cuda" else 0
        if device == "cuda" and gpus == 0:
            raise UsageError("--device cuda: no GPU visible to the bench executor")
        # Several workers may share a GPU: correctness and compiles share it, timing holds it
        # alone (gate/gpulock.py), so one worker's timing never overlaps another's GPU work.
        n = workers or (gpus * per_gpu if device == "cuda" else 1)
        init: dict[str, Any] = {}
        if device == "cuda":
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            ids = (
                [d.strip() for d in visible.split(",")]
                if visible
                else [str(i) for i in range(gpus)]
            )
            slots = ctx.Manager().Queue()
            for k in range(n):
                slots.put(ids[k % len(ids)])
            init = {"initializer": _pin, "initargs": (slots,)}
        self.pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx, **init)
        self.workers = n

    def map(self, fn: Callable[[Job], BenchRow], jobs: list[Job]) -> Iterator[BenchRow]:
        pending: dict[Future[BenchRow], Job] = {self.pool.submit(_run, fn, j): j for j in jobs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                job = pending.pop(f)
                try:
                    yield f.result()
                except Exception as e:  # a worker died: the row says so, the bench goes on
                    yield _failed(job, f"worker failed: {type(e).__name__}: {e}")

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


class RayExecutor:
    def __init__(self, device: str, address: str | None, per_gpu: int = 1) -> None:
        try:
            import ray
        except ImportError as e:
            raise UsageError(
                "--executor ray needs the ray extra: pip install 'klineage[ray]'"
            ) from e
        self.ray = ray
        if not ray.is_initialized():
            try:
                ray.init(
                    address=address,
                    include_dashboard=False,
                    log_to_driver=False,
                    ignore_reinit_error=True,
                )
            except ConnectionError as e:
                raise UsageError(
                    f"--address {address}: cannot connect to a Ray cluster ({e})"
                ) from e
        self.gpus = 1.0 / per_gpu if device == "cuda" else 0.0

    def map(self, fn: Callable[[Job], BenchRow], jobs: list[Job]) -> Iterator[BenchRow]:
        remote = self.ray.remote(num_gpus=self.gpus, max_retries=0)(_run)
        refs = {remote.remote(fn, j): j for j in jobs}
        while refs:
            done, _ = self.ray.wait(list(refs), num_returns=1)
            for ref in done:
                job = refs.pop(ref)
                try:
                    yield self.ray.get(ref)
                except Exception as e:
                    yield _failed(job, f"ray task failed: {type(e).__name__}: {str(e)[:300]}")

    def close(self) -> None:
        pass  # the cluster (or the local instance) outlives the bench; ray.shutdown() is the caller's


def make_executor(
    kind: str,
    *,
    device: str,
    workers: int | None = None,
    address: str | None = None,
    per_gpu: int = 1,
) -> Executor:
    if kind == "local":
        return LocalExecutor(device, workers, per_gpu)
    if kind == "ray":
        return RayExecutor(device, address, per_gpu)
    raise UsageError(f"--executor {kind}: expected local or ray")
