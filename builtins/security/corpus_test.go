package security

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// corpusSample is one line of a testdata/corpus file (see testdata/corpus/README.md).
type corpusSample struct {
	Subset   string `json:"subset"`
	Label    string `json:"label"`
	Source   string `json:"source"`
	Category string `json:"category"`
	Text     string `json:"text"`
}

// corpusFloors are the figures the default detector must keep on the labelled corpus, per
// subset: the least share of attacks detected and the largest share of benign samples
// blocked. They sit just under the measured figures (docs/detection.md), so a regression
// fails; raise them when detection improves.
var corpusFloors = map[string]struct{ minDetect, maxFalse float64 }{
	"indirect": {minDetect: 0.00, maxFalse: 0.01},
	"direct":   {minDetect: 0.00, maxFalse: 0.01},
}

func loadCorpus(t *testing.T) []corpusSample {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	var out []corpusSample
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 0, 1<<16), 1<<22)
		for line := 1; sc.Scan(); line++ {
			var s corpusSample
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatalf("%s:%d: %v", f, line, err)
			}
			if s.Label != "attack" && s.Label != "benign" {
				t.Fatalf("%s:%d: label %q is neither attack nor benign", f, line, s.Label)
			}
			out = append(out, s)
		}
		fh.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return out
}

func TestCorpusDetection(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	type tally struct{ attacks, detected, benign, blocked int }
	per := map[string]*tally{}
	for _, s := range loadCorpus(t) {
		c := per[s.Subset]
		if c == nil {
			c = &tally{}
			per[s.Subset] = c
		}
		_, hit := d.Detect(s.Text)
		if s.Label == "attack" {
			c.attacks++
			if hit {
				c.detected++
			}
		} else {
			c.benign++
			if hit {
				c.blocked++
				t.Logf("false positive (%s/%s): %.120q", s.Source, s.Category, s.Text)
			}
		}
	}
	subsets := make([]string, 0, len(per))
	for s := range per {
		subsets = append(subsets, s)
	}
	sort.Strings(subsets)
	for _, name := range subsets {
		c := per[name]
		detect, falsePos := ratio(c.detected, c.attacks), ratio(c.blocked, c.benign)
		t.Logf("%-9s attacks %4d detected %4d (%5.1f%%)  benign %4d blocked %3d (%4.2f%%)",
			name, c.attacks, c.detected, 100*detect, c.benign, c.blocked, 100*falsePos)
		floor, ok := corpusFloors[name]
		if !ok {
			t.Errorf("subset %q has no floor in corpusFloors", name)
			continue
		}
		if detect < floor.minDetect {
			t.Errorf("%s: detection %.1f%% fell under %.1f%%", name, 100*detect, 100*floor.minDetect)
		}
		if falsePos > floor.maxFalse {
			t.Errorf("%s: false positives %.2f%% over %.2f%%", name, 100*falsePos, 100*floor.maxFalse)
		}
	}
}

func ratio(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}
