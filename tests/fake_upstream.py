"""A small fake of the LLM APIs, run as its own process behind the proxy (the test machines reach no provider).

    python tests/fake_upstream.py --ready-file F [--cert C --key K]

It listens on 127.0.0.1 on a free port, writes {"pid", "port", "scheme"} to the
ready file, and answers like OpenAI, Anthropic and Ollama do, echoing the last
user message so that a test can tell one answer from another. Every answer
carries `x-fake-count`, the number of API requests served so far; the control
endpoint `GET /__fake__/stats` reports them without counting itself.

Request headers steer it: `x-fake-status: 429` answers that status (with
`retry-after: 7` on 429), `x-fake-delay: 0.5` waits before answering.
"""

import argparse
import json
import os
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class State:
    lock = threading.Lock()
    count = 0
    log: list[dict] = []  # noqa: RUF012 - one process, one state


def last_user_text(body: dict) -> str:
    messages = body.get("messages") or []
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content)
    return str(body.get("input", body.get("prompt", "")))


def openai_chat(body: dict, text: str) -> dict:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1700000000,
        "model": body.get("model", "gpt-fake"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": len(text.split()), "total_tokens": 5 + len(text.split())},
    }


def anthropic_message(body: dict, text: str) -> dict:
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": len(text.split())},
    }


def embeddings(body: dict) -> dict:
    inputs = body.get("input")
    inputs = inputs if isinstance(inputs, list) else [inputs]
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3]} for i in range(len(inputs))
        ],
        "model": body.get("model", "embed-fake"),
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in separate writes: with Nagle's algorithm, the client's delayed ACK
    # adds 40 ms to every request on a reused connection.
    disable_nagle_algorithm = True

    def log_message(self, format, *args):  # quiet: tests read the stats endpoint instead
        pass

    def do_GET(self):
        if self.path.startswith("/__fake__/stats"):
            with State.lock:
                self.send_json(200, {"count": State.count, "log": State.log})
            return
        self.handle_api(b"")

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        self.handle_api(self.rfile.read(length))

    do_PUT = do_PATCH = do_DELETE = do_POST

    def handle_api(self, raw: bytes):
        with State.lock:
            State.count += 1
            count = State.count
            State.log.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": raw.decode("utf-8", "replace"),
                }
            )
        delay = float(self.headers.get("x-fake-delay") or 0)
        if delay:
            time.sleep(delay)
        forced = int(self.headers.get("x-fake-status") or 0)
        if forced:
            extra = {"retry-after": "7"} if forced == 429 else {}
            error = {"error": {"message": f"fake upstream error {forced}", "type": "fake_error", "code": forced}}
            self.send_json(forced, error, count, extra)
            return
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        text = f"echo: {last_user_text(body)}" if isinstance(body, dict) else "echo: ?"
        path = self.path.split("?", 1)[0]
        if path.endswith("/chat/completions"):
            self.send_json(200, openai_chat(body, text), count)
        elif path.endswith("/messages"):
            self.send_json(200, anthropic_message(body, text), count)
        elif path.endswith("/embeddings"):
            self.send_json(200, embeddings(body), count)
        else:
            self.send_json(200, {"path": path, "method": self.command, "echo": raw.decode("utf-8", "replace")}, count)

    def send_json(self, status: int, payload: dict, count: int = 0, extra: dict | None = None):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-fake-count", str(count))
        self.send_header("set-cookie", "session=fake-cookie-value")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ready-file", required=True)
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    scheme = "http"
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    ready = {"pid": os.getpid(), "port": server.server_address[1], "scheme": scheme}
    tmp = args.ready_file + ".tmp"
    with open(tmp, "w") as f:
        json.dump(ready, f)
    os.replace(tmp, args.ready_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
