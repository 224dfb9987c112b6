"""Pure core: the key, the cassette format, the event format, redaction, the report. No mitmproxy import."""
