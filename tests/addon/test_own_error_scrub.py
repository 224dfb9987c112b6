"""A bug of ours that quotes the request's key, in any form, answers and logs without it (proxy/answers.own_error,
core/secrets/scrub.py). In process, with mitmproxy's taddons; the key is fake."""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

from in_process import Addon
from mitmproxy.addons.proxyserver import Proxyserver
from mitmproxy.test import taddons, tflow

KEY = "fake-gateway-own-error-0123456789"
"""No known shape (redact.py would not find it): only the scrubber can."""


def test_our_own_error_quoting_the_clients_key_answers_and_logs_without_it(tmp_path, caplog):
    addon = Addon()
    flow = tflow.tflow()
    flow.request.scheme, flow.request.host, flow.request.port = "https", "api.openai.com", 443
    flow.request.method, flow.request.path = "POST", "/v1/chat/completions"
    flow.request.headers["x-api-key"] = KEY
    flow.request.content = b'{"model": "gpt-4o-mini", "messages": []}'

    def failing(facts):
        raise ValueError(f"Invalid header value {(KEY + chr(10)).encode()!r} and {quote(KEY + chr(10))}")

    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.options.update(cassette_dir=str(tmp_path / "cassettes"), cassette_mode="replay")
        addon.configure(set(tctx.options.keys()))
        addon.keys.keyed = failing
        with caplog.at_level(logging.ERROR):
            tctx.master.event_loop.run_until_complete(addon.request(flow))
        addon.report.write(tmp_path / "report.json")
    assert flow.response is not None and flow.response.status_code == 500
    message = json.loads(flow.response.content)["error"]["message"]
    assert message.count("[credential]") == 2 and "ValueError: Invalid header value b'" in message
    logged = "\n".join(record.getMessage() + (record.exc_text or "") for record in caplog.records)
    assert "Invalid header value" in logged
    for text in (message, logged, (tmp_path / "report.json").read_text(), addon.report.summary()):
        assert KEY not in text and KEY[:20] not in text


def test_our_own_error_saving_a_session_is_logged_and_reported_without_the_upgrades_key(tmp_path, caplog):
    """The websocket_end hook's bug goes through the same redaction as every other hook's (answers.own_error_text)."""
    key = "fake-session-own-error-9876543210"
    addon = Addon()
    flow = tflow.twebsocketflow()
    flow.request.headers["authorization"] = f"Bearer {key}"

    async def failing(flow):
        raise RuntimeError(f"could not save {flow.request.headers['authorization']!r} ({quote(key)})")

    with taddons.context(addon, Proxyserver()) as tctx:
        tctx.options.update(cassette_dir=str(tmp_path / "cassettes"), cassette_mode="record")
        addon.configure(set(tctx.options.keys()))
        addon.sessions.ended = failing
        with caplog.at_level(logging.ERROR):
            tctx.master.event_loop.run_until_complete(addon.websocket_end(flow))
        addon.report.write(tmp_path / "report.json")
    [error] = addon.report.errors
    assert error.kind == "cassette_error" and error.hook == "websocket_end"
    assert "RuntimeError: could not save" in error.message and "[credential]" in error.message
    logged = "\n".join(record.getMessage() + (record.exc_text or "") for record in caplog.records)
    assert "could not save" in logged
    for text in (error.message, logged, (tmp_path / "report.json").read_text()):
        assert key not in text and key[:20] not in text
