package meter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/fallback"
	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// longContext are Anthropic's Sonnet rates with the context-1m tier: above
// 200,000 input tokens twice the input price and 1.5 times the output
// price, the cache prices scaled likewise.
func longContext() plan.Model {
	f := func(v float64) *float64 { return &v }
	return plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, USDPerMTokCached: f(0.3), USDPerMTokCacheWrite: f(3.75), USDPerMTokCacheWrite1h: f(6),
		LongContext: &plan.LongContext{AboveInputTokens: 200_000, USDPerMTokIn: 6, USDPerMTokOut: 22.5,
			USDPerMTokCached: f(0.6), USDPerMTokCacheWrite: f(7.5), USDPerMTokCacheWrite1h: f(12)}}
}

// A call whose input is above the tier's threshold is priced whole at the
// tier's rates, its cache reads and writes counted in its input as the
// provider counts them; one at the threshold at the model's own.
func TestLongContextTierPricesTheWholeCallAboveItsThreshold(t *testing.T) {
	rates := longContext()
	at := runtime.Usage{InputTokens: 200_000, OutputTokens: 10_000}
	assert.InDelta(t, (200_000*3+10_000*15)/1e6, meter.Cost(rates, at), 1e-12, "at the threshold: the model's rates")
	above := runtime.Usage{InputTokens: 200_001, OutputTokens: 10_000}
	assert.InDelta(t, (200_001*6+10_000*22.5)/1e6, meter.Cost(rates, above), 1e-12, "above it: the tier's, on every token")

	// 1,000 fresh input, 150,000 read from the cache, 60,000 written (20,000
	// of them to one-hour entries): 211,000 input, above the threshold.
	cached := runtime.Usage{InputTokens: 211_000, OutputTokens: 2_000, CachedInputTokens: 150_000, CacheWriteInputTokens: 60_000, CacheWrite1hInputTokens: 20_000}
	assert.InDelta(t, (1_000*6+150_000*0.6+40_000*7.5+20_000*12+2_000*22.5)/1e6, meter.Cost(rates, cached), 1e-12)
	cached.InputTokens, cached.CachedInputTokens = 200_000, 139_000
	assert.InDelta(t, (1_000*3+139_000*0.3+40_000*3.75+20_000*6+2_000*15)/1e6, meter.Cost(rates, cached), 1e-12)

	// The tier's cache prices default as the model's do: as its input.
	rates.LongContext = &plan.LongContext{AboveInputTokens: 200_000, USDPerMTokIn: 6, USDPerMTokOut: 22.5}
	assert.InDelta(t, (211_000*6+2_000*22.5)/1e6, meter.Cost(rates, runtime.Usage{InputTokens: 211_000, OutputTokens: 2_000, CachedInputTokens: 150_000}), 1e-12)
	assert.InDelta(t, (300_000*3)/1e6, meter.Cost(plan.Model{USDPerMTokIn: 3}, runtime.Usage{InputTokens: 300_000}), 1e-12, "without a tier: one price")
}

