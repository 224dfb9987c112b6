"""The `cassette` command: a thin dispatcher over the subcommand modules, each adding its own parser."""

from __future__ import annotations

import argparse

from . import listing, prune, review, scan, stale

SUBCOMMANDS = (scan, prune, stale, review, listing)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cassette", description="Review, clean and inspect recorded cassettes.")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.register(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)
