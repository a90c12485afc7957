package runtime_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestAdmitToolDecidesWithoutRunning: AdmitTool refuses what the tool chain
// would refuse before the tool runs (entry checks, tool_policy, egress,
// file_check, a guard in its scope, pii blocking), wherever the check sits in the chain,
// and runs nothing: the tool is not called, the meter charges nothing, the
// idempotency record is not claimed.
func TestAdmitToolDecidesWithoutRunning(t *testing.T) {
	dir := t.TempDir()
	p := declaredPlan(
		plan.Layer{Use: "meter", Config: json.RawMessage(`{"budget": {"calls": 1}}`)},
		plan.Layer{Use: "idempotent"},
		plan.Layer{Use: "tool_policy", Config: json.RawMessage(`{"deny": ["wipe"]}`)},
		plan.Layer{Use: "egress", Config: json.RawMessage(`{"allow": ["api.example.com"]}`)},
		plan.Layer{Use: "file_check", Config: json.RawMessage(`{"roots": [` + string(mustJSON(t, dir)) + `]}`)},
		plan.Layer{Use: "guard", Name: "cap", Tools: []string{"refund"}, Config: json.RawMessage(`{"deny": "args.amount > 100.0", "phase": "before", "on_error": "closed"}`)},
		plan.Layer{Use: "pii", Tools: []string{"note"}, Config: json.RawMessage(`{"action": "block"}`)},
	)
	p.Tools["note"] = plan.Tool{}
	p.Tools["wipe"] = plan.Tool{}
	p.Tools["fetch"] = plan.Tool{URLArg: "url"}
	p.Tools["read"] = plan.Tool{PathArg: "path"}
	p.Tools["other"] = plan.Tool{}
	tool := rt.NewTool(rt.ToolResult{Value: "done"})
	fns := map[string]runtime.ToolFunc{}
	for name := range p.Tools {
		fns[name] = tool.Func()
	}
	pl := rt.Build(t, p, runtime.Deps{Tools: fns})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	tests := []struct {
		name  string
		req   runtime.ToolRequest
		layer string
	}{
		{"undeclared", runtime.ToolRequest{Name: "nope"}, runtime.LayerTools},
		{"args schema", runtime.ToolRequest{Name: "refund", Args: map[string]any{"amount": 5.0}}, runtime.LayerTools},
		{"denied", runtime.ToolRequest{Name: "wipe"}, "tool_policy"},
		{"egress", runtime.ToolRequest{Name: "fetch", Args: map[string]any{"url": "http://169.254.169.254/"}}, "egress"},
		{"file_check", runtime.ToolRequest{Name: "read", Args: map[string]any{"path": "/etc/passwd"}}, "file_check"},
		{"guard", runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 500.0}}, "cap"},
		{"pii", runtime.ToolRequest{Name: "note", Args: map[string]any{"text": "mail ann@example.com"}}, "pii"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.layer, blockedBy(t, pl.AdmitTool(ctx, tc.req)).Layer)
		})
	}
	// The guard's tools scope holds: the same arguments pass for another
	// tool.
	require.NoError(t, pl.AdmitTool(ctx, runtime.ToolRequest{Name: "other", Args: map[string]any{"amount": 500.0}}))
	ok := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": 5.0}}
	for range 3 {
		require.NoError(t, pl.AdmitTool(ctx, ok))
	}
	assert.Zero(t, tool.Calls(), "admission runs no tool")
	// The meter allows one call: nothing was charged by the admissions,
	// and idempotent did not claim the call.
	res, err := pl.Tool(ctx, ok)
	require.NoError(t, err)
	assert.False(t, res.Deduped)
	assert.Equal(t, 1, tool.Calls())
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}
