"""Cassette Proxy benchmarks, side by side in one run: `bash benchmarks/run [--quick]`.

1. Replay throughput and latency: (a) the floor (mitmdump answering a constant),
   (b) our addon replaying hits, (c) mitmproxy's `--server-replay`, (d) the
   fake upstream with no proxy; sequential and with 8 concurrent clients. A
   second floor, measured like the rest, shows the noise of the method.
2. Scale with the number of cassettes: start-up, memory and hit latency.
3. Miss cost in the real openai SDK: our 409 + `x-should-retry: false`
   against a plain 409 and a 500.
4. A suite's worth: 50 streamed chat calls against a paced upstream, live
   (recording through the proxy) against replayed.
5-7. What grows with the work (pressure.py): misses in big endpoint folders,
   big cassettes replayed for the first time (other clients' hits meanwhile,
   peak RSS), a burst of 500 connections.
8. Whole generated pytest suites (vcr_suite.py), small and large: VCR.py's
   in-process replay against `cassette run`, the plugin (shared and per-test
   scope) and a warm proxy, start and stop included; the time to the first
   request and to stop; one test re-run alone.

`--parts` runs a subset, e.g. `--parts throughput,misses` (see PARTS).

Every process listens on 127.0.0.1 and is stopped by PID. The machine is
shared and noisy: the systems run interleaved in many short rounds (drift
between two back-to-back measurements is small), each ratio is the median of
the per-round ratios, and the ratios are the claim, not the absolute numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests" / "support")]

import big_request  # noqa: E402
import load  # noqa: E402
import openai  # noqa: E402
import pressure  # noqa: E402
import record_big  # noqa: E402
import vcr_suite  # noqa: E402
import workload  # noqa: E402
from harness import ADDON, FakeUpstream, free_port, mitmdump_path, stop  # noqa: E402

STARTED = time.perf_counter()
HOST = "127.0.0.1"
SUITE_CALLS = 50
WARM_UP = 100
"""Requests sent to each system of part 1 before it is measured."""
PARTS = (
    "throughput", "firstsight", "scale", "miss", "suite", "misses", "big", "burst", "bigrecord", "bigrequest", "vcr"
)  # fmt: skip
"""`miss` (the openai SDK's time to an exception) uses the cassettes of `throughput`, so it runs only with it."""
RUNNING: list[Mitmdump] = []
"""Every mitmdump started, so that an error anywhere still stops them all (by PID) on the way out."""


class Mitmdump:
    """One mitmdump under test, on its own free port, ready once a probe request is answered."""

    def __init__(self, name: str, folder: Path, args: list[str]):
        self.name = name
        self.folder = folder / name
        self.args = args
        self.port = free_port()

    def start(self, probe: bytes | None = None, expect: int = 200, timeout: float = 600) -> Mitmdump:
        """Start and wait until `probe` is answered `expect`; `ready_s` is the time that took (a hit, for a replay).

        Without a probe, any request will do (the floor answers everything). The timeout is
        generous because `--server-replay` loads 100,000 flows in minutes.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        command = [mitmdump_path(), "--listen-host", HOST, "-p", str(self.port)]
        command += ["--set", f"confdir={self.folder / 'confdir'}", "--set", "connection_strategy=lazy", *self.args]
        log = self.folder / "mitmdump.log"
        began = time.perf_counter()
        self.process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
        RUNNING.append(self)
        probe = probe or workload.raw_request(HOST, 9, workload.chat_body("probe"), via_proxy=True)
        while time.perf_counter() - began < timeout:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name}: mitmdump exited with {self.process.returncode}:\n{log.read_text()}")
            try:
                status, body = load.answer(HOST, self.port, probe)
            except OSError:
                time.sleep(0.005)
                continue
            if status != expect:
                self.stop()
                raise RuntimeError(f"{self.name}: the ready probe got {status}: {body[:300]!r}")
            self.ready_s = time.perf_counter() - began
            return self
        self.stop()
        raise RuntimeError(f"{self.name}: not ready after {timeout} s:\n{log.read_text()}")

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """CPU time the process has used (user + system): a cost the other loads on the machine barely change."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def measure(self, requests: list[bytes], total: int, concurrency: int = 1) -> load.Measurement:
        """Send the requests; the result also carries the proxy's CPU time per request."""
        cpu = self.cpu_seconds()
        measured = load.measure(HOST, self.port, requests, total, concurrency)
        return dataclasses.replace(measured, cpu_ms=(self.cpu_seconds() - cpu) * 1000 / measured.requests)

    def stop(self) -> None:
        stop(self.process)


def ours(
    folder: Path,
    cassettes: Path,
    mode: str = "replay",
    name: str = "ours",
    preload: int | None = None,
    addon: Path = ADDON,
) -> Mitmdump:
    """`addon`: the entry script of the code to run (another tree's `addon/cassette.py`: its package, its workers)."""
    preloading = [] if preload is None else ["--set", f"cassette_preload={preload}"]
    return Mitmdump(
        name,
        folder,
        ["-s", str(addon), "--set", f"cassette_dir={cassettes}", "--set", f"cassette_hosts={HOST}",
         "--set", f"cassette_mode={mode}", "--set", f"cassette_report={folder / name / 'report.json'}", *preloading],
    )  # fmt: skip


def preload_lines(log: Path) -> list[str]:
    """What the proxy logged of its preload (how many cassettes, how long)."""
    return [line.split("cassette: ", 1)[1] for line in log.read_text().splitlines() if "cassette: preloaded" in line]


def server_replay(folder: Path, flows: Path, name: str = "server_replay") -> Mitmdump:
    # server_replay_extra=404: a request it cannot match is an error here, not a silent trip upstream.
    return Mitmdump(
        name,
        folder,
        ["--server-replay", str(flows), "--set", "server_replay_reuse=true", "--set", "server_replay_extra=404"],
    )


def floor(folder: Path, status: int = 200, name: str = "floor", big_bytes: int = 0) -> Mitmdump:
    return Mitmdump(
        name,
        folder,
        [
            "-s",
            str(HERE / "floor_addon.py"),
            "--set",
            f"floor_status={status}",
            "--set",
            f"floor_big_bytes={big_bytes}",
        ],
    )


def pressure_systems(folder: Path, in_loop: bool) -> dict:
    """For pressure.py: name → (factory, replays cassettes as recorded now); see pressure.part_big_bodies."""
    systems = {
        "floor": (lambda cassettes, name, big: floor(folder, name=name, big_bytes=big), True),
        "ours": (lambda cassettes, name, big: ours(folder, cassettes, name=name), True),
    }
    if in_loop:

        def json_ours(cassettes: Path, name: str, big: int) -> Mitmdump:
            # A 200 MB answer in the JSON form (recorded before) is a 330 MB file: over the default 256 MiB limit.
            proxy = ours(folder, cassettes, name=name)
            proxy.args += ["--set", f"cassette_max_size={1 << 30}"]
            return proxy

        def in_loop_ours(cassettes: Path, name: str, big: int) -> Mitmdump:
            proxy = json_ours(cassettes, name, big)
            proxy.args += ["-s", str(HERE / "in_loop_addon.py")]
            return proxy

        systems["ours_json_cassettes"] = (json_ours, False)
        systems["before_json_on_the_loop"] = (in_loop_ours, False)
    return systems


def write_synthetic_cassettes(root: Path, port: int, first: int, count: int) -> None:
    """Cassettes for synthetic requests first..first+count-1, in the real format, keyed as the addon keys them."""
    for i in range(first, first + count):
        body = workload.synthetic_body(i)
        pressure.write_cassette(root, port, body, workload.answer_of(body))


def write_synthetic_flows(flows: Path, port: int, first: int, count: int) -> None:
    python = Path(mitmdump_path()).with_name("python")
    subprocess.run(
        [str(python), str(HERE / "make_flows.py"), str(flows), str(port), str(first), str(count)], check=True
    )


def synthetic_requests(port: int, indices: list[int]) -> list[bytes]:
    return [workload.raw_request(HOST, port, workload.synthetic_body(i), via_proxy=True) for i in indices]


def summary(runs: list[load.Measurement]) -> dict:
    """req/s: the median round; latency percentiles and CPU per request: over every request of every round."""
    pooled = load.Measurement(sum(m.requests for m in runs), sum(m.seconds for m in runs),
                              tuple(latency for m in runs for latency in m.latencies_ms))  # fmt: skip
    figures = {
        "rps": round(statistics.median(m.rps for m in runs), 1),
        "p50_ms": round(pooled.p50, 2),
        "p99_ms": round(pooled.p99, 2),
        "rounds": len(runs),
    }
    if runs[0].cpu_ms is not None:
        figures["proxy_cpu_ms_per_request"] = round(cpu_ms_per_request(runs), 3)
    return figures


def cpu_ms_per_request(runs: list[load.Measurement]) -> float:
    """Pooled: a short round is only a few ticks of the process's CPU clock (10 ms each)."""
    return sum(m.cpu_ms * m.requests for m in runs) / sum(m.requests for m in runs)


def part_throughput(folder: Path, upstream: FakeUpstream, rounds: int, total: int) -> dict:
    port = int(upstream.url.rsplit(":", 1)[1])
    bodies = [workload.chat_body(f"suite-{i}") for i in range(50)]
    via_proxy = [workload.raw_request(HOST, port, b, via_proxy=True) for b in bodies]
    direct = [workload.raw_request(HOST, port, b, via_proxy=False) for b in bodies]
    # (b′) and (b″) send each of these once: every hit is that cassette's first in the run. (b′) as the proxy
    # runs by default, its cassettes preloaded by a worker as it starts (and while it is measured); (b″) with
    # `cassette_preload=0`, each read on its request, from a folder of its own (the same cassettes).
    first_sight_count = (1 + rounds * 2) * total  # a slice of `total` for the warm-up and for each measurement
    first_sight = synthetic_requests(port, list(range(first_sight_count)))

    # Record the same 50 interactions both ways, through the proxy, from the fake upstream.
    cassettes, flows = folder / "cassettes", folder / "flows.mitm"
    recorder = ours(folder, cassettes, mode="record", name="ours_record").start(via_proxy[0])
    recorder.measure(via_proxy, len(via_proxy))
    recorder.stop()
    writer = Mitmdump("server_replay_record", folder, ["-w", str(flows)]).start(via_proxy[0])
    writer.measure(via_proxy, len(via_proxy))
    writer.stop()
    write_synthetic_cassettes(cassettes, port, 0, first_sight_count)
    cold_cassettes = folder / "cassettes-cold"
    shutil.copytree(cassettes, cold_cassettes)

    systems = {
        "floor": floor(folder).start(),
        # The same floor again, measured like the others: how far apart two identical systems come out
        # is the noise of the method, the margin every other ratio carries.
        "floor_again": floor(folder, name="floor_again").start(),
        "ours": ours(folder, cassettes).start(via_proxy[0]),
        "ours_first_sight": ours(folder, cassettes, name="ours_first_sight").start(via_proxy[0]),
        "ours_first_sight_cold": ours(folder, cold_cassettes, name="ours_first_sight_cold", preload=0).start(
            via_proxy[0]
        ),
        "server_replay": server_replay(folder, flows).start(via_proxy[0]),
    }
    served_before = upstream.count
    sent = {name: 0 for name in systems}
    unseen = {name: iter(range(0, first_sight_count, total)) for name in ("ours_first_sight", "ours_first_sight_cold")}

    def requests_for(name: str) -> list[bytes]:
        if name in unseen:
            start = next(unseen[name])
            return first_sight[start : start + total]
        return direct if name == "direct" else via_proxy

    results: dict[str, dict[int, list[load.Measurement]]] = {name: {1: [], 8: []} for name in [*systems, "direct"]}
    try:
        order = [*systems, "direct"]
        for name in order:  # warm up every path once
            load.measure(HOST, port if name == "direct" else systems[name].port, requests_for(name), WARM_UP, 1)
            sent[name] = sent.get(name, 0) + WARM_UP
        for r in range(rounds):
            for concurrency in (1, 8):
                for name in order[r % len(order) :] + order[: r % len(order)]:
                    if name == "direct":
                        measured = load.measure(HOST, port, direct, total, concurrency)
                    else:
                        measured = systems[name].measure(requests_for(name), total, concurrency)
                    results[name][concurrency].append(measured)
                    sent[name] += measured.requests
        answered_upstream = upstream.count - served_before
    finally:
        for system in systems.values():
            system.stop()
    proxied = answered_upstream - sent["direct"]
    for name in ("ours", "ours_first_sight", "ours_first_sight_cold"):
        report = json.loads((folder / name / "report.json").read_text())
        if report["counts"]["hits"] != sent[name] + 1 or report["counts"]["misses"] or proxied:
            raise RuntimeError(f"{name}: not all replays were hits: {report['counts']}, {proxied} reached the upstream")
    table = {name: {str(c): summary(runs) for c, runs in by_c.items()} for name, by_c in results.items()}
    # Paired: each round measured the systems back to back, so a ratio per round cancels most of the
    # machine's drift; the figure is the median of those.
    ratios = {}
    pairs = (
        ("ours", "floor"),
        ("ours", "server_replay"),
        ("ours_first_sight", "floor"),
        ("ours_first_sight", "server_replay"),
        ("ours_first_sight_cold", "floor"),
        ("floor_again", "floor"),
    )
    for system, other in pairs:
        for c in (1, 8):
            rounds_of = list(zip(results[system][c], results[other][c], strict=True))
            ratios[f"{system}/{other} req/s c={c}"] = round(statistics.median(a.rps / b.rps for a, b in rounds_of), 3)
            cpu = cpu_ms_per_request(results[other][c]) / cpu_ms_per_request(results[system][c])
            ratios[f"{other}/{system} CPU c={c}"] = round(cpu, 3)
    return {
        "cassettes": len(bodies) + first_sight_count,
        "preloaded": preload_lines(folder / "ours_first_sight" / "mitmdump.log"),
        "requests_per_round": total,
        "systems": table,
        "ratios": ratios,
    }


def part_first_sight(folder: Path, port: int, rounds: int, total: int, trees: dict[str, Path]) -> dict:
    """First-sight hits (preloaded, the default) of several versions of the code side by side, against the floor:
    each tree's `addon/cassette.py` on the same cassettes, interleaved rounds (order rotated), 1 and 8 clients;
    each ratio the median of the per-round ratios to that round's floor. A second floor is the noise control."""
    first_sight_count = (1 + rounds * 2) * total
    requests = synthetic_requests(port, list(range(first_sight_count)))
    cassettes = folder / "firstsight-cassettes"
    write_synthetic_cassettes(cassettes, port, 0, first_sight_count)
    probe = requests[0]
    systems = {"floor": floor(folder, name="fs_floor").start(), "floor_again": floor(folder, name="fs_floor_again")}
    systems["floor_again"].start()
    for label, tree in trees.items():
        systems[label] = ours(folder, cassettes, name=f"fs_{label}", addon=tree / "addon" / "cassette.py")
        systems[label].start(probe)
    unseen = {name: iter(range(total, first_sight_count, total)) for name in trees}  # slice 0: probe and warm-up
    sent = dict.fromkeys(systems, 0)
    results: dict[str, dict[int, list[load.Measurement]]] = {name: {1: [], 8: []} for name in systems}
    try:
        order = list(systems)
        for name in order:  # warm up every path once, on slice 0 (the probe's)
            load.measure(HOST, systems[name].port, requests[:total], WARM_UP, 1)
            sent[name] += WARM_UP
        for r in range(rounds):
            for concurrency in (1, 8):
                for name in order[r % len(order) :] + order[: r % len(order)]:
                    batch = requests[next(unseen[name]) :][:total] if name in unseen else requests[:total]
                    measured = systems[name].measure(batch, total, concurrency)
                    results[name][concurrency].append(measured)
                    sent[name] += measured.requests
    finally:
        for system in systems.values():
            system.stop()
    for label in trees:
        report = json.loads((folder / f"fs_{label}" / "report.json").read_text())
        if report["counts"]["hits"] != sent[label] + 1 or report["counts"]["misses"]:
            raise RuntimeError(f"{label}: not all replays were hits: {report['counts']}")
    ratios = {}
    for name in [*trees, "floor_again"]:
        for c in (1, 8):
            pairs = list(zip(results[name][c], results["floor"][c], strict=True))
            ratios[f"{name}/floor req/s c={c}"] = round(statistics.median(a.rps / b.rps for a, b in pairs), 3)
            ratios[f"{name}/floor req/s c={c} rounds"] = sorted(round(a.rps / b.rps, 3) for a, b in pairs)
            cpu = cpu_ms_per_request(results["floor"][c]) / cpu_ms_per_request(results[name][c])
            ratios[f"floor/{name} CPU c={c}"] = round(cpu, 3)
    return {
        "trees": {label: str(tree) for label, tree in trees.items()},
        "requests_per_round": total,
        "systems": {name: {str(c): summary(runs) for c, runs in by_c.items()} for name, by_c in results.items()},
        "ratios": ratios,
    }


def part_scale(folder: Path, port: int, counts: list[int], server_replay_max: int, hits: int) -> list[dict]:
    cassettes, flows = folder / "scale-cassettes", folder / "scale-flows.mitm"
    rows, have = [], 0
    # A miss on the same endpoint: ours then compares it with the newest recordings there (the 409's diff).
    miss = workload.raw_request(HOST, port, workload.chat_body("never recorded"), via_proxy=True)
    reference = floor(folder, name="floor_scale").start()
    rows.append({"system": "floor", "count": 0, "ready_s": round(reference.ready_s, 2),
                 "rss_start_mb": round(reference.rss_mb(), 1)})  # fmt: skip
    reference.stop()
    for count in counts:
        began = time.perf_counter()
        write_synthetic_cassettes(cassettes, port, have, count - have)
        generated = time.perf_counter() - began
        if count <= server_replay_max:
            write_synthetic_flows(flows, port, have, count - have)
        have = count
        indices = random.Random(count).sample(range(count), min(count, hits))
        requests = synthetic_requests(port, indices)
        candidates = [("ours", lambda n=count: ours(folder, cassettes, name=f"ours_{n}"))]
        if count <= server_replay_max:
            candidates.append(
                ("server_replay", lambda n=count: server_replay(folder, flows, name=f"server_replay_{n}"))
            )
        for system, make in candidates:
            process = make().start(requests[0])
            try:
                rss_start = process.rss_mb()
                measured = process.measure(requests, hits)
                rss_after_hits = process.rss_mb()
                began = time.perf_counter()
                status, _ = load.answer(HOST, process.port, miss)
                miss_ms = (time.perf_counter() - began) * 1000
                if status not in (404, 409):
                    raise RuntimeError(f"{process.name}: a miss got {status}")
                rows.append(
                    {
                        "system": system,
                        "count": count,
                        "ready_s": round(process.ready_s, 2),
                        "rss_start_mb": round(rss_start, 1),
                        "rss_after_hits_mb": round(rss_after_hits, 1),
                        "rss_after_miss_mb": round(process.rss_mb(), 1),
                        "hit_p50_ms": round(measured.p50, 2),
                        "hit_p99_ms": round(measured.p99, 2),
                        "miss_ms": round(miss_ms, 1),
                    }
                )
            finally:
                process.stop()
        print(f"  {count:,} cassettes (written in {generated:.1f} s): {rows[-len(candidates) :]}", flush=True)
    return rows


def time_to_exception(proxy: Mitmdump, base_url: str, attempt: int) -> tuple[float, str]:
    client = openai.OpenAI(
        api_key=workload.API_KEY,
        base_url=base_url,
        http_client=openai.DefaultHttpxClient(proxy=f"http://{HOST}:{proxy.port}"),
    )
    began = time.perf_counter()
    try:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"a prompt never recorded {attempt}"}]
        )
    except openai.APIStatusError as e:
        return time.perf_counter() - began, f"{type(e).__name__} {e.status_code}"
    finally:
        client.close()
    raise RuntimeError(f"{proxy.name}: the miss did not raise")


