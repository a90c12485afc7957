package security

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sort"
	"strings"
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
// The documents subset holds no attacks: it is text an agent reads (package docs, READMEs,
// source files, pages about LLM security that quote attacks), and its ceiling is on false
// positives alone.
var corpusFloors = map[string]struct{ minDetect, maxFalse float64 }{
	"direct":    {minDetect: 0.25, maxFalse: 0.01},
	"indirect":  {minDetect: 0.42, maxFalse: 0.01},
	"jailbreak": {minDetect: 0.53, maxFalse: 0.01},
	"documents": {minDetect: 0, maxFalse: 0.005},
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

// corpusHalf puts a sample in the "tune" or the "holdout" half by a stable hash of its text.
// The default families were tuned looking only at the tune half.
func corpusHalf(text string) string {
	h := fnv.New32a()
	h.Write([]byte(text))
	if h.Sum32()%2 == 0 {
		return "tune"
	}
	return "holdout"
}

// corpusUnseen are the sources added after the families were set, measured as they came:
// their text was never read to set a family, in either half, so they are tallied whole as
// "unseen" rather than split into tune and holdout.
var corpusUnseen = map[string]bool{"cyberseceval": true, "jailbreakbench": true, "selfinstruct": true, "gpteacher": true}

// corpusGroup is the tally a sample counts in besides its subset and source: its half, or
// "unseen".
func corpusGroup(s corpusSample) string {
	if corpusUnseen[s.Source] {
		return "unseen"
	}
	return corpusHalf(s.Text)
}

// corpusTally counts one group of samples.
type corpusTally struct{ attacks, detected, benign, blocked int }

func (c *corpusTally) add(label string, hit bool) {
	if label == "attack" {
		c.attacks++
		if hit {
			c.detected++
		}
		return
	}
	c.benign++
	if hit {
		c.blocked++
	}
}

func (c *corpusTally) String() string {
	return fmt.Sprintf("attacks %4d detected %4d (%5.1f%%)  benign %4d blocked %3d (%4.2f%%)",
		c.attacks, c.detected, 100*ratio(c.detected, c.attacks), c.benign, c.blocked, 100*ratio(c.blocked, c.benign))
}

func TestCorpusDetection(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]*corpusTally{}
	tally := func(key string) *corpusTally {
		if per[key] == nil {
			per[key] = &corpusTally{}
		}
		return per[key]
	}
	for _, s := range loadCorpus(t) {
		// The indirect subset is text a tool returned or a document to work on: the
		// middleware reads a tool result with DetectDocument.
		// The documents subset is read both ways, since an agent meets such text as a
		// tool result and a user pastes it into a prompt: a block on either counts.
		var m Match
		var hit bool
		switch s.Subset {
		case "indirect":
			m, hit = d.DetectDocument(s.Text)
		case "documents":
			if m, hit = d.Detect(s.Text); !hit {
				m, hit = d.DetectDocument(s.Text)
			}
		default:
			m, hit = d.Detect(s.Text)
		}
		for _, key := range []string{s.Subset, s.Subset + "/" + corpusGroup(s), "source " + s.Source} {
			tally(key).add(s.Label, hit)
		}
		if hit && s.Label == "benign" {
			t.Logf("false positive (%s/%s, %s %.1f): %.120q", s.Source, s.Category, m.PatternID, m.Score, s.Text)
		}
	}
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("%-32s %s", k, per[k])
	}
	for name, floor := range corpusFloors {
		c := per[name]
		if c == nil {
			t.Errorf("subset %q has a floor but no samples", name)
			continue
		}
		if detect := ratio(c.detected, c.attacks); detect < floor.minDetect {
			t.Errorf("%s: detection %.1f%% fell under %.1f%%", name, 100*detect, 100*floor.minDetect)
		}
		if falsePos := ratio(c.blocked, c.benign); falsePos > floor.maxFalse {
			t.Errorf("%s: false positives %.2f%% over %.2f%%", name, 100*falsePos, 100*floor.maxFalse)
		}
	}
	for _, k := range keys {
		if _, ok := corpusFloors[k]; !ok && !strings.Contains(k, "/") && !strings.HasPrefix(k, "source ") {
			t.Errorf("subset %q has no floor in corpusFloors", k)
		}
	}
}

func ratio(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}
