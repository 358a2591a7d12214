// Package noise draws the random noise of knowdp's mechanisms exactly and
// without floating-point artefacts.
//
// Textbook implementations add x + F^-1(u) for a float64 uniform u. The set
// of floats such a sum can produce depends on x, so a single output can reveal
// the input (Mironov, "On significance of the least significant bits for
// differential privacy", CCS 2012). knowdp never does that:
//
//   - DiscreteLaplace samples the two-sided geometric distribution
//     P(z) ∝ exp(-|z|/t) on the integers exactly: every integer has exactly
//     the stated probability, not an approximation of it.
//   - DiscreteGaussian samples N_Z(0, sigma^2) on the integers exactly
//     (Canonne, Kamath and Steinke 2020), for zero-concentrated DP.
//   - Laplace and Gaussian round a real input to a power-of-two grid and add
//     a grid multiple of discrete noise, so every output is a grid point and
//     the output distribution depends on the input only through its rounded
//     value. Only inputs beyond the representable range (Range, at least
//     MinRange = 2^80: every count up to 2^53 at every accepted parameter)
//     are clamped, never refused: no input value makes a mechanism return
//     an error.
//   - Choose (the exponential mechanism) and Categorical pick an index with
//     exactly the stated probabilities.
//
// Exactness comes from lazy evaluation. Every random decision is a
// comparison of a uniform variate U with a threshold. The sampler draws 64
// random bits, which pin U to an interval of width 2^-64 (or fewer bits,
// a wider interval), and compares it with integer bounds on the threshold
// precomputed in float64 with a rigorous error bound, or computed with such
// a bound on the spot. When the comparison is the same everywhere in the
// interval it is returned. Otherwise, which is rare (at most about 2^-19
// per sample for discrete Laplace scales from 4096, 2^-8 below, where a
// sample starts from half a word), the sampler draws more bits, and where 64 bits of U do not
// decide either (about 2^-40), it decides with arbitrary-precision
// arithmetic.
//
// # Running time
//
// The samplers' running time depends on the value they draw (not on the
// data, except through the value: the output is data plus noise). A
// DiscreteLaplace sample usually costs one 64-bit word from the generator
// (half a word below scale 4096, two words from 2^24), a table lookup and
// a multiply.
// Values whose low part l (|z|-1 mod 2^m, 2^m being about t/64) is large
// are rejected and redrawn a little more often (probability
// 1-exp(-l/t) < 1/32, one more word each); values in the far tail
// (probability below 2^-24, below 2^-11 for scales under 4096) take a
// logarithm; comparisons the word cannot decide (at most about 2^-19, 2^-8
// for scales under 4096) take one more word, and the very rare ones 64
// bits cannot decide (about 2^-40) take tens of microseconds.
// A DiscreteGaussian sample takes a geometric number of discrete Laplace
// proposals (1.3 to 1.4 on average for sigma >= 3, at most about 2.2),
// each with one more word for its acceptance. Release timings per vector,
// not per sample, if timings are observable.
//
// Randomness comes from a ChaCha8 generator seeded from crypto/rand. A seeded
// generator (NewSeeded) exists for tests and reproducible experiments; it is
// NOT private and every result made with it must say so.
package noise

import (
	crand "crypto/rand"
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
)

// Rand is a source of random bits for the samplers. It is not safe for
// concurrent use; give each goroutine its own, for example with Split.
type Rand struct {
	src    *rand.ChaCha8
	seeded bool
	// spare holds, in its upper half, the unused half of the last word
	// half split (hasSpare says whether it does).
	spare    uint64
	hasSpare bool
}

// NewRand returns a cryptographically secure generator: ChaCha8 keyed with
// 256 bits from the operating system's CSPRNG.
func NewRand() *Rand {
	var seed [32]byte
	// crypto/rand.Read never returns an error: the runtime aborts the
	// program if the operating system cannot supply randomness.
	_, _ = crand.Read(seed[:])
	return &Rand{src: rand.NewChaCha8(seed)}
}

// NewSeeded returns a deterministic generator for tests and reproducible
// experiments. Its output is predictable from the seed, so results made with
// it are NOT differentially private.
func NewSeeded(seed uint64) *Rand {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:8], seed)
	copy(s[8:], "knowdp: seeded, not private")
	return &Rand{src: rand.NewChaCha8(s), seeded: true}
}

// Seeded reports whether r is deterministic (made by NewSeeded, or split
// from such a generator), in which case its results are not private.
func (r *Rand) Seeded() bool { return r.seeded }

// Uint64 returns 64 uniformly random bits. It makes Rand a rand.Source.
func (r *Rand) Uint64() uint64 { return r.src.Uint64() }

// The samplers whose common path needs 32 bits take the two halves of one
// word in turn, so that they draw a word every other sample: the upper
// half first (splitWord), then the lower one, kept in spare.

// splitWord draws a word and returns its upper half (the lower half 0),
// keeping the lower half in the upper half of spare for the next sample.
func (r *Rand) splitWord() uint64 {
	w := r.src.Uint64()
	r.spare, r.hasSpare = w<<32, true
	return w &^ (1<<32 - 1)
}

// Split returns a new generator keyed with 256 bits drawn from r. Splitting
// the same seeded generator the same way gives the same children, so work
// divided into fixed chunks stays reproducible however it is scheduled.
func (r *Rand) Split() *Rand {
	var s [32]byte
	for i := 0; i < 32; i += 8 {
		binary.LittleEndian.PutUint64(s[i:], r.src.Uint64())
	}
	return &Rand{src: rand.NewChaCha8(s), seeded: r.seeded}
}

// Uint64N returns a uniformly random integer in [0, n) without modulo bias.
// It panics if n == 0.
func (r *Rand) Uint64N(n uint64) uint64 {
	if n == 0 {
		panic("noise: Uint64N(0)")
	}
	// Lemire's nearly divisionless method.
	hi, lo := bits.Mul64(r.src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.src.Uint64(), n)
		}
	}
	return hi
}
