"""Test-only mitmproxy addon standing in for DNS: proxied API traffic goes to the fake upstream.

Loaded after the cassette addon (`-s addon/cassette.py -s tests/support/upstream_redirect.py`),
so keys and cassettes still name the real API host the client asked for.
"""

from mitmproxy import ctx, http


class UpstreamRedirect:
    def load(self, loader) -> None:
        loader.add_option("fake_upstream", str, "", "scheme://127.0.0.1:port that every forwarded request goes to.")

    def request(self, flow: http.HTTPFlow) -> None:
        state = flow.metadata.get("cassette")  # a timed stream or a session is routed to the proxy itself
        outcome = getattr(getattr(state, "outcome", None), "value", None)  # proxy/state.py's Outcome, by its value
        routed_here = getattr(state, "timed_replay", False) or outcome == "session"
        if flow.response or flow.error or not ctx.options.fake_upstream or routed_here:
            return
        scheme, address = ctx.options.fake_upstream.split("://", 1)
        host, port = address.rsplit(":", 1)
        flow.request.scheme, flow.request.host, flow.request.port = scheme, host, int(port)


addons = [UpstreamRedirect()]
