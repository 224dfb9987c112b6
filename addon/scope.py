"""Which hosts are under cassette control by default; shared by the addon and the launcher's NO_PROXY wiring."""

DEFAULT_HOSTS = (
    "api.openai.com",
    "api.anthropic.com",
    "generativelanguage.googleapis.com",
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
    "bedrock-runtime.*.amazonaws.com",
    "bedrock-agent-runtime.*.amazonaws.com",
)
