"""From a mitmproxy flow to the facts the key is computed from (`core.key.RequestFacts`)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from mitmproxy import http

from ..core.keys.key import RequestFacts
from ..core.keys.url import canonical_path


def header_values(fields: Sequence[tuple[bytes, bytes]], names: Collection[bytes]) -> dict[str, str]:
    """The request's values of the named headers (lower-case bytes), repeated ones folded with ", " as
    `Headers[name]` folds them.

    One pass over the raw fields, decoding only the wanted ones: each `Headers` lookup scans every
    field, and copying them all (`dict(flow.request.headers)`) was the largest cost of a hit (see benchmarks/).
    """
    found: dict[str, list[str]] = {}
    for raw_name, raw_value in fields:
        name = raw_name.lower()
        if name in names:
            found.setdefault(name.decode("utf-8", "surrogateescape"), []).append(
                raw_value.decode("utf-8", "surrogateescape")
            )
    return {name: ", ".join(values) for name, values in found.items()}


def request_facts(request: http.Request, read_headers: Collection[bytes], host: str) -> RequestFacts:
    """The facts of a request; `read_headers` names the key headers plus content-type and content-encoding, `host`
    is the request's host already through `url.normal_host`."""
    headers = header_values(request.headers.fields, read_headers)
    body = request.get_content(strict=False) if "content-encoding" in headers else request.raw_content
    return RequestFacts(
        method=request.method,
        scheme=request.scheme,
        host=host,
        port=request.port,
        # Not `urlsplit(path)`: it reads `//ws/x` (google-genai's Live URL) as the host `ws` and the path `/x`.
        path=canonical_path(request.path.partition("?")[0].partition("#")[0] or "/"),
        query=list(request.query.items(multi=True)) if "?" in request.path else [],  # parsing rebuilds the URL
        headers=headers,
        body=body or b"",
        content_type=headers.get("content-type", ""),
    )
