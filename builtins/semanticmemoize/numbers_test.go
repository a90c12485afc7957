package semanticmemoize_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestReusedToolResultKeepsItsNumbers: a reused tool result was decoded
// with encoding/json, so a hit answered a balance of 9007199254740993 as
// the float64 9007199254740992. A hit now holds the numbers the tool
// returned.
func TestReusedToolResultKeepsItsNumbers(t *testing.T) {
	want := map[string]any{"balance": int64(9007199254740993), "rate": json.Number("0.1000000000000000055511151231257827"), "n": 2.5}
	search := rt.NewTool(rt.ToolResult{Value: want})
	pl := rt.Build(t, toolPlan(`{"threshold": 0.9}`), runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": search.Func()}})
	req := runtime.ToolRequest{Name: "search", Args: map[string]any{"q": "What is the balance of account 7?"}}
	_, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	r, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	require.True(t, r.Cached)
	assert.Equal(t, want, r.Value)
	assert.Equal(t, 1, search.Calls())
}
