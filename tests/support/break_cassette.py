"""Test-only mitmproxy addon: plants a bug in the running cassette addon, to prove the proxy fails closed anyway.

`--set break_cassette=key`: computing a key raises, as an unforeseen input would.
`--set break_cassette=forget`: the request hook does nothing at all, as if a code path forgot a request:
only the independent seal stands between it and the upstream.
"""

from mitmproxy import ctx


class BreakCassette:
    def load(self, loader) -> None:
        loader.add_option("break_cassette", str, "", "key: keying raises; forget: the request hook does nothing.")

    def running(self) -> None:
        cassette = ctx.master.addons.get("cassette")
        if ctx.options.break_cassette == "key":  # every key cache of the run (the run's, each test's), each way in
            cache = type(cassette.keys)
            cache.key = cache.keyed = self.broken_key
        elif ctx.options.break_cassette == "forget":
            cassette.request = self.forgetful_request

    @staticmethod
    def broken_key(*facts) -> str:
        raise RuntimeError("planted bug: the key cannot be computed")

    @staticmethod
    async def forgetful_request(flow) -> None:
        return None


addons = [BreakCassette()]
