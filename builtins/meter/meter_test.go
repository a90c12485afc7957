package meter_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/hedge"
	_ "github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func build(t *testing.T, config string, model runtime.ModelClient) (*runtime.Pipeline, *meter.Meter) {
	t.Helper()
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model, "backup": model}})
	require.NoError(t, err)
	return pl, pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
}

func TestCostUsesTheServedModelsRates(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}})
	pl, m := build(t, `{"scope":"global"}`, model)
	assert.InDelta(t, 18.0, m.Cost("primary", runtime.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}), 1e-9)
	assert.Zero(t, m.Cost("undeclared", runtime.Usage{InputTokens: 5}))
	_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "backup"}, 0)
	require.NoError(t, err)
	got := m.Ledger("any run")
	assert.InDelta(t, 2.0, got.USD, 1e-9)
	assert.Equal(t, int64(2_000_000), got.Tokens())
}

func TestUSDCeilingAndForget(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 1_000_000}})
	pl, m := build(t, `{"budget":{"usd":5},"scope":"run"}`, model)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for range 2 { // 3 USD each: the second crosses 5 and is charged in full
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
		require.NoError(t, err)
	}
	assert.InDelta(t, 6.0, m.Ledger("r").USD, 1e-9)
	_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "usd", be.Resource)
	assert.Equal(t, 5.0, be.Limit)
	assert.Contains(t, be.Message(), "usd ceiling 5 reached")

	m.Forget("r")
	assert.Equal(t, runtime.Ledger{}, m.Ledger("r"))
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
}

func TestValidate(t *testing.T) {
	_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"scope":"tenant"}`)}}), runtime.Deps{})
	assert.ErrorContains(t, err, `scope must be "run", "global" or "key"`)
	_, err = runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"lease":"0s"}`)}}), runtime.Deps{})
	assert.ErrorContains(t, err, "lease must be positive")
}

func TestCallsCeilingHoldsUnderConcurrency(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Delay: 30 * time.Millisecond, Usage: runtime.Usage{InputTokens: 10}})
	pl, m := build(t, `{"budget":{"calls":1},"scope":"run"}`, model)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	var wg sync.WaitGroup
	var ok, refused atomic.Int32
	for range 10 {
		wg.Go(func() {
			_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
			var be *runtime.BudgetError
			switch {
			case err == nil:
				ok.Add(1)
			case errors.As(err, &be):
				assert.Equal(t, "calls", be.Resource)
				refused.Add(1)
			default:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, model.Calls(), "a call in flight counts against the calls ceiling")
	assert.Equal(t, int32(1), ok.Load())
	assert.Equal(t, int32(9), refused.Load())
	assert.Equal(t, int64(1), m.Ledger("r").Calls)
}

func TestToolCallsCeilingHoldsUnderConcurrency(t *testing.T) {
	var ran atomic.Int32
	tool := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		ran.Add(1)
		time.Sleep(30 * time.Millisecond)
		return "ok", nil
	}
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":2},"scope":"global"}`)}}),
		runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { _, _ = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"}) })
	}
	wg.Wait()
	assert.Equal(t, int32(2), ran.Load())
}

func TestAnUnchargedCallReleasesItsReservation(t *testing.T) {
	model := rt.NewModel(rt.Response{Err: rt.Transient("503")}, rt.Response{Deltas: []string{"x"}})
	pl, m := build(t, `{"budget":{"calls":1},"scope":"run"}`, model)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.ErrorContains(t, err, "503")
	assert.Zero(t, m.Ledger("r").Calls, "a pre-stream failure is not charged")
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err, "the failed call no longer holds the only call of the budget")
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "calls", be.Resource)
}

func TestAPanickingCallReleasesItsReservation(t *testing.T) {
	boom := runtime.ModelFunc(func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error { panic("client bug") })
	pl, m := build(t, `{"budget":{"calls":1},"scope":"run"}`, boom)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	for range 2 {
		assert.PanicsWithValue(t, "client bug", func() { _, _, _ = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0) },
			"the model runs again: the first panic did not keep the budget reserved")
	}
	assert.Zero(t, m.Ledger("r").Calls)
}

