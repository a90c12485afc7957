package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/providers/openai"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// refundServer is a loopback OpenAI chat completions server whose first
// answer calls refund; any later request is answered with text.
func refundServer(t *testing.T) *httptest.Server {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Connection", "close") // the next call dials
		chunk := func(delta map[string]any, finish any) {
			b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		if n.Add(1) == 1 {
			chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
				"function": map[string]any{"name": "refund", "arguments": `{"order_id":"N1","amount":5}`}}}}, nil)
			chunk(map[string]any{}, "tool_calls")
		} else {
			chunk(map[string]any{"role": "assistant", "content": "refunded"}, nil)
			chunk(map[string]any{}, "stop")
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRunAgentErrorAfterAnEffectSaysItRan: the provider goes down after
// the answer whose refund ran; the next model call's connection is
// refused. The turn's error proved that call did not run, and a worker
// following Classify redelivered the job, refunding twice: it now says
// the refund ran (not DidNotRun, final), and still reaches the dial error.
// A read-only or retry_safe tool that ran leaves the error as it was.
func TestRunAgentErrorAfterAnEffectSaysItRan(t *testing.T) {
	for _, tc := range []struct {
		name string
		tool plan.Tool
		ran  bool
	}{
		{"side-effecting", plan.Tool{SideEffecting: true}, true},
		{"retry_safe", plan.Tool{SideEffecting: true, RetrySafe: true}, false},
		{"read-only", plan.Tool{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := refundServer(t)
			client, err := openai.New(openai.Config{Model: "m", BaseURL: srv.URL + "/v1"})
			require.NoError(t, err)
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"refund": tc.tool}
			var refunds atomic.Int32
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": client},
				Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
					refunds.Add(1)
					srv.Close() // the provider goes down
					return "refunded", nil
				}}})
			res, err := pl.RunAgent(context.Background(), runtime.AgentRequest{Model: "primary", Input: "refund N1 5"})
			require.Error(t, err)
			assert.Equal(t, int32(1), refunds.Load())
			var oe *net.OpError
			require.ErrorAs(t, err, &oe, "the cause is reached: %v", err)
			assert.Equal(t, "dial", oe.Op)
			var rc *runtime.RanCallsError
			if !tc.ran {
				assert.True(t, runtime.DidNotRun(err), "%v", err)
				assert.Equal(t, runtime.ClassFailure, runtime.Classify(err))
				assert.False(t, errors.As(err, &rc))
				return
			}
			assert.False(t, runtime.DidNotRun(err), "the refund ran: %v", err)
			assert.True(t, runtime.Classify(err).Final(), "a redelivered job would refund again: %v", runtime.Classify(err))
			assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
			assert.Equal(t, "in_doubt", runtime.KindOf(err))
			assert.False(t, runtime.IsTransient(err))
			assert.ErrorIs(t, err, runtime.ErrRan)
			require.ErrorAs(t, err, &rc)
			require.Len(t, rc.Calls, 1)
			assert.Equal(t, "refund", rc.Calls[0].Name)
			assert.Equal(t, "call_1", rc.Calls[0].ID)
			assert.Contains(t, err.Error(), `refund (call "call_1")`)
			last := res.Messages[len(res.Messages)-1]
			assert.Equal(t, "tool", last.Role, "the transcript holds the refund's result, to go on from")
		})
	}
}

