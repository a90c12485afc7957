package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestRunAgentNeverAnswersACallFromAnEarlierCallsRecord: a model that gives
// its tool calls no id has each numbered from its place in the answer
// (call_1), so the record key of a call (the answer's index, the id, the
// arguments) can name two calls of one run: the host's second turn started
// from a shortened history (or, resumed, had the first turn's messages
// dropped from the transcript), its model made the same call at the same
// place, and the process stopped after the call was saved, before the tool
// ran. The resumed turn answered the call from the first turn's record: a
// refund never made was told made, a lookup got the first turn's result.
// A call is answered only from a record made after its turn recorded it:
// the refund is in doubt and nothing runs, the lookup runs again.
func TestRunAgentNeverAnswersACallFromAnEarlierCallsRecord(t *testing.T) {
	for _, tool := range []string{"refund", "lookup"} {
		for _, how := range []string{"shortened history", "resumed transcript edited"} {
			t.Run(tool+"/"+how, func(t *testing.T) {
				base := runtime.NewMemoryCheckpoints()
				// Saves of the first turn: the call, its result, the turn;
				// of the second: the call, then the process stops.
				store := &stoppingStore{CheckpointStore: base, n: 4}
				var runs atomic.Int32
				toolsOf := func(dead func() bool) map[string]runtime.ToolFunc {
					tools := map[string]runtime.ToolFunc{}
					for _, name := range []string{"refund", "lookup"} {
						tools[name] = func(context.Context, *runtime.ToolCall) (any, error) {
							if dead() {
								return nil, errors.New("the process is dead")
							}
							return fmt.Sprint(name, " ", runs.Add(1)), nil
						}
					}
					return tools
				}
				call := callTools(use("", tool, `{"order":7}`))
				first := rt.NewModel(call, rt.Response{Deltas: []string{"done"}}, call)
				pl := rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": first}, Tools: toolsOf(store.dead), Checkpoints: store})
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "stale"})
				res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "order 7"})
				require.NoError(t, err)
				require.Equal(t, "call_1", res.Messages[1].ToolCalls[0].ID)
				history := res.Messages
				if how == "shortened history" {
					history = nil
				}
				_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: history, Input: "order 7"})
				require.Error(t, err)
				require.True(t, store.dead())
				require.Equal(t, int32(1), runs.Load(), "the second call did not run")
				require.NoError(t, pl.Close())

				second := rt.NewModel(rt.Response{Deltas: []string{"done again"}})
				pl = rt.Build(t, refundPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": second}, Tools: toolsOf(func() bool { return false }), Checkpoints: base})
				cp, err := pl.Checkpointer("")
				require.NoError(t, err)
				_, err = cp.Resume(ctx, "stale")
				require.NoError(t, err)
				msgs := pl.Transcript(ctx)
				if how != "shortened history" {
					// The host drops the first turn's messages: the call
					// is at the place of the first turn's.
					require.Len(t, msgs, 6)
					msgs = append(msgs[:1], msgs[5:]...)
				}
				require.Len(t, msgs, 2)
				require.Equal(t, res.Messages[1].ToolCalls, msgs[1].ToolCalls, "the call of the first turn's key")
				res, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: msgs})
				if tool == "refund" {
					var doubt *runtime.InDoubtError
					require.ErrorAs(t, err, &doubt, "the refund is not answered from the first refund's record")
					assert.Equal(t, int32(1), runs.Load(), "nothing runs")
					assert.Zero(t, second.Calls())
					return
				}
				require.NoError(t, err)
				assert.Equal(t, int32(2), runs.Load(), "the lookup runs again")
				assert.Equal(t, []string{"call_1=lookup 2"}, answers(second.Requests()[0].Messages))
			})
		}
	}
}

// TestRunAgentNeverAnswersACallFromTheCallsItMade: a tool of an agent turn
// that makes a call of the tool chain itself (a fetch that follows a
// redirect through the chain, so that its policy holds for the second
// address too) had that call recorded under the agent call's name, so a
// process that stopped once the inner call's result was saved, before the
// outer call's, resumed the turn with the outer call answered by the inner
// one's result. Only the agent's call is recorded under its name: the
// outer call, side-effecting and without a record, is in doubt.
func TestRunAgentNeverAnswersACallFromTheCallsItMade(t *testing.T) {
	base := runtime.NewMemoryCheckpoints()
	// Saves: the model's call, then the inner call's result; the process
	// dies then.
	store := &stoppingStore{CheckpointStore: base, n: 2}
	p := refundPlan()
	p.Tools["fetch"] = plan.Tool{SideEffecting: true}
	var pl *runtime.Pipeline
	fetch := func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if c.Args["url"] == "a" {
			res, err := pl.Tool(ctx, runtime.ToolRequest{Name: "fetch", Args: map[string]any{"url": "b"}})
			if err != nil {
				return nil, err
			}
			return fmt.Sprint("a, redirected: ", res.Value), nil
		}
		return "b's page", nil
	}
	first := rt.NewModel(callTools(use("f1", "fetch", `{"url":"a"}`)), rt.Response{Deltas: []string{"unused"}})
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": first}, Checkpoints: store,
		Tools: map[string]runtime.ToolFunc{"fetch": fetch}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "inner"})
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "fetch a"})
	require.ErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
	require.True(t, store.dead())
	require.NoError(t, pl.Close())

	second := rt.NewModel(rt.Response{Deltas: []string{"done"}})
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": second}, Checkpoints: base,
		Tools: map[string]runtime.ToolFunc{"fetch": fetch}})
	cp, err := pl.Checkpointer("")
	require.NoError(t, err)
	saved, err := cp.Resume(ctx, "inner")
	require.NoError(t, err)
	require.Len(t, saved.Tools, 1, "the inner call's result")
	_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt, "the fetch is not answered from the inner call's record")
	assert.Equal(t, "fetch", doubt.Tool)
	assert.Zero(t, second.Calls())
}
