package idempotent_test

import (
	"context"
	"errors"
	"log/slog"
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
)

// spinLimit is the most publishes the store answers with an error before
// it answers that the claim is gone, which ends a republish that never
// waits.
const spinLimit = 5000

// lostClaim is a downPublish that, once a publish was asked for, answers
// every renewal that the claim is no longer held (the store lost it) and
// counts its publishes, answering the claim gone from the spinLimit-th on.
type lostClaim struct {
	downPublish
	n *atomic.Int64
}

func (l lostClaim) Renew(ctx context.Context, key string, token int64, lease time.Duration) (bool, error) {
	if l.n.Load() > 0 {
		return false, nil
	}
	return l.downPublish.Renew(ctx, key, token, lease)
}

func (l lostClaim) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	if l.n.Add(1) >= spinLimit {
		return false, nil
	}
	return l.downPublish.Publish(ctx, key, token, result, keep)
}

// lines passes the message of each record logged to a channel.
type lines chan string

func (h lines) Enabled(context.Context, slog.Level) bool { return true }
func (h lines) Handle(_ context.Context, r slog.Record) error {
	h <- r.Message
	return nil
}
func (h lines) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h lines) WithGroup(string) slog.Handler      { return h }

// A claim a renewal finds gone while the store fails every publish is not
// sent the result again and again without a wait: the publishes wait
// between them as they do while the claim is held, until publishRetryFor.
func TestARepublishOffALostClaimWaitsBetweenAttempts(t *testing.T) {
	store := lostClaim{downPublish: newDownPublish(), n: new(atomic.Int64)}
	logged := make(lines, 16)
	pl := toolPlan(rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "30s"}`))
	pl.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	b, err := runtime.Build(context.Background(), pl, runtime.Deps{
		Clock:    runtime.NewVirtualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		Logger:   slog.New(logged),
		Backends: map[string]runtime.StoreBackend{"shared": store},
		Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			return "done", nil
		}}})
	require.NoError(t, err)
	_, err = b.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "o4"}})
	require.NoError(t, err)
	for msg := range logged {
		if strings.HasPrefix(msg, "idempotent: the call ") || strings.Contains(msg, "the result is not stored") {
			break // the republish has ended
		}
	}
	require.NoError(t, b.Close())
	assert.Less(t, store.n.Load(), int64(200), "the result is sent again with a wait between publishes")
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
	logged := make(lines, 16)
	p := toolPlan(rt.Layer("idempotent", `{}`))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	pl := rt.Build(t, p, runtime.Deps{KV: store, Logger: slog.New(logged),
		Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
	req := runtime.ToolRequest{Name: "refund", Args: args, IdempotencyKey: "job-9"}
	_, err := pl.Tool(ctx1, req)
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
