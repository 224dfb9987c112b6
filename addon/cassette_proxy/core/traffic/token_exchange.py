"""Token exchanges: the OAuth token endpoints a Vertex AI or Azure (Entra ID) suite calls before its first model call.

A client library trades a service account's freshly signed assertion (or a client secret, or a refresh
token) for an access token. Neither side belongs in a cassette: the request differs on every run (a new
signature, a new `iat`), so it could never be keyed, and the answer is a live secret. So these requests
are never stored; in replay mode the proxy answers them itself with a placeholder token shaped the way
google-auth and MSAL (azure-identity) parse it, so the library refreshes offline; in record mode they
pass through to the real endpoint, and the token goes to the client only.

Pure: no mitmproxy import. The addon asks `TokenEndpoints.matches()` and sends `placeholder()`.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ..keys.hosts import host_path_glob

DEFAULT_TOKEN_ENDPOINTS = (
    "oauth2.googleapis.com/token",  # google-auth's default token URI (service accounts, user refresh tokens)
    "www.googleapis.com/oauth2/v4/token",  # older google-auth and other Google clients
    "accounts.google.com/o/oauth2/token",  # the oldest Google token URI, still in many credential files
    "login.microsoftonline.com/*/oauth2/v2.0/token",  # Microsoft identity platform v2 (MSAL, azure-identity)
    "login.microsoftonline.com/*/oauth2/token",  # Azure AD v1 (ADAL-era clients)
)
"""`host/path` globs of the token endpoints always answered by the proxy in replay mode."""

LIFETIME = 3599
"""Seconds a placeholder token lives: what Google and Microsoft answer (one hour, less the second in flight)."""

PLACEHOLDER_PREFIX = "cassette-placeholder-"

HEADERS = {
    "content-type": "application/json; charset=utf-8",
    "cache-control": "no-store",
    "pragma": "no-cache",
    "x-cassette-token-exchange": "placeholder",
}

_MICROSOFT_HOSTS = re.compile(r"login\.(microsoftonline\.(com|us|de)|chinacloudapi\.cn|partner\.microsoftonline\.cn)")


@dataclass(frozen=True)
class TokenEndpoints:
    """Which requests are token exchanges: POST to one of the `host/path` globs."""

    hosts: re.Pattern[str]
    """The globs' hosts alone: asked on every request, so most of them fail fast on the host."""
    pattern: re.Pattern[str]

    def matches(self, method: str, host: str, path: str) -> bool:
        if method != "POST" or self.hosts.match(host := host.lower()) is None:
            return False
        return self.pattern.match(f"{host}{path.partition('?')[0]}") is not None


def parse_endpoints(extra: Sequence[str]) -> TokenEndpoints:
    """The default endpoints plus `extra` (`host/path` globs, e.g. `sts.example.com/oauth2/token`).

    Raises ValueError naming the bad entry: a glob without a host or a path could match far more than meant.
    """
    globs = list(DEFAULT_TOKEN_ENDPOINTS)
    for entry in extra:
        _, host, path = host_path_glob(
            entry, "token endpoint glob", "sts.example.com/oauth2/token or login.example.com/*/token"
        )
        globs.append(f"{host}/{path}")
    hosts = {glob.partition("/")[0] for glob in globs}
    return TokenEndpoints(
        re.compile("|".join(fnmatch.translate(host) for host in sorted(hosts))),
        re.compile("|".join(fnmatch.translate(glob) for glob in globs)),
    )


def placeholder(
    host: str, path: str, body: bytes, content_type: str, now: float | None = None
) -> tuple[dict[str, str], bytes]:
    """The headers and JSON body of a placeholder token response for this token request.

    The token is deterministic (a hash of the endpoint, the client's id and the scope asked for, never
    of a secret or an assertion's signature), so identical runs see identical tokens.
    """
    now = time.time() if now is None else now
    form = _form(body, content_type)
    claims = _assertion_claims(form.get("assertion", ""))
    client = form.get("client_id") or claims.get("iss") or claims.get("sub") or ""
    scope = form.get("scope") or claims.get("scope") or ""
    digest = hashlib.sha256(f"{host.lower()}{path}\0{client}\0{scope}".encode()).hexdigest()[:32]
    token = PLACEHOLDER_PREFIX + digest
    if _MICROSOFT_HOSTS.fullmatch(host.lower()):
        answer = _microsoft(form, path, token, client, scope, now)
    else:
        answer = _google(form, claims, token, client, scope, now)
    return dict(HEADERS), json.dumps(answer).encode()


