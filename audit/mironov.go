package audit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot/plotter"

	"github.com/knowdp/knowdp/noise"
)

// textbookLaplace is the attack's victim, NOT a mechanism to use: the
// textbook Laplace mechanism in floating point,
//
//	x + b * (-sgn(u) * ln(1 - 2|u|)),  u uniform on [-1/2, 1/2),
//
// with u of 53-bit resolution (what math/rand's Float64() - 0.5 gives).
// The set of float64 values it can return depends on x, which is
// Mironov's attack. The explicit conversions stop the compiler from fusing
// the multiply and add, so that textbookCanProduce replays the arithmetic
// bit for bit.
func textbookLaplace(r *noise.Rand, x, b float64) float64 {
	for {
		k := r.Uint64() >> 11 // uniform on [0, 2^53)
		if k == 0 {
			continue // u = -1/2: ln 0
		}
		u := float64(k)*0x1p-53 - 0.5 // exact
		sgn := 1.0
		if u < 0 {
			sgn = -1
		}
		noise := float64(b * (-sgn * math.Log(1-2*math.Abs(u))))
		return float64(x + noise)
	}
}

// textbookCanProduce reports whether textbookLaplace(x, b) can return y.
// The argument of its logarithm, 1 - 2|u|, is exactly m 2^-52 for an
// integer m in [1, 2^52], and its noise is sgn(u) fl(b * -ln(m 2^-52)), so
// the outputs reachable on one side of x are fl(x ± mag(m)), monotone in m:
// a binary search finds the m whose output is nearest y, and a small window
// around it covers the last-bit non-monotonicity of math.Log. A true answer
// is certain (an m producing y exactly was found); false means no m does.
func textbookCanProduce(y, x, b float64) bool {
	if y == x {
		return true // u = 0
	}
	s := 1.0
	if y < x {
		s = -1
	}
	out := func(m uint64) float64 {
		return float64(x + s*float64(b*-math.Log(float64(m)*0x1p-52)))
	}
	// The smallest m with s*out(m) <= s*y: out moves towards x as m grows.
	lo, hi := uint64(1), uint64(1)<<52
	for lo < hi {
		mid := lo + (hi-lo)/2
		if s*out(mid) <= s*y {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	const window = 16
	for m := max(1, lo-min(lo, window)); m <= min(1<<52, lo+window); m++ {
		if out(m) == y {
			return true
		}
	}
	return false
}

// MironovSettings are the parameters of the floating-point attack.
type MironovSettings struct {
	// Eps lists the privacy levels attacked; the noise scale is 1/eps
	// (sensitivity 1, inputs 0 and 1).
	Eps []float64
	// Samples is the number of outputs drawn on each input, per eps.
	Samples int
}

// MironovDefaults returns the full settings (eps from 0.01 to 10, 20000
// outputs per input) or the quick ones (four eps, 1000 outputs).
func MironovDefaults(quick bool) MironovSettings {
	if quick {
		return MironovSettings{Eps: []float64{0.1, 0.5, 1, 2}, Samples: 1000}
	}
	return MironovSettings{Eps: []float64{0.01, 0.03, 0.1, 0.3, 0.5, 1, 2, 3, 5, 10}, Samples: 20000}
}

// MironovPoint is the outcome for one eps.
type MironovPoint struct {
	Eps float64
	// Textbook is the share of the textbook mechanism's outputs (on inputs
	// 0 and 1, equally many) that only one of the two inputs can produce:
	// each of them reveals the input with certainty. From0 and From1 split
	// it by the input that produced the output.
	Textbook, From0, From1 float64
	// Grid is the same share for knowdp's grid Laplace: every grid point
	// is possible from both inputs, so it is 0.
	Grid float64
	// GridMaxLoss is the largest |ln P(y | 0) - ln P(y | 1)| over the grid
	// outputs drawn, from the noise's exact probabilities: at most eps.
	GridMaxLoss float64
}

// Mironov runs the floating-point attack of Mironov ("On significance of
// the least significant bits for differential privacy", CCS 2012) on the
// textbook Laplace mechanism and on knowdp's grid Laplace, for a query of
// sensitivity 1 on the inputs 0 and 1.
func Mironov(ctx context.Context, r *noise.Rand, s MironovSettings) ([]MironovPoint, error) {
	if s.Samples < 1 || len(s.Eps) == 0 {
		return nil, errors.New("audit: Mironov attack needs at least one eps and one sample")
	}
	var out []MironovPoint
	for _, eps := range s.Eps {
		if !(eps > 0) || math.IsInf(eps, 0) {
			return nil, fmt.Errorf("audit: Mironov attack: eps must be finite and > 0, got %v", eps)
		}
		b := 1 / eps
		lap, err := noise.NewLaplace(1, eps)
		if err != nil {
			return nil, err
		}
		dist, g := lap.Dist(), lap.Grid()
		pt := MironovPoint{Eps: eps}
		var gridRevealing int
		for _, x := range []float64{0, 1} {
			revealing := 0
			for range s.Samples {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				y := textbookLaplace(r, x, b)
				if textbookCanProduce(y, 0, b) != textbookCanProduce(y, 1, b) {
					revealing++
				}
				gy, err := lap.Add(r, x)
				if err != nil {
					return nil, err
				}
				// Grid outputs are grid points; from input x the noise
				// in grid units is gy/g - x/g, and every integer has
				// positive probability.
				p0, p1 := dist.Prob(int64(gy/g)), dist.Prob(int64(gy/g)-int64(1/g))
				if math.Mod(gy, g) != 0 || (p0 > 0) != (p1 > 0) {
					gridRevealing++
				}
				pt.GridMaxLoss = math.Max(pt.GridMaxLoss, math.Abs(math.Log(p0)-math.Log(p1)))
			}
			share := float64(revealing) / float64(s.Samples)
			if x == 0 {
				pt.From0 = share
			} else {
				pt.From1 = share
			}
		}
		pt.Textbook = (pt.From0 + pt.From1) / 2
		pt.Grid = float64(gridRevealing) / float64(2*s.Samples)
		out = append(out, pt)
	}
	return out, nil
}

// MironovAttack is the floating-point attack on textbook Laplace noise.
func MironovAttack() Attack {
	return Attack{
		Name:    "mironov",
		Summary: "Mironov 2012: textbook floating-point Laplace noise reveals the input through its low-order bits",
		Explanation: "The textbook Laplace mechanism returns x + b*(-sgn(u) ln(1-2|u|)) computed in float64 from a uniform u. " +
			"Only 2^53 values of u exist and the logarithm and the sum round, so the set of floats it can return from x=0 " +
			"differs from the set it can return from x=1: near each input the outputs are dense, farther away they skip " +
			"floats, and which floats they skip depends on the input (Mironov, CCS 2012). The attacker replays the " +
			"arithmetic: an output that one input cannot produce proves the other, whatever eps promised. knowdp's grid " +
			"Laplace rounds the input to a power-of-two grid and adds an exactly sampled integer multiple of the grid step, " +
			"so every output is a grid point that both inputs produce, with probabilities within e^eps of each other.",
		Run: runMironov,
	}
}

func runMironov(ctx context.Context, cfg AttackConfig) (*Report, error) {
	if err := checkAttackConfig(cfg); err != nil {
		return nil, err
	}
	s := MironovDefaults(cfg.Quick)
	pts, err := Mironov(ctx, cfg.Rand, s)
	if err != nil {
		return nil, err
	}
	rep := &Report{}
	var rows [][]string
	var tXY, gXY plotter.XYs
	for _, p := range pts {
		rows = append(rows, []string{f(p.Eps), f(1 / p.Eps), f(p.Textbook), f(p.From0), f(p.From1), f(p.Grid), f(p.GridMaxLoss), strconv.Itoa(s.Samples)})
		tXY = append(tXY, plotter.XY{X: p.Eps, Y: p.Textbook})
		gXY = append(gXY, plotter.XY{X: p.Eps, Y: p.Grid})
	}
	if err := rep.writeCSV(cfg.Dir, "mironov.csv", []string{"eps", "scale", "textbook_revealing_share", "textbook_revealing_from_0",
		"textbook_revealing_from_1", "knowdp_grid_revealing_share", "knowdp_grid_max_log_ratio", "samples_per_input"}, rows); err != nil {
		return nil, err
	}
	p, err := linePlot("Mironov's attack: outputs that only one of the inputs 0, 1 can produce", "eps (noise scale 1/eps)",
		"share of outputs revealing the input", true,
		series{"textbook float Laplace", tXY, vulnerable}, series{"knowdp grid Laplace", gXY, protected})
	if err != nil {
		return nil, err
	}
	p.Y.Min, p.Y.Max = 0, 1.25 // room for the legend
	if err := rep.savePlot(p, cfg.Dir, "mironov"); err != nil {
		return nil, err
	}
	lo, hi := pts[0], pts[0]
	var maxGrid float64
	lossOK := true
	for _, p := range pts {
		if p.Textbook < lo.Textbook {
			lo = p
		}
		if p.Textbook > hi.Textbook {
			hi = p
		}
		maxGrid = math.Max(maxGrid, p.Grid)
		lossOK = lossOK && p.GridMaxLoss <= p.Eps
	}
	rep.Headline = []string{
		fmt.Sprintf("textbook float Laplace: %.1f%% to %.1f%% of outputs reveal the input (eps = %g and %g; %d outputs per input and eps)",
			100*lo.Textbook, 100*hi.Textbook, lo.Eps, hi.Eps, s.Samples),
		fmt.Sprintf("knowdp grid Laplace: %.1f%% of outputs reveal the input at every eps; every observed log ratio within eps: %v", 100*maxGrid, lossOK),
	}
	for _, p := range pts {
		rep.Headline = append(rep.Headline, fmt.Sprintf("  eps %-5g textbook %5.1f%%  knowdp %.1f%%", p.Eps, 100*p.Textbook, 100*p.Grid))
	}
	return rep, nil
}
