package security

import (
	"strings"
	"testing"
	"time"

	"github.com/agentc-dev/agentc/internal/cputime"
)

// repeatedStartWords are phrases that start signatures or families; a text repeating one
// makes every word a place to try them.
var repeatedStartWords = []string{"repeat ", "no ", "ignore ", "show ", "not ", "you are ", "stay ", "if ", "print ", "never ", "focus ", "user ", "[inst "}

// ordinaryMB is a megabyte of prose with none of the start words.
var ordinaryMB = strings.Repeat("The quarterly report shows revenue grew while costs stayed flat across regions. ", 1<<20/80)

// ratioToProse is the least CPU time (cputime.Of) of three runs of Detect on text over the least of three on
// ordinaryMB, the runs alternating so that a change of load on the machine weighs on both.
func ratioToProse(d *Detector, text string) (got, plain time.Duration) {
	got, plain = time.Duration(1<<63-1), time.Duration(1<<63-1)
	for range 3 {
		plain = min(plain, cputime.Of(func() { d.Detect(ordinaryMB) }))
		got = min(got, cputime.Of(func() { d.Detect(text) }))
	}
	return got, plain
}

// TestRepeatedStartWordsStayCheap bounds the work on a megabyte repeating a start word by
// the work on a megabyte of ordinary prose, measured in the same run. Trying each
// expression on every repetition cost 20 to 35 times the prose; an expression is now tried
// once per distinct window. A ratio over the bound is measured again twice before it
// fails, as a burst of load can land on one side.
func TestRepeatedStartWordsStayCheap(t *testing.T) {
	if testing.Short() {
		t.Skip("measures 1 MB texts")
	}
	d := newDetector(t, Config{})
	for _, w := range repeatedStartWords {
		text := strings.Repeat(w, 1<<20/len(w))
		var got, plain time.Duration
		for range 3 {
			if got, plain = ratioToProse(d, text); got <= 16*plain {
				break
			}
		}
		t.Logf("%-10q %v (prose %v, x%.1f)", w, got, plain, float64(got)/float64(plain))
		if got > 16*plain {
			t.Errorf("1 MB of %q took %v, over 16 times the %v of 1 MB of prose", w, got, plain)
		}
	}
}

func BenchmarkDetect1MBRepeated(b *testing.B) {
	d := newDetector(b, Config{})
	for _, w := range append([]string{"prose"}, repeatedStartWords...) {
		text := ordinaryMB
		if w != "prose" {
			text = strings.Repeat(w, 1<<20/len(w))
		}
		b.Run(strings.TrimSpace(w), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				d.Detect(text)
			}
		})
	}
}
