"""What the addon decided for one request: one typed object in `flow.metadata`, read by every hook."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mitmproxy import http

    from .control_channel import RequestRules
    from .record import RecordTarget
    from .stream_recorder import StreamRecorder

METADATA_KEY = "cassette"


class Outcome(enum.Enum):
    """What the request hook decided for a request, once it has."""

    HIT = "hit"
    """Answered from its cassette (or played from the timed-replay server)."""
    MISS = "miss"
    """Replay mode, no cassette: answered 409 with the nearest recording's diff."""
    ERROR = "error"
    """Refused: an unusable cassette, an ambiguous test, a bug of ours, an unreachable upstream."""
    OFFLINE = "offline"
    """Replay mode, a host outside the scope: refused, never forwarded."""
    CONTROL = "control"
    """A call on the control channel (control_channel.py)."""
    FORWARDED = "forwarded"
    """Record and update modes: sent upstream, its response maybe saved (`FlowState.target`)."""
    PASSTHROUGH = "passthrough"
    """Outside the scope, or mode off: forwarded untouched, never keyed."""
    TOKEN_EXCHANGE = "token_exchange"
    """A credential exchange: answered with a placeholder token in replay, forwarded otherwise."""
    TELEMETRY = "telemetry"
    """A telemetry sink's request (telemetry.py)."""
    BROWSER_BACKGROUND = "browser_background"
    """A browser's own traffic (core/traffic/browser_background.py), answered empty."""
    SESSION = "session"
    """A WebSocket upgrade routed to the session server that plays its recordings (sessions.py)."""


ANSWERED_HERE = (
    Outcome.HIT,
    Outcome.MISS,
    Outcome.ERROR,
    Outcome.OFFLINE,
    Outcome.TOKEN_EXCHANGE,
    Outcome.TELEMETRY,
    Outcome.CONTROL,
    Outcome.BROWSER_BACKGROUND,
)
"""The outcomes whose response the addon made itself, whole (a tuple: members compared by identity, no hash)."""


@dataclass(slots=True)
class FlowState:
    outcome: Outcome | None = None
    """Set once the request hook has decided."""
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
        return self.outcome in ANSWERED_HERE and not self.timed_replay


def state_of(flow: http.HTTPFlow) -> FlowState | None:
    state = flow.metadata.get(METADATA_KEY)
    return state if isinstance(state, FlowState) else None


def new_state(flow: http.HTTPFlow) -> FlowState:
    state = flow.metadata[METADATA_KEY] = FlowState()
    return state
