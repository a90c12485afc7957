package audit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestIncludeArgsKeepsNumbersWhereSecretsAreMasked: in a run holding a
// secret, the arguments written with include_args went through
// encoding/json to be masked, so the record named account
// 9007199254740992 where the call carried 9007199254740993; and a secret
// integer above 2^53 (an account a secret_result tool returned) was
// looked for as that neighbour. The record keeps the numbers the call
// carried, and a secret number is masked as the call carries it.
func TestIncludeArgsKeepsNumbersWhereSecretsAreMasked(t *testing.T) {
	sink := &runtime.MemoryAudit{}
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("audit", `{"include_args": true}`)}})
	p.Tools = map[string]plan.Tool{"vault": {SecretResult: true}, "transfer": {}}
	pl := rt.Build(t, p, runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{
		"vault":    rt.NewTool(rt.ToolResult{Value: map[string]any{"token": "tok_9f8e7d6c", "account": int64(9007199254740995)}}).Func(),
		"transfer": rt.NewTool(rt.ToolResult{Value: "ok"}, rt.ToolResult{Value: "ok"}).Func(),
	}})
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "vault", Args: map[string]any{}})
	require.NoError(t, err)
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "transfer", Args: map[string]any{"from": int64(9007199254740993), "auth": "tok_9f8e7d6c"}})
	require.NoError(t, err)
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "transfer", Args: map[string]any{"from": int64(9007199254740995)}})
	require.NoError(t, err)
	var got []map[string]any
	for _, r := range sink.Records() {
		if r.Tool == "transfer" && r.Phase == runtime.PhaseOutcome {
			got = append(got, r.Args)
		}
	}
	assert.Equal(t, []map[string]any{{"from": int64(9007199254740993), "auth": "[SECRET]"}, {"from": "[SECRET]"}}, got)
}
