package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"

	"github.com/knowdp/knowdp/domain"
)

// Options says what Render may use besides the release.
type Options struct {
	// Title heads the page; "knowdp release report" if empty.
	Title string
	// Source names the release on the page (its directory or metadata
	// file, as the user gave it).
	Source string
	// Schema is the release's schema, or nil: see Check.
	Schema *domain.Schema
	// Generator names the program in the page's footer ("knowdp v1.2").
	Generator string
	// LargestCells is how many of each table's largest cells are listed
	// (default 10).
	LargestCells int
}

// Render writes the release's report to w: one HTML page with inline CSS
// and inline SVG plots, no script and no external reference. It computes
// everything it shows from rel (and opt.Schema) alone.
func Render(w io.Writer, rel *Release, opt Options) error {
	if opt.Title == "" {
		opt.Title = "knowdp release report"
	}
	if opt.LargestCells <= 0 {
		opt.LargestCells = 10
	}
	checks, err := Check(rel, opt.Schema)
	if err != nil {
		return err
	}
	pg, err := buildPage(rel, checks, opt)
	if err != nil {
		return err
	}
	return pageTemplate.Execute(w, pg)
}

// page is what the template shows.
type page struct {
	Title, Source, Generator string
	Verdict                  Verdict
	Story                    []row
	Budget                   budgetView
	Exact                    exactView
	Error                    errorView
	Checks                   checksView
	Tables                   []tableView
	OneTable                 bool
	MetaFile                 string
}

// row is a labelled value.
type row struct {
	Label, Value string
	Strong       bool
}

type budgetView struct {
	Summary      string
	Unit         string // "ε" or "ρ"
	Measurements []measurementView
	Plot         template.HTML
	Split        []row
	None         string
}

type measurementView struct {
	Cuboid, Share, Fraction, Sensitivity, Noise, Rule string
}

type exactView struct {
	// Stated is false when the metadata does not list the invariants
	// (estimate.json), which is not the same as listing none.
	Stated     bool
	Invariants []string
	Public     []row
	Estimate   string
}

type errorView struct {
	Rows      []errorRow
	StdPlot   template.HTML
	RangePlot template.HTML
	Note      string
	Levels    []levelRow
	LevelPlot template.HTML
	LevelMOE  template.HTML
	LevelNote string
}

type errorRow struct {
	ID, Name, Cells, Status, StdError, MOE90, Spread string
}

type levelRow struct {
	Level, Tables, Cells, AbsError, MeanMOE, MaxMOE, FileMOE string
}

type checksView struct {
	Headline   string
	OK         bool
	Invariants []checkRow
	Tables     []checkRow
	Pairs      []checkRow
	Notes      []string
}

type checkRow struct {
	What, Detail, Deviation, Status string
	OK                              bool
	// NA marks a check that could not be made: neither passed nor failed.
	NA bool
}

// Class is the row's result's CSS class.
func (r checkRow) Class() string {
	switch {
	case r.NA:
		return "na"
	case r.OK:
		return "ok"
	}
	return "bad"
}

type tableView struct {
	ID, Name, File, Status string
	Facts                  []row
	Largest                []cellRow
	RelText                string
	RelPlot                template.HTML
}

type cellRow struct {
	Label, Count, MOE90, Relative string
}

func buildPage(rel *Release, c *Checks, opt Options) (*page, error) {
	m := rel.Meta
	pg := &page{Title: opt.Title, Source: opt.Source, Generator: opt.Generator, Verdict: m.Verdict(), OneTable: m.OneTable, MetaFile: m.File}
	if pg.Generator == "" {
		pg.Generator = "knowdp report"
	}
	pg.Story = story(m)
	var err error
	if pg.Budget, err = budget(m); err != nil {
		return nil, err
	}
	pg.Exact = exact(rel)
	if pg.Error, err = errorsOf(rel); err != nil {
		return nil, err
	}
	pg.Checks = checksOf(rel, c)
	for i, t := range rel.Tables {
		tv, err := tableOf(i, t, opt.LargestCells)
		if err != nil {
			return nil, err
		}
		pg.Tables = append(pg.Tables, tv)
	}
	return pg, nil
}

func yesNo(b *bool, yes, no string) string {
	switch {
	case b == nil:
		return "not stated in the metadata"
	case *b:
		return yes
	}
	return no
}

