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
)

// The agent scenario: a run whose turn refunds orders, checkpointed before
// its tool calls run and after each result, with an idempotent layer, both
// in the shared store. The worker's arg says where it stops for the kill:
// "tool" answers the refunds of orders 7 and 8 in one step and stops
// inside the second, once the first's result is saved; "model" answers the
// refund of order 7 (its arguments streamed with spaces) and stops in the
// model call that follows its saved result; "stall" runs under claimPlan
// and stops before the claim of its second refund (stallLayer).
const agentRun = "agent-run"

func (e workerEnv) agentPlan() *plan.Plan {
	p := e.sharedPlan(plan.Chains{
		Turn: []plan.Layer{rt.Layer("checkpoint", `{"store": "shared", "after_tool": true}`)},
		Tool: []plan.Layer{rt.Layer("idempotent", `{"store": "shared", "lease_ttl": "5s"}`)},
	})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	return p
}

// agentAnswer is the model's first answer in the scenario stop.
func agentAnswer(stop string) runtime.Delta {
	d := runtime.Delta{FinishReason: runtime.FinishToolCalls, ToolCalls: []runtime.ToolCallDelta{
		{Index: 0, ID: "c1", Name: "refund", Arguments: `{"order": 7}`}}}
	switch stop {
	case "tool":
		d.ToolCalls = append(d.ToolCalls, runtime.ToolCallDelta{Index: 1, ID: "c2", Name: "refund", Arguments: `{"order": 8}`})
	case "stall":
		d.ToolCalls = append(d.ToolCalls, runtime.ToolCallDelta{Index: 1, ID: "c2", Name: "refund", Arguments: `{"order": 9}`})
	}
	return d
}

func workAgent(e workerEnv) error {
	asked := 0
	model := runtime.ModelFunc(func(ctx context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		if asked++; asked > 1 {
			say("stopped")
			select {} // killed in the model call after the refund's result was saved
		}
		yield(agentAnswer(e.arg))
		return nil
	})
	refund := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		if err := e.logExecution(c); err != nil {
			return nil, err
		}
		if c.Args["order"] == 8.0 {
			say("stopped")
			select {} // killed inside the refund of 8, after the refund of 7 was saved
		}
		return map[string]any{"refunded": c.Args["order"]}, nil
	}
	p := e.agentPlan()
	if e.arg == "stall" {
		p = e.claimPlan()
	}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{
		Models: map[string]runtime.ModelClient{"primary": model}, Tools: map[string]runtime.ToolFunc{"refund": refund}})
	if err != nil {
		return err
	}
	defer pl.Close()
	_, err = pl.RunAgent(runtime.WithRun(context.Background(), runtime.Run{ID: agentRun}),
		runtime.AgentRequest{Model: "primary", Input: "refund my orders", MaxParallel: 1})
	return err
}

// TestAgentTurnKilledMidwayResumesElsewhere kills (SIGKILL) a worker in the
// middle of an agent turn that refunds orders, and resumes the run in
// another process on the same SQLite file: no refund runs twice, the
// refund the worker was inside is in doubt (the turn ends so, the model is
// not asked), and a refund whose result was saved answers the model from
// the record, each call paired with one result.
func TestAgentTurnKilledMidwayResumesElsewhere(t *testing.T) {
	for _, stop := range []string{"tool", "model"} {
		t.Run(stop, func(t *testing.T) {
			g := newGroup(t, backend{kind: "sqlite", url: filepath.Join(t.TempDir(), "runs.db")}, 0)
			g.killAt("agent", stop, "stopped")

			e := workerEnv{backend: "sqlite", url: g.b.url, dir: g.dir}
			model, res, err := e.resumeAgent(t, e.agentPlan(), "shared")

			ex := executions(t, g.dir)
			if stop == "tool" {
				var doubt *runtime.InDoubtError
				require.ErrorAs(t, err, &doubt, "the refund the worker was inside is in doubt")
				assert.Equal(t, runtime.LayerCheckpoint, doubt.Layer)
				assert.Zero(t, model.Calls(), "the model is not asked")
				assert.Len(t, ex, 2, "the refunds of 7 and 8 ran once each: %v", ex)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "refunded", res.Output)
			assert.Len(t, ex, 1, "the refund ran once: %v", ex)
			sent := model.Requests()[0].Messages
			require.Len(t, sent, 3)
			assert.Equal(t, "c1", sent[1].ToolCalls[0].ID)
			require.Equal(t, "tool", sent[2].Role)
			assert.Equal(t, "c1", sent[2].ToolCallID)
			b, _ := json.Marshal(sent[2].Parts)
			assert.True(t, strings.Contains(string(b), `{\"refunded\":7}`), "the saved result answers the call: %s", b)
		})
	}
}

// resumeAgent resumes the agent run from the checkpoints in the store
// named store in a pipeline of p, as another process would, and runs its
// turn again: the model answers "refunded", a refund that runs is logged.
func (e workerEnv) resumeAgent(t *testing.T, p *plan.Plan, store string) (*rt.Model, runtime.AgentResult, error) {
	t.Helper()
	model := rt.NewModel(rt.Response{Deltas: []string{"refunded"}})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"refund": func(_ context.Context, c *runtime.ToolCall) (any, error) {
			require.NoError(t, e.logExecution(c))
			return map[string]any{"refunded again": c.Args["order"]}, nil
		}}})
	cp, err := pl.Checkpointer(store)
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: agentRun})
	_, err = cp.Resume(ctx, agentRun)
	require.NoError(t, err)
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
	return model, res, err
}