def part_miss(folder: Path, port: int, cassettes: Path, repeats: int) -> dict:
    """Misses against the cassettes of part 1, so that ours pays for its closest-recording diff too."""
    hit = synthetic_requests(port, [0])[0]
    systems = {
        "ours_409_no_retry": ours(folder, cassettes, name="ours_miss").start(hit),
        "plain_409": floor(folder, 409, name="floor_409").start(expect=409),
        "plain_500": floor(folder, 500, name="floor_500").start(expect=500),
    }
    base_url = f"http://{HOST}:{port}/v1"
    seconds: dict[str, list[float]] = {name: [] for name in systems}
    raised = {}
    try:
        for attempt in range(repeats):
            for name, proxy in systems.items():
                elapsed, raised[name] = time_to_exception(proxy, base_url, attempt)
                seconds[name].append(elapsed)
    finally:
        for proxy in systems.values():
            proxy.stop()
    out = {name: {"seconds": round(statistics.median(s), 3), "raised": raised[name]} for name, s in seconds.items()}
    for other in ("plain_409", "plain_500"):
        out[f"saved_per_miss_vs_{other}_s"] = round(out[other]["seconds"] - out["ours_409_no_retry"]["seconds"], 2)
    return out


def run_suite(proxy: Mitmdump, base_url: str) -> tuple[float, list[str]]:
    """The example suite: 50 streamed chat calls, one after the other, as a test suite makes them."""
    client = openai.OpenAI(
        api_key=workload.API_KEY,
        base_url=base_url,
        http_client=openai.DefaultHttpxClient(proxy=f"http://{HOST}:{proxy.port}"),
    )
    answers = []
    began = time.perf_counter()
    for i in range(SUITE_CALLS):
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": f"suite test {i}"}], stream=True
        )
        answers.append("".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices))
    elapsed = time.perf_counter() - began
    client.close()
    return elapsed, answers


