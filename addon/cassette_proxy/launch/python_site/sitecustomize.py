"""Loaded by every Python process started under `cassette run` or the pytest plugin (this folder is on PYTHONPATH):
carries the test of each request (cassette_carrier.py), then runs the sitecustomize this one hides, if any."""

import importlib.machinery
import importlib.util
import os
import sys

import cassette_carrier  # type: ignore[import-not-found]  # beside this file, on PYTHONPATH

cassette_carrier.install()

_here = os.path.dirname(os.path.abspath(__file__))
_rest = [entry for entry in sys.path if os.path.abspath(entry or ".") != _here]
_spec = importlib.machinery.PathFinder.find_spec("sitecustomize", _rest)
if _spec is not None and _spec.loader is not None:
    _hidden = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_hidden)
