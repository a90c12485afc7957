package idempotent_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
