"""The one builder of the JSON errors the addon answers itself (misses, unusable cassettes, upstream
failures, refusals, our own bugs), so every SDK surfaces them the same way and none retries them."""

from __future__ import annotations

import json
from typing import Any

from mitmproxy import http

from ..core.errors import ERROR_HEADERS, error_body


def json_response(status: int, body: dict, indent: int | None = None) -> http.Response:
    return http.Response.make(status, json.dumps(body, ensure_ascii=False, indent=indent), ERROR_HEADERS)


def error_response(status: int, error_type: str, message: str, /, **details: Any) -> http.Response:
    return json_response(status, error_body(error_type, message, **details))
