"""Browsers' background traffic: what Chromium and Firefox send on their own while an end-to-end suite drives them.

A browser launched under `cassette run` (Playwright, Puppeteer, Selenium) goes
through the proxy, and besides the pages it loads it asks its vendor for
component updates, Safe Browsing lists, field-trial seeds, remote settings and
telemetry. None of it is the application's: in replay it was refused as offline,
so `--strict` failed a suite whose every test passed (Playwright's chromium posts
to update.googleapis.com/service/update2/json in every run). So a request to
one of these hosts, when it is outside `cassette_hosts`, is answered here with
`204 No Content` in every mode: never forwarded, recorded, keyed or missed, and
counted apart in the report (`browser_background`). The browser takes a 204 as
"nothing new" or as a failure it retries later; no page depends on it.

The hosts are the browsers' own, each named after what sends it; a host an
application could call itself (accounts.google.com, www.googleapis.com) is not
among them. Pure: no mitmproxy import.
"""

from __future__ import annotations

import fnmatch

BACKGROUND_HOSTS: dict[str, str] = {
    # Chromium (components/component_updater, components/safe_browsing, components/variations,
    # components/optimization_guide, components/autofill).
    "update.googleapis.com": "Chromium component updater",
    "clients2.google.com": "Chromium component and extension updates",
    "clients2.googleusercontent.com": "Chromium component downloads",
    "redirector.gvt1.com": "Chromium component downloads",
    "*.gvt1.com": "Chromium component downloads",
    "safebrowsing.googleapis.com": "Safe Browsing (Chromium, Firefox)",
    "sb-ssl.google.com": "Safe Browsing",
    "clientservices.googleapis.com": "Chromium field trials (variations seed)",
    "optimizationguide-pa.googleapis.com": "Chromium optimization guide",
    "content-autofill.googleapis.com": "Chromium autofill",
    # Firefox (services/settings, toolkit/components/telemetry, url-classifier, captive portal, update, push).
    "firefox.settings.services.mozilla.com": "Firefox remote settings",
    "firefox-settings-attachments.cdn.mozilla.net": "Firefox remote settings",
    "content-signature-2.cdn.mozilla.net": "Firefox remote settings signatures",
    "incoming.telemetry.mozilla.org": "Firefox telemetry",
    "shavar.services.mozilla.com": "Firefox tracking protection lists",
    "tracking-protection.cdn.mozilla.net": "Firefox tracking protection lists",
    "aus5.mozilla.org": "Firefox updates",
    "detectportal.firefox.com": "Firefox captive portal detection",
    "push.services.mozilla.com": "Firefox push",
    "location.services.mozilla.com": "Firefox location",
    "normandy.cdn.mozilla.net": "Firefox studies (Normandy)",
    "classify-client.services.mozilla.com": "Firefox studies (Normandy)",
    "contile.services.mozilla.com": "Firefox new-tab tiles",
    "spocs.getpocket.com": "Firefox new-tab stories",
}

_EXACT = {host: name for host, name in BACKGROUND_HOSTS.items() if "*" not in host}
_GLOBS = [(host, name) for host, name in BACKGROUND_HOSTS.items() if "*" in host]


def background_of(host: str) -> str | None:
    """What sends requests to `host` (a normal host name) when it is a browser's background traffic, else None."""
    name = _EXACT.get(host)
    if name is not None:
        return name
    for glob, glob_name in _GLOBS:
        if fnmatch.fnmatchcase(host, glob):
            return glob_name
    return None
