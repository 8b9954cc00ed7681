"""An LLM-proposed simplification: the backward walk's optional extra pass.

Registered passes know fifteen optimizations; an expert may hold others. With `--llm`, the walk
also asks the LLM, at each node, to remove exactly one optimization it sees (and to name it),
keeping the meaning. The gate judges the reply like any other candidate, so a wrong removal is
a recorded rejection, not a lineage step. The pass is not in the registry (it needs a backend),
and it has no forward rewrite: skills from its steps are materialized by an LLM (their card
holds the expert's diff).
"""

from __future__ import annotations

import re

from klineage.llm.base import LLMBackend, LLMError, Message
from klineage.optimize.materialize import extract_code
from klineage.rewrite.base import RewritePass, RewriteResult, Site

NAME = "llm_simplify"

PROMPT = """You simplify expert Triton GPU kernels, one optimization at a time, for a study of which optimizations matter.

Remove exactly ONE performance optimization from the kernel file below (for example: a tuning table, software pipelining, a vectorization or cache hint, an exp2 trick, a fast path, multiple rows per program, a persistent loop, an autotuned block size). Keep the result correct for every input the original accepts: same class ModelNew, same constructor, same outputs. Do not remove anything needed for correctness.

Answer with one line `REMOVED: <short name>: <one sentence on what it did>`, then the complete new file in one ```python code block. If no optimization is left to remove, answer `NONE` only.

Already removed in earlier steps (do not reintroduce them): {removed}

```python
{source}
```
"""

_REMOVED = re.compile(r"^\s*REMOVED:\s*([^:\n]+?)\s*:\s*(.+)$", re.MULTILINE)


class LLMSimplifyPass(RewritePass):
    NAME = NAME
    DESCRIPTION = "An optimization named by an LLM and removed by it, kept because the gate accepted the simpler kernel."
    CATEGORY = "llm"
    ANCHOR = "any optimization an LLM can name in the kernel"

    def __init__(self, backend: LLMBackend, *, timeout_s: float = 300.0) -> None:
        self.backend, self.timeout_s = backend, timeout_s
        self.removed: list[str] = []
        self.tokens = 0

    def backward_sites(self, source: str) -> list[Site]:
        return [self.site("backward", 0, 1, "", "an optimization the LLM names")]

    def simplify(self, source: str, site: Site) -> RewriteResult:
        prompt = PROMPT.format(removed=", ".join(self.removed) or "none", source=source)
        try:
            c = self.backend.complete([Message("user", prompt)], timeout_s=self.timeout_s)
        except LLMError as e:
            return RewriteResult.skip(f"LLM error: {e}", site)
        self.tokens += c.tokens_in + c.tokens_out
        if c.text.strip().upper().startswith("NONE"):
            return RewriteResult.skip("the LLM sees no optimization left to remove", site)
        m = _REMOVED.search(c.text)
        code, why = extract_code(c.text)
        if code is None:
            return RewriteResult.skip(f"the LLM's reply has no usable file: {why}", site)
        name = m.group(1).strip() if m else "unnamed"
        sentence = m.group(2).strip() if m else "the LLM did not say"
        self.removed.append(name)
        return RewriteResult(True, f"LLM removed {name}: {sentence}", code, site)


def removed_name(reason: str) -> str:
    """The optimization an llm_simplify step removed, from its recorded reason."""
    m = re.match(r"LLM removed ([^:]+):", reason or "")
    return m.group(1).strip() if m else "unnamed"
