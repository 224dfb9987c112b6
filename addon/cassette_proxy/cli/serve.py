"""Start the proxy, print `export` lines for its client environment (also available from `cassette env`), show its
log until Ctrl-C or SIGTERM, then print a summary. `cassette run` and pytest sessions with the same settings reuse
it (a warm proxy) instead of starting their own.

`cassette serve`: a long-lived proxy; `cassette env` (env.py) prints its environment for `eval`.

For people who start the proxy themselves, e.g. to run tests from an IDE:
    cassette serve            # in one terminal
    eval "$(cassette env)"    # in another; then run anything

And the warm proxy of the local loop (launch/warm_proxy.py): later `cassette
run`s and pytest sessions with the same settings reuse a serving proxy instead
of starting one. `--detach` serves in the background, `--idle` stops it after a
while without a run, `--stop` stops every warm proxy of this user.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Mapping

from ..core.files.atomic_write import write_atomic
from ..core.report import summary
from ..launch import launcher, warm_proxy
from ..launch.serve_state import state_file, state_header
from ..launch.user_folder import private_folder, private_subfolder
from . import add_command, proxy_flags


def register(subparsers: argparse._SubParsersAction) -> None:
    serve_parser = add_command(subparsers, "serve", __doc__)
    proxy_flags.add_arguments(serve_parser)
    serve_parser.add_argument("--port", type=int, default=0, help="Forward-proxy port; 0 (default) picks a free one.")
    serve_parser.add_argument(
        "--detach", action="store_true",
        help="Serve in the background: return once the proxy is up, leaving it to later `cassette run`s and pytest "
        f"sessions with the same settings; it stops after --idle (default {warm_proxy.IDLE_DEFAULT / 60:.0f}m) "
        "without a run, or on `cassette serve --stop`.",
    )  # fmt: skip
    serve_parser.add_argument(
        "--idle", metavar="DURATION",
        help="Stop after this long with no `cassette run` or pytest session using the proxy, counted from the last "
        "one's end: 90s, 30m, 2h (a number alone: seconds; 0: never). Default: never in the foreground.",
    )  # fmt: skip
    serve_parser.add_argument(
        "--stop", action="store_true", help="Stop every warm proxy of this user (detached or not), then exit."
    )
    serve_parser.set_defaults(func=serve)


def parse_duration(text: str) -> float | None:
    """`90s`, `30m`, `2h`, `45` (seconds) → seconds; `0` → None (never)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not found:
        raise launcher.LauncherError(f"--idle {text!r}: expected a duration such as 90s, 30m or 2h (0: never)")
    seconds = float(found.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[found.group(2)]
    return seconds or None


def serve(args: argparse.Namespace) -> int:
    if args.stop:
        if not warm_proxy.stop_all(print):
            print("cassette: no warm proxy is running for this user")
        return 0
    settings = proxy_flags.settings_from_arguments(args, os.environ)
    idle = parse_duration(args.idle) if args.idle is not None else (warm_proxy.IDLE_DEFAULT if args.detach else None)
    if args.detach:
        registration = detach(settings, os.environ, idle)
        if registration is None:
            return 2
        print(state_file().read_text().partition("\n")[2], end="")
        after = f"after {idle / 60:.0f} min without a run or " if idle else ""
        print(
            f"# {registration.describe()} serves in the background; `cassette run` with these settings reuses it; "
            f'eval "$(cassette env)" elsewhere; it stops {after}on `cassette serve --stop`'
        )
        return 0
    return serve_in_foreground(settings, os.environ, idle, follow_log=True)


def serve_in_foreground(
    settings: launcher.Settings,
    environ: Mapping[str, str],
    idle: float | None,
    follow_log: bool,
    on_registered: Callable[[], None] = lambda: None,
) -> int:
    """Start the proxy, leave its exports and its warm registration, serve until stopped or idle, then clean up.

    Registered before the proxy is up (its ports are known): a run that reuses it at once waits in its queue."""
    state = state_file()
    private_folder(state.parent, create=True)  # before the proxy starts: a refused folder starts nothing
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops cleanly, like Ctrl-C
    try:
        proxy = launcher.start(settings, environ, wait=False)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    registration = None
    try:
        exports = proxy.exports(environ)
        write_atomic(state, f"{state_header(os.getpid())}\n{exports}".encode(), mode=0o600)
        registration = warm_proxy.register(proxy, environ, idle)
        if registration is not None:
            on_registered()
        proxy.wait_ready()
        if follow_log:
            print(exports, end="")
            print(
                f'# serving at {proxy.url} in {proxy.settings.mode} mode; eval "$(cassette env)" elsewhere; Ctrl-C stops',
                flush=True,
            )
        if registration is None:
            print(
                "cassette: a warm proxy with these settings already serves: runs reuse that one, not this",
                file=sys.stderr,
            )
        _serve(proxy, registration, idle, follow_log)
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        if registration is not None:
            registration.remove()
        if state.exists() and state.read_text().startswith(f"{state_header(os.getpid())}\n"):
            state.unlink()
        report = proxy.stop()
    print(summary(report), file=sys.stderr)
    assert proxy.process is not None
    return 0 if proxy.process.returncode in (0, -signal.SIGTERM) else 1


def _serve(
    proxy: launcher.RunningProxy,
    registration: warm_proxy.Registration | None,
    idle: float | None,
    follow_log: bool,
) -> None:
    """Until mitmdump exits, or (with `idle`) no run has held the lease for that long; mitmdump's log copied to
    stderr as it grows when `follow_log`."""
    assert proxy.process is not None
    lease = warm_proxy.Lease(registration) if registration is not None and idle else None
    with proxy.log_path.open(encoding="utf-8", errors="replace") as log:
        while proxy.process.poll() is None:
            chunk = log.read() if follow_log else ""
            if chunk:
                sys.stderr.write(chunk)  # as text: escaped on its way out (cli/__init__.py), mitmproxy's lines too
                sys.stderr.flush()
                continue
            if lease is not None and registration is not None and idle and lease.idle_for() > idle and lease.take():
                # Held from here to the end: a run arriving now finds the lease taken and starts its own.
                registration.remove()
                print(f"cassette: no run for {idle:.0f} s: stopping the warm proxy at {proxy.url}", file=sys.stderr)
                return
            time.sleep(0.2)
        if follow_log:
            sys.stderr.write(log.read())


def detach(
    settings: launcher.Settings, environ: Mapping[str, str], idle: float | None
) -> warm_proxy.Registration | None:
    """Serve `settings` from a background process of its own (a new session, its output in a log file); its
    registration once it is up, or None (the reason printed) when it did not come up or one already serves."""
    folder = private_subfolder("warm")
    log = folder / f"serve-{os.getpid()}.log"
    wanted = warm_proxy.warm_id(warm_proxy.fingerprint(settings, environ))
    if any(r.path.stem == wanted for r in warm_proxy.registrations()):
        print("cassette: a warm proxy with these settings already serves", file=sys.stderr)
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    child = os.fork()
    if child == 0:  # the serving process: never returns into the caller's code
        status, registered = 1, []
        try:
            os.setsid()
            with open(log, "wb") as out:
                os.dup2(out.fileno(), 1)
                os.dup2(out.fileno(), 2)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            status = serve_in_foreground(
                settings, environ, idle, follow_log=False, on_registered=lambda: registered.append(True)
            )
        except launcher.LauncherError as e:  # a port taken, a bad flag: the one line the caller prints
            print(f"cassette: {e}", file=sys.stderr)
            status = 2
        except BaseException:  # the log says what, for the caller still waiting; the exit status that it failed
            traceback.print_exc()
        finally:
            if registered:  # else the caller reads the log, then removes it
                log.unlink(missing_ok=True)
            os._exit(status)
    path = folder / f"{wanted}.json"
    while True:
        if (found := warm_proxy.Registration.read(path)) is not None and found.pid == child:
            return found
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            text = log.read_text(errors="replace") if log.exists() else ""
            log.unlink(missing_ok=True)
            if status >> 8 == 2:  # its own one-line error
                print(text.strip(), file=sys.stderr)
            else:
                print(f"cassette: the warm proxy did not start (exit status {status >> 8}):\n{text}", file=sys.stderr)
            return None
        time.sleep(0.02)
