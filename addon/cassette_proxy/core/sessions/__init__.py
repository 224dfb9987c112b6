"""Conversations over one connection: WebSocket sessions matched message by message, Responses turns, MCP."""
