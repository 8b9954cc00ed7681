"""Materializers: turn a skill (or a bare pass) into a candidate kernel for a target.

- mechanical: the skill's executable rewrite, applied at every forward site its pass finds in
  the target, with the expert's parameters where they make sense in the target (names it
  defines) and the pass's own defaults otherwise;
- LLM: a prompt with the target kernel, the skill card (intent, anchor, conditions, failures
  to avoid, exemplar diff) and the gate's last feedback; the reply's code block is the
  candidate. A reply without a usable file is a result with a reason, never an exception.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from klineage.llm.base import LLMBackend, LLMError, Message
from klineage.rewrite import RewritePass, Site, all_passes
from klineage.skills.export import card
from klineage.skills.model import Skill

# Forward sites one mechanical application visits at most (a kernel has a handful of loads).
MAX_SITES = 12
# A site's parameters as its pass found them (rewrite.Site.params, kept with a skill's rewrite):
# what they are is the pass's own business (block sizes, names, code fragments, config tables),
# so they stay open here; the materializer drops the ones the target cannot use and hands the
# rest back to the same pass unchanged.
SiteParams = Mapping[str, object]
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BUILTINS = set(dir(builtins))
_KNOWN = {"tl", "triton", "torch", "math", "True", "False", "None", "min", "max", "int", "float"}
# Parameters that describe the expert's site (what kind of construct, where an argument sat),
# not the optimization's values: on another kernel the target's own site says these.
SITE_KEYS = {
    "kind",
    "form",
    "op",
    "tma_branch",
    "direction",
    "proven",
    "position",
    "keyword",
    "index",
    "line",
    # Where the expert's signature had its heuristic flag: in a target launched with positional
    # arguments a flag there shifts them (Triton binds heuristics' args by position), so the
    # pass's default, the end of the signature, is the only safe place.
    "param_index",
}
# A value that means something only with its name (a block size is the size of one constexpr).
_TIED = {"value": "name"}


@dataclass
class Materialized:
    """A candidate source, or why there is none. Tokens count LLM use."""

    source: str | None
    reason: str
    sites: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    reply: str | None = None
    messages: list[Message] | None = None  # the conversation, for a repair turn


def _names_in(value: Any) -> set[str]:
    """Identifiers a parameter's source text relies on: names in expressions, and quoted
    identifier-like strings (autotune config keys name the kernel's constexprs)."""
    out: set[str] = set()
    if isinstance(value, dict):
        for v in value.values():
            out |= _names_in(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            out |= _names_in(v)
    elif isinstance(value, str):
        try:
            tree = ast.parse(value.strip(), mode="eval")
        except SyntaxError:
            return out  # a plain word or description, not code
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                out.add(node.id)
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and _IDENT.fullmatch(node.value)
                and node.value.isupper()
            ):
                out.add(node.value)
    return out


def adapt_params(params: SiteParams, target: str) -> tuple[dict[str, Any], list[str]]:
    """The expert's parameters that make sense in `target`: a parameter whose code names
    something the target does not define (the expert's helper function, its constexpr names)
    is dropped, so the pass falls back to its default for the target. Returns the kept
    parameters and a note per dropped one."""
    defined = set(_IDENT.findall(target)) | _KNOWN | _BUILTINS
    kept: dict[str, Any] = {}
    notes: list[str] = []
    for k, v in params.items():
        if k in SITE_KEYS:
            continue
        missing = sorted(_names_in(v) - defined)
        if missing:
            notes.append(f"{k} dropped (uses {', '.join(missing[:3])}, not in the target)")
        else:
            kept[k] = v
    for k, owner in _TIED.items():
        if k in kept and owner in params and owner not in kept:
            del kept[k]
            notes.append(f"{k} dropped with {owner}")
    return kept, notes


def _same_site(a: Site, b: Site) -> bool:
    return a.function == b.function and a.params.get("name") == b.params.get("name")


def mechanical(
    source: str,
    pass_name: str,
    params: SiteParams | None = None,
    then: Sequence[tuple[str, SiteParams]] = (),
) -> Materialized:
    """Apply a pass forward at every site it finds in `source` (bottom-up, so the indices of
    the sites still to visit stay valid), once each; then each pass of `then` on the result,
    in order (one candidate of several rewrites)."""
    m = _mechanical(source, pass_name, params)
    for name, more in then:
        if m.source is None:
            break
        nxt = _mechanical(m.source, name, more)
        m = Materialized(nxt.source, f"{m.reason}; then {nxt.reason}", m.sites + nxt.sites)
    return m


def _mechanical(source: str, pass_name: str, params: SiteParams | None) -> Materialized:
    from klineage.optimize import dispatch

    if pass_name == dispatch.DISPATCH:  # two kernels, one file (optimize/dispatch.py)
        made, why = dispatch.materialize(source, params or {})
        return Materialized(made, why, 1 if made is not None else 0)
    p: RewritePass | None = all_passes().get(pass_name)
    if p is None:
        return Materialized(None, f"rewrite pass {pass_name!r} is not registered here")
    sites = p.forward_sites(source)
    only = (params or {}).get("kernels")
    if isinstance(only, list):  # a proposal for some kernels (a tunables table): their sites
        sites = [s for s in sites if s.params.get("kernel") in only]
    sites = sites[:MAX_SITES]
    if not sites:
        return Materialized(None, f"{pass_name}: no place to add it in the target ({p.ANCHOR})")
    kept, notes = adapt_params(params or {}, source)
    result = _apply_all(p, source, sites, kept)
    if result.source is None and kept:
        # The expert's values do not fit this code: the pass's own defaults for the target.
        notes.append("the expert's parameters did not apply; the pass's defaults were used")
        result = _apply_all(p, source, sites, {})
    note = "; ".join(notes)
    if note:
        result.reason += f" ({note})"
    return result


def _apply_all(
    p: RewritePass, source: str, sites: list[Site], params: dict[str, Any]
) -> Materialized:
    current, applied, reasons = source, 0, []
    for site in reversed(sites):
        now = p.forward_sites(current)
        match = now[site.index] if site.index < len(now) else None
        if match is None or not _same_site(match, site):
            match = next((s for s in now if _same_site(s, site) and s.line == site.line), None)
        if match is None:
            reasons.append(f"{site.key}: gone after earlier sites were rewritten")
            continue
        r = p.apply(current, match, params)
        if r.applied and r.source and r.source != current:
            current, applied = r.source, applied + 1
            reasons.append(r.reason)
        else:
            reasons.append(f"{site.key}: {r.reason}")
    if not applied:
        return Materialized(
            None, f"{p.NAME} did not apply: {reasons[0] if reasons else ''}", len(sites)
        )
    return Materialized(
        current, f"{p.NAME} at {applied}/{len(sites)} site(s): {reasons[-1]}", applied
    )


# LLM ------------------------------------------------------------------------------------------

SYSTEM = """You optimize Triton GPU kernels. You are given a PyTorch reference problem, a correct Triton kernel file for it, and one optimization skill learned from expert kernels: what it does, where it applies, when it paid off, and the mistakes that broke correctness before.

Apply that one optimization to the kernel file. Keep the module's interface: class ModelNew with the same constructor arguments as Model, same outputs. All computation must stay in Triton kernels (torch only to allocate, reshape or view). The result must stay correct on every regime listed, including sizes that are not multiples of any block size.

Reply with the complete new file in one ```python code block, and nothing after it."""


def skill_brief(skill: Skill | None, max_chars: int = 6000) -> str:
    """The skill card for a prompt: intent, anchor, conditions, failures, exemplar diff."""
    if skill is None:
        return "(no skill: improve the kernel's speed as you see fit, keeping it correct)"
    text = card(skill)
    return text if len(text) <= max_chars else text[:max_chars] + "\n... (card truncated)\n"


def build_prompt(
    problem_src: str,
    kernel_src: str,
    skill: Skill | None,
    regimes: str,
    feedback: str,
    notes: str = "",
) -> list[Message]:
    user = (
        f"## The problem (reference)\n\n```python\n{problem_src}\n```\n\n"
        f"## Regimes the gate checks\n\n{regimes}\n\n"
        f"## The kernel to optimize\n\n```python\n{kernel_src}\n```\n\n"
        f"## The skill to apply\n\n{skill_brief(skill)}\n\n"
        f"## The gate's last feedback\n\n{feedback or 'none yet'}\n"
        + (f"\n## What earlier attempts taught\n\n{notes}\n" if notes else "")
    )
    return [Message("system", SYSTEM), Message("user", user)]


_BLOCK = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(reply: str) -> tuple[str | None, str]:
    """The candidate file in a reply: the longest fenced block defining ModelNew that parses."""
    blocks = [body for lang, body in _BLOCK.findall(reply) if lang.lower() in ("", "python", "py")]
    if not blocks and "class ModelNew" in reply and "```" not in reply:
        blocks = [reply]
    with_model = [b for b in blocks if "class ModelNew" in b]
    if not with_model:
        return None, "the reply has no code block defining class ModelNew"
    code = max(with_model, key=len)
    try:
        ast.parse(code)
    except SyntaxError as e:
        return None, f"the reply's code does not parse: {e.msg} (line {e.lineno})"
    return code if code.endswith("\n") else code + "\n", "code block with class ModelNew"


class LLMMaterializer:
    def __init__(
        self, backend: LLMBackend, *, max_tokens: int = 8192, timeout_s: float = 300.0
    ) -> None:
        self.backend, self.max_tokens, self.timeout_s = backend, max_tokens, timeout_s

    def _ask(self, messages: list[Message]) -> Materialized:
        try:
            c = self.backend.complete(
                messages, max_tokens=self.max_tokens, timeout_s=self.timeout_s
            )
        except LLMError as e:
            return Materialized(None, f"LLM error: {e}", messages=messages)
        code, why = extract_code(c.text)
        return Materialized(
            code,
            why,
            0,
            c.tokens_in,
            c.tokens_out,
            c.text,
            [*messages, Message("assistant", c.text)],
        )

    def propose(
        self,
        problem_src: str,
        kernel_src: str,
        skill: Skill | None,
        regimes: str,
        feedback: str,
        notes: str = "",
    ) -> Materialized:
        return self._ask(build_prompt(problem_src, kernel_src, skill, regimes, feedback, notes))

    def repair(self, previous: Materialized, gate_message: str) -> Materialized:
        """One repair turn: the conversation so far and the gate's rejection."""
        messages = list(previous.messages or [])
        messages.append(
            Message(
                "user",
                f"The gate rejected that file:\n\n{gate_message}\n\n"
                "Fix it. Reply with the complete corrected file in one ```python code block.",
            )
        )
        return self._ask(messages)
