package runtime_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/retry"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// delegatingModel answers a transcript whose first message is first with
// call, one whose first message is "refund 9" with a refund of order 9
// (each time under a new id), and one that ends with a tool result with
// text.
func delegatingModel(first string, call runtime.ToolCallDelta) runtime.ModelClient {
	var ids atomic.Int64
	return runtime.ModelFunc(func(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		input, last := req.Messages[0].Text(), req.Messages[len(req.Messages)-1]
		if last.Role == "tool" {
			yield(runtime.Delta{Text: input + ": done", FinishReason: "stop"})
			return nil
		}
		var calls []runtime.ToolCallDelta
		switch input {
		case first:
			calls = []runtime.ToolCallDelta{call}
		case "refund 9":
			calls = []runtime.ToolCallDelta{{Index: 0, ID: fmt.Sprint("i_refund_", ids.Add(1)), Name: "refund", Arguments: `{"order":9}`}}
		}
		yield(runtime.Delta{ToolCalls: calls, FinishReason: runtime.FinishToolCalls})
		return nil
	})
}

// delegationTools is the tools of a delegation case: refund (side-effecting,
// counted) and lookup, whose tool runs an agent turn of pl ("refund 9")
// and then fails its first attempt with fail (given the attempt's
// context).
type delegationTools struct {
	pl       *runtime.Pipeline
	refunds  atomic.Int64
	attempts atomic.Int64
}

func (d *delegationTools) tools(fail func(ctx context.Context) error) map[string]runtime.ToolFunc {
	return map[string]runtime.ToolFunc{
		"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			d.refunds.Add(1)
			return "ok", nil
		},
		"lookup": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			res, err := d.pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund 9"})
			if err != nil {
				return nil, err
			}
			if d.attempts.Add(1) == 1 {
				return nil, fail(ctx)
			}
			return res.Output, nil
		},
	}
}

// retriedDelegation runs a turn ("refund order 7") that calls a read-only
// lookup under a tool-chain retry; lookup's tool runs an agent turn that
// refunds order 9, then fails its first attempt with fail. It returns how
// often the refund ran and the turn's error.
func retriedDelegation(t *testing.T, turn []plan.Layer, retry string, fail func(ctx context.Context) error) (int, error) {
	t.Helper()
	model := delegatingModel("refund order 7", runtime.ToolCallDelta{Index: 0, ID: "c_lookup", Name: "lookup", Arguments: `{"order":7}`})
	var d delegationTools
	p := rt.Plan(plan.Chains{Turn: turn, Tool: []plan.Layer{rt.Layer("retry", retry)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "lookup": {}}
	d.pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: d.tools(fail), Checkpoints: runtime.NewMemoryCheckpoints()})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err := d.pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7", MaxParallel: 1})
	return int(d.refunds.Load()), err
}

