"""WebSocket sessions in the addon: replayed from the session server, recorded live, counted."""
