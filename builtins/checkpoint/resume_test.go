package checkpoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
)

// dyingStore is a checkpoint store whose process dies after its dieAfter-th
// save: from then on nothing it is asked to save is written, as nothing is
// once a process is killed.
//
// With inWrite the process dies during that save: the row is committed but
// the save does not return it, as when the process is killed while the
// database acknowledges the commit.
type dyingStore struct {
	runtime.CheckpointStore
	dieAfter int32
	inWrite  bool
	saves    atomic.Int32
	dead     atomic.Bool
}

func (s *dyingStore) SaveCheckpoint(ctx context.Context, cp runtime.Checkpoint) (int, error) {
	if s.dead.Load() {
		return 0, errors.New("the process is dead")
	}
	v, err := s.CheckpointStore.SaveCheckpoint(ctx, cp)
	if err == nil && s.saves.Add(1) == s.dieAfter {
		s.dead.Store(true)
		if s.inWrite {
			return 0, errors.New("the process died during the write")
		}
	}
	return v, err
}

func toolCallsResponse(id, name, args string) rt.Response {
	return rt.Response{Stream: []runtime.Delta{{FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{ID: id, Name: name, Arguments: args}}}}}
}

// agentPlan checkpoints each turn, and each tool call, of a run whose
// refund tool has effects.
func agentPlan() *plan.Plan {
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{"after_tool": true}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "balance": {}}
	return p
}

// TestAgentResumeNeverRefundsTwice kills a run's process at each point of an
// agent turn that refunds an order (after the model answered with the tool
// call, before its save; after the save of the model's tool call, and
// during it; inside the refund after its effect; during the save of its
// result, and after it; after the turn) and resumes it in a new process on
// the same store: the refund is made at most once, a call whose outcome
// was not saved is in doubt instead of made again, and a saved result
// answers the model instead of the tool running again.
func TestAgentResumeNeverRefundsTwice(t *testing.T) {
	stores := map[string]func(t *testing.T) runtime.CheckpointStore{
		"sqlite": func(t *testing.T) runtime.CheckpointStore {
			s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "runs.db"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		"postgres": func(t *testing.T) runtime.CheckpointStore {
			url := os.Getenv("AGENTC_TEST_POSTGRES_URL")
			if url == "" {
				t.Skip("AGENTC_TEST_POSTGRES_URL is not set")
			}
			s, err := postgres.Open(context.Background(), url, "")
			require.NoError(t, err)
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
	// reproposed is a model that, asked again, proposes the refund again.
	reproposed := []rt.Response{toolCallsResponse("c1", "refund", `{"order":7}`), {Deltas: []string{"refunded"}}}
	cases := []struct {
		name     string
		dieAfter int32
		inWrite  bool
		inTool   bool
		// second is the model of the new process, refunds the refunds made
		// in all, inDoubt whether the resumed turn ends in doubt.
		second  []rt.Response
		refunds int32
		inDoubt bool
	}{
		{name: "after the model answered, before the tool call's save", dieAfter: 1,
			second: []rt.Response{toolCallsResponse("c1", "refund", `{"order":7}`), {Deltas: []string{"refunded"}}}, refunds: 1},
		{name: "during the save of the tool call", dieAfter: 2, inWrite: true, inDoubt: true, second: reproposed},
		{name: "between the tool call and the tool", dieAfter: 2, inDoubt: true, second: reproposed},
		{name: "during the tool", dieAfter: 99, inTool: true, refunds: 1, inDoubt: true, second: reproposed},
		{name: "during the save of the tool's result", dieAfter: 3, inWrite: true,
			second: []rt.Response{{Deltas: []string{"refunded"}}}, refunds: 1},
		{name: "after the tool's result was saved", dieAfter: 3,
			second: []rt.Response{{Deltas: []string{"refunded"}}}, refunds: 1},
		{name: "after the turn", dieAfter: 4, refunds: 1},
	}
	for sname, open := range stores {
		for i, tc := range cases {
			t.Run(sname+"/"+tc.name, func(t *testing.T) {
				base := open(t)
				runID := "refund-" + sname + "-" + string(rune('a'+i)) + "-" + t.Name()
				_ = base.DeleteCheckpoints(context.Background(), runID)
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: runID})
				store := &dyingStore{CheckpointStore: base, dieAfter: tc.dieAfter, inWrite: tc.inWrite}
				var refunds atomic.Int32
				refundIn := func(store *dyingStore) runtime.ToolFunc {
					return func(_ context.Context, c *runtime.ToolCall) (any, error) {
						if store.dead.Load() {
							return nil, errors.New("the process is dead")
						}
						refunds.Add(1)
						if tc.inTool {
							store.dead.Store(true)
						}
						return map[string]any{"refunded": c.Args["order"]}, nil
					}
				}
				tools := map[string]runtime.ToolFunc{"refund": refundIn(store)}
				first := rt.NewModel(rt.Response{Deltas: []string{"hello"}},
					toolCallsResponse("c1", "refund", `{"order":7}`), rt.Response{Deltas: []string{"refunded"}})
				pl := rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": first},
					Tools: tools, Checkpoints: store})
				res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "hi"})
				require.NoError(t, err)
				_, _ = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: res.Messages, Input: "refund order 7"})
				require.NoError(t, pl.Close())

				second := rt.NewModel(tc.second...)
				tc.inTool = false
				store2 := &dyingStore{CheckpointStore: base}
				pl = rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": second},
					Tools: map[string]runtime.ToolFunc{"refund": refundIn(store2)}, Checkpoints: store2})
				c, err := pl.Checkpointer("")
				require.NoError(t, err)
				_, err = c.Resume(ctx, runID)
				require.NoError(t, err)
				msgs := pl.Transcript(ctx)
				req := runtime.AgentRequest{Model: "primary", Messages: msgs}
				if !holdsUser(msgs, "refund order 7") {
					req.Input = "refund order 7"
				}
				if tc.dieAfter == 4 {
					assert.Equal(t, "refunded", msgs[len(msgs)-1].Content, "the turn was saved whole")
					assert.Equal(t, int32(1), refunds.Load())
					return
				}
				res, err = pl.RunAgent(ctx, req)
				var doubt *runtime.InDoubtError
				if tc.inDoubt {
					require.ErrorAs(t, err, &doubt, "a call whose outcome was not saved is in doubt")
					assert.Equal(t, "refund", doubt.Tool)
					assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
					assert.Empty(t, second.Requests(), "the model is not asked again")
				} else {
					require.NoError(t, err)
					assert.Equal(t, "refunded", res.Output)
				}
				assert.Equal(t, tc.refunds, refunds.Load(), "refunds made")
				if tc.dieAfter == 3 && !tc.inDoubt {
					reqs := second.Requests()
					require.Len(t, reqs, 1)
					last := reqs[0].Messages[len(reqs[0].Messages)-1]
					assert.Equal(t, "tool", last.Role)
					b, _ := json.Marshal(last.Parts)
					assert.Contains(t, string(b), `{\"refunded\":7}`, "the saved result answers the call")
				}
			})
		}
	}
}

