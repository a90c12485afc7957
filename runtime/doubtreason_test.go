package runtime_test

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

// A resumed call in doubt for a reason of its run's records said an
// earlier execution stopped and its tool was not retry_safe, of a
// retry_safe call recorded in doubt, of a read-only call whose tool ran an
// agent turn that started a payment, and of a call to a tool the policy
// no longer declares: a person settling it looked for the wrong cause.
// Each says why it is in doubt.
func TestAResumedCallInDoubtSaysWhy(t *testing.T) {
	charge, lookup, wire := use("c1", "charge", `{"order":7}`), use("l1", "lookup", `{"order":7}`), use("w1", "wire", `{"order":7}`)
	for _, tc := range []struct {
		name   string
		call   runtime.ToolUse
		cp     func(runtime.Checkpoint) runtime.Checkpoint
		reason runtime.InDoubtReason
		says   string
	}{
		{"recorded in doubt", charge, func(cp runtime.Checkpoint) runtime.Checkpoint {
			cp.Tools = []runtime.ToolRecord{{Tool: "charge", Call: callKey(1, charge), InDoubt: true, Error: "in doubt"}}
			return cp
		}, runtime.InDoubtRecorded, "recorded it in doubt"},
		{"delegated", lookup, func(cp runtime.Checkpoint) runtime.Checkpoint {
			cp.Calls.Delegated = map[string][]runtime.DelegatedCall{callKey(1, lookup): {{Tool: "pay", Call: callKey(1, lookup) + "/1:p1:0123456789abcdef"}}}
			return cp
		}, runtime.InDoubtDelegated, "agent turn"},
		{"undeclared", wire, func(cp runtime.Checkpoint) runtime.Checkpoint { return cp }, runtime.InDoubtUndeclared, "does not declare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := runtime.NewMemoryCheckpoints()
			cp := tc.cp(runtime.Checkpoint{RunID: "r", Status: runtime.RunRunning,
				Transcript: []runtime.Message{{Role: "user", Content: "order 7"}, {Role: "assistant", ToolCalls: []runtime.ToolUse{tc.call}}},
				Calls:      &runtime.CallIntent{Calls: []string{callKey(1, tc.call)}}})
			_, err := store.SaveCheckpoint(context.Background(), cp)
			require.NoError(t, err)
			var runs atomic.Int32
			counted := func(_ context.Context, c *runtime.ToolCall) (any, error) { runs.Add(1); return c.Name + " ok", nil }
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"lookup": {}, "charge": {SideEffecting: true, RetrySafe: true}}
			p.Settings.AllowUndeclaredTools = true
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"done"}})}, Checkpoints: store,
				Tools: map[string]runtime.ToolFunc{"lookup": counted, "charge": counted, "wire": counted}})
			c, err := pl.Checkpointer("")
			require.NoError(t, err)
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			_, err = c.Resume(ctx, "r")
			require.NoError(t, err)

			_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
			var doubt *runtime.InDoubtError
			require.ErrorAs(t, err, &doubt)
			assert.Zero(t, runs.Load(), "the call does not run again")
			assert.Equal(t, tc.reason, doubt.Reason)
			assert.NotEmpty(t, doubt.IdempotencyKey)
			assert.NotContains(t, doubt.Error(), "not retry_safe")
			assert.Contains(t, doubt.Error(), tc.says)
		})
	}
}
