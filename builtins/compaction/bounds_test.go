package compaction

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// splitTurn is a transcript of n assistant messages with one tool call each
// (the calls of one turn, split as Anthropic's API lets a client split them),
// then one user message answering all n.
func splitTurn(n int) []Message {
	in := []Message{user("go")}
	res := Message{Role: RoleUser, Content: "results"}
	for i := range n {
		id := fmt.Sprintf("t%d", i)
		in = append(in, call("", id))
		res.ToolResultIDs = append(res.ToolResultIDs, id)
	}
	return append(in, res, asst("done"), user("next"))
}

// The analysis of a transcript is linear in its size: a message answering
// the calls of many assistant messages joins their units in one pass, not
// one sort and one walk over every call per joined unit.
func TestJoiningSplitTurnsIsLinear(t *testing.T) {
	for _, n := range []int{100, 1000, 4000} {
		in := splitTurn(n)
		p := newPlan(context.Background(), in, Options{MaxTokens: 50, KeepRecent: 3, Count: unitCounter}, false)
		assert.LessOrEqual(t, p.steps, 8*len(in), "n=%d", n)
		out := Compact(in, Options{MaxTokens: 50, KeepRecent: 3, Count: unitCounter})
		assert.Equal(t, len(in), len(out), "n=%d: the result is recent, so every call stays with it", n)
	}
}

// Dropping the answers the cut left without their question goes on from
// where the scan for the last one stopped: a long run of answers after one
// dropped question costs a step or so each.
func TestTheUserFirstScanIsLinear(t *testing.T) {
	n := 4000
	in := []Message{user("u0")}
	for range n {
		in = append(in, asst("a"))
	}
	in = append(in, user("last"))
	p := newPlan(context.Background(), in, Options{MaxTokens: 10 * (n + 1), KeepRecent: 1, Count: unitCounter}, false)
	p.dropWhileOver(10*(n+1), 0)
	assert.Equal(t, []string{"last"}, contents(p.output(nil)), "no answer is kept without its question")
	assert.LessOrEqual(t, p.steps, 8*len(in))
}

// A transcript whose caller has gone is not compacted to the end.
func TestCompactionStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	in := splitTurn(5000)
	o := Options{MaxTokens: 50, KeepRecent: 3, Count: unitCounter}
	_, err := CompactContext(ctx, in, o)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = ImportanceContext(ctx, in, o)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = SummarizeWith(ctx, in, o, func(context.Context, []Message) (string, error) {
		t.Error("no summary is asked for once the context has ended")
		return "s", nil
	})
	assert.ErrorIs(t, err, context.Canceled)
	out, err := CompactContext(context.Background(), in, o)
	require.NoError(t, err)
	assert.Equal(t, Compact(in, o), out)
}

// bytes is the size of the text of msgs.
func textBytes(msgs []Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content) + len(m.ToolCallID)
		for _, tc := range m.ToolCalls {
			n += len(tc.ID)
		}
	}
	return n
}

// Importance looks for every call's id and every result's first line in the
// messages after it in one scan of the transcript, not one scan per call.
func TestImportanceIsLinear(t *testing.T) {
	for _, n := range []int{100, 1000, 4000} {
		in := []Message{user("go")}
		for i := range n {
			id := fmt.Sprintf("call_%d", i)
			in = append(in, call("", id), result(id, fmt.Sprintf("result number %d of the search", i)))
		}
		in = append(in, asst("as call_7 and result number 12 of the search showed"), user("next"))
		p := newPlan(context.Background(), in, Options{MaxTokens: 100, KeepRecent: 1, Count: unitCounter}, false)
		p.referenced()
		assert.LessOrEqual(t, p.steps, 4*(len(in)+textBytes(in)), "n=%d", n)
		assert.True(t, p.units[p.unitOf[1+2*7]].protected, "n=%d: call_7 is named later", n)
		assert.True(t, p.units[p.unitOf[1+2*12]].protected, "n=%d: the result of call_12 is quoted later", n)
		assert.False(t, p.units[p.unitOf[1+2*3]].protected, "n=%d: nothing refers to call_3", n)
		assert.False(t, p.units[p.unitOf[1+2*1]].protected, "n=%d: call_1 is not named: call_12 is", n)
	}
}

