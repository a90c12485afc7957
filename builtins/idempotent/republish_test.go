package idempotent_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A store that fails while a call's result is published does not leave the
// call in doubt: the holder keeps its claim and publishes the result again
// once the store is back, so a duplicate gets the result and the tool runs
// once.
func TestAResultWhosePublishFailedIsPublishedAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// open returns the store and what makes the next publish fail,
		// and what brings the store back.
		open func(t *testing.T) (runtime.StoreBackend, func(), func())
	}{
		{"memory", func(t *testing.T) (runtime.StoreBackend, func(), func()) {
			l := newDownPublish()
			l.down.Store(false)
			return l, func() { l.down.Store(true) }, func() { l.down.Store(false) }
		}},
		{"redis", func(t *testing.T) (runtime.StoreBackend, func(), func()) {
			p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
			direct := storetest.Redis(t)
			s, err := redis.Open(context.Background(), p.URL, strings.TrimSuffix(direct.Prefix(), ":"), redis.WithTimeout(time.Second))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s, p.Cut, p.Restore
		}},
		{"postgres", func(t *testing.T) (runtime.StoreBackend, func(), func()) {
			p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
			direct := storetest.Postgres(t)
			s, err := postgres.Open(context.Background(), p.URL, direct.Schema(), postgres.WithTimeout(time.Second))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s, p.Cut, p.Restore
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared, cut, restore := tc.open(t)
			pl := toolPlan(rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "3s"}`))
			pl.Tools["refund"] = plan.Tool{SideEffecting: true}
			pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
			var calls atomic.Int64
			b := rt.Build(t, pl, runtime.Deps{Backends: map[string]runtime.StoreBackend{"shared": shared},
				Tools: map[string]runtime.ToolFunc{"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
					if c.Args["order_id"] == "o4" {
						calls.Add(1)
						cut() // the store fails as the call ends
					}
					return "done refund " + c.Args["order_id"].(string), nil
				}}})
			// Warm up: the store's statements and scripts are known to the
			// server.
			_, err := b.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "warm"}})
			require.NoError(t, err)
			req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "o4"}}
			r, err := b.Tool(ctx1, req)
			require.NoError(t, err)
			assert.Equal(t, "done refund o4", r.Value, "the caller gets the result whatever the store does")
			restore()
			d, err := b.Tool(ctx1, req)
			require.NoError(t, err, "a duplicate gets the result published again, not in doubt")
			assert.Equal(t, "done refund o4", d.Value)
			assert.True(t, d.Deduped)
			assert.EqualValues(t, 1, calls.Load(), "the refund ran once")
		})
	}
}

// downPublish is an in-process store whose publishes fail while down is
// set; key is the last key a publish was asked for.
type downPublish struct {
	runtime.KV
	*runtime.KVLeaser
	down *atomic.Bool
	key  *atomic.Value
}

func (l downPublish) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	l.key.Store(key)
	if l.down.Load() {
		return false, errors.New("connection refused")
	}
	return l.KVLeaser.Publish(ctx, key, token, result, keep)
}

func (downPublish) Close() error { return nil }

func newDownPublish() downPublish {
	kv := runtime.NewMemoryKV()
	l := downPublish{KV: kv, KVLeaser: runtime.NewKVLeaser(kv), down: new(atomic.Bool), key: new(atomic.Value)}
	l.down.Store(true)
	return l
}

// republishPipeline builds an idempotent layer on store whose refund
// returns its execution's number.
func republishPipeline(t *testing.T, store runtime.StoreBackend, calls *atomic.Int64) *runtime.Pipeline {
	pl := toolPlan(rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "3s"}`))
	pl.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	b, err := runtime.Build(context.Background(), pl, runtime.Deps{Backends: map[string]runtime.StoreBackend{"shared": store},
		Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			return "refund #" + strconv.FormatInt(calls.Add(1), 10), nil
		}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// A result sent again never lands on a claim the store lost meanwhile and
// another call made (fenced out): the key keeps that call's outcome.
func TestAResultSentAgainIsNotWrittenOverAnotherClaim(t *testing.T) {
	store := newDownPublish()
	var calls atomic.Int64
	b := republishPipeline(t, store, &calls)
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "o4"}}
	r, err := b.Tool(ctx1, req)
	require.NoError(t, err)
	assert.Equal(t, "refund #1", r.Value)
	key := store.key.Load().(string)
	require.NoError(t, store.KV.Delete(context.Background(), key), "the store loses the claim (restarted empty)")
	store.down.Store(false)
	r, err = b.Tool(ctx1, req)
	require.NoError(t, err)
	assert.Equal(t, "refund #2", r.Value, "a lost claim lets the call run again")
	require.NoError(t, b.Close(), "the result sent again has stopped")
	g, err := store.KVLeaser.Acquire(context.Background(), key, time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseDone, g.Status)
	assert.JSONEq(t, `"refund #2"`, string(g.Result), "the first call's result is not written over the second's")
}