def part_suite(folder: Path) -> dict:
    paced = FakeUpstream(folder / "paced_upstream", script=HERE / "slow_upstream.py").start()
    cassettes = folder / "suite-cassettes"
    port = int(paced.url.rsplit(":", 1)[1])
    probe = workload.raw_request(HOST, port, workload.chat_body("probe"), via_proxy=True)  # not streamed: no pacing
    try:
        base_url = f"{paced.url}/v1"
        recorder = ours(folder, cassettes, mode="record", name="suite_record").start(probe)
        try:
            live, live_answers = run_suite(recorder, base_url)
        finally:
            recorder.stop()
        served = paced.count
        replayer = ours(folder, cassettes, name="suite_replay").start(probe)
        try:
            replayed, replay_answers = run_suite(replayer, base_url)
        finally:
            replayer.stop()
        if replay_answers != live_answers or paced.count != served:
            raise RuntimeError("the replayed suite did not get the recorded answers, or reached the upstream")
    finally:
        paced.stop()
    return {
        "calls": SUITE_CALLS,
        "live_s": round(live, 2),
        "replay_s": round(replayed, 2),
        "live/replay": round(live / replayed, 1),
    }


def machine() -> dict:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor(),
    )
    version = subprocess.run([mitmdump_path(), "--version"], capture_output=True, text=True).stdout.splitlines()
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "mitmproxy": version[0].split(":", 1)[1].strip(),
        "proxy_python": version[1].split(":", 1)[1].strip(),
        "client_python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
    }


