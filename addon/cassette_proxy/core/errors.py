"""The shape of every error the proxy answers itself: one JSON body every SDK surfaces, and a header none retries."""

from __future__ import annotations

from typing import Any

ERROR_HEADERS = {"content-type": "application/json", "x-should-retry": "false"}
"""`x-should-retry: false` stops the OpenAI and Anthropic SDKs from retrying an error twice with backoff
(a 409 miss would only miss again; a dead upstream would stay dead)."""


def error_body(error_type: str, message: str, **details: Any) -> dict[str, Any]:
    """An error in a shape every SDK surfaces: OpenAI reads `error.message`, Anthropic `type` + `error.type`."""
    return {"type": "error", "error": {"type": error_type, "code": error_type, "message": message, **details}}
