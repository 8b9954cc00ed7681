"""Rewrite passes: one optimization per file, backward (remove) and forward (add)."""

from klineage.rewrite.base import RewritePass, RewriteResult, Site
from klineage.rewrite.registry import all_passes, get_pass, register

__all__ = ["RewritePass", "RewriteResult", "Site", "all_passes", "get_pass", "register"]
