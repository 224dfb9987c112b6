"""The `cassette run` around a process whose environment was stripped: the variables it exported, found in an
ancestor's environment, and the reports its stdio servers leave for it.

The MCP SDKs start a stdio server with only a few variables (`HOME`, `PATH`, `USER`, …: the `mcp` package's
`DEFAULT_INHERITED_ENV_VARS`, the TypeScript SDK's `getDefaultEnvironment()`), so `cassette mcp` started by an
MCP client inside `cassette run` does not see what the run exported. The client itself does: on Linux its
environment is readable (`/proc/<pid>/environ`, the same user's), so `cassette mcp` reads the run's variables
from the nearest ancestor that has them. Elsewhere the client must pass them (`env=` of its server
parameters). `cassette run` gives its stdio servers a folder for their reports (`CASSETTE_MCP_REPORTS`) and
adds their counts to its own.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core.report import Report, ReportError

REPORTS_VAR = "CASSETTE_MCP_REPORTS"
MAX_ANCESTORS = 32


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # the command name, in parentheses, may hold spaces
    return int(fields[1]) if len(fields) > 1 else None


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (entry.split(b"=", 1) for entry in raw.split(b"\0") if b"=" in entry)
    return {name.decode("utf-8", "replace"): value.decode("utf-8", "replace") for name, value in pairs}


def run_environ(environ: Mapping[str, str], names: Sequence[str]) -> dict[str, str]:
    """`names` from `environ`, or else from the nearest ancestor process whose environment holds the first."""
    if environ.get(names[0]):
        return {name: environ[name] for name in names if name in environ}
    pid = os.getppid()
    for _ in range(MAX_ANCESTORS):
        if pid <= 1:
            break
        found = _environ(pid)
        if found.get(names[0]):
            return {name: found[name] for name in names if name in found}
        parent = _parent(pid)
        if parent is None:
            break
        pid = parent
    return {}


class StdioReports:
    """The folder a run's `cassette mcp` processes write their reports to, and their counts added to the run's."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="cassette-mcp-reports-"))

    @property
    def env(self) -> dict[str, str]:
        return {REPORTS_VAR: str(self.folder)}

    def merged(self, report: Report | None, keep: Path | None) -> Report | None:
        """The run's report with every stdio server's counts added (written again to `keep`, the user's
        `--report`, when there were any); the folder is removed."""
        try:
            found = []
            for path in sorted(self.folder.glob("mcp-*.json")):
                try:
                    found.append(Report.read(path))
                except ReportError as e:  # a server killed mid-write leaves none; a broken one is said
                    print(f"cassette: a stdio MCP server's report was left out: {e}", file=sys.stderr)
            if not found:
                return report
            total = Report.merged([report, *found] if report is not None else found)
            if keep is not None:
                total.write(keep)
            return total
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
