"""The floor: a mitmproxy addon that answers every request with one constant response.

`mitmdump -s benchmarks/floor_addon.py` costs what mitmproxy itself costs to
answer from an addon, with no lookup at all; no replay can be cheaper. It
builds its response the cheapest way, as the cassette addon does (the
`Response` constructor with ready header fields, not `Response.make`), so
the two differ only by the lookup. With
`--set floor_status=409` (or 500) it stands in for how other tools answer a
miss: that status, without `x-should-retry`. With `--set floor_big_bytes=N`, a
request whose body names a `big-` prompt gets a ready body of N bytes instead:
what mitmproxy costs to send a big cassette's bytes, with nothing to read.
"""

import json
import time

from mitmproxy import ctx, http
from mitmproxy.net.http import status_codes

BODY = json.dumps(
    {
        "id": "chatcmpl-floor",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "echo: a constant answer of ordinary length"},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }
).encode()

ERROR_BODY = json.dumps({"error": {"message": "no recording for this request", "type": "not_found"}}).encode()


class Floor:
    def load(self, loader) -> None:
        loader.add_option("floor_status", int, 200, "The status every request is answered with.")
        loader.add_option("floor_big_bytes", int, 0, "Body size for requests naming a big- prompt (0: none).")

    def configure(self, updated: set[str]) -> None:
        status = ctx.options.floor_status
        body = BODY if status == 200 else ERROR_BODY
        fields = (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())
        self.answer = status, status_codes.RESPONSES.get(status, "").encode(), fields, body
        size = ctx.options.floor_big_bytes
        big = (b'{"data": "' + b"x" * max(0, size - 12) + b'"}')[: max(size, 0)] if size else b""
        big_fields = (b"content-type", b"application/json"), (b"content-length", str(len(big)).encode())
        self.big = (200, b"OK", big_fields, big) if size else None

    def request(self, flow: http.HTTPFlow) -> None:
        big = self.big is not None and b"Request big-" in flow.request.content
        status, reason, fields, body = self.big if big else self.answer
        now = time.time()
        flow.response = http.Response(b"HTTP/1.1", status, reason, fields, body, None, now, now)


addons = [Floor()]