// A retry does not run again a read-only call whose tool ran an agent turn
// that refunded: run again, its agent would refund again. The call is in
// doubt, checkpointed or not.
func TestRetryDoesNotRepeatADelegatingCall(t *testing.T) {
	checkpoint := []plan.Layer{rt.Layer("checkpoint", `{"after_tool":true,"keep":0}`)}
	for _, tc := range []struct {
		name  string
		turn  []plan.Layer
		retry string
		fail  func(ctx context.Context) error
		// inDoubt: the attempt was cut while the tool ran (a failure
		// the tool answered itself is told to the model).
		inDoubt bool
	}{
		{"attempt timed out, checkpointed", checkpoint, `{"max_attempts":2,"attempt_timeout":"200ms","initial_delay":"1ms"}`,
			func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, true},
		{"attempt timed out", nil, `{"max_attempts":2,"attempt_timeout":"200ms","initial_delay":"1ms"}`,
			func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, true},
		{"transient failure", nil, `{"max_attempts":2,"initial_delay":"1ms"}`,
			func(context.Context) error {
				return &runtime.CallError{Kind: runtime.KindTransient, Message: "lookup backend unavailable"}
			}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refunds, err := retriedDelegation(t, tc.turn, tc.retry, tc.fail)
			assert.Equal(t, 1, refunds, "the nested refund ran once")
			if tc.inDoubt {
				assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

// hostDelegation runs lookup (delegationTools) as a call the host makes
// (Pipeline.Tool outside any agent turn) or as the own call of a tool of an
// agent turn ("outer"), under a tool-chain retry. It returns how often the
// refund ran and lookup's error.
func hostDelegation(t *testing.T, viaTool bool, retry string, fail func(ctx context.Context) error) (int, error) {
	t.Helper()
	model := delegatingModel("look up order 7", runtime.ToolCallDelta{Index: 0, ID: "c_outer", Name: "outer", Arguments: `{}`})
	var d delegationTools
	var lookupErr error
	lookup := runtime.ToolRequest{Name: "lookup", Args: map[string]any{"order": 7}}
	tools := d.tools(fail)
	tools["outer"] = func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
		_, lookupErr = d.pl.Tool(ctx, lookup)
		return "looked up", nil
	}
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", retry)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "lookup": {}, "outer": {}}
	d.pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	if viaTool {
		_, err := d.pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "look up order 7"})
		require.NoError(t, err)
	} else {
		_, lookupErr = d.pl.Tool(ctx, lookup)
	}
	return int(d.refunds.Load()), lookupErr
}

// A retry does not run again a read-only call that the host made (not an
// agent turn), nor one a tool of an agent turn made of its own, whose tool
// ran an agent turn that refunded: run again, that agent would refund
// again. The call is marked Delegated as an agent turn's call is.
func TestRetryDoesNotRepeatAHostCallThatDelegated(t *testing.T) {
	for _, viaTool := range []bool{false, true} {
		for _, tc := range []struct {
			name  string
			retry string
			fail  func(ctx context.Context) error
			// class and why: the lookup's error, cut while its tool ran
			// (in doubt), or failing of its own (not run again).
			class runtime.Class
			why   string
		}{
			{"attempt timed out", `{"max_attempts":2,"attempt_timeout":"200ms","initial_delay":"1ms"}`,
				func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
				runtime.ClassInDoubt, "after the agent turn it ran had started a call that would repeat an effect"},
			{"transient failure", `{"max_attempts":2,"initial_delay":"1ms"}`,
				func(context.Context) error {
					return &runtime.CallError{Kind: runtime.KindTransient, Message: "lookup backend unavailable"}
				}, runtime.ClassFailure, "ran a call that would repeat an effect (through an agent turn it ran or of its own)"},
		} {
			t.Run(fmt.Sprintf("%s/via tool %v", tc.name, viaTool), func(t *testing.T) {
				refunds, err := hostDelegation(t, viaTool, tc.retry, tc.fail)
				assert.Equal(t, 1, refunds, "the nested refund ran once")
				require.Error(t, err, "the failed lookup is not run again")
				assert.Equal(t, tc.class, runtime.Classify(err), "%v", err)
				assert.ErrorContains(t, err, tc.why)
			})
		}
	}
}

// ownCallThenFailed runs, under a tool-chain retry, a read-only lookup
// whose tool makes a call of its own (Pipeline.Tool, from inside the tool)
// of a side-effecting refund, then fails its first attempt with fail
// (given the attempt's context); refund is refused before it runs (NotRun)
// when refuse is set. It returns how often the refund ran, how often
// lookup ran, and lookup's error.
func ownCallThenFailed(t *testing.T, retry string, refuse bool, fail func(ctx context.Context) error) (refunds, attempts int, err error) {
	t.Helper()
	var nRefunds, nAttempts atomic.Int64
	var pl *runtime.Pipeline
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", retry)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "lookup": {}}
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel()}, Tools: map[string]runtime.ToolFunc{
		"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			if refuse {
				return nil, runtime.NotRun(&runtime.CallError{Kind: runtime.KindPermanent, Message: "refunds: account locked"})
			}
			nRefunds.Add(1)
			return "ok", nil
		},
		"lookup": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			_, _ = pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order": 9}})
			if nAttempts.Add(1) == 1 {
				return nil, fail(ctx)
			}
			return "looked up", nil
		},
	}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"order": 7}})
	return int(nRefunds.Load()), int(nAttempts.Load()), err
}

// TestRetryDoesNotRepeatACallWhoseOwnCallActed: a read-only tool that made
// a side-effecting call of its own (Pipeline.Tool from inside the tool),
// which ran, then failed transiently, was run again by a retry, and the
// refund ran twice: its call was not Delegated, as one whose agent turn
// started such a call is. It is now: not run again, and in doubt when its
// attempt was cut while it ran. A tool whose own call was refused before
// it ran is run again.
func TestRetryDoesNotRepeatACallWhoseOwnCallActed(t *testing.T) {
	transient := func(context.Context) error {
		return &runtime.CallError{Kind: runtime.KindTransient, Message: "lookup backend unavailable"}
	}
	cut := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	t.Run("transient failure", func(t *testing.T) {
		refunds, attempts, err := ownCallThenFailed(t, `{"max_attempts":2,"initial_delay":"1ms"}`, false, transient)
		assert.Equal(t, 1, refunds, "the refund ran once")
		assert.Equal(t, 1, attempts, "lookup was not run again")
		require.Error(t, err)
		assert.Equal(t, runtime.ClassFailure, runtime.Classify(err), "%v", err)
		assert.ErrorContains(t, err, `tool "lookup" ran a call that would repeat an effect`)
	})
	t.Run("attempt timed out", func(t *testing.T) {
		refunds, attempts, err := ownCallThenFailed(t, `{"max_attempts":2,"attempt_timeout":"200ms","initial_delay":"1ms"}`, false, cut)
		assert.Equal(t, 1, refunds, "the refund ran once")
		assert.Equal(t, 1, attempts, "lookup was not run again")
		require.Error(t, err)
		assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
		assert.ErrorContains(t, err, "after a call of its own that would repeat an effect had reached its tool")
	})
	t.Run("own call refused before it ran", func(t *testing.T) {
		refunds, attempts, err := ownCallThenFailed(t, `{"max_attempts":2,"initial_delay":"1ms"}`, true, transient)
		require.NoError(t, err)
		assert.Equal(t, 0, refunds)
		assert.Equal(t, 2, attempts, "lookup ran again: its own call did not run")
	})
}
