package idempotent_test

import (
	"bytes"
	"context"
	"log/slog"
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

// TestASuppliedKeyReusedWithOtherArgumentsIsRefused: without key_args, an
// idempotency key the caller supplied names one call, as a payment API's
// does: reused with other arguments, on either replica and every store,
// the call is refused, naming the arguments that differ and none of the
// values, and neither runs nor gets the first call's result. The same
// arguments get the stored result; another key runs.
func TestASuppliedKeyReusedWithOtherArgumentsIsRefused(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			a, b := st.replicas(t, `{}`, refunds(&calls))
			nine := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9}, IdempotencyKey: "job-7"}
			r, err := a.Tool(ctx1, nine)
			require.NoError(t, err)
			require.Equal(t, "refunded m-1", r.Value)

			for _, pl := range []*runtime.Pipeline{a, b} {
				r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}, IdempotencyKey: "job-7"})
				msg := refusedFor(t, err, r)
				assert.Contains(t, msg, "the idempotency key the caller supplied was used earlier by a call with different arguments (amount)")
				assert.NotContains(t, err.Error(), "900")
				assert.Nil(t, r.Value)

				r, err = pl.Tool(bounded(t, "run-3"), nine)
				require.NoError(t, err)
				assert.True(t, r.Deduped, "the same arguments get the stored result")
				assert.Equal(t, "refunded m-1", r.Value)
			}
			assert.EqualValues(t, 1, calls.Load(), "the refund ran once")
			r, err = b.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}, IdempotencyKey: "job-8"})
			require.NoError(t, err, "another key is another call")
			assert.False(t, r.Deduped)
			assert.EqualValues(t, 2, calls.Load())
		})
	}
}

// TestASuppliedKeyRecordOfAnEarlierBuildIsReplayed: a call under a key the
// caller supplied whose outcome an earlier build stored (under a key that
// held the arguments' digest too) gets that outcome without running after
// the upgrade, on every store; a call with other arguments under the
// supplied key is refused from then on.
func TestASuppliedKeyRecordOfAnEarlierBuildIsReplayed(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			_, b := st.replicas(t, `{}`, refunds(&calls))
			args := map[string]any{"order_id": "m-1", "amount": 9}
			earlier := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{IdempotencyKey: "job-7"}})
			published(t, st.a, earlier, `"refunded m-1 earlier"`)

			r, err := b.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9.0}, IdempotencyKey: "job-7"})
			require.NoError(t, err)
			assert.Equal(t, "refunded m-1 earlier", r.Value)
			assert.True(t, r.Deduped)
			r, err = b.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}, IdempotencyKey: "job-7"})
			assert.Contains(t, refusedFor(t, err, r), "different arguments (amount)")
			assert.Zero(t, calls.Load())
		})
	}
}

// TestASuppliedKeyInDoubtAtAnEarlierBuildStaysInDoubt: a call whose claim
// an earlier build left in doubt (under the key that held its arguments'
// digest) is in doubt after the upgrade too, and does not run; so is a
// call with other arguments under its key from then on.
func TestASuppliedKeyInDoubtAtAnEarlierBuildStaysInDoubt(t *testing.T) {
	var calls atomic.Int64
	kv := runtime.NewMemoryKV()
	pl, _ := mismatchStore{"memory", kv, kv}.replicas(t, `{}`, refunds(&calls))
	args := map[string]any{"order_id": "m-1", "amount": 9}
	earlier := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{IdempotencyKey: "job-7"}})
	l, ctx := leaser(kv), context.Background()
	g, err := l.Acquire(ctx, earlier, time.Minute, time.Hour, false)
	require.NoError(t, err)
	ok, err := l.Doubt(ctx, earlier, g.Token, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)

	var doubt *runtime.InDoubtError
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args, IdempotencyKey: "job-7"})
	require.ErrorAs(t, err, &doubt)
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}, IdempotencyKey: "job-7"})
	require.ErrorAs(t, err, &doubt, "the supplied key is in doubt")
	assert.Zero(t, calls.Load())
}

// TestASuppliedKeyIsClaimedWhereAnEarlierBuildLooks: while builds are
// mixed, an earlier build's replica keys a call under a supplied key on
// its arguments' digest too: it finds that key claimed while the call runs
// on this build, and its outcome there once it ran (in the form of a
// record it cannot compare, which it refuses rather than run the call
// again), on every store.
func TestASuppliedKeyIsClaimedWhereAnEarlierBuildLooks(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			args := map[string]any{"order_id": "m-1", "amount": 9}
			earlier := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{IdempotencyKey: "job-7"}})
			l, ctx := leaser(st.b), context.Background()
			var seen runtime.LeaseStatus = -1
			a, _ := st.replicas(t, `{}`, func(context.Context, *runtime.ToolCall) (any, error) {
				g, err := l.Acquire(ctx, earlier, time.Minute, time.Hour, false)
				require.NoError(t, err)
				seen = g.Status
				return "refunded", nil
			})
			_, err := a.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args, IdempotencyKey: "job-7"})
			require.NoError(t, err)
			assert.Equal(t, runtime.LeaseHeld, seen, "claimed while it runs")
			g, err := l.Acquire(ctx, earlier, time.Minute, time.Hour, false)
			require.NoError(t, err)
			require.Equal(t, runtime.LeaseDone, g.Status, "its outcome is there once it ran")
			assert.Contains(t, string(g.Result), "a later build replays it")
		})
	}
}

