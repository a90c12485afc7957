package idempotent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	_ "github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestPIIInsideIdempotentStoresTheResultMasked: a tool's result holding an
// e-mail address and a card number reaches the caller masked by a pii
// layer of action redact wherever it sits, but idempotent inside pii
// stores it in clear in its store (what vet's order/cache-inside-redact
// warns of); outside pii it stores the result masked, and a duplicate gets
// it so.
func TestPIIInsideIdempotentStoresTheResultMasked(t *testing.T) {
	const diff = "-customer mary.major@bank.example card 5500005555555559\n+client mary.major@bank.example card 5500005555555559"
	pii := rt.Layer("pii", `{"action":"redact","kinds":["email","card"],"on_error":"closed","system":true,"output":true}`)
	for name, tc := range map[string]struct {
		chain   []plan.Layer
		inClear bool
	}{
		"idempotent inside pii": {chain: []plan.Layer{pii, rt.Layer("idempotent", "")}, inClear: true},
		"pii inside idempotent": {chain: []plan.Layer{rt.Layer("idempotent", ""), pii}},
	} {
		t.Run(name, func(t *testing.T) {
			kv := runtime.NewMemoryKV()
			tool := rt.NewTool(rt.ToolResult{Value: diff})
			pl := rt.Build(t, toolPlan(tc.chain...), runtime.Deps{Stores: map[string]runtime.KV{runtime.DefaultStore: kv},
				Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
			args := map[string]any{"order_id": "A1"}
			for range 2 {
				v, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args})
				require.NoError(t, err)
				assert.NotContains(t, v.Value, "mary.major", "the caller sees the result masked")
				assert.NotContains(t, v.Value, "5500005555555559")
			}
			assert.Equal(t, 1, tool.Calls(), "the duplicate is answered from the record")
			key := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}})
			b, ok, err := kv.Get(context.Background(), key)
			require.NoError(t, err)
			require.True(t, ok, "the outcome is recorded")
			assert.Equal(t, tc.inClear, strings.Contains(string(b), "mary.major"), "record %s", b)
			assert.Equal(t, tc.inClear, strings.Contains(string(b), "5500005555555559"), "record %s", b)
		})
	}
}
