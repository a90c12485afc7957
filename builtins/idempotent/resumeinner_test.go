package idempotent_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// A resumed refund that never started runs; its tool refunds the order's
// fee too, through the tool chain. That second call was taken for the
// resumed one (its context held the resumed call's mark): the layer found
// it claimed under another key than the one the turn recorded, and the
// refund ended in doubt. A call the tool makes is its own: claimed under
// its key, it runs, and the resumed refund with it.
func TestResumedCallsToolMakesCallsOfItsOwn(t *testing.T) {
	layer := rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`)
	shared := storeOf(t, "redis")
	cp := intentCheckpoint(t, shared)
	var refunds atomic.Int64
	w := newResumeWorker(t, cp, shared, layer, &refunds)
	*w.refund = func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		refunds.Add(1)
		if c.Args["order_id"] != "A1" {
			return "fee refunded", nil
		}
		res, err := w.pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1-fee"}})
		if err != nil {
			return nil, err
		}
		return fmt.Sprint("R1, ", res.Value), nil
	}
	res, err := w.resume(t)
	require.NoError(t, err)
	assert.Equal(t, "refunded", res.Output)
	assert.EqualValues(t, 2, refunds.Load(), "the refund and its fee, once each")
	sent := w.model.Requests()[0].Messages
	assert.Equal(t, "R1, fee refunded", sent[len(sent)-1].Parts[0].Text)
}
