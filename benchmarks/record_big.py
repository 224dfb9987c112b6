"""Recording a big answer (issue 16): what a 50 MB and a 200 MB body cost to record through the proxy.

An upstream of our own (a threaded `http.server` on 127.0.0.1) answers a request naming a `big-` prompt with
an embeddings answer of the given size, prebuilt in memory, and anything else with a small chat answer. Per
size, against mitmdump relaying the same bytes without the addon (what mitmproxy costs to pass them on):
- ours in record mode: the time until the client has the whole answer (the response waits for the cassette
  to be written, so that a failed write can be reported), the small hits another client got meanwhile (a
  cassette already on disk: they wait on the event loop, nothing else), the peak RSS of the proxy and its
  children, the cassette file's size;
- then that cassette replayed by a fresh proxy (its first replay).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pressure
import workload
from harness import free_port

HOST = "127.0.0.1"
MB = 1024 * 1024


class BigUpstream:
    """Answers `big-` prompts with `big` (bytes, application/json), any other chat request as the fake upstream."""

    def __init__(self, big: bytes):
        self.big = big
        self.port = free_port()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                answer = upstream.big if b"Request big-" in body else json.dumps(workload.answer_of(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((HOST, self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> BigUpstream:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def part_big_records(folder: Path, sizes_mb: list[int], systems: dict) -> list[dict]:
    """`systems`: name → factory(cassette folder, name, mode) of an unstarted Mitmdump; "relay" is mitmdump
    without the addon, the others record (mode "record") and then replay (mode "replay")."""
    rows = []
    for size_mb in sizes_mb:
        body, _ = pressure.embeddings(size_mb * MB)
        big = json.dumps(body).encode()  # as an API sends it: with the default separators
        del body
        with BigUpstream(big) as upstream:
            small_body = workload.synthetic_body(0)
            small = workload.raw_request(HOST, upstream.port, small_body, via_proxy=True)
            for name, make in systems.items():
                cassettes = folder / f"record-{name}-{size_mb}"
                pressure.write_cassette(cassettes, upstream.port, small_body, workload.answer_of(small_body))
                request = workload.raw_request(
                    HOST, upstream.port, workload.chat_body(f"big-{size_mb}-{name}"), via_proxy=True
                )
                row = {"system": name, "body_mb": round(len(big) / MB, 1)}
                for mode in ("record", "replay") if name != "relay" else ("record",):
                    proxy = make(cassettes, f"{name}_{mode}_{size_mb}", mode).start(small)
                    try:
                        start_mb = pressure.tree_rss_kb(proxy.process.pid) / 1024
                        sampler = pressure.PeakRss(proxy.process.pid)
                        sampler.start()
                        sent = time.perf_counter()
                        during = asyncio.run(pressure._small_hits_during(proxy.port, small, [request], len(big)))
                        seconds = time.perf_counter() - sent
                        peak = sampler.stop()
                    finally:
                        proxy.stop()
                    row[f"{mode}_s"] = round(seconds, 2)
                    row[f"{mode}_small_max_ms"] = during["small_max_ms"]
                    row[f"{mode}_peak_rss_mb"] = round(peak, 1)
                    row[f"{mode}_peak_over_start_per_body"] = round((peak - start_mb) / (len(big) / MB), 2)
                if name != "relay":
                    files = [f for f in cassettes.rglob("*.json") if f.stat().st_size > MB]
                    row["cassette_mb"] = round(files[0].stat().st_size / MB, 1) if files else None
                    if files:  # the response's (the last) body_format, without parsing hundreds of MB here
                        text = files[0].read_bytes()
                        at = text.rfind(b'"body_format": "') + len(b'"body_format": "')
                        row["body_format"] = text[at : text.index(b'"', at)].decode()
                rows.append(row)
                print(f"    {row}", flush=True)
    return rows
