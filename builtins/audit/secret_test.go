package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
)

// TestIncludeArgsMasksTheRunsSecrets passes the token a secret_result tool
// returned on to another tool, as a model does, under an audit with
// include_args writing to PostgreSQL: the trail holds "[SECRET]" where the
// token was (in a value, inside a list, as a key), never the token, which a
// checkpoint of the same run would refuse to persist; other arguments stay
// as given.
func TestIncludeArgsMasksTheRunsSecrets(t *testing.T) {
	url := os.Getenv("AGENTC_TEST_POSTGRES_URL")
	if url == "" {
		t.Skip("AGENTC_TEST_POSTGRES_URL is not set")
	}
	ctx := context.Background()
	store, err := postgres.Open(ctx, url, "audit_secret_test_")
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("audit", `{"include_args": true}`)}})
	p.Tools = map[string]plan.Tool{"vault": {SecretResult: true}, "call_api": {}}
	pl := rt.Build(t, p, runtime.Deps{Audit: store, Tools: map[string]runtime.ToolFunc{
		"vault":    rt.NewTool(rt.ToolResult{Value: map[string]any{"token": "tok_9f8e7d6c", "pin": 48213}}).Func(),
		"call_api": rt.NewTool(rt.ToolResult{Value: "ok"}).Func(),
	}})
	run := fmt.Sprintf("audit-secret-%d", time.Now().UnixNano())
	rctx := runtime.WithRun(ctx, runtime.Run{ID: run})
	_, err = pl.Tool(rctx, runtime.ToolRequest{Name: "vault", Args: map[string]any{}})
	require.NoError(t, err)
	args := map[string]any{"auth": "Bearer tok_9f8e7d6c", "headers": []any{"x-pin: 48213"},
		"tok_9f8e7d6c": true, "code": 48213, "path": "/v1/charges"}
	_, err = pl.Tool(rctx, runtime.ToolRequest{Name: "call_api", Args: args})
	require.NoError(t, err)
	recs, err := store.Records(ctx, run)
	require.NoError(t, err)
	var n int
	for _, r := range recs {
		if r.Tool != "call_api" {
			continue
		}
		n++
		b, _ := json.Marshal(r.Args)
		assert.NotContains(t, string(b), "tok_9f8e7d6c")
		assert.NotContains(t, string(b), "48213")
		assert.Equal(t, map[string]any{"auth": "[SECRET]", "headers": []any{"[SECRET]"}, "[SECRET]": true,
			"code": "[SECRET]", "path": "/v1/charges"}, r.Args)
	}
	assert.Equal(t, 2, n, "intent and outcome")
	assert.Equal(t, "Bearer tok_9f8e7d6c", args["auth"], "the call's own arguments are untouched")
}
