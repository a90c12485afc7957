package compaction

import (
	"context"
	"fmt"
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
