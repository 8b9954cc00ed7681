"""Remembered sites (rewrite/memo.py): the same answers as computing them, as the caller's own
copies, and computed once per pass and source."""

from __future__ import annotations

from pathlib import Path

from klineage.rewrite import memo
from klineage.rewrite.base import RewritePass, RewriteResult, Site
from klineage.rewrite.registry import all_passes

NAIVE = Path(__file__).resolve().parents[3] / "src/klineage/heldout/gemv/naive.py"


class _Counting(RewritePass):
    NAME = "_counting"
    DESCRIPTION = ANCHOR = CATEGORY = "test"
    calls = 0

    def backward_sites(self, source: str) -> list[Site]:
        type(self).calls += 1
        return [self.site("backward", 0, 1, "", "x", values=[1, 2])]

    def simplify(self, source: str, site: Site) -> RewriteResult:
        return RewriteResult.skip("test")


def test_sites_are_computed_once_per_source_and_each_caller_gets_its_own_copy() -> None:
    memo.clear()
    _Counting.calls = 0
    first = _Counting().backward_sites("a = 1\n")
    first[0].params["values"].append(3)  # a caller changing its copy
    again = _Counting().backward_sites("a = 1\n")
    assert _Counting.calls == 1
    assert again[0].params["values"] == [1, 2]
    _Counting().backward_sites("a = 2\n")
    assert _Counting.calls == 2


def _all_sites(source: str) -> dict[str, list[tuple[Site, dict[str, object]]]]:
    # Site equality leaves params out: compare them too
    return {
        n: [(s, s.params) for s in p.backward_sites(source) + p.forward_sites(source)]
        for n, p in all_passes().items()
    }


def test_remembered_sites_equal_computed_ones() -> None:
    source = NAIVE.read_text()
    before = memo.set_enabled(False)
    try:
        computed = _all_sites(source)
    finally:
        memo.set_enabled(before)
    memo.clear()
    for _ in range(2):  # cold, then from memory
        got = _all_sites(source)
        assert got == computed
        assert any(got.values())


def test_identity_memo_computes_per_object_not_per_equal_value() -> None:
    seen: list[object] = []
    m = memo.IdentityMemo(lambda k: seen.append(k) or len(seen), size=2)
    a, b = [1], [1]
    assert m(a) == 1 and m(a) == 1 and m(b) == 2
    m([2])  # evicts a (size 2)
    assert m(a) == 4
