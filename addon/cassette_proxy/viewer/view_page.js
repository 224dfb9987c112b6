"use strict";
// cassette view: renders the cassettes' data. Every value from a cassette goes into the DOM through
// textContent or a property, never as markup, so a recorded script tag is only ever text.
(() => {
  const data = JSON.parse(document.getElementById("cassette-data").textContent);
  const exported = data.mode === "export";
  const details = data.details || {};
  const LIST_LIMIT = 1000;
  let index = [];
  let report = null;
  let stamp = null;
  let selected = "";

  const $ = (id) => document.getElementById(id);

  function el(tag, cls, text, ...children) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null && text !== "") node.textContent = String(text);
    for (const child of children) if (child) node.append(child);
    return node;
  }

  function size(n) {
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + " KB";
    return (n / 1024 / 1024).toFixed(1) + " MB";
  }

  function pretty(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function tag(text, cls) {
    return el("span", "tag" + (cls ? " " + cls : ""), text);
  }

  function statusTag(status) {
    if (status === undefined || status === null) return null;
    return tag(String(status), (status >= 200 && status < 300) || status === 101 ? "good" : "bad"); // 101: a session
  }

  // -- filters ------------------------------------------------------------------------------------------------

  function fillSelect(select, values) {
    const current = select.value;
    while (select.options.length > 1) select.remove(1);
    for (const value of values) {
      const option = document.createElement("option");
      option.value = value;
      option.textContent = value;
      select.append(option);
    }
    select.value = values.includes(current) ? current : "";
  }

  const distinct = (key) => [...new Set(index.map(key).filter((v) => v !== undefined && v !== null && v !== ""))].map(String).sort();
  const endpointOf = (c) => (c.host || "") + (c.endpoint || "");

  function fillFilters() {
    fillSelect($("filter-model"), distinct((c) => c.model));
    fillSelect($("filter-endpoint"), distinct(endpointOf));
    fillSelect($("filter-status"), distinct((c) => (c.error ? "unreadable" : c.status)));
  }

  function matches(c) {
    const model = $("filter-model").value;
    const endpoint = $("filter-endpoint").value;
    const status = $("filter-status").value;
    const from = $("filter-from").value;
    const to = $("filter-to").value;
    const words = $("search").value.toLowerCase().split(/\s+/).filter(Boolean);
    if (model && c.model !== model) return false;
    if (endpoint && endpointOf(c) !== endpoint) return false;
    if (status && String(c.error ? "unreadable" : c.status) !== status) return false;
    const day = (c.recorded_at || "").slice(0, 10);
    if (from && day < from) return false;
    if (to && day > to) return false;
    if (words.length) {
      const text = searchText(c);
      if (!words.every((w) => text.includes(w))) return false;
    }
    return true;
  }

  const searchTexts = new Map();
  function searchText(c) {
    // The export searches whole conversations; built once per cassette, not on every keystroke.
    const stamp = c.recorded_at + c.size;
    const cached = searchTexts.get(c.id);
    if (cached && cached[0] === stamp) return cached[1];
    let text = [c.id, c.key, c.model, c.tag, endpointOf(c), c.last_user, c.answer, c.finish_reason, c.error].join(" ");
    if (details[c.id]) text += " " + JSON.stringify(details[c.id].conversation || "");
    text = text.toLowerCase();
    searchTexts.set(c.id, [stamp, text]);
    return text;
  }

  // -- the list -----------------------------------------------------------------------------------------------

  function row(c, unused) {
    const node = el("div", "cassette-row" + (unused.has(c.id) ? " unused" : "") + (c.id === selected ? " selected" : ""));
    node.dataset.id = c.id;
    node.append(
      el("span", "key", (c.key || c.id).slice(0, 8)),
      el("span", "muted", (c.recorded_at || "").slice(0, 10) + "  " + size(c.size || 0)),
      el("span", "tags", "", c.model ? tag(c.model) : null, c.tag ? tag(c.tag) : null, statusTag(c.status), c.streamed ? tag("streamed") : null,
        c.error ? tag("unreadable", "bad") : null, unused.has(c.id) ? tag("unused") : null),
      el("span", "prompt", c.error ? c.error : c.last_user || "(no user message)"),
      el("span", "reply", c.answer ? "→ " + c.answer : ""),
    );
    node.addEventListener("click", () => open(c.id));
    return node;
  }

  function renderList() {
    const list = $("list");
    list.replaceChildren();
    const unused = new Set(report ? report.unused : []);
    const shown = index.filter(matches);
    $("shown").textContent = shown.length + " of " + index.length + " shown";
    const groups = new Map();
    for (const c of shown.slice(0, LIST_LIMIT)) {
      const name = endpointOf(c);
      if (!groups.has(name)) groups.set(name, []);
      groups.get(name).push(c);
    }
    const hosts = new Map();
    for (const [name, items] of groups) {
      const host = items[0].host || "";
      if (!hosts.has(host)) hosts.set(host, []);
      hosts.get(host).push([name, items]);
    }
    for (const [host, endpoints] of [...hosts].sort()) {
      const section = el("div", "host", "", el("h2", "", host || "(no host)"));
      for (const [, items] of endpoints.sort()) {
        const group = el("div", "group", "", el("div", "group-title", (items[0].endpoint || "") + "  (" + items.length + ")"));
        for (const c of items) group.append(row(c, unused));
        section.append(group);
      }
      list.append(section);
    }
    if (shown.length > LIST_LIMIT) list.append(el("p", "muted", (shown.length - LIST_LIMIT) + " more: narrow the search"));
    if (!shown.length) list.append(el("p", "muted", index.length ? "No cassette matches the filters." : "No cassettes in this folder yet."));
    if (exported) renderConversations(shown);
  }

  function renderConversations(shown) {
    let all = $("conversations");
    if (!all) {
      all = el("section", "", "");
      all.id = "conversations";
      $("list").after(all);
    }
    all.replaceChildren(el("h2", "", "Conversations"));
    for (const c of shown) all.append(renderDetail(details[c.id] || { id: c.id, error: "not included in this export" }));
  }

  // -- one cassette -------------------------------------------------------------------------------------------

  function facts(pairs) {
    const list = el("dl", "facts");
    for (const [name, value] of pairs) {
      if (value === undefined || value === null || value === "" || (typeof value === "object" && !Object.keys(value).length)) continue;
      list.append(el("dt", "", name), el("dd", "", typeof value === "string" ? value : pretty(value)));
    }
    return list;
  }

  function renderPart(part) {
    const kind = part.kind || "text";
    const labelled = kind === "text" && (part.name === "thinking" || part.name === "refusal");
    const cls = "part " + kind + (labelled ? " " + part.name : "");
    if (kind === "tool_call") return el("div", cls, "call " + (part.name || "?") + "(" + (part.text || "") + ")");
    if (kind === "tool_result") return el("div", cls, "result" + (part.name ? " for " + part.name : "") + ": " + (part.text || ""));
    if (labelled) return el("div", cls, part.name + ": " + part.text);
    return el("div", cls, part.text || "");
  }

  function renderTurn(turn) {
    const node = el("div", "turn role-" + String(turn.role).replace(/[^a-z]/g, ""), "", el("div", "role", turn.role || "?"));
    for (const part of turn.parts || []) node.append(renderPart(part));
    return node;
  }

  function renderAnswer(answer) {
    const usage = Object.entries(answer.usage || {}).filter(([, v]) => typeof v !== "object").map(([k, v]) => k + " " + v).join(", ");
    const node = el("div", "turn answer", "",
      el("div", "role", "answer"),
      el("div", "tags", "", statusTag(answer.status), answer.model ? tag(answer.model) : null,
        answer.finish_reason ? tag("finish " + answer.finish_reason) : null, answer.streamed ? tag("streamed") : null),
      usage ? el("div", "muted usage", "tokens: " + usage) : null);
    const text = el("div", "part text answer-text", answer.text || "");
    if (answer.text) node.append(text);
    // answer.text is what the model said; its reasoning, refusals, calls and other parts follow, labelled.
    for (const part of answer.parts || []) if (part.kind !== "text" || part.name) node.append(renderPart(part));
    if (!answer.parts || !answer.parts.length) node.append(el("div", "muted", "(no answer content)"));
    return node;
  }

  function renderTimeline(answer) {
    const events = answer.timeline || [];
    const node = el("div", "timeline");
    const timed = answer.first_event_ms !== null && answer.first_event_ms !== undefined;
    node.append(el("h3", "", answer.status === 101 ? "Session timeline" : "Stream timeline"), el("p", "muted",
      events.length + " events" + (timed ? "; first after " + answer.first_event_ms + " ms; longest gap " + answer.longest_gap_ms + " ms" : "; stored without timing")));
    const table = el("table", "", "", el("tr", "", "", el("th", "", "ms"), el("th", "", "gap"), el("th", "", "event"), el("th", "", "adds")));
    let previous = null;
    for (const event of events) {
      const gap = event.ms !== null && previous !== null ? "+" + (event.ms - previous) : "";
      table.append(el("tr", "", "", el("td", "", event.ms === null ? "" : event.ms), el("td", "", gap), el("td", "", event.name), el("td", "delta", event.text)));
      if (event.ms !== null) previous = event.ms;
    }
    node.append(table);
    return node;
  }

  function renderDetail(d) {
    const card = el("article", "conversation");
    card.dataset.id = d.id;
    card.id = "cassette-" + d.id;
    if (d.error) {
      card.append(el("h2", "", d.id), el("p", "tag bad", d.error));
      if (d.raw) card.append(el("pre", "raw", d.raw));
      return card;
    }
    const c = d.conversation;
    card.append(
      el("h2", "", c.method + " " + c.url),
      facts([
        ["file", d.id], ["key", d.key], ["recorded", d.recorded_at + (Object.keys(d.recorded_with || {}).length ? " with " + Object.entries(d.recorded_with).map(([k, v]) => k + " " + v).join(", ") : "")],
        ["API", c.shape], ["model", c.model], ["kind", d.tag], ["parameters", c.parameters], ["tools", (c.tools || []).join(", ")],
        ["key headers", d.request_headers],
      ]),
      el("h3", "", "Conversation"),
    );
    for (const turn of c.turns || []) card.append(renderTurn(turn));
    card.append(renderAnswer(c.answer));
    if (c.answer.streamed) card.append(renderTimeline(c.answer));
    const raw = el("pre", "raw", d.raw);
    raw.hidden = true;
    const toggle = el("button", "raw-toggle", "Raw JSON");
    toggle.type = "button";
    toggle.addEventListener("click", () => { raw.hidden = !raw.hidden; });
    card.append(toggle, raw);
    return card;
  }

  async function open(id) {
    selected = id;
    for (const node of document.querySelectorAll(".cassette-row")) node.classList.toggle("selected", node.dataset.id === id);
    if (exported) {
      const target = document.getElementById("cassette-" + id);
      if (target) target.scrollIntoView();
      return;
    }
    const pane = $("detail");
    pane.replaceChildren(el("p", "muted", "Loading " + id + " …"));
    try {
      const reply = await fetch("/api/cassette?id=" + encodeURIComponent(id));
      const d = await reply.json();
      if (selected === id) pane.replaceChildren(renderDetail(d));
    } catch (e) {
      pane.replaceChildren(el("p", "tag bad", "Could not load " + id + ": " + e));
    }
  }

  // -- the run report -----------------------------------------------------------------------------------------

  function renderMiss(miss) {
    const node = el("div", "miss", "", el("div", "", "", tag("miss", "bad"), el("span", "", miss.method + " " + miss.url)),
      el("div", "muted", "key " + miss.key + " (would be " + miss.cassette + ")"));
    if (!miss.closest.length) node.append(el("p", "muted", "No recording of this endpoint yet."));
    for (const near of miss.closest) {
      const link = el("button", "closest-link", near.cassette);
      link.type = "button";
      link.addEventListener("click", () => open(near.cassette));
      node.append(el("div", "", "closest recording: ", link));
      if (near.rows) {
        const table = el("table", "diff", "", el("tr", "", "", el("th", "", "field"), el("th", "", "recorded"), el("th", "", "this run")));
        for (const [where, old, now] of near.rows) {
          table.append(el("tr", "diff-row", "", el("td", "", where),
            el("td", old === null ? "old absent" : "old", old === null ? "(absent)" : old),
            el("td", now === null ? "new absent" : "new", now === null ? "(absent)" : now)));
        }
        if (!near.rows.length) table.append(el("tr", "", "", el("td", "muted", "identical body (headers or query differ)")));
        node.append(table);
      } else {
        const list = el("ul", "differences");
        for (const line of near.differences) list.append(el("li", "", line));
        node.append(list);
      }
    }
    return node;
  }

  function renderReport() {
    const section = $("report");
    if (!report) { section.hidden = true; return; }
    section.hidden = false;
    const counts = el("div", "counts");
    for (const name of ["hits", "misses", "recorded", "overwritten", "upstream", "passthrough", "errors"]) {
      if (report.counts[name] !== undefined) counts.append(el("span", "count-" + name, name + ": " + report.counts[name]));
    }
    counts.append(el("span", "count-unused", "unused: " + report.unused.length));
    section.replaceChildren(el("h2", "", "Run report"), el("p", "muted", report.files.join(", ")), counts);
    if (report.misses.length) section.append(el("h3", "", "Misses"));
    for (const miss of report.misses) section.append(renderMiss(miss));
    if (report.errors.length) section.append(el("h3", "", "Errors"));
    for (const error of report.errors) {
      section.append(el("div", "error", "", tag(error.type || "error", "bad"), el("span", "", (error.cassette || error.url || "") + ": " + (error.message || ""))));
    }
    if (report.unused.length) {
      const list = el("details", "unused-list", "", el("summary", "", report.unused.length + " cassettes this run did not use"));
      for (const id of report.unused) list.append(el("div", "", id));
      section.append(list);
    }
  }

  // -- loading ------------------------------------------------------------------------------------------------

  function show(payload) {
    index = payload.cassettes || [];
    report = payload.report || null;
    $("root").textContent = payload.root ? "in " + payload.root : "";
    const pending = payload.pending ? "; reading " + payload.pending + " more …" : "";
    $("status").textContent = index.length + " cassettes" + pending + (exported ? " (exported)" : " (live: new recordings appear as they are written)");
    fillFilters();
    renderReport();
    renderList();
  }

  async function load() {
    if (!index.length) $("status").textContent = "Reading the cassettes' summaries …";
    const reply = await fetch("/api/index");
    const payload = await reply.json();
    show(payload);
    if (payload.pending) setTimeout(load, 1000);  // a first start on a big folder: the list fills in
  }

  async function poll() {
    try {
      const reply = await fetch("/api/stamp");
      const now = JSON.stringify(await reply.json());
      if (stamp !== null && now !== stamp) await load();
      stamp = now;
    } catch (e) {
      $("status").textContent = "The server stopped: " + e;
    }
  }

  for (const id of ["search", "filter-model", "filter-endpoint", "filter-status", "filter-from", "filter-to"]) {
    $(id).addEventListener("input", renderList);
  }
  if (exported) {
    document.body.classList.add("export");
    show(data);
  } else {
    load().then(poll);
    setInterval(poll, 3000);
  }
})();