// TestRunAgentStoreOutageAfterAnEffectSaysItRan: the meter's store fails
// after the refund ran: the next model call is refused before it runs
// (store unavailable), which proved that the turn did not run.
func TestRunAgentStoreOutageAfterAnEffectSaysItRan(t *testing.T) {
	store := storetest.Redis(t)
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":100},"scope":"key","store":"shared"}`)}})
	p.Stores = map[string]plan.Store{"shared": {Kind: "memory"}}
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	model := rt.NewModel(callTools(use("r1", "refund", `{"order_id":"N1"}`)), rt.Response{Deltas: []string{"done"}})
	var refunds atomic.Int32
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Backends: map[string]runtime.StoreBackend{"shared": store},
		Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			refunds.Add(1)
			require.NoError(t, store.Close()) // the store goes down
			return "refunded", nil
		}}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1", Tenant: "acme"})
	_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund N1"})
	require.ErrorIs(t, err, runtime.ErrStoreUnavailable, "the cause is reached")
	assert.Equal(t, int32(1), refunds.Load())
	assert.Equal(t, 1, model.Calls(), "the second model call was refused")
	assert.False(t, runtime.DidNotRun(err), "the refund ran: %v", err)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	var rc *runtime.RanCallsError
	require.ErrorAs(t, err, &rc)
	assert.Equal(t, []string{"r1"}, []string{rc.Calls[0].ID})
}

// TestRunAgentEveryExitAfterAnEffectSaysItRan: whatever ends the turn
// after the refund ran (a model call's failure, a block, a budget, the
// caller's cancellation, an OnToolCalls hook's error before the next
// step's calls), the error says the refund ran and keeps its own class
// when that is final.
func TestRunAgentEveryExitAfterAnEffectSaysItRan(t *testing.T) {
	refundThenLookup := callTools(use("r1", "refund", `{"order_id":"N1"}`))
	for _, tc := range []struct {
		name  string
		next  rt.Response
		class runtime.Class
		is    error
		as    any
	}{
		{"rate limited, not run", rt.Response{Err: runtime.NotRun(&runtime.CallError{Kind: runtime.KindRateLimited, Layer: "limit"})},
			runtime.ClassInDoubt, runtime.ErrNotRun, new(*runtime.CallError)},
		{"blocked", rt.Response{Err: &runtime.BlockedError{Layer: "guard", Message: "no"}}, runtime.ClassBlocked, nil, new(*runtime.BlockedError)},
		{"budget", rt.Response{Err: &runtime.BudgetError{Layer: "meter", Resource: "calls", Limit: 1, Spent: 1}}, runtime.ClassBudget, nil, new(*runtime.BudgetError)},
		{"cancelled", rt.Response{Hang: true}, runtime.ClassInDoubt, context.Canceled, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			model := rt.NewModel(refundThenLookup, tc.next)
			p := rt.Plan(plan.Chains{})
			p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
					if tc.next.Hang {
						defer cancel()
					}
					return "refunded", nil
				}}})
			_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund N1"})
			require.Error(t, err)
			assert.Equal(t, tc.class, runtime.Classify(err), "%v", err)
			assert.False(t, runtime.DidNotRun(err), "%v", err)
			var rc *runtime.RanCallsError
			require.ErrorAs(t, err, &rc)
			assert.Equal(t, "refund", rc.Calls[0].Name)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			if tc.as != nil {
				assert.ErrorAs(t, err, tc.as)
			}
		})
	}
}

// saveHook is a test layer whose OnToolCalls hook (as a checkpoint
// layer's save) fails from its second run on, with saveDown.
type saveHook struct{ runs atomic.Int32 }

var saveDown = runtime.StoreUnavailable(errors.New("save failed"))

func (h *saveHook) Provision(b *runtime.BuildContext) error {
	if _, err := b.Checkpoints(""); err != nil {
		return err
	}
	b.OnToolCalls(func(context.Context) error {
		if h.runs.Add(1) > 1 {
			return saveDown
		}
		return nil
	})
	return nil
}

func (h *saveHook) WrapTool(next runtime.ToolHandler) runtime.ToolHandler { return next }

func init() {
	runtime.Register(runtime.Module{
		ID: "test.savehook", Stages: []plan.Stage{plan.StageTool},
		New: func() runtime.Middleware { return &saveHook{} },
	})
}

