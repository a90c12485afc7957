package idempotent_test

import (
	"context"
	"fmt"
	"slices"
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

// mismatchStore is a store two replicas share, for the tests of a key
// reused with other arguments: each replica's handle of it.
type mismatchStore struct {
	name string
	a, b runtime.KV
}

// mismatchStores returns every store kind, each opened twice as two
// replicas open it (replicaStores).
func mismatchStores(t *testing.T) []mismatchStore {
	var out []mismatchStore
	for name, open := range replicaStores() {
		a, b := open(t)
		out = append(out, mismatchStore{name, a, b})
	}
	return out
}

// replicas builds two pipelines sharing st, with an idempotent layer of
// config cfg as their tool chain and refund, side-effecting and not
// retry_safe, as their tool.
func (st mismatchStore) replicas(t *testing.T, cfg string, refund runtime.ToolFunc) (a, b *runtime.Pipeline) {
	p := toolPlan(rt.Layer("idempotent", cfg))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	build := func(kv runtime.KV) *runtime.Pipeline {
		return rt.Build(t, p, runtime.Deps{KV: kv, Tools: map[string]runtime.ToolFunc{"refund": refund}})
	}
	return build(st.a), build(st.b)
}

// leaser is the claims port of kv, as the layer reads it.
func leaser(kv runtime.KV) runtime.Leaser {
	if l, ok := kv.(runtime.Leaser); ok {
		return l
	}
	return runtime.NewKVLeaser(kv)
}

// refunds is a refund tool that counts its executions and answers with
// the order and amount it refunded.
func refunds(calls *atomic.Int64) runtime.ToolFunc {
	return func(_ context.Context, c *runtime.ToolCall) (any, error) {
		calls.Add(1)
		return fmt.Sprintf("refunded %v", c.Args["order_id"]), nil
	}
}

// TestAKeyReusedWithOtherArgumentsIsRefused: with key_args, a call under a
// key a call with other arguments used is refused, naming the layer and
// none of the values, and does not run, on every store and on either
// replica: a client that sends another amount under the same order must
// not believe that amount was refunded. The same arguments still get the
// stored result.
func TestAKeyReusedWithOtherArgumentsIsRefused(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			a, b := st.replicas(t, `{"key_args": ["order_id"]}`, refunds(&calls))
			nine := map[string]any{"order_id": "m-1", "amount": 9}
			r, err := a.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: nine})
			require.NoError(t, err)
			require.Equal(t, "refunded m-1", r.Value)

			for _, pl := range []*runtime.Pipeline{a, b} {
				r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}})
				var blocked *runtime.BlockedError
				require.ErrorAs(t, err, &blocked, "%v", r.Value)
				assert.Equal(t, "idempotent", blocked.Layer)
				assert.Contains(t, blocked.Message, "different arguments")
				assert.NotContains(t, err.Error(), "900")
				assert.NotContains(t, err.Error(), "m-1")
				assert.False(t, r.Deduped, "nothing was replayed")
				assert.Nil(t, r.Value)

				r, err = pl.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9.0}})
				require.NoError(t, err, "the same arguments (9 and 9.0 alike) get the stored result")
				assert.Equal(t, "refunded m-1", r.Value)
				assert.True(t, r.Deduped)
			}
			assert.EqualValues(t, 1, calls.Load(), "the refund ran once")
		})
	}
}

