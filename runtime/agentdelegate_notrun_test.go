package runtime_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// notRunAfterActing is a delegating tool's case: lookup runs an agent turn
// ("refund 9", or one that makes no call), then, on its first attempt,
// returns the refusal that later did not run (later: given lookup's
// context and the pipeline).
type notRunAfterActing struct {
	name  string
	later func(t *testing.T, ctx context.Context, pl *runtime.Pipeline) error
}

// notRunRefusals are refusals the runtime makes for a nested run or turn
// that say it did not run: a second turn of the run while one is under
// way, a pipeline closed, a budget held by calls in flight, an open
// breaker.
func notRunRefusals() []notRunAfterActing {
	return []notRunAfterActing{
		{"run busy", func(t *testing.T, ctx context.Context, pl *runtime.Pipeline) error {
			// Another turn of the run holds it meanwhile.
			held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				_, err := pl.Turn(runtime.WithRun(context.Background(), runtime.RunOf(ctx)), runtime.TurnRequest{Input: "other"}, func(context.Context) (string, error) {
					close(held)
					<-release
					return "other", nil
				})
				done <- err
			}()
			<-held
			_, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "summarise"})
			close(release)
			require.NoError(t, <-done)
			require.ErrorIs(t, err, runtime.ErrRunBusy)
			return err
		}},
		{"pipeline closed", func(t *testing.T, ctx context.Context, _ *runtime.Pipeline) error {
			// The agent's pipeline of its second turn was replaced and
			// closed meanwhile.
			other := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{Models: map[string]runtime.ModelClient{"primary": rt.NewModel()}})
			require.NoError(t, other.Close())
			_, err := other.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "summarise"})
			require.ErrorIs(t, err, runtime.ErrClosed)
			return err
		}},
		{"budget held by calls in flight", func(*testing.T, context.Context, *runtime.Pipeline) error {
			return &runtime.BudgetError{Layer: "meter", Resource: "calls", Limit: 2, Pending: 1}
		}},
		{"breaker open", func(*testing.T, context.Context, *runtime.Pipeline) error {
			return &runtime.BreakerOpenError{Layer: "retry", Key: "primary"}
		}},
	}
}

// delegationThenRefused builds a checkpointed pipeline whose tool chain
// retries (twice) and whose read-only lookup runs an agent turn of input
// (direct: makes the turn's call of refund itself through the tool chain,
// for "refund 9", going on without it when it is refused), then fails its
// first attempt with tc's refusal; refund is side-effecting, counted, and
// refused before it runs (NotRun, a permanent failure: not tried again)
// its first refuseFirst times.
func delegationThenRefused(t *testing.T, tc notRunAfterActing, input string, refuseFirst int, direct bool) (pl *runtime.Pipeline, refunds, attempts *atomic.Int64) {
	t.Helper()
	refunds, attempts = new(atomic.Int64), new(atomic.Int64)
	var refusals atomic.Int64
	model := delegatingModel("refund order 7", runtime.ToolCallDelta{Index: 0, ID: "c_lookup", Name: "lookup", Arguments: `{"order":7}`})
	p := rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("checkpoint", `{}`)}, Tool: []plan.Layer{rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms"}`)}})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}, "lookup": {}}
	tools := map[string]runtime.ToolFunc{
		"refund": func(context.Context, *runtime.ToolCall) (any, error) {
			if refusals.Add(1) <= int64(refuseFirst) {
				return nil, runtime.NotRun(&runtime.CallError{Kind: runtime.KindPermanent, Message: "refunds: account locked"})
			}
			refunds.Add(1)
			return "ok", nil
		},
		"lookup": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			out := "looked up"
			if direct {
				if input == "refund 9" {
					_, _ = pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order": 9}})
				}
			} else {
				res, err := pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: input})
				if err != nil {
					return nil, err
				}
				out = res.Output
			}
			if attempts.Add(1) == 1 {
				return nil, tc.later(t, ctx, pl)
			}
			return out, nil
		},
	}
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}, Tools: tools, Checkpoints: runtime.NewMemoryCheckpoints()})
	return pl, refunds, attempts
}

// TestRetryDoesNotRepeatADelegatingCallRefusedAfterItActed: a tool whose
// agent turn refunded and which then returned a refusal that says it did
// not run (a later turn of it refused: the run busy, the pipeline closed,
// a budget held by calls in flight, an open breaker) was read as a call
// that did not run: a retry ran it again, and its agent refunded twice. The
// call acted: its failure is in doubt, not run again, and an agent turn
// that made it ends in doubt. So too when the tool made the refund call
// itself (through the tool chain: Pipeline.Tool), not through an agent
// turn: the refusal it returned after that call ran was read as its own
// call's, not run.
func TestRetryDoesNotRepeatADelegatingCallRefusedAfterItActed(t *testing.T) {
	for _, tc := range notRunRefusals() {
		for _, c := range []struct{ host, direct bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
			host := c.host
			t.Run(fmt.Sprintf("%s/host call %v/direct %v", tc.name, host, c.direct), func(t *testing.T) {
				if tc.name == "run busy" && !host {
					t.Skip("an agent turn holds its run: another turn of it cannot start meanwhile")
				}
				pl, refunds, attempts := delegationThenRefused(t, tc, "refund 9", 0, c.direct)
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
				var err error
				if host {
					_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"order": 7}})
				} else {
					_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7", MaxParallel: 1})
				}
				assert.Equal(t, int64(1), refunds.Load(), "the nested refund ran once")
				assert.Equal(t, int64(1), attempts.Load(), "lookup was not run again")
				require.Error(t, err)
				assert.False(t, runtime.DidNotRun(err), "%v", err)
				assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
				if host {
					assert.ErrorContains(t, err, "tool lookup ran a call that would repeat an effect (of its own or of an agent turn it ran), then failed as if it had not run")
				}
			})
		}
	}
}