// Through the chain: the meter settles a call above the threshold at the
// tier's rates, and the estimate before a call prices an input above it at
// the tier's, so on_cross "refuse" refuses a call the model's own rates
// would fit in the budget.
func TestLongContextTierInTheLedgerAndTheEstimate(t *testing.T) {
	rates := longContext()
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"scope":"global"}`)}})
	p.Models["primary"] = rates
	u := runtime.Usage{InputTokens: 250_000, OutputTokens: 1_000}
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{{Text: "x"}, {FinishReason: runtime.FinishStop, Usage: u}}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	_, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	require.NoError(t, err)
	m := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	assert.InDelta(t, (250_000*6+1_000*22.5)/1e6, m.Ledger("").USD, 1e-12)

	long := runtime.ChatRequest{Model: "primary", MaxTokens: 1_000, Messages: []runtime.Message{{Role: "user", Content: strings.Repeat("a long document ", 60_000)}}}
	est := meter.Estimate(&long)
	require.Greater(t, est.InputTokens, int64(200_000), "the request is estimated above the threshold")
	atTier := (float64(est.InputTokens)*6 + 1_000*22.5) / 1e6
	assert.InDelta(t, atTier, meter.Cost(rates, est), 1e-12)
	// A budget the model's own rates fit, the tier's do not.
	budget := (float64(est.InputTokens)*3+1_000*15)/1e6 + 0.01
	require.Less(t, budget, atTier)
	p = rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", fmt.Sprintf(`{"budget":{"usd":%g},"on_cross":"refuse"}`, budget))}})
	p.Models["primary"] = rates
	model = rt.NewModel(rt.Response{Deltas: []string{"x"}})
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	_, err = pl.Complete(context.Background(), long)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "usd", be.Resource)
	assert.InDelta(t, atTier, be.Estimate, 1e-9)
	assert.Equal(t, 0, model.Calls())

	// Without the tier the same budget admits it.
	rates.LongContext = nil
	p.Models["primary"] = rates
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	_, err = pl.Complete(context.Background(), long)
	require.NoError(t, err)
	assert.Equal(t, 1, model.Calls())
}

// A fallback below the meter may serve a call with a model whose
// long-context tier is dearer than the model the request names: the
// estimate is priced at the dearest of the models the call can reach, so
// on_cross "refuse" refuses, before any model runs, a long call that the
// requested model's rates would fit in the budget and the fallback's tier
// does not (the requested model refuses the call unbilled, an OpenAI
// model asked for an Anthropic beta, and the fallback serves it).
func TestLongContextEstimateAtTheDearestModelAFallbackReaches(t *testing.T) {
	long := runtime.ChatRequest{Model: "primary", MaxTokens: 1_000, Betas: []string{"context-1m-2025-08-07"},
		Messages: []runtime.Message{{Role: "user", Content: strings.Repeat("a long document ", 60_000)}}}
	est := meter.Estimate(&long)
	require.Greater(t, est.InputTokens, int64(200_000))
	cheap := plan.Model{USDPerMTokIn: 0.4, USDPerMTokOut: 1.6, Provider: "openai"}
	atTier := meter.Cost(longContext(), est)
	budget := meter.Cost(cheap, est) + 0.01
	require.Less(t, budget, atTier)
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", fmt.Sprintf(`{"budget":{"usd":%g},"on_cross":"refuse"}`, budget)),
		rt.Layer("fallback", `{"models":["primary","backup"]}`)}})
	p.Models["primary"], p.Models["backup"] = cheap, longContext()
	primary := rt.NewModel(rt.Response{Err: runtime.ProviderRefused(&runtime.CallError{Kind: runtime.KindPermanent, Message: "no betas"})})
	backup := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: est.InputTokens, OutputTokens: 1_000}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
	_, err := pl.Complete(context.Background(), long)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be, "admitted at the requested model's rates, billed at the fallback's tier")
	assert.InDelta(t, 2*atTier, be.Estimate, 1e-9, "at the tier's rates, for each of the fallback's two models")
	assert.Zero(t, primary.Calls()+backup.Calls())
}

// A ledger in a store shared by replicas (Redis, PostgreSQL) receives a
// long call's charge at the tier's prices, and the estimate a replica
// reserves for a long request is at the tier's prices too: another
// replica reads both.
func TestLongContextTierInASharedLedger(t *testing.T) {
	for _, name := range sharedStores {
		t.Run(name, func(t *testing.T) {
			shared := sharedStore[name](t)
			long := runtime.ChatRequest{Model: "primary", MaxTokens: 1_000,
				Messages: []runtime.Message{{Role: "user", Content: strings.Repeat("a long document ", 60_000)}}}
			est := meter.Estimate(&long)
			u := runtime.Usage{InputTokens: 250_000, OutputTokens: 1_000, CachedInputTokens: 100_000, CacheWriteInputTokens: 50_000}
			charged := (100_000*6 + 100_000*0.6 + 50_000*7.5 + 1_000*22.5) / 1e6 // 1.0575
			estimated := meter.Cost(longContext(), est)
			// The charge and the estimate fit at the model's own rates
			// (half the tier's input price), not at the tier's.
			budget := charged + estimated - 0.1
			require.Less(t, charged/2+estimated/2+0.2, budget)
			cfg := fmt.Sprintf(`{"budget":{"usd":%g},"store":"shared","scope":"global","on_cross":"refuse"}`, budget)
			replica := func(model runtime.ModelClient) *runtime.Pipeline {
				p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", cfg)}})
				p.Models["primary"] = longContext()
				p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
				pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
					Backends: map[string]runtime.StoreBackend{"shared": shared}})
				require.NoError(t, err)
				return pl
			}
			a := replica(rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: u}))
			other := rt.NewModel(rt.Response{Deltas: []string{"y"}})
			b := replica(other)
			_, err := a.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
			require.NoError(t, err)
			mb := b.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
			assert.InDelta(t, charged, mb.Ledger("").USD, 1e-9, "the store holds the tier's price")
			_, err = b.Complete(context.Background(), long)
			var be *runtime.BudgetError
			require.ErrorAs(t, err, &be)
			assert.InDelta(t, estimated, be.Estimate, 1e-9)
			assert.Zero(t, other.Calls())
		})
	}
}

// A stream cut before its usage report is charged the estimate of its
// input, and an estimate above the tier's threshold is priced at the
// tier's rates, as a report would be.
func TestLongContextStreamCutBeforeItsUsage(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"scope":"global"}`)}})
	p.Models["primary"] = longContext()
	model := rt.NewModel(rt.Response{Deltas: []string{"x", "y"}, FailAfter: 2, Err: &runtime.CallError{Kind: runtime.KindTransient, Message: "reset"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	long := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: strings.Repeat("a long document ", 60_000)}}}
	_, err := pl.Complete(context.Background(), long)
	require.Error(t, err)
	in := runtime.EstimateInput(&long).InputTokens
	require.Greater(t, in, int64(200_000))
	m := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	l := m.Ledger("")
	assert.Equal(t, in, l.InputTokens)
	assert.InDelta(t, (float64(in)*6+float64(l.OutputTokens)*22.5)/1e6, l.USD, 1e-9)
}