// TestACallWithoutArgumentsDoesNotAnswerOthers: under a supplied key, the
// record of a call without arguments answers only a call without
// arguments; a call with arguments under that key is refused, on every
// store (its record is not read as one holding a single digest).
func TestACallWithoutArgumentsDoesNotAnswerOthers(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			a, b := st.replicas(t, `{}`, refunds(&calls))
			_, err := a.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{}, IdempotencyKey: "job-9"})
			require.NoError(t, err)
			r, err := b.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}, IdempotencyKey: "job-9"})
			refusedFor(t, err, r)
			r, err = b.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{}, IdempotencyKey: "job-9"})
			require.NoError(t, err, "the same call gets its outcome")
			require.True(t, r.Deduped)
			require.EqualValues(t, 1, calls.Load())
		})
	}
}

// TestAnEarlierKeyHoldingThisBuildsRecordAnswersEveryRetry: when the key
// of then of a call under a supplied key holds the record this build wrote
// there (with the call's digests) and its own key has none (expired
// first), every retry gets the call's outcome, the first and the later
// ones, which read what the first stored under its key.
func TestAnEarlierKeyHoldingThisBuildsRecordAnswersEveryRetry(t *testing.T) {
	var calls atomic.Int64
	kv := runtime.NewMemoryKV()
	a, b := mismatchStore{"memory", kv, kv}.replicas(t, `{}`, refunds(&calls))
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9}, IdempotencyKey: "job-7"}
	_, err := a.Tool(ctx1, req)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(context.Background(), idempotent.SuppliedKeyOf("refund", "", "job-7")))
	for _, run := range []string{"run-2", "run-3", "run-4"} {
		r, err := b.Tool(bounded(t, run), req)
		require.NoError(t, err, run)
		assert.Equal(t, "refunded m-1", r.Value, run)
		assert.True(t, r.Deduped, run)
	}
	r, err := b.Tool(bounded(t, "run-5"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}, IdempotencyKey: "job-7"})
	assert.Contains(t, refusedFor(t, err, r), "different arguments (amount)")
	assert.EqualValues(t, 1, calls.Load())
}

// TestAClaimOfAnEarlierBuildIsWaitedFor: a call under a supplied key whose
// key of then an earlier build's replica holds waits for that claim, then
// gets its outcome without running.
func TestAClaimOfAnEarlierBuildIsWaitedFor(t *testing.T) {
	var calls atomic.Int64
	kv := runtime.NewMemoryKV()
	store := &askedStore{KV: kv, Leaser: runtime.NewKVLeaser(kv), asked: make(chan runtime.LeaseStatus, 16)}
	p := toolPlan(rt.Layer("idempotent", `{}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl := rt.Build(t, p, runtime.Deps{KV: store, Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
	args := map[string]any{"order_id": "m-1", "amount": 9}
	old := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{IdempotencyKey: "job-7"}})
	l, ctx := leaser(kv), context.Background()
	g, err := l.Acquire(ctx, old, time.Minute, time.Hour, false)
	require.NoError(t, err)

	type outcome struct {
		r   runtime.ToolResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: args, IdempotencyKey: "job-7"})
		done <- outcome{r, err}
	}()
	for held := false; !held; {
		select {
		case st := <-store.asked:
			held = st == runtime.LeaseHeld
		case o := <-done:
			t.Fatalf("returned while the earlier build held the claim: %v %v", o.r.Value, o.err)
		}
	}
	ok, err := l.Publish(ctx, old, g.Token, []byte(`"refunded by old"`), time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	o := <-done
	require.NoError(t, o.err)
	assert.Equal(t, "refunded by old", o.r.Value)
	assert.Zero(t, calls.Load())
}

// TestAResultNotStoredWhereAnEarlierBuildLooksSaysSo: when the result of a
// call under a supplied key is stored under its key but not under its key
// of then, the log says that it is stored, and that only a replica of an
// earlier build finds the call in doubt; this build's replicas get it.
func TestAResultNotStoredWhereAnEarlierBuildLooksSaysSo(t *testing.T) {
	var calls atomic.Int64
	kv := runtime.NewMemoryKV()
	args := map[string]any{"order_id": "m-1", "amount": 9}
	old := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{IdempotencyKey: "job-7"}})
	store := &brokenPublish{KV: kv, Leaser: runtime.NewKVLeaser(kv), key: old}
	var log bytes.Buffer
	p := toolPlan(rt.Layer("idempotent", `{}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl := rt.Build(t, p, runtime.Deps{KV: store, Logger: slog.New(slog.NewTextHandler(&log, nil)),
		Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
	req := runtime.ToolRequest{Name: "refund", Args: args, IdempotencyKey: "job-7"}
	_, err := pl.Tool(ctx1, req)
	require.NoError(t, err)
	assert.Contains(t, log.String(), "the result is stored, but not under the key an earlier build looks the call up by")
	assert.Contains(t, log.String(), errBroken.Error())
	assert.NotContains(t, log.String(), "storing the result failed")

	r, err := pl.Tool(bounded(t, "run-2"), req)
	require.NoError(t, err)
	assert.True(t, r.Deduped, "this build's replicas get the result")
	assert.EqualValues(t, 1, calls.Load())
}

// brokenPublish is a memory store whose Publish of key fails.
type brokenPublish struct {
	runtime.KV
	runtime.Leaser
	key string
}

func (s *brokenPublish) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	if key == s.key {
		return false, errBroken
	}
	return s.Leaser.Publish(ctx, key, token, result, keep)
}
