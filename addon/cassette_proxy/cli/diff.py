"""`cassette diff [REV]`: review a re-record like code: which requests are new, removed or re-recorded, and for
re-recorded ones what the model now answers differently (status, model, finish reason, content).

A bulk re-record touches hundreds of JSON files whose ids and timestamps all
change; the behaviour changes hide among them. This reads each changed cassette
against the git revision and reports only what a reviewer needs. Exits 1 when a
re-recorded response changed behaviour, so CI can ask for a human look.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..core.defaults import default_dir
from ..core.files.cassette_file import load, parse
from ..core.files.safe_read import DEFAULT_MAX_SIZE, CassetteError, folder_for
from ..core.files.session_file import is_session
from ..core.reading.diff import differences
from ..core.reading.session_conversation import client_message_changes, session_summary
from ..core.reading.summary import (
    RequestSummary,
    ResponseSummary,
    fence,
    one_line,
    summarize_request,
    summarize_response,
)
from . import add_command

BEHAVIOUR = ("status", "model", "finish_reason", "content")
INLINE = 100
"""Content up to this length, on one line, is shown as `old → new`; longer content as a line diff."""
MAX_DIFF_LINES = 40


class GitError(Exception):
    pass


@dataclass
class Entry:
    kind: str  # new, removed, re-recorded
    path: str
    request: RequestSummary
    response: ResponseSummary | None = None
    changes: list[tuple[str, str, str]] = field(default_factory=list)
    """(field, old, new) for the behaviour fields that changed."""
    other: list[str] = field(default_factory=list)
    """Field-level differences elsewhere in the response, shown when behaviour did not change."""
    problem: str = ""
    """Why the cassette (`unreadable`) was not read: it failed the checks every cassette read goes through."""


def git(*args: str) -> str:
    return git_bytes(*args).decode("utf-8", "surrogateescape")


def git_bytes(*args: str) -> bytes:
    # Literal pathspecs: a file named `*.json` in a pull request names itself, not every cassette.
    done = subprocess.run(["git", "--literal-pathspecs", *args], capture_output=True, check=False)
    if done.returncode:
        raise GitError(done.stderr.decode(errors="replace").strip() or f"git {' '.join(args)} failed")
    return done.stdout


def changed_files(rev: str, folder: Path) -> list[tuple[str, str]]:
    """(status A/D/M, path relative to the current folder) of cassette files changed against rev, untracked included."""
    out = git("diff", "--name-status", "--no-renames", "--relative", "-z", rev, "--", str(folder)).split("\0")
    changed = [(status[0], path) for status, path in zip(out[::2], out[1::2], strict=False) if path]
    untracked = git("ls-files", "--others", "--exclude-standard", "-z", "--", str(folder)).split("\0")
    changed += [("A", path) for path in untracked if path]
    return sorted((status, path) for status, path in changed if path.endswith(".json"))


def old_cassette(rev: str, path: str, max_size: int = DEFAULT_MAX_SIZE) -> dict:
    """The cassette as `rev` holds it, under the checks of every cassette read: a file (not a symlink, not a
    submodule) of at most `max_size` bytes, its size asked of git before its bytes are, then validated."""
    where = f"{path} at {rev}"
    listing = git_bytes("ls-tree", "-l", "-z", rev, "--", f"./{path}").split(b"\0")[0]
    if not listing:
        raise CassetteError(where, "is not in that revision")
    mode, kind, blob, size = listing.partition(b"\t")[0].decode("ascii", "replace").split()
    if mode == "120000" or kind != "blob":
        what = "a symlink" if mode == "120000" else f"a {kind}"
        raise CassetteError(where, f"is {what}, not a regular file; a cassette is a JSON file")
    if int(size) > max_size:
        raise CassetteError(where, f"is {size} bytes, over the cassette_max_size limit of {max_size} bytes")
    return parse(where, git_bytes("cat-file", "blob", blob))


def new_cassette(path: str, folder: Path, max_size: int = DEFAULT_MAX_SIZE) -> dict:
    """The cassette in the working tree: inside the folder, a regular file, size-bounded, validated."""
    return load(Path(path), folder_for(path, folder), max_size)


def response_summary(cassette: dict) -> ResponseSummary:
    """A session's answer is what the assistant said over the whole session (session_conversation.py)."""
    return session_summary(cassette) if is_session(cassette) else summarize_response(cassette.get("response", {}))


def compare(old: dict, new: dict) -> tuple[list[tuple[str, str, str]], list[str]]:
    before, after = response_summary(old), response_summary(new)
    changes = [
        (name, str(getattr(before, name)), str(getattr(after, name)))
        for name in BEHAVIOUR
        if getattr(before, name) != getattr(after, name)
    ]
    if is_session(old) or is_session(new):
        return changes, client_message_changes(old, new)
    other = [] if changes else differences(old.get("response", {}).get("body"), new.get("response", {}).get("body"))
    return changes, other


