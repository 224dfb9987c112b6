"""Other tools' recordings: VCR.py / pytest-recording cassettes, HAR, LangChain's, and VCR's `Cassette` shape."""
