package fallback_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/fallback"
	"github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func TestFallsOver(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{rt.Transient("503"), true},
		{&runtime.CallError{Kind: runtime.KindRateLimited}, true},
		{&runtime.BreakerOpenError{Key: "m"}, true},
		{errors.New("unclassified"), true},
		{rt.Permanent("400"), false},
		// The provider's own refusal (a revoked key, no credit, a model it
		// does not know): another provider may serve the call.
		{&runtime.CallError{Kind: runtime.KindPermanent, Status: 401, Err: runtime.ProviderRefused(errors.New("openai: 401"))}, true},
		{runtime.ProviderRefused(&runtime.BlockedError{Layer: "g"}), false},
		{&runtime.BlockedError{Layer: "g"}, false},
		{context.Canceled, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, fallback.FallsOver(tt.err), "%v", tt.err)
	}
}

func TestEveryModelFailsReturnsTheLastError(t *testing.T) {
	a := rt.NewModel(rt.Response{Err: rt.Transient("a down")})
	b := rt.NewModel(rt.Response{Err: rt.Transient("b down")})
	c := rt.NewModel(rt.Response{Deltas: []string{"never"}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("fallback", `{"models":["primary","backup"]}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": a, "backup": b, "other": c}})
	require.NoError(t, err)
	_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "other"}, 0)
	require.ErrorContains(t, err, "b down")
	assert.Empty(t, resp.Model)
	assert.Equal(t, 1, a.Calls())
	assert.Equal(t, 1, b.Calls())
	assert.Zero(t, c.Calls(), "the list replaces the requested model")
}

// TestARefusalAfterAnOutageReturnsTheOutage: a model that fails with a
// transient error, then one whose provider refuses the call (a request it
// cannot honour, a key it rejects), return the first failure: the call
// the client asked for is sound and may be tried again; the later model's
// refusal would tell it, wrongly, that its request is at fault.
func TestARefusalAfterAnOutageReturnsTheOutage(t *testing.T) {
	refused := &runtime.CallError{Kind: runtime.KindPermanent, Status: 400,
		Err: runtime.ProviderRefused(errors.New("backup cannot honour frequency_penalty"))}
	for _, models := range [][]string{{"primary", "backup"}, {"backup", "primary"}} {
		a := rt.NewModel(rt.Response{Err: rt.Transient("primary down")})
		b := rt.NewModel(rt.Response{Err: refused})
		pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("fallback", `{"models":["`+models[0]+`","`+models[1]+`"]}`)}}),
			runtime.Deps{Models: map[string]runtime.ModelClient{"primary": a, "backup": b}})
		require.NoError(t, err)
		_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
		require.ErrorContains(t, err, "primary down", "%v", models)
		assert.True(t, runtime.IsTransient(err), "%v", models)
		assert.Equal(t, 1, a.Calls())
		assert.Equal(t, 1, b.Calls())
	}

	// Every model refusing: the last refusal.
	a := rt.NewModel(rt.Response{Err: refused})
	b := rt.NewModel(rt.Response{Err: &runtime.CallError{Kind: runtime.KindPermanent, Status: 401, Err: runtime.ProviderRefused(errors.New("backup key rejected"))}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("fallback", `{"models":["primary","backup"]}`)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": a, "backup": b}})
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.ErrorContains(t, err, "backup key rejected")
}

// TestAFailedModelsUsageIsDiscarded: a model that failed before its first
// delta after its provider billed the request (an Anthropic stream that
// reported its input, then an overloaded_error) is not the model that
// served the call: its usage was added to the response's, which reports
// the model that served it. It is now the call's discarded usage, charged
// by a meter outside at its own model's rates, and the response reports
// the served model's usage alone.
func TestAFailedModelsUsageIsDiscarded(t *testing.T) {
	billed := runtime.Usage{InputTokens: 100_000}
	served := runtime.Usage{InputTokens: 100, OutputTokens: 50}
	a := rt.NewModel(rt.Response{Err: &runtime.CallError{Kind: runtime.KindTransient, Message: "overloaded", Usage: billed}})
	b := rt.NewModel(rt.Response{Deltas: []string{"fine"}, Usage: served})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"scope":"global"}`), rt.Layer("fallback", `{"models":["primary","backup"]}`)}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": a, "backup": b}})
	text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	assert.Equal(t, "fine", text)
	assert.Equal(t, "backup", resp.Model)
	assert.Equal(t, served, resp.Usage, "the served model's usage alone")
	assert.Equal(t, []runtime.Charge{{Model: "primary", Usage: billed}, {Model: "backup", Usage: served}}, resp.Charges)

	l := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter).Ledger("any run")
	assert.Equal(t, int64(100_100), l.InputTokens, "the meter charges both model calls")
	assert.Equal(t, int64(50), l.OutputTokens)
	assert.InDelta(t, meter.Cost(p.Models["primary"], billed)+meter.Cost(p.Models["backup"], served), l.USD, 1e-12)
	assert.InDelta(t, 0.3+0.000125, l.USD, 1e-12, "each at its own model's rates")
}

// TestAttemptsCountEveryModelCall: a retry inside a fallback (the layout
// docs/serve.md gives) runs each model's attempts afresh; the call's
// attempt count is every model call made, not the last model's attempts
// alone, and the same with the retry outside, or nested in another retry.
func TestAttemptsCountEveryModelCall(t *testing.T) {
	retry := func(n string) plan.Layer {
		return rt.Layer("retry", `{"max_attempts":`+n+`,"initial_delay":"1ms","max_delay":"1ms"}`)
	}
	fb := rt.Layer("fallback", `{"models":["primary","backup"]}`)
	tests := []struct {
		name     string
		chain    []plan.Layer
		backupOK bool
		calls    int
	}{
		{"retry inside, backup serves", []plan.Layer{fb, retry("3")}, true, 4},
		{"retry inside, both fail", []plan.Layer{fb, retry("3")}, false, 6},
		{"retry outside, both fail", []plan.Layer{retry("3"), fb}, false, 6},
		{"retries nested, both fail", []plan.Layer{retry("2"), fb, retry("3")}, false, 12},
		{"fallback alone, backup serves", []plan.Layer{fb}, true, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := rt.NewModel(rt.Response{Err: rt.Transient("primary down")})
			b := rt.NewModel(rt.Response{Err: rt.Transient("backup down")})
			if tt.backupOK {
				b = rt.NewModel(rt.Response{Deltas: []string{"fine"}})
			}
			pl := rt.Build(t, rt.Plan(plan.Chains{Chat: tt.chain}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": a, "backup": b}})
			_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
			if tt.backupOK {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
			require.Equal(t, tt.calls, a.Calls()+b.Calls())
			assert.Equal(t, tt.calls, resp.Attempts, "every model call is an attempt")
		})
	}
}
