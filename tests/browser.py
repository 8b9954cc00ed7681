"""Load a page in headless Chromium: its DOM after load, and what the page wrote to the console.

Chromium (Debian's 156, `apt-get install -y chromium`) started with `--enable-logging=stderr`
writes every console message of the page, and every uncaught exception and CSP violation, to
stderr as one line:

    [10227:10227:1130/172217.335603:INFO:CONSOLE:2] "x", source: file:///tmp/t.html (2)
    [10227:10227:1130/172217.336941:INFO:CONSOLE:3] "Uncaught Error: boom", source: file:///tmp/t.html (3)

(`CONSOLE:<line>`; older builds wrote `CONSOLE(<line>)`). The severity is INFO whatever the
console level, so console.log cannot be told from console.error: every console message is
returned, and a page that writes none (the report has no script) must produce none.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

# [pid:tid:MMDD/HHMMSS.micros:SEVERITY:CONSOLE:line] or ...:CONSOLE(line)]
CONSOLE = re.compile(r"^\[[\d:/.]+:[A-Z]+:CONSOLE(?::\d+|\(\d+\))\] (?P<msg>.*)$")
# Any Chromium log line, or the Debian wrapper script's own complaints ("/usr/bin/chromium: 9: ...").
LOG_LINE = re.compile(r"^(\[[\d:/.]+:[A-Z]+:|\S*chromium: \d+: )")

INSTALL = "apt-get install -y chromium"


def chromium() -> str | None:
    """The Chromium binary: $KLINEAGE_CHROMIUM, else chromium or chromium-browser on PATH;
    None when there is none (or $KLINEAGE_CHROMIUM names no executable)."""
    given = os.environ.get("KLINEAGE_CHROMIUM")
    if given:
        return shutil.which(given)
    return shutil.which("chromium") or shutil.which("chromium-browser")


def console_messages(stderr: str) -> list[str]:
    """The page's console messages in Chromium's stderr; a message's extra lines stay with it."""
    out: list[str] = []
    inside = False
    for line in stderr.splitlines():
        m = CONSOLE.match(line)
        if m:
            out.append(m.group("msg"))
            inside = True
        elif LOG_LINE.match(line):
            inside = False
        elif inside:
            out[-1] += "\n" + line
    return out


def load_page(page: Path, user_data_dir: Path, timeout: float = 60) -> tuple[str, list[str]]:
    """(DOM after load, console messages) of the HTML file `page`, in a throwaway profile."""
    binary = chromium()
    if binary is None:
        raise FileNotFoundError(f"chromium not found: install it ({INSTALL})")
    cmd = [
        binary,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={user_data_dir}",
        "--dump-dom",
        Path(page).resolve().as_uri(),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout, console_messages(proc.stderr)
