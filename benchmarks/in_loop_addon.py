"""Loaded after the cassette addon: big cassettes are parsed on the event loop again, as before issue 16.

`mitmdump -s addon/cassette.py -s benchmarks/in_loop_addon.py`: the benchmark's
comparison for what the replay worker (proxy/replay.py) buys.
"""

from cassette_proxy.proxy import replay

replay.BIG_CASSETTE_BYTES = 1 << 62

addons: list = []
