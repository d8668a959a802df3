"""The dashboard's templates, style sheet and script, kept in the package as text.

Jinja2 renders them with autoescaping on: every text that came from a submission
(answers, FAILURES.md quoted in a check, tool names, keys) reaches the page as text,
never as markup. The only markup not written here is the charts' SVG, which
``grader.dashboard._charts`` renders from numbers and escaped labels.
"""

from __future__ import annotations

__all__ = ["ROWS_SCRIPT", "SCRIPT", "STYLE", "TEMPLATES"]

STYLE = """\
:root { color-scheme: light; --ink: #1b1f24; --muted: #57606a; --line: #d0d7de;
  --lost: #8c2f00; --ok: #0a5c2e; --miss: #8c2f00; --band: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  margin: 0 auto; max-width: 78rem; padding: 1rem 1.5rem 3rem; background: #fff; }
h1 { font-size: 1.6rem; margin: .5rem 0; } h2 { font-size: 1.25rem; margin-top: 2rem;
  border-bottom: 1px solid var(--line); padding-bottom: .25rem; } h3 { font-size: 1.05rem; }
a { color: #0550ae; } .muted, figcaption { color: var(--muted); }
nav.sections { display: flex; flex-wrap: wrap; gap: .25rem 1rem; margin: .5rem 0 1rem; }
dl.summary { display: grid; grid-template-columns: repeat(auto-fill, minmax(9rem, 1fr));
  gap: .5rem; margin: 0; }
dl.summary div { border: 1px solid var(--line); border-radius: 6px; padding: .5rem .75rem; }
dl.summary dt { color: var(--muted); font-size: .85rem; } dl.summary dd { margin: 0;
  font-size: 1.3rem; font-weight: 600; overflow-wrap: anywhere; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(22rem, 1fr));
  gap: 1rem 2rem; }
figure.chart { margin: 0; } figure.chart svg { max-width: 100%; height: auto; }
details.numbers { margin-top: .25rem; }
table { border-collapse: collapse; margin: .5rem 0; font-size: .9rem; }
th, td { border: 1px solid var(--line); padding: .25rem .5rem; text-align: left;
  vertical-align: top; }
th { background: var(--band); } td.number, th.number { text-align: right;
  font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; }
/* Every submission fits the page at 1280 px, without scrolling sideways: the table takes
   the width there is, and a text too long for its column (a name, a review, a reason)
   wraps, within a word if it must; numbers and statuses never wrap. */
table#submissions { width: 100%; }
#submissions td { overflow-wrap: anywhere; }
#submissions td.number, #submissions td[data-column="status"] { white-space: nowrap; }
#submissions td[data-column="submission"], #submissions td[data-column="student"] {
  min-width: 6rem; }
#submissions td[data-column="reason"], #submissions td[data-column="review"] {
  min-width: 8rem; }
th button { font: inherit; font-weight: 600; background: none; border: 0; padding: 0;
  cursor: pointer; color: inherit; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; }
th[aria-sort="descending"] button::after { content: " \\25BC"; }
.controls { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; }
.controls input, .controls select { font: inherit; padding: .2rem .4rem; }
.lost { color: var(--lost); font-weight: 600; } .full { color: var(--ok); }
.miss { color: var(--miss); font-weight: 600; }
.badge { display: inline-block; border: 1px solid currentColor; border-radius: 4px;
  padding: 0 .3rem; font-size: .8rem; text-transform: uppercase; letter-spacing: .02em; }
.key { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .85rem;
  overflow-wrap: anywhere; }
pre.text { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--band);
  padding: .5rem; border-radius: 4px; }
ol.timeline { padding-left: 1.5rem; } ol.timeline li { margin-bottom: .5rem; }
.warning { border-left: 4px solid var(--lost); padding: .25rem .75rem; background: #fff8f5; }
.pager { display: flex; flex-wrap: wrap; gap: .25rem .75rem; align-items: center;
  margin: .25rem 0 .75rem; }
.pager[hidden], .more[hidden] { display: none; }
.pager button { font: inherit; padding: .1rem .6rem; }
.page-status { font-variant-numeric: tabular-nums; }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  .controls, nav.sections, .skip, .pager button { display: none; }
  a { color: inherit; text-decoration: none; }
  section, figure, table { break-inside: avoid; }
  details.numbers > summary { display: none; }
  details.numbers::details-content { content-visibility: visible; display: block; }
}
"""

