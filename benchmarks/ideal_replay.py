"""The least any replay through mitmproxy can do: answer from an in-memory table of the exact request bytes.

    mitmdump -s benchmarks/ideal_replay.py --set ideal_record=TABLE -s tests/support/upstream_redirect.py ...
    mitmdump -s benchmarks/ideal_replay.py --set ideal_table=TABLE

With `ideal_record`, requests go upstream and every answer is kept under (method, host, path, query, the SHA-256
of the body as sent), written to TABLE (JSON) on shutdown. With `ideal_table`, the table is read once, at start,
before the proxy takes a connection, and each request is answered by one dictionary lookup with the recorded
status, headers and body bytes: no file read, no parse, no canonical key, no redaction, no report. A request not
in the table is answered 404, so a suite that does not replay whole fails its own assertions.

`vcr_suite.py` runs whole suites through it, warm (started before the rounds): what a forward or reverse route
through mitmproxy costs with a replay that costs nothing, the bound under every route of ours.
"""

import base64
import hashlib
import json
import time
from pathlib import Path

from mitmproxy import ctx, http

DROPPED = {b"transfer-encoding", b"content-length", b"connection", b"keep-alive"}
"""Framing headers of the recorded answer: the replayed body is whole, so it gets a content-length of its own."""


def key(request: http.Request) -> str:
    digest = hashlib.sha256(request.raw_content or b"").hexdigest()
    return f"{request.method} {request.host} {request.path} {digest}"


class IdealReplay:
    def __init__(self) -> None:
        self.table: dict[str, tuple[int, bytes, tuple[tuple[bytes, bytes], ...], bytes]] = {}
        self.recorded: dict[str, dict] = {}

    def load(self, loader) -> None:
        loader.add_option("ideal_table", str, "", "The table to answer from (JSON, as ideal_record writes it).")
        loader.add_option("ideal_record", str, "", "Forward, and write every answer to this table on shutdown.")
        loader.add_option("ideal_ready", str, "", "A file written once the listeners are up.")

    def configure(self, updated: set[str]) -> None:
        if "ideal_table" in updated and ctx.options.ideal_table:
            for k, row in json.loads(Path(ctx.options.ideal_table).read_text()).items():
                body = base64.b64decode(row["body"])
                fields = [(name.encode(), value.encode()) for name, value in row["headers"]]
                fields = [f for f in fields if f[0].lower() not in DROPPED]
                fields.append((b"content-length", str(len(body)).encode()))
                self.table[k] = row["status"], row["reason"].encode(), tuple(fields), body

    def running(self) -> None:  # after mitmproxy's own servers listen: they come first in the chain
        if ctx.options.ideal_ready:
            ready = Path(ctx.options.ideal_ready)
            ready.with_suffix(".tmp").write_text(json.dumps({"answers": len(self.table)}))
            ready.with_suffix(".tmp").replace(ready)

    def request(self, flow: http.HTTPFlow) -> None:
        flow.metadata["ideal_key"] = key(flow.request)  # before upstream_redirect.py changes the host
        if ctx.options.ideal_record:
            return
        status, reason, fields, body = self.table.get(flow.metadata["ideal_key"], (404, b"Not Found", (), b""))
        now = time.time()
        flow.response = http.Response(b"HTTP/1.1", status, reason, fields, body, None, now, now)

    def response(self, flow: http.HTTPFlow) -> None:
        if ctx.options.ideal_record and flow.response is not None:
            self.recorded[flow.metadata["ideal_key"]] = {
                "status": flow.response.status_code,
                "reason": flow.response.reason,
                "headers": list(flow.response.headers.items(multi=True)),
                "body": base64.b64encode(flow.response.raw_content or b"").decode(),
            }

    def done(self) -> None:
        if ctx.options.ideal_record:
            Path(ctx.options.ideal_record).write_text(json.dumps(self.recorded, indent=1))


addons = [IdealReplay()]
