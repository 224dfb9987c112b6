"""Runs one after another on one proxy: a warm proxy (`cassette serve`) that later `cassette run`s and pytest sessions
reuse instead of starting their own (launch/warm_proxy.py).

A run that owns its proxy gets a fresh one, so its report, its repeat counters
(`cassette_repeats=sequence`) and its current test start empty. A reused proxy
must give the same: the run announces itself over the control channel

    POST http://cassette.control/v1/run/start   {}   → the report, the counters and the current test start again
    POST http://cassette.control/v1/run/end     {}   → {"report": <this run's report>} once its recordings are written

Both wait, without holding up the proxy's other clients, for every recording
still being written (writer.py: HTTP cassettes and WebSocket sessions alike),
so a recording finished just before a run's end is counted in that run.

and gets its own report back at its end, as the proxy would have written it on
shutdown. The launcher lets one run at a time use a warm proxy (a lease), so
the counts are the run's.
"""

from __future__ import annotations

from ..core.report import Report
from .sequence import Sequencer
from .writer import Writer


class Runs:
    """Given to the control channel (control_channel.CurrentTest), which calls it and forgets its own tests."""

    def __init__(self, report: Report, writer: Writer, sequencer: Sequencer) -> None:
        self.report = report
        self.writer = writer
        self.sequencer = sequencer

    async def start(self) -> dict:
        """The run's report and counters, as a fresh proxy has them (the control channel then forgets the tests)."""
        await self.writer.drained()  # the previous run's last recordings are counted in its report, not this one's
        self.report.reset()
        self.sequencer.reset()
        return {"run": "started"}

    async def end(self) -> dict:
        """This run's report, once every recording it started is written and counted."""
        await self.writer.drained()
        return {"report": self.report.to_json()}