// story is the privacy story, field by field.
func story(m Metadata) []row {
	loss := m.LossText()
	spent := fmt.Sprintf("%s (as stated: ε = %s", loss, fullNum(m.Epsilon))
	if m.Gaussian {
		spent = fmt.Sprintf("%s (as stated: ρ = %s", loss, fullNum(m.Rho))
		if m.RhoBudget > 0 {
			spent += "; budget ρ = " + fullNum(m.RhoBudget)
		}
	} else if m.EpsilonBudget > 0 {
		spent += "; budget ε = " + fullNum(m.EpsilonBudget)
	}
	spent += "; shown rounded up, never understated)"
	guarantee := map[string]string{
		"unconditional": "unconditional: knowdp computed or checked the sensitivity of every measurement",
		"conditional":   "conditional: it rests on a sensitivity given by the caller that knowdp could not check",
		"none":          "none: the release is not private",
		"inherited":     "inherited from the release the tables were estimated from",
	}[m.Guarantee]
	if guarantee == "" {
		guarantee = m.Guarantee
	}
	if m.GuaranteeNote != "" {
		guarantee += " (" + m.GuaranteeNote + ")"
	}
	class := m.Verdict().Class
	private := class != "not-private"
	privateText := map[string]string{
		"private":     "yes",
		"conditional": "only if the sensitivity given is at least the true one (see the guarantee)",
		"exact":       "the counts are the true counts, determined by public invariants",
		"not-private": "NO",
	}[class]
	lossLabel := "Privacy loss"
	if !private {
		// A loss stated for a release that is not private is what the
		// noise was calibrated for, not a guarantee.
		lossLabel = "Noise calibrated for"
	}
	rows := []row{
		{Label: "Private", Value: privateText, Strong: true},
		{Label: lossLabel, Value: spent, Strong: true},
		{Label: "Neighbours", Value: m.Neighbours},
		{Label: "Guarantee", Value: guarantee},
		{Label: "Seeded", Value: yesNo(m.Seeded, "YES: the noise is reproducible from the seed, so the release is NOT private", "no: the noise came from the operating system's random source")},
		{Label: "Domains", Value: yesNo(m.DomainsFromData, "read from the data: NOT private", "declared in the schema, not read from the data")},
		{Label: "Mechanism", Value: m.Mechanism},
	}
	if m.Composition != "" {
		rows = append(rows, row{Label: "Composition", Value: m.Composition})
	}
	if m.Note != "" {
		rows = append(rows, row{Label: "Note", Value: m.Note})
	}
	for _, w := range m.Warnings {
		rows = append(rows, row{Label: "Warning", Value: w, Strong: true})
	}
	return rows
}

// fullNum is a number as stated, in full.
func fullNum(x float64) string { return domain.FormatExact(x) }

