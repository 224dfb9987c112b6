"""The viewer's one page: its style and script inline, allowed by their hashes under a strict content security
policy, and the data embedded as JSON that is never executed (view_page.html, view_page.css, view_page.js)."""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _digest(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _page_file(name: str) -> str:
    return (Path(__file__).with_name(name)).read_text(encoding="utf-8")


def data_block(data: Any) -> str:
    """JSON that cannot end its `<script type="application/json">` element early, whatever the strings hold."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@dataclass(frozen=True)
class Page:
    html: str
    policy: str


def page(data: dict, served: bool) -> Page:
    """The page with its style and script inline, allowed by hash, and `data` embedded (never executed)."""
    style, script = _page_file("view_page.css"), _page_file("view_page.js")
    policy = "; ".join(
        [
            "default-src 'none'",
            f"script-src {_digest(script)}",
            f"style-src {_digest(style)}",
            "img-src 'none'",
            "connect-src 'self'" if served else "connect-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    html = _page_file("view_page.html")
    # One pass over the placeholders: a value is never searched for the next placeholder.
    values = {
        "{{POLICY}}": policy,
        "{{STYLE}}": style,
        "{{SCRIPT}}": script,
        "{{DATA}}": data_block(data),
    }
    out, rest = [], html
    while "{{" in rest:
        before, _, after = rest.partition("{{")
        name, _, rest = after.partition("}}")
        out += [before, values["{{" + name + "}}"]]
    out.append(rest)
    return Page("".join(out), policy)