func TestAbsurdUsageFailsClosedAndExhaustsTheLedger(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: math.MaxInt64, OutputTokens: 3}})
	pl, m := build(t, `{"budget":{"tokens":1000},"scope":"run"}`, model)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reported absurd usage (input_tokens negative or beyond 2^63-1")
	got := m.Ledger("r")
	assert.Positive(t, got.InputTokens, "the ledger never wraps negative")
	assert.GreaterOrEqual(t, got.Tokens(), int64(1000))
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be, "no further call of the ledger is admitted")
	assert.Equal(t, 1, model.Calls())
}

func TestAbsurdUsageOpenChargesTheCap(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: math.MaxInt64}})
	pl, m := build(t, `{"scope":"global","on_error":"open"}`, model)
	for range 3 {
		_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
		require.NoError(t, err)
	}
	assert.Equal(t, 3*meter.MaxCallTokens, m.Ledger("").InputTokens)
}

// A negative count is absurd usage, as a count above the cap is: it was
// dropped before the meter saw it, so a report of -5 input tokens and 50
// output tokens was charged the output alone, not even the input's
// estimate. Closed, the call fails and the ledger is charged to its
// ceiling; open, the negative count is charged as the cap.
func TestNegativeUsageIsAbsurd(t *testing.T) {
	negative := rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: -5, OutputTokens: 50}}
	pl, m := build(t, `{"budget":{"usd":1},"scope":"global"}`, rt.NewModel(negative))
	_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.ErrorContains(t, err, "reported absurd usage (input_tokens negative or beyond 2^63-1")
	assert.InDelta(t, 1.0, m.Ledger("").USD, 1e-9, "charged to the ceiling")

	pl, m = build(t, `{"scope":"global","on_error":"open"}`, rt.NewModel(negative))
	_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	got := m.Ledger("")
	assert.Equal(t, meter.MaxCallTokens, got.InputTokens)
	assert.Equal(t, int64(50), got.OutputTokens)
	assert.Equal(t, runtime.Usage{InputTokens: meter.MaxCallTokens, OutputTokens: 50}, resp.Usage, "the response reports what was charged")
}

// Closed, absurd usage charged the ledger the usage clamped to the cap
// (a billion tokens, a million dollars at $1000/Mtok) where the docs say
// "to its ceilings", and the call's usage and charges, which the gateway's
// metrics count, kept the raw figures. The ledger now ends at each ceiling,
// and the call reports what was charged.
func TestAbsurdUsageChargesTheLedgerToItsCeilings(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 100}},
		rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 2_000_000_000}})
	pl, m := build(t, `{"budget":{"usd":100,"tokens":1000},"scope":"run"}`, model)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	_, resp, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.ErrorContains(t, err, "reported absurd usage (input_tokens 2000000000")
	got := m.Ledger("r")
	assert.InDelta(t, 100.0, got.USD, 1e-9)
	assert.Equal(t, int64(1000), got.Tokens())
	assert.Equal(t, runtime.Usage{InputTokens: 900}, resp.Usage)
	require.Len(t, resp.Charges, 1)
	assert.True(t, resp.Charges[0].Metered)
	assert.InDelta(t, 100.0-0.0003, resp.Charges[0].USD, 1e-9)
	_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
}

func TestMemoryBudgeterSaturates(t *testing.T) {
	b := runtime.NewMemoryBudgeter()
	ctx := context.Background()
	for range 2 {
		require.NoError(t, b.Settle(ctx, "k", "", runtime.Ledger{InputTokens: math.MaxInt64 - 1, Calls: math.MaxInt64}, 0))
	}
	l, err := b.LedgerOf(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(math.MaxInt64), l.InputTokens)
	assert.Equal(t, int64(math.MaxInt64), l.Calls)
}

