"""Cassette Proxy: record LLM API calls once, replay them from disk forever."""

__version__ = "0.1.0"
