package meter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/memoize"
	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestCachedInputTokensArePricedAtTheCachedRate(t *testing.T) {
	cachedRate := 0.3
	rates := plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, USDPerMTokCached: &cachedRate}
	u := runtime.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CachedInputTokens: 600_000, ReasoningTokens: 50_000}
	// 400k fresh input at 3, 600k cached at 0.3, 100k output at 15.
	assert.InDelta(t, 1.2+0.18+1.5, meter.Cost(rates, u), 1e-9)
	free := 0.0
	assert.InDelta(t, 1.2+1.5, meter.Cost(plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, USDPerMTokCached: &free}, u), 1e-9,
		"a declared rate of 0 makes cached tokens free")
	assert.InDelta(t, 3+1.5, meter.Cost(plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15}, u), 1e-9,
		"without usd_per_mtok_cached, cached tokens are input")
	over := runtime.Usage{InputTokens: 10, CachedInputTokens: 1_000_000}
	assert.InDelta(t, 10*0.3/1e6, meter.Cost(rates, over), 1e-12, "cached tokens never exceed the input tokens")

	// Through the chain: the meter charges the stream's reported usage.
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"scope":"global"}`)}})
	p.Models["primary"] = rates
	model := rt.NewModel(rt.Response{Stream: []runtime.Delta{{Text: "x"}, {FinishReason: runtime.FinishStop, Usage: u}}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	resp, err := pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	require.NoError(t, err)
	assert.Equal(t, u, resp.Usage)
	m := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	assert.InDelta(t, 2.88, m.Ledger("").USD, 1e-9)
	assert.Equal(t, int64(1_100_000), m.Ledger("").Tokens())
}

func TestCacheWritesArePricedAtTheCacheWriteRate(t *testing.T) {
	read, write := 0.3, 3.75
	rates := plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, USDPerMTokCached: &read, USDPerMTokCacheWrite: &write}
	u := runtime.Usage{InputTokens: 1_000_000, OutputTokens: 100_000, CachedInputTokens: 200_000, CacheWriteInputTokens: 500_000}
	// 300k fresh input at 3, 200k read at 0.3, 500k written at 3.75, 100k output at 15.
	assert.InDelta(t, 0.9+0.06+1.875+1.5, meter.Cost(rates, u), 1e-9)
	assert.InDelta(t, 2.4+0.06+1.5, meter.Cost(plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, USDPerMTokCached: &read}, u), 1e-9,
		"without usd_per_mtok_cache_write, written tokens are input")
	over := runtime.Usage{InputTokens: 10, CachedInputTokens: 4, CacheWriteInputTokens: 1_000_000}
	assert.InDelta(t, (4*0.3+6*3.75)/1e6, meter.Cost(rates, over), 1e-12, "reads and writes never exceed the input tokens")
}

// A request that asks for cache entries may write its whole prompt to the
// cache, which costs more than input: the estimate prices it so, a prompt
// with a one-hour breakpoint at the one-hour price.
func TestEstimateOfARequestWithCacheBreakpoints(t *testing.T) {
	write, hour := 3.75, 6.0
	rates := plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, USDPerMTokCacheWrite: &write, USDPerMTokCacheWrite1h: &hour}
	text := strings.Repeat("a prompt worth caching ", 2000)
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: text}}}}}
	plain := meter.Estimate(&req)
	assert.Zero(t, plain.CacheWriteInputTokens, "no breakpoint: nothing is written")
	in := plain.InputTokens

	req.Messages[0].Parts[0].CacheControl = &runtime.CacheControl{Type: "ephemeral"}
	est := meter.Estimate(&req)
	assert.Equal(t, runtime.Usage{InputTokens: in, CacheWriteInputTokens: in}, est)
	assert.InDelta(t, float64(in)*3.75/1e6, meter.Cost(rates, est), 1e-12)

	req.CacheControl = &runtime.CacheControl{Type: "ephemeral", TTL: "1h"}
	est = meter.Estimate(&req)
	assert.Equal(t, runtime.Usage{InputTokens: in, CacheWriteInputTokens: in, CacheWrite1hInputTokens: in}, est)
	assert.InDelta(t, float64(in)*6/1e6, meter.Cost(rates, est), 1e-12)

	// Through the chain: a budget the input price fits, the one-hour write
	// price does not, refuses the call before it runs.
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", fmt.Sprintf(`{"budget":{"usd":%g},"on_cross":"refuse"}`, float64(in)*4/1e6))}})
	p.Models["primary"] = rates
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	_, err := pl.Complete(context.Background(), req)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "usd", be.Resource)
	assert.Equal(t, 0, model.Calls())
}

func TestOneHourCacheWritesArePricedAtTheirRate(t *testing.T) {
	write, hour := 3.75, 6.0
	rates := plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, USDPerMTokCacheWrite: &write, USDPerMTokCacheWrite1h: &hour}
	u := runtime.Usage{InputTokens: 1_000_000, CacheWriteInputTokens: 600_000, CacheWrite1hInputTokens: 200_000}
	// 400k input at 3, 400k five-minute writes at 3.75, 200k one-hour at 6.
	assert.InDelta(t, 1.2+1.5+1.2, meter.Cost(rates, u), 1e-9)
	assert.InDelta(t, 1.2+2.25, meter.Cost(plan.Model{USDPerMTokIn: 3, USDPerMTokCacheWrite: &write}, u), 1e-9,
		"without usd_per_mtok_cache_write_1h, one-hour writes are priced as the others")
	assert.InDelta(t, 2.4+1.2, meter.Cost(plan.Model{USDPerMTokIn: 3, USDPerMTokCacheWrite1h: &hour}, u), 1e-9,
		"without usd_per_mtok_cache_write, five-minute writes are input")
	over := runtime.Usage{InputTokens: 10, CacheWriteInputTokens: 4, CacheWrite1hInputTokens: 1_000_000}
	assert.InDelta(t, (6*3+4*6)/1e6, meter.Cost(rates, over), 1e-12, "one-hour writes never exceed the writes")
}

// TestAStreamWithoutUsageIsChargedItsCacheWrites: a stream that ends
// without a usage report is charged an estimate of its input; a request
// that marks a breakpoint may have written all of it to the cache, at the
// write price (the one-hour one for a one-hour breakpoint), as the
// estimate before the call prices it.
func TestAStreamWithoutUsageIsChargedItsCacheWrites(t *testing.T) {
	write, hour := 3.75, 6.0
	rates := plan.Model{USDPerMTokIn: 3, USDPerMTokOut: 15, USDPerMTokCacheWrite: &write, USDPerMTokCacheWrite1h: &hour}
	text := strings.Repeat("a prompt worth caching ", 2000)
	for _, ttl := range []string{"", "5m", "1h"} {
		t.Run("ttl "+ttl, func(t *testing.T) {
			req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user",
				Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: text, CacheControl: &runtime.CacheControl{Type: "ephemeral", TTL: ttl}}}}}}
			in := meter.Estimate(&req).InputTokens
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", "")}})
			p.Models["primary"] = rates
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"abcd"}})}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			_, resp, err := rt.Collect(ctx, pl, req, 0)
			require.NoError(t, err)
			out := resp.Usage.OutputTokens
			assert.Positive(t, out, "the text that arrived is estimated as output")
			want := runtime.Usage{InputTokens: in, OutputTokens: out, CacheWriteInputTokens: in}
			price := write
			if ttl == "1h" {
				want.CacheWrite1hInputTokens = in
				price = hour
			}
			assert.Equal(t, want, resp.Usage)
			m := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
			assert.InDelta(t, (float64(in)*price+float64(out)*15)/1e6, m.Ledger("r").USD, 1e-12)
		})
	}
}

// A call a cache inside the meter serves after model calls were made for
// it (a hedge's racer that lost to the cached answer, a retry's attempt
// that timed out before the hit) was left uncharged whole: the provider
// bills those model calls all the same. Now only the hit is free.
func TestACacheHitInsideTheMeterChargesTheModelCallsBeforeIt(t *testing.T) {
	primary := rt.NewModel(rt.Response{Deltas: []string{"x"}, Delay: time.Hour})
	backup := rt.NewModel(rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 20, OutputTokens: 2}})
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", `{"scope":"global"}`),
		// The backup's racer starts once the primary's has had 200 ms to
		// send its request: its cache hit comes after it on a loaded machine
		// too (the backup's model call waits for it, afterCalls).
		rt.Layer("hedge", `{"models":["primary","backup"],"delay":"200ms"}`),
		rt.Layer("memoize", `{"scope":"global"}`),
	}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": afterCalls(backup, primary)}})
	m := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "Where is order A1234?"}}}
	lost := runtime.EstimateInput(&req)

	// The backup answers and its answer is cached; the primary, cancelled
	// after its request went out, is charged its input.
	resp, err := pl.Complete(context.Background(), req)
	require.NoError(t, err)
	require.False(t, resp.Cached)
	first := m.Ledger("")
	assert.InDelta(t, m.Cost("primary", lost)+m.Cost("backup", runtime.Usage{InputTokens: 20, OutputTokens: 2}), first.USD, 1e-12)

	// The backup's racer is served from the cache; the primary's request
	// went out again and lost the race.
	resp, err = pl.Complete(context.Background(), req)
	require.NoError(t, err)
	require.True(t, resp.Cached)
	require.Equal(t, 1, backup.Calls())
	require.Equal(t, 2, primary.Calls())
	got := m.Ledger("")
	assert.InDelta(t, first.USD+m.Cost("primary", lost), got.USD, 1e-12, "the losing racer is billed")
	assert.Equal(t, first.Tokens()+lost.InputTokens, got.Tokens())
	assert.Equal(t, first.Calls+1, got.Calls)
}

// afterCalls is model answering only once first has been called as many
// times as model has been called: a hedge's backup that answers after the
// primary's request went out, however late the loaded machine starts the
// primary's racer.
func afterCalls(model, first *rt.Model) runtime.ModelClient {
	return runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		for first.Calls() <= model.Calls() {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Millisecond):
			}
		}
		return model.Stream(ctx, req, yield)
	})
}