def markdown(results: dict) -> str:
    lines = [
        f"Machine: {results['machine']['cpus']} × {results['machine']['cpu_model']}, mitmproxy "
        f"{results['machine']['mitmproxy']}, load average at start {results['machine']['load_average_at_start'][0]:.1f}"
        f", at end {results['machine'].get('load_average_at_end', [0])[0]:.1f}.",
    ]
    for part, section in (
        ("throughput", markdown_throughput),
        ("firstsight", markdown_first_sight),
        ("scale", markdown_scale),
        ("miss", markdown_miss),
        ("suite", markdown_suite),
        ("misses", markdown_misses),
        ("big", markdown_big),
        ("burst", markdown_burst),
        ("bigrecord", markdown_bigrecord),
        ("bigrequest", markdown_bigrequest),
        ("vcr", vcr_suite.markdown_vcr),
    ):
        if part in results:
            lines += ["", *section(results)]
    return "\n".join(lines)


def markdown_throughput(results: dict) -> list[str]:
    t = results["throughput"]
    r = t["ratios"]
    lines = [
        f"**First-sight hits** (every request and cassette once, a fresh proxy): "
        f"**{r['ours_first_sight/floor req/s c=1']}×** the floor's req/s with 1 client, "
        f"**{r['ours_first_sight/floor req/s c=8']}×** with 8 (against `--server-replay`: "
        f"{r['ours_first_sight/server_replay req/s c=1']}× and {r['ours_first_sight/server_replay req/s c=8']}×); "
        f"without the preload, {r['ours_first_sight_cold/floor req/s c=1']}× and "
        f"{r['ours_first_sight_cold/floor req/s c=8']}×. Preload: {'; '.join(t.get('preloaded', [])) or 'none'}. "
        f"Noise control (a second floor / the floor): "
        f"{r['floor_again/floor req/s c=1']}× and {r['floor_again/floor req/s c=8']}×. Repeated hits: "
        f"{r['ours/floor req/s c=1']}× and {r['ours/floor req/s c=8']}×; against `--server-replay`: "
        f"{r['ours/server_replay req/s c=1']}× and {r['ours/server_replay req/s c=8']}×.",
        "",
        f"**1. Replay throughput** ({t['cassettes']} cassettes on disk; {results['rounds']} interleaved rounds "
        f"of {t['requests_per_round']} requests: req/s is the median round, latency and CPU are over all requests)",
        "",
        "| system | req/s (1 client) | p50 ms | p99 ms | proxy CPU ms/req "
        "| req/s (8 clients) | p50 ms | p99 ms | proxy CPU ms/req |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    names = {
        "floor": "(a) floor: mitmdump + constant-answer addon",
        "floor_again": "(a′) the same floor, a second process (noise control)",
        "ours_first_sight": "(b′) cassette addon, hits (each request and cassette once; preloaded, the default)",
        "ours_first_sight_cold": "(b″) the same, `cassette_preload=0` (each cassette read on its request)",
        "ours": "(b) cassette addon, hits (50 requests, each sent again and again)",
        "server_replay": "(c) mitmdump --server-replay",
        "direct": "(d) fake upstream, no proxy",
    }
    for name, label in names.items():
        cells = [label]
        for figures in (t["systems"][name]["1"], t["systems"][name]["8"]):
            cpu = figures.get("proxy_cpu_ms_per_request")
            cells += [f"{figures['rps']:.0f}", f"{figures['p50_ms']:.2f}", f"{figures['p99_ms']:.2f}"]
            cells.append("–" if cpu is None else f"{cpu:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Ratios (req/s: median of the per-round ratios; CPU: over all requests; above 1 favours ours): "]
    lines[-1] += ", ".join(f"{k} = **{v}**" for k, v in r.items())
    return lines


