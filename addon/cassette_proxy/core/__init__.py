"""Pure core, no mitmproxy import, one folder per concept.

keys/ (the key and its settings), files/ (the formats, reading bounded, writing atomically), reading/ (what a
cassette and a miss say), sessions/ (WebSocket sessions, Responses turns, MCP), traffic/ (what a request is
besides a model call, and whose test it is), secrets/ (redaction, the scrubber), migration/ (other tools'
recordings), drift/ (a recorded answer against a live one), workers/ (work in other processes). At this
folder's top: what every concept shares (defaults, the report, the option table, errors, JSON, the doors out).
"""