SCRIPT = """\
// Paging, filtering and sorting of the cohort page's lists. Every row of every list is in
// rows.js (GRADEKIT_ROWS: each list's rows as the page writes them, escaped there); a list
// reads its rows from it on first use. Without the script each list shows its first page.
(function () {
  "use strict";
  var ROWS = window.GRADEKIT_ROWS || {};
  var collator = new Intl.Collator("en");
  Array.prototype.forEach.call(document.querySelectorAll("[data-list]"), setup);

  function setup(box) {
    var name = box.getAttribute("data-list");
    var size = Number(box.getAttribute("data-page-size")) || 100;
    var total = Number(box.getAttribute("data-total"));
    var body = box.querySelector("[data-rows]");
    var filter = box.querySelector("[data-filter]");
    var status = box.querySelector("[data-status-filter]");
    var shown = box.querySelector("[data-shown]");
    var pager = box.querySelector(".pager");
    var more = box.querySelector("[data-more]");
    var order = null;  // every row, in the order the list shows them
    var matching = null;  // those the filter keeps; null until the list is first used
    var page = 0;

    function rows() {
      if (order === null) {
        if (typeof ROWS[name] === "string") {
          var holder = document.createElement("template");
          holder.innerHTML = ROWS[name];
          order = Array.prototype.filter.call(holder.content.childNodes, function (node) {
            return node.nodeType === 1;
          });
        } else {  // rows.js is missing: the rows the page holds
          order = Array.prototype.slice.call(body.children);
        }
      }
      return order;
    }

    function words(row) {
      return row.hasAttribute("data-search") ? row.getAttribute("data-search")
        : row.textContent.toLowerCase();
    }

    function apply() {
      var wanted = filter ? filter.value.trim().toLowerCase() : "";
      var state = status ? status.value : "";
      matching = rows().filter(function (row) {
        return (wanted === "" || words(row).indexOf(wanted) !== -1) &&
          (state === "" || row.getAttribute("data-status") === state);
      });
      page = 0;
      render();
    }

    function render() {
      var count = matching === null ? total : matching.length;
      var pages = Math.max(1, Math.ceil(count / size));
      page = Math.min(Math.max(page, 0), pages - 1);
      if (matching !== null) {
        body.replaceChildren.apply(body, matching.slice(page * size, (page + 1) * size));
      }
      if (shown) { shown.textContent = String(count); }
      if (more) { more.hidden = true; }
      if (!pager) { return; }
      pager.hidden = pages < 2;
      pager.querySelector("[data-page-status]").textContent = count === 0 ? "No rows" :
        "Rows " + (page * size + 1) + "\\u2013" + Math.min(count, (page + 1) * size) +
        " of " + count + " (page " + (page + 1) + " of " + pages + ")";
      pager.querySelectorAll("button[data-page]").forEach(function (button) {
        var to = button.getAttribute("data-page");
        button.disabled = (to === "first" || to === "previous") ? page === 0 : page === pages - 1;
      });
    }

    function turn(to) {
      if (matching === null) { apply(); }
      var pages = Math.max(1, Math.ceil(matching.length / size));
      page = to === "first" ? 0 : to === "previous" ? page - 1 : to === "next" ? page + 1
        : pages - 1;
      render();
    }

    function value(row, column) {
      var cell = row.querySelector('[data-column="' + column + '"]');
      if (!cell) { return ""; }
      return cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent;
    }

    function compare(a, b, numeric) {
      if (numeric) {
        var x = a === "" ? -Infinity : Number(a), y = b === "" ? -Infinity : Number(b);
        return x < y ? -1 : x > y ? 1 : 0;
      }
      return collator.compare(a, b);
    }

    function sortBy(button) {
      var header = button.parentNode;
      var column = button.getAttribute("data-sort");
      var numeric = button.hasAttribute("data-numeric");
      var ascending = header.getAttribute("aria-sort") !== "ascending";
      box.querySelectorAll("th[aria-sort]").forEach(function (th) {
        th.removeAttribute("aria-sort");
      });
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      var keyed = rows().map(function (row) {
        return {row: row, key: value(row, column), name: value(row, "submission")};
      });
      keyed.sort(function (a, b) {
        var found = compare(a.key, b.key, numeric);
        if (found === 0) { found = compare(a.name, b.name, false); }
        return ascending ? found : -found;
      });
      order = keyed.map(function (item) { return item.row; });
      apply();
    }

    box.querySelectorAll("th button[data-sort]").forEach(function (button) {
      button.addEventListener("click", function () { sortBy(button); });
    });
    if (filter) { filter.addEventListener("input", apply); }
    if (status) { status.addEventListener("change", apply); }
    if (pager) {
      pager.querySelectorAll("button[data-page]").forEach(function (button) {
        button.addEventListener("click", function () { turn(button.getAttribute("data-page")); });
      });
    }
    render();
  }
}());
"""

