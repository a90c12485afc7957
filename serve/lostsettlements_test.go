package serve

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// refusingSettle is a ledger store that never takes a settlement.
type refusingSettle struct{ runtime.Budgeter }

func (refusingSettle) Close() error { return nil }

func (refusingSettle) Settle(context.Context, string, string, runtime.Ledger, time.Duration) error {
	return errors.New("dial tcp: connection refused")
}

// The settlements a meter gave up on were only logged and returned by
// meter.LostSettlements, which a scrape could not see: /metrics now counts
// them.
func TestMetricsCountTheLostSettlements(t *testing.T) {
	s := startServer(t, Options{Source: cueSource(writePolicy(t, "package gw\nmodels: one: {}\n"))})
	lostAt := func() int64 {
		for _, line := range strings.Split(scrape(t, s.url), "\n") {
			if v, ok := strings.CutPrefix(line, "agentc_serve_meter_settlements_lost_total "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err, line)
				return n
			}
		}
		require.FailNow(t, "no agentc_serve_meter_settlements_lost_total in /metrics")
		return 0
	}
	before := lostAt()

	// A pipeline whose ledger store takes no settlement: its close gives
	// the call's up.
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "x", Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}})
		return nil
	})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"usd":1},"store":"a","scope":"global"}`)}})
	p.Stores = map[string]plan.Store{"a": {Kind: "memory"}}
	built, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"a": refusingSettle{storetest.Redis(t)}}})
	require.NoError(t, err)
	_, _, err = rt.Collect(context.Background(), built, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
	require.NoError(t, err)
	require.NoError(t, built.Close())
	require.Equal(t, before+1, meter.LostSettlements(), "the close gave the settlement up")

	assert.Equal(t, before+1, lostAt(), "the scrape counts it")
}
