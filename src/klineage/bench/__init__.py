"""Evaluation: suites, baselines (memory-based policies), executors and `klineage bench`."""

from klineage.bench.run import DEFAULT_POLICIES, run_bench
from klineage.bench.suites import SUITES, BenchProblem, leave_one_out, suite_problems
from klineage.bench.summary import summarize

__all__ = [
    "DEFAULT_POLICIES",
    "SUITES",
    "BenchProblem",
    "leave_one_out",
    "run_bench",
    "suite_problems",
    "summarize",
]
