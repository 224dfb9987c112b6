"""URL hygiene: the one normal form of a host, a path and a query, and the URL as stored and shown
(the query's secrets left out)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING
from urllib.parse import quote_plus, urlencode

if TYPE_CHECKING:
    from .key import RequestFacts


SECRET_QUERY_PARAMS = frozenset(
    {
        # API keys and OAuth tokens (Gemini's `?key=`, Firebase's `?auth=`)
        "key", "api_key", "api-key", "apikey", "x-api-key", "auth", "access_token", "refresh_token", "id_token",
        "token", "session_token", "security_token", "client_secret", "password", "passwd", "secret",
        # AWS SigV4 presigned URLs; the date and expiry change at every signing, so they cannot be keyed either
        "x-amz-signature", "x-amz-credential", "x-amz-security-token", "x-amz-date", "x-amz-expires",
        "x-amz-algorithm", "x-amz-signedheaders",
        # Google Cloud Storage V4 signed URLs
        "x-goog-signature", "x-goog-credential", "x-goog-date", "x-goog-expires", "x-goog-algorithm",
        "x-goog-signedheaders",
        # S3/GCS V2 signed URLs (`AWSAccessKeyId`, `GoogleAccessId`, `Signature`) and CloudFront's `Key-Pair-Id`
        "signature", "awsaccesskeyid", "googleaccessid", "key-pair-id",
        # Azure SAS signature
        "sig",
    }
)  # fmt: skip
"""Query parameters that carry credentials or a signature's moving parts: never keyed, never stored, never logged.
Compared in lower case."""


SAS_QUERY_PARAMS = frozenset(
    {"sv", "ss", "srt", "sp", "se", "st", "spr", "sr", "si", "sip", "skoid", "sktid", "skt", "ske", "sks", "skv", "sdd"}
)
"""The fields of an Azure shared access signature: dropped with `sig`, and only when `sig` is there, because
outside a SAS URL a parameter named `sp` or `st` is an ordinary one that must count."""


DEFAULT_PORTS = {"http": 80, "https": 443, "stdio": 0}
"""`stdio`: an MCP server over stdio (core/sessions/mcp_stdio.py), `stdio://<server name>/`, which has no port."""


def normal_host(host: str) -> str:
    """The host as DNS sees it: lower case, no trailing dot, IDNA (`bücher.example` → `xn--bcher-kva.example`).

    `API.OpenAI.com.` names the same machine as `api.openai.com`, so both must
    fall in the same scope and get the same key. Never raises: a name IDNA
    refuses (an empty label, a label over 63 characters) stays as it was,
    lower-cased.
    """
    host = host.strip().lower()
    if host.endswith(".") and not host.startswith("["):
        host = host.rstrip(".") or host
    if not host.isascii():
        with contextlib.suppress(UnicodeError):
            host = host.encode("idna").decode("ascii")
    return host


def origin(scheme: str, host: str, port: int) -> str:
    """`scheme://host[:port]` with the default port left out, so forward and reverse mode agree."""
    host = normal_host(host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    if DEFAULT_PORTS.get(scheme) == port:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


_KEPT_ESCAPED = frozenset("/?#%")
"""Escapes that change a path's meaning when undone: a segment separator, the query and fragment marks, `%`."""


def canonical_path(path: str) -> str:
    """The path as an API reads it: `%3A` and `:` are the same request (a Bedrock model id in the path).

    Escapes of printable ASCII are undone, except `/`, `?`, `#` and `%`,
    whose escaped and plain forms differ; the escapes kept (and those of
    spaces, controls and non-ASCII bytes) get upper-case hex, as RFC 3986
    normalises them.
    """
    if "%" not in path:
        return path
    return _ESCAPE.sub(_unescape, path)


def _unescape(match: re.Match[str]) -> str:
    char = chr(int(match.group(1), 16))
    return char if "!" <= char <= "~" and char not in _KEPT_ESCAPED else "%" + match.group(1).upper()


def public_query(query: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The query parameters without credentials, sorted so their order never matters."""
    query = list(query)
    secret = (
        SECRET_QUERY_PARAMS | SAS_QUERY_PARAMS if any(k.lower() == "sig" for k, _ in query) else SECRET_QUERY_PARAMS
    )
    return sorted((k, v) for k, v in query if k.lower() not in secret)


def raw_bytes(text: str) -> bytes:
    """The bytes a decoded request value came from: mitmproxy decodes what is not UTF-8 with `surrogateescape`
    (`%ff` → `\\udcff`); any other lone surrogate is kept as its UTF-8 form (`surrogatepass`). Never raises."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _quote(text: str | bytes, safe: str | bytes = "", encoding: str | None = None, errors: str | None = None) -> str:
    """`quote_plus` of a value's raw bytes, so a query that is not UTF-8 is shown (and keyed) percent-escaped."""
    return quote_plus(raw_bytes(text) if isinstance(text, str) else text, safe)


def public_url(facts: RequestFacts) -> str:
    """The request URL as stored and shown: origin, path, and the query without secrets."""
    url = origin(facts.scheme, facts.host, facts.port) + facts.path
    query = public_query(facts.query)
    return f"{url}?{urlencode(query, quote_via=_quote)}" if query else url
