"""The ready file: once the proxy listens, where it listens, so a launcher that started it with `-p 0` learns its
ports (`cassette_ready_file`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ...core.files.atomic_write import write_atomic


def write_ready_file(path: Path, mode: str, servers: Any) -> None:
    """`{"pid", "mode", "listen": [{"mode", "host", "port"}, ...]}`: how a launcher learns the ports of `-p 0`."""
    listen = []
    for server in servers:
        spec = f"{server.mode.type_name}:{server.mode.data}" if server.mode.data else server.mode.type_name
        for host, port, *_ in server.listen_addrs:
            entry = {"mode": spec, "host": host, "port": port}
            if entry not in listen:  # reverse https listens on TCP and UDP alike
                listen.append(entry)
    write_atomic(path, json.dumps({"pid": os.getpid(), "mode": mode, "listen": listen}).encode())
