package security

import (
	"hash/fnv"
	"testing"
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
		h := fnv.New32a()
		h.Write([]byte(s.Text))
		r := []rune(s.Text)
		cut := 1 + int(h.Sum32()%uint32(len(r)-1))
		a, b := string(r[:cut]), string(r[cut:])
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
