package idempotent_test

import (
	"context"
	"errors"
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

const (
	digestKeyEnv = "AGENTC_TEST_IDEMPOTENT_DIGEST_KEY"
	digestKey    = "idempotent-test-digest-key-0123456789abcdef"
)

// unlockCall is what the unlock tool saw of its last call.
type unlockCall struct {
	mu                  sync.Mutex
	idempotencyKey, arg string
}

// TestADigestKeyKeepsTheRecordsOfBeforeAndHidesThePIN: a deployment sets
// settings.digest_key_env over a store (memory, SQLite file, Redis,
// PostgreSQL) that holds records written without it. A call completed
// before the switch, retried after it, is answered from its record and the
// tool runs once; under key_args or a supplied key, a call with another
// PIN is refused. A record written with the key holds no plain digest of
// the PIN, and its store key is not the plain one, but under key_args,
// whose key is the same with the digest key or without. Without the variable
// set, Build fails naming it.
func TestADigestKeyKeepsTheRecordsOfBeforeAndHidesThePIN(t *testing.T) {
	modes := []struct {
		name, config string
		supplied     string
	}{
		{"run", `{}`, ""},
		{"key_args", `{"key_args": ["account"]}`, ""},
		{"supplied key", `{}`, "job-1"},
	}
	for name, open := range replicaStores() {
		for _, mode := range modes {
			t.Run(name+"/"+mode.name, func(t *testing.T) {
				a, b := open(t)
				var calls atomic.Int64
				var seen unlockCall
				tools := map[string]runtime.ToolFunc{"unlock": func(_ context.Context, c *runtime.ToolCall) (any, error) {
					calls.Add(1)
					seen.mu.Lock()
					defer seen.mu.Unlock()
					seen.idempotencyKey, seen.arg = c.IdempotencyKey(), c.ArgsDigest()
					return "unlocked " + c.Args["account"].(string), nil
				}}
				p := toolPlan(rt.Layer("idempotent", mode.config))
				p.Tools["unlock"] = plan.Tool{SideEffecting: true}
				before := rt.Build(t, p, runtime.Deps{KV: a, Tools: tools})

				keyed := toolPlan(rt.Layer("idempotent", mode.config))
				keyed.Tools["unlock"] = plan.Tool{SideEffecting: true}
				keyed.Settings.DigestKeyEnv = digestKeyEnv
				t.Setenv(digestKeyEnv, "")
				_, err := runtime.Build(context.Background(), keyed, runtime.Deps{KV: b, Tools: tools})
				require.ErrorContains(t, err, "environment variable "+digestKeyEnv+" is not set")
				t.Setenv(digestKeyEnv, digestKey)
				after := rt.Build(t, keyed, runtime.Deps{KV: b, Tools: tools})

				req := runtime.ToolRequest{Name: "unlock", Args: map[string]any{"account": "acc-1", "pin": "4821"}, IdempotencyKey: mode.supplied}
				r, err := before.Tool(ctx1, req)
				require.NoError(t, err)
				require.Equal(t, int64(1), calls.Load())
				for range 2 { // from the plain record, then from the keyed one
					r, err = after.Tool(ctx1, req)
					require.NoError(t, err)
					assert.True(t, r.Deduped, "the retry across the switch is answered")
					assert.Equal(t, "unlocked acc-1", r.Value)
					assert.Equal(t, int64(1), calls.Load(), "the tool ran once")
				}

				other := req
				other.Args = map[string]any{"account": "acc-1", "pin": "4822"}
				_, err = after.Tool(ctx1, other)
				if mode.name == "run" {
					// Other arguments are another call of the run.
					require.NoError(t, err)
					assert.Equal(t, int64(2), calls.Load())
				} else {
					var blocked *runtime.BlockedError
					require.ErrorAs(t, err, &blocked, "another PIN under the key is refused")
					assert.NotContains(t, err.Error(), "4822")
					assert.Equal(t, int64(1), calls.Load())
				}

				// A record written with the key.
				fresh := runtime.ToolRequest{Name: "unlock", Args: map[string]any{"account": "acc-2", "pin": "7301"}}
				if mode.supplied != "" {
					fresh.IdempotencyKey = "job-2"
				}
				n := calls.Load()
				_, err = after.Tool(ctx1, fresh)
				require.NoError(t, err)
				require.Equal(t, n+1, calls.Load())
				seen.mu.Lock()
				gotKey, gotDigest := seen.idempotencyKey, seen.arg
				seen.mu.Unlock()
				assert.True(t, strings.HasPrefix(gotDigest, runtime.KeyedDigestPrefix), gotDigest)
				plainCall := &runtime.ToolCall{Name: "unlock", Args: fresh.Args, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}, IdempotencyKey: fresh.IdempotencyKey}}
				var storeKey string
				switch mode.name {
				case "run":
					assert.NotEqual(t, plainCall.IdempotencyKey(), gotKey, "the derived key is not the plain one")
					storeKey = idempotent.PlainHashKey("unlock", "", gotKey, gotDigest)
				case "key_args":
					assert.Equal(t, strings.TrimPrefix(idempotent.PlainHashKey("args", "unlock", "", `["acc-2"]`), idempotent.KeyPrefix), gotKey,
						"the key passed downstream is the one a deployment without the digest key passes: found either way")
					storeKey = idempotent.KeyPrefix + gotKey
				default:
					storeKey = idempotent.SuppliedKeyOf("unlock", "", "job-2")
				}
				l := leaser(b)
				g, err := l.Acquire(context.Background(), storeKey, time.Minute, time.Hour, false)
				require.NoError(t, err)
				require.Equal(t, runtime.LeaseDone, g.Status, "the record is under the keyed key")
				stored := string(g.Result)
				for _, plain := range []any{"7301", fresh.Args} {
					d, err := runtime.Digester{}.Args(plain)
					require.NoError(t, err)
					assert.NotContains(t, stored, d, "no plain digest of the PIN is stored")
				}
				if mode.name != "run" {
					assert.Contains(t, stored, runtime.KeyedDigestPrefix, "the record's digests are keyed")
				}
				if mode.name == "run" {
					// Nothing is stored under the plain key.
					g, err := l.Acquire(context.Background(), idempotent.Key(plainCall), time.Minute, time.Hour, false)
					require.NoError(t, err)
					assert.Equal(t, runtime.LeaseAcquired, g.Status)
					require.NoError(t, l.Release(context.Background(), idempotent.Key(plainCall), g.Token))
				}
			})
		}
	}
}