func TestOnCrossRefuseTokens(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 40, OutputTokens: 20}})
	pl, m := build(t, `{"budget":{"tokens":100},"on_cross":"refuse"}`, model)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	req := runtime.ChatRequest{Model: "primary", MaxTokens: 30, Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	est := meter.Estimate(&req)
	assert.Equal(t, int64(30), est.OutputTokens)
	assert.Equal(t, runtime.EstimateMessages(req.Messages), est.InputTokens)
	// 0 charged + estimate fits: it runs and is charged 60.
	_, _, err := rt.Collect(ctx, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(60), m.Ledger("r").Tokens())
	// 60 + 30 + input estimate > 100: refused before it runs.
	req.MaxTokens = 40 - int(est.InputTokens) + 1
	_, _, err = rt.Collect(ctx, pl, req, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "tokens", be.Resource)
	assert.Equal(t, 60.0, be.Spent)
	assert.Equal(t, 41.0, be.Estimate)
	assert.Contains(t, be.Message(), "tokens ceiling 100 would be crossed (spent 60, the call is estimated at 41)")
	assert.Equal(t, 1, model.Calls(), "the refused call did not reach the model")
	// A call whose estimate fits still runs.
	req.MaxTokens = 40 - int(est.InputTokens)
	_, _, err = rt.Collect(ctx, pl, req, 0)
	require.NoError(t, err)
	assert.Equal(t, 2, model.Calls())
}

// A request whose weight is in its tool definitions and response format is
// estimated with them: a budget its messages alone would fit refuses it.
func TestOnCrossRefuseCountsToolsAndResponseFormat(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 5000, OutputTokens: 1}})
	pl, _ := build(t, `{"budget":{"tokens":1000},"on_cross":"refuse"}`, model)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	schema := json.RawMessage(`{"type":"object","description":"` + strings.Repeat("a long description ", 1000) + `"}`)
	req := runtime.ChatRequest{Model: "primary", MaxTokens: 10, Messages: []runtime.Message{{Role: "user", Content: "hi"}},
		Tools: []runtime.ToolDef{{Name: "lookup", Description: "looks things up", Parameters: schema}}}
	est := meter.Estimate(&req)
	assert.Equal(t, runtime.EstimateRequest(&req), est.InputTokens)
	assert.Greater(t, est.InputTokens, int64(1000))
	_, _, err := rt.Collect(ctx, pl, req, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be, "the tools' weight crosses the ceiling")
	assert.Equal(t, "tokens", be.Resource)
	assert.Equal(t, 0, model.Calls(), "the refused call did not reach the model")

	req.Tools = nil
	req.ResponseFormat = &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: "answer", Schema: schema}
	_, _, err = rt.Collect(ctx, pl, req, 0)
	require.ErrorAs(t, err, &be, "the response format's weight crosses the ceiling")
	assert.Equal(t, 0, model.Calls())
}

func TestOnCrossRefuseUSDAndAllowDefault(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{OutputTokens: 100_000}})
	// primary: 15 USD per million output tokens; max_tokens 1M estimates 15 USD.
	req := runtime.ChatRequest{Model: "primary", MaxTokens: 1_000_000}
	pl, _ := build(t, `{"budget":{"usd":10},"on_cross":"refuse"}`, model)
	_, _, err := rt.Collect(context.Background(), pl, req, 0)
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "usd", be.Resource)
	assert.InDelta(t, 15.0, be.Estimate, 0.01)
	assert.Equal(t, 0, model.Calls())

	allow, _ := build(t, `{"budget":{"usd":10}}`, model)
	_, _, err = rt.Collect(context.Background(), allow, req, 0)
	require.NoError(t, err, "on_cross defaults to allow")
	assert.Equal(t, 1, model.Calls())

	known, err := runtime.ValidateConfig("meter", []byte(`{"on_cross":"maybe"}`))
	assert.True(t, known)
	assert.ErrorContains(t, err, `on_cross must be "allow" or "refuse"`)
}

