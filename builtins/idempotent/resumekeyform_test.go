package idempotent_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// chargeWorker is a process whose agent turn's tool chain is an idempotent
// layer on kv, its checkpoints in cps, its refund tool (side-effecting,
// retry_safe) counting in charges; keyed with the digest key key ("":
// without one).
func chargeWorker(t *testing.T, kv runtime.KV, cps runtime.CheckpointStore, key string, charges *atomic.Int64, model *rt.Model) *runtime.Pipeline {
	t.Helper()
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool": true, "keep": 0}`)},
		Tool: []plan.Layer{rt.Layer("idempotent", `{}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: true}}
	if key != "" {
		t.Setenv(digestKeyEnv, key)
		p.Settings.DigestKeyEnv = digestKeyEnv
	}
	return rt.Build(t, p, runtime.Deps{KV: kv, Checkpoints: cps, Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			charges.Add(1)
			return "charged", nil
		}}})
}

// A worker charged an order under one digest key and stopped before its
// checkpoint held the result; another resumes the run with the key
// changed, or removed. Both read the same idempotency store. The resumed
// call's name in the checkpoint is keyed under the key of before: with
// another key, the turn took it for an unrecorded call of a retry_safe
// tool and ran it under an idempotency key derived from the new key's
// digest, which neither the tool nor the layer had seen: charged twice.
// The call is in doubt across either switch, saying its key form changed,
// on every store.
func TestATurnResumedAcrossADigestKeyChangeChargesOnce(t *testing.T) {
	for name, open := range replicaStores() {
		for _, after := range []struct{ name, key string }{
			{"changed", "another-idempotent-test-digest-key-0123456789"},
			{"removed", ""},
		} {
			t.Run(name+"/"+after.name, func(t *testing.T) {
				a, b := open(t)
				cps := runtime.NewMemoryCheckpoints()
				var charges atomic.Int64
				first := chargeWorker(t, a, cps, digestKey, &charges, rt.NewModel(
					refundCall("c1", `{"order_id":"A1"}`), rt.Response{Deltas: []string{"ok"}}))
				_, err := first.RunAgent(ctx1, runtime.AgentRequest{Model: "primary", Input: "charge A1"})
				require.NoError(t, err)
				require.EqualValues(t, 1, charges.Load())
				cp := beforeTheResult(t, cps)

				resumed := runtime.NewMemoryCheckpoints()
				_, err = resumed.SaveCheckpoint(context.Background(), cp)
				require.NoError(t, err)
				model := rt.NewModel(rt.Response{Deltas: []string{"charged"}})
				second := chargeWorker(t, b, resumed, after.key, &charges, model)
				c, err := second.Checkpointer("")
				require.NoError(t, err)
				_, err = c.Resume(ctx1, "run-1")
				require.NoError(t, err)
				_, err = second.RunAgent(ctx1, runtime.AgentRequest{Model: "primary", Messages: second.Transcript(ctx1)})
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt)
				assert.Equal(t, runtime.InDoubtKeyFormChanged, doubt.Reason)
				assert.EqualValues(t, 1, charges.Load(), "the charge does not run again")
				assert.Zero(t, model.Calls())
			})
		}
	}
}

// beforeTheResult returns the version of run-1 in cps saved once the
// model's call was recorded and before its result was: the one a worker
// that stopped then leaves.
func beforeTheResult(t *testing.T, cps *runtime.MemoryCheckpoints) runtime.Checkpoint {
	t.Helper()
	versions, err := cps.CheckpointVersions(context.Background(), "run-1")
	require.NoError(t, err)
	for _, v := range versions {
		cp, _, err := cps.CheckpointAt(context.Background(), "run-1", v)
		require.NoError(t, err)
		if cp.Calls != nil && len(cp.Tools) == 0 {
			cp.Version = 0
			return cp
		}
	}
	require.FailNow(t, "no version holds the call before its result")
	return runtime.Checkpoint{}
}
