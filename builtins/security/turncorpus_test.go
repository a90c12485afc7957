package security

import (
	"errors"
	"hash/fnv"
	"strings"
	"testing"

	"github.com/agentc-dev/agentc/builtins/internal/scanned"
)

// TestCorpusTurns measures what reading the consecutive messages of one
// role together (one turn, as a provider sends them) does on the corpus's
// prompts: every attack the detector finds whole, cut at a stable random
// point into two user messages, is found in the turn, where read apart some
// are missed; and benign prompts paired as two user messages, each clean
// alone, are blocked together only as often as docs/detection.md says (the
// scores of the families of the two messages add up, as those of one
// message's parts do). The indirect subset is left out: tool results are
// each a message of their own, never read together.
func TestCorpusTurns(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	hit := func(s string) bool { _, ok := d.Detect(s); return ok }
	// turn is what the layer reads of two messages a and b besides each
	// alone: the two joined by a line break, and run together.
	turn := func(a, b string) bool { return hit(a+"\n"+b) || hit(a+b) }
	prompts := map[string][]string{}
	whole, lostApart, foundTurn := 0, 0, 0
	for _, s := range loadCorpus(t) {
		if s.Subset == "indirect" {
			continue
		}
		if s.Label == "benign" {
			prompts[s.Subset] = append(prompts[s.Subset], s.Text)
			continue
		}
		if !hit(s.Text) {
			continue
		}
		whole++
		a, b := cutInTwo(s.Text)
		if hit(a) || hit(b) {
			continue
		}
		lostApart++
		if turn(a, b) {
			foundTurn++
		}
	}
	t.Logf("attacks found whole %d; cut in two, %d missed read apart, %d of them found in the turn", whole, lostApart, foundTurn)
	if foundTurn != lostApart {
		t.Errorf("%d attacks cut across two messages are missed in the turn", lostApart-foundTurn)
	}
	pairs, blocked := 0, 0
	for _, sub := range []string{"direct", "jailbreak", "documents"} {
		ps := prompts[sub]
		if len(ps) == 0 {
			t.Fatalf("subset %s has no benign samples", sub)
		}
		for i := 0; i+1 < len(ps); i++ {
			a, b := ps[i], ps[i+1]
			if hit(a) || hit(b) {
				continue
			}
			pairs++
			if turn(a, b) {
				blocked++
				t.Logf("benign pair blocked (%s): %.80q + %.80q", sub, a, b)
			}
		}
	}
	t.Logf("benign pairs of consecutive prompts %d, blocked as one turn %d", pairs, blocked)
	// The ceiling is the figure measured (docs/detection.md): a rise fails.
	if blocked > 2 {
		t.Errorf("%d benign pairs blocked as one turn, over 2", blocked)
	}
}