// Each model call of a call is priced at its own model's rates: a hedge's
// racer that failed mid-stream on the dear primary is charged at the
// primary's rates, the cheap backup that served at its own.
func TestEachModelCallIsPricedAtItsModelsRates(t *testing.T) {
	primary := rt.NewModel(rt.Response{Deltas: []string{"partial answer", "x"}, Err: rt.Transient("connection reset"), FailAfter: 1})
	backup := rt.NewModel(rt.Response{Deltas: []string{"ok"}, Usage: runtime.Usage{InputTokens: 1_000, OutputTokens: 2_000}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Layer("meter", `{"scope":"global"}`),
		rt.Layer("hedge", `{"models":["primary","backup"],"delay":"1h","win":"first_success"}`),
	}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
	require.NoError(t, err)
	m := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "Where is my order A1234? It was due on Monday."}}}
	text, resp, err := rt.Collect(context.Background(), pl, req, 0)
	require.NoError(t, err)
	require.Equal(t, "ok", text)
	require.Equal(t, "backup", resp.Model)

	// The primary reported no usage: it is charged the estimate of its
	// prompt and of the text that arrived.
	lost := runtime.Usage{InputTokens: runtime.EstimateMessages(req.Messages), OutputTokens: (int64(len("partial answer")) + 3) / 4}
	want := m.Cost("primary", lost) + m.Cost("backup", runtime.Usage{InputTokens: 1_000, OutputTokens: 2_000})
	got := m.Ledger("any run")
	assert.InDelta(t, want, got.USD, 1e-12)
	assert.Greater(t, want, m.Cost("backup", runtime.Usage{InputTokens: 1_000 + lost.InputTokens, OutputTokens: 2_000 + lost.OutputTokens}),
		"priced all at the backup's rates, the lost primary call would be charged less than it cost")
	assert.Equal(t, 1_000+lost.InputTokens+2_000+lost.OutputTokens, got.Tokens())
}

// Scope "key" keeps one ledger per tenant, across its runs: a run that
// ends leaves it, another tenant has its own, and Ledger finds a tenant's
// by any of its runs.
func TestScopeKeyIsOneLedgerPerTenant(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 10}})
	pl, m := build(t, `{"budget":{"calls":2},"scope":"key"}`, model)
	call := func(tenant, run string) error {
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: tenant + "/" + run, Tenant: tenant})
		_, _, err := rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
		return err
	}
	require.NoError(t, call("acme", "r1"))
	pl.EndRun("acme/r1")
	require.NoError(t, call("acme", "r2"))
	var be *runtime.BudgetError
	require.ErrorAs(t, call("acme", "r3"), &be, "the tenant's third call crosses its ceiling of 2, whatever the run")
	require.NoError(t, call("globex", "r1"), "another tenant has a ledger of its own")
	assert.Equal(t, int64(2), m.Ledger("acme/r2").Calls)
	assert.Equal(t, int64(1), m.Ledger("globex/r1").Calls)
}

// With on_cross "refuse" the estimates of the calls in flight are reserved:
// concurrent calls that each fit alone never cross the ceiling together
// when each charges its estimate.
func TestOnCrossRefuseHoldsUnderConcurrency(t *testing.T) {
	msgs := []runtime.Message{{Role: "user", Content: "What is the status of order A1234?"}}
	in := runtime.EstimateMessages(msgs)
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: in, OutputTokens: 100}, Delay: 2 * time.Millisecond})
	pl, m := build(t, `{"budget":{"usd":0.01},"scope":"global","on_cross":"refuse"}`, model)
	req := runtime.ChatRequest{Model: "primary", MaxTokens: 100, Messages: msgs}
	per := m.Cost("primary", meter.Estimate(&req))
	ok := untilRefused(pl, req, 32, func(err error) bool { return assert.NoError(t, err) })
	got := m.Ledger("any run")
	assert.Equal(t, ok, got.Calls)
	assert.LessOrEqual(t, got.USD, 0.01+1e-12, "32 concurrent callers never cross the ceiling")
	assert.Greater(t, got.USD, 0.01-per-1e-12, "the ceiling is used up to less than one call")
}

// leaseRecorder is a memory store that records the leases of the
// reservations made in it.
type leaseRecorder struct {
	*runtime.MemoryStore
	mu     sync.Mutex
	leases []time.Duration
}

func (r *leaseRecorder) Reserve(ctx context.Context, key, id string, lim runtime.BudgetLimits, ttl time.Duration) (*runtime.BudgetError, error) {
	r.mu.Lock()
	r.leases = append(r.leases, lim.Lease)
	r.mu.Unlock()
	return r.MemoryStore.Reserve(ctx, key, id, lim, ttl)
}

