"""Reading a file we did not write, bounded: inside its folder, no symlink out, no FIFO or device, at most
so many bytes; and the one error a file we cannot use raises."""

from __future__ import annotations

import errno
import functools
import os
import stat
from pathlib import Path


class CassetteError(Exception):
    """A cassette file exists but cannot be used; the message names the file and the problem."""

    def __init__(self, path: Path | str, problem: str):
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


DEFAULT_MAX_SIZE = 256 * 1024 * 1024
"""The largest cassette file read (the `cassette_max_size` option): far above any real LLM response (a long
stream is a few MB), far below what a file meant to exhaust memory needs."""


def read_limited(path: Path | str, root: Path | None = None, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """A cassette file's bytes, refused (CassetteError) unless it is a regular file of at most `max_size` bytes
    that resolves inside `root` (when given); FileNotFoundError if absent.

    A cassette arrives in a pull request: a symlink to `/etc/passwd` or to
    `/dev/zero`, or a fifo, must not be read. The checks are made on the open
    file (`fstat`), so the file cannot be swapped between check and read.
    """
    real_root = _real_folder(_absolute(str(root))) if root is not None else None
    folder, name = os.path.split(str(path))
    resolved = os.path.join(_real_folder(_absolute(folder)), name)
    _check_inside(path, resolved, real_root)
    try:
        # O_NOFOLLOW: a symlink as the file itself fails with ELOOP, and only then is it resolved and checked (the
        # common case costs no `lstat`); its folder is real already (`_real_folder`).
        fd = _open(path, resolved)
    except OSError as e:
        if e.errno != errno.ELOOP:
            raise
        resolved = os.path.realpath(resolved)
        _check_inside(path, resolved, real_root)
        fd = _open(path, resolved)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise CassetteError(
                path, f"is not a regular file ({_file_kind(status.st_mode)}); a cassette is a JSON file"
            )
        if status.st_size > max_size:
            problem = f"is {status.st_size} bytes, over the cassette_max_size limit of {max_size} bytes"
            raise CassetteError(path, f"{problem}; raise the limit if the recording is genuine")
        # One read asks one byte more than the file's size: a shorter answer is the whole file.
        raw = os.read(fd, status.st_size + 1)
        if len(raw) > status.st_size:  # it grew since fstat: read on, up to the limit
            chunks, left = [raw], max_size + 1 - len(raw)
            while left > 0 and (chunk := os.read(fd, left)):
                chunks.append(chunk)
                left -= len(chunk)
            raw = b"".join(chunks)
    finally:
        os.close(fd)
    if len(raw) > max_size:
        raise CassetteError(path, f"grew past the cassette_max_size limit of {max_size} bytes while being read")
    return raw


def folder_for(path: Path | str, folder: Path | str) -> Path:
    """The folder a cassette named on a command line must resolve inside (`root` of `read_limited` and `load`): the
    cassette folder when the path lies in it, else the file's own folder, so a symlink cannot lead out of either."""
    absolute, base = Path(os.path.abspath(path)), Path(os.path.abspath(folder))
    return base if absolute.is_relative_to(base) else absolute.parent


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _open(path: Path | str, resolved: str) -> int:
    """The file's descriptor; FileNotFoundError if absent, OSError(ELOOP) if it is a symlink, else CassetteError."""
    try:
        return os.open(resolved, _OPEN_FLAGS)
    except OSError as e:
        if isinstance(e, FileNotFoundError) or e.errno == errno.ELOOP:
            raise
        raise CassetteError(path, f"cannot be opened: {e.strerror or e}") from None


def _check_inside(path: Path | str, resolved: str, real_root: str | None) -> None:
    if real_root is not None and resolved != real_root and not resolved.startswith(real_root + os.sep):
        problem = f"resolves to {resolved}, outside the cassette folder {real_root}"
        raise CassetteError(path, f"{problem}; a cassette may be a symlink only to a file inside the folder")


def _absolute(folder: str) -> str:
    """The folder as an absolute path (the proxy's already are): a relative one names another folder after a
    `chdir`, and `_real_folder` must not answer for it from its cache."""
    return folder if os.path.isabs(folder) else os.path.abspath(folder)


_real_folder = functools.lru_cache(maxsize=4096)(os.path.realpath)
"""The real path of a folder, resolved once per run: `realpath` costs a syscall per path component, and every
first sight of a cassette asks it. A folder made a symlink while the proxy runs is not a pull request's doing."""


_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a fifo"),
    (stat.S_ISSOCK, "a socket"),
)


def _file_kind(mode: int) -> str:
    return next((name for is_kind, name in _FILE_KINDS if is_kind(mode)), "not a regular file")
