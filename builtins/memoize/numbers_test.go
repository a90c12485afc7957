package memoize_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestCachedToolResultKeepsItsNumbers: a cached tool result was decoded
// with encoding/json, so a hit answered a balance of 9007199254740993 (an
// int64, or an upstream's json.Number) as the float64 9007199254740992,
// and an after-phase guard outside the cache decided on that neighbour.
// A hit now holds the numbers the tool returned.
func TestCachedToolResultKeepsItsNumbers(t *testing.T) {
	want := map[string]any{"balance": int64(9007199254740993), "rate": json.Number("0.1000000000000000055511151231257827"),
		"n": 2.5, "ids": []any{int64(-9007199254740993), 1.0}}
	search := rt.NewTool(rt.ToolResult{Value: want})
	pl := rt.Build(t, toolPlan(""), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "x"}}
	_, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	require.True(t, r.Cached)
	assert.Equal(t, want, r.Value)
	assert.Equal(t, 1, search.Calls())
}