ROWS_SCRIPT = """\
// Every row of every list of the cohort page, as the page writes them: dashboard.js pages
// and filters them. A script, not data to fetch: it loads from file:// too.
window.GRADEKIT_ROWS = {rows};
"""

_BASE = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="gradekit dashboard">
<title>{% block title %}{% endblock %}</title>
<link rel="stylesheet" href="{{ root }}assets/dashboard.css">
</head>
<body>
<a class="skip" href="#main">Skip to the content</a>
{% block body %}{% endblock %}
</body>
</html>
"""

_FIGURE = """\
{% macro figure(f) -%}
<figure class="chart" id="chart-{{ f.id }}">
{{ f.svg | safe }}
<figcaption>{{ f.alt }}</figcaption>
<details class="numbers"><summary>The numbers behind the chart</summary>
<table class="chart-data">
<caption>{{ f.title }}</caption>
<thead><tr>{% for c in f.columns %}<th scope="col">{{ c }}</th>{% endfor %}</tr></thead>
<tbody>{% for row in f.rows %}<tr>{% for cell in row %}<td>{{ cell }}</td>{% endfor %}</tr>
{% endfor %}</tbody>
</table>
</details>
</figure>
{%- endmacro %}
"""

_COHORT = """\
{% extends "base.html" %}
{% from "figure.html" import figure %}
{% from "rows.html" import find, pager with context %}
{% block title %}Cohort: {{ cohort.rubric or "grades" }}{% endblock %}
{% block body %}
<header>
<h1>Cohort{% if cohort.rubric %}: {{ cohort.rubric }}{% endif %}</h1>
<p class="muted">Built from {{ source }}: the gradebook, {{ reported }} report(s) and the
ledger{% if cohort.latest_batch is not none %} up to its batch event {{ cohort.latest_batch }}{%
endif %}.</p>
<nav class="sections" aria-label="Sections">
<a href="#distribution">Scores</a><a href="#lost">Points lost</a><a href="#grid">Cases</a>
<a href="#findings">Findings</a><a href="#copies">Copies</a><a href="#review">To review</a><a
href="#changed">Changed</a>
<a href="#batches">Batches</a>
<a href="#submissions-section">Every submission</a>
</nav>
</header>
<main id="main">
{% for problem in cohort.problems %}<p class="warning">{{ problem }}</p>{% endfor %}
<dl class="summary" id="summary">
{% for label, stat, value in summary %}<div><dt>{{ label }}</dt><dd data-stat="{{ stat }}">{{
value }}</dd></div>
{% endfor %}</dl>