func budget(m Metadata) (budgetView, error) {
	b := budgetView{Unit: "ε"}
	total := m.Epsilon
	if m.Gaussian {
		b.Unit, total = "ρ", m.Rho
	}
	switch {
	case m.OneTable:
		b.Summary = "One table, measured once: the whole loss, " + m.LossText() + ", is spent on it."
	case m.Composition != "":
		b.Summary = fmt.Sprintf("Spent %s in all, split between %d measurement(s) (%s).", m.LossText(), len(m.Measurements), m.Composition)
	default:
		b.Summary = "Spent " + m.LossText() + "."
	}
	if m.Verdict().Class == "not-private" {
		b.Summary = "The release is NOT private (see above): what follows is how the noise was calibrated and split, not a guarantee. " + b.Summary
	}
	if len(m.Measurements) == 0 {
		b.None = "Nothing was measured with noise here: every table is public (exact) or, for an estimate, derived from the measurements of the release it comes from."
	}
	var labels []string
	var shares []float64
	for _, me := range m.Measurements {
		share := me.Epsilon
		// Sensitivities and scales describe the mechanism: shown to the
		// nearest, as rounding either way would flatter something.
		sens := "L1 " + Sig(me.Sensitivity, 6)
		noise := "Laplace, scale " + Sig(me.Scale, 6)
		rule := me.SensitivityRule
		if m.Gaussian {
			share = me.Rho
			sens = "L2 " + Sig(me.L2Sensitivity, 6)
			noise = "Gaussian, σ " + Sig(me.Sigma, 6)
			rule = me.L2SensitivityRule
		}
		frac := "—"
		if total > 0 {
			frac = PercentNear(share / total)
		}
		b.Measurements = append(b.Measurements, measurementView{
			Cuboid: CuboidName(me.Cuboid), Share: b.Unit + " " + Up(share, 6), Fraction: frac,
			Sensitivity: sens, Noise: noise, Rule: rule,
		})
		labels = append(labels, CuboidName(me.Cuboid))
		shares = append(shares, share)
	}
	if len(m.Measurements) > 1 {
		p, err := barPlot("Share of the budget per measurement", b.Unit+" spent on it", labels, shares)
		if err != nil {
			return b, err
		}
		b.Plot = template.HTML(p)
	}
	if m.Split != "" {
		b.Split = append(b.Split, row{Label: "Split", Value: m.Split})
	}
	if m.Strategy != "" {
		b.Split = append(b.Split, row{Label: "What was measured", Value: m.Strategy})
	}
	if m.Objective != nil {
		b.Split = append(b.Split, row{Label: "Objective (weighted total variance)", Value: Num(*m.Objective)})
	}
	if m.ObjectiveBound != nil && m.OptimalityGap != nil {
		over := "the candidate measurements"
		if m.BoundOver != "" {
			over = m.BoundOver
		}
		b.Split = append(b.Split, row{Label: "Proved lower bound of the split", Value: Num(*m.ObjectiveBound) + " over " + over},
			row{Label: "Split gap", Value: Percent(*m.OptimalityGap) + ": no split of the budget among these candidates makes the objective smaller by more than this share of it (certified by the bound; other strategies may do better)"})
	}
	if m.SplitMethod != "" {
		b.Split = append(b.Split, row{Label: "Method", Value: m.SplitMethod})
	}
	return b, nil
}

func exact(rel *Release) exactView {
	e := exactView{Stated: rel.Meta.Exact != nil}
	for _, x := range rel.Meta.Exact {
		e.Invariants = append(e.Invariants, CuboidName(x))
	}
	for _, t := range rel.Tables {
		if t.Public {
			note := t.Note
			if note == "" {
				note = "published exactly"
			}
			e.Public = append(e.Public, row{Label: t.Name(), Value: note})
		}
	}
	e.Estimate = rel.Meta.Estimate
	return e
}

// status says how a table came about.
func status(t TableMeta) string {
	switch {
	case t.Public:
		return "public (exact)"
	case t.Measured:
		return "measured"
	}
	return "derived from the measurements"
}

func tableID(i int) string { return fmt.Sprintf("table-%d", i+1) }

