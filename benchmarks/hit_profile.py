"""What the `request` hook runs on a first-sight hit, in-process: calls, modules, and cProfile's table.

    .venv/proxy/bin/python benchmarks/hit_profile.py [--tree PATH] [--hits 2000] [--top 25]

The addon (the package under `--tree`'s `addon/`, this tree's by default: point it at a `git worktree` of an
older commit to compare) runs in mitmproxy's test context (`taddons`) with the run's defaults, replay mode, over
`--hits` synthetic cassettes (the requests of benchmarks/workload.py); its preload runs to the end first, as it
has by the time a suite's requests come, so every request is a first-sight hit as the `throughput` part sends
them (benchmarks/run.py). Then each request goes once through `request`, under a profiler:

- the calls from one module of the package to another per hit (and the modules a hit passes through), counted
  with `sys.setprofile`: what a reader follows to understand a hit;
- cProfile's table, sorted by own time.

Not a timing to quote (profilers inflate small calls); the throughput part is. Nothing leaves 127.0.0.1.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=HERE.parent, help="the source tree whose addon runs")
    parser.add_argument("--hits", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--time", type=int, default=0, metavar="ROUNDS", help="also time ROUNDS passes, no profiler")
    args = parser.parse_args()
    package = (args.tree / "addon").resolve()
    sys.path[:0] = [str(package), str(HERE), str(HERE.parent / "tests" / "support")]
    import pressure
    import workload
    from cassette_proxy.proxy.addon import CassetteAddon
    from mitmproxy import hooks, http
    from mitmproxy.addons.proxyserver import Proxyserver
    from mitmproxy.test import taddons, tflow

    assert CassetteAddon.__module__ in sys.modules and sys.modules[CassetteAddon.__module__].__file__.startswith(
        str(package)
    ), "the addon must come from --tree"
    port = 9
    with tempfile.TemporaryDirectory(prefix="hit-profile-") as tmp:
        root = Path(tmp) / "cassettes"
        bodies = [workload.synthetic_body(i) for i in range(args.hits)]
        for body in bodies:
            pressure.write_cassette(root, port, body, workload.answer_of(body))
        addon = CassetteAddon()
        with taddons.context(addon, Proxyserver()) as context:
            loop = context.master.event_loop
            context.master.addons.invoke_addon_sync(addon, hooks.ConfigureHook(set(context.options.keys())))
            context.options.update(
                cassette_dir=str(root), cassette_hosts=["127.0.0.1"], cassette_report=str(Path(tmp) / "report.json")
            )

            async def preload() -> None:
                addon.running()
                if addon.preloading is not None:
                    await addon.preloading

            loop.run_until_complete(preload())

            def flow_of(body: bytes) -> http.HTTPFlow:
                flow = tflow.tflow()
                headers = workload.request_headers("127.0.0.1", port, body)
                url = f"http://127.0.0.1:{port}{workload.CHAT_PATH}"
                flow.request = http.Request.make("POST", url, body, headers)
                return flow

            flows = [flow_of(body) for body in bodies]
            half = len(flows) // 2
            calls, modules = count_calls(loop, addon, flows[:half], str(package))
            profiler = cProfile.Profile()

            async def hits() -> None:
                for flow in flows[half:]:
                    await addon.request(flow)

            profiler.enable()
            loop.run_until_complete(hits())
            profiler.disable()
            unanswered = [f for f in flows if f.response is None or f.response.status_code != 200]
            assert not unanswered, f"{len(unanswered)} requests were not hits: {unanswered[0].response}"
            timings = [time_pass(loop, addon, [flow_of(body) for body in bodies]) for _ in range(args.time)]
            addon.done()
    if timings:
        print(f"{args.tree}: the request hook of a (preloaded) hit, µs: median {statistics.median(timings):.1f} "
              f"of {len(timings)} passes (min {min(timings):.1f})")  # fmt: skip
    per_hit = sum(calls.values()) / half
    print(f"{args.tree}: {per_hit:.1f} calls from one module of the package to another per hit, through "
          f"{len(modules)} modules: {', '.join(sorted(modules))}")  # fmt: skip
    for (caller, callee), n in sorted(calls.items(), key=lambda item: -item[1]):
        print(f"  {n / half:5.2f}  {caller} -> {callee}")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())


def time_pass(loop, addon, flows) -> float:
    """CPU µs per request of one pass of `request` over `flows` (new flow objects: mitmproxy makes one per request)."""

    async def hits() -> float:
        began = time.process_time()
        for flow in flows:
            await addon.request(flow)
        return (time.process_time() - began) * 1e6 / len(flows)

    return loop.run_until_complete(hits())


def count_calls(loop, addon, flows, package: str) -> tuple[collections.Counter, set[str]]:
    """Calls whose caller and callee are both in the package and in different modules, over the hits of `flows`;
    and every module of the package a hit ran code of."""
    calls: collections.Counter = collections.Counter()
    modules: set[str] = set()

    def module_of(frame) -> str | None:
        name = frame.f_code.co_filename
        if not name.startswith(package):
            return None
        return name[len(package) + 1 :].removeprefix("cassette_proxy/").removesuffix(".py")

    def tracer(frame, event, arg) -> None:
        if event != "call":
            return
        callee = module_of(frame)
        if callee is None:
            return
        modules.add(callee)
        caller = frame.f_back and module_of(frame.f_back)
        if caller is not None and caller != callee and frame.f_code.co_name != "<genexpr>":
            calls[(f"{caller}", f"{callee}.{frame.f_code.co_name}")] += 1

    async def hits() -> None:
        for flow in flows:
            await addon.request(flow)

    sys.setprofile(tracer)
    try:
        loop.run_until_complete(hits())
    finally:
        sys.setprofile(None)
    return calls, modules


if __name__ == "__main__":
    main()