// TestCorpusCutPieces measures the cut readings (scanned.CutReadings) on the
// corpus's prompts: every attack the detector finds whole, cut at two stable
// random points into three pieces between a piece before it and one after
// it that glue themselves to its ends ("Hi", "ok"), is found, where the
// readings joined by line breaks and run together miss some; benign prompts
// cut so, and three consecutive benign prompts read as one turn, each clean
// alone, are blocked only as often as docs/detection.md says.
func TestCorpusCutPieces(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	hit := func(s string) bool { _, ok := d.Detect(s); return ok }
	found := errors.New("found")
	// joined is what the layer read before the cut readings; read is all it reads.
	joined := func(pieces []string) bool {
		return hit(strings.Join(pieces, "\n")) || hit(strings.Join(pieces, ""))
	}
	read := func(pieces []string) bool {
		return joined(pieces) || scanned.CutReadings(pieces, func(text string) error {
			if hit(text) {
				return found
			}
			return nil
		}) != nil
	}
	cut := func(text string) []string {
		h := fnv.New32a()
		h.Write([]byte(text))
		r := []rune(text)
		x, y := 1+int(h.Sum32()%uint32(len(r)-1)), 1+int((h.Sum32()>>8)%uint32(len(r)-1))
		x, y = min(x, y), max(x, y)
		var out []string
		for _, p := range []string{string(r[:x]), string(r[x:y]), string(r[y:])} {
			if p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	whole, missedJoined, missed := 0, 0, 0
	benign := map[string][]string{}
	for _, s := range loadCorpus(t) {
		if s.Subset == "indirect" {
			continue
		}
		if s.Label == "benign" {
			benign[s.Subset] = append(benign[s.Subset], s.Text)
			continue
		}
		if !hit(s.Text) || len([]rune(s.Text)) < 3 {
			continue
		}
		whole++
		pieces := append(append([]string{"Hi"}, cut(s.Text)...), "ok")
		if !joined(pieces) {
			missedJoined++
		}
		if !read(pieces) {
			missed++
			t.Logf("attack missed: %q", pieces)
		}
	}
	t.Logf("attacks found whole %d; cut in three between glued pieces, %d missed by the joined readings, %d by all", whole, missedJoined, missed)
	if missed > 0 {
		t.Errorf("%d attacks cut among glued pieces are missed", missed)
	}
	cutBenign, cutBlocked, triples, triplesBlocked := 0, 0, 0, 0
	for _, sub := range []string{"direct", "jailbreak", "documents"} {
		ps := benign[sub]
		for i, p := range ps {
			if hit(p) || len([]rune(p)) < 3 {
				continue
			}
			cutBenign++
			if pieces := cut(p); !joined(pieces) && read(pieces) {
				cutBlocked++
				t.Logf("benign prompt cut in three blocked (%s): %.80q", sub, p)
			}
			if i+2 < len(ps) && !hit(ps[i+1]) && !hit(ps[i+2]) {
				triples++
				if pieces := ps[i : i+3]; !joined(pieces) && read(pieces) {
					triplesBlocked++
					t.Logf("benign triple blocked (%s): %.60q + %.60q + %.60q", sub, ps[i], ps[i+1], ps[i+2])
				}
			}
		}
	}
	t.Logf("benign prompts cut in three %d, blocked by the cut readings alone %d; benign triples %d, blocked so %d", cutBenign, cutBlocked, triples, triplesBlocked)
	if cutBlocked > 0 || triplesBlocked > 0 {
		t.Errorf("the cut readings block benign text")
	}
}

// TestCorpusToolResultTurns measures what reading tool results together,
// and with the user's text next to them, does (Anthropic's API sends them
// in one user message: scanned.SentTurnEnd). Every attack of the indirect
// subset the detector finds whole in a document (DetectDocument), cut in
// two at a stable random point and sent as two tool results, is found in
// the turn, which the layer reads as a document (scanned.ResultsOnly),
// where read apart some are missed. Benign documents of the subset, each
// clean alone, paired as they come (two tool results, read as a document),
// and each followed by a benign user prompt of the direct subset (read
// with Detect, as a turn holding a user's text is), are blocked together
// only as often as docs/detection.md says.
func TestCorpusToolResultTurns(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	hit := func(s string) bool { _, ok := d.Detect(s); return ok }
	doc := func(s string) bool { _, ok := d.DetectDocument(s); return ok }
	turn := func(read func(string) bool, a, b string) bool { return read(a+"\n"+b) || read(a+b) }
	var docs, prompts []string
	whole, lostApart, foundTurn := 0, 0, 0
	for _, s := range loadCorpus(t) {
		switch {
		case s.Subset == "direct" && s.Label == "benign":
			prompts = append(prompts, s.Text)
		case s.Subset != "indirect":
		case s.Label == "benign":
			docs = append(docs, s.Text)
		case doc(s.Text):
			whole++
			a, b := cutInTwo(s.Text)
			if doc(a) || doc(b) {
				continue
			}
			lostApart++
			if turn(doc, a, b) {
				foundTurn++
			}
		}
	}
	t.Logf("indirect attacks found whole %d; cut across two tool results, %d missed read apart, %d of them found in the turn", whole, lostApart, foundTurn)
	if foundTurn != lostApart {
		t.Errorf("%d attacks cut across two tool results are missed in the turn", lostApart-foundTurn)
	}
	docPairs, docBlocked, pairs, blocked := 0, 0, 0, 0
	for i, a := range docs {
		if doc(a) {
			continue
		}
		if i+1 < len(docs) && !doc(docs[i+1]) {
			docPairs++
			if turn(doc, a, docs[i+1]) {
				docBlocked++
				t.Logf("benign tool results blocked as one turn: %.80q + %.80q", a, docs[i+1])
			}
		}
		if b := prompts[i%len(prompts)]; !hit(b) {
			pairs++
			if turn(hit, a, b) {
				blocked++
				t.Logf("benign tool result and prompt blocked as one turn: %.80q + %.80q", a, b)
			}
		}
	}
	t.Logf("benign tool results paired %d, blocked as one turn %d; each followed by a user prompt %d, blocked %d", docPairs, docBlocked, pairs, blocked)
	// The ceilings are the figures measured (docs/detection.md): a rise fails.
	if docBlocked > 0 || blocked > 0 {
		t.Errorf("benign tool results blocked as one turn: %d paired, %d with a prompt", docBlocked, blocked)
	}
}

// cutInTwo cuts text, of two runes or more, in two at a point stable for the text.
func cutInTwo(text string) (string, string) {
	h := fnv.New32a()
	h.Write([]byte(text))
	r := []rune(text)
	cut := 1 + int(h.Sum32()%uint32(len(r)-1))
	return string(r[:cut]), string(r[cut:])
}