// referencedNaive is referenced as it reads: each unit's needles looked for
// in every later message.
func referencedNaive(p *plan) []bool {
	out := make([]bool, len(p.units))
	for ui, u := range p.units {
		if !u.toolCalls || u.protected {
			out[ui] = u.protected
			continue
		}
		var needles []string
		last := u.idx[len(u.idx)-1]
		for _, i := range u.idx {
			m := p.msgs[i]
			for _, tc := range m.ToolCalls {
				if tc.ID != "" && !strings.HasPrefix(tc.ID, "\x00") {
					needles = append(needles, tc.ID)
				}
			}
			if m.Role == RoleTool || len(m.ToolResultIDs) > 0 {
				line, _, _ := strings.Cut(strings.TrimSpace(m.Content), "\n")
				if line = strings.TrimSpace(line); len(line) >= MinQuote {
					needles = append(needles, line)
				}
			}
		}
		for j := last + 1; j < len(p.msgs); j++ {
			for _, n := range needles {
				if strings.Contains(p.msgs[j].Content, n) {
					out[ui] = true
				}
			}
		}
	}
	return out
}

// The one scan finds what looking for each needle in each later message
// finds, with needles that overlap, repeat and end one another.
func TestImportanceScanFindsWhatTheNaiveSearchFinds(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	words := []string{"c1", "c12", "ab", "abab", "xyzxyzxy", "zxyzxyzx", "c", "\n", " "}
	text := func() string {
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(words[r.IntN(len(words))])
		}
		return b.String()
	}
	for iter := range 500 {
		var in []Message
		for range 1 + r.IntN(10) {
			switch r.IntN(3) {
			case 0:
				in = append(in, user(text()))
			case 1:
				id := fmt.Sprintf("c%d", r.IntN(14))
				in = append(in, call(text(), id), result(id, text()))
			default:
				in = append(in, asst(text()))
			}
		}
		p := newPlan(context.Background(), in, Options{KeepRecent: 1, Count: unitCounter}, false)
		want := referencedNaive(p)
		p.referenced()
		for ui := range p.units {
			require.Equal(t, want[ui], p.units[ui].protected, "iteration %d, unit %d of %q", iter, ui, in)
		}
	}
}

// The context is looked at every so many steps whatever steps the work
// counts between two looks: a transcript whose messages each cost two steps
// (a result looked up by its call's id), after an odd number of others, is
// not read to its end for a caller that has gone, nor is a text scanned to
// its end whose bytes each cost two steps (a needle that fails over and
// over).
func TestTheContextIsLookedAtWhateverTheStepsBetween(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	in := []Message{user("go"), call("", "c")}
	for range 5000 {
		in = append(in, result("c", "r"))
	}
	p := newPlan(ctx, in, Options{KeepRecent: 1, Count: unitCounter}, false)
	assert.ErrorIs(t, p.err, context.Canceled)
	assert.Less(t, p.steps, 4096, "the work stopped soon after it began")

	for k := range 4 { // the parity of the steps before the scan
		in = []Message{user("go"), call("", "aa"), result("aa", "r"), asst(strings.Repeat("b", k) + strings.Repeat("a", 1<<16)), user("next")}
		p = newPlan(context.Background(), in, Options{KeepRecent: 1, Count: unitCounter}, false)
		p.ctx = ctx
		p.referenced()
		assert.ErrorIs(t, p.err, context.Canceled, "k=%d", k)
		assert.Less(t, p.steps, 4096, "k=%d: the scan stopped soon after it began", k)
	}
}

// A needle's next byte is found in a step or so however many needles go on
// from the same prefix: calls whose ids differ in their second byte only,
// and a text that makes the scan try each of them at every other byte, cost
// no more than a text that matches nothing.
func TestImportanceIsLinearWhateverTheNeedlesShare(t *testing.T) {
	in := []Message{user("go")}
	for b := 1; b < 256; b++ {
		if b == 'z' {
			continue
		}
		id := "x" + string([]byte{byte(b)})
		in = append(in, call("", id), result(id, "r"))
	}
	in = append(in, asst(strings.Repeat("xz", 1<<16)), user("next"))
	p := newPlan(context.Background(), in, Options{MaxTokens: 100, KeepRecent: 1, Count: unitCounter}, false)
	p.referenced()
	assert.LessOrEqual(t, p.steps, 4*(len(in)+textBytes(in)))
	assert.False(t, p.units[p.unitOf[1]].protected, "no call is named later")
}