def check_revision(rev: str) -> None:
    """Raise GitError unless we are in a git repository and `rev` names one of its commits."""
    git("rev-parse", "--show-toplevel")  # outside a repository, `git diff` would compare plain files instead
    try:
        git("rev-parse", "--verify", f"{rev}^{{commit}}")
    except GitError:
        raise GitError(f"{rev!r} is not a commit of this repository") from None


def review(rev: str, folder: Path) -> list[Entry]:
    check_revision(rev)
    entries = []
    for status, path in changed_files(rev, folder):
        try:
            entries.append(_reviewed(rev, status, path, folder))
        except CassetteError as e:  # a cassette the proxy would refuse is shown with the reason, never read
            entries.append(Entry("unreadable", path, summarize_request({}), problem=str(e)))
    return entries


def _reviewed(rev: str, status: str, path: str, folder: Path) -> Entry:
    if status == "D":
        old = old_cassette(rev, path)
        return Entry("removed", path, summarize_request(old.get("request", {})))
    new = new_cassette(path, folder)
    entry = Entry(
        "new" if status == "A" else "re-recorded",
        path,
        summarize_request(new.get("request", {})),
        response_summary(new),
    )
    if status != "A":
        entry.changes, entry.other = compare(old_cassette(rev, path), new)
    return entry


def headline(rev: str, entries: list[Entry]) -> str:
    counts = {kind: sum(e.kind == kind for e in entries) for kind in ("new", "removed", "re-recorded")}
    changed = sum(bool(e.changes) for e in entries)
    unreadable = sum(e.kind == "unreadable" for e in entries)
    return (
        f"{counts['new']} new, {counts['removed']} removed, {counts['re-recorded']} re-recorded "
        f"({changed} with a behaviour change)"
        + (f", {unreadable} unreadable" if unreadable else "")
        + f" against {rev}"
    )


def quoted(text: str, limit: int = INLINE) -> str:
    return json.dumps(one_line(text, limit), ensure_ascii=False)


def describe_request(request: RequestSummary) -> str:
    parts = [f"{request.method} {request.url.split('://', 1)[-1]}"]
    parts += [request.model] if request.model else []
    parts += [quoted(request.first_user_message, 80)] if request.first_user_message else []
    return " · ".join(parts)


def describe_change(name: str, old: str, new: str) -> list[str]:
    """`field: old → new`, or a line diff when the content is long or spans lines."""
    if name != "content" or (len(old) <= INLINE and len(new) <= INLINE and "\n" not in old + new):
        return [f"{name}: {quoted(old)} → {quoted(new)}"]
    diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), "recorded", "re-recorded", lineterm="", n=1))
    cut = [f"… {len(diff) - MAX_DIFF_LINES} more lines"] if len(diff) > MAX_DIFF_LINES else []
    return [f"{name}:", *diff[:MAX_DIFF_LINES], *cut]


def details(entry: Entry) -> list[str]:
    if entry.kind == "unreadable":
        return [f"not read: {entry.problem}"]
    lines = [describe_request(entry.request)]
    if entry.kind == "new" and entry.response:
        answer = entry.response
        lines.append(
            "answer: " + " ".join(filter(None, [str(answer.status), answer.finish_reason, quoted(answer.content)]))
        )
    for name, old, new in entry.changes:
        lines += describe_change(name, old, new)
    if entry.kind == "re-recorded" and not entry.changes:
        lines.append("same behaviour; other response fields changed: " + "; ".join(entry.other[:5] or ["none"]))
    return lines


def render_text(rev: str, entries: list[Entry]) -> str:
    out = [headline(rev, entries)]
    for entry in entries:
        out += ["", f"{entry.kind:<12}{entry.path}", *(f"    {line}" for line in details(entry))]
    return "\n".join(out)


def render_markdown(rev: str, entries: list[Entry]) -> str:
    out = [f"### Cassette review: {headline(rev, entries)}"]
    for kind in ("unreadable", "re-recorded", "new", "removed"):
        chosen = sorted((e for e in entries if e.kind == kind), key=lambda e: not e.changes)
        if chosen:
            out += ["", f"#### {kind.capitalize()} ({len(chosen)})"]
        for entry in chosen:
            lines = details(entry)
            marker = " ⚠️ behaviour changed" if entry.changes else ""
            out += ["", f"- `{entry.path}`{marker}", "", f"  {fence(lines)}diff", *(f"  {line}" for line in lines)]
            out.append(f"  {fence(lines)}")
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    try:
        entries = review(args.rev, args.dir)
    except (GitError, OSError, ValueError) as e:
        print(f"cassette diff: {e}")
        return 2
    print((render_markdown if args.format == "markdown" else render_text)(args.rev, entries))
    return 1 if any(entry.changes or entry.kind == "unreadable" for entry in entries) else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "diff", __doc__)
    parser.add_argument("rev", nargs="?", default="HEAD", help="git revision to compare with (default HEAD)")
    parser.add_argument("--dir", type=Path, default=default_dir(), help="cassette folder, inside a git repository")
    parser.add_argument("--format", choices=("text", "markdown"), default="text", help="markdown: for a PR comment")
    parser.set_defaults(func=run)
