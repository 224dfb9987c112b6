"""Control characters never reach a terminal or a log raw: a request path holding a terminal escape
(`\\x1b]0;pwned\\x07` sets a terminal's title) is shown escaped in the proxy's log and in `cassette run`'s summary."""

from __future__ import annotations

import socket
import sys

from cassette_command import cassette

ESCAPE = b"\x1b]0;pwned\x07"
RAW_CLIENT = r"""
import os, socket, sys
host, port = os.environ["HTTP_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
with socket.create_connection((host, int(port)), timeout=30) as s:
    s.sendall(b"GET http://api.openai.com/v1/files/\x1b]0;pwned\x07/content HTTP/1.1\r\nHost: api.openai.com\r\n"
              b"Connection: close\r\n\r\n")
    answer = b""
    while chunk := s.recv(65536):
        answer += chunk
print(answer.split(b"\r\n", 1)[0].decode())
"""


def test_a_terminal_escape_in_a_request_path_is_logged_escaped(start_proxy):
    proxy = start_proxy(cassette_mode="replay")
    with socket.create_connection(("127.0.0.1", proxy.listen["regular"]), timeout=30) as s:
        s.sendall(b"GET http://api.openai.com/v1/files/" + ESCAPE + b"/content HTTP/1.1\r\nHost: api.openai.com\r\n"
                  b"Connection: close\r\n\r\n")  # fmt: skip
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 409 "), answer[:200]
    proxy.stop()
    log = proxy.log.read_bytes()
    assert b"cassette miss: GET http://api.openai.com/v1/files/\\x1b]0;pwned\\x07/content" in log, log[-2000:]
    assert b"\x1b" not in log and b"\x07" not in log


def test_a_terminal_escape_in_a_request_path_is_escaped_in_the_run_summary(tmp_path):
    result = cassette(
        "run", "--strict", "--", sys.executable, "-c", RAW_CLIENT, cwd=tmp_path, env={"CASSETTE_MITMDUMP_ARGS": ""}
    )
    assert result.stdout.startswith("HTTP/1.1 409 "), result.stdout + result.stderr
    assert "cassette: miss GET http://api.openai.com/v1/files/\\x1b]0;pwned\\x07/content" in result.stderr
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr
    assert result.returncode != 0  # --strict: the miss fails the run
