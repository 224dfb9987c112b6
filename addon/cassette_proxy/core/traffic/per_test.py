"""Per-test recordings: which test a request belongs to, and where a test's own recordings live.

Two scopes. `shared` (the default): one recording per distinct request, wherever
it came from, under `<cassette_dir>/<host>/<path>/<key>.json` (location.py).
`test`: a test's recordings under its own folder,
`<cassette_dir>/tests/<module path>/<test name>/<host>/<path>/<key>.json`, so that
identical requests of different tests keep their own answers. A renamed test
finds nothing under its new folder: its misses name the scope and the folder.

A test is named by its runner's id: pytest's node id (`tests/test_app.py::TestX::test_y[1]`,
the part before `::` is the module path) or any string another runner sends
(`summarize returns the answer`: no module part). Every segment is made safe like
the endpoint folders are, so no test name can leave the cassette folder.
"""

from __future__ import annotations

import functools
import hashlib
import re

SCOPES = ("shared", "test")
DEFAULT_SCOPE = "shared"

TESTS_DIR = "tests"
"""The folder under the cassette folder that holds the test-scoped recordings."""

NO_TEST = "<no test>"
"""How the report names requests made outside any test (session fixtures, collection)."""

_SAFE_SEGMENT = re.compile(r"[^A-Za-z0-9._-]+")
MAX_SEGMENT = 120
"""File systems cap a name at 255 bytes; a long parametrized id is cut, with a hash to keep it distinct."""


def _segment(text: str) -> str:
    safe = _SAFE_SEGMENT.sub("_", text).strip("._") or "_"
    if len(safe) > MAX_SEGMENT:
        safe = f"{safe[: MAX_SEGMENT - 9]}_{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return safe


@functools.lru_cache(maxsize=4096)
def folder_of_test(test_id: str) -> str:
    """`tests/<module path>/<test name>`, `/`-separated, relative to the cassette folder.

    `tests/test_app.py::TestChat::test_reply[gpt-4o]` → `tests/tests/test_app.py/TestChat.test_reply_gpt-4o`.
    """
    module, sep, name = test_id.partition("::")
    if not sep:
        module, name = "", test_id
    module_parts = [_segment(part) for part in module.replace("\\", "/").split("/") if part.strip("./")]
    name = _segment(name.replace("::", "."))
    return "/".join([TESTS_DIR, *module_parts, name])


def scoped_name(relative: str, test_id: str | None, scope: str) -> str:
    """A cassette's relative name under the given scope; outside any test every request is shared."""
    if scope == "test" and test_id is not None:
        return f"{folder_of_test(test_id)}/{relative}"
    return relative