// TestADigestKeyLeavesACallInDoubtBeforeTheSwitchInDoubt: a call that was
// in doubt under its plain key when the key was set stays in doubt for a
// tool that is not retry_safe: its retry does not run it.
func TestADigestKeyLeavesACallInDoubtBeforeTheSwitchInDoubt(t *testing.T) {
	for name, open := range replicaStores() {
		t.Run(name, func(t *testing.T) {
			a, b := open(t)
			var calls atomic.Int64
			p := toolPlan(rt.Layer("idempotent", `{"key_args": ["account"]}`))
			p.Tools["unlock"] = plan.Tool{SideEffecting: true}
			before := rt.Build(t, p, runtime.Deps{KV: a, Tools: map[string]runtime.ToolFunc{"unlock": func(context.Context, *runtime.ToolCall) (any, error) {
				calls.Add(1)
				return nil, &runtime.CallError{Status: 504, Message: "vault timed out"}
			}}})
			req := runtime.ToolRequest{Name: "unlock", Args: map[string]any{"account": "acc-1", "pin": "4821"}}
			_, err := before.Tool(ctx1, req)
			require.Error(t, err)
			require.Equal(t, int64(1), calls.Load())

			keyed := toolPlan(rt.Layer("idempotent", `{"key_args": ["account"]}`))
			keyed.Tools["unlock"] = plan.Tool{SideEffecting: true}
			keyed.Settings.DigestKeyEnv = digestKeyEnv
			t.Setenv(digestKeyEnv, digestKey)
			after := rt.Build(t, keyed, runtime.Deps{KV: b, Tools: map[string]runtime.ToolFunc{"unlock": func(context.Context, *runtime.ToolCall) (any, error) {
				calls.Add(1)
				return "unlocked", nil
			}}})
			_, err = after.Tool(ctx1, req)
			var doubt *runtime.InDoubtError
			require.True(t, errors.As(err, &doubt), "%v", err)
			assert.Equal(t, int64(1), calls.Load(), "the retry did not run")
		})
	}
}

