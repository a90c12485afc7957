package idempotent_test

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// timedPublish is a store whose publishes always fail, that notes, on
// clock, when each publish and renewal was asked for, and passes the time
// of a claim ended in doubt to doubted.
type timedPublish struct {
	downPublish
	clock   runtime.Clock
	mu      sync.Mutex
	sent    []time.Time
	renewed []time.Time
	doubted chan time.Time
}

func (s *timedPublish) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	s.mu.Lock()
	s.sent = append(s.sent, s.clock.Now())
	s.mu.Unlock()
	return s.downPublish.Publish(ctx, key, token, result, keep)
}

func (s *timedPublish) Renew(ctx context.Context, key string, token int64, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	s.renewed = append(s.renewed, s.clock.Now())
	s.mu.Unlock()
	return s.downPublish.Renew(ctx, key, token, ttl)
}

func (s *timedPublish) Doubt(ctx context.Context, key string, token int64, keep time.Duration) (bool, error) {
	s.doubted <- s.clock.Now()
	return s.downPublish.Doubt(ctx, key, token, keep)
}

// A result whose publish failed is sent again on the pipeline's clock:
// publishBackoff after the failure, the wait doubling with each failure up
// to a third of lease_ttl, the claim renewed after each, until
// publishRetryFor has passed, when the claim is ended in doubt.
func TestAResultIsSentAgainOnTheClocksSchedule(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := &timedPublish{downPublish: newDownPublish(), clock: clock, doubted: make(chan time.Time, 1)}
	var log rt.LogBuffer
	b := refundsOn(t, store, clock, &log)
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "o4"}}
	_, err := b.Tool(ctx1, req)
	require.NoError(t, err)
	var doubted time.Time
	select {
	case doubted = <-store.doubted:
	case <-time.After(time.Minute):
		require.Fail(t, "the claim was not ended in doubt")
	}
	store.mu.Lock()
	sent, renewed := store.sent, store.renewed
	store.mu.Unlock()
	require.Greater(t, len(sent), 10)
	first := sent[0]
	var gaps []time.Duration
	for i := 1; i < len(sent); i++ {
		gaps = append(gaps, sent[i].Sub(sent[i-1]))
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{100 * ms, 200 * ms, 400 * ms, 800 * ms, time.Second, time.Second}, gaps[:6],
		"from publishBackoff, doubling, up to a third of lease_ttl")
	for _, g := range gaps[6:] {
		require.Equal(t, time.Second, g)
	}
	assert.Equal(t, len(sent)-2, len(renewed), "the claim renewed after each failure but the last")
	for i, at := range renewed {
		require.Equal(t, sent[i+1], at, "renewed as the publish sent again failed")
	}
	assert.Equal(t, sent[len(sent)-1], doubted, "ended in doubt after the last failure")
	assert.LessOrEqual(t, doubted.Sub(first), 10*time.Minute, "within publishRetryFor")
	assert.Greater(t, doubted.Sub(first), 10*time.Minute-time.Second, "after all but the last wait of it")
	require.NoError(t, b.Close())
	logged := log.String()
	assert.Contains(t, logged, `could not be stored within 10m0s; its key is in doubt" layer=idempotent stage=tool tool=refund idempotency_key=tool-`,
		"the call named once it has returned")
	keys := regexp.MustCompile(`idempotency_key=(\S+)`).FindAllStringSubmatch(logged, -1)
	require.Len(t, keys, 2)
	assert.Equal(t, keys[0][1], keys[1][1], "the call's own key")
}

// A burst of calls whose results cannot be stored keeps at most
// MaxRepublishes of them waiting to be sent again, each with its
// goroutine; the others are said not to be, and their claims are in doubt
// once their leases expire.
func TestResultsWaitingToBeSentAgainAreBounded(t *testing.T) {
	store := newDownPublish()
	var log rt.LogBuffer
	b := refundsOn(t, store, runtime.RealClock{}, &log)
	const over = 3
	for i := range idempotent.MaxRepublishes + over {
		_, err := b.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": strconv.Itoa(i)}})
		require.NoError(t, err)
	}
	require.NoError(t, b.Close())
	logged := log.String()
	assert.Equal(t, idempotent.MaxRepublishes+over, strings.Count(logged, "storing the result failed; sending it again"))
	assert.Equal(t, over, strings.Count(logged, "results already wait to be sent again"), "those beyond the bound")
	assert.Equal(t, idempotent.MaxRepublishes, strings.Count(logged, "storing the result failed again as the layer was closing"),
		"those waiting sent once more at Close")
}

// refundsOn builds an idempotent layer (lease_ttl 3s) on store over a
// side-effecting refund that succeeds, on clock, logging to log.
func refundsOn(t *testing.T, store runtime.StoreBackend, clock runtime.Clock, log *rt.LogBuffer) *runtime.Pipeline {
	pl := toolPlan(rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "3s"}`))
	pl.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	return rt.Build(t, pl, runtime.Deps{Backends: map[string]runtime.StoreBackend{"shared": store}, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(log, nil)),
		Tools:  map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) { return "done", nil }}})
}

// A result beyond the bound, not sent again, leaves its key in doubt once
// its lease expires, even when the store is back: a duplicate fails in
// doubt and the tool does not run again.
func TestAResultBeyondTheBoundLeavesItsKeyInDoubt(t *testing.T) {
	store := newDownPublish()
	var runs atomic.Int64
	pl := toolPlan(rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`))
	pl.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	var log rt.LogBuffer
	b := rt.Build(t, pl, runtime.Deps{Backends: map[string]runtime.StoreBackend{"shared": store},
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Tools: map[string]runtime.ToolFunc{"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			if c.Args["order_id"] == "beyond" {
				runs.Add(1)
			}
			return "done", nil
		}}})
	for i := range idempotent.MaxRepublishes {
		_, err := b.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": strconv.Itoa(i)}})
		require.NoError(t, err)
	}
	beyond := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "beyond"}}
	_, err := b.Tool(ctx1, beyond)
	require.NoError(t, err)
	require.Contains(t, log.String(), "results already wait to be sent again")
	store.down.Store(false)
	_, err = b.Tool(ctx1, beyond)
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt, "the duplicate waits out the lease and finds the call in doubt")
	assert.Equal(t, int64(1), runs.Load(), "the tool ran once")
	require.NoError(t, b.Close())
}
