"""Where a cassette lives: `<cassette_dir>/<host>[_<port>]/<path segments>/<key>.json`.

One folder per endpoint, so that a pull request shows which endpoint changed
and a lookup is a single `open()`. Nothing a request holds can make a path
leave the cassette folder: every segment is made safe here.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path

from ..keys.url import DEFAULT_PORTS, normal_host

_SAFE_SEGMENT = re.compile(r"[^A-Za-z0-9._-]+")
_KEY = re.compile(r"^[0-9a-f]{32}$")


MAX_SEGMENT = 200
"""File systems allow 255 bytes per name; a longer segment is shortened below that, with room to spare."""


def _segment(text: str) -> str:
    """A path segment safe on every file system; never `.` or `..`, so it cannot leave the folder.

    A segment longer than MAX_SEGMENT (a base64 id in the path, a long slug)
    becomes its first 100 safe characters, `--`, and 32 hex characters of the
    SHA-256 of the whole segment: readable, deterministic, distinct. Shorter
    segments are unchanged, so existing cassettes keep their paths.
    """
    safe = _SAFE_SEGMENT.sub("_", text).strip(".")
    if len(safe) > MAX_SEGMENT:
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        safe = f"{safe[:100]}--{digest}"
    return safe or "_"


MAX_NAME = 3000
"""The longest relative cassette name stored as it is, in bytes (every name is ASCII: `_segment` makes it so).

Linux refuses a path of 4096 bytes or more (PATH_MAX; the hit path opens the
whole path), so a longer name is shortened (`short_name`). The limit is on the
relative name alone, not on the folder plus the name, so the same request maps to
the same file on every machine, whatever the cassette folder's own path; 3000
leaves over 1000 bytes for that folder and a repeat suffix (`.2`). Shorter names
are unchanged, so existing cassettes keep their paths."""

SHORT_PREFIX = 160
"""Characters of an endpoint folder kept, readable, in front of the hash when the whole name is too long."""


def short_endpoint(endpoint: str) -> str:
    """An endpoint folder (`endpoint_dir`) too long to store: its first SHORT_PREFIX characters, `--`, and 32 hex
    characters of the SHA-256 of the whole, so that distinct endpoints stay distinct; each segment fits NAME_MAX."""
    digest = hashlib.sha256(endpoint.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return f"{endpoint[:SHORT_PREFIX].rstrip('/')}--{digest}"


def short_name(name: str) -> str:
    """`name` (`relative_name`'s `<endpoint>/<key>.json`) with its endpoint folder shortened: where a request is
    stored when its name, scoped to a test or not, is over MAX_NAME bytes."""
    endpoint, file = name.rsplit("/", 1)
    return f"{short_endpoint(endpoint)}/{file}"


def relative_name(scheme: str, host: str, port: int, path: str, key: str) -> str:
    """Where the cassette of a request lives, relative to the cassette folder, `/`-separated: the hit path
    builds one for every request, and a string join costs a fraction of a `pathlib` one."""
    if not _KEY.match(key):
        raise ValueError(f"not a cassette key: {key!r}")
    return f"{endpoint_dir(scheme, host, port, path)}/{key}.json"


@functools.lru_cache(maxsize=1024)
def endpoint_dir(scheme: str, host: str, port: int, path: str) -> str:
    """The folder of one endpoint's cassettes; cached, since a suite calls few endpoints many times."""
    host_dir = _segment(normal_host(host))
    if DEFAULT_PORTS.get(scheme) != port:
        host_dir += f"_{port}"
    segments = [_segment(s) for s in path.split("?", 1)[0].split("/") if s]
    return "/".join([host_dir, *segments])


def repeat_path(first: str, n: int) -> str:
    """The n-th recording of one request (`cassette_repeats=sequence`): `<key>.json`, then `<key>.2.json`, …"""
    return first if n == 1 else f"{first.removesuffix('.json')}.{n}.json"


def cassette_files(root: Path) -> list[Path]:
    """Every entry named like a cassette (`*.json`) under a folder, sorted, for the commands to read.

    Folders are walked without following symlinks, so a listing (and `prune
    --delete`) never leaves the folder; hidden names are skipped (temp files of an
    interrupted write, `.name.tmp`; the proxy never writes a hidden folder). Entries
    that are not regular files (a symlink, a fifo, a device) are listed all the
    same: reading goes through `cassette_file.load` or `read_limited` with the
    folder, which refuses them with the reason, so a command reports them instead
    of skipping them in silence.
    """
    found = []
    for folder, folders, names in os.walk(root):
        folders[:] = [name for name in folders if not name.startswith(".")]
        found += [Path(folder, name) for name in names if name.endswith(".json") and not name.startswith(".")]
    return sorted(found)