<div class="charts">
<section id="distribution"><h2>Score distribution</h2>{% if distribution %}{{
figure(distribution) }}{% else %}<p>No submission was graded: there is no score to show.</p>{%
endif %}</section>
<section id="lost"><h2>Points lost per criterion</h2>{{ figure(lost) }}</section>
</div>

<section id="grid">
<h2>Students &times; cases: the first criterion that lost points</h2>
<p class="muted">Each cell names the first criterion, in rubric order, whose check for that
case lost points.</p>
<div class="paged" data-list="grid" data-total="{{ total.grid }}" data-page-size="{{
page_rows }}">
{{ find("grid", "submission, criterion") }}
<div class="scroll"><table id="case-grid">
<thead><tr><th scope="col">Submission</th>{% for case in cohort.cases %}<th scope="col">{{
case }}</th>{% endfor %}</tr></thead>
<tbody data-rows>
{{ first.grid | join | safe }}</tbody>
</table></div>
{{ pager("grid", "submissions") }}
</div>
</section>

<section id="findings">
<h2>Findings by kind</h2>
{{ figure(kinds) }}
{% if cohort.findings %}<div class="paged" data-list="findings" data-total="{{ total.findings
}}" data-page-size="{{ page_rows }}">
{{ find("findings", "kind, submission, words") }}
<div class="scroll"><table id="finding-list">
<thead><tr><th scope="col">Kind</th><th scope="col">Submission</th><th scope="col">Finding</th>
</tr></thead>
<tbody data-rows>
{{ first.findings | join | safe }}</tbody></table></div>
{{ pager("findings", "findings") }}
</div>{% else %}<p>No findings.</p>{% endif %}
</section>

<section id="review">
<h2>Waiting for a person</h2>
<h3 id="copies">Possible copies</h3>
{% if cohort.copies %}<p class="muted">Pairs of submissions whose agent code, FAILURES.md or
cassettes share more than the cohort has in common (copies.json): found from their files,
never run, and no point moved. A person decides; each is first in the list below.</p>
<div class="paged" data-list="copies" data-total="{{ total.copies }}" data-page-size="{{
page_rows }}">
{{ find("copies", "submission") }}
<ul id="copy-list" data-rows>
{{ first.copies | join | safe }}</ul>
{{ pager("copies", "pairs") }}
</div>{% else %}<p>No pair of submissions looks copied.</p>{% endif %}
<p id="queue-rows"><strong data-stat="pending-rows">{{ queue.rows }}</strong> of {{
cohort.submissions | length }} rows still need a review: a criterion the rubric marks for
review that no one has reviewed (pending), or one reviewed only on an earlier report (to do
again).</p>
{% if queue.criteria %}<table id="queue">
<caption>Reviews left, per criterion</caption>
<thead><tr><th scope="col">Criterion</th><th scope="col" class="number">Pending</th><th
scope="col" class="number">To do again</th></tr></thead>
<tbody>{% for cid, title, pending, again in queue.criteria %}<tr data-criterion="{{ cid }}"><td>{{
title }}</td><td class="number" data-count="pending">{{ pending }}</td><td class="number"
data-count="again">{{ again }}</td></tr>
{% endfor %}</tbody></table>{% endif %}
{% if total.review %}<p class="muted">First what needs a person now (a review made of an earlier
report, a degraded or flagged grade), then the reviews the rubric always asks for.</p>
<div class="paged" data-list="review" data-total="{{ total.review }}" data-page-size="{{
page_rows }}">
{{ find("review", "submission, criterion, reason") }}
<ul id="review-list" data-rows>
{{ first.review | join | safe }}</ul>
{{ pager("review", "rows waiting") }}
</div>{% else %}<p>Nothing is waiting for a review.</p>{% endif %}
</section>

<section id="changed">
<h2>Grades that changed in the latest batch</h2>
{% if total.changed %}<div class="paged" data-list="changed" data-total="{{ total.changed }}"
data-page-size="{{ page_rows }}">
{{ find("changed", "submission, cause") }}
<ul id="changed-list" data-rows>
{{ first.changed | join | safe }}</ul>
{{ pager("changed", "changed grades") }}
</div>{% else %}<p>No grade changed in the latest batch.</p>{% endif %}
</section>

