"""The group run as one HTML page: host-by-host bandwidth matrix, then every check."""

from __future__ import annotations

from typing import Any

import jinja2

from gpufleet.text import redact

_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>gpufleet cluster tier: {{ doc.group }} {{ doc.run_id }}</title>
<style>
body { font-family: sans-serif; margin: 2em; }
table { border-collapse: collapse; margin-bottom: 1.5em; }
td, th { border: 1px solid #999; padding: 0.3em 0.6em; text-align: right; }
th { background: #eee; }
td.pass { background: #d8f0d8; } td.fail, td.error { background: #f6cccc; }
td.skipped, td.self { background: #eee; color: #777; } td.text { text-align: left; }
</style></head><body>
<h1>Group {{ doc.group }}: {{ doc.status }}</h1>
<p>Run {{ doc.run_id }}, {{ doc.started_at }} to {{ doc.finished_at }}, {{ doc.hosts|length }}
hosts.{% if doc.run_error %} <strong>{{ doc.run_error }}</strong>{% endif %}</p>
{% for entry in doc.culprits %}
<p><strong>{{ entry.check }}: named {{ entry.hosts|join(", ") or "no single host" }}</strong>
({{ entry.how }})</p>
{% endfor %}
{% if doc.network %}
<h2>TCP throughput, Gbit/s (row: from, column: to)</h2>
<p>iperf3, {{ doc.network.iperf3.streams }} streams, {{ doc.network.iperf3.seconds }} s,
{{ doc.network.mode }}; floor {{ doc.network.margin }} x the declared link speed.</p>
<table><tr><th>from \\ to</th>{% for h in names %}<th>{{ h }}</th>{% endfor %}</tr>
{% for a in names %}<tr><th>{{ a }}</th>
{% for b in names %}{% set link = matrix.get((a, b)) %}
{% if a == b %}<td class="self">-</td>
{% elif link %}<td class="{{ link.status }}" title="{{ link.reason }}">
{{ "%.3g"|format(link.gbps) }}{% if link.latency_ms is not none %}<br>
<small>{{ "%.3g"|format(link.latency_ms) }} ms</small>{% endif %}</td>
{% else %}<td class="skipped">not measured</td>{% endif %}
{% endfor %}</tr>{% endfor %}
</table>
{% endif %}
{% if doc.nccl_tests and doc.nccl_tests.get("figures") %}{% set f = doc.nccl_tests.figures %}
<h2>NCCL all_reduce_perf across the hosts ({{ doc.nccl_tests.get("launcher", "") }})</h2>
<table><tr><th>status</th><th>max busbw, GB/s</th><th>network</th><th>ranks</th>
<th>transport</th></tr><tr><td class="{{ doc.nccl_tests.status }}">{{ doc.nccl_tests.status }}</td>
<td>{{ f.get("max_busbw_gbps", "") }}</td><td class="text">{{ f.get("network", "") }}</td>
<td>{{ f.get("ranks", "") }}</td>
<td class="text">{{ f.get("transport", "") }}</td></tr></table>
<table><tr><th>floor</th><th>GB/s</th><th>enforced</th><th>source</th></tr>
{% for fl in f.get("floors") or [] %}<tr><td class="text">{{ fl.name }}</td>
<td>{{ fl.busbw_gbps }}</td>
<td>{{ fl.enforced }}</td><td class="text">{{ fl.source }}</td></tr>{% endfor %}</table>
{% for p in doc.nccl_tests.get("pairs") or [] %}<p>pair {{ p.hosts|join(" + ") }}: {{ p.status }}
{{ p.reason }}</p>{% endfor %}
{% endif %}
<h2>Checks</h2>
<table><tr><th>status</th><th>check</th><th>message</th></tr>
{% for c in doc.checks %}<tr><td class="{{ c.status }}">{{ c.status }}</td>
<td class="text">{{ c.name }}</td><td class="text">{{ c.reason }}</td></tr>{% endfor %}
</table>
<h2>Clean-up</h2>
<table>{% for host, state in doc.cleanup.items() %}<tr><th>{{ host }}</th>
<td class="text">{{ state }}</td></tr>{% endfor %}</table>
</body></html>
"""

_ENV = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def bandwidth_matrix(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """(from, to) -> link, for the links the run measured."""
    links = (doc.get("network") or {}).get("links", [])
    return {(link["source"], link["target"]): link for link in links}


def render_html(doc: dict[str, Any]) -> str:
    names = [h["name"] for h in doc["hosts"]]
    page = _ENV.from_string(_PAGE).render(doc=doc, names=names, matrix=bandwidth_matrix(doc))
    return redact(page)
