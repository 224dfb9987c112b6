"""Every default and environment-variable name the addon, the launcher, the CLI and the pytest plugin share.

One place, so that `mitmdump -s addon/cassette.py`, `cassette run` and the
pytest plugin can never disagree on what "the default" is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

MODES = ("replay", "record", "update", "off")
DEFAULT_MODE = "replay"
"""The safe default: answer from disk only; recording is always asked for."""

REPEATS = ("reuse", "sequence")
DEFAULT_REPEATS = "reuse"

DEFAULT_DIR = "cassettes"
DEFAULT_PRELOAD = 4096
"""Cassettes read before their first request (`cassette_preload`): about 2 KB of memory each for a typical one."""

MODE_VAR = "CASSETTE_MODE"
DIR_VAR = "CASSETTE_DIR"
REPLAY_TIMING_VAR = "CASSETTE_REPLAY_TIMING"
MITMDUMP_VAR = "CASSETTE_MITMDUMP"
MITMDUMP_ARGS_VAR = "CASSETTE_MITMDUMP_ARGS"
CONTROL_TOKEN_VAR = "CASSETTE_CONTROL_TOKEN"
"""The control channel's secret, set by the launcher in mitmdump's environment (never on its command line)."""
CONTROL_HOST = "cassette.control"
"""The host a test runner announces its tests to, through the proxy (proxy/control_channel.py)."""

DEFAULT_KEY_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")
"""Request headers that change what the API does, so they are part of the key."""

DEFAULT_HOSTS = (
    "api.openai.com",
    "api.anthropic.com",
    "generativelanguage.googleapis.com",
    "aiplatform.googleapis.com",  # Vertex AI: global endpoint
    "*-aiplatform.googleapis.com",  # Vertex AI: regional endpoints (us-central1-aiplatform.googleapis.com)
    "*.openai.azure.com",
    "api.mistral.ai",
    "api.groq.com",
    "api.together.xyz",
    "api.together.ai",
    "api.deepseek.com",
    "openrouter.ai",
    "api.x.ai",
    "api.fireworks.ai",
    "api.cohere.com",
    "api.cohere.ai",
    "api.cerebras.ai",
    "api.perplexity.ai",
    "api-inference.huggingface.co",  # Hugging Face serverless inference
    "router.huggingface.co",  # Hugging Face inference providers (OpenAI-compatible)
    "api.replicate.com",
    "api.voyageai.com",
    "api.jina.ai",
    "bedrock-runtime.*.amazonaws.com",
    "bedrock-agent-runtime.*.amazonaws.com",
    "bedrock-mantle.*.api.aws",  # Bedrock's OpenAI-compatible endpoint (pydantic-ai's bedrock_mantle provider)
    # ChatGPT's Codex backend, the default of langchain-openai's and pydantic-ai's Codex models: only its model
    # paths, the rest of chatgpt.com is a web site
    "chatgpt.com/backend-api/codex/*",
    # OpenAI-compatible providers pydantic-ai's providers call by default
    "api.moonshot.ai",
    "api.z.ai",
    "api.sambanova.ai",
    "api.studio.nebius.com",
    "api.inference.crusoecloud.com",
    "dashscope.aliyuncs.com",  # Alibaba Qwen (mainland)
    "dashscope-intl.aliyuncs.com",
    "models.github.ai",  # GitHub Models
    "api.githubcopilot.com",
    "us.inference.heroku.com",
    "oai.endpoints.kepler.ai.cloud.ovh.net",
    "ai-gateway.vercel.sh",
    "gateway.pydantic.info",  # the Pydantic AI Gateway
    "api.meta.ai",
    # Token exchanges (see token_exchange.py): never stored, answered with a placeholder in replay. In scope so
    # that NO_PROXY cannot send them around the proxy, and so that the rest of an identity provider's traffic
    # (MSAL's OpenID discovery documents, no secret in them) records and replays like any API call.
    "oauth2.googleapis.com",
    "login.microsoftonline.com",
)
"""Hosts under cassette control by default, as globs, each optionally narrowed to paths (`HOST/PATH`); the addon's
scope and the launcher's NO_PROXY wiring share it."""


def default_mode(environ: Mapping[str, str] | None = None) -> str:
    return (os.environ if environ is None else environ).get(MODE_VAR) or DEFAULT_MODE


def default_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The cassette folder used unless told: $CASSETTE_DIR, else ./cassettes."""
    return Path((os.environ if environ is None else environ).get(DIR_VAR) or DEFAULT_DIR)