// A reservation's lease is the call's deadline and a grace period after
// it, else the meter's lease (the default lease without one).
func TestReservationLeaseFollowsTheCallsDeadline(t *testing.T) {
	// A meter's lease replaces the default lease of a call without a
	// deadline; a call with a deadline still holds its reservation until
	// the deadline and the grace after it.
	for _, tc := range []struct {
		name, lease string
		want        time.Duration
	}{
		{"default lease", "", runtime.DefaultReservationLease},
		{"the meter's lease", `,"lease":"45m"`, 45 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &leaseRecorder{MemoryStore: runtime.NewMemoryStore()}
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":10},"store":"shared"`+tc.lease+`}`)}})
			p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			model := rt.NewModel(rt.Response{Deltas: []string{"x"}})
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": rec}})
			require.NoError(t, err)
			_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _, err = rt.Collect(ctx, pl, runtime.ChatRequest{Model: "primary"}, 0)
			require.NoError(t, err)
			require.Len(t, rec.leases, 2)
			assert.Equal(t, tc.want, rec.leases[0])
			assert.InDelta(t, (time.Minute + 30*time.Second).Seconds(), rec.leases[1].Seconds(), 1)
		})
	}
}

// sharedStore opens a store of each kind a ledger shared by replicas may
// be in, by the names of sharedStores (Redis and PostgreSQL: the test
// servers, skipped without them).
var sharedStore = map[string]func(t *testing.T) runtime.StoreBackend{
	"memory":   func(*testing.T) runtime.StoreBackend { return runtime.NewMemoryStore() },
	"redis":    func(t *testing.T) runtime.StoreBackend { return storetest.Redis(t) },
	"postgres": func(t *testing.T) runtime.StoreBackend { return storetest.Postgres(t) },
}

// sharedStores are the keys of sharedStore, in order.
var sharedStores = []string{"memory", "redis", "postgres"}

// A call that runs longer than the meter's lease (a long stream, a slow
// tool) keeps its reservation while it runs: the replicas of a hard ceiling
// never admit a call in its place, whatever the store.
func TestAReservationHoldsWhileItsCallOutlivesTheLease(t *testing.T) {
	for _, name := range sharedStores {
		t.Run(name, func(t *testing.T) {
			shared := sharedStore[name](t)
			// A lease long enough that a renewal (every third of it) is
			// not late on a loaded machine talking to a real store.
			const lease = time.Second
			// Each call estimates its messages and 1,000 output tokens: one
			// fits under the ceiling of 1,500 tokens, two do not.
			cfg := `{"budget":{"tokens":1500},"store":"shared","scope":"global","on_cross":"refuse","lease":"1s"}`
			replica := func(model runtime.ModelClient) *runtime.Pipeline {
				p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", cfg)}})
				p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
				pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
					Backends: map[string]runtime.StoreBackend{"shared": shared}})
				require.NoError(t, err)
				return pl
			}
			req := runtime.ChatRequest{Model: "primary", MaxTokens: 1000, Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
			// The long call runs (its reservation made) until released.
			started, release := make(chan struct{}), make(chan struct{})
			long := replica(&gatedModel{first: rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 5, OutputTokens: 900}}),
				started: started, release: release})
			other := replica(rt.NewModel(rt.Response{Deltas: []string{"y"}}))
			done := make(chan error, 1)
			go func() {
				_, _, err := rt.Collect(context.Background(), long, req, 0)
				done <- err
			}()
			<-started
			_, _, err := rt.Collect(context.Background(), other, req, 0)
			var be *runtime.BudgetError
			require.ErrorAs(t, err, &be, "the running call's estimate holds the ceiling")
			time.Sleep(3 * lease) // the call runs on, past its first lease and two more
			_, _, err = rt.Collect(context.Background(), other, req, 0)
			require.ErrorAs(t, err, &be, "the running call still holds its reservation past the lease it was reserved with")
			assert.NotZero(t, be.Estimate)
			assert.NotZero(t, be.Pending, "refused for the call in flight")
			close(release)
			require.NoError(t, <-done)
			_, _, err = rt.Collect(context.Background(), other, req, 0)
			require.ErrorAs(t, err, &be, "905 charged and the estimate cross 1500")
			assert.Zero(t, be.Pending, "the settled call's reservation is gone")
		})
	}
}

// timerCounter is the real clock, counting the timers set on it.
type timerCounter struct {
	runtime.RealClock
	n atomic.Int64
}

func (c *timerCounter) AfterFunc(d time.Duration, f func()) func() bool {
	c.n.Add(1)
	return c.RealClock.AfterFunc(d, f)
}