// TestADuplicateWithOtherArgumentsDoesNotShareAFlight: a call with other
// arguments that arrives while the first call of its key runs in this
// process does not share the first call's result: it asks the store, as a
// duplicate in another process does, and is refused once that result is
// stored.
func TestADuplicateWithOtherArgumentsDoesNotShareAFlight(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	refund := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		if calls.Add(1) == 1 {
			close(started)
			<-release
		}
		return fmt.Sprintf("refunded %v", c.Args["amount"]), nil
	}
	p := toolPlan(rt.Layer("idempotent", `{"key_args": ["order_id"]}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	kv := runtime.NewMemoryKV()
	store := &askedStore{KV: kv, Leaser: runtime.NewKVLeaser(kv), asked: make(chan runtime.LeaseStatus, 16)}
	pl := rt.Build(t, p, runtime.Deps{KV: store, Tools: map[string]runtime.ToolFunc{"refund": refund}})

	first := make(chan error, 1)
	go func() {
		_, err := pl.Tool(bounded(t, "run-1"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9}})
		first <- err
	}()
	<-started
	require.Equal(t, runtime.LeaseAcquired, <-store.asked)
	second := make(chan error, 1)
	var got runtime.ToolResult
	go func() {
		r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}})
		got = r
		second <- err
	}()
	select {
	case status := <-store.asked:
		assert.Equal(t, runtime.LeaseHeld, status, "the duplicate finds the first call's claim")
	case err := <-second:
		t.Fatalf("the duplicate returned without asking the store: %v (%v)", err, got.Value)
	}
	close(release)
	require.NoError(t, <-first)
	err := <-second
	var blocked *runtime.BlockedError
	require.ErrorAs(t, err, &blocked, "%v", got.Value)
	assert.EqualValues(t, 1, calls.Load(), "the refund ran once")
}

// askedStore is a memory store that tells what each claim found.
type askedStore struct {
	runtime.KV
	runtime.Leaser
	asked chan runtime.LeaseStatus
}

func (s *askedStore) AcquireAs(ctx context.Context, key, owner string, note []byte, lease, keep time.Duration, takeover bool) (runtime.LeaseGrant, error) {
	g, err := s.Leaser.AcquireAs(ctx, key, owner, note, lease, keep, takeover)
	if err == nil {
		select {
		case s.asked <- g.Status:
		default:
		}
	}
	return g, err
}

// TestARecordWithoutArgumentsDigestIsReplayed: a result stored before the
// records held the arguments' digest is read as before: any call under its
// key gets it, without running.
func TestARecordWithoutArgumentsDigestIsReplayed(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			a, _ := st.replicas(t, `{"key_args": ["order_id"]}`, refunds(&calls))
			layer := &idempotent.Idempotent{KeyArgs: []string{"order_id"}}
			c := &runtime.ToolCall{Name: "refund", Tool: &runtime.ToolInfo{SideEffecting: true},
				Args: map[string]any{"order_id": "m-1"}, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}}
			k, ok := layer.ToolKey(c)
			require.True(t, ok)
			key := idempotent.KeyPrefix + k
			l := leaser(st.b)
			ctx := context.Background()
			g, err := l.Acquire(ctx, key, time.Minute, time.Hour, false)
			require.NoError(t, err)
			require.Equal(t, runtime.LeaseAcquired, g.Status)
			ok, err = l.Publish(ctx, key, g.Token, []byte(`"refunded m-1 earlier"`), time.Hour)
			require.NoError(t, err)
			require.True(t, ok)

			r, err := a.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}})
			require.NoError(t, err)
			assert.Equal(t, "refunded m-1 earlier", r.Value)
			assert.True(t, r.Deduped)
			assert.Zero(t, calls.Load())
		})
	}
}

// TestVaryArgsMayDifferUnderOneKey: the arguments named in vary_args (a
// note a model words anew in each run) may differ under one key, on every
// store; any other still may not.
func TestVaryArgsMayDifferUnderOneKey(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			a, b := st.replicas(t, `{"key_args": ["order_id"], "vary_args": ["note"]}`, refunds(&calls))
			_, err := a.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9, "note": "first"}})
			require.NoError(t, err)
			r, err := b.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9, "note": "again"}})
			require.NoError(t, err)
			assert.Equal(t, "refunded m-1", r.Value)
			assert.True(t, r.Deduped)
			r, err = b.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9}})
			require.NoError(t, err, "a vary argument left out is one that differs")
			assert.True(t, r.Deduped)
			_, err = b.Tool(bounded(t, "run-4"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900, "note": "first"}})
			var blocked *runtime.BlockedError
			require.ErrorAs(t, err, &blocked)
			assert.EqualValues(t, 1, calls.Load(), "the refund ran once")
		})
	}
}

// TestVaryArgsNeedKeyArgs: vary_args without key_args, naming a key
// argument, or naming one twice is a config error.
func TestVaryArgsNeedKeyArgs(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"vary_args": ["note"]}`:                                   "vary_args needs key_args",
		`{"key_args": ["order_id"], "vary_args": ["order_id"]}`:     `"order_id" is in key_args`,
		`{"key_args": ["order_id"], "vary_args": ["note", "note"]}`: `"note" is empty or repeated`,
	} {
		_, err := runtime.Build(context.Background(), toolPlan(rt.Layer("idempotent", cfg)), runtime.Deps{})
		require.Error(t, err, cfg)
		assert.ErrorContains(t, err, want)
	}
}

