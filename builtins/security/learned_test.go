package security

import (
	"flag"
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/agentc-dev/agentc/builtins/security/internal/learn"
)

// The learned-scorer experiment (docs/detection.md, "A learned scorer, measured") runs only
// when asked:
//
//	go test ./builtins/security/ -run TestLearnedScorer -learned -v
var (
	learnedRun    = flag.Bool("learned", false, "run the learned-scorer experiment (TestLearnedScorer)")
	learnedDim    = flag.Int("learned.dim", 1<<18, "hashed feature buckets (a power of two)")
	learnedEpochs = flag.Int("learned.epochs", 10, "training passes")
	learnedLambda = flag.Float64("learned.lambda", 1e-4, "L2 penalty")
	learnedBenign = flag.Float64("learned.benign", 1, "weight of a benign sample's loss")
	learnedBudget = flag.Float64("learned.budget", 0.005, "largest share of each benign subset a path's threshold may block, out of fold on the tune half")
	learnedSplit  = flag.Bool("learned.split", false, "train one model per path (prompts; documents) instead of one for both")
	learnedWindow = flag.Int("learned.window", 0, "on the document path, score also every window of this many words (half overlapping) and keep the highest; 0 scores the whole text only")
)

// A text is read on the prompt path (Detect: a user's prompt) or the document path
// (DetectDocument: a tool result); each path has its threshold, and with -learned.split its
// own model.
const (
	pathPrompt = iota
	pathDoc
	nPaths
)

var pathName = [nPaths]string{"prompt", "document"}

// learnedSample is a corpus sample (or a benign-dev.txt text) with its hashed features, the
// paths it is read on and what the rules alone decide on it, read the way
// TestCorpusDetection reads it.
type learnedSample struct {
	corpusSample
	half  string
	fold  int
	feats []learn.Feature
	wins  [][]learn.Feature // windows read on the document path (-learned.window)
	paths []int
	rule  bool
	score [nPaths]float64 // set per run
}

func learnedSamples(t *testing.T) []*learnedSample {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	var out []*learnedSample
	add := func(s corpusSample) {
		var paths []int
		switch s.Subset {
		case "indirect":
			paths = []int{pathDoc}
		case "documents", "benign-dev":
			paths = []int{pathPrompt, pathDoc}
		default:
			paths = []int{pathPrompt}
		}
		hit := false
		for _, p := range paths {
			if p == pathDoc {
				_, h := d.DetectDocument(s.Text)
				hit = hit || h
			} else {
				_, h := d.Detect(s.Text)
				hit = hit || h
			}
		}
		h := fnv.New32a()
		h.Write([]byte(s.Text))
		var wins [][]learn.Feature
		if n := *learnedWindow; n > 0 && paths[len(paths)-1] == pathDoc {
			words := strings.Fields(s.Text)
			for i := 0; i+n < len(words)+n/2; i += n / 2 {
				wins = append(wins, learn.Features(strings.Join(words[i:min(i+n, len(words))], " "), *learnedDim))
			}
		}
		out = append(out, &learnedSample{corpusSample: s, half: corpusHalf(s.Text), fold: int(h.Sum32()/2) % 5,
			feats: learn.Features(s.Text, *learnedDim), paths: paths, rule: hit})
		out[len(out)-1].wins = wins
	}
	for _, s := range loadCorpus(t) {
		// The sources added after the experiment's figures were measured
		// are left out, so that a run measures what the docs report.
		if !corpusUnseen[s.Source] {
			add(s)
		}
	}
	// benign-dev.txt is never trained on: it is an unseen benign set in every run.
	for _, text := range loadBenignDev(t) {
		add(corpusSample{Subset: "benign-dev", Label: "benign", Source: "benign-dev", Text: text})
	}
	return out
}

func (s *learnedSample) on(p int) bool {
	for _, q := range s.paths {
		if q == p {
			return true
		}
	}
	return false
}

