"""A minimal MCP-shaped stdio server for `cassette mcp`'s tests: newline-delimited JSON-RPC on stdin/stdout.

`python stdio_echo_server.py LOG [--silent-for METHOD]`: appends every line it reads to LOG (after a
`started <pid>` line, so a replay that never starts it leaves none), answers each request with a progress
notification then `{"result": {"echo": params, "pid": pid}}`, and never answers the method given to `--silent-for`."""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    log_path = sys.argv[1]
    silent = sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--silent-for" else None
    with open(log_path, "a") as log:
        log.write(f"started {os.getpid()}\n")
        log.flush()
        for line in sys.stdin:
            log.write(line)
            log.flush()
            message = json.loads(line)
            if "id" not in message or "method" not in message or message["method"] == silent:
                continue
            progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
            answer = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "result": {"echo": message.get("params"), "pid": os.getpid()},
            }
            sys.stdout.write(json.dumps(progress) + "\n" + json.dumps(answer) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
