"""Golden tests for autotune_table: before/after on small snippets, forward, skips with reasons."""

from __future__ import annotations

from klineage.rewrite import get_pass

INLINE = """import triton
import triton.language as tl


@triton.autotune(
    configs=[
        # small rows
        triton.Config({"BLOCK": 256}, num_warps=4),
        # large rows
        triton.Config({"BLOCK": 1024}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def _k(X, n, BLOCK: tl.constexpr):
    pass
"""

INLINE_AFTER = """import triton
import triton.language as tl


@triton.autotune(
    configs=[
        # small rows
        triton.Config({"BLOCK": 256}, num_warps=4),
    ],
    key=["n"],
)
@triton.jit
def _k(X, n, BLOCK: tl.constexpr):
    pass
"""

SHARED = """import triton
from triton import Config, autotune

TABLE = [Config({"B": 32}, num_stages=3), Config({"B": 64}, num_stages=4)]  # two tiles


@autotune(TABLE, key=["M"], prune_configs_by={"early_config_prune": None})
@triton.jit
def first(M, B: triton.language.constexpr):
    pass


@autotune(configs=TABLE, key=["M"])
@triton.jit
def second(M, B: triton.language.constexpr):
    pass
"""

SHARED_AFTER = SHARED.replace(
    'TABLE = [Config({"B": 32}, num_stages=3), Config({"B": 64}, num_stages=4)]',
    'TABLE = [Config({"B": 32}, num_stages=3)]',
)


def test_inline_table_is_reduced_to_its_first_config() -> None:
    p = get_pass("autotune_table")
    (site,) = p.backward_sites(INLINE)
    assert (site.function, site.line) == ("_k", 5)
    assert site.params["n_configs"] == 2 and site.params["key"] == '["n"]'
    assert site.params["name"] is None
    assert site.params["configs"].startswith("[\n        # small rows")
    r = p.simplify(INLINE, site)
    assert r.applied and r.source == INLINE_AFTER
    assert p.backward_sites(INLINE_AFTER) == []


def test_a_named_table_shared_by_two_kernels_is_one_site() -> None:
    p = get_pass("autotune_table")
    (site,) = p.backward_sites(SHARED)
    assert site.function == "first" and site.params["name"] == "TABLE"
    assert "shared by first, second" in site.description
    r = p.simplify(SHARED, site)
    assert r.applied and r.source == SHARED_AFTER
    assert "prune_configs_by" in r.source  # the rest of the decorator stays


def test_forward_restores_the_experts_table() -> None:
    p = get_pass("autotune_table")
    for before in (INLINE, SHARED):
        (backward,) = p.backward_sites(before)
        simplified = p.simplify(before, backward).source
        assert simplified is not None
        site = next(s for s in p.forward_sites(simplified) if s.function == backward.function)
        r = p.apply(simplified, site, backward.params)
        assert r.applied and r.source == before


def test_forward_needs_the_list_and_skips_otherwise() -> None:
    p = get_pass("autotune_table")
    (site,) = p.forward_sites(INLINE_AFTER)
    r = p.apply(INLINE_AFTER, site)
    assert not r.applied and "needs the expert's config list" in r.reason
    r = p.apply(INLINE_AFTER, site, {"configs": "make_configs()"})
    assert not r.applied and "not a non-empty list" in r.reason
    assert p.forward_sites(INLINE) == []  # two configs already


def test_unreadable_tables_are_sites_that_skip_with_a_reason() -> None:
    p = get_pass("autotune_table")
    comprehension = INLINE.replace(
        INLINE[INLINE.index("configs=[") : INLINE.index("    key=")],
        'configs=[triton.Config({"BLOCK": b}) for b in (256, 1024)],\n',
    )
    (site,) = p.backward_sites(comprehension)
    assert "unreadable" in site.description
    r = p.simplify(comprehension, site)
    assert not r.applied and "not a literal list" in r.reason
    unbound = SHARED.replace("TABLE = [", "OTHER = [")
    r = p.simplify(unbound, p.backward_sites(unbound)[0])
    assert not r.applied and "TABLE is not bound at module level" in r.reason


def test_does_not_apply_is_a_reason_not_an_exception() -> None:
    p = get_pass("autotune_table")
    (site,) = p.backward_sites(INLINE)
    r = p.simplify(INLINE_AFTER, site)
    assert not r.applied and "nothing to reduce" in r.reason
    assert p.backward_sites("def broken(:\n") == []
    r = p.simplify("def broken(:\n", site)
    assert not r.applied and "does not parse" in r.reason
    r = p.simplify("x = 1\n", site)
    assert not r.applied and "no autotune table #0" in r.reason
