package serve

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// metricAt returns the value of the unlabelled metric name in s's
// /metrics.
func metricAt(t *testing.T, s *served, name string) int64 {
	t.Helper()
	for _, line := range strings.Split(scrape(t, s.url), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, line)
			return n
		}
	}
	require.FailNow(t, "metric not in /metrics", name)
	return 0
}

// The settlements a meter gave up on were counted for the whole process,
// and /metrics read that count: two gateways in one process (or a host's
// pipelines beside one) each reported the other's losses as theirs. Each
// gateway now counts those of the meters it built, across its reloads.
func TestMetricsCountTheGatewaysOwnLostSettlements(t *testing.T) {
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		yield(runtime.Delta{Text: "x", Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}})
		return nil
	})
	metered := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"usd":1},"store":"a","scope":"global"}`)}})
	metered.Stores = map[string]plan.Store{"a": {Kind: "memory"}}
	bare := rt.Plan(plan.Chains{})
	gateway := func() (*served, *atomic.Pointer[plan.Plan]) {
		var cur atomic.Pointer[plan.Plan]
		cur.Store(metered)
		return startServer(t, Options{WatchInterval: -1,
			Source: SourceFunc(func(context.Context) (*Loaded, error) { return &Loaded{Plan: cur.Load()}, nil }),
			Models: func(context.Context, *plan.Plan) (map[string]runtime.ModelClient, error) {
				return map[string]runtime.ModelClient{"primary": model}, nil
			},
			Deps: runtime.Deps{Backends: map[string]runtime.StoreBackend{"a": refusingSettle{storetest.Redis(t)}}}}), &cur
	}
	a, policy := gateway()
	b, _ := gateway()
	const lost, unconfirmed = "agentc_serve_meter_settlements_lost_total", "agentc_serve_meter_settlements_unconfirmed_total"

	code, _, body := do(t, "POST", a.url+"/v1/chat/completions", "", chatBody("primary", "hi", false))
	require.Equal(t, http.StatusOK, code, body)
	// A reload to a policy without the meter closes the last pipeline on
	// its store: the close gives the call's settlement up.
	policy.Store(bare)
	require.NoError(t, a.srv.Reload(context.Background()))
	require.Eventually(t, func() bool { return strings.Contains(a.logs.String(), "the ledger store stayed out of reach") }, 30*time.Second, 10*time.Millisecond,
		"the old policy's close gave the settlement up")

	assert.Equal(t, int64(1), metricAt(t, a, lost), "the gateway counts its meter's loss, after the reload too")
	assert.Zero(t, metricAt(t, a, unconfirmed))
	assert.Zero(t, metricAt(t, b, lost), "the other gateway lost nothing")
}

// The server read each meter until it was done (cleaned up, nothing of
// its own waiting or being sent) and then kept only its count; but a call
// still running when its pipeline closed (Pipeline.Close does not wait for
// it: a request the shutdown cut lets go of its generation) settles after
// that, and the settlement it could not send was counted by its meter
// after the server had stopped reading it. Each meter now adds its counts
// to the server's as they happen.
func TestASettlementLostAfterItsPipelineClosedIsCounted(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	model := runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		close(entered)
		<-release
		yield(runtime.Delta{Text: "x", Usage: runtime.Usage{InputTokens: 10, OutputTokens: 5}})
		return nil
	})
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"usd":1},"store":"a","scope":"global"}`)}})
	p.Stores = map[string]plan.Store{"a": {Kind: "memory"}}
	built, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"a": refusingSettle{storetest.Redis(t)}}})
	require.NoError(t, err)
	var s settlements
	s.add(built)

	done := make(chan error, 1)
	go func() {
		_, _, err := rt.Collect(context.Background(), built, runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, 0)
		done <- err
	}()
	<-entered
	require.NoError(t, built.Close(), "the close does not wait for the call")
	lost, _ := s.counts() // a scrape while the call still runs
	require.Zero(t, lost)
	close(release)
	require.NoError(t, <-done)

	lost, unconfirmed := s.counts()
	assert.Equal(t, int64(1), lost, "the settlement the call could not send after the close is counted")
	assert.Zero(t, unconfirmed)
}