// learnedScorer is one model per path (the same model twice without -learned.split).
type learnedScorer [nPaths]*learn.Model

func learnedTrain(samples []*learnedSample) learnedScorer {
	fit := func(p int) *learn.Model {
		var ex []learn.Example
		for _, s := range samples {
			if p < 0 || s.on(p) {
				ex = append(ex, learn.Example{Features: s.feats, Attack: s.Label == "attack"})
			}
		}
		return learn.Train(ex, learn.Options{Dim: *learnedDim, Epochs: *learnedEpochs, Lambda: *learnedLambda,
			Rate: 0.5, BenignWeight: *learnedBenign, Seed: 14})
	}
	if !*learnedSplit {
		m := fit(-1)
		return learnedScorer{m, m}
	}
	return learnedScorer{fit(pathPrompt), fit(pathDoc)}
}

func (sc learnedScorer) score(s *learnedSample) {
	for p := range nPaths {
		s.score[p] = sc[p].ScoreFeatures(s.feats)
		if p == pathDoc {
			for _, w := range s.wins {
				s.score[p] = max(s.score[p], sc[p].ScoreFeatures(w))
			}
		}
	}
}

// learnedThreshold picks each path's operating threshold from training samples alone:
// five-fold out-of-fold scores (each sample scored by models trained without its fold), then
// the lowest threshold at which, in every benign subset read on that path, the samples the
// rules let through and the threshold blocks are at most the budget's share of the subset.
func learnedThreshold(train []*learnedSample) [nPaths]float64 {
	for f := range 5 {
		var in []*learnedSample
		for _, s := range train {
			if s.fold != f {
				in = append(in, s)
			}
		}
		sc := learnedTrain(in)
		for _, s := range train {
			if s.fold == f {
				sc.score(s)
			}
		}
	}
	var thr [nPaths]float64
	for p := range nPaths {
		scores := map[string][]float64{}
		total := map[string]int{}
		for _, s := range train {
			if s.Label != "benign" || !s.on(p) {
				continue
			}
			total[s.Subset]++
			if !s.rule {
				scores[s.Subset] = append(scores[s.Subset], s.score[p])
			}
		}
		for sub, sc := range scores {
			sort.Sort(sort.Reverse(sort.Float64Slice(sc)))
			if k := int(*learnedBudget * float64(total[sub])); k < len(sc) {
				thr[p] = max(thr[p], math.Nextafter(sc[k], 2))
			}
		}
	}
	return thr
}

// learnedTally counts rules alone, the learned scorer alone and the two combined (a block
// by either).
type learnedTally struct{ rule, model, both corpusTally }

func (l *learnedTally) add(s *learnedSample, thr [nPaths]float64) {
	hit := false
	for _, p := range s.paths {
		hit = hit || s.score[p] >= thr[p]
	}
	l.rule.add(s.Label, s.rule)
	l.model.add(s.Label, hit)
	l.both.add(s.Label, s.rule || hit)
}

func learnedReport(t *testing.T, title string, samples []*learnedSample, thr [nPaths]float64, keys func(*learnedSample) []string) {
	per := map[string]*learnedTally{}
	for _, s := range samples {
		for _, k := range keys(s) {
			if per[k] == nil {
				per[k] = &learnedTally{}
			}
			per[k].add(s, thr)
		}
	}
	names := make([]string, 0, len(per))
	for k := range per {
		names = append(names, k)
	}
	sort.Strings(names)
	t.Logf("%s (thresholds: %s %.4f, %s %.4f)", title, pathName[0], thr[0], pathName[1], thr[1])
	t.Logf("  %-40s | %-26s | %-26s | %-26s", "", "rules: detected, blocked", "learned alone", "rules + learned")
	for _, k := range names {
		c := per[k]
		t.Logf("  %-40s | %-26s | %-26s | %-26s", k, learnedCell(&c.rule), learnedCell(&c.model), learnedCell(&c.both))
	}
}

