"""What a client process needs in its environment to go through the proxy, whatever its runtime.

Proxy variables for every client that reads them, a NO_PROXY that cannot
route cassette traffic around the proxy, one CA bundle for every runtime's
variable, the Node switches (NODE_USE_ENV_PROXY, the preload for versions
whose fetch ignores proxy variables), the JVM's system properties, and for
each reverse route the base-URL variables its provider's SDKs read.
"""

from __future__ import annotations

import os
import re
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..core.defaults import MODE_VAR
from .java_truststore import java_tool_options

NODE_PRELOAD = Path(__file__).with_name("node_preload.cjs")
NODE_TEST_HOOKS = Path(__file__).with_name("node_test_hooks.cjs")
"""What a Node test runner requires to announce its tests (startTest/endTest): $CASSETTE_NODE_TEST_HOOKS."""
PYTHON_SITE = Path(__file__).with_name("python_site")
"""Put first on PYTHONPATH: its sitecustomize carries each request's test (then runs the one it hides)."""

PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy")
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "AWS_CA_BUNDLE")
"""Every variable gets the combined bundle; AWS_CA_BUNDLE because botocore (boto3, Bedrock) reads no other."""
LOOPBACK = ("localhost", "127.0.0.1", "::1")
"""Always in NO_PROXY: the reverse listeners live there, and a suite's own local servers must not be intercepted."""

FRAMEWORK_DEFAULTS = {
    # litellm fetches its model map from raw.githubusercontent.com at import (litellm_core_utils/
    # get_model_cost_map.py): a live request in record, refused as offline in replay (`--strict` fails). The map
    # it ships with keeps both runs alike, and the map decides which parameters litellm sends.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}
"""Set for the client unless its environment sets them: what a framework fetches at start that is no model call."""

SYSTEM_CA_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu, Alpine
    "/etc/pki/tls/certs/ca-bundle.crt",  # Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",  # openSUSE
    "/etc/ssl/cert.pem",  # macOS, BSD
)

ROUTE_VARIABLES: dict[str, tuple[str, tuple[tuple[str, bool], ...]]] = {
    # name: (the base URL's path when --reverse gives none, ((variable, with the path?), ...)), from each SDK's source
    "openai": ("/v1", (("OPENAI_API_BASE", True),)),  # langchain-openai and litellm read it before OPENAI_BASE_URL
    "anthropic": ("", (("ANTHROPIC_API_URL", True),)),  # langchain-anthropic reads it before ANTHROPIC_BASE_URL
    "azure_openai": ("", (("AZURE_OPENAI_ENDPOINT", False), ("AZURE_API_BASE", False))),  # openai.AzureOpenAI, litellm
    "gemini": ("", (("GOOGLE_GEMINI_BASE_URL", False),)),  # google-genai (genai/_base_url.py)
    "vertex": ("", (("GOOGLE_VERTEX_BASE_URL", False),)),  # google-genai with vertexai=True
    "ollama": ("", (("OLLAMA_HOST", False), ("OLLAMA_API_BASE", False))),  # the ollama client; litellm
    "bedrock": ("", (("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", False),)),  # boto3/botocore's per-service endpoint
    "bedrock_agent": ("", (("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME", False),)),
    "cohere": ("", (("CO_API_URL", False),)),  # cohere's Client and ClientV2
    "huggingface": ("", (("HF_INFERENCE_ENDPOINT", False),)),  # huggingface_hub's serverless inference
}
"""Route names whose SDKs read a variable besides NAME_BASE_URL; `True`: the variable gets the base URL with its path,
`False`: the listener alone (the SDK adds its own path). NAME_BASE_URL is itself the SDK's variable for groq
(GROQ_BASE_URL), together, cerebras, fireworks, perplexity, replicate; mistralai reads none."""


def default_base_path(name: str) -> str:
    """The path a route's base URL ends in when `--reverse NAME=URL` gives none: OpenAI's SDKs want `/v1`."""
    return ROUTE_VARIABLES.get(name, ("", ()))[0]


def route_variables(name: str, listener: str, base_path: str) -> dict[str, str]:
    """The variables a reverse route sets: NAME_BASE_URL (listener + path) and its SDKs' own (ROUTE_VARIABLES)."""
    variables = {f"{name.upper()}_BASE_URL": listener + base_path}
    for variable, with_path in ROUTE_VARIABLES.get(name, ("", ()))[1]:
        variables[variable] = listener + base_path if with_path else listener
    return variables