def _google(
    form: dict[str, str], claims: dict[str, Any], token: str, client: str, scope: str, now: float
) -> dict[str, Any]:
    """What google-auth reads: `access_token` and `expires_in`; `id_token` (a JWT it decodes for `exp`) only when asked.

    A service account asks for an ID token with a `target_audience` claim in its assertion, and then gets
    only `id_token`; a user's refresh token gets one alongside the access token when its scope has `openid`.
    """
    audience = claims.get("target_audience")
    if audience:
        return {"id_token": _unsigned_jwt({"iss": "https://accounts.google.com", "aud": audience, "sub": client}, now)}
    answer = {"access_token": token, "expires_in": LIFETIME, "token_type": "Bearer"}
    if scope:
        answer["scope"] = scope
    if "openid" in scope.split():
        answer["id_token"] = _unsigned_jwt({"iss": "https://accounts.google.com", "aud": client, "sub": client}, now)
    return answer


def _microsoft(form: dict[str, str], path: str, token: str, client: str, scope: str, now: float) -> dict[str, Any]:
    """What MSAL reads: `token_type`, `expires_in`, `ext_expires_in`, `access_token`; for user flows asking
    `openid`, also an `id_token` and `client_info` (MSAL builds its account cache entry from both)."""
    answer = {
        "token_type": "Bearer",
        "expires_in": LIFETIME,
        "ext_expires_in": LIFETIME,
        "access_token": token,
    }
    if scope:
        answer["scope"] = scope
    if form.get("grant_type") == "refresh_token":
        answer["refresh_token"] = PLACEHOLDER_PREFIX + "refresh-" + token[len(PLACEHOLDER_PREFIX) :]
    if "openid" in scope.split():
        tenant = path.strip("/").split("/")[0] or "common"
        subject = "cassette-placeholder-user"
        answer["id_token"] = _unsigned_jwt(
            {
                "iss": f"https://login.microsoftonline.com/{tenant}/v2.0",
                "aud": client,
                "tid": tenant,
                "oid": subject,
                "sub": subject,
                "preferred_username": "placeholder@cassette.invalid",
                "name": "Cassette Placeholder",
            },
            now,
        )
        answer["client_info"] = _b64(json.dumps({"uid": subject, "utid": tenant}).encode())
    return answer


def _form(body: bytes, content_type: str) -> dict[str, str]:
    """The token request's fields: form-encoded (OAuth's rule), or JSON (Google's STS-style clients)."""
    text = body.decode("utf-8", "replace")
    if "json" in content_type.lower():
        try:
            data = json.loads(text)
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    return {name: values[0] for name, values in parse_qs(text).items()}


def _assertion_claims(assertion: str) -> dict[str, Any]:
    """The claims of a JWT-bearer assertion, unverified: only its non-secret `iss`, `scope`, `target_audience`."""
    parts = assertion.split(".")
    if len(parts) != 3:
        return {}
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return {}
    return claims if isinstance(claims, dict) else {}


def _unsigned_jwt(claims: dict[str, Any], now: float) -> str:
    """A JWT with an `alg: none` header and a placeholder signature: libraries decode it without verifying."""
    header = {"alg": "none", "typ": "JWT", "kid": "cassette-placeholder"}
    payload = {**claims, "iat": int(now), "exp": int(now) + LIFETIME + 1}
    return ".".join(
        (_b64(json.dumps(header).encode()), _b64(json.dumps(payload).encode()), _b64(b"cassette-placeholder"))
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