// The reservations of a meter's calls in flight are renewed by one timer,
// not one per call; a ledger in process memory sets none at all: its
// reservations hold until they settle.
func TestReservationRenewalsShareOneTimer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		store  runtime.StoreBackend
		timers int64
		lease  time.Duration
	}{
		{"shared store", &leaseRecorder{MemoryStore: runtime.NewMemoryStore()}, 1, 10 * time.Minute},
		{"process memory", runtime.NewMemoryStore(), 0, 100 * 365 * 24 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &timerCounter{}
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":100},"store":"shared"}`)}})
			p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Delay: 50 * time.Millisecond})
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Backends: map[string]runtime.StoreBackend{"shared": tc.store}, Clock: clock})
			require.NoError(t, err)
			var wg sync.WaitGroup
			for range 5 {
				wg.Go(func() {
					_, _, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
					assert.NoError(t, err)
				})
			}
			wg.Wait()
			assert.Equal(t, int64(5), int64(model.Calls()))
			assert.Equal(t, tc.timers, clock.n.Load(), "renewal timers set for five concurrent calls")
			if rec, ok := tc.store.(*leaseRecorder); ok {
				require.Len(t, rec.leases, 5)
				assert.Equal(t, tc.lease, rec.leases[0])
			}
		})
	}
}

// TestAToolCallThatMayHaveRunIsCharged: a tool call is charged when it ran
// or may have made its effect (cancelled or timed out while a
// side-effecting tool ran, its outcome unknown, its result unusable), and
// not when it failed otherwise, was proved not to run, or is a duplicate
// in doubt.
func TestAToolCallThatMayHaveRunIsCharged(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sideEffecting bool
		retrySafe     bool
		// cancel: the call's context ends while the tool runs; before:
		// it had ended before the call.
		cancel, before bool
		// panics: the tool panics instead of returning err.
		panics  bool
		err     error
		charged int64
	}{
		{name: "ok", charged: 1},
		{name: "failed", sideEffecting: true, err: errors.New("declined")},
		{name: "cancelled side-effecting", sideEffecting: true, cancel: true, err: context.Canceled, charged: 1},
		{name: "cancelled before the call", sideEffecting: true, before: true, err: context.Canceled},
		// retry_safe makes a retry of the same call safe, not a new call
		// free: a caller cancelling each new call would run effects past
		// the ceiling.
		{name: "cancelled retry_safe", sideEffecting: true, retrySafe: true, cancel: true, err: context.Canceled, charged: 1},
		{name: "timed out retry_safe", sideEffecting: true, retrySafe: true, err: &runtime.CallError{Kind: runtime.KindTimeout, Message: "504"}, charged: 1},
		{name: "cancelled read-only", cancel: true, err: context.Canceled},
		{name: "timed out side-effecting", sideEffecting: true, err: &runtime.CallError{Kind: runtime.KindTimeout, Message: "504"}, charged: 1},
		{name: "may have run", err: runtime.MayHaveRun(errors.New("connection lost")), charged: 1},
		{name: "ran", err: runtime.Ran(&runtime.BlockedError{Layer: "after", Message: "no"}), charged: 1},
		{name: "outcome unrecorded", err: &runtime.CallError{Kind: runtime.KindPermanent, Err: runtime.ErrOutcomeUnrecorded}, charged: 1},
		{name: "not run", sideEffecting: true, cancel: true, err: runtime.NotRun(context.Canceled)},
		// A tool that returns another call's doubt ran (a duplicate refused
		// in doubt by an idempotent layer is not charged: see
		// TestADuplicateRefusedInDoubtIsNotCharged in builtins/idempotent).
		{name: "tool returned another call's doubt", sideEffecting: true, cancel: true, err: &runtime.InDoubtError{Layer: "idem", Tool: "pay"}, charged: 1},
		{name: "panicked side-effecting", sideEffecting: true, panics: true, charged: 1},
		{name: "panicked retry_safe", sideEffecting: true, retrySafe: true, panics: true, charged: 1},
		{name: "panicked read-only", panics: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":5},"scope":"run"}`)}})
			p.Tools = map[string]plan.Tool{"pay": {SideEffecting: tc.sideEffecting, RetrySafe: tc.retrySafe}}
			ctx, cancel := context.WithCancel(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}))
			defer cancel()
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{
				"pay": func(context.Context, *runtime.ToolCall) (any, error) {
					if tc.cancel {
						cancel()
					}
					if tc.panics {
						panic("the bank's client crashed")
					}
					return "paid", tc.err
				},
			}})
			require.NoError(t, err)
			if tc.before {
				cancel()
			}
			call := func() { _, _ = pl.Tool(ctx, runtime.ToolRequest{Name: "pay"}) }
			if tc.panics {
				require.Panics(t, call)
			} else {
				call()
			}
			m := pl.Layers(plan.StageTool)[0].Middleware.(*meter.Meter)
			assert.Equal(t, tc.charged, m.Ledger("r").Calls)
		})
	}
}

