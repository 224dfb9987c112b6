"""The fake upstream with a realistic pace: streamed chat completions take 300 ms to the first byte, then 30 events over 1 s.

    python benchmarks/slow_upstream.py --ready-file F

Everything else (the ready file, non-streamed answers, the stats endpoint) is
tests/support/fake_upstream.py, which this extends.
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "support"))

import fake_upstream

FIRST_BYTE_SECONDS = 0.3
EVENTS = 30
STREAM_SECONDS = 1.0


class PacedHandler(fake_upstream.Handler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        body = json.loads(raw) if raw else {}
        if not (self.path.endswith("/chat/completions") and body.get("stream")):
            self.handle_api(raw)
            return
        with fake_upstream.State.lock:
            fake_upstream.State.count += 1
        time.sleep(FIRST_BYTE_SECONDS)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        words = f"echo: {fake_upstream.last_user_text(body)}".split() or ["echo"]
        for i in range(EVENTS):
            chunk = {
                "id": "chatcmpl-paced",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": body.get("model", "gpt-fake"),
                "choices": [{"index": 0, "delta": {"content": words[i % len(words)] + " "}, "finish_reason": None}],
            }
            self.send_chunk(f"data: {json.dumps(chunk)}\n\n")
            time.sleep(STREAM_SECONDS / EVENTS)
        self.send_chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def send_chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


if __name__ == "__main__":
    fake_upstream.Handler = PacedHandler
    fake_upstream.main()
