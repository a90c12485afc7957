package checkpoint_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/audit"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestCallerGoneWhileARefundRuns: the caller of an agent turn goes away
// while the refund the model asked for runs, and the refund stops on its
// context's end: it may have been made. The turn ends in doubt with the
// call unanswered, the audit trail records it in doubt, the run stays
// open for a person, and a turn resumed from its save does not refund
// again nor ask the model.
func TestCallerGoneWhileARefundRuns(t *testing.T) {
	p := rt.Plan(plan.Chains{
		Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool": true}`)},
		Tool: []plan.Layer{{Use: "audit", Config: json.RawMessage(`{}`)}},
	})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	store := runtime.NewMemoryCheckpoints()
	audit := &runtime.MemoryAudit{}
	var refunds atomic.Int32
	ctx, cancel := context.WithCancel(runtime.WithRun(context.Background(), runtime.Run{ID: "gone"}))
	defer cancel()
	refund := func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
		refunds.Add(1)
		cancel() // the caller disconnects while the bank is asked
		<-ctx.Done()
		return nil, ctx.Err()
	}
	first := rt.NewModel(toolCallsResponse("c1", "refund", `{"order":7}`), rt.Response{Deltas: []string{"refunded"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": first},
		Tools: map[string]runtime.ToolFunc{"refund": refund}, Checkpoints: store, Audit: audit})
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
	require.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
	require.Len(t, res.Messages, 2, "the call is left unanswered")
	assert.Equal(t, 1, first.Calls(), "the model is not told the refund failed")

	var decisions []runtime.AuditDecision
	for _, r := range audit.Records() {
		if r.Stage == "tool" && r.Phase == runtime.PhaseOutcome {
			decisions = append(decisions, r.Decision)
		}
	}
	assert.Equal(t, []runtime.AuditDecision{runtime.DecisionInDoubt}, decisions)

	saved, ok, err := store.LatestCheckpoint(context.Background(), "gone")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, runtime.RunRunning, saved.Status, "the run stays open for a person to settle the call")
	require.NoError(t, pl.Close())

	second := rt.NewModel(rt.Response{Deltas: []string{"refunded"}})
	_, err = resumeAgent(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": second},
		Tools: map[string]runtime.ToolFunc{"refund": refund}, Checkpoints: store, Audit: audit}, "gone")
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, "refund", doubt.Tool)
	assert.Equal(t, int32(1), refunds.Load(), "the refund is not made again")
	assert.Zero(t, second.Calls())
}
