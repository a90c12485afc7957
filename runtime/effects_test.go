package runtime_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestToolsOfUnknownEffectsAreSideEffecting: a tool nothing declares the
// effects of (undeclared, or served by the host without a declaration of its
// effects) is side-effecting and not retry_safe; the host's declaration
// (DeclareToolEffects) says otherwise for its tools, and the policy's
// declaration wins over the host's.
func TestToolsOfUnknownEffectsAreSideEffecting(t *testing.T) {
	seen := map[string]runtime.ToolInfo{}
	record := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		seen[c.Name] = *c.Tool
		return "ok", nil
	}
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"search": {}}
	names := []string{"search", "lookup", "upsert", "delete_row", "undeclared"}
	deps := runtime.Deps{Tools: map[string]runtime.ToolFunc{}, ToolArgs: map[string]json.RawMessage{}}
	for _, n := range names {
		deps.Tools[n] = record
	}
	for _, n := range []string{"lookup", "upsert", "delete_row"} {
		deps.ToolArgs[n] = json.RawMessage(`{"type":"object"}`)
	}
	pl := rt.Build(t, p, deps)
	pl.DeclareToolEffects(map[string]runtime.ToolEffects{
		"search": {SideEffecting: true},                  // the policy declares it read-only: the policy wins
		"lookup": {},                                     // read-only
		"upsert": {SideEffecting: true, RetrySafe: true}, // idempotent
		"ghost":  {SideEffecting: true},                  // not served: ignored
	})
	for _, n := range append(names, "absent") {
		_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: n, Args: map[string]any{}})
		if n == "absent" {
			require.ErrorContains(t, err, "not registered")
			continue
		}
		require.NoError(t, err, n)
	}
	for _, tc := range []struct {
		name                     string
		sideEffecting, retrySafe bool
	}{
		{"search", false, false},
		{"lookup", false, false},
		{"upsert", true, true},
		{"delete_row", true, false},
		{"undeclared", true, false},
	} {
		assert.Equal(t, tc.sideEffecting, seen[tc.name].SideEffecting, "%s side_effecting", tc.name)
		assert.Equal(t, tc.retrySafe, seen[tc.name].RetrySafe, "%s retry_safe", tc.name)
	}
}

// TestWhenSeesUnknownEffectsAsSideEffecting: `tool.side_effecting` is true
// for an undeclared tool, registered or not.
func TestWhenSeesUnknownEffectsAsSideEffecting(t *testing.T) {
	l := rt.Named("effects", rt.Layer("test.probe", ""))
	l.When = &plan.Predicate{Stage: plan.StageTool, Source: "tool.side_effecting && !tool.retry_safe"}
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{l}})
	p.Tools = map[string]plan.Tool{"search": {}}
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"search": tool.Func(), "undeclared": tool.Func()}})
	events.events = nil
	for _, n := range []string{"search", "undeclared", "unregistered"} {
		_, _ = pl.Tool(context.Background(), runtime.ToolRequest{Name: n})
	}
	assert.Equal(t, []string{"tool effects", "tool effects"}, events.events, "the layer applies to the undeclared tools only")
}
