"""Start the proxy on a free port, run COMMAND with every common runtime pointed at it, stop the proxy, print a
summary and exit with COMMAND's status.

`cassette run -- COMMAND`: one proxy around one test command, in any language.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading

from ..core.report import strict_failures, summary
from ..launch import isolate, launcher, lifeline, silent_run, warm_proxy
from ..launch.enclosing_run import StdioReports
from ..launch.outer_proxy import OUTER_PROXY_VAR, describe
from . import add_command, proxy_flags, serve

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(subparsers, "run", __doc__)
    proxy_flags.add_arguments(parser)
    parser.add_argument(
        "--strict",
        action="store_true",
        help="Exit non-zero when there was a miss, a cassette error or (in replay) an upstream request, "
        "even if the command swallowed it and succeeded.",
    )
    parser.add_argument(
        "--keep", action="store_true",
        help="Leave the proxy running after COMMAND as a warm proxy (`cassette serve --detach`), for later runs with "
        f"the same settings to reuse; it stops after {warm_proxy.IDLE_DEFAULT / 60:.0f} min without a run, or on "
        "`cassette serve --stop`.",
    )  # fmt: skip
    parser.add_argument(
        "--isolate", action="store_true",
        help="Run COMMAND and everything it starts in a network namespace of its own (Linux), where the proxy is "
        "the only way out: a client that ignores the proxy variables fails at once instead of reaching the network "
        "or this machine's other listeners.",
    )  # fmt: skip
    parser.add_argument(
        "--isolate-port", type=int, action="append", default=[], metavar="PORT",
        help="With --isolate: COMMAND may still reach this machine's 127.0.0.1:PORT (a database, a service "
        "container), directly, not through the proxy. Repeatable.",
    )  # fmt: skip
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise launcher.LauncherError("no command to run: cassette run [options] -- COMMAND ...")
    if args.isolate_port and not args.isolate:
        raise launcher.LauncherError("--isolate-port lets an isolated COMMAND reach a port: it needs --isolate")
    if bad := [port for port in args.isolate_port if not 0 < port < 65536]:
        raise launcher.LauncherError(f"--isolate-port {bad[0]}: not a port; give 1-65535")
    for sig in FORWARDED_SIGNALS:  # until COMMAND runs: exit through the finally blocks that stop mitmdump
        signal.signal(sig, _exit_on_signal)
    settings = proxy_flags.settings_from_arguments(args, os.environ)
    proxy = _warm(settings, keep=args.keep)
    if proxy is None:
        # COMMAND starts while mitmdump does: its first connections wait until the proxy takes them (launcher.py).
        proxy = launcher.start(settings, wait=False)
    stdio = StdioReports()  # what `cassette mcp` servers in COMMAND count (enclosing_run.py)
    try:
        # A pytest plugin in COMMAND uses this proxy instead of starting its own (outer_proxy.py).
        env = {**proxy.client_env(os.environ), OUTER_PROXY_VAR: describe(proxy), **stdio.env}
        isolated = [*args.isolate_port] if args.isolate else None
        status, escapes = _run_command(command, env, proxy, isolated)
    finally:
        node_bypassed = proxy.node_fetch_bypassed
        report = stdio.merged(proxy.stop(), proxy.settings.report)
    print(summary(report), file=sys.stderr)
    if escapes:
        print(escapes, file=sys.stderr)
    silence = (
        silent_run.warning(report, os.environ, proxy.settings.controlled_hosts(), node_bypassed) if report else None
    )
    if silence:
        print(silence, file=sys.stderr)
    failures = [
        *strict_failures(report),
        *([silent_run.STRICT_FAILURE] if silence else []),
        *(["direct attempts to leave the namespace (--isolate)"] if escapes else []),
    ]
    failures = failures if args.strict else []
    if failures:
        print(f"cassette: --strict: failing the run for {', '.join(failures)}", file=sys.stderr)
        return status or 1
    return status


def _warm(settings: launcher.Settings, keep: bool) -> launcher.RunningProxy | None:
    """This run on the warm proxy with its settings (warm_proxy.py); with `keep`, one started first if none serves."""

    def say(message: str) -> None:
        print(message, file=sys.stderr)

    proxy = warm_proxy.attach(settings, os.environ, say)
    if proxy is None and keep and serve.detach(settings, os.environ, warm_proxy.IDLE_DEFAULT) is not None:
        proxy = warm_proxy.attach(settings, os.environ, say)
    return proxy


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _run_command(
    command: list[str], env: dict[str, str], proxy: launcher.RunningProxy, isolated: list[int] | None
) -> tuple[int, str | None]:
    """COMMAND's exit status (128 + N when killed by signal N, as shells report it), and when `isolated` (the
    machine's ports COMMAND may still reach besides the proxy's) the summary's line for the direct attempts
    refused in its namespace (None: none).

    Ctrl-C reaches COMMAND directly (same process group) and is ignored here, so
    the proxy outlives the suite's teardown; SIGTERM and SIGHUP sent to us are
    passed on to COMMAND. COMMAND starts before the proxy is up: when it does not
    come up, COMMAND is stopped (SIGTERM) and the run fails with the proxy's error.
    """
    relay = None
    if isolated is not None:
        ports = [int(proxy.url.rsplit(":", 1)[1]), *proxy.reverse_ports.values()]
        child, relay = isolate.start(command, env, list(dict.fromkeys([*ports, *isolated])))
    else:
        try:
            # Killed outright (SIGKILL), `cassette run` cannot stop COMMAND: the kernel sends it SIGTERM (lifeline.py).
            child = subprocess.Popen(command, env=env, preexec_fn=lifeline.die_with_parent(signal.SIGTERM))
        except FileNotFoundError:
            raise launcher.LauncherError(f"command not found: {command[0]}") from None
    failure: list[launcher.LauncherError] = []

    def watch() -> None:
        try:
            proxy.wait_ready()
        except launcher.LauncherError as e:
            failure.append(e)
            if child.poll() is None:
                child.terminate()

    watcher = threading.Thread(target=watch, name="cassette proxy start", daemon=True)
    watcher.start()
    previous = {sig: signal.signal(sig, lambda sig, _: child.send_signal(sig)) for sig in FORWARDED_SIGNALS}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        status = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if relay is not None:
            relay.stop()
    watcher.join()
    if failure:
        raise failure[0]
    return 128 - status if status < 0 else status, relay.summary() if relay is not None else None
