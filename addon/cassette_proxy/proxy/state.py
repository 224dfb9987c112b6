"""What the addon decided for one request: one typed object in `flow.metadata`, read by every hook."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mitmproxy import http

    from .control_channel import RequestRules
    from .record import RecordTarget
    from .stream_recorder import StreamRecorder

METADATA_KEY = "cassette"


@dataclass(slots=True)
class FlowState:
    outcome: str | None = None
    """hit, miss, error, offline, control, forwarded, passthrough, token_exchange, telemetry, browser_background,
    session (a WebSocket upgrade routed to the in-proxy server that plays a recorded session, sessions.py):
    set once the request hook has decided."""
    target: RecordTarget | None = None
    """Where a forwarded request's response will be saved (record and update modes)."""
    recorder: StreamRecorder | None = None
    """The live recorder of a streamed response being saved."""
    timed_replay: bool = False
    """Routed to the in-proxy server that plays a recorded stream with its timing."""
    mcp_session: str | None = None
    """A replayed MCP answer's session: the `Mcp-Session-Id` of the request it answers (addon.in_session)."""
    rules: RequestRules | None = None
    """The rules of the request's own test (control_channel.py), for the hooks after `request`."""

    @property
    def answered_here(self) -> bool:
        """The addon made the response itself (whole), so the response hooks have nothing to do."""
        return (
            self.outcome
            in ("hit", "miss", "error", "offline", "token_exchange", "telemetry", "control", "browser_background")
            and not self.timed_replay
        )


def state_of(flow: http.HTTPFlow) -> FlowState | None:
    state = flow.metadata.get(METADATA_KEY)
    return state if isinstance(state, FlowState) else None


def new_state(flow: http.HTTPFlow) -> FlowState:
    state = flow.metadata[METADATA_KEY] = FlowState()
    return state
