"""The backward walk: from an expert kernel to simpler ones, one gated simplification at a time."""

from klineage.lineage.view import LineageView, load_view
from klineage.lineage.walk import POLICIES, distill

__all__ = ["POLICIES", "LineageView", "distill", "load_view"]
