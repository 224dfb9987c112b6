"""Credentials for re-sending a recorded request: each provider's auth header, from its SDK's usual variable.

A cassette never stores a credential, so `cassette drift` adds one to each
request it re-sends, read from the environment the way the provider's own SDK
reads it (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, …). A value is
only ever put in a request header: never logged, stored or reported. Each
value read is registered with the scrubber (scrub.py) before anything else is
done with it, and surrounding whitespace (a `.env` file's trailing newline) is
stripped; a line break or control character inside it is refused, naming the
variable, never the value: sent, it would end the header early. Hosts the
table does not know (Vertex AI's OAuth tokens, a private gateway) take a
`--credential HOST=VARIABLE` rule; Bedrock's SigV4 signatures cannot be
re-made from a stored request, so those hosts are refused with that reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..keys.hosts import HostScope
from ..secrets.scrub import register

BEARER = "authorization"


@dataclass(frozen=True)
class Credential:
    """Where a host's key goes: a header, read from the first of `variables` the environment sets."""

    hosts: tuple[str, ...]
    header: str
    variables: tuple[str, ...]
    prefix: str = ""
    """`Bearer ` for the authorization header."""


def _bearer(hosts: tuple[str, ...], *variables: str) -> Credential:
    return Credential(hosts, BEARER, variables, "Bearer ")


PROVIDERS: tuple[Credential, ...] = (
    _bearer(("api.openai.com",), "OPENAI_API_KEY"),
    Credential(("api.anthropic.com",), "x-api-key", ("ANTHROPIC_API_KEY",)),
    _bearer(("api.anthropic.com",), "ANTHROPIC_AUTH_TOKEN"),  # the anthropic SDK's second choice
    Credential(("generativelanguage.googleapis.com",), "x-goog-api-key", ("GOOGLE_API_KEY", "GEMINI_API_KEY")),
    Credential(("*.openai.azure.com",), "api-key", ("AZURE_OPENAI_API_KEY",)),
    _bearer(("api.mistral.ai",), "MISTRAL_API_KEY"),
    _bearer(("api.groq.com",), "GROQ_API_KEY"),
    _bearer(("api.together.xyz", "api.together.ai"), "TOGETHER_API_KEY"),
    _bearer(("api.deepseek.com",), "DEEPSEEK_API_KEY"),
    _bearer(("openrouter.ai",), "OPENROUTER_API_KEY"),
    _bearer(("api.x.ai",), "XAI_API_KEY"),
    _bearer(("api.fireworks.ai",), "FIREWORKS_API_KEY"),
    _bearer(("api.cohere.com", "api.cohere.ai"), "CO_API_KEY", "COHERE_API_KEY"),
    _bearer(("api.cerebras.ai",), "CEREBRAS_API_KEY"),
    _bearer(("api.perplexity.ai",), "PERPLEXITY_API_KEY", "PPLX_API_KEY"),
    _bearer(("api-inference.huggingface.co", "router.huggingface.co"), "HF_TOKEN", "HUGGINGFACEHUB_API_TOKEN"),
    _bearer(("api.replicate.com",), "REPLICATE_API_TOKEN"),
    _bearer(("api.voyageai.com",), "VOYAGE_API_KEY"),
    _bearer(("api.jina.ai",), "JINA_API_KEY"),
)
"""In the order each SDK prefers; a host with several entries (Anthropic) takes the first whose variable is set."""

ACCOUNT_HEADERS = {
    "api.openai.com": (("openai-organization", "OPENAI_ORG_ID"), ("openai-project", "OPENAI_PROJECT_ID"))
}
"""Optional account headers the SDK sends when its variable is set."""

UNSIGNABLE = ("bedrock-runtime.*.amazonaws.com", "bedrock-agent-runtime.*.amazonaws.com")
"""SigV4-signed APIs: a signature covers the date and the body, and a stored request has neither the keys nor
the signing code; re-checking them needs the application's own client."""


class CredentialError(ValueError):
    """No credential for a host, or a `--credential` rule that cannot work; the message says what to set."""


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def header_value(variable: str, value: str) -> str:
    """The variable's value as a header may carry it: registered with the scrubber, surrounding whitespace
    stripped; CredentialError (naming the variable only) for a control character left inside."""
    register(value)
    stripped = value.strip()
    if _CONTROL.search(stripped):
        raise CredentialError(
            f"${variable} holds a line break or control character inside its value (not shown): a header cannot "
            "carry it; set the variable to the key alone"
        )
    return stripped


_RULE = re.compile(r"^([^=\s]+)=(?:([A-Za-z0-9-]+):)?([A-Za-z_][A-Za-z0-9_]*)$")


def parse_rule(spec: str) -> Credential:
    """`HOST_GLOB=VARIABLE` (sent as `Authorization: Bearer $VARIABLE`) or `HOST_GLOB=HEADER:VARIABLE`."""
    match = _RULE.match(spec.strip())
    if not match:
        raise CredentialError(
            f"--credential {spec!r}: expected HOST=VARIABLE or HOST=HEADER:VARIABLE, e.g. "
            "'*aiplatform.googleapis.com=VERTEX_TOKEN' or 'llm.internal=x-api-key:GATEWAY_KEY'"
        )
    host, header, variable = match.groups()
    if header is None or header.lower() == BEARER:
        return Credential((host,), BEARER, (variable,), "Bearer ")
    return Credential((host,), header.lower(), (variable,))


def credential_headers(host: str, environ: Mapping[str, str], rules: Sequence[Credential] = ()) -> dict[str, str]:
    """The headers that authenticate a request to `host`: the first rule given for it, else the provider's.

    Empty for a host nobody knows (a local server may need none); CredentialError for a known host whose
    variables are all unset, and for a host whose requests are signed.
    """
    ruled = any(host in HostScope(rule.hosts) for rule in rules)
    if not ruled and host in HostScope(UNSIGNABLE):
        raise CredentialError(
            f"{host}: requests are signed (AWS SigV4) and cannot be re-signed from a cassette; "
            "check these with the application's own client"
        )
    for credential in (*rules, *PROVIDERS):
        if host not in HostScope(credential.hosts):
            continue
        # Unset and blank are the same: a variable holding only a newline holds no key.
        name = next((name for name in credential.variables if environ.get(name, "").strip()), None)
        if name is not None:
            headers = {credential.header: credential.prefix + header_value(name, environ[name])}
            for header, variable in ACCOUNT_HEADERS.get(host, ()):
                if environ.get(variable, "").strip():
                    headers[header] = header_value(variable, environ[variable])
            return headers
    wanted = [name for credential in (*rules, *PROVIDERS) if host in HostScope(credential.hosts)
              for name in credential.variables]  # fmt: skip
    if wanted:
        raise CredentialError(f"{host}: no credentials: set {' or '.join(dict.fromkeys(wanted))}")
    return {}