<section id="batches">
<h2>Batches</h2>
{% if cohort.batches %}<table class="batches"><thead><tr><th scope="col">Ledger event</th>
<th scope="col">Status</th><th scope="col">Graded</th><th scope="col">Failed</th>
<th scope="col">Operator</th><th scope="col">Ended (UTC)</th><th scope="col">Key</th>
</tr></thead><tbody>
{% for b in cohort.batches %}<tr data-status="{{ b.status }}"><td>{{ b.seq }}</td><td>{{
b.status }}</td><td>{{ b.completed }} of {{ b.requested }}</td><td>{{ b.failed }}</td><td>{{
b.operator }}</td><td>{{ b.at }}</td><td>{{ b.key or "-" }}</td></tr>
{% endfor %}</tbody></table>
<p class="muted">The operator is a label, not an authenticated identity.</p>
{% else %}<p>The ledger holds no batch status (graded by an older gradekit).</p>{% endif %}
</section>

<section id="submissions-section">
<h2>Every submission</h2>
<div class="paged" data-list="submissions" data-total="{{ total.submissions }}"
data-page-size="{{ page_rows }}">
<div class="controls">
<label>Filter <input id="filter" data-filter type="search"
placeholder="name, student, status"></label>
<label>Status <select id="status-filter" data-status-filter><option value="">any</option>{% for
st in statuses %}<option value="{{ st }}">{{ st }}</option>{% endfor %}</select></label>
<span><span id="shown" data-shown>{{ cohort.submissions | length }}</span> of {{
cohort.submissions | length }} shown</span>
</div>
<div class="scroll"><table id="submissions">
<thead><tr>{% for column, title, numeric in columns %}<th scope="col"{% if numeric %}
class="number"{% endif %}><button type="button" data-sort="{{ column }}"{% if numeric %}
data-numeric{% endif %}>{{ title }}</button></th>{% endfor %}</tr></thead>
<tbody data-rows>
{{ first.submissions | join | safe }}</tbody>
</table></div>
{{ pager("submissions", "submissions") }}
</div>
</section>
</main>
<script src="assets/rows.js"></script>
<script src="assets/dashboard.js"></script>
{% endblock %}
"""

# Each row of the cohort page's lists: the page holds the first page of each, rows.js all.
_ROWS = """\
{% macro submission(s) -%}
<tr data-submission="{{ s.row.submission }}" data-status="{{ s.row.status }}" data-search="{{
(s.row.submission ~ ' ' ~ s.row.student ~ ' ' ~ s.row.name ~ ' ' ~ s.row.status) | lower
}}">{% for column, title,
numeric in columns %}{% set v = cell(s, column) %}<td data-column="{{ column }}"{% if numeric %}
class="number" data-value="{{ v }}"{% endif %}>{% if column == "submission" %}<a
href="students/{{ s.slug }}.html">{{ v }}</a>{% else %}{{ v }}{% endif %}</td>{% endfor %}</tr>
{% endmacro %}
{% macro grid(s) -%}
<tr data-submission="{{ s.row.submission }}"><th scope="row"><a href="students/{{ s.slug
}}.html">{{ s.row.submission }}</a></th>{% for c in s.cells %}<td data-case="{{ c.case }}"
data-criterion="{{ c.criterion }}" class="{{ 'lost' if c.criterion else ('full' if c.label ==
full else 'muted') }}">{{ c.label }}</td>{% endfor %}</tr>
{% endmacro %}
{% macro finding(kind, who, text) -%}
<tr><td>{{ kind }}</td><td><a href="students/{{ slugs[who] }}.html">{{ who }}</a></td><td>{{
text }}</td></tr>
{% endmacro %}
{% macro waiting(s, why) -%}
<li data-submission="{{ s.row.submission }}"{% if urgent(s) %} data-urgent{% endif %}>{% if
urgent(s) %}<span class="badge lost">act now</span> {% endif %}<a href="students/{{ s.slug
}}.html">{{ s.row.submission }}</a>: {{ why }}</li>
{% endmacro %}
{% macro copy(p) -%}
<li data-pair="{{ p.a }}/{{ p.b }}"><span class="badge lost">copy?</span> {% for who in (p.a,
p.b) %}{% if who in slugs %}<a href="students/{{ slugs[who] }}.html">{{ who }}</a>{% else %}{{
who }}{% endif %}{% if loop.first %} and {% endif %}{% endfor %}: {{ p.said() }}{% for part in
parts %}{% set x = p.parts[part].excerpt %}{% if x %}<details><summary>{{ words[part] }}: {{ x.a
}} and {{ x.b }}</summary><pre>{{ x.lines | join("\n") }}</pre></details>{% endif %}{% endfor
%}</li>
{% endmacro %}
{% macro changed(s) -%}
<li data-submission="{{ s.row.submission }}"><a href="students/{{ s.slug }}.html">{{
s.row.submission }}</a>: {{ s.change.previous.total if s.change.previous.total is not none else
s.change.previous.status }} &rarr; {{ s.change.current.total if s.change.current.total is not
none else s.change.current.status }}. {% for cause in s.change.current.causes %}{{ cause }}{%
if not loop.last %}; {% endif %}{% else %}Nothing the ledger holds changed.{% endfor %}{% if
s.change.current.divergence %} First divergence: {{ s.change.current.divergence }}{% endif %}</li>
{% endmacro %}
{% macro find(name, what) -%}
{% if total[name] > page_rows %}<div class="controls"><label>Filter <input type="search"
data-filter placeholder="{{ what }}"></label></div>{% endif %}
{%- endmacro %}
{% macro pager(name, what) -%}
{% if total[name] > page_rows %}<p class="more" data-more>The first {{ page_rows }} of {{
total[name] }} {{ what }}: turn JavaScript on to page through and filter the rest (each
student's page holds all of theirs).</p>{% endif %}
<nav class="pager" aria-label="Pages of {{ what }}" hidden><button type="button"
data-page="first">First</button><button type="button" data-page="previous">Previous</button>
<span class="page-status" data-page-status aria-live="polite"></span><button type="button"
data-page="next">Next</button><button type="button" data-page="last">Last</button></nav>
{%- endmacro %}
"""

_STUDENT = """\
{% extends "base.html" %}
{% from "figure.html" import figure %}
{% block title %}{{ s.row.submission }}: grade report{% endblock %}
{% block body %}
<header>
<p><a href="../index.html">&larr; Cohort</a></p>
<h1>{{ s.row.submission }}</h1>
<dl class="summary" id="summary">
<div><dt>Student</dt><dd data-stat="student">{{ s.row.student }}</dd></div>
{% if s.row.name %}<div><dt>Name</dt><dd data-stat="name">{{ s.row.name }}</dd></div>{% endif %}
<div><dt>Status</dt><dd data-stat="status">{{ s.row.status }}</dd></div>
<div><dt>Total</dt><dd data-stat="total">{{ s.row.total or "—" }}{% if s.row.max %} / {{
s.row.max }}{% endif %}</dd></div>
<div><dt>Final</dt><dd data-stat="final">{{ s.row.final or s.row.total or "—" }}</dd></div>
</dl>
{% if s.row.review %}<p id="review-state"><strong>Review:</strong> {{ s.row.review }}</p>{% endif %}
{% if s.row.late %}<p id="late"><strong>Late work:</strong> {{ s.row.late }}</p>{% endif %}
{% if s.row.reason %}<p class="warning" id="reason">{{ s.row.reason }}</p>{% endif %}
{% if copies %}<section id="copies"><h2>Possible copies</h2><ul>{% for other, slug, p in copies
%}<li data-other="{{ other }}">{% if slug %}<a href="{{ slug }}.html">{{ other }}</a>{% else
%}{{ other }}{% endif %}: {{ p.said() }}{% for part in parts %}{% set x = p.parts[part].excerpt
%}{% if x %}<details><summary>{{ words[part] }}: {{ x.a }} ({{ p.a }}) and {{ x.b }} ({{ p.b
}})</summary><pre>{{ x.lines | join("\n") }}</pre></details>{% endif %}{% endfor %}</li>
{% endfor %}</ul></section>{% endif %}
<nav class="sections" aria-label="Sections"><a href="#report">Report</a><a
href="#history">History</a><a href="#diff">Change</a><a href="#traces">Calls</a></nav>
</header>
<main id="main">
<section id="report">
<h2>Report</h2>
{% if s.report_problem %}<p class="warning">{{ s.report_problem }}</p>{% endif %}
{% if report %}
<table id="criteria">
<thead><tr><th scope="col">Criterion</th><th scope="col" class="number">Points</th><th
scope="col" class="number">Max</th><th scope="col">Result</th></tr></thead>
<tbody>{% for c in report.criteria %}<tr data-criterion="{{ c.id }}"><td><a href="#criterion-{{
c.id }}">{{ c.title }}</a></td><td class="number">{{ c.points }}</td><td class="number">{{ c.max
}}</td><td>{% if c.points == c.max %}<span class="full">full marks</span>{% else %}<span
class="lost">lost {{ c.lost }}</span>{% endif %}{% if c.review %} (a person reviews it){% endif
%}{% if c.verdict %} ({{ c.verdict }}){% endif %}</td></tr>
{% endfor %}</tbody>
<tfoot><tr><th scope="row">Total</th><td class="number">{{ report.total }}</td><td
class="number">{{ report.max }}</td><td></td></tr></tfoot>
</table>
{% for c in report.criteria %}
<section id="criterion-{{ c.id }}">
<h3>{{ c.title }}: {{ c.points }} / {{ c.max }}</h3>
<ul class="checks">{% for k in c.checks %}<li data-check="{{ k.id }}"><span class="badge {{
'full' if k.passed else 'lost' }}">{{ "passed" if k.passed else "lost" }}</span> {{ k.id }} ({{
k.points }} / {{ k.max }}): {{ k.detail }}</li>
{% endfor %}</ul>
{% if c.advice %}<p><strong>What to do:</strong></p><ul>{% for a in c.advice %}<li>{{ a }}</li>{%
endfor %}</ul>{% endif %}
</section>
{% endfor %}
{% if report.findings %}<h3>Findings</h3><ul id="findings">{% for f in report.findings %}<li>{{
f }}</li>{% endfor %}</ul>{% endif %}
{% else %}<p>There is no report to show.</p>{% endif %}
</section>

