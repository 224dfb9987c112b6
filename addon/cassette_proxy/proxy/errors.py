"""The one builder of the JSON errors the addon answers itself (misses, unusable cassettes, upstream
failures, refusals, our own bugs), so every SDK surfaces them the same way and none retries them."""

from __future__ import annotations

import json
from typing import Any

from mitmproxy import http

ERROR_HEADERS = {"content-type": "application/json", "x-should-retry": "false"}
"""`x-should-retry: false` stops the OpenAI and Anthropic SDKs from retrying an error twice with backoff
(a 409 miss would only miss again; a dead upstream would stay dead)."""


def error_body(error_type: str, message: str, **details: Any) -> dict:
    """An error in a shape every SDK surfaces: OpenAI reads `error.message`, Anthropic `type` + `error.type`."""
    return {"type": "error", "error": {"type": error_type, "code": error_type, "message": message, **details}}


def json_response(status: int, body: dict, indent: int | None = None) -> http.Response:
    return http.Response.make(status, json.dumps(body, ensure_ascii=False, indent=indent), ERROR_HEADERS)


def error_response(status: int, error_type: str, message: str, /, **details: Any) -> http.Response:
    return json_response(status, error_body(error_type, message, **details))
