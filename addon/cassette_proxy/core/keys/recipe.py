"""The settings a key is computed under, and the request as a cassette stores it.

The addon keys every request under the run's settings (`cassette_ignore`,
`cassette_key_headers`, `cassette_ignore_values`, `cassette_frameworks`). A cassette stores them beside
its request (`keyed_with`), and the request keeps what the key reads (key
headers' values, the body, a multipart content type), so that a miss can say
"recorded with a different ignore set" and `cassette rekey` can recompute any
key from the files alone.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from ..defaults import DEFAULT_KEY_HEADERS
from ..files.cassette_file import body_fields, decode_body
from ..sessions.session_match import DEFAULT_SESSION_IGNORE, MatchSettings
from .body import parse_ignore_paths
from .frameworks import DEFAULT_FRAMEWORKS, framework_patterns, parse_frameworks
from .key import KEY_CACHE_SIZE, RECIPE_VERSION, KeyCache, RequestFacts, identity, key_of, preset_values
from .url import DEFAULT_PORTS, public_url
from .volatile import Replaced, ValuePattern, expressions, parse_value_patterns


class RecipeError(ValueError):
    """A setting that cannot work; `option` names it as the user wrote it."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"{option}: {message}")
        self.option = option


@dataclass(frozen=True)
class Recipe:
    """Ignore paths, key headers, value patterns and framework presets as given, with their parsed forms.

    The one carrier of the key settings: it builds what keys and matches under them (`key_cache`,
    `match_settings`), a test's own ignore paths make a recipe of their own (`with_ignore`), and a worker process
    rebuilds the same recipe from `settings()` (so the same keys by construction).
    """

    ignore: tuple[str, ...] = ()
    key_headers: tuple[str, ...] = DEFAULT_KEY_HEADERS
    ignore_values: tuple[str, ...] = ()
    """Regular expressions, presets resolved: a cassette must say what it was keyed with, not a name."""
    frameworks: tuple[str, ...] = DEFAULT_FRAMEWORKS
    """Framework preset names (core/keys/frameworks.py), sorted: resolved from our own table, never from a cassette."""
    paths: tuple[tuple[str, ...], ...] = field(default=(), compare=False, repr=False)
    patterns: tuple[ValuePattern, ...] = field(default=(), compare=False, repr=False)
    """The framework presets' patterns, then the value patterns: what `key.identity` replaces."""

    def key_cache(self, size: int = KEY_CACHE_SIZE) -> KeyCache:
        """The keys of the requests a run sees, computed under these settings."""
        return KeyCache(self.key_headers, self.paths, self.patterns, size=size)

    def match_settings(self, session_ignore: tuple[str, ...] = DEFAULT_SESSION_IGNORE) -> MatchSettings:
        """What a session's client messages are matched under: these ignore paths and value patterns, and the
        session's own ignore paths (`cassette_session_ignore`)."""
        return MatchSettings(self.paths, self.patterns, session_ignore)

    def with_ignore(self, extra: Sequence[str]) -> Recipe:
        """These settings with the ignore paths `extra` too (a test's own), each path once; ValueError for a path
        that cannot work (`key.parse_ignore_paths`)."""
        texts, paths = list(self.ignore), list(self.paths)
        for text, path in zip(extra, parse_ignore_paths(extra), strict=True):
            if path not in paths:
                texts.append(text.strip())
                paths.append(path)
        return replace(self, ignore=tuple(texts), paths=tuple(paths))

    def settings(self) -> dict[str, list[str]]:
        """The four settings as `make_recipe` takes them: what a worker process rebuilds this recipe from."""
        return {
            "ignore": list(self.ignore),
            "key_headers": list(self.key_headers),
            "ignore_values": list(self.ignore_values),
            "frameworks": list(self.frameworks),
        }

    def to_json(self) -> dict[str, Any]:
        """`keyed_with` of a cassette."""
        return {
            "recipe": RECIPE_VERSION,
            "ignore": list(self.ignore),
            "key_headers": list(self.key_headers),
            "ignore_values": list(self.ignore_values),
            "frameworks": list(self.frameworks),
        }

    def differences(self, recorded: Recipe) -> list[str]:
        """What differs from the settings a cassette was recorded with, recorded → now, one line each."""
        out = []
        for name, label in (
            ("ignore", "ignore set"),
            ("key_headers", "key-header set"),
            ("ignore_values", "value patterns"),
        ):
            before, now = getattr(recorded, name), getattr(self, name)
            if sorted(before) != sorted(now):
                out.append(f"recorded with a different {label}: {list(before)} → {list(now)}")
        return out

    def framework_difference(self, recorded: Recipe, request: Mapping[str, Any]) -> str | None:
        """The framework presets a cassette was recorded with, when they key its request otherwise than ours.

        Only then: a cassette recorded before the presets existed (or with others) keys alike whenever its
        request holds no value a preset replaces, and saying "different settings" on every miss would be noise.
        """
        if recorded.frameworks == self.frameworks:
            return None
        try:
            then = make_recipe(self.ignore, self.key_headers, self.ignore_values, recorded.frameworks)
            same = stored_identity(request, then) == stored_identity(request, self)
        except ValueError:  # a preset name this version does not know: not keyed alike
            same = False
        if same:
            return None
        return f"recorded with different framework presets: {list(recorded.frameworks)} → {list(self.frameworks)}"


