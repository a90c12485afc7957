// Package learn is a small linear text scorer for prompt-injection detection: logistic
// regression over hashed word 1- and 2-grams and character 3- to 5-grams of the normalized
// text (textnorm.Normalize). It has no dependencies beyond the standard library and
// textnorm, and trains in seconds on the labelled corpus; the security package's
// TestLearnedScorer measures it (docs/detection.md, "A learned scorer, measured").
package learn

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm"
)

// Feature is one hashed feature of a text and its weight.
type Feature struct {
	Index int32
	Value float32
}

// Features hashes text into dim buckets (a power of two): each word, each pair of adjacent
// words and each byte 3-, 4- and 5-gram of the normalized text (words joined by one space,
// a space at each end) adds its count to a bucket, with a sign drawn from the hash so that
// collisions cancel rather than pile up. Counts are damped (log 1+n) and the vector scaled to
// unit length, so a long text weighs no more than a short one.
func Features(text string, dim int) []Feature {
	words := strings.Fields(textnorm.Normalize(text).Text)
	acc := map[int32]float32{}
	add := func(h uint64) {
		i := int32(h & uint64(dim-1))
		if h>>63 == 1 {
			acc[i]--
		} else {
			acc[i]++
		}
	}
	for k, w := range words {
		add(hash(1, w, ""))
		if k > 0 {
			add(hash(2, words[k-1], w))
		}
	}
	joined := " " + strings.Join(words, " ") + " "
	for n := 3; n <= 5; n++ {
		for i := 0; i+n <= len(joined); i++ {
			add(hash(byte(n), joined[i:i+n], ""))
		}
	}
	out := make([]Feature, 0, len(acc))
	var norm float64
	for i, c := range acc {
		if c == 0 {
			continue
		}
		v := float32(math.Log1p(math.Abs(float64(c))))
		if c < 0 {
			v = -v
		}
		norm += float64(v) * float64(v)
		out = append(out, Feature{Index: i, Value: v})
	}
	if norm > 0 {
		s := float32(1 / math.Sqrt(norm))
		for k := range out {
			out[k].Value *= s
		}
	}
	return out
}

// hash is FNV-1a (64 bits) over a kind byte and one or two strings.
func hash(kind byte, a, b string) uint64 {
	h := uint64(14695981039346656037)
	step := func(c byte) { h ^= uint64(c); h *= 1099511628211 }
	step(kind)
	for i := 0; i < len(a); i++ {
		step(a[i])
	}
	if b != "" {
		step(' ')
		for i := 0; i < len(b); i++ {
			step(b[i])
		}
	}
	// FNV's high bits mix poorly; fold them in.
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return h
}

// Model is a trained logistic regression over Features.
type Model struct {
	Dim  int
	W    []float32
	Bias float32
}

// Score is the model's probability that the text is an injection, in [0, 1].
func (m *Model) Score(text string) float64 { return m.ScoreFeatures(Features(text, m.Dim)) }

// ScoreFeatures is Score for a text already hashed with the model's Dim.
func (m *Model) ScoreFeatures(fs []Feature) float64 {
	z := float64(m.Bias)
	for _, f := range fs {
		z += float64(m.W[f.Index]) * float64(f.Value)
	}
	return 1 / (1 + math.Exp(-z))
}

// Example is one training sample.
type Example struct {
	Features []Feature
	Attack   bool
}

// Options sets the training.
type Options struct {
	Dim    int     // buckets, a power of two
	Epochs int     // passes over the samples
	Lambda float64 // L2 penalty per sample
	Rate   float64 // initial learning rate
	// BenignWeight multiplies the loss of a benign sample, above 1 to trade detection for
	// fewer false positives.
	BenignWeight float64
	Seed         uint64
}

// Train fits a logistic regression by stochastic gradient descent, the samples shuffled
// each epoch with a fixed seed (so a run is reproducible), the L2 penalty applied through a
// scale on the whole weight vector.
func Train(examples []Example, o Options) *Model {
	w := make([]float64, o.Dim)
	scale := 1.0
	var bias float64
	rng := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	order := make([]int, len(examples))
	for i := range order {
		order[i] = i
	}
	t := 0
	for range o.Epochs {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			t++
			eta := o.Rate / (1 + o.Rate*o.Lambda*float64(t))
			ex := examples[k]
			z := bias
			for _, f := range ex.Features {
				z += scale * w[f.Index] * float64(f.Value)
			}
			p := 1 / (1 + math.Exp(-z))
			y, cw := 0.0, o.BenignWeight
			if ex.Attack {
				y, cw = 1, 1
			}
			g := cw * (p - y)
			scale *= 1 - eta*o.Lambda
			if scale < 1e-9 {
				for i := range w {
					w[i] *= scale
				}
				scale = 1
			}
			for _, f := range ex.Features {
				w[f.Index] -= eta * g * float64(f.Value) / scale
			}
			bias -= eta * g
		}
	}
	m := &Model{Dim: o.Dim, W: make([]float32, o.Dim), Bias: float32(bias)}
	for i, v := range w {
		m.W[i] = float32(v * scale)
	}
	return m
}