// TestAStoredErrorIsNotGivenToOtherArguments: the stored error of a call
// that ran (its result unusable) answers only the same arguments; other
// arguments under its key are refused as for a result.
func TestAStoredErrorIsNotGivenToOtherArguments(t *testing.T) {
	var calls atomic.Int64
	refund := func(context.Context, *runtime.ToolCall) (any, error) {
		calls.Add(1)
		return nil, runtime.Ran(rt.Permanent("refunded, but the receipt is too large"))
	}
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			calls.Store(0)
			a, b := st.replicas(t, `{"key_args": ["order_id"]}`, refund)
			nine := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9}}
			_, err := a.Tool(ctx1, nine)
			require.ErrorIs(t, err, runtime.ErrRan)
			_, err = b.Tool(ctx1, nine)
			require.ErrorIs(t, err, runtime.ErrRan, "the same arguments get the stored error")
			_, err = b.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}})
			var blocked *runtime.BlockedError
			require.ErrorAs(t, err, &blocked)
			assert.NotErrorIs(t, err, runtime.ErrRan)
			assert.EqualValues(t, 1, calls.Load())
		})
	}
}

// refusedFor asserts that err refuses a reused key, naming the layer, and
// returns its message.
func refusedFor(t *testing.T, err error, r runtime.ToolResult) string {
	t.Helper()
	var blocked *runtime.BlockedError
	require.ErrorAs(t, err, &blocked, "%v", r.Value)
	assert.Equal(t, "idempotent", blocked.Layer)
	assert.False(t, r.Deduped, "nothing was replayed")
	return blocked.Message
}

// TestVaryArgsChangedBetweenDeployments: a record written before vary_args
// gained note still answers an identical retry and one that differs only
// in note; a retry that differs in a compared argument is refused, naming
// that argument (and no value), on every store.
func TestVaryArgsChangedBetweenDeployments(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			before, _ := st.replicas(t, `{"key_args": ["order_id"]}`, refunds(&calls))
			_, after := st.replicas(t, `{"key_args": ["order_id"], "vary_args": ["note"]}`, refunds(&calls))
			first := map[string]any{"order_id": "m-1", "amount": 9, "note": "first"}
			_, err := before.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: first})
			require.NoError(t, err)

			r, err := after.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: first})
			require.NoError(t, err, "an identical retry replays")
			assert.Equal(t, "refunded m-1", r.Value)
			assert.True(t, r.Deduped)
			r, err = after.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9, "note": "again"}})
			require.NoError(t, err, "note is in vary_args now")
			assert.True(t, r.Deduped)

			r, err = after.Tool(bounded(t, "run-4"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900, "note": "first", "express": true}})
			msg := refusedFor(t, err, r)
			assert.Contains(t, msg, "different arguments (amount, express)")
			assert.NotContains(t, err.Error(), "900")
			assert.NotContains(t, msg, "note")
			assert.EqualValues(t, 1, calls.Load(), "the refund ran once")
		})
	}
}

// singleDigestRecord stores under the key of order m-1 the record the
// layer wrote before it kept a digest per argument: the outcome after one
// digest of the arguments, those in vary then left out.
func singleDigestRecord(t *testing.T, kv runtime.KV, args map[string]any, vary ...string) {
	t.Helper()
	kept := map[string]any{}
	for k, v := range args {
		if !slices.Contains(vary, k) {
			kept[k] = v
		}
	}
	layer := &idempotent.Idempotent{KeyArgs: []string{"order_id"}}
	c := &runtime.ToolCall{Name: "refund", Tool: &runtime.ToolInfo{SideEffecting: true}, Args: args}
	k, ok := layer.ToolKey(c)
	require.True(t, ok)
	digest := (&runtime.ToolCall{Args: kept}).ArgsDigest()
	rec := fmt.Sprintf(`{"\u0021ran":{"message":"the outcome was stored with the digest of its call's arguments, which this build cannot compare; a later build replays it","args":%q,"outcome":"refunded m-1 earlier"}}`, digest)
	published(t, kv, idempotent.KeyPrefix+k, rec)
}