// TestADigestKeyReplaysASuppliedKeyRecordOfAnEarlierBuild: an earlier
// build's record of a call under a supplied key (stored under the key that
// held the plain digest of its arguments) answers the call after the
// upgrade with a digest key too, on every store, and a call with another
// amount under the key is refused. A call the keyed build runs under a
// supplied key leaves nothing under the plain key of that earlier build.
func TestADigestKeyReplaysASuppliedKeyRecordOfAnEarlierBuild(t *testing.T) {
	for _, st := range mismatchStores(t) {
		t.Run(st.name, func(t *testing.T) {
			var calls atomic.Int64
			p := toolPlan(rt.Layer("idempotent", `{}`))
			p.Tools["refund"] = plan.Tool{SideEffecting: true}
			p.Settings.DigestKeyEnv = digestKeyEnv
			t.Setenv(digestKeyEnv, digestKey)
			pl := rt.Build(t, p, runtime.Deps{KV: st.b, Tools: map[string]runtime.ToolFunc{"refund": refunds(&calls)}})
			args := map[string]any{"order_id": "m-1", "amount": 9}
			earlier := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: args, Meta: runtime.Meta{IdempotencyKey: "job-7"}})
			published(t, st.a, earlier, `"refunded m-1 earlier"`)

			r, err := pl.Tool(bounded(t, "run-2"), runtime.ToolRequest{Name: "refund", Args: args, IdempotencyKey: "job-7"})
			require.NoError(t, err)
			assert.Equal(t, "refunded m-1 earlier", r.Value)
			assert.True(t, r.Deduped)
			r, err = pl.Tool(bounded(t, "run-3"), runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "m-1", "amount": 900}, IdempotencyKey: "job-7"})
			assert.Contains(t, refusedFor(t, err, r), "different arguments (amount)")
			assert.Zero(t, calls.Load())

			fresh := map[string]any{"order_id": "m-2", "amount": 7}
			_, err = pl.Tool(bounded(t, "run-4"), runtime.ToolRequest{Name: "refund", Args: fresh, IdempotencyKey: "job-8"})
			require.NoError(t, err)
			assert.Equal(t, int64(1), calls.Load())
			plain := idempotent.Key(&runtime.ToolCall{Name: "refund", Args: fresh, Meta: runtime.Meta{IdempotencyKey: "job-8"}})
			g, err := leaser(st.a).Acquire(context.Background(), plain, time.Minute, time.Hour, false)
			require.NoError(t, err)
			assert.Equal(t, runtime.LeaseAcquired, g.Status, "no claim nor record under the plain key")
			require.NoError(t, leaser(st.a).Release(context.Background(), plain, g.Token))
		})
	}
}