func errorsOf(rel *Release) (errorView, error) {
	var e errorView
	e.Note = strings.TrimSuffix(rel.Meta.MOE90Note, ".")
	var labels, stdLabels []string
	var sums []Summary
	var stds []float64
	for i, t := range rel.Tables {
		s := Summarize(t.Margins)
		r := errorRow{ID: tableID(i), Name: t.Name(), Cells: Num(float64(t.Cells())), Status: status(t.TableMeta),
			StdError: "not stated", MOE90: Up(t.MOE90, 4)}
		if se, ok := StdError(t.TableMeta); ok {
			r.StdError = Up(se, 4)
			stdLabels = append(stdLabels, t.Name())
			stds = append(stds, se)
		}
		if s.Min == s.Max {
			r.Spread = "the same on every cell: " + Up(s.Max, 4)
		} else {
			r.Spread = fmt.Sprintf("%s to %s (median %s)", Up(s.Min, 4), Up(s.Max, 4), Up(s.Median, 4))
		}
		e.Rows = append(e.Rows, r)
		labels = append(labels, t.Name())
		sums = append(sums, s)
	}
	var err error
	var p string
	if len(stds) > 0 {
		if p, err = barPlot("Expected error per table: standard error of a cell (√variance)", "standard error (counts)", stdLabels, stds); err != nil {
			return e, err
		}
		e.StdPlot = template.HTML(p)
	}
	if p, err = rangePlot("Margin of error (moe90) over the cells of each table", "moe90 (counts): line from least to largest, box 10th to 90th percentile, tick at the median", labels, sums); err != nil {
		return e, err
	}
	e.RangePlot = template.HTML(p)

	levels := rel.Levels()
	if len(levels) == 0 {
		return e, nil
	}
	integer := false
	var lnames []string
	var abs []float64
	var lsums []Summary
	for _, l := range levels {
		var names []string
		for _, i := range l.Tables {
			names = append(names, rel.Tables[i].Name())
			integer = integer || rel.Tables[i].Integer
		}
		s := Summarize(rel.MOE90s(l.Tables))
		fm := "—"
		if s.N > 0 {
			fm = fmt.Sprintf("median %s, largest %s", Up(s.Median, 4), Up(s.Max, 4))
		}
		e.Levels = append(e.Levels, levelRow{Level: l.Level, Tables: strings.Join(names, " "), Cells: Num(float64(l.Cells)),
			AbsError: Up(l.MeanAbsError, 4), MeanMOE: Up(l.MeanMOE90, 4), MaxMOE: Up(l.MaxMOE90, 4), FileMOE: fm})
		lnames = append(lnames, l.Level)
		abs = append(abs, l.MeanAbsError)
		lsums = append(lsums, s)
	}
	e.LevelNote = "Expected |error| and the mean and largest moe90 per level are as release.json states them, from the mechanism alone."
	if integer {
		e.LevelNote += " Expected |error| is that of the least-squares estimate, before integer rounding; the moe90 columns include the 1 the tables add to every margin for the rounding (release.json states them so since knowdp states the level summary as published; older files state them without it), and the last column is read from the files."
	}
	if p, err = barPlot("Expected error per level: mean |error| of a cell", "expected |error| (counts)", lnames, abs); err != nil {
		return e, err
	}
	e.LevelPlot = template.HTML(p)
	if p, err = rangePlot("Margin of error (moe90) over the cells of each level, from the tables' files", "moe90 (counts): line from least to largest, box 10th to 90th percentile, tick at the median", lnames, lsums); err != nil {
		return e, err
	}
	e.LevelMOE = template.HTML(p)
	return e, nil
}

func checksOf(rel *Release, c *Checks) checksView {
	v := checksView{OK: true, Notes: c.Notes}
	name := func(i int) string { return rel.Tables[i].Name() }
	bad := 0
	for _, ic := range c.Invariants {
		r := checkRow{What: CuboidName(ic.Exact), OK: true}
		var names []string
		for _, i := range ic.Tables {
			names = append(names, name(i))
		}
		switch {
		case len(ic.Tables) < 2:
			r.Detail, r.Deviation, r.Status, r.NA = ic.Note, "—", "not checkable", true
		default:
			r.Detail = "held by " + strings.Join(names, ", ")
			if ic.Public >= 0 {
				r.Detail += "; " + name(ic.Public) + " is the invariant itself"
			}
			r.Deviation = devText(ic.MaxDeviation, ic.At)
			r.OK = ic.OK()
			r.Status = verdictWord(ic.MaxDeviation, ic.Tolerance)
		}
		if !r.OK {
			bad++
		}
		v.Invariants = append(v.Invariants, r)
	}
	for _, tc := range c.Tables {
		t := rel.Tables[tc.Table]
		if !t.Integer && !t.NonNeg {
			continue
		}
		r := checkRow{What: t.Name(), OK: tc.NonInteger == 0 && tc.Negative == 0, Deviation: "smallest count " + Num(tc.MinCount)}
		if t.Integer {
			r.Detail = "integer table: every count a non-negative integer"
		} else {
			r.Detail = "non-negative table: no count below 0"
		}
		r.Status = "holds"
		if !r.OK {
			r.Status = fmt.Sprintf("FAILS: %d non-integer, %d negative", tc.NonInteger, tc.Negative)
			bad++
		}
		v.Tables = append(v.Tables, r)
	}
	for _, p := range c.Pairs {
		rel := "common margin " + CuboidName(p.Margin)
		switch p.RollUp {
		case "B":
			rel = name(p.A) + " rolled up to " + name(p.B) + " equals " + name(p.B)
		case "A":
			rel = name(p.B) + " rolled up to " + name(p.A) + " equals " + name(p.A)
		}
		if p.FixedBy != "" {
			rel += "; fixed by the invariant " + p.FixedBy
		}
		r := checkRow{What: name(p.A) + " and " + name(p.B), Detail: fmt.Sprintf("%s (%d cells)", rel, p.Cells),
			Deviation: devText(p.MaxDeviation, p.At), OK: p.OK(), Status: verdictWord(p.MaxDeviation, p.Tolerance)}
		if !r.OK {
			bad++
		}
		v.Pairs = append(v.Pairs, r)
	}
	v.OK = bad == 0
	switch {
	case len(c.Pairs) == 0 && len(v.Tables) == 0:
		v.Headline = "One table: there is no other table to compare it with."
	case v.OK && c.Worst >= 0 && c.Pairs[c.Worst].MaxDeviation == 0:
		v.Headline = fmt.Sprintf("Every table adds up exactly: %d pair(s) of tables compared on their common margins, with no deviation.", len(c.Pairs))
	case v.OK && c.Worst >= 0:
		w := c.Pairs[c.Worst]
		v.Headline = fmt.Sprintf("Every table adds up: %d pair(s) of tables compared on their common margins; the largest deviation is %s (%s and %s on %s).",
			len(c.Pairs), Up(w.MaxDeviation, 3), name(w.A), name(w.B), CuboidName(w.Margin))
	case v.OK:
		v.Headline = "Every check holds."
	default:
		v.Headline = fmt.Sprintf("%d check(s) FAIL: see below.", bad)
	}
	return v
}