// A pipeline closed while a result waits to be sent again sends it once
// more before its stores close.
func TestClosingSendsAWaitingResultOnceMore(t *testing.T) {
	store := newDownPublish()
	var calls atomic.Int64
	b := republishPipeline(t, store, &calls)
	_, err := b.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "o4"}})
	require.NoError(t, err)
	store.down.Store(false)
	require.NoError(t, b.Close())
	g, err := store.KVLeaser.Acquire(context.Background(), store.key.Load().(string), time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseDone, g.Status)
	assert.JSONEq(t, `"refund #1"`, string(g.Result))
}

// blipThenBroken is a memory store whose first Publish of a key other than
// old fails (a blip), and every Publish of old.
type blipThenBroken struct {
	brokenPublish
	blipped atomic.Bool
}

func (s *blipThenBroken) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	if key != s.key && s.blipped.CompareAndSwap(false, true) {
		return false, errors.New("connection refused")
	}
	return s.brokenPublish.Publish(ctx, key, token, result, keep)
}

// A result sent again that is stored under the call's key, but not under
// the key an earlier build looks it up by, is stored: it is not sent again
// until publishRetryFor and then said not stored, as if it were not.
func TestAResultSentAgainNotStoredWhereAnEarlierBuildLooksSaysSo(t *testing.T) {
	var calls atomic.Int64
	kv := runtime.NewMemoryKV()
	args := map[string]any{"order_id": "m-9", "amount": 9}
	old := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{IdempotencyKey: "job-9"}})
	store := &blipThenBroken{brokenPublish: brokenPublish{KV: kv, Leaser: runtime.NewKVLeaser(kv), key: old}}
	logged := make(lines, 64)
	p := toolPlan(rt.Layer("idempotent", `{}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl := rt.Build(t, p, runtime.Deps{KV: store, Logger: slog.New(logged),
		Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
	req := runtime.ToolRequest{Name: "refund", Args: args, IdempotencyKey: "job-9"}
	_, err := pl.Tool(bounded(t, "run-earlier"), req)
	require.NoError(t, err)
	// The result is sent again publishBackoff after the blip; a republish
	// that keeps sending it ends after publishRetryFor.
	giveUp := time.After(30 * time.Second)
	var last string
	for done := false; !done; {
		select {
		case last = <-logged:
			done = strings.Contains(last, "the result is stored")
		case <-giveUp:
			require.Fail(t, "the result stored under the call's key is still sent again", "last logged: %s", last)
		}
	}
	assert.Contains(t, last, "the result is stored, but not under the key an earlier build looks the call up by")
	r, err := pl.Tool(bounded(t, "run-2"), req)
	require.NoError(t, err)
	assert.True(t, r.Deduped, "this build's replicas get the result")
	assert.EqualValues(t, 1, calls.Load())
}

// lines passes the message of each record logged to a channel, those
// that find it full left out (a test that read what it waited for reads no
// more).
type lines chan string

func (h lines) Enabled(context.Context, slog.Level) bool { return true }
func (h lines) Handle(_ context.Context, r slog.Record) error {
	select {
	case h <- r.Message:
	default:
	}
	return nil
}
func (h lines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h lines) WithGroup(string) slog.Handler      { return h }