func learnedCell(c *corpusTally) string {
	a := "—"
	if c.attacks > 0 {
		a = fmt.Sprintf("%d/%d %.1f%%", c.detected, c.attacks, 100*ratio(c.detected, c.attacks))
	}
	b := "—"
	if c.benign > 0 {
		b = fmt.Sprintf("%d/%d %.2f%%", c.blocked, c.benign, 100*ratio(c.blocked, c.benign))
	}
	return a + ", " + b
}

func bySubset(s *learnedSample) []string { return []string{s.Subset} }

func bySubsetSource(s *learnedSample) []string {
	return []string{s.Subset, "source " + s.Source + " (" + s.Subset + ")"}
}

// TestLearnedScorer measures whether a linear scorer trained on the corpus, combined with the
// rules, generalizes: trained on the tune half and measured on the holdout half, then trained
// without each source and measured on that source.
func TestLearnedScorer(t *testing.T) {
	if !*learnedRun {
		t.Skip("the learned-scorer experiment runs with -learned")
	}
	all := learnedSamples(t)
	var tune, held, dev []*learnedSample
	for _, s := range all {
		switch {
		case s.Subset == "benign-dev":
			dev = append(dev, s)
			held = append(held, s)
		case s.half == "tune":
			tune = append(tune, s)
		default:
			held = append(held, s)
		}
	}

	// Tune / holdout: the thresholds from the tune half's out-of-fold scores, the models
	// trained on the whole tune half.
	thr := learnedThreshold(tune)
	learnedReport(t, "tune half, out of fold", tune, thr, bySubset)
	sc := learnedTrain(tune)
	for _, s := range held {
		sc.score(s)
	}
	nonzero := 0
	for _, w := range sc[0].W {
		if w != 0 {
			nonzero++
		}
	}
	t.Logf("prompt model: %d buckets, %d non-zero", sc[0].Dim, nonzero)
	learnedReport(t, "trained on tune, measured on holdout (and all of benign-dev.txt)", held, thr, bySubsetSource)
	for _, q := range []float64{0.5, 0.6, 0.7, 0.8} {
		learnedReport(t, fmt.Sprintf("holdout, both thresholds at %.1f (the curve; not an operating point)", q), held, [nPaths]float64{q, q}, bySubset)
	}

	// Leave one source out: train on the tune half of every other source, measure all of
	// source S (both halves: none of it was trained on) and benign-dev.txt.
	sources := map[string]bool{}
	for _, s := range all {
		if s.Subset != "benign-dev" {
			sources[s.Source] = true
		}
	}
	names := make([]string, 0, len(sources))
	for s := range sources {
		names = append(names, s)
	}
	sort.Strings(names)
	type verdict struct {
		score, thr [nPaths]float64
	}
	left := map[*learnedSample]verdict{}
	var pooled []*learnedSample
	for _, src := range names {
		var train, test []*learnedSample
		for _, s := range all {
			switch {
			case s.Source == src:
				test = append(test, s)
			case s.half == "tune" && s.Subset != "benign-dev":
				train = append(train, s)
			}
		}
		thr := learnedThreshold(train)
		sc := learnedTrain(train)
		for _, s := range test {
			sc.score(s)
			left[s] = verdict{s.score, thr}
		}
		for _, s := range dev {
			sc.score(s)
		}
		learnedReport(t, "left out: "+src, append(append([]*learnedSample{}, test...), dev...), thr, bySubset)
		pooled = append(pooled, test...)
	}
	// Pooled: each sample scored by the models trained without its source, at their
	// thresholds (shifted so that 0.5 stands for each one's own).
	for _, s := range pooled {
		v := left[s]
		for p := range nPaths {
			s.score[p] = v.score[p] - v.thr[p] + 0.5
		}
	}
	learnedReport(t, "leave-one-source-out, pooled (each sample scored without its source, at that model's thresholds)", pooled, [nPaths]float64{0.5, 0.5}, bySubsetSource)
}
