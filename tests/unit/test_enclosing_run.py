"""The `cassette run` around a stdio MCP server (launch/enclosing_run.py): its variables found in an ancestor's
environment when the MCP client stripped the server's, and its servers' reports added to the run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cassette_proxy.core.report import Report
from cassette_proxy.launch.enclosing_run import StdioReports, run_environ

# A client that starts its server with only PATH (as the MCP SDKs do); the server looks the run's variable up.
CLIENT = """
import subprocess, sys
server = "from cassette_proxy.launch.enclosing_run import run_environ; import os, json; " \\
         "print(json.dumps(run_environ(os.environ, ['CASSETTE_RUN_PROXY', 'CASSETTE_MCP_REPORTS'])))"
sys.exit(subprocess.run([sys.executable, "-c", server], env={"PATH": "/usr/bin:/bin"}).returncode)
"""


def test_a_server_whose_client_stripped_the_environment_finds_the_runs_variables():
    run_env = {**os.environ, "CASSETTE_RUN_PROXY": '{"url": "x"}', "CASSETTE_MCP_REPORTS": "/tmp/reports"}
    done = subprocess.run([sys.executable, "-c", CLIENT], env=run_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"CASSETTE_RUN_PROXY": '{"url": "x"}', "CASSETTE_MCP_REPORTS": "/tmp/reports"}


def test_no_run_around_finds_nothing():
    clean = {name: value for name, value in os.environ.items() if not name.startswith("CASSETTE_")}
    done = subprocess.run([sys.executable, "-c", CLIENT], env=clean, capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout) == {} and run_environ({"CASSETTE_RUN_PROXY": "y"}, ["CASSETTE_RUN_PROXY"]) == {
        "CASSETTE_RUN_PROXY": "y"
    }


def test_the_servers_reports_are_added_to_the_runs_and_kept(tmp_path):
    stdio = StdioReports()
    folder = Path(stdio.env["CASSETTE_MCP_REPORTS"])
    server = Report()
    server.started("replay")
    server.hit(None, "stdio/echo/a.json")
    server.write(folder / "mcp-1.json")
    (folder / "mcp-2.json").write_text("{not json")  # a server killed mid-write: left out, said
    run = Report()
    run.started("replay")
    kept = tmp_path / "report.json"
    total = stdio.merged(run, kept)
    assert total is not None and total.hits == 1 and Report.read(kept).hits == 1
    assert not folder.exists()
