"""Which hosts are under cassette control by default; shared by the addon and the launcher's NO_PROXY wiring."""

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
    # Token exchanges (see token_exchange.py): never stored, answered with a placeholder in replay. In scope so
    # that NO_PROXY cannot send them around the proxy, and so that the rest of an identity provider's traffic
    # (MSAL's OpenID discovery documents, no secret in them) records and replays like any API call.
    "oauth2.googleapis.com",
    "login.microsoftonline.com",
)
