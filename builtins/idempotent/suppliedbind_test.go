package idempotent_test

import (
	"context"
	"errors"
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

// TestASuppliedKeyReusedForAnotherKeyArgsCallIsRefused: with key_args, the
// idempotency key a caller supplied was not compared at all: a refund of
// order i4 under the key of a refund of order i3 ran, on one replica or
// two. A caller's key names one call with key_args too: reused for other
// key_args values it is refused on either replica (at once as well as one
// after the other), while key_args still dedupes the same order under two
// keys, and the same call under its key gets the stored result.
func TestASuppliedKeyReusedForAnotherKeyArgsCallIsRefused(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			a, b := st.replicas(t, `{"key_args": ["order_id"]}`, refunds(&calls))
			i3 := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "i3", "amount": 1}, IdempotencyKey: "IK-2"}
			r, err := a.Tool(ctx1, i3)
			require.NoError(t, err)
			require.Equal(t, "refunded i3", r.Value)

			for _, pl := range []*runtime.Pipeline{a, b} {
				r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "i4", "amount": 1}, IdempotencyKey: "IK-2"})
				msg := refusedFor(t, err, r)
				assert.Contains(t, msg, "the idempotency key the caller supplied was used earlier by a call with other values of key_args (order_id)")
				assert.NotContains(t, err.Error(), "i4")

				r, err = pl.Tool(bounded(t, "run-3"), i3)
				require.NoError(t, err)
				assert.True(t, r.Deduped, "the same call under its key gets the stored result")
			}
			r, err = b.Tool(bounded(t, "run-4"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "i3", "amount": 1}, IdempotencyKey: "IK-3"})
			require.NoError(t, err)
			assert.True(t, r.Deduped, "key_args dedupes the same order under another key")
			assert.EqualValues(t, 1, calls.Load())

			// Two orders under one fresh key, at once on both replicas:
			// one runs, the other is refused.
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i, pl := range []*runtime.Pipeline{a, b} {
				wg.Go(func() {
					_, errs[i] = pl.Tool(context.WithoutCancel(bounded(t, "run-5")), runtime.ToolRequest{Name: "refund",
						Args: map[string]any{"order_id": []string{"i1", "i2"}[i], "amount": 1}, IdempotencyKey: "IK-1"})
				})
			}
			wg.Wait()
			var blocked *runtime.BlockedError
			assert.True(t, errs[0] == nil != (errs[1] == nil), "one of %v runs", errs)
			assert.True(t, errs[0] != nil && assert.ErrorAs(t, errs[0], &blocked) || errs[1] != nil && assert.ErrorAs(t, errs[1], &blocked), "%v", errs)
			assert.EqualValues(t, 2, calls.Load(), "one refund ran under IK-1")
		})
	}
}

// TestRetriesTakingOverAnAbandonedSuppliedKeyAtOnceAreNotRefused: retries
// with the same key_args that met an abandoned record of the key their
// caller supplied at once, on two replicas, raced to take it over, and a
// loser, answered with the claim held and no note, was refused as a call
// with other values. The loser is one of the same call: it goes on to the
// claim, and the refund runs once.
func TestRetriesTakingOverAnAbandonedSuppliedKeyAtOnceAreNotRefused(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			a, b := st.replicas(t, `{"key_args": ["order_id"]}`, refunds(&calls))
			// A holder of the key that stopped before writing it.
			held := idempotent.PlainHashKey("supplied", "refund", "", "IK-7")
			l := leaser(st.a)
			g, err := l.AcquireAs(ctx1, held, "", nil, time.Hour, time.Hour, false)
			require.NoError(t, err)
			require.Equal(t, runtime.LeaseAcquired, g.Status)
			ok, err := l.Doubt(ctx1, held, g.Token, time.Hour)
			require.NoError(t, err)
			require.True(t, ok)

			const n = 8
			var wg sync.WaitGroup
			errs := make([]error, n)
			start := make(chan struct{})
			for i := range n {
				pl := []*runtime.Pipeline{a, b}[i%2]
				wg.Go(func() {
					<-start
					_, errs[i] = pl.Tool(context.WithoutCancel(bounded(t, "run-7")), runtime.ToolRequest{Name: "refund",
						Args: map[string]any{"order_id": "i7", "amount": 1}, IdempotencyKey: "IK-7"})
				})
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				var blocked *runtime.BlockedError
				assert.False(t, errors.As(err, &blocked), "a retry of the same call is not refused: %v", err)
			}
			assert.EqualValues(t, 1, calls.Load(), "the refund ran once")
		})
	}
}

// expiries is a KV that notes, by clock, when each key it writes expires.
type expiries struct {
	runtime.KV
	clock runtime.Clock
	mu    sync.Mutex
	at    map[string]time.Time
}

func (e *expiries) note(key string, ttl time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.at[key] = e.clock.Now().Add(ttl)
}

func (e *expiries) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	e.note(key, ttl)
	return e.KV.Set(ctx, key, value, ttl)
}

func (e *expiries) SetIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	ok, err := e.KV.SetIfAbsent(ctx, key, value, ttl)
	if ok {
		e.note(key, ttl)
	}
	return ok, err
}

func (e *expiries) expiry(key string) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.at[key]
}

// TestASuppliedKeyIsHeldForTTLFromTheOutcome: the record holding the key a
// caller supplied under key_args was given its ttl before the call ran,
// the call's claim after it, so the key was free for a call with other
// key_args values for as long as the call ran before its outcome expired.
// The key is held for ttl from the outcome, as the claim is.
func TestASuppliedKeyIsHeldForTTLFromTheOutcome(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := runtime.NewVirtualClock(start)
	kv := &expiries{KV: runtime.NewMemoryKV(), clock: clock, at: map[string]time.Time{}}
	p := toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id"], "ttl": "1h", "lease_ttl": "10m"}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl := rt.Build(t, p, runtime.Deps{KV: kv, Clock: clock, Tools: map[string]runtime.ToolFunc{
		"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			clock.Advance(5 * time.Minute) // the call runs five minutes
			return "refunded", nil
		}}})
	_, err := pl.Tool(bounded(t, "run-1"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "i1", "amount": 1}, IdempotencyKey: "IK-1"})
	require.NoError(t, err)
	held := idempotent.PlainHashKey("supplied", "refund", "", "IK-1")
	assert.Equal(t, start.Add(5*time.Minute+time.Hour), kv.expiry(held), "held for ttl from the outcome")
}
