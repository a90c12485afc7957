package crossproc_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
)

// stallLayer is a tool layer that stops the refund of order 9 (the agent
// scenario's "stall": the model asks for the refunds of 7 and 9 in one
// step, run one at a time) before the layers inside it (the idempotent
// claim) see it: the worker is killed there, the refund of 7 done and
// saved.
type stallLayer struct{}

func (stallLayer) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if c.Args["order"] == 9.0 && readEnv().arg == "stall" {
			say("stopped")
			select {}
		}
		return next(ctx, c)
	}
}

func init() {
	runtime.Register(runtime.Module{ID: "xproc.stall", Stages: []plan.Stage{plan.StageTool},
		New: func() runtime.Middleware { return stallLayer{} }})
}

// claimPlan (the agent scenario's "stall") checkpoints the run before its tool calls run and after each
// result, and keeps the idempotency table in the shared server; the
// checkpoints are in PostgreSQL, or for a Redis worker (Redis keeps none) in
// a SQLite file.
func (e workerEnv) claimPlan() *plan.Plan {
	p := e.sharedPlan(plan.Chains{
		Turn: []plan.Layer{rt.Layer("checkpoint", `{"store": "runs", "after_tool": true}`)},
		Tool: []plan.Layer{rt.Layer("xproc.stall", ""), rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "5s"}`)},
	})
	p.Stores["runs"] = p.Stores["shared"]
	if e.backend == "redis" {
		p.Stores["runs"] = plan.Store{Kind: "sqlite", Path: filepath.Join(e.dir, "runs.db")}
	}
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	return p
}

// TestAgentTurnKilledBeforeAClaimResumesTheCall kills (SIGKILL) a worker
// after its turn saved the model's two refunds and the first one's result,
// before the second refund claimed its key in the shared idempotency table.
// Another process resumes the run: the table holds no claim of the second
// refund, so it never started and runs now, once; the first is answered
// from its saved result; the model then answers. A third process that
// resumes the version the worker left (a job delivered again) runs
// nothing: the first refund's result is saved, the second's claim holds
// its result.
func TestAgentTurnKilledBeforeAClaimResumesTheCall(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			g := newGroup(t, b, 0)
			g.killAt("agent", "stall", "stopped")
			require.Len(t, executions(t, g.dir), 1, "the refund of 7 ran before the kill")

			e := workerEnv{backend: b.kind, url: b.url, prefix: g.prefix, dir: g.dir}
			// The version the worker left, for the third process.
			left := latestCheckpoint(t, e)

			model, res, err := e.resumeAgent(t, e.claimPlan(), "runs")
			require.NoError(t, err)
			assert.Equal(t, "refunded", res.Output)
			ex := executions(t, g.dir)
			require.Len(t, ex, 2, "each refund ran once: %v", ex)
			assert.NotEqual(t, strings.SplitN(ex[0], "|", 2)[1], strings.SplitN(ex[1], "|", 2)[1])
			sent := model.Requests()[0].Messages
			require.Len(t, sent, 4, "the input, the calls and one result each")
			b1, _ := json.Marshal(sent[2].Parts)
			b2, _ := json.Marshal(sent[3].Parts)
			assert.Contains(t, string(b1), `{\"refunded\":7}`, "the saved result answers the first call")
			assert.Contains(t, string(b2), `{\"refunded again\":9}`, "the second ran in the resuming process")

			// A third process resumes the version the worker left.
			restoreCheckpoint(t, e, left)
			model, _, err = e.resumeAgent(t, e.claimPlan(), "runs")
			require.NoError(t, err)
			assert.Len(t, executions(t, g.dir), 2, "nothing runs again")
			sent = model.Requests()[0].Messages
			b2, _ = json.Marshal(sent[3].Parts)
			assert.Contains(t, string(b2), `{\"refunded again\":9}`, "the claim's stored result answers the second call")
		})
	}
}

// runsStore opens the plan's runs store in the test process.
func runsStore(t *testing.T, e workerEnv) runtime.CheckpointStore {
	if e.backend == "redis" {
		s, err := sqlite.Open(context.Background(), filepath.Join(e.dir, "runs.db"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return openStore(t, backend{e.backend, e.url}, e.prefix).(runtime.CheckpointStore)
}

// latestCheckpoint returns the run's latest checkpoint.
func latestCheckpoint(t *testing.T, e workerEnv) runtime.Checkpoint {
	cp, ok, err := runsStore(t, e).LatestCheckpoint(context.Background(), agentRun)
	require.NoError(t, err)
	require.True(t, ok)
	return cp
}

// restoreCheckpoint starts the run again from cp: its versions are deleted
// and cp saved as version 1.
func restoreCheckpoint(t *testing.T, e workerEnv, cp runtime.Checkpoint) {
	s := runsStore(t, e)
	require.NoError(t, s.DeleteCheckpoints(context.Background(), agentRun))
	cp.Version = 0
	_, err := s.SaveCheckpoint(context.Background(), cp)
	require.NoError(t, err)
}