<section id="history">
<h2>Grade history</h2>
{% if s.history %}
{% if timeline %}{{ figure(timeline) }}{% endif %}
<ol class="timeline" id="timeline">{% for g in s.history %}<li data-seq="{{ g.seq }}"><strong>#{{
g.number }}</strong> (ledger event {{ g.seq }}): {% if g.final is none %}{{ g.status }}{% else
%}<span class="grade">{{ g.final }}</span>{% if g.reviewed %} after review (automated total {{
g.total }}: {{ g.reviewed }}){% endif %}{% endif %}{% if g.report %} <span class="key">report {{
g.report[:12] }}</span>{% endif %}{% if g.number
> 1 %}<br>Changed: {% for cause in g.causes %}{{ cause }}{% if not loop.last %}; {% endif %}{%
else %}nothing the ledger holds{% endfor %}{% if g.divergence %}<br>First divergence: {{
g.divergence }}{% endif %}{% endif %}{% for f in g.failed %}<br>Failed: {{ f }}{% endfor %}{%
for r in g.reviews %}<br>Review: {{ r }}{% endfor %}</li>
{% endfor %}</ol>
{% else %}<p>The ledger holds no grade of {{ s.row.student }}.</p>{% endif %}
</section>

<section id="diff">
<h2>Change since the previous grade</h2>
{% if s.change %}
<p>#{{ s.change.previous.number }} &rarr; #{{ s.change.current.number }}: {% for cause in
s.change.current.causes %}{{ cause }}{% if not loop.last %}; {% endif %}{% else %}nothing the
ledger records changed{% endfor %}.</p>
{% if s.change.criteria %}<table id="diff-criteria"><thead><tr><th scope="col">Criterion</th><th
scope="col" class="number">Before</th><th scope="col" class="number">After</th></tr></thead>
<tbody>{% for cid, title, before, after in s.change.criteria %}<tr data-criterion="{{ cid }}"><td>{{
title }}</td><td class="number">{{ before }}</td><td class="number">{{ after }}</td></tr>
{% endfor %}</tbody></table>{% endif %}
{% if s.change.checks %}<table id="diff-checks"><thead><tr><th scope="col">Check</th><th
scope="col" class="number">Before</th><th scope="col" class="number">After</th><th
scope="col">Now</th></tr></thead>
<tbody>{% for name, before, after, detail in s.change.checks %}<tr><td>{{ name }}</td><td
class="number">{{ before }}</td><td class="number">{{ after }}</td><td>{{ detail }}</td></tr>
{% endfor %}</tbody></table>{% elif not s.change.criteria %}<p>Every result is the same.</p>{%
endif %}
{% else %}<p>There is no earlier grade to compare with.</p>{% endif %}
</section>

