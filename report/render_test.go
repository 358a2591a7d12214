package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/knowdp/knowdp/domain"
)

func render(t *testing.T, rel *Release, opt Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, rel, opt); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// selfContained fails the test if the page could make a request when
// opened: a script, a stylesheet or image link, a CSS url() or @import,
// or any URL other than the SVG namespaces (names, never fetched).
func selfContained(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "<object", "<embed", "src=", "url(", "@import", "srcset"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	for _, u := range regexp.MustCompile(`(?i)(https?:|ftp:|file:|//)[^"'\s<>)]*`).FindAllString(page, -1) {
		if u != "http://www.w3.org/2000/svg" && u != "http://www.w3.org/1999/xlink" {
			t.Errorf("the page refers to %q", u)
		}
	}
	for _, m := range regexp.MustCompile(`href="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "#") {
			t.Errorf("a link leaves the page: %q", m[1])
		}
	}
}

func TestRenderFlat(t *testing.T) {
	fsys := flatRelease()
	// A category with markup in its name is shown, not interpreted.
	fsys["a.csv"] = &fstest.MapFile{Data: []byte("a,count,moe90\n<b>&x,3,3\ny,7.5,3\n")}
	fsys["ab.csv"] = &fstest.MapFile{Data: []byte("a,b,count,moe90\n<b>&x,p,1,4.5\n<b>&x,q,2,4.5\ny,p,3,4.5\ny,q,4,4.5\n")}
	page := render(t, mustLoad(t, fsys, ""), Options{Title: "Report <T>", Source: "rel"})
	selfContained(t, page)
	for _, want := range []string{
		"<title>Report &lt;T&gt;</title>",
		`<section id="privacy" class="story private">`,
		"Differentially private: ε = 1.",
		"as stated: ε = 0.9999999999990905; budget ε = 1",
		`<td class="num">ε 0.75</td><td class="num">75%</td>`,
		`<td class="num">ε 0.25</td><td class="num">25%</td>`,
		"Laplace, scale 2.6666",
		"Split gap</dt><dd>5%",
		"<strong>{b}</strong>",
		"2 check(s) FAIL",
		"0.5 at y", // {a}'s y against {a,b}'s y margin
		"<details open>",
		`id="table-1"`, `id="table-2"`, `id="table-3"`,
		"&lt;b&gt;&amp;x",
		// {a,b}: standard error √9 = 3, moe90 4.5 on every cell; {a}: 3/3 = 100% and 3/7.5 = 40%.
		`<td class="num">3</td><td class="num">4.5</td><td>the same on every cell: 4.5</td>`,
		`<td>y</td><td class="num">7.5</td><td class="num">3</td><td class="num">40%</td>`,
		"Of the 2 cells with a positive count, 0% have a margin of error within 10% of their count and 50% within 50%",
		"Every margin is 0: the counts are exact.",
		`<td class="na">not checkable</td>`, // only {a,b} holds the invariant {b}
		`<td class="bad">DIFFERS</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "<b>&x") {
		t.Error("a category's markup reached the page unescaped")
	}
	// The budget split, the standard errors, the margins, and one
	// distribution per table with a positive margin ({a,b} and {a}).
	if n := strings.Count(page, `<svg class="plot"`); n != 5 {
		t.Errorf("%d plots, want 5", n)
	}
	for _, m := range regexp.MustCompile(`<svg class="plot"[^>]*width="([0-9.]+)pt" height="([0-9.]+)pt"`).FindAllStringSubmatch(page, -1) {
		if m[1] == "0" || m[2] == "0" {
			t.Errorf("a plot of size %s x %s", m[1], m[2])
		}
	}
}

func TestRenderHierarchy(t *testing.T) {
	s, err := domain.ParseSchema([]byte(geoSchema))
	if err != nil {
		t.Fatal(err)
	}
	page := render(t, mustLoad(t, geoRelease(), ""), Options{Schema: s})
	selfContained(t, page)
	for _, want := range []string{
		"<title>knowdp release report</title>",
		`<h3 id="levels">By level of the hierarchy</h3>`,
		// The state level: expected |error| 1.5, moe90 3 as stated, and in the files.
		`<td>state</td><td>{geo,sex}</td><td class="num">6</td><td class="num">1.5</td><td class="num">3</td><td class="num">3</td><td>median 3, largest 3</td>`,
		"{geo,sex} rolled up to {geo:region} equals {geo:region}; fixed by the invariant {geo:region} (2 cells)",
		"2 at r2",
		"{geo:region} is the invariant itself",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The standard errors, the margins per table, the error and the
	// margins per level, and geo-sex's and sex's distributions.
	if n := strings.Count(page, `<svg class="plot"`); n != 6 {
		t.Errorf("%d plots, want 6", n)
	}
}

func TestRenderNotPrivate(t *testing.T) {
	fsys := flatRelease()
	meta := strings.Replace(workloadJSON, `"seeded": false, "domains_from_data": false, "private": true`, `"seeded": true, "domains_from_data": false, "private": false`, 1)
	meta = strings.Replace(meta, `"guarantee": "unconditional"`, `"guarantee": "none"`, 1)
	fsys["release.json"] = &fstest.MapFile{Data: []byte(meta)}
	page := render(t, mustLoad(t, fsys, ""), Options{})
	for _, want := range []string{
		`<section id="privacy" class="story not-private">`,
		"NOT differentially private",
		"the noise was seeded (--seed)",
		"<dt>Noise calibrated for</dt>",
		"The release is NOT private (see above)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, "Differentially private:") || strings.Contains(page, "<dt>Privacy loss</dt>") {
		t.Error("a seeded release is presented as private")
	}
}

// TestRenderStory checks the privacy box of a conditional release and of
// one whose counts are the true counts.
func TestRenderStory(t *testing.T) {
	for _, c := range []struct {
		name, from, to string
		want           []string
	}{
		{"conditional", `"guarantee": "unconditional"`, `"guarantee": "conditional", "guarantee_note": "sensitivity 9 given for {a,b}"`,
			[]string{`class="story conditional"`, "Private only under a condition: ε = 1", "<dd class=\"strong\">only if the sensitivity given", "sensitivity 9 given for {a,b}"}},
		{"exact", `"seeded": false,`, `"released_exactly": true, "seeded": false,`,
			[]string{`class="story exact"`, "The released counts are the TRUE counts", "<dd class=\"strong\">the counts are the true counts"}},
	} {
		fsys := flatRelease()
		fsys["release.json"] = &fstest.MapFile{Data: []byte(strings.Replace(workloadJSON, c.from, c.to, 1))}
		page := render(t, mustLoad(t, fsys, ""), Options{})
		for _, w := range c.want {
			if !strings.Contains(page, w) {
				t.Errorf("%s: the page lacks %q", c.name, w)
			}
		}
	}
}
