package idempotent_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestReplayedResultKeepsItsNumbers: a duplicate's replayed result was
// decoded with encoding/json, so the duplicate of a refund that returned
// the transfer id 9007199254740993 was answered 9007199254740992, another
// transfer's id. The replay now holds the numbers the call returned.
func TestReplayedResultKeepsItsNumbers(t *testing.T) {
	want := map[string]any{"transfer_id": int64(9007199254740993), "fee": json.Number("0.1000000000000000055511151231257827"), "n": 1.0}
	calls := 0
	pl := rt.Build(t, toolPlan(), runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
		calls++
		return want, nil
	}}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	_, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	require.True(t, r.Deduped)
	assert.Equal(t, want, r.Value)
	assert.Equal(t, 1, calls)
}

// TestKeyArgsAreKeyedOnTheNumbersNotTheirSpelling: key_args were keyed on
// the arguments' JSON as Go encodes them, so a refund of 0 and one of -0
// (or a host's json.Number 100.0 and 100) were two refunds. Equal numbers
// are one key now.
func TestKeyArgsAreKeyedOnTheNumbersNotTheirSpelling(t *testing.T) {
	calls := 0
	pl := rt.Build(t, toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id", "fee"]}`)), runtime.Deps{Tools: map[string]runtime.ToolFunc{
		"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			calls++
			return "ok", nil
		}}})
	for i, args := range []map[string]any{
		{"order_id": 7.0, "fee": 0.0},
		{"order_id": json.Number("7.0"), "fee": math.Copysign(0, -1)},
		{"order_id": int64(7), "fee": json.Number("-0")},
	} {
		r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args})
		require.NoError(t, err)
		assert.Equal(t, i > 0, r.Deduped, "%v", args)
	}
	assert.Equal(t, 1, calls)
}
