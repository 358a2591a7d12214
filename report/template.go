package report

import "html/template"

// pageTemplate is the report page. Everything it shows comes from page;
// html/template escapes every value (a category named "<b>" shows as
// such), and the plots are SVG this package drew. No script, no link, no
// image source: the page makes no request when opened.
var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
:root { --ink: #1b1f24; --muted: #59636e; --line: #d5dbe1; --bg: #ffffff; --panel: #f5f7f9;
  --ok: #1a7f37; --okbg: #e7f5ea; --warn: #9a6700; --warnbg: #fff5d6; --bad: #b3261e; --badbg: #fde7e5; --accent: #3b6ea8; }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", Arial, sans-serif; color: var(--ink); background: var(--bg); }
main { max-width: 1040px; margin: 0 auto; padding: 24px 20px 48px; }
h1 { font-size: 1.7em; margin: 0 0 4px; }
h2 { font-size: 1.3em; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 1.1em; margin: 28px 0 8px; }
p.sub { color: var(--muted); margin: 0 0 16px; }
nav { margin: 12px 0 0; font-size: .95em; }
nav a { margin-right: 14px; color: var(--accent); }
.story { border-radius: 8px; padding: 16px 20px; margin: 18px 0 8px; border: 2px solid; }
.story.private { background: var(--okbg); border-color: var(--ok); }
.story.conditional, .story.exact { background: var(--warnbg); border-color: var(--warn); }
.story.not-private { background: var(--badbg); border-color: var(--bad); }
.story .verdict { font-size: 1.35em; font-weight: 700; margin: 0 0 8px; }
.story.private .verdict { color: var(--ok); }
.story.conditional .verdict, .story.exact .verdict { color: var(--warn); }
.story.not-private .verdict { color: var(--bad); }
.story ul.reasons { margin: 0 0 10px; padding-left: 22px; font-weight: 600; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 8px 0; }
dl.facts dt { color: var(--muted); }
dl.facts dd { margin: 0; }
dl.facts dd.strong { font-weight: 700; }
table { border-collapse: collapse; margin: 8px 0 12px; font-size: .93em; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.small { font-size: .86em; color: var(--muted); }
.ok { color: var(--ok); font-weight: 600; }
.bad { color: var(--bad); font-weight: 700; }
.na { color: var(--muted); }
.note { color: var(--muted); font-size: .92em; }
.headline { font-weight: 600; padding: 8px 12px; border-radius: 6px; }
.headline.ok { background: var(--okbg); }
.headline.bad { background: var(--badbg); }
figure { margin: 12px 0 18px; }
svg.plot { display: block; width: 100%; max-width: 760px; height: auto; }
section.rtable { border-top: 1px solid var(--line); margin-top: 24px; }
details summary { cursor: pointer; color: var(--accent); margin: 6px 0; }
footer { margin-top: 40px; padding-top: 12px; border-top: 1px solid var(--line); color: var(--muted); font-size: .9em; }
code { font-family: ui-monospace, "Liberation Mono", Menlo, monospace; font-size: .92em; }
@media print { nav { display: none; } section.rtable { break-inside: avoid; } }
</style>
</head>
<body>
<main>
<header>
<h1>{{.Title}}</h1>
<p class="sub">Release: <code>{{.Source}}</code></p>
</header>

<section id="privacy" class="story {{.Verdict.Class}}">
<p class="verdict">{{.Verdict.Headline}}</p>
{{- if .Verdict.Reasons}}
<ul class="reasons">{{range .Verdict.Reasons}}<li>{{.}}</li>{{end}}</ul>
{{- end}}
<dl class="facts">
{{- range .Story}}
<dt>{{.Label}}</dt><dd{{if .Strong}} class="strong"{{end}}>{{.Value}}</dd>
{{- end}}
</dl>
</section>

<nav><a href="#budget">Budget</a><a href="#exact">What is exact</a><a href="#error">Expected error</a><a href="#checks">Checks</a><a href="#tables">Tables</a></nav>

<section id="budget">
<h2>What was spent, and how it was split</h2>
<p>{{.Budget.Summary}}</p>
{{- if .Budget.None}}<p class="note">{{.Budget.None}}</p>{{end}}
{{- if .Budget.Measurements}}
<table>
<thead><tr><th>measurement</th><th class="num">share</th><th class="num">of the total</th><th>sensitivity</th><th>noise per cell</th><th>sensitivity from</th></tr></thead>
<tbody>
{{- range .Budget.Measurements}}
<tr><td>{{.Cuboid}}</td><td class="num">{{.Share}}</td><td class="num">{{.Fraction}}</td><td>{{.Sensitivity}}</td><td>{{.Noise}}</td><td class="small">{{.Rule}}</td></tr>
{{- end}}
</tbody>
</table>
<p class="note">Shares are rounded up: the numbers shown are never below those spent.</p>
{{- end}}
{{- if .Budget.Plot}}<figure>{{.Budget.Plot}}</figure>{{end}}
{{- if .Budget.Split}}
<dl class="facts">
{{- range .Budget.Split}}
<dt>{{.Label}}</dt><dd>{{.Value}}</dd>
{{- end}}
</dl>
{{- end}}
</section>

<section id="exact">
<h2>What is exact</h2>
{{- if .Exact.Invariants}}
<p>Invariants, published exactly (public by assumption; no noise): {{range $i, $e := .Exact.Invariants}}{{if $i}}, {{end}}<strong>{{$e}}</strong>{{end}}. Every released table is made to agree with them; the <a href="#checks">checks</a> recompute what the released files let one verify.</p>
{{- else if .Exact.Stated}}
<p>No invariants: nothing was published exactly.</p>
{{- else}}
<p>The metadata ({{.MetaFile}}) does not list the invariants; see the release it comes from.</p>
{{- end}}
{{- if .Exact.Public}}
<p>Public tables, determined by the invariants and released without noise:</p>
<dl class="facts">
{{- range .Exact.Public}}
<dt>{{.Label}}</dt><dd>{{.Value}}</dd>
{{- end}}
</dl>
{{- end}}
{{- if .Exact.Estimate}}<p class="note">How the tables were made: {{.Exact.Estimate}}</p>{{end}}
</section>

<section id="error">
<h2>Expected error</h2>
<p class="note">moe90: {{.Error.Note}}. Standard error: the square root of the variance the metadata states for a table's cells (the largest cell's, where cells differ).</p>
<table>
<thead><tr><th>table</th><th class="num">cells</th><th>made</th><th class="num">standard error</th><th class="num">moe90 (metadata)</th><th>moe90 over the cells (files)</th></tr></thead>
<tbody>
{{- range .Error.Rows}}
<tr><td><a href="#{{.ID}}">{{.Name}}</a></td><td class="num">{{.Cells}}</td><td>{{.Status}}</td><td class="num">{{.StdError}}</td><td class="num">{{.MOE90}}</td><td>{{.Spread}}</td></tr>
{{- end}}
</tbody>
</table>
{{- if .Error.StdPlot}}<figure>{{.Error.StdPlot}}</figure>{{end}}
<figure>{{.Error.RangePlot}}</figure>
{{- if .Error.Levels}}
<h3 id="levels">By level of the hierarchy</h3>
<table>
<thead><tr><th>level</th><th>tables</th><th class="num">cells</th><th class="num">expected |error|</th><th class="num">mean moe90</th><th class="num">largest moe90</th><th>moe90 in the files</th></tr></thead>
<tbody>
{{- range .Error.Levels}}
<tr><td>{{.Level}}</td><td>{{.Tables}}</td><td class="num">{{.Cells}}</td><td class="num">{{.AbsError}}</td><td class="num">{{.MeanMOE}}</td><td class="num">{{.MaxMOE}}</td><td>{{.FileMOE}}</td></tr>
{{- end}}
</tbody>
</table>
<p class="note">{{.Error.LevelNote}}</p>
<figure>{{.Error.LevelPlot}}</figure>
<figure>{{.Error.LevelMOE}}</figure>
{{- end}}
</section>

<section id="checks">
<h2>Invariants and tables checked</h2>
<p class="note">Recomputed here from the released numbers alone: each table summed to the margins it shares with the others.</p>
<p class="headline {{if .Checks.OK}}ok{{else}}bad{{end}}">{{.Checks.Headline}}</p>
{{- if .Checks.Invariants}}
<h3>Invariants</h3>
<table>
<thead><tr><th>invariant</th><th>tables</th><th>largest deviation</th><th>result</th></tr></thead>
<tbody>
{{- range .Checks.Invariants}}
<tr><td>{{.What}}</td><td>{{.Detail}}</td><td>{{.Deviation}}</td><td class="{{.Class}}">{{.Status}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{- if .Checks.Tables}}
<h3>Each table's own claims</h3>
<table>
<thead><tr><th>table</th><th>claim</th><th></th><th>result</th></tr></thead>
<tbody>
{{- range .Checks.Tables}}
<tr><td>{{.What}}</td><td>{{.Detail}}</td><td>{{.Deviation}}</td><td class="{{.Class}}">{{.Status}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{- if .Checks.Pairs}}
<details{{if not .Checks.OK}} open{{end}}>
<summary>Every pair of tables ({{len .Checks.Pairs}})</summary>
<table>
<thead><tr><th>tables</th><th>compared on</th><th>largest deviation</th><th>result</th></tr></thead>
<tbody>
{{- range .Checks.Pairs}}
<tr><td>{{.What}}</td><td>{{.Detail}}</td><td>{{.Deviation}}</td><td class="{{.Class}}">{{.Status}}</td></tr>
{{- end}}
</tbody>
</table>
</details>
{{- end}}
{{- range .Checks.Notes}}<p class="note">{{.}}</p>{{end}}
</section>

<section id="tables">
<h2>The tables</h2>
<p class="note">Relative margins are moe90 divided by the <em>released (noisy)</em> count, not the true count, which this report never sees.</p>
{{- range .Tables}}
<section class="rtable" id="{{.ID}}">
<h3>{{.Name}} <span class="note">— <code>{{.File}}</code>, {{.Status}}</span></h3>
<dl class="facts">
{{- range .Facts}}
<dt>{{.Label}}</dt><dd>{{.Value}}</dd>
{{- end}}
</dl>
<table>
<thead><tr><th>largest cells</th><th class="num">count</th><th class="num">moe90</th><th class="num">moe90 / count</th></tr></thead>
<tbody>
{{- range .Largest}}
<tr><td>{{.Label}}</td><td class="num">{{.Count}}</td><td class="num">{{.MOE90}}</td><td class="num">{{.Relative}}</td></tr>
{{- end}}
</tbody>
</table>
<p>{{.RelText}}</p>
{{- if .RelPlot}}<figure>{{.RelPlot}}</figure>{{end}}
</section>
{{- end}}
</section>

<footer>
Made by {{.Generator}} from the release's own files (its metadata and the tables it lists), never from the data: everything on this page is post-processing of what the release published. Margins of error, shares and deviations are rounded up; fractions of cells meeting a standard are rounded down.
</footer>
</main>
</body>
</html>
`))
