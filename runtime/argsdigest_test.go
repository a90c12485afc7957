package runtime_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestArgsDigestOfArgumentsWithoutCanonicalForm(t *testing.T) {
	ok := &runtime.ToolCall{Name: "pay", Args: map[string]any{"to": "alice", "amount": 1.0}}
	d, err := ok.ArgsDigestErr()
	require.NoError(t, err)
	assert.Len(t, d, 64)
	assert.Equal(t, d, ok.ArgsDigest())

	alice := &runtime.ToolCall{Name: "pay", Args: map[string]any{"to": "alice", "amount": math.Inf(1)}}
	bob := &runtime.ToolCall{Name: "pay", Args: map[string]any{"to": "bob", "amount": math.Inf(1)}}
	for _, c := range []*runtime.ToolCall{alice, bob} {
		d, err := c.ArgsDigestErr()
		require.Error(t, err)
		assert.Empty(t, d)
		assert.Empty(t, c.ArgsDigest())
		_, err = c.ArgsDigestErr()
		require.Error(t, err, "the failure is remembered")
	}
	assert.NotEqual(t, alice.IdempotencyKey(), bob.IdempotencyKey(), "no shared key")
	assert.Equal(t, alice.IdempotencyKey(), alice.IdempotencyKey(), "stable for the call")
}

func TestIdempotencyKeyOfArgumentsWithoutCanonicalFormIsStableAcrossRetries(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms","max_delay":"1ms"}`)}})
	// pay passes its idempotency key downstream: a retry may run it again.
	p.Tools = map[string]plan.Tool{"pay": {SideEffecting: true, RetrySafe: true}}
	tool := rt.NewTool(rt.ToolResult{Err: rt.Transient("flaky")}, rt.ToolResult{Value: 1})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"pay": tool.Func()}})
	require.NoError(t, err)
	defer pl.Close()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	for range 2 {
		_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "pay", Args: map[string]any{"amount": math.NaN()}})
		require.NoError(t, err)
	}
	keys := tool.Keys()
	require.Len(t, keys, 3)
	assert.Equal(t, keys[0], keys[1], "the same across the call's retries")
	assert.NotEqual(t, keys[0], keys[2], "never shared with another call")
}

// TestArgsDigestIsOfTheNumbersNotTheirSpelling: the digest (and the
// derived idempotency key) was of the arguments' JSON as Go encodes it, so
// a fee of -0 and one of 0 made two calls of one payment, and so did a
// host's json.Number 100.0 and 100: a duplicate that spelled a number
// otherwise ran again. Equal numbers are one call now; other numbers are
// not.
func TestArgsDigestIsOfTheNumbersNotTheirSpelling(t *testing.T) {
	digest := func(args map[string]any) string {
		t.Helper()
		d, err := (&runtime.ToolCall{Name: "pay", Args: args}).ArgsDigestErr()
		require.NoError(t, err)
		return d
	}
	negZero := math.Copysign(0, -1)
	for _, tc := range []struct{ a, b map[string]any }{
		{map[string]any{"to": "bob", "fee": 0.0}, map[string]any{"to": "bob", "fee": negZero}},
		{map[string]any{"fees": []any{0.0}}, map[string]any{"fees": []any{negZero}}},
		{map[string]any{"amount": 100.0}, map[string]any{"amount": json.Number("100.0")}},
		{map[string]any{"amount": 100.0}, map[string]any{"amount": json.Number("1e2")}},
		{map[string]any{"amount": 100.0}, map[string]any{"amount": int64(100)}},
		{map[string]any{"amount": 0.1}, map[string]any{"amount": json.Number("0.10")}},
		{map[string]any{"to": int64(9007199254740993)}, map[string]any{"to": json.Number("9007199254740993")}},
		{map[string]any{"x": map[string]any{"n": 0.0}}, map[string]any{"x": map[string]any{"n": json.Number("-0.0")}}},
	} {
		assert.Equal(t, digest(tc.a), digest(tc.b), "%v and %v", tc.a, tc.b)
	}
	for _, tc := range []struct{ a, b map[string]any }{
		{map[string]any{"amount": 100.0}, map[string]any{"amount": "100"}},
		{map[string]any{"to": int64(9007199254740993)}, map[string]any{"to": 9007199254740992.0}},
		{map[string]any{"amount": 0.1}, map[string]any{"amount": json.Number("0.1000000000000000055511151231257827")}},
	} {
		assert.NotEqual(t, digest(tc.a), digest(tc.b), "%v and %v", tc.a, tc.b)
	}
	args := map[string]any{"fee": negZero, "n": json.Number("1.50")}
	digest(args)
	assert.Equal(t, map[string]any{"fee": negZero, "n": json.Number("1.50")}, args, "the caller's map is not changed")
	assert.True(t, math.Signbit(args["fee"].(float64)))
}

// TestRunAgentRunsACallRepeatedWithNegativeZeroOnce: a model that asked
// twice for one refund in one answer, the second with -0 where the first
// had 0, had it made twice.
func TestRunAgentRunsACallRepeatedWithNegativeZeroOnce(t *testing.T) {
	calls := []runtime.ToolUse{use("r1", "refund", `{"order":7, "fee":0}`), use("r2", "refund", `{"order":7, "fee":-0}`)}
	model := rt.NewModel(callTools(calls...), rt.Response{Deltas: []string{"done"}})
	tools, made := countingTools(0)
	pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
	_, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "go"})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"refund 7": 1}, made())
}