// TestNewRetrySafeCallsCancelledWhileRunningKeepTheCallsCeiling: a caller
// that cancels each new call of a side-effecting retry_safe tool once the
// tool has it, under meter{calls: 2} > idempotent > retry, makes two
// effects, not one per call: retry_safe makes a retry of the same call
// safe, not a new call free.
func TestNewRetrySafeCallsCancelledWhileRunningKeepTheCallsCeiling(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Layer("meter", `{"budget":{"calls":2},"scope":"run"}`),
		rt.Layer("idempotent", `{}`),
		rt.Layer("retry", `{"max_attempts":3}`),
	}})
	p.Tools = map[string]plan.Tool{"transfer": {SideEffecting: true, RetrySafe: true}}
	var ran atomic.Int64
	started := make(chan struct{})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{
		"transfer": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			ran.Add(1)
			started <- struct{}{}
			<-ctx.Done()
			return nil, ctx.Err()
		},
	}})
	require.NoError(t, err)
	var refused int
	for i := range 6 {
		ctx, cancel := context.WithCancel(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}))
		returned := make(chan struct{})
		go func() {
			select {
			case <-started:
				cancel()
			case <-returned:
			}
		}()
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "transfer", Args: map[string]any{"to": "acct", "amount": float64(i + 1)}})
		close(returned)
		cancel()
		var be *runtime.BudgetError
		if errors.As(err, &be) {
			refused++
		}
	}
	assert.Equal(t, int64(2), ran.Load(), "two transfers ran: the calls ceiling")
	assert.Equal(t, 4, refused, "the other four were refused before they ran")
	m := pl.Layers(plan.StageTool)[0].Middleware.(*meter.Meter)
	assert.Equal(t, int64(2), m.Ledger("r").Calls)
}

// TestARetryOfARetrySafeCallIsChargedOnce: under retry > meter{calls: 1},
// a retry_safe side-effecting call that times out twice, then succeeds, is
// one call: the tool dedupes its attempts by their idempotency key, so it
// made its effect once at most. It is charged once, and its retries are
// not refused by the ceiling its first attempt reached; a new call is.
func TestARetryOfARetrySafeCallIsChargedOnce(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{
		rt.Layer("retry", `{"max_attempts":3,"initial_delay":"1ms","max_delay":"1ms"}`),
		rt.Layer("meter", `{"budget":{"calls":1},"scope":"run"}`),
	}})
	p.Tools = map[string]plan.Tool{"transfer": {SideEffecting: true, RetrySafe: true}}
	keys := map[string]int{}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{
		"transfer": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			keys[c.IdempotencyKey()]++
			if keys[c.IdempotencyKey()] < 3 {
				return nil, &runtime.CallError{Kind: runtime.KindTimeout, Message: "504"}
			}
			return "done", nil
		},
	}})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	v, err := pl.Tool(ctx, runtime.ToolRequest{Name: "transfer", Args: map[string]any{"amount": float64(1)}})
	require.NoError(t, err)
	assert.Equal(t, "done", v.Value)
	assert.Len(t, keys, 1, "the attempts share one idempotency key")
	m := pl.Layers(plan.StageTool)[1].Middleware.(*meter.Meter)
	assert.Equal(t, int64(1), m.Ledger("r").Calls, "one logical call, charged once")

	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "transfer", Args: map[string]any{"amount": float64(2)}})
	var be *runtime.BudgetError
	require.ErrorAs(t, err, &be, "a new call is past the ceiling")
	assert.Len(t, keys, 1, "and never ran")
	assert.Equal(t, int64(1), m.Ledger("r").Calls)
}