// published stores rec as the outcome of key in kv, as a build of the
// layer did.
func published(t *testing.T, kv runtime.KV, key, rec string) {
	t.Helper()
	l, ctx := leaser(kv), context.Background()
	g, err := l.Acquire(ctx, key, time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	ok, err := l.Publish(ctx, key, g.Token, []byte(rec), time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
}

// TestASingleDigestRecordAfterVaryArgsChanged: a record holding one digest
// of its call's arguments (written before the digest per argument) answers
// a call whose digest, with the arguments vary_args names now left out or
// with none left out, is the one it holds. A call it cannot match is
// refused; where vary_args names arguments now, the refusal does not
// claim they differ, as the record cannot tell whether only those do. A
// record written while vary_args named note refuses an identical retry
// once note left vary_args, until it expires.
func TestASingleDigestRecordAfterVaryArgsChanged(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			first := map[string]any{"order_id": "m-1", "amount": 9, "note": "first"}
			singleDigestRecord(t, st.a, first)
			_, widened := st.replicas(t, `{"key_args": ["order_id"], "vary_args": ["note"]}`, refunds(&calls))
			r, err := widened.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: first})
			require.NoError(t, err, "an identical retry replays after note joined vary_args")
			assert.Equal(t, "refunded m-1 earlier", r.Value)
			assert.True(t, r.Deduped)

			r, err = widened.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9, "note": "again"}})
			msg := refusedFor(t, err, r)
			assert.NotContains(t, msg, "different arguments", "the record cannot tell that more than note differs")
			assert.Contains(t, msg, "vary_args (note)")
			assert.Contains(t, msg, "cannot tell")

			strict, _ := st.replicas(t, `{"key_args": ["order_id"]}`, refunds(&calls))
			r, err = strict.Tool(bounded(t, "run-4"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900, "note": "first"}})
			assert.Contains(t, refusedFor(t, err, r), "different arguments", "without vary_args only an argument that differs explains it")
			assert.Zero(t, calls.Load())
		})
	}
	t.Run("narrowed", func(t *testing.T) {
		var calls atomic.Int64
		kv := runtime.NewMemoryKV()
		first := map[string]any{"order_id": "m-1", "amount": 9, "note": "first"}
		singleDigestRecord(t, kv, first, "note")
		pl, _ := mismatchStore{"memory", kv, kv}.replicas(t, `{"key_args": ["order_id"]}`, refunds(&calls))
		r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: first})
		refusedFor(t, err, r)
		r, err = pl.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9}})
		require.NoError(t, err, "the arguments compared then, without note, give the digest")
		assert.True(t, r.Deduped)
		assert.Zero(t, calls.Load(), "refused until the record expires, never run")
	})
}

// TestASingleDigestRecordRefusesAnArgumentAdded: a record holding one
// digest of its call's arguments does not answer a call that adds an
// argument the recorded call lacked, with or without vary_args now (the
// digest cannot tell an argument absent then from one vary_args named
// then), on every store; the recorded call's own arguments still get it.
func TestASingleDigestRecordRefusesAnArgumentAdded(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			nine := map[string]any{"order_id": "m-1", "amount": 9}
			singleDigestRecord(t, st.a, nine)
			for cfg, want := range map[string]string{
				`{"key_args": ["order_id"]}`:                        "different arguments",
				`{"key_args": ["order_id"], "vary_args": ["note"]}`: "cannot tell",
			} {
				pl, _ := st.replicas(t, cfg, refunds(&calls))
				r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9, "currency": "EUR"}})
				assert.Contains(t, refusedFor(t, err, r), want, cfg)
				r, err = pl.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: nine})
				require.NoError(t, err, cfg)
				assert.Equal(t, "refunded m-1 earlier", r.Value)
			}
			assert.Zero(t, calls.Load())
		})
	}
}
