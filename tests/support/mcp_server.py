"""A small MCP server (the `mcp` SDK's own `MCPServer`) over streamable HTTP on a free loopback port, for the MCP
tests: `python mcp_server.py --ready-file F [--json-response] [--stateless]`, or over stdio: `--stdio [--started-file F]`
(F is created when the server starts: a replay that never starts it leaves none). Its answers carry a per-process
random mark (`run`), so a replayed answer is told apart from a live one; the ready file gives the port."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import socket

import uvicorn
from mcp.server.mcpserver import MCPServer

RUN = secrets.token_hex(4)
server = MCPServer("cassette-test-server")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return json.dumps({"sum": a + b, "run": RUN})


@server.tool()
def echo(text: str) -> str:
    """Echo a text back."""
    return json.dumps({"echo": text, "run": RUN})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready-file")
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--started-file")
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--stateless", action="store_true")
    args = parser.parse_args()
    if args.stdio:
        if args.started_file:
            with open(args.started_file, "a") as f:
                f.write(f"{os.getpid()}\n")
        server.run("stdio")
        return
    app = server.streamable_http_app(json_response=args.json_response, stateless_http=args.stateless)
    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    partial = f"{args.ready_file}.tmp"
    with open(partial, "w") as f:
        json.dump({"scheme": "http", "port": port, "pid": os.getpid()}, f)
    os.replace(partial, args.ready_file)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
