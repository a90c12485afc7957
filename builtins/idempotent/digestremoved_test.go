package idempotent_test

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/idempotent"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestRemovingTheDigestKeyRunsNoRefundTwice: a refund made under
// settings.digest_key_env, retried after the deployment restarted without
// it, does not run again, on every store: under key_args its record is
// found (the store key holds no keyed part) and, as under a supplied key,
// refused, since its keyed digests cannot be compared with the call's
// arguments; the refusal says so rather than name arguments that differ.
func TestRemovingTheDigestKeyRunsNoRefundTwice(t *testing.T) {
	refundRetriedAfter(t, false, func(t *testing.T, msg, _ string) {
		assert.NotContains(t, msg, "different arguments")
		assert.Contains(t, msg, "keyed with settings.digest_key_env")
	})
}

// refundRetriedAfter makes a refund under settings.digest_key_env, under
// key_args and under a supplied key, on every store, then retries it on a
// deployment restarted without the key, or with another (rekeyed), and
// checks that it did not run again and that check holds of the refusal.
func refundRetriedAfter(t *testing.T, rekeyed bool, check func(t *testing.T, msg, supplied string)) {
	modes := []struct{ name, config, supplied string }{
		{"key_args", `{"key_args": ["order_id"]}`, ""},
		{"supplied key", `{}`, "job-1"},
	}
	for name, open := range replicaStores() {
		for _, mode := range modes {
			t.Run(name+"/"+mode.name, func(t *testing.T) {
				a, b := open(t)
				var calls atomic.Int64
				tools := map[string]runtime.ToolFunc{"refund": refunds(&calls)}
				t.Setenv(digestKeyEnv, digestKey)
				before := rt.Build(t, refundPlan(mode.config, true), runtime.Deps{KV: a, Tools: tools})
				t.Setenv(digestKeyEnv, "another-idempotent-test-digest-key-0123456789")
				after := rt.Build(t, refundPlan(mode.config, rekeyed), runtime.Deps{KV: b, Tools: tools})

				req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "o-1", "amount": 5}, IdempotencyKey: mode.supplied}
				_, err := before.Tool(bounded(t, "run-1"), req)
				require.NoError(t, err)
				require.Equal(t, int64(1), calls.Load())

				r, err := after.Tool(bounded(t, "run-1"), req)
				msg := refusedFor(t, err, r)
				assert.Equal(t, int64(1), calls.Load(), "the refund did not run again")
				check(t, msg, mode.supplied)
			})
		}
	}
}

// TestAKeyArgsRecordOfAKeyedEarlierBuildIsFound: a build before this one
// hashed the store key of key_args with the digest key; with the key set,
// such a record still answers the call while plain_lookup is true.
func TestAKeyArgsRecordOfAKeyedEarlierBuildIsFound(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			t.Setenv(digestKeyEnv, digestKey)
			pl := rt.Build(t, refundPlan(`{"key_args": ["order_id"]}`, true), runtime.Deps{KV: st.b, Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
			d, err := runtime.NewDigester([]byte(digestKey))
			require.NoError(t, err)
			published(t, st.a, idempotent.HashKey(d, "args", "refund", "", `["m-1"]`), `"refunded m-1 earlier"`)

			for range 2 { // from the earlier build's record, then from this build's
				r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 9}})
				require.NoError(t, err)
				assert.Equal(t, "refunded m-1 earlier", r.Value)
				assert.True(t, r.Deduped)
			}
			assert.Zero(t, calls.Load())
		})
	}
}

// refundPlan is a plan whose tool chain is an idempotent layer of config
// and whose tool refund is side-effecting, not retry_safe; keyed, with
// settings.digest_key_env.
func refundPlan(config string, keyed bool) *plan.Plan {
	p := toolPlan(rt.Layer("idempotent", config))
	p.Tools["refund"] = plan.Tool{SideEffecting: true}
	if keyed {
		p.Settings.DigestKeyEnv = digestKeyEnv
	}
	return p
}

// TestChangingTheDigestKeyRunsNoRefundTwice: a refund made under one
// digest key, retried after the deployment restarted with another, does
// not run again, on every store: its record is found (under key_args the
// store key holds no keyed part) and refused, and the refusal says the
// digests may be keyed with another key rather than only that the
// arguments differ; under key_args, whose values make the store key, it
// does not say they differ at all.
func TestChangingTheDigestKeyRunsNoRefundTwice(t *testing.T) {
	refundRetriedAfter(t, true, func(t *testing.T, msg, supplied string) {
		assert.Contains(t, msg, "keyed with another settings.digest_key_env key")
		if supplied == "" {
			assert.NotContains(t, msg, "different arguments")
		}
	})
}
