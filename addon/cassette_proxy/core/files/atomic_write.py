"""How every file of ours is written: whole or not at all, even when the writer is killed halfway."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

STALE_TEMP_SECONDS = 60
"""A temp file older than this was left by a killed writer; younger ones may belong to a live proxy sharing the folder."""


def _written_beside(path: Path, data: bytes, mode: int) -> str:
    """`data` in a new temp file in `path`'s folder, on disk (fsync) with `mode`: what either write then names."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write through a temp file in the same folder and rename: readers see the old file or the new, never a torn one."""
    tmp = _written_beside(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_new(path: Path, data: bytes, mode: int = 0o644) -> bool:
    """Write `path` whole, only if no file is there: False, and nothing written, when another writer (another
    proxy sharing the folder) got there first. Hard-linked from the temp file, which fails when the name is taken."""
    tmp = _written_beside(path, data, mode)
    try:
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: a rename, after a last look
            if path.exists():
                return False
            os.replace(tmp, path)
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)


def remove_stale_temp_files(root: Path, now: float | None = None) -> list[Path]:
    """Delete the `.<name>.*.tmp` files a killed writer left behind; lookups never read them anyway."""
    now = time.time() if now is None else now
    removed = []
    # `.bin`: a session's sidecar (session_file.py), written the same way.
    temps = [*root.rglob(".*.json.*.tmp"), *root.rglob(".*.bin.*.tmp")] if root.is_dir() else []
    for tmp in temps:
        try:
            if now - tmp.stat().st_mtime > STALE_TEMP_SECONDS:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            continue
    return removed