_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def client_environment(
    environ: Mapping[str, str],
    *,
    proxy_url: str,
    ca_bundle: Path,
    controlled_hosts: Sequence[str],
    mode: str,
    notice_file: Path,
    base_urls: Mapping[str, str],
    java_truststore: Path | None = None,
    direct: Sequence[str] = (),
) -> dict[str, str]:
    """`environ` plus what every common runtime needs to go through the proxy and trust it.

    JVMs get the proxy through JAVA_TOOL_OPTIONS (appended to the user's own), and
    `java_truststore` (PKCS12, see java_truststore.py) as their trust store when given.
    `direct`: `host:port` entries always kept in NO_PROXY (the proxy's own reverse listeners), even when
    their host is under cassette control.
    """
    env = dict(environ)
    env.update(dict.fromkeys(PROXY_VARIABLES, proxy_url))
    existing = ",".join(filter(None, (environ.get("NO_PROXY"), environ.get("no_proxy"))))
    no_proxy = no_proxy_value(existing, controlled_hosts)
    env["NO_PROXY"] = env["no_proxy"] = ",".join([no_proxy, *direct]) if no_proxy else ",".join(direct)
    env.update(dict.fromkeys(CA_VARIABLES, str(ca_bundle)))
    env["NODE_USE_ENV_PROXY"] = "1"
    preload = _node_require(NODE_PRELOAD)
    node_options = environ.get("NODE_OPTIONS", "")
    env["NODE_OPTIONS"] = node_options if preload in node_options else f"{node_options} {preload}".strip()
    java = " ".join(java_tool_options(proxy_url, env["NO_PROXY"], java_truststore))
    java_options = environ.get("JAVA_TOOL_OPTIONS", "")
    env["JAVA_TOOL_OPTIONS"] = java_options if java in java_options else f"{java_options} {java}".strip()
    env["CASSETTE_NODE_NOTICE"] = str(notice_file)
    env[MODE_VAR] = mode
    env["CASSETTE_PROXY_URL"] = proxy_url
    env["CASSETTE_NODE_TEST_HOOKS"] = str(NODE_TEST_HOOKS)
    # Every Python process names the test of its requests (python_site/cassette_carrier.py), a server its caller's.
    python_path = environ.get("PYTHONPATH", "")
    if str(PYTHON_SITE) not in python_path.split(os.pathsep):
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYTHON_SITE), python_path]))
    env.update(base_urls)
    for name, value in FRAMEWORK_DEFAULTS.items():
        env.setdefault(name, value)
    return env


def no_proxy_value(existing: str, controlled: Sequence[str]) -> str:
    """NO_PROXY without the entries that would let cassette-controlled traffic skip the proxy, plus loopback."""
    kept = []
    for entry in [*existing.replace(" ", "").split(","), *LOOPBACK]:
        if entry and entry not in kept and not _bypasses(entry, controlled):
            kept.append(entry)
    return ",".join(kept)


def _bypasses(entry: str, controlled: Sequence[str]) -> bool:
    """Whether a NO_PROXY entry (`*`, `.example.com`, `example.com[:port]`) covers a controlled host."""
    if entry == "*":
        return True
    domain = no_proxy_domain(entry)
    for pattern in controlled:
        if pattern == "*":
            if domain not in LOOPBACK:
                return True
            continue
        host = pattern.split("/", 1)[0].replace("*", "x")  # an entry narrowed to paths still names its host
        if host == domain or host.endswith("." + domain):
            return True
    return False


def no_proxy_domain(entry: str) -> str:
    """The host or domain a NO_PROXY entry names: lower case, without `*.`/`.`, a port or IPv6 brackets."""
    domain = entry.lower().lstrip("*").lstrip(".")
    if domain.startswith("["):
        return domain[1:].split("]")[0]
    return domain.split(":")[0] if domain.count(":") == 1 else domain


def system_ca_bundle() -> Path | None:
    """The machine's own CA bundle, where OpenSSL looks first, else a distribution's usual place."""
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile, *SYSTEM_CA_BUNDLES):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def own_cas(environ: Mapping[str, str]) -> list[str]:
    """The CA variables that make clients trust a CA the system does not (a corporate CA): a file holding a
    certificate outside the system bundle, or a certificate folder other than the system bundle's.

    Many images point every CA variable at the system bundle itself (`SSL_CERT_FILE=/etc/ssl/certs/
    ca-certificates.crt`): that trusts nothing more, so HTTPS through the proxy needs only the proxy's CA.
    """
    system = system_ca_bundle()
    known: set[bytes] | None = None  # parsed only for a file that is not the system bundle itself (~40 ms)
    own = []
    for name in CA_VARIABLES:
        value = environ.get(name)
        if not value or not Path(value).is_file() or (system and _same_file(Path(value), system)):
            continue
        if known is None:
            known = {pem.strip() for pem in _PEM.findall(system.read_bytes())} if system else set()
        if any(pem.strip() not in known for pem in _PEM.findall(Path(value).read_bytes())):
            own.append(name)
    folder = environ.get("SSL_CERT_DIR")
    if folder and not (system and Path(folder).resolve() == system.resolve().parent):
        own.append("SSL_CERT_DIR")
    return own


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def write_ca_bundle(destination: Path, proxy_ca: Path, environ: Mapping[str, str], others: bool = True) -> Path:
    """The system's CAs, those the environment already trusts, and the proxy's CA, each once.

    The proxy's CA alone would break every HTTPS call that does not go through
    the proxy; dropping the CA files a CI image exports (a corporate CA) would
    break the calls that needed them. Yet every CA in the bundle is parsed each
    time a client builds an SSL context (httpx: once per proxy variable, per
    client), so `others=False` (`--proxy-ca-only`) writes the proxy's CA alone.
    """
    others_sources = [system_ca_bundle(), *(environ.get(name) for name in CA_VARIABLES)] if others else []
    sources = [*others_sources, proxy_ca]
    certificates: dict[bytes, None] = {}
    for source in sources:
        if source and Path(source).is_file():
            for pem in _PEM.findall(Path(source).read_bytes()):
                certificates.setdefault(pem.strip(), None)
    destination.write_bytes(b"\n".join(certificates) + b"\n")
    return destination


def _node_require(path: Path) -> str:
    escaped = str(path).replace("\\", "\\\\").replace('"', '\\"')
    return f'--require "{escaped}"'