// TestRetryRunsAgainADelegatingCallRefusedBeforeItsTurnActed: a tool
// whose agent turn made no call that would repeat an effect, or made one
// that was refused before it ran, and which then returned a refusal that
// says it did not run, did not run anything: a retry runs it again. So
// does one that made no such call itself, or made one refused before it
// ran.
func TestRetryRunsAgainADelegatingCallRefusedBeforeItsTurnActed(t *testing.T) {
	for _, tc := range notRunRefusals() {
		for _, nested := range []struct {
			name, input string
			refuseFirst int
			direct      bool
		}{{"no call", "summarise", 0, false}, {"refund refused", "refund 9", 1, false}, {"no call/direct", "summarise", 0, true}, {"refund refused/direct", "refund 9", 1, true}} {
			t.Run(tc.name+"/"+nested.name, func(t *testing.T) {
				if tc.name == "breaker open" {
					t.Skip("an open breaker is not tried again")
				}
				pl, refunds, attempts := delegationThenRefused(t, tc, nested.input, nested.refuseFirst, nested.direct)
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
				_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"order": 7}})
				require.NoError(t, err)
				assert.Equal(t, int64(2), attempts.Load(), "lookup ran again")
				if nested.input == "refund 9" {
					assert.Equal(t, int64(1), refunds.Load(), "the refund refused first ran on the second attempt")
				}
			})
		}
	}
}

// TestARefusalForCallsInFlightAfterActingIsInDoubt: a refusal for the
// calls in flight (BudgetError.InFlight) that ended a call which may have
// acted, or an agent turn after calls of it that would repeat an effect
// ran, was classified a failure of kind rate_limited, which a worker runs
// again and agentc serve answers 429: the turn's calls ran again. It is in
// doubt, as any other failure of such a call or turn is, and asks for no
// delay before an attempt after it (RetryAfterOf): none is to be made.
func TestARefusalForCallsInFlightAfterActingIsInDoubt(t *testing.T) {
	inFlight := &runtime.BudgetError{Layer: "meter", Resource: "calls", Limit: 2, Pending: 1}
	for name, err := range map[string]error{
		"may have run":   runtime.MayHaveRun(fmt.Errorf("tool lookup: %w", inFlight)),
		"turn ran calls": &runtime.RanCallsError{Err: inFlight, Calls: []runtime.ToolUse{{ID: "r1", Name: "refund"}}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
			assert.Equal(t, "in_doubt", runtime.KindOf(err))
			assert.False(t, runtime.IsTransient(err))
			assert.False(t, runtime.DidNotRun(err))
			d, ok := runtime.RetryAfterOf(err)
			assert.False(t, ok, "no attempt after a call in doubt: no delay before one (%s)", d)
		})
	}
}

// TestRetryDoesNotRepeatADelegatingCallWhoseTurnsPipelineClosedAfterItActed:
// a tool of an agent turn delegating to an agent of a pipeline of its own,
// replaced (a reload) and closed while that agent's turn ran, after it
// refunded: the turn's next model call was refused as not run (ErrClosed),
// which the tool returned, and a retry ran the tool again on the new
// pipeline, which refunded again. The call is in doubt, and so is the turn
// (a host's call of the tool gets the agent's turn's error: it ran calls).
func TestRetryDoesNotRepeatADelegatingCallWhoseTurnsPipelineClosedAfterItActed(t *testing.T) {
	for _, host := range []bool{true, false} {
		t.Run(fmt.Sprintf("host call %v", host), func(t *testing.T) {
			var refunds atomic.Int64
			var current atomic.Pointer[runtime.Pipeline]
			agent := func() *runtime.Pipeline {
				p := rt.Plan(plan.Chains{})
				p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
				var pl *runtime.Pipeline
				pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": delegatingModel("", runtime.ToolCallDelta{})},
					Tools: map[string]runtime.ToolFunc{"refund": func(context.Context, *runtime.ToolCall) (any, error) {
						refunds.Add(1)
						if current.CompareAndSwap(pl, nil) {
							// Replaced by a reload meanwhile, and closed.
							require.NoError(t, pl.Close())
						}
						return "ok", nil
					}}})
				return pl
			}
			current.Store(agent())
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("retry", `{"max_attempts":2,"initial_delay":"1ms"}`)}})
			p.Tools = map[string]plan.Tool{"lookup": {}}
			var attempts atomic.Int64
			model := delegatingModel("refund order 7", runtime.ToolCallDelta{Index: 0, ID: "c_lookup", Name: "lookup", Arguments: `{"order":7}`})
			pl := rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model},
				Tools: map[string]runtime.ToolFunc{"lookup": func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
					attempts.Add(1)
					sub := current.Load()
					if sub == nil {
						sub = agent()
						current.Store(sub)
					}
					res, err := sub.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund 9"})
					return res.Output, err
				}}})
			ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
			var err error
			if host {
				_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "lookup", Args: map[string]any{"order": 7}})
			} else {
				_, err = pl.RunAgent(ctx, runtime.AgentRequest{Model: "primary", Input: "refund order 7"})
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, runtime.ErrClosed)
			assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "%v", err)
			assert.Equal(t, int64(1), attempts.Load(), "lookup was not run again")
			assert.Equal(t, int64(1), refunds.Load(), "the refund ran once")
		})
	}
}