<section id="traces">
<h2>What the agent asked, case by case</h2>
<p class="muted">In the grader's primary run: each call in the order the grader served it, and
the trace record the agent wrote for it (the record that names its key).</p>
{% if calls %}{% if calls.import_error %}<p class="warning">{{ calls.import_error }}</p>{% endif %}
{% for case in calls.cases %}
<section class="case" id="case-{{ case.case }}">
<h3>{{ case.case }}: {{ case.status }}{% if case.detail %} ({{ case.detail }}){% endif %}</h3>
{% if case.calls %}<ol class="calls">{% for call in case.calls %}{% set record =
case.trace[call.record] if call.get('record') is not none and call.record < case.trace | length
else none %}<li class="call {{
'served' if call.served else 'missed' }}" data-kind="{{ call.kind }}"><span class="badge">{{
call.kind }}</span>{% if call.get('tool') %} {{ call.tool }}{% endif %} <span class="key">{{
call.key }}</span> &mdash; {% if call.served %}answered from the recording{% else %}<span
class="miss">MISS: no recording</span>{% endif %}; trace: {% if record %}{{ "ok" if record.ok
else ("failed: " ~ (record.error or "no error named")) }}{% else %}<span class="miss">no record
names it</span>{%
endif %}{% if call.get('traced_early') %} (written before the grader answered){% endif %}</li>
{% endfor %}</ol>{% else %}<p>No call.</p>{% endif %}
{% set paired = case.calls | map(attribute='record', default=none) | select('number') | list
%}{% if
case.trace | length > paired | length %}<p class="warning">Trace records that name no call the
grader answered:</p><ul class="records">{% for record in case.trace %}{% if loop.index0 not
in paired %}<li class="record"><span class="key">{{ record.key }}</span> &mdash; {{ "ok" if
record.ok else ("failed: " ~ (record.error or "no error named")) }}</li>{% endif %}{% endfor
%}</ul>{% endif %}
{% if case.trace_error %}<p class="warning">Trace file: {{ case.trace_error }}</p>{% endif %}
</section>
{% endfor %}{% else %}<p>No calls were recorded for this submission.</p>{% endif %}
</section>
</main>
{% endblock %}
"""

TEMPLATES = {
    "base.html": _BASE,
    "figure.html": _FIGURE,
    "cohort.html": _COHORT,
    "rows.html": _ROWS,
    "student.html": _STUDENT,
}
