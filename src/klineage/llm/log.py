"""Log every prompt and reply (JSON lines) so an LLM run can be audited and replayed."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

from klineage.llm.base import Completion, Limits, LLMBackend, LLMError, Message


class LoggedBackend(LLMBackend):
    def __init__(self, inner: LLMBackend, path: Path) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def reply(self, messages: list[Message], limits: Limits) -> Completion:
        t0 = time.time()
        entry: dict[str, object] = {
            "backend": self.name,
            "time": t0,
            "messages": [asdict(m) for m in messages],
        }
        try:
            c = self.inner.complete(
                messages,
                max_tokens=limits.max_tokens,
                temperature=limits.temperature,
                timeout_s=limits.timeout_s,
            )
        except LLMError as e:
            entry.update(error=str(e), seconds=time.time() - t0)
            self._write(entry)
            raise
        entry.update(
            reply=c.text,
            model=c.model,
            tokens_in=c.tokens_in,
            tokens_out=c.tokens_out,
            seconds=time.time() - t0,
        )
        self._write(entry)
        return c

    def _write(self, entry: dict[str, object]) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")


def replay(path: Path) -> list[str]:
    """The replies of a logged run, in order (queue them on a ScriptedBackend to replay it)."""
    return [
        json.loads(line)["reply"]
        for line in Path(path).read_text(encoding="utf-8").splitlines()
        if '"reply"' in line
    ]
