"""`cassette view`'s engine: a cassette folder read as conversations, served read-only on 127.0.0.1 or exported.

A folder of JSON files, or a run report's list of misses, is hard to read in
a terminal; a page that shows each recording as the conversation it was, with
the miss diffs next to the recordings they missed, is not. Everything from a
cassette is data the page puts into the DOM as text, under a strict content
security policy: a recorded prompt holding `<script>` stays a string. The
served index reads one small summary per file, cached by modification time, and
fetches a cassette in full only when opened. No mitmproxy import here.

index.py reads the folder, reports.py the run reports, page.py builds the page
(view_page.html, .css, .js), server.py serves it, export.py writes it to one
file; `cli/view.py` parses the command's flags and calls them.
"""