// TestADigestKeyAnswersATurnResumedAcrossTheSwitch: a worker without the
// digest key was killed after the model asked for a refund and before the
// refund was claimed; a worker with the key resumes the turn. Its call is
// looked up under the plain key the turn recorded too: no claim there, it
// never started and runs once, and a second resume is answered; a claim
// the killed worker held under the plain key leaves it in doubt.
func TestADigestKeyAnswersATurnResumedAcrossTheSwitch(t *testing.T) {
	layer := rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "300ms"}`)
	t.Setenv(digestKeyEnv, digestKey)
	keyed := plan.Settings{DigestKeyEnv: digestKeyEnv}
	for _, name := range []string{"redis", "postgres"} {
		t.Run(name+"/never started", func(t *testing.T) {
			shared := storeOf(t, name)
			cp := intentCheckpoint(t, shared)
			var refunds atomic.Int64
			res, err := newResumeWorkerWith(t, cp, shared, keyed, layer, &refunds).resume(t)
			require.NoError(t, err)
			assert.Equal(t, "refunded", res.Output)
			assert.EqualValues(t, 1, refunds.Load())
			_, err = newResumeWorkerWith(t, cp, shared, keyed, layer, &refunds).resume(t)
			require.NoError(t, err)
			assert.EqualValues(t, 1, refunds.Load(), "the refund does not run twice")
		})
		t.Run(name+"/claimed before the switch", func(t *testing.T) {
			shared := storeOf(t, name)
			cp := intentCheckpoint(t, shared)
			c := &runtime.ToolCall{Name: "refund", Args: map[string]any{"order_id": "A1"}, Meta: runtime.Meta{Run: runtime.Run{ID: "run-1"}}}
			g, err := shared.(runtime.Leaser).Acquire(context.Background(), idempotent.Key(c), 300*time.Millisecond, time.Hour, false)
			require.NoError(t, err)
			require.Equal(t, runtime.LeaseAcquired, g.Status)
			var refunds atomic.Int64
			_, err = newResumeWorkerWith(t, cp, shared, keyed, layer, &refunds).resume(t)
			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt)
			assert.Zero(t, refunds.Load())
		})
	}
}

// TestADigestKeyRetriesARetrySafeCallThatTimedOutBeforeTheSwitch: a call
// of a retry_safe tool that timed out before the key was set may have had
// its effect; the tool dedupes on the idempotency key it gets. Its claim
// was released, so its retry after the switch found nothing under the
// plain key and gave the tool the keyed idempotency key, new to it: the
// charge was made twice. The claim is now ended in doubt, and the retry
// takes it over with the idempotency key of before, which the tool knows.
func TestADigestKeyRetriesARetrySafeCallThatTimedOutBeforeTheSwitch(t *testing.T) {
	for name, open := range replicaStores() {
		t.Run(name, func(t *testing.T) {
			a, b := open(t)
			var mu sync.Mutex
			seen := map[string]bool{}
			var effects atomic.Int64
			charge := func(timeout bool) runtime.ToolFunc {
				return func(_ context.Context, c *runtime.ToolCall) (any, error) {
					mu.Lock()
					if !seen[c.IdempotencyKey()] {
						seen[c.IdempotencyKey()] = true
						effects.Add(1)
					}
					mu.Unlock()
					if timeout {
						return nil, &runtime.CallError{Status: 504, Message: "the processor timed out"}
					}
					return "charged", nil
				}
			}
			p := toolPlan(rt.Layer("idempotent", `{}`))
			p.Tools["charge"] = plan.Tool{SideEffecting: true, RetrySafe: true}
			before := rt.Build(t, p, runtime.Deps{KV: a, Tools: map[string]runtime.ToolFunc{"charge": charge(true)}})
			req := runtime.ToolRequest{Name: "charge", Args: map[string]any{"card": "4111", "amount": 30}}
			_, err := before.Tool(ctx1, req)
			require.Error(t, err)
			require.Equal(t, int64(1), effects.Load())

			keyed := toolPlan(rt.Layer("idempotent", `{}`))
			keyed.Tools["charge"] = plan.Tool{SideEffecting: true, RetrySafe: true}
			keyed.Settings.DigestKeyEnv = digestKeyEnv
			t.Setenv(digestKeyEnv, digestKey)
			after := rt.Build(t, keyed, runtime.Deps{KV: b, Tools: map[string]runtime.ToolFunc{"charge": charge(false)}})
			r, err := after.Tool(ctx1, req)
			require.NoError(t, err)
			assert.Equal(t, "charged", r.Value)
			assert.Equal(t, int64(1), effects.Load(), "the retry reached the tool under the idempotency key of before: one charge")

			// Its outcome is stored under the keyed key: a further retry
			// is answered without reaching the tool.
			r, err = after.Tool(ctx1, req)
			require.NoError(t, err)
			assert.True(t, r.Deduped)
			assert.Len(t, seen, 1)
		})
	}
}

// TestADigestKeyRetriesARetrySafeCallThatTimedOutOnBothSidesOfTheSwitch: a
// retry_safe call timed out before the key was set, and its retry after
// the switch, given the idempotency key of before, timed out too: both
// may have had their effect under that key. The keyed claim was ended in
// doubt, and the next retry took it over without looking at the plain
// key: it got the keyed idempotency key, new to the tool, and the charge
// was made twice. It is given the key of before again.
func TestADigestKeyRetriesARetrySafeCallThatTimedOutOnBothSidesOfTheSwitch(t *testing.T) {
	for name, open := range replicaStores() {
		t.Run(name, func(t *testing.T) {
			a, b := open(t)
			var mu sync.Mutex
			var keys []string
			seen := map[string]bool{}
			charge := func(timeouts int) runtime.ToolFunc {
				var n atomic.Int64
				return func(_ context.Context, c *runtime.ToolCall) (any, error) {
					mu.Lock()
					keys = append(keys, c.IdempotencyKey())
					seen[c.IdempotencyKey()] = true
					mu.Unlock()
					if n.Add(1) <= int64(timeouts) {
						return nil, &runtime.CallError{Status: 504, Message: "the processor timed out"}
					}
					return "charged", nil
				}
			}
			p := toolPlan(rt.Layer("idempotent", `{}`))
			p.Tools["charge"] = plan.Tool{SideEffecting: true, RetrySafe: true}
			before := rt.Build(t, p, runtime.Deps{KV: a, Tools: map[string]runtime.ToolFunc{"charge": charge(1)}})
			req := runtime.ToolRequest{Name: "charge", Args: map[string]any{"card": "4111", "amount": 30}}
			_, err := before.Tool(ctx1, req)
			require.Error(t, err)

			keyed := toolPlan(rt.Layer("idempotent", `{}`))
			keyed.Tools["charge"] = plan.Tool{SideEffecting: true, RetrySafe: true}
			keyed.Settings.DigestKeyEnv = digestKeyEnv
			t.Setenv(digestKeyEnv, digestKey)
			after := rt.Build(t, keyed, runtime.Deps{KV: b, Tools: map[string]runtime.ToolFunc{"charge": charge(1)}})
			_, err = after.Tool(ctx1, req)
			require.Error(t, err)
			r, err := after.Tool(ctx1, req)
			require.NoError(t, err)
			assert.Equal(t, "charged", r.Value)
			mu.Lock()
			defer mu.Unlock()
			require.Len(t, keys, 3)
			assert.Len(t, seen, 1, "every attempt reached the tool under the idempotency key of before: %v", keys)
		})
	}
}