func devText(d float64, at string) string {
	if at == "" {
		return Up(d, 3)
	}
	return Up(d, 3) + " at " + at
}

func verdictWord(dev, tol float64) string {
	switch {
	case dev == 0:
		return "exact"
	case dev <= tol:
		return "agrees (floating-point rounding)"
	}
	return "DIFFERS"
}

func tableOf(i int, t *Table, n int) (tableView, error) {
	tv := tableView{ID: tableID(i), Name: t.Name(), File: t.File, Status: status(t.TableMeta)}
	facts := []row{{Label: "Cells", Value: Num(float64(t.Cells()))}, {Label: "Columns", Value: strings.Join(t.Columns, ", ")}}
	if t.Note != "" {
		facts = append(facts, row{Label: "Note", Value: t.Note})
	}
	facts = append(facts, row{Label: "moe90 (metadata)", Value: Up(t.MOE90, 6)})
	if se, ok := StdError(t.TableMeta); ok {
		facts = append(facts, row{Label: "Standard error", Value: Up(se, 6)})
	}
	if t.Integer {
		v := "non-negative integers"
		if t.IntegerExact != nil && !*t.IntegerExact {
			v += "; the invariants do NOT hold exactly (largest deviation " + Up(t.IntegerMaxDeviation, 4) + ")"
		}
		facts = append(facts, row{Label: "Counts", Value: v})
	} else if t.NonNeg {
		facts = append(facts, row{Label: "Counts", Value: "non-negative"})
	}
	if t.IntegerMethod != "" {
		facts = append(facts, row{Label: "Rounding", Value: t.IntegerMethod})
	}
	tv.Facts = facts
	for _, c := range LargestCells(t, n) {
		r := cellRow{Label: c.Label, Count: Num(c.Count), MOE90: Up(c.MOE90, 4), Relative: "—"}
		if !math.IsNaN(c.Relative) {
			r.Relative = Percent(c.Relative)
		}
		tv.Largest = append(tv.Largest, r)
	}
	rel, skipped := RelativeMargins(t)
	switch {
	case len(rel) == 0:
		tv.RelText = "No cell has a positive count: relative margins are not defined."
	case rel[len(rel)-1] == 0:
		tv.RelText = "Every margin is 0: the counts are exact."
	default:
		tv.RelText = fmt.Sprintf("Of the %s cells with a positive count, %s have a margin of error within 10%% of their count and %s within 50%%; the median relative margin is %s.",
			Num(float64(len(rel))), PercentDown(FractionWithin(rel, 0.1)), PercentDown(FractionWithin(rel, 0.5)), Percent(quantile(rel, 0.5)))
		if skipped > 0 {
			tv.RelText += fmt.Sprintf(" %s cell(s) with a count of 0 or less are left out.", Num(float64(skipped)))
		}
		if rel[0] > 0 {
			p, err := cdfPlot(t.Name()+": moe90 relative to the noisy count, over the cells", "moe90 / released count", rel)
			if err != nil {
				return tv, err
			}
			tv.RelPlot = template.HTML(p)
		}
	}
	return tv, nil
}