// A host that calls the pipeline itself (no gateway in front) and asks
// for the context-1m beta has the meter refuse the call, before any model
// runs, while a model the call can reach from the meter (its own, a
// fallback's) does not declare the tier the provider bills it at; an
// OpenAI model, which refuses the beta unbilled, need not.
func TestLongContextBetaRefusedByTheMeterForAModelWithoutTier(t *testing.T) {
	req := runtime.ChatRequest{Model: "primary", Betas: []string{"interleaved-thinking-2025-05-14", "Context-1M-2025-08-07"},
		Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	for _, tc := range []struct {
		name            string
		primary, backup plan.Model
		refused         string
	}{
		{"the requested model has no tier", plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15}, longContext(), "model primary"},
		{"the fallback's model has no tier", longContext(), plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15}, "model backup"},
		{"a tier from above 200,000 tokens", longContext(), plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15,
			LongContext: &plan.LongContext{AboveInputTokens: 272_000, USDPerMTokIn: 6, USDPerMTokOut: 22.5}}, "only above 272000"},
		{"an OpenAI model", plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, Provider: "openai"}, longContext(), ""},
		{"both declare it", longContext(), longContext(), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"usd":100}}`), rt.Layer("fallback", `{"models":["primary","backup"]}`)}})
			p.Models["primary"], p.Models["backup"] = tc.primary, tc.backup
			model := rt.NewModel(rt.Response{Deltas: []string{"x"}})
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model, "backup": model}})
			_, err := pl.Complete(context.Background(), req)
			if tc.refused == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), "Context-1M-2025-08-07")
			assert.Contains(t, err.Error(), tc.refused)
			assert.Zero(t, model.Calls())
		})
	}
}
