"""A WebSocket side that drops its connection is relayed as a drop, never as a clean close.

When one side of a WebSocket session loses its TCP connection without a close
frame, mitmproxy's WebSocket layer relays the close wsproto reads for it to the
other side: code 1006 (abnormal closure), which may not be sent in a close frame,
so wsproto sends 1000 (normal closure) instead, before any addon hook runs. A
client whose upstream was cut off mid-answer was told the session ended
normally, while the run report (proxy/websocket/sessions.py) says it was cut off with
1006: the recording is not saved, and the client has no way to know why.

Installed by the addon at load, this makes mitmproxy send nothing for that
close: the TCP connection is then closed without a close frame, and the other
side sees what it would have seen without the proxy, a dropped connection
(1006). Any other close, a server's 1011 or a client's 1000, is relayed as it
came. mitmproxy 11 and 12 have the same `WebsocketConnection.send2`; a version
without it keeps mitmproxy's own behaviour, and the report says so.
"""

from __future__ import annotations

from typing import Any

from mitmproxy.proxy import commands
from mitmproxy.proxy.layers import websocket as websocket_layer
from wsproto.events import CloseConnection
from wsproto.frame_protocol import CloseReason

_MARK = "_cassette_relays_drops"


def install() -> bool:
    """Relay a dropped WebSocket connection as a drop (idempotent); False where mitmproxy has no such hook."""
    connection = getattr(websocket_layer, "WebsocketConnection", None)
    send2 = getattr(connection, "send2", None)
    if connection is None or send2 is None:
        return False
    if getattr(send2, _MARK, False):
        return True

    def relayed(self: Any, event: Any) -> commands.SendData:
        if isinstance(event, CloseConnection) and event.code == CloseReason.ABNORMAL_CLOSURE:
            return commands.SendData(self.conn, b"")  # no close frame: the CloseConnection that follows drops TCP
        return send2(self, event)

    setattr(relayed, _MARK, True)
    connection.send2 = relayed
    return True


def installed() -> bool:
    connection = getattr(websocket_layer, "WebsocketConnection", None)
    return bool(getattr(getattr(connection, "send2", None), _MARK, False))
