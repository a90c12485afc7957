package idempotent_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestADigestKeyRetriesACallInDoubtUnderItsKeyOfBefore: a retry_safe call
// whose worker died while it ran, before the digest key was set, is in
// doubt under its plain key; after the switch its retry runs again, as a
// retry_safe call in doubt does, with the idempotency key it was given
// then, by which the tool (a payment API) tells the retry from a new call.
// The key derived after the switch is another one, under which the tool
// would run the call twice.
func TestADigestKeyRetriesACallInDoubtUnderItsKeyOfBefore(t *testing.T) {
	t.Setenv(digestKeyEnv, digestKey)
	for _, name := range []string{"redis", "postgres"} {
		t.Run(name, func(t *testing.T) {
			shared := storeOf(t, name)
			args := map[string]any{"account": "acc-1", "amount": 10}
			before := &runtime.ToolCall{Name: "charge", Args: args, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}}
			l := shared.(runtime.Leaser)
			g, err := l.Acquire(context.Background(), idempotent.Key(before), time.Hour, time.Hour, false)
			require.NoError(t, err)
			require.Equal(t, runtime.LeaseAcquired, g.Status)
			ok, err := l.Doubt(context.Background(), idempotent.Key(before), g.Token, time.Hour)
			require.NoError(t, err)
			require.True(t, ok)

			var mu sync.Mutex
			var keys []string
			p := toolPlan(rt.Layer("idempotent", `{}`))
			p.Tools["charge"] = plan.Tool{SideEffecting: true, RetrySafe: true}
			p.Settings.DigestKeyEnv = digestKeyEnv
			after := rt.Build(t, p, runtime.Deps{KV: shared.(runtime.KV), Tools: map[string]runtime.ToolFunc{"charge": func(_ context.Context, c *runtime.ToolCall) (any, error) {
				mu.Lock()
				defer mu.Unlock()
				keys = append(keys, c.IdempotencyKey())
				return "charged", nil
			}}})
			r, err := after.Tool(ctx1, runtime.ToolRequest{Name: "charge", Args: args})
			require.NoError(t, err)
			assert.Equal(t, "charged", r.Value)
			assert.Equal(t, []string{before.IdempotencyKey()}, keys, "the retry ran once, with the key of before")
		})
	}
}

// TestADigestKeyNamesTheKeyOfBeforeOfACallInDoubt: a refund, not
// retry_safe, whose worker died while it ran before the digest key was
// set is in doubt under its plain key; each retry after the switch (the
// first finds it there, the next the keyed key the layer ended in doubt)
// is refused in doubt naming the idempotency key the refund ran with, by
// which a person looks it up at the bank, not the keyed key it never had,
// on every store. Under key_args the key is the same either way.
func TestADigestKeyNamesTheKeyOfBeforeOfACallInDoubt(t *testing.T) {
	modes := map[string]string{"run": `{}`, "key_args": `{"key_args": ["order_id"]}`}
	for name, open := range replicaStores() {
		for mode, config := range modes {
			t.Run(name+"/"+mode, func(t *testing.T) {
				a, b := open(t)
				args := map[string]any{"order_id": "o-1", "amount": 10}
				var given string
				before := rt.Build(t, refundPlan(config, false), runtime.Deps{KV: a, Tools: map[string]runtime.ToolFunc{"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
					given = c.IdempotencyKey()
					return nil, &runtime.CallError{Status: 504, Message: "bank timed out"}
				}}})
				_, err := before.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args})
				require.Error(t, err)
				require.NotEmpty(t, given)

				t.Setenv(digestKeyEnv, digestKey)
				var ran bool
				after := rt.Build(t, refundPlan(config, true), runtime.Deps{KV: b, Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
					ran = true
					return "refunded", nil
				}}})
				for i := range 2 {
					_, err = after.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args})
					var doubt *runtime.InDoubtError
					require.ErrorAs(t, err, &doubt, "retry %d", i+1)
					assert.Equal(t, given, doubt.IdempotencyKey, "retry %d names the key the refund ran with", i+1)
				}
				assert.False(t, ran)
			})
		}
	}
}
