"""Write synthetic flows for mitmproxy's `--server-replay`: the same interactions as the synthetic cassettes.

Runs in the proxy environment (it needs mitmproxy):
    python benchmarks/make_flows.py OUT PORT FIRST COUNT    (appends flows FIRST .. FIRST+COUNT-1 to OUT)
"""

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent / "tests" / "support")]

from mitmproxy import http, io  # noqa: E402
from mitmproxy.test import tflow  # noqa: E402
from workload import CHAT_PATH, answer_of, request_headers, synthetic_body  # noqa: E402


def main() -> None:
    out, port, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    with open(out, "ab") as f:
        writer = io.FlowWriter(f)
        for i in range(first, first + count):
            body = synthetic_body(i)
            headers = request_headers("127.0.0.1", port, body)
            request = http.Request.make("POST", f"http://127.0.0.1:{port}{CHAT_PATH}", body, headers)
            response = http.Response.make(200, json.dumps(answer_of(body)), {"content-type": "application/json"})
            writer.add(tflow.tflow(req=request, resp=response))


if __name__ == "__main__":
    main()
