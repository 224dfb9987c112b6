"""One MCP conversation with the `mcp` SDK's own client over streamable HTTP, as a user's code holds one:
`python mcp_client.py URL [TOOL JSON_ARGS]...` lists the tools, calls each given tool, and prints
{"tools": [...], "calls": [{"text", "error"}...]} as JSON. The proxy is reached through HTTPS_PROXY/HTTP_PROXY."""

from __future__ import annotations

import asyncio
import json
import sys

from mcp import Client


async def main(url: str, calls: list[str]) -> dict:
    results = []
    async with Client(url, mode="legacy") as client:
        tools = await client.list_tools()
        for name, arguments in zip(calls[::2], calls[1::2], strict=True):
            try:
                result = await client.call_tool(name, json.loads(arguments))
            except Exception as e:  # the error a caller sees, e.g. a cassette miss as a JSON-RPC error
                results.append({"error": f"{type(e).__name__}: {e}"})
                continue
            text = "".join(getattr(block, "text", "") for block in result.content)
            results.append({"text": text, "is_error": result.is_error})
    return {"tools": sorted(tool.name for tool in tools.tools), "calls": results}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2:]))))
