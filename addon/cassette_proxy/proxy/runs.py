"""Runs one after another on one proxy: a warm proxy (`cassette serve`) that later `cassette run`s and pytest sessions
reuse instead of starting their own (launch/warm_proxy.py).

A run that owns its proxy gets a fresh one, so its report, its repeat counters
(`cassette_repeats=sequence`) and its current test start empty. A reused proxy
must give the same: the run announces itself over the control channel

    POST http://cassette.control/v1/run/start   {}   → the report, the counters and the current test start again
    POST http://cassette.control/v1/run/end     {}   → {"report": <this run's report>} once its recordings are written

and gets its own report back at its end, as the proxy would have written it on
shutdown. The launcher lets one run at a time use a warm proxy (a lease), so
the counts are the run's.
"""

from __future__ import annotations

from ..core.report import Report
from .control_channel import CurrentTest
from .record import Recorder
from .sequence import Sequencer


class Runs:
    def __init__(self, report: Report, recorder: Recorder, sequencer: Sequencer, control: CurrentTest) -> None:
        self.report = report
        self.recorder = recorder
        self.sequencer = sequencer
        self.control = control
        control.on_run_start, control.on_run_end = self.start, self.end

    def start(self) -> dict:
        """The run's report, counters and test, as a fresh proxy has them."""
        self.recorder.wait_idle()  # the previous run's last recordings are counted in its report, not this one's
        self.report.reset()
        self.sequencer.reset()
        self.control.end_test()
        return {"run": "started"}

    def end(self) -> dict:
        """This run's report, once every recording it started is written and counted."""
        self.recorder.wait_idle()
        return {"report": self.report.to_json()}
