package all_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// storeDownPipeline builds a tool chain of layer over a redis store
// ("shared") and a postgres one ("trail"), each reached through a proxy,
// and cuts both: every call then finds its layer's store down.
func storeDownPipeline(t *testing.T, layer plan.Layer) (*runtime.Pipeline, *rt.Tool) {
	t.Helper()
	redisProxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	pgProxy := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{layer}})
	p.Tools = map[string]plan.Tool{"transfer": {SideEffecting: true}}
	p.Stores = map[string]plan.Store{
		"shared": {Kind: "redis", URL: redisProxy.URL, Prefix: storetest.Prefix(t), Timeout: "2s"},
		"trail":  {Kind: "postgres", URL: pgProxy.URL, Prefix: storetest.Prefix(t), Timeout: "2s"},
	}
	tool := rt.NewTool(rt.ToolResult{Value: "sent"})
	pl := rt.Build(t, p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"transfer": tool.Func()}})
	redisProxy.Cut()
	pgProxy.Cut()
	return pl, tool
}

// storeLayers are the layers that keep their state in a store of
// storeDownPipeline, by name.
func storeLayers() map[string]plan.Layer {
	return map[string]plan.Layer{
		"meter":      rt.Layer("meter", `{"budget":{"calls":5},"scope":"global","store":"shared"}`),
		"rate_limit": rt.Layer("rate_limit", `{"rate":5,"per":"1m","mode":"reject","scope":"global","store":"shared"}`),
		"idempotent": rt.Layer("idempotent", `{"store":"shared"}`),
		"audit":      rt.Layer("audit", `{"sink":"trail"}`),
	}
}

// A call a layer refuses because its store is down did not run, and its
// *CallError says so in its Kind as KindOf does, for every layer that keeps
// its state in a store: an embedder reading ce.Kind and one reading KindOf
// agree.
func TestAStoreDownRefusalIsKindedAsKindOfSays(t *testing.T) {
	for name, layer := range storeLayers() {
		t.Run(name, func(t *testing.T) {
			pl, tool := storeDownPipeline(t, layer)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1", Tenant: "acme"})
			_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "transfer", Args: map[string]any{"acct": "a1"}})
			var ce *runtime.CallError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, "store_unavailable", runtime.KindOf(err))
			assert.Equal(t, runtime.KindStoreUnavailable, ce.Kind)
			assert.Equal(t, name, ce.Layer)
			assert.True(t, runtime.DidNotRun(err))
			assert.Equal(t, 0, tool.Calls())
		})
	}
}

// cancelledSink is an audit sink whose write is stopped by the caller's
// cancellation, as a store's client reports it.
type cancelledSink struct{ runtime.AuditSink }

func (cancelledSink) Append(ctx context.Context, _ runtime.AuditRecord) error {
	return errors.Join(errors.New("postgres audit append"), context.Canceled)
}

// An audit intent the caller's cancellation kept from being written kept
// the call from running: the error says so (DidNotRun), and its Kind is
// KindOf's, canceled, which is not transient.
func TestAnIntentCancelledDidNotRun(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("audit", "")}})
	p.Tools = map[string]plan.Tool{"transfer": {SideEffecting: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "sent"})
	pl := rt.Build(t, p, runtime.Deps{Audit: cancelledSink{runtime.NewMemoryStore()}, Tools: map[string]runtime.ToolFunc{"transfer": tool.Func()}})
	_, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "transfer", Args: map[string]any{}})
	require.ErrorContains(t, err, "audit intent not written; the call did not run")
	assert.True(t, runtime.DidNotRun(err))
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "canceled", runtime.KindOf(err))
	assert.Equal(t, runtime.KindCanceled, ce.Kind)
	assert.False(t, runtime.IsTransient(err))
	assert.Equal(t, 0, tool.Calls())
}

// A layer whose store wait the caller's cancellation stopped kept the call
// from running: the error is the cancellation, and it says the call did
// not run (DidNotRun), as docs/state.md has it, so that an idempotent or
// audit layer outside does not take the call for one that may have run.
func TestAStoreWaitCancelledDidNotRun(t *testing.T) {
	for name, layer := range storeLayers() {
		t.Run(name, func(t *testing.T) {
			pl, tool := storeDownPipeline(t, layer)
			ctx, cancel := context.WithCancel(runtime.WithRun(context.Background(), runtime.Run{ID: "r1", Tenant: "acme"}))
			cancel()
			_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "transfer", Args: map[string]any{"acct": "a1"}})
			require.ErrorIs(t, err, context.Canceled)
			assert.Equal(t, "canceled", runtime.KindOf(err))
			assert.True(t, runtime.DidNotRun(err))
			assert.False(t, runtime.IsTransient(err))
			assert.Equal(t, 0, tool.Calls())
		})
	}
}
