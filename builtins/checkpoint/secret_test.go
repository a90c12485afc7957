package checkpoint_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/idempotent"
	_ "github.com/agentc-dev/agentc/builtins/memoize"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// requireSecretRefusal asserts err is the checkpoint's refusal of a secret
// at path.
func requireSecretRefusal(t *testing.T, err error, path string) {
	t.Helper()
	var se *runtime.SecretError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, path, se.Path)
}

// TestSecretResultNotMemoized: memoize never caches a secret_result tool,
// so a second run calls the tool itself and its save is refused too.
func TestSecretResultNotMemoized(t *testing.T) {
	vault := rt.NewTool(rt.ToolResult{Value: map[string]any{"token": "tok_8f2a91c4"}})
	pl := rt.Build(t, checkpointPlan(plan.Store{Kind: "memory"}, false, rt.Layer("memoize", `{"scope": "global"}`)),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"vault": vault.Func()}})
	a := runtime.WithRun(context.Background(), runtime.Run{ID: "a"})
	b := runtime.WithRun(context.Background(), runtime.Run{ID: "b"})
	requireSecretRefusal(t, turn(a, t, pl, "vault"), "tools[0].result.token")
	requireSecretRefusal(t, turn(b, t, pl, "vault"), "tools[0].result.token")
	assert.Equal(t, 2, vault.Calls(), "no cache serves a secret_result tool")
}

// TestIdempotentReplayTainted: after a restart, the idempotent layer
// replays a secret side-effecting tool's stored result without running the
// tool; the replayed result is still secret for the run.
func TestIdempotentReplayTainted(t *testing.T) {
	store := plan.Store{Kind: "sqlite", Path: filepath.Join(t.TempDir(), "s.db")}
	var vault *rt.Tool
	mk := func() *runtime.Pipeline {
		p := checkpointPlan(store, false, rt.Layer("idempotent", `{}`))
		p.Tools["vault"] = plan.Tool{SecretResult: true, SideEffecting: true}
		vault = rt.NewTool(rt.ToolResult{Value: map[string]any{"token": "tok_8f2a91c4"}})
		return rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"vault": vault.Func()}})
	}
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	pl := mk()
	requireSecretRefusal(t, turn(ctx, t, pl, "vault"), "tools[0].result.token")
	require.NoError(t, pl.Close())
	pl = mk()
	requireSecretRefusal(t, turn(ctx, t, pl, "vault"), "tools[0].result.token")
	assert.Zero(t, vault.Calls(), "the second process replays the stored result")
}

// TestSecretResultNumberTainted: the numbers of a secret result are secret
// too (as their JSON text).
func TestSecretResultNumberTainted(t *testing.T) {
	tools := map[string]runtime.ToolFunc{"vault": rt.NewTool(rt.ToolResult{Value: map[string]any{"pin": 48291734}}).Func()}
	pl := rt.Build(t, checkpointPlan(plan.Store{Kind: "memory"}, false), runtime.Deps{Tools: tools})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	requireSecretRefusal(t, turn(ctx, t, pl, "vault"), "tools[0].result.pin")
}

// TestSecretAsKeyFound: a secret string that comes back as an object key
// is found there.
func TestSecretAsKeyFound(t *testing.T) {
	tools := map[string]runtime.ToolFunc{
		"vault":  rt.NewTool(rt.ToolResult{Value: "tok_8f2a91c4"}).Func(),
		"lookup": rt.NewTool(rt.ToolResult{Value: map[string]any{"tok_8f2a91c4": "owner"}}).Func(),
	}
	p := checkpointPlan(plan.Store{Kind: "memory"}, false)
	pl := rt.Build(t, p, runtime.Deps{Tools: tools})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	requireSecretRefusal(t, turn(ctx, t, pl, "lookup", "vault"), "tools[0].result.tok_8f2a91c4")
}

// TestSecretKeyTainted: a secret result that holds its secret as an
// object key ({"tok_8f2a91c4": true}) taints the key, so neither the result
// nor a copy of the key elsewhere in the run is saved; a field name is not
// a secret.
func TestSecretKeyTainted(t *testing.T) {
	tools := map[string]runtime.ToolFunc{
		"vault":  rt.NewTool(rt.ToolResult{Value: map[string]any{"tok_8f2a91c4": true, "status": true}}).Func(),
		"lookup": rt.NewTool(rt.ToolResult{Value: "owner of tok_8f2a91c4"}).Func(),
	}
	pl := rt.Build(t, checkpointPlan(plan.Store{Kind: "memory"}, false), runtime.Deps{Tools: tools})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	requireSecretRefusal(t, turn(ctx, t, pl, "vault"), "tools[0].result.tok_8f2a91c4")

	pl = rt.Build(t, checkpointPlan(plan.Store{Kind: "memory"}, false), runtime.Deps{Tools: tools})
	requireSecretRefusal(t, turn(ctx, t, pl, "lookup", "vault"), "tools[0].result")

	tools["vault"] = rt.NewTool(rt.ToolResult{Value: map[string]any{"status": true, "address2": false}}).Func()
	tools["lookup"] = rt.NewTool(rt.ToolResult{Value: "status of address2"}).Func()
	pl = rt.Build(t, checkpointPlan(plan.Store{Kind: "memory"}, false), runtime.Deps{Tools: tools})
	require.NoError(t, turn(ctx, t, pl, "lookup", "vault"), "field names are not secrets")
}
