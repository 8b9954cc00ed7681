"""Errors klineage raises. Only the cli package turns them into exit codes; messages are for users."""

from __future__ import annotations


class KLineageError(Exception):
    """Base of every error klineage raises on purpose; the message says what to do."""


class UsageError(KLineageError):
    """A command was called with arguments that cannot work (unknown regime, bad --set)."""


class MachineError(KLineageError):
    """The machine failed a gate call (its disk filled up): no verdict on either file. Nothing
    is recorded for it, so a rerun picks up where it stopped."""


class LoadError(KLineageError):
    """A problem or candidate file cannot be loaded.

    The message names the file, the line (where there is one) and what was expected.
    """

    def __init__(
        self,
        path: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        source_line: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.path = path
        self.line = line
        self.column = column
        self.source_line = source_line
        self.expected = expected
        self.reason = message
        super().__init__(self.render())

    def render(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        if self.line is not None and self.column is not None:
            where += f":{self.column}"
        text = f"{where}: {self.reason}"
        if self.source_line is not None:
            text += f"\n    {self.source_line.rstrip()}"
            if self.column is not None:
                text += "\n    " + " " * max(self.column - 1, 0) + "^"
        if self.expected:
            text += f"\nexpected: {self.expected}"
        return text
