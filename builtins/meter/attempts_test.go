package meter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/outputcoerce"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/providers/anthropic"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// ledgerStores are the ledgers a budget can be kept in: the meter's own
// process memory (no store) and the stores replicas share.
var ledgerStores = []string{"process", "redis", "postgres"}

// buildIn builds chain, a meter first, with the meter's ledgers in store
// (ledgerStores; "process": no store) and models as the clients.
func buildIn(t *testing.T, store string, chain []plan.Layer, models map[string]runtime.ModelClient) (*runtime.Pipeline, *meter.Meter) {
	t.Helper()
	p := rt.Plan(plan.Chains{Chat: chain})
	deps := runtime.Deps{Models: models}
	if store != "process" {
		p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
		deps.Backends = map[string]runtime.StoreBackend{"shared": sharedStore[store](t)}
	}
	pl := rt.Build(t, p, deps)
	return pl, pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
}

// storeConfig is the meter's store setting for a ledger in store.
func storeConfig(store string) string {
	if store == "process" {
		return ""
	}
	return `,"store":"shared"`
}

// untilRefused has callers call pl with req at once, each again until a
// budget refuses it or ok (which checks an admitted call's error) fails,
// and returns how many calls were admitted.
func untilRefused(pl *runtime.Pipeline, req runtime.ChatRequest, callers int, ok func(error) bool) int64 {
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range callers {
		wg.Go(func() {
			for {
				_, _, err := rt.Collect(context.Background(), pl, req, 0)
				var be *runtime.BudgetError
				if errors.As(err, &be) || !ok(err) {
					return
				}
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	return admitted.Load()
}

// A retry, a fallback or a hedge inside a meter makes several model calls
// for one call, and each is charged (an attempt that timed out after its
// request went out, a hedge's losing racer: the estimate of its input).
// The meter reserved one model call's estimate for the whole call, so with
// on_cross "refuse" concurrent calls each charging several estimates went
// past the ceiling by up to that many times what was reserved. The meter
// now reserves the estimate times the most model calls the layers inside
// it make for one call.
func TestOnCrossRefuseReservesEveryModelCallInside(t *testing.T) {
	msgs := []runtime.Message{{Role: "user", Content: "What is the status of order A1234? It was due on Monday."}}
	req := runtime.ChatRequest{Model: "primary", Messages: msgs}
	est := meter.Estimate(&req)
	// Every model call of the retry hangs until its attempt times out,
	// after its request went out; the hedge's primary hangs until the
	// backup wins the race. Each is charged its input's estimate.
	hangs := rt.NewModel(rt.Response{Deltas: []string{"x"}, Delay: time.Hour})
	wins := rt.NewModel(rt.Response{Deltas: []string{"x"}, Delay: 2 * time.Millisecond, Usage: runtime.Usage{InputTokens: est.InputTokens}})
	for _, tc := range []struct {
		name   string
		layer  plan.Layer
		calls  int
		backup runtime.ModelClient
	}{
		{"retry", rt.Layer("retry", `{"max_attempts":3,"attempt_timeout":"20ms","initial_delay":"1ms","max_delay":"1ms"}`), 3, hangs},
		{"hedge", rt.Layer("hedge", `{"models":["primary","backup"],"delay":"1ms"}`), 2, wins},
	} {
		for _, store := range ledgerStores {
			t.Run(tc.name+"/"+store, func(t *testing.T) {
				per := meter.Cost(rt.Plan(plan.Chains{}).Models["primary"], est)
				ceiling := 10 * per
				cfg := fmt.Sprintf(`{"budget":{"usd":%v},"scope":"global","on_cross":"refuse"%s}`, ceiling, storeConfig(store))
				pl, m := buildIn(t, store, []plan.Layer{rt.Layer("meter", cfg), tc.layer},
					map[string]runtime.ModelClient{"primary": hangs, "backup": tc.backup})
				admitted := untilRefused(pl, req, 8, func(err error) bool {
					if tc.name == "retry" {
						return assert.Error(t, err, "every attempt times out")
					}
					return assert.NoError(t, err, "the backup wins the race")
				})
				got := m.Ledger("any run")
				assert.Equal(t, admitted, got.Calls)
				assert.Positive(t, got.Calls)
				assert.LessOrEqual(t, got.USD, ceiling+1e-12, "8 concurrent callers never cross the ceiling")
				assert.Greater(t, got.USD, ceiling-float64(tc.calls)*per-1e-12, "the ceiling is used up to less than one call's reservation")
			})
		}
	}
}

// An output_coerce inside the meter with set_response_format adds its
// schema to a request that has none, after the meter estimated it: the
// provider bills the schema, which the reservation did not count, so a
// call the ceiling had no room for ran and crossed it. The meter now
// counts the schema in the estimate of a request without a format.
func TestOnCrossRefuseCountsTheFormatALayerInsideAdds(t *testing.T) {
	schema := `{"type":"object","required":["answer"],"properties":{"answer":{"type":"string","description":"` +
		strings.Repeat("the answer to the customer's question, in one short paragraph; ", 40) + `"}}}`
	req := runtime.ChatRequest{Model: "primary", MaxTokens: 10, Messages: []runtime.Message{{Role: "user", Content: "Where is order A1234?"}}}
	bare := meter.Estimate(&req)
	// The model is billed the request it receives, schema included.
	var billed atomic.Int64
	model := runtime.ModelFunc(func(ctx context.Context, r *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		in := runtime.EstimateRequest(r)
		billed.Add(in)
		yield(runtime.Delta{Text: `{"answer":"on its way"}`, Usage: runtime.Usage{InputTokens: in, OutputTokens: 10}})
		return nil
	})
	ceiling := (bare.InputTokens + bare.OutputTokens) + 50
	pl, m := buildIn(t, "process", []plan.Layer{
		rt.Layer("meter", fmt.Sprintf(`{"budget":{"tokens":%d},"scope":"global","on_cross":"refuse"}`, ceiling)),
		rt.Layer("output_coerce", `{"schema":`+schema+`,"set_response_format":true}`),
	}, map[string]runtime.ModelClient{"primary": model})
	_, _, err := rt.Collect(context.Background(), pl, req, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be, "the schema the layer inside adds leaves no room for the call")
	assert.Greater(t, be.Estimate, float64((bare.InputTokens+bare.OutputTokens)+200), "the estimate counts the schema")
	assert.Zero(t, billed.Load())
	assert.LessOrEqual(t, m.Ledger("any run").Tokens(), ceiling)

	// A request with a format of its own is sent with it, not the layer's.
	own := req
	own.ResponseFormat = &runtime.ResponseFormat{Type: runtime.FormatJSONObject}
	_, _, err = rt.Collect(context.Background(), pl, own, 0)
	require.NoError(t, err)
	assert.LessOrEqual(t, m.Ledger("any run").Tokens(), ceiling)
}

// ownOnly is a chat layer that, as a judge asking for its verdict does,
// makes the call of its own (runtime.OwnCall) through the layers inside it.
type ownOnly struct{}

func (ownOnly) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		return next(ctx, runtime.OwnCall(c, c.Request), yield)
	}
}

func init() {
	runtime.Register(runtime.Module{
		ID: "test.ownonly", Stages: []plan.Stage{plan.StageChat}, New: func() runtime.Middleware { return ownOnly{} },
	})
}

// output_coerce sets no response_format on a layer's own call (a judge's
// verdict, a summary), but a meter between them estimated such a call with
// the schema, so a judge's calls were refused for tokens they were not
// sent. The estimate of an own call counts no schema.
func TestOnCrossRefuseCountsNoFormatOnAnOwnCall(t *testing.T) {
	schema := `{"type":"object","required":["answer"],"properties":{"answer":{"type":"string","description":"` +
		strings.Repeat("the answer to the customer's question, in one short paragraph; ", 40) + `"}}}`
	req := runtime.ChatRequest{Model: "primary", MaxTokens: 10, Messages: []runtime.Message{{Role: "user", Content: "Is this answer grounded?"}}}
	bare := meter.Estimate(&req)
	model := rt.NewModel(rt.Response{Deltas: []string{"yes"}, Usage: runtime.Usage{InputTokens: bare.InputTokens, OutputTokens: 1}})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("test.ownonly", ""),
		// Refuses any call estimated above the bare request's estimate.
		rt.Layer("meter", fmt.Sprintf(`{"budget":{"tokens":%d},"scope":"global","on_cross":"refuse"}`, bare.InputTokens+bare.OutputTokens-1)),
		rt.Layer("output_coerce", `{"schema":`+schema+`,"set_response_format":true}`),
	}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	_, _, err := rt.Collect(context.Background(), pl, req, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, float64(bare.InputTokens+bare.OutputTokens), be.Estimate, "the own call is estimated as sent, without the schema")
	assert.Zero(t, model.Calls())
}

// A request without max_tokens is sent with the bound the plan declares
// for its model (models.<name>.max_tokens), which the provider client
// adds: the output it can bill is known. With on_cross "refuse" the
// estimate counted no output for it, so a call the ceiling had no room
// for ran and crossed it. The estimate now counts the model's bound, the
// largest of the models the call can reach.
func TestOnCrossRefuseCountsTheModelsOutputBound(t *testing.T) {
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "Where is order A1234?"}}}
	in := runtime.EstimateRequest(&req)
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: in, OutputTokens: 1_000}})
	for _, tc := range []struct {
		name    string
		chain   []plan.Layer
		ceiling int64
		want    float64
	}{
		{"the requested model's", nil, in + 500, float64(in + 1_000)},
		{"a fallback's", []plan.Layer{rt.Layer("fallback", `{"models":["primary","backup"]}`)}, 2*in + 2_500, float64(2 * (in + 2_000))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Chat: append([]plan.Layer{
				rt.Layer("meter", fmt.Sprintf(`{"budget":{"tokens":%d},"scope":"global","on_cross":"refuse"}`, tc.ceiling))}, tc.chain...)})
			primary, backup := p.Models["primary"], p.Models["backup"]
			primary.MaxTokens, backup.MaxTokens = 1_000, 2_000
			p.Models["primary"], p.Models["backup"] = primary, backup
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model, "backup": model}})
			_, _, err := rt.Collect(context.Background(), pl, req, 0)
			var be *runtime.BudgetError
			require.ErrorAs(t, err, &be, "the model's output bound leaves no room for the call")
			assert.Equal(t, tc.want, be.Estimate)
		})
	}
	assert.Zero(t, model.Calls())
}

// A Claude model's client sends max_tokens 4096 with a request that sets
// none and whose model declares none (anthropic.DefaultMaxTokens): the
// estimate counts the bound the client sends, whatever declares it.
func TestOnCrossRefuseCountsTheClientsOutputBound(t *testing.T) {
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "Where is order A1234?"}}}
	in := runtime.EstimateRequest(&req)
	claude, err := anthropic.New(anthropic.Config{Model: "claude-sonnet-4-5", BaseURL: "http://127.0.0.1:9"})
	require.NoError(t, err)
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", fmt.Sprintf(`{"budget":{"tokens":%d},"scope":"global","on_cross":"refuse"}`, in+1_000))}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": claude}})
	_, _, err = rt.Collect(context.Background(), pl, req, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be, "the client's bound leaves no room for the call")
	assert.Equal(t, float64(in+anthropic.DefaultMaxTokens), be.Estimate)
}