def markdown_first_sight(results: dict) -> list[str]:
    t = results["firstsight"]
    r = t["ratios"]
    lines = [
        f"**First-sight hits, versions side by side** ({results['rounds']} interleaved rounds of "
        f"{t['requests_per_round']} requests; each ratio the median of the per-round ratios to the floor)",
        "",
        "| system | req/s (1 client) | ÷ floor | proxy CPU ms/req | req/s (8 clients) | ÷ floor | proxy CPU ms/req |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, figures in t["systems"].items():
        one, eight = figures["1"], figures["8"]
        ratio = {c: r.get(f"{name}/floor req/s c={c}", 1.0) for c in (1, 8)}
        label = f"{name} ({t['trees'][name]})" if name in t["trees"] else name
        lines.append(
            f"| {label} | {one['rps']} | {ratio[1]:.3f} | {one['proxy_cpu_ms_per_request']} | {eight['rps']} | "
            f"{ratio[8]:.3f} | {eight['proxy_cpu_ms_per_request']} |"
        )
    return lines


def markdown_scale(results: dict) -> list[str]:
    lines = [
        "**2. Scale with the number of cassettes** (1,000 hits on random cassettes, sequential)",
        "",
        "| system | cassettes / flows | ready s | RSS at start MB | RSS after hits MB | hit p50 ms | hit p99 ms "
        "| one miss ms | RSS after it MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in results["scale"]:
        lines.append(
            f"| {row['system']} | {row['count']:,} | {row['ready_s']} | {row['rss_start_mb']} "
            f"| {row.get('rss_after_hits_mb', '')} | {row.get('hit_p50_ms', '')} | {row.get('hit_p99_ms', '')} "
            f"| {row.get('miss_ms', '')} | {row.get('rss_after_miss_mb', '')} |"
        )
    return lines


def markdown_miss(results: dict) -> list[str]:
    m = results["miss"]
    lines = [
        "**3. Miss cost** (openai SDK, default settings: time from the call to the exception)",
        "",
        "| answer to a miss | seconds | raised |",
        "|---|---:|---|",
    ]
    for name, label in (
        ("ours_409_no_retry", "ours: 409 + `x-should-retry: false`"),
        ("plain_409", "plain 409"),
        ("plain_500", "500"),
    ):
        lines.append(f"| {label} | {m[name]['seconds']} | {m[name]['raised']} |")
    lines.append(
        f"\nSaved per miss: {m['saved_per_miss_vs_plain_409_s']} s against a plain 409, "
        f"{m['saved_per_miss_vs_plain_500_s']} s against a 500."
    )
    return lines


def markdown_suite(results: dict) -> list[str]:
    s = results["suite"]
    return [
        f"**4. A suite's worth**: {s['calls']} streamed chat calls (300 ms to first byte, 30 events over 1 s): "
        f"live (recording) {s['live_s']} s, replayed {s['replay_s']} s, **{s['live/replay']}×** faster."
    ]


def markdown_misses(results: dict) -> list[str]:
    rows = results["misses"]
    lines = [
        "**5. Miss latency against the endpoint folder's size** (a fresh proxy per size; the first miss lists "
        "the folder, then 10 misses with other bodies)",
        "",
        "| cassettes in the endpoint | first miss ms | later misses p50 ms | later misses max ms |",
        "|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(f"| {row['count']:,} | {row['first_miss_ms']} | {row['miss_p50_ms']} | {row['miss_max_ms']} |")
    lines.append(
        f"\nLater misses, largest folder / smallest: **{rows[-1]['miss_p50_ms'] / rows[0]['miss_p50_ms']:.2f}×**."
    )
    return lines


def markdown_big(results: dict) -> list[str]:
    big = results["big"]
    lines = [
        f"**6. Big cassettes replayed for the first time**: {big['concurrent']} clients fetch big cassettes at once "
        "while another sends small hits on one connection",
        "",
        "ours: cassettes as recording writes them now (a JSON body above 1 MB as text), built by a replay worker; "
        "ours_json_cassettes: cassettes recorded before (JSON), built by a replay worker; before_json_on_the_loop: "
        "those parsed on the event loop, as before issue 16; floor: a ready body of the same size.",
        "",
        "| system | body MB | small hit p50 ms | small hit max ms | small hits meanwhile | slowest big fetch s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in big["stalls"]:
        lines.append(
            f"| {row['system']} | {row['body_mb']} | {row['small_p50_ms']} | {row['small_max_ms']} "
            f"| {row['small_hits_during']} | {row['big_max_s']} |"
        )
    lines += [
        "",
        "Peak RSS (proxy + replay workers, sampled every 10 ms), one big cassette fetched:",
        "",
        "| system | body MB | cassette file MB | RSS at start MB | peak RSS MB | (peak − start) / body "
        "| first replay s | small hit max ms |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in big["memory"]:
        lines.append(
            f"| {row['system']} | {row['body_mb']} | {row['cassette_file_mb']} | {row['rss_start_mb']} "
            f"| {row['peak_rss_mb']} | {row['peak_over_start_per_body']} | {row['first_replay_s']} "
            f"| {row['small_max_ms']} |"
        )
    return lines


def markdown_burst(results: dict) -> list[str]:
    lines = [
        f"**7. A burst of {pressure.BURST} connections** opened at once, one small hit each",
        "",
        "| system | answered | failed | p50 s | slowest s | wall s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in results["burst"]:
        lines.append(
            f"| {row['system']} | {row['answered']} | {row['failed']} | {row['p50_s']} | {row['max_s']} "
            f"| {row['wall_s']} |"
        )
    return lines


def markdown_bigrecord(results: dict) -> list[str]:
    lines = [
        "**8. Big answers recorded** (one client records a big embeddings answer while another sends small hits; "
        "`relay`: mitmdump without the addon passing the same bytes on), then replayed by a fresh proxy",
        "",
        "| system | body MB | record s | small hit max ms | peak RSS MB | (peak − start) / body | cassette MB "
        "| stored as | first replay s | its small hit max ms | its (peak − start) / body |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in results["bigrecord"]:
        lines.append(
            f"| {r['system']} | {r['body_mb']} | {r['record_s']} | {r['record_small_max_ms']} "
            f"| {r['record_peak_rss_mb']} | {r['record_peak_over_start_per_body']} | {r.get('cassette_mb', '–')} "
            f"| {r.get('body_format', '–')} | {r.get('replay_s', '–')} | {r.get('replay_small_max_ms', '–')} "
            f"| {r.get('replay_peak_over_start_per_body', '–')} |"
        )
    return lines


def markdown_bigrequest(results: dict) -> list[str]:
    lines = [
        "**8b. Big requests** (one client sends a big chat request while another sends small hits; `floor`: mitmdump "
        "answering a constant, what receiving the bytes costs mitmproxy; median of interleaved rounds)",
        "",
        "| system | request MB | small hit max ms | ÷ floor's (same round) | small hit p50 ms | big request s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results["bigrequest"]:
        lines.append(
            f"| {r['system']} | {r['body_mb']} | {r['small_max_ms']} | {r['over_floor']} | {r['small_p50_ms']} "
            f"| {r['big_s']} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and requests, scale only to 10,000")
    parser.add_argument("--rounds", type=int, help="interleaved rounds of part 1 (default 30, quick 6)")
    parser.add_argument(
        "--server-replay-max",
        type=int,
        default=10_000,
        help="largest flow count to load into --server-replay (100000 adds about 4 minutes and 1 GB)",
    )
    parser.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="LABEL=TREE",
        help="part firstsight: also run the code of TREE (a `git worktree add --detach TREE REV`) as LABEL",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results", help="folder for the JSON results")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--miss-counts", default="200,2000,20000,100000", help="cassettes in the miss's folder")
    parser.add_argument("--big-mb", default="20,50", help="big cassette sizes (MB) timed against small hits")
    parser.add_argument("--rss-mb", default="20,50,200", help="big cassette sizes (MB) whose peak RSS is measured")
    parser.add_argument("--record-mb", default="50,200", help="big answer sizes (MB) recorded through the proxy")
    parser.add_argument("--request-mb", default="50", help="big request sizes (MB) sent while small hits are timed")
    parser.add_argument("--request-rounds", type=int, default=3, help="interleaved rounds of the big-request part")
    parser.add_argument("--vcr-rounds", type=int, default=5, help="interleaved rounds of the whole-suite part (>= 3)")
    parser.add_argument("--vcr-tests", default="36,144", help="sizes of the whole suites (multiples of 6)")
    parser.add_argument("--vcr-before", metavar="REV", help="also run the whole-suite routes with this revision's code")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if parts - set(PARTS):
        parser.error(f"--parts: {sorted(parts - set(PARTS))} unknown; choose from {', '.join(PARTS)}")
    rounds = args.rounds or (6 if args.quick else 30)
    total = 160
    counts = [100, 1_000, 10_000] if args.quick else [100, 1_000, 10_000, 100_000]

    folder = Path(tempfile.mkdtemp(prefix="cassette-bench-"))
    results: dict = {"started": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine(), "rounds": rounds}
    upstream = FakeUpstream(folder / "upstream").start()
    port = int(upstream.url.rsplit(":", 1)[1])
    try:
        if "throughput" in parts:
            print("1. replay throughput and latency ...", flush=True)
            results["throughput"] = part_throughput(folder, upstream, rounds, total)
        if "firstsight" in parts:
            trees = {"this": HERE.parent, **dict(_labelled(code) for code in args.code)}
            print(f"1b. first-sight hits of {', '.join(trees)} against the floor ...", flush=True)
            results["firstsight"] = part_first_sight(folder, port, rounds, total, trees)
        if "scale" in parts:
            print("2. scale with the number of cassettes ...", flush=True)
            results["scale"] = part_scale(folder, port, counts, args.server_replay_max, hits=1_000)
        if "miss" in parts and "throughput" in parts:
            print("3. miss cost in the openai SDK ...", flush=True)
            results["miss"] = part_miss(folder, port, folder / "cassettes", repeats=3)
        if "suite" in parts:
            print("4. a suite's worth ...", flush=True)
            results["suite"] = part_suite(folder)
        if "misses" in parts:
            print("5. miss latency against the size of the endpoint folder ...", flush=True)
            miss_counts = [int(c) for c in args.miss_counts.split(",")]
            results["misses"] = pressure.part_misses(
                folder, port, miss_counts, lambda cassettes, name: ours(folder, cassettes, name=name), misses=10
            )
        if "big" in parts:
            print("6. big cassettes replayed for the first time ...", flush=True)
            results["big"] = pressure.part_big_bodies(
                folder,
                port,
                [int(m) for m in args.big_mb.split(",") if m],
                [int(m) for m in args.rss_mb.split(",") if m],
                pressure_systems(folder, in_loop=True),
            )
        if "burst" in parts:
            print(f"7. a burst of {pressure.BURST} connections ...", flush=True)
            results["burst"] = pressure.part_burst(folder, port, pressure_systems(folder, in_loop=False))
        if "bigrecord" in parts:
            print("8. big answers recorded ...", flush=True)
            results["bigrecord"] = record_big.part_big_records(
                folder,
                [int(m) for m in args.record_mb.split(",") if m],
                {
                    "relay": lambda cassettes, name, mode: Mitmdump(name, folder, []),
                    "ours": lambda cassettes, name, mode: ours(folder, cassettes, mode=mode, name=name),
                },
            )
        if "bigrequest" in parts:
            print("8b. big requests sent ...", flush=True)

            def big_request_ours(cassettes: Path, name: str, mode: str) -> Mitmdump:
                proxy = ours(folder, cassettes, mode=mode, name=name)
                proxy.args += ["--set", "cassette_preload=0"]  # the big cassette is read when its request comes
                return proxy

            results["bigrequest"] = big_request.part_big_requests(
                folder,
                port,
                [int(m) for m in args.request_mb.split(",") if m],
                args.request_rounds,
                {
                    "floor": (lambda cassettes, name, mode: floor(folder, name=name), "replay", 200),
                    "ours_hit": (big_request_ours, "replay", 200),
                    "ours_miss": (big_request_ours, "replay", 409),
                    "ours_record": (big_request_ours, "record", 200),
                },
            )
        if "vcr" in parts:
            sizes = tuple(int(n) for n in args.vcr_tests.split(","))
            print(f"9. whole suites of {args.vcr_tests} tests: VCR.py against every route of ours ...", flush=True)
            results["vcr"] = vcr_suite.part_vcr(folder, upstream, max(3, args.vcr_rounds), sizes, args.vcr_before)
    except BaseException:
        print(f"failed; the processes' logs are kept in {folder}", file=sys.stderr)
        raise
    finally:
        for process in RUNNING:
            process.stop()
        upstream.stop()
    results["machine"]["load_average_at_end"] = os.getloadavg()
    results["seconds"] = round(time.perf_counter() - STARTED, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / f"{results['started'].replace(':', '')}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print()
    print(markdown(results))
    print(f"\nJSON: {out}  (full run {results['seconds']} s; removing {folder} ...)", flush=True)
    shutil.rmtree(folder, ignore_errors=True)


def _labelled(code: str) -> tuple[str, Path]:
    label, equals, tree = code.partition("=")
    if not equals or not (Path(tree) / "addon" / "cassette.py").is_file():
        raise SystemExit(f"--code {code!r}: write LABEL=TREE, TREE a source tree holding addon/cassette.py")
    return label, Path(tree).resolve()


if __name__ == "__main__":
    main()
