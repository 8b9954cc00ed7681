"""Optimize a kernel with skills: materialize one at a time, gate, keep what is correct and faster."""

from klineage.optimize.loop import OptimizeRefused, Settings, optimize
from klineage.optimize.policies import POLICIES, Proposal, get_policy, register_policy

__all__ = [
    "POLICIES",
    "OptimizeRefused",
    "Proposal",
    "Settings",
    "get_policy",
    "optimize",
    "register_policy",
]
