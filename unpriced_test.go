package agentc_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// countingModel is a host's model client that answers every call with
// usage the size of a large request, counting the calls it gets.
func countingModel(calls *atomic.Int64) runtime.ModelClient {
	return runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		calls.Add(1)
		yield(runtime.Delta{Text: "ok", Usage: runtime.Usage{InputTokens: 100_000, OutputTokens: 10_000}})
		return nil
	})
}

// loadMetered loads a policy declaring the priced model primary, whose
// chat chain is chain, with host clients for primary and for local, a
// model the policy does not declare.
func loadMetered(t *testing.T, chain string, primary, local *atomic.Int64) (*runtime.Pipeline, runtime.LedgerReader) {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte(`package p
models: primary: {usd_per_mtok_in: 3, usd_per_mtok_out: 15}
chains: chat: `+chain+"\n"), 0o644))
	pipe, err := agentc.Load(context.Background(), dir, runtime.Deps{Models: map[string]runtime.ModelClient{
		"primary": countingModel(primary),
		"local":   countingModel(local),
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pipe.Close() })
	for _, l := range pipe.Layers(plan.StageChat) {
		if r, ok := l.Middleware.(runtime.LedgerReader); ok {
			return pipe, r
		}
	}
	t.Fatal("no meter in the chat chain")
	return nil, nil
}

// A meter with a usd budget has no price for a model the policy does not
// declare: a call that can reach one is refused, naming it, before the
// model is called and without a charge, rather than costing nothing and
// never meeting the ceiling.
func TestMeterRefusesUnpricedHostModel(t *testing.T) {
	var primary, local atomic.Int64
	pipe, ledger := loadMetered(t, `[{use: "meter", scope: "global", budget: usd: 1}]`, &primary, &local)
	ctx := context.Background()
	for range 3 {
		_, err := pipe.Complete(ctx, runtime.ChatRequest{Model: "local", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `model "local"`)
		assert.Contains(t, err.Error(), "usd")
		assert.Equal(t, string(runtime.KindPermanent), runtime.KindOf(err), "%v", err)
	}
	assert.Zero(t, local.Load(), "the unpriced model is never called")
	assert.Equal(t, runtime.Ledger{}, ledger.Ledger(""), "nothing is charged")

	// The declared model is priced and counted: the second call is refused
	// once the first has spent the budget (100k in at $3, 10k out at $15:
	// $0.45 a call; the third crosses $1).
	for range 3 {
		_, err := pipe.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
		require.NoError(t, err)
	}
	_, err := pipe.Complete(ctx, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	assert.Equal(t, runtime.ClassBudget, runtime.Classify(err), "%v", err)
	assert.EqualValues(t, 3, primary.Load())
}

// A budget that needs no price (tokens, calls) counts a call to a model
// the policy does not declare as it counts any other.
func TestMeterTokenBudgetCountsHostModel(t *testing.T) {
	var primary, local atomic.Int64
	pipe, ledger := loadMetered(t, `[{use: "meter", scope: "global", budget: {tokens: 200000, calls: 10}}]`, &primary, &local)
	ctx := context.Background()
	for range 2 {
		_, err := pipe.Complete(ctx, runtime.ChatRequest{Model: "local", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
		require.NoError(t, err)
	}
	_, err := pipe.Complete(ctx, runtime.ChatRequest{Model: "local", Messages: []runtime.Message{{Role: "user", Content: "hi"}}})
	assert.Equal(t, runtime.ClassBudget, runtime.Classify(err), "the tokens ceiling holds: %v", err)
	assert.EqualValues(t, 2, local.Load())
	assert.EqualValues(t, 220_000, ledger.Ledger("").Tokens())
}

// A meter whose when leaves out the unpriced model does not act on its
// calls, and a fallback inside the meter that replaces the model a call
// names with priced ones never calls the unpriced one: neither is
// refused.
func TestMeterLetsUnpricedModelThroughWhereItIsNotReached(t *testing.T) {
	ctx := context.Background()
	req := runtime.ChatRequest{Model: "local", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}

	var primary, local atomic.Int64
	pipe, _ := loadMetered(t, `[{use: "meter", scope: "global", when: "request.model == 'primary'", budget: usd: 1}]`, &primary, &local)
	_, err := pipe.Complete(ctx, req)
	require.NoError(t, err)
	assert.EqualValues(t, 1, local.Load())

	primary.Store(0)
	local.Store(0)
	pipe, ledger := loadMetered(t, `[{use: "meter", scope: "global", budget: usd: 1}, {use: "fallback", models: ["primary"]}]`, &primary, &local)
	resp, err := pipe.Complete(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "primary", resp.Model)
	assert.Zero(t, local.Load())
	assert.InDelta(t, 0.45, ledger.Ledger("").USD, 1e-9)
}

// The host learns at build, not at the first refused call, that a model
// it gives a client for has no price under a meter with a usd budget that
// acts on every call of it; a meter whose when may leave its calls out,
// and one with a tokens budget only, say nothing.
func TestBuildWarnsOfUnpricedHostModel(t *testing.T) {
	for chain, want := range map[string]bool{
		`[{use: "meter", budget: usd: 1}]`:                                         true,
		`[{use: "meter", budget: usd: 1, when: "request.model == 'primary'"}]`:     false,
		`[{use: "meter", budget: tokens: 1000}]`:                                   false,
		`[{use: "meter", budget: usd: 1}, {use: "fallback", models: ["primary"]}]`: false,
	} {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte(`package p
models: primary: {usd_per_mtok_in: 3, usd_per_mtok_out: 15}
chains: chat: `+chain+"\n"), 0o644))
		var logs bytes.Buffer
		var calls atomic.Int64
		pipe, err := agentc.Load(context.Background(), dir, runtime.Deps{
			Models: map[string]runtime.ModelClient{"primary": countingModel(&calls), "local": countingModel(&calls)},
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		require.NoError(t, err, chain)
		require.NoError(t, pipe.Close())
		if want {
			assert.Contains(t, logs.String(), "level=WARN", chain)
			assert.Contains(t, logs.String(), "model=local", chain)
			assert.Contains(t, logs.String(), "refuses each of its calls", chain)
		} else {
			assert.NotContains(t, logs.String(), "model=local", chain)
		}
	}
}

// A name no client answers to (a typo) reaches no model, so the meter has
// nothing to price: it is the terminal's to report, as it does under a
// meter without a usd ceiling, not a model to declare with its prices.
func TestMeterLeavesAnUnknownModelToTheTerminal(t *testing.T) {
	req := runtime.ChatRequest{Model: "primay", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	for _, chain := range []string{
		`[{use: "meter", scope: "global", budget: usd: 1}]`,
		`[{use: "meter", scope: "global", budget: tokens: 1000}]`,
	} {
		var primary, local atomic.Int64
		pipe, ledger := loadMetered(t, chain, &primary, &local)
		_, err := pipe.Complete(context.Background(), req)
		require.Error(t, err, chain)
		assert.Contains(t, err.Error(), `model "primay" is not registered; did you mean "primary"?`, chain)
		assert.NotContains(t, err.Error(), "no price", chain)
		assert.Zero(t, primary.Load()+local.Load(), chain)
		assert.Zero(t, ledger.Ledger("").USD, chain)
	}
}