// An outer meter around one that found the usage absurd priced the tokens
// the inner one charged at the model's rates and not the dollars it
// charged (runtime.Charge.Metered): charged to a tokens ceiling of 1000,
// the inner ledger took the clamped usage's $3000, the outer $0.003. Now
// the outer charges what the inner one did.
func TestNestedMeterChargesWhatTheInnerMeterCharged(t *testing.T) {
	model := rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 2_000_000_000}})
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Named("outer", rt.Layer("meter", `{"scope":"global"}`)),
		rt.Named("inner", rt.Layer("meter", `{"budget":{"tokens":1000},"scope":"global"}`)),
	}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	outer := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	inner := pl.Layers(plan.StageChat)[1].Middleware.(*meter.Meter)
	_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.ErrorContains(t, err, "reported absurd usage")
	require.Len(t, resp.Charges, 1)
	require.True(t, resp.Charges[0].Metered)
	in, out := inner.Ledger(""), outer.Ledger("")
	assert.Equal(t, int64(1000), in.Tokens())
	assert.Equal(t, in.Tokens(), out.Tokens())
	assert.InDelta(t, resp.Charges[0].USD, in.USD, 1e-9)
	assert.InDelta(t, in.USD, out.USD, 1e-9, "the outer meter charges the dollars the inner one did")
}

// An outer meter skipped a call the inner meter had charged dollars and no
// tokens: closed, absurd usage (here billed by a call that failed before
// its first delta) on a ledger another call brought to its tokens ceiling
// while it ran is charged what brings the ledger to its usd ceiling and no
// token, and the outer meter took the call, failed with no delta and its
// usage unchanged, for a failure before anything was billed. Now it
// charges the inner meter's dollars and the call.
func TestNestedMeterChargesTheInnerMetersDollarsWithoutTokens(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	// Failed before any delta, billed what the error reports.
	absurd := rt.NewModel(rt.Response{Deltas: []string{"x"},
		Err: &runtime.CallError{Kind: runtime.KindPermanent, Message: "cut", Usage: runtime.Usage{InputTokens: 2_000_000_000}}})
	model := &gatedModel{first: absurd, rest: rt.NewModel(rt.Response{Deltas: []string{"x"}, Usage: runtime.Usage{InputTokens: 1000}}),
		started: started, release: release}
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{
		rt.Named("outer", rt.Layer("meter", `{"scope":"global"}`)),
		rt.Named("inner", rt.Layer("meter", `{"budget":{"tokens":1000,"usd":100},"scope":"global"}`)),
	}}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	outer := pl.Layers(plan.StageChat)[0].Middleware.(*meter.Meter)
	inner := pl.Layers(plan.StageChat)[1].Middleware.(*meter.Meter)
	type result struct {
		resp runtime.ChatResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		_, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
		done <- result{resp, err}
	}()
	<-started
	_, _, err = rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.NoError(t, err)
	require.Equal(t, int64(1000), inner.Ledger("").Tokens())
	close(release)
	r := <-done
	require.ErrorContains(t, r.err, "reported absurd usage")
	require.Len(t, r.resp.Charges, 1)
	require.True(t, r.resp.Charges[0].Metered)
	assert.Zero(t, r.resp.Charges[0].Usage, "the ledger was at its tokens ceiling already")
	in, out := inner.Ledger(""), outer.Ledger("")
	assert.InDelta(t, 100.0, in.USD, 1e-9)
	assert.InDelta(t, in.USD, out.USD, 1e-9, "the outer meter charges the dollars the inner one did")
	assert.Equal(t, int64(2), out.Calls)
}

// gatedModel sends its first call to first once release is closed (having
// closed started), the others to rest at once.
type gatedModel struct {
	first, rest      runtime.ModelClient
	started, release chan struct{}
	once             sync.Once
}

func (g *gatedModel) Stream(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	first := false
	g.once.Do(func() { first = true })
	if !first {
		return g.rest.Stream(ctx, req, yield)
	}
	close(g.started)
	<-g.release
	return g.first.Stream(ctx, req, yield)
}