// TestRunAgentHookErrorAfterAnEffectSaysItRan: the OnToolCalls hook (a
// checkpoint's save) fails before the second step's calls run; the first
// step's refund had run.
func TestRunAgentHookErrorAfterAnEffectSaysItRan(t *testing.T) {
	model := rt.NewModel(callTools(use("r1", "refund", `{"order_id":"N1"}`)), callTools(use("r2", "refund", `{"order_id":"N2"}`)))
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("test.savehook", `{}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	var refunds atomic.Int32
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			refunds.Add(1)
			return "refunded", nil
		}}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund N1 and N2"})
	require.ErrorIs(t, err, saveDown)
	assert.Equal(t, int32(1), refunds.Load())
	assert.False(t, runtime.DidNotRun(err), "%v", err)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	var rc *runtime.RanCallsError
	require.ErrorAs(t, err, &rc)
	assert.Len(t, rc.Calls, 1)
}

// TestTurnAroundAnAgentSaysItsEffectsRan: an agent turn run in a host's
// turn hands the turn's layers its error as it is (a failure they read
// the text of, not a final one); the host's turn returns it saying that
// the refund ran.
func TestTurnAroundAnAgentSaysItsEffectsRan(t *testing.T) {
	model := rt.NewModel(callTools(use("r1", "refund", `{"order_id":"N1"}`)), rt.Response{Err: runtime.NotRun(errors.New("upstream down"))})
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) { return "refunded", nil }}})
	var bodyErr error
	_, err := pl.Turn(context.Background(), runtime.TurnRequest{Input: "outer"}, func(ctx context.Context) (string, error) {
		res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund N1"})
		bodyErr = err
		return res.Output, err
	})
	require.Error(t, bodyErr)
	assert.Equal(t, runtime.ClassFailure, runtime.Classify(bodyErr), "the turn's layers see the failure: %v", bodyErr)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
	assert.False(t, runtime.DidNotRun(err))
	assert.ErrorIs(t, err, runtime.ErrNotRun, "the cause is reached")
	var rc *runtime.RanCallsError
	require.ErrorAs(t, err, &rc)
	assert.Equal(t, "r1", rc.Calls[0].ID)
}

// TestRunAgentToolRefusedForCallsInFlightDidNotRun: a side-effecting
// tool call the meter refused only for another call in flight
// (BudgetError.InFlight, a failure to try again since it is no longer a
// budget's final refusal) counted as one that ran, so the turn that then
// failed was in doubt, naming a refund that never ran / the refusal did
// not run, and the turn's failure stays a failure to try again.
func TestRunAgentToolRefusedForCallsInFlightDidNotRun(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"budget":{"calls":1},"scope":"key"}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "slow": {}}
	model := rt.NewModel(callTools(use("r1", "refund", `{"order_id":"N1"}`)),
		rt.Response{Err: &runtime.CallError{Kind: runtime.KindTransient, Layer: "provider"}})
	var refunds atomic.Int32
	held, release := make(chan struct{}), make(chan struct{})
	pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
		Tools: map[string]runtime.ToolFunc{
			"refund": func(context.Context, *runtime.ToolCall) (any, error) { refunds.Add(1); return "refunded", nil },
			"slow": func(context.Context, *runtime.ToolCall) (any, error) {
				close(held)
				<-release
				return "ok", nil
			}}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1", Tenant: "acme"})
	slow := make(chan error, 1)
	go func() {
		_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "r2", Tenant: "acme"}),
			runtime.ToolRequest{Name: "slow", Args: map[string]any{}})
		slow <- err
	}()
	<-held
	_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund N1"})
	close(release)
	require.NoError(t, <-slow)
	require.Error(t, err)
	assert.Zero(t, refunds.Load(), "the meter refused the refund")
	var rc *runtime.RanCallsError
	assert.False(t, errors.As(err, &rc), "no call ran: %v", err)
	assert.Equal(t, runtime.ClassFailure, runtime.Classify(err), "%v", err)
}
