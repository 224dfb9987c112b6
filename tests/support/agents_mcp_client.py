"""openai-agents' own MCP servers, as an agent holds them: `python agents_mcp_client.py http URL TOOL JSON_ARGS`
(`MCPServerStreamableHttp`) or `python agents_mcp_client.py stdio COMMAND... -- TOOL JSON_ARGS` (the last `--`)
(`MCPServerStdio`); lists the tools, calls the tool, prints {"tools", "text"} as JSON. No model call: the tools
are what is recorded."""

from __future__ import annotations

import asyncio
import json
import sys

from agents.mcp import MCPServerStdio, MCPServerStreamableHttp


async def main(argv: list[str]) -> dict:
    kind, rest = argv[0], argv[1:]
    if kind == "http":
        server = MCPServerStreamableHttp(params={"url": rest[0]}, client_session_timeout_seconds=30)
        tool, arguments = rest[1], rest[2]
    else:
        split = len(rest) - 1 - rest[::-1].index("--")  # the last: the server command may hold its own
        command, (tool, arguments) = rest[:split], rest[split + 1 :]
        server = MCPServerStdio(params={"command": command[0], "args": command[1:]}, client_session_timeout_seconds=30)
    async with server:
        tools = await server.list_tools()
        result = await server.call_tool(tool, json.loads(arguments))
    text = "".join(getattr(block, "text", "") for block in result.content)
    return {"tools": sorted(t.name for t in tools), "text": text, "is_error": bool(result.is_error)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1:]))))