def make_recipe(
    ignore: Iterable[str] = (),
    key_headers: Iterable[str] = DEFAULT_KEY_HEADERS,
    ignore_values: Iterable[str] = (),
    frameworks: Iterable[str] = DEFAULT_FRAMEWORKS,
) -> Recipe:
    """A Recipe from option values; RecipeError naming the option for a value that cannot work."""
    return _recipe(tuple(ignore), tuple(key_headers), tuple(ignore_values), tuple(frameworks))


@functools.lru_cache(maxsize=64)
def _recipe(
    ignore: tuple[str, ...], key_headers: tuple[str, ...], ignore_values: tuple[str, ...], frameworks: tuple[str, ...]
) -> Recipe:
    """Cached: a miss reads the settings of up to hundreds of cassettes, nearly always the same few."""
    ignore = tuple(p.strip() for p in ignore)
    try:
        paths = parse_ignore_paths(ignore)
    except ValueError as e:
        raise RecipeError("cassette_ignore", str(e)) from None
    try:
        patterns = parse_value_patterns(ignore_values)
    except ValueError as e:
        raise RecipeError("cassette_ignore_values", str(e)) from None
    try:
        presets = parse_frameworks(frameworks)
    except ValueError as e:
        raise RecipeError("cassette_frameworks", str(e)) from None
    headers = tuple(dict.fromkeys(h.strip().lower() for h in key_headers if h.strip()))
    return Recipe(ignore, headers, tuple(expressions(patterns)), presets, paths, framework_patterns(presets) + patterns)


def recipe_of(cassette: Mapping[str, Any]) -> Recipe | None:
    """The settings a cassette was recorded with, as written (not parsed); None when it does not say (format 1).

    Not parsed because cassettes arrive in pull requests: a miss only compares these settings with
    the run's and never runs a cassette's regular expression. `cassette rekey` parses them with
    `make_recipe` to key with them, on the user's own command. A cassette without `frameworks` was
    recorded before the presets existed, with none.
    """
    keyed_with = cassette.get("keyed_with")
    if not isinstance(keyed_with, dict):
        return None
    lists = {name: keyed_with.get(name, []) for name in ("ignore", "key_headers", "ignore_values", "frameworks")}
    if not all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in lists.values()):
        raise ValueError("keyed_with must hold lists of strings (ignore, key_headers, ignore_values, frameworks)")
    return Recipe(
        tuple(p.strip() for p in lists["ignore"]),
        tuple(dict.fromkeys(h.strip().lower() for h in lists["key_headers"] if h.strip())),
        tuple(lists["ignore_values"]),
        tuple(sorted({name.strip().lower() for name in lists["frameworks"] if name.strip()})),
    )


def stored_request(facts: RequestFacts, key_headers: Iterable[str]) -> dict[str, Any]:
    """The request as a cassette stores it: what the key reads, without credentials."""
    lowered = {name.lower(): value for name, value in facts.headers.items()}
    request = {
        "method": facts.method.upper(),
        "url": public_url(facts),
        "headers": {name: lowered[name].strip() for name in sorted(key_headers) if name in lowered},
        **body_fields(facts.body, facts.content_type),
    }
    if facts.content_type.lower().startswith("multipart/"):
        request["content_type"] = facts.content_type  # the parts are keyed, and need the boundary to be found
    return request


def facts_of(request: Mapping[str, Any]) -> RequestFacts:
    """The facts a stored request was keyed from; ValueError for a request that does not hold them."""
    method, url, headers = request.get("method"), request.get("url"), request.get("headers", {})
    if not isinstance(method, str) or not isinstance(url, str):
        raise ValueError("request.method and request.url must be strings")
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise ValueError("request.headers must be an object of strings")
    parts = urlsplit(url)
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"request.url {url!r} is not an http(s) URL")
    body_format = request.get("body_format", "text")
    try:
        body = decode_body(body_format, request.get("body", "")) if "body" in request else b""
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError(f"request.body does not match its body_format: {e}") from None
    content_type = request.get("content_type")
    if not isinstance(content_type, str):
        content_type = "application/json" if body_format == "json" else ""
    return RequestFacts(
        method=method,
        scheme=parts.scheme,
        host=parts.hostname,
        port=parts.port or DEFAULT_PORTS[parts.scheme],
        path=parts.path or "/",
        query=parse_qsl(parts.query, keep_blank_values=True),
        headers=headers,
        body=body,
        content_type=content_type,
    )


def stored_identity(request: Mapping[str, Any], recipe: Recipe) -> dict[str, Any]:
    """The identity of a stored request under `recipe` (what its key would be hashed from)."""
    return identity(facts_of(request), recipe.key_headers, recipe.paths, recipe.patterns)


def recorded_preset_values(cassette: Mapping[str, Any]) -> list[Replaced]:
    """The values the framework presets a cassette names (`keyed_with.frameworks`) replace in its request: what
    its key did not see. Its own value patterns are not run (a cassette is untrusted input); they apply after
    the presets and change nothing of what a preset replaced. ValueError for a cassette that does not say."""
    recorded = recipe_of(cassette)
    if recorded is None:
        return []
    recipe = make_recipe(recorded.ignore, recorded.key_headers, (), recorded.frameworks)
    return list(preset_values(facts_of(cassette["request"]), recipe.paths, recipe.patterns))


def stored_key(request: Mapping[str, Any], recipe: Recipe) -> str:
    return key_of(stored_identity(request, recipe))