func holdsUser(msgs []runtime.Message, text string) bool {
	for _, m := range msgs {
		if m.Role == "user" && m.Content == text {
			return true
		}
	}
	return false
}

// TestAgentResumeTwoCallsOfOneStep kills the process inside the second of
// two refunds the model asked for in one step, after the first's result
// was saved: resumed, the first is answered from its record, the second is
// in doubt, and neither is made again.
func TestAgentResumeTwoCallsOfOneStep(t *testing.T) {
	base := runtime.NewMemoryCheckpoints()
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "two"})
	made := map[float64]int{}
	var mu sync.Mutex
	store := &dyingStore{CheckpointStore: base, dieAfter: 99}
	refund := func(_ context.Context, c *runtime.ToolCall) (any, error) {
		if store.dead.Load() {
			return nil, errors.New("the process is dead")
		}
		mu.Lock()
		defer mu.Unlock()
		order := c.Args["order"].(float64)
		made[order]++
		if order == 8 {
			store.dead.Store(true)
		}
		return map[string]any{"refunded": order}, nil
	}
	both := rt.Response{Stream: []runtime.Delta{{FinishReason: runtime.FinishToolCalls, ToolCalls: []runtime.ToolCallDelta{
		{Index: 0, ID: "c1", Name: "refund", Arguments: `{"order":7}`}, {Index: 1, ID: "c2", Name: "refund", Arguments: `{"order":8}`}}}}}
	pl := rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel(both)},
		Tools: map[string]runtime.ToolFunc{"refund": refund}, Checkpoints: store})
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund 7 and 8", MaxParallel: 1})
	require.Error(t, err)
	require.NoError(t, pl.Close())

	second := rt.NewModel(rt.Response{Deltas: []string{"done"}})
	pl = rt.Build(t, agentPlan(), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": second},
		Tools: map[string]runtime.ToolFunc{"refund": refund}, Checkpoints: base})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	_, err = c.Resume(ctx, "two")
	require.NoError(t, err)
	res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Messages: pl.Transcript(ctx)})
	var doubt *runtime.InDoubtError
	require.ErrorAs(t, err, &doubt)
	assert.Equal(t, "refund", doubt.Tool)
	assert.Equal(t, map[float64]int{7: 1, 8: 1}, made, "each refund made once")
	assert.Zero(t, second.Calls())
	assert.Len(t, res.Messages, 2, "the step's calls stay unanswered until a person settles the one in doubt")
}
