package compaction_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/compaction"
	_ "github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestTheSummaryGoesThroughTheLayersInside pins that the summary call runs
// through the chain below compaction: a retry inside retries it, a meter
// inside charges it as a call of its own, and a meter outside does not see
// it.
func TestTheSummaryGoesThroughTheLayersInside(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Named("outer", rt.Layer("meter", `{"scope":"global"}`)),
		rt.Layer("compaction", `{"strategy":"summarize","model":"small","max_tokens":300,"keep_recent":3}`),
		rt.Named("inner", rt.Layer("meter", `{"scope":"global"}`)),
		rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms","max_delay":"1ms"}`),
	}})
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 200, OutputTokens: 1}})
	small := rt.NewModel(rt.Response{Err: rt.Transient("overloaded")},
		rt.Response{Deltas: []string{"the user asked about refunds"}, Usage: runtime.Usage{InputTokens: 700, OutputTokens: 9}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "small": small}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })

	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(12)})
	require.NoError(t, err)
	assert.Equal(t, 2, small.Calls(), "the retry inside compaction retried the summary")
	got := primary.Requests()[0].Messages
	var summaries int
	for _, m := range got {
		if m.Name == compaction.SummaryName {
			summaries++
			assert.Equal(t, compaction.SummaryPrefix+"the user asked about refunds", m.Content)
		}
	}
	assert.Equal(t, 1, summaries, "the retried summary replaced the dropped prefix")

	layers := pl.Layers(plan.StageChat)
	outer := layers[0].Middleware.(runtime.LedgerReader).Ledger("")
	inner := layers[2].Middleware.(runtime.LedgerReader).Ledger("")
	assert.Equal(t, int64(900), inner.InputTokens, "the inner ledger holds the summary's tokens")
	assert.Equal(t, int64(10), inner.OutputTokens)
	assert.Equal(t, int64(2), inner.Calls, "the summary is a call of its own")
	assert.Equal(t, int64(200), outer.InputTokens, "the outer meter charges only the call it wraps")
	assert.Equal(t, int64(1), outer.Calls)
}

// TestABudgetCoversTheSummary pins that a budget inside compaction counts
// the summary: with room for one call, the summary spends it and the call it
// was written for is refused.
func TestABudgetCoversTheSummary(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("compaction", `{"strategy":"summarize","model":"small","max_tokens":300,"keep_recent":3}`),
		rt.Layer("meter", `{"scope":"global","budget":{"calls":1}}`),
	}})
	primary := rt.NewModel(rt.Response{Deltas: []string{"ok"}})
	small := rt.NewModel(rt.Response{Deltas: []string{"the user asked about refunds"}, Usage: runtime.Usage{InputTokens: 700, OutputTokens: 9}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "small": small}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })

	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: transcript(12)})
	assert.Equal(t, runtime.ClassBudget, runtime.Classify(err), "the summary spent the budget: %v", err)
	assert.Equal(t, 1, small.Calls())
	assert.Zero(t, primary.Calls(), "the call over budget never reached the model")
	l := pl.Layers(plan.StageChat)[1].Middleware.(runtime.LedgerReader).Ledger("")
	assert.Equal(t, runtime.Ledger{InputTokens: 700, OutputTokens: 9, USD: l.USD, Calls: 1}, l)
}
