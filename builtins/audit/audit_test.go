package audit_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/builtins/audit"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

var ctx1 = runtime.WithRun(context.Background(), runtime.Run{ID: "run-1"})

func toolPlan(chain ...plan.Layer) *plan.Plan {
	p := rt.Plan(plan.Chains{Tool: chain})
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true, RetrySafe: true}}
	return p
}

func TestIntentThenOutcome(t *testing.T) {
	sink := &runtime.MemoryAudit{}
	tool := rt.NewTool(rt.ToolResult{Value: "ok"})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "card": "4111"}})
	require.NoError(t, err)
	recs := sink.Records()
	require.Len(t, recs, 2)
	in, out := recs[0], recs[1]
	assert.Equal(t, runtime.PhaseIntent, in.Phase)
	assert.Empty(t, in.Decision)
	assert.Equal(t, runtime.PhaseOutcome, out.Phase)
	assert.Equal(t, runtime.DecisionOK, out.Decision)
	for _, r := range recs {
		assert.Equal(t, "audit", r.Layer)
		assert.Equal(t, "tool", r.Stage)
		assert.Equal(t, "refund", r.Tool)
		assert.Equal(t, "run-1", r.RunID)
		assert.Len(t, r.ArgsDigest, 64)
		assert.Equal(t, tool.Keys()[0], r.IdempotencyKey)
		assert.Nil(t, r.Args, "raw arguments only with include_args")
		assert.Equal(t, 1, r.Attempts)
	}
	assert.False(t, out.Time.Before(in.Time))
	assert.GreaterOrEqual(t, out.Duration, time.Duration(0))
}

func TestIncludeArgs(t *testing.T) {
	sink := &runtime.MemoryAudit{}
	pl := rt.Build(t, toolPlan(rt.Layer("audit", `{"include_args": true}`)),
		runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": rt.NewTool(rt.ToolResult{Value: 1}).Func()}})
	args := map[string]any{"order_id": "A1"}
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args})
	require.NoError(t, err)
	recs := sink.Records()
	require.Len(t, recs, 2)
	assert.Equal(t, args, recs[1].Args)
	args["order_id"] = "changed"
	assert.Equal(t, "A1", recs[1].Args["order_id"], "the record holds a copy")
}

func TestDecisions(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		want  runtime.AuditDecision
		etype string
	}{
		{"ok", nil, runtime.DecisionOK, ""},
		{"failed", rt.Permanent("declined"), runtime.DecisionFailed, "permanent"},
		{"blocked", &runtime.BlockedError{Layer: "g", Message: "no"}, runtime.DecisionDenied, "blocked"},
		{"budget", &runtime.BudgetError{Layer: "m", Resource: "calls"}, runtime.DecisionDenied, "budget"},
		// A call that may have had its effect is not a failure: a person
		// settles it.
		{"in doubt", &runtime.InDoubtError{Layer: "idem", Tool: "refund", IdempotencyKey: "k"}, runtime.DecisionInDoubt, "in_doubt"},
		{"ran, outcome unrecorded", &runtime.CallError{Kind: runtime.KindPermanent, Layer: "inner", Message: "audit outcome not written",
			Err: runtime.ErrOutcomeUnrecorded}, runtime.DecisionInDoubt, "in_doubt"},
		// A call that ran but whose result was dropped or blocked: its
		// effect stands, which "failed" or "denied" would deny.
		{"ran, result dropped", runtime.Ran(rt.Permanent("result too large")), runtime.DecisionRan, "permanent"},
		{"ran, result blocked", runtime.Ran(&runtime.BlockedError{Layer: "g", Message: "no"}), runtime.DecisionRan, "blocked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &runtime.MemoryAudit{}
			tool := func(context.Context, *runtime.ToolCall) (any, error) { return nil, tt.err }
			pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool}})
			_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
			if tt.err == nil {
				assert.NoError(t, err)
			} else {
				// The error as the tool returned it (another call's doubt
				// is marked: this call ran).
				assert.ErrorIs(t, err, tt.err)
			}
			recs := sink.Records()
			require.Len(t, recs, 2)
			assert.Equal(t, tt.want, recs[1].Decision)
			assert.Equal(t, tt.etype, recs[1].ErrorType)
			if tt.err != nil {
				sum := sha256.Sum256([]byte(tt.err.Error()))
				assert.Contains(t, recs[1].ErrorMessage, "text withheld, sha256 "+hex.EncodeToString(sum[:]))
				if l := runtime.LayerOf(tt.err); l != "" {
					assert.Contains(t, recs[1].ErrorMessage, strconv.Quote(l), "the layer the error names")
				}
			}
		})
	}
}

func TestDedupedDecision(t *testing.T) {
	sink := &runtime.MemoryAudit{}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", ""), rt.Layer("idempotent", "")),
		runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	req := runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}}
	for range 2 {
		_, err := pl.Tool(ctx1, req)
		require.NoError(t, err)
	}
	recs := sink.Records()
	require.Len(t, recs, 4)
	assert.Equal(t, runtime.DecisionOK, recs[1].Decision)
	assert.Equal(t, runtime.DecisionDeduped, recs[3].Decision)
	assert.Equal(t, 1, tool.Calls())
}

// flakySink fails Append for the phases listed in fail, with err (errSink
// when nil).
type flakySink struct {
	mu   sync.Mutex
	fail map[runtime.AuditPhase]bool
	err  error
	recs []runtime.AuditRecord
}

var errSink = errors.New("disk full")

func (s *flakySink) Append(_ context.Context, r runtime.AuditRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail[r.Phase] {
		if s.err != nil {
			return s.err
		}
		return errSink
	}
	s.recs = append(s.recs, r)
	return nil
}

func TestIntentFailureDoesNotRunTheCall(t *testing.T) {
	sink := &flakySink{fail: map[runtime.AuditPhase]bool{runtime.PhaseIntent: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.Error(t, err)
	assert.Equal(t, 0, tool.Calls(), "fail closed: the call did not run")
	assert.Equal(t, "audit", runtime.LayerOf(err))
	assert.ErrorIs(t, err, errSink)
	assert.Equal(t, runtime.ClassFailure, runtime.Classify(err))
	require.Len(t, sink.recs, 1, "the intent is not written; an outcome says the call did not run")
	assert.Equal(t, runtime.PhaseOutcome, sink.recs[0].Phase)
	assert.Equal(t, runtime.DecisionFailed, sink.recs[0].Decision)
	assert.Contains(t, sink.recs[0].ErrorMessage, "the call did not run")
}

func TestOutcomeFailureIsReturned(t *testing.T) {
	sink := &flakySink{fail: map[runtime.AuditPhase]bool{runtime.PhaseOutcome: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"}, rt.ToolResult{Err: rt.Transient("boom")})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	r, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.Error(t, err)
	assert.Equal(t, "R1", r.Value, "the call ran and its result is returned")
	assert.Equal(t, "audit", runtime.LayerOf(err))
	assert.False(t, runtime.IsTransient(err), "no retry re-runs a call that ran for the sake of its record")
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err), "final: a worker does not redeliver a call whose effect may stand")
	assert.ErrorIs(t, err, errSink)

	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A2"}})
	require.Error(t, err)
	assert.Equal(t, "transient", runtime.KindOf(err), "the call's own error comes first")
	assert.ErrorIs(t, err, errSink)
	assert.Len(t, sink.recs, 2, "the intents were written")
}

// TestOutcomeUnwrittenByAnUnavailableSinkRan: a host's sink marks its
// failures as keeping the call from running (runtime.StoreUnavailable).
// Failing on the outcome, after the call ran, the error no longer says
// so: a retry would run the refund again.
func TestOutcomeUnwrittenByAnUnavailableSinkRan(t *testing.T) {
	sink := &flakySink{fail: map[runtime.AuditPhase]bool{runtime.PhaseOutcome: true}, err: runtime.StoreUnavailable(errSink)}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.Error(t, err)
	assert.Equal(t, 1, tool.Calls())
	assert.ErrorIs(t, err, errSink)
	assert.NotErrorIs(t, err, runtime.ErrStoreUnavailable, "the call ran")
	assert.False(t, runtime.DidNotRun(err), "the call ran")
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	assert.Equal(t, "in_doubt", runtime.KindOf(err))
}

func TestPanicIsRecorded(t *testing.T) {
	sink := &runtime.MemoryAudit{}
	tool := func(context.Context, *runtime.ToolCall) (any, error) { panic("bug") }
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool}})
	assert.PanicsWithValue(t, "bug", func() {
		_, _ = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
	})
	recs := sink.Records()
	require.Len(t, recs, 2)
	assert.Equal(t, runtime.DecisionFailed, recs[1].Decision)
	assert.Contains(t, recs[1].ErrorMessage, "panic; text withheld")
}

// A side-effecting tool not declared retry_safe that panics, or fails while
// its call is cancelled, may have made its effect before it stopped: its
// outcome is recorded in doubt, not failed. A retry_safe one's stays failed
// (the tests around this one).
func TestCallThatMayHaveRunIsInDoubt(t *testing.T) {
	effectPlan := func() *plan.Plan {
		p := toolPlan(rt.Layer("audit", ""))
		p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
		return p
	}
	t.Run("panic", func(t *testing.T) {
		sink := &runtime.MemoryAudit{}
		tool := func(context.Context, *runtime.ToolCall) (any, error) { panic("bug") }
		pl := rt.Build(t, effectPlan(), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool}})
		assert.PanicsWithValue(t, "bug", func() {
			_, _ = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
		})
		recs := sink.Records()
		require.Len(t, recs, 2)
		assert.Equal(t, runtime.DecisionInDoubt, recs[1].Decision)
		assert.Equal(t, "in_doubt", recs[1].ErrorType)
		assert.Contains(t, recs[1].ErrorMessage, "before it stopped (failure): panic; text withheld")
	})
	t.Run("cancelled", func(t *testing.T) {
		sink := &runtime.MemoryAudit{}
		tool := rt.NewTool(rt.ToolResult{Hang: true})
		pl := rt.Build(t, effectPlan(), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
		ctx, cancel := context.WithTimeout(ctx1, 10*time.Millisecond)
		defer cancel()
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
		require.ErrorIs(t, err, context.DeadlineExceeded, "the caller still sees the cancellation")
		recs := sink.Records()
		require.Len(t, recs, 2)
		assert.Equal(t, runtime.DecisionInDoubt, recs[1].Decision)
		assert.Equal(t, "in_doubt", recs[1].ErrorType)
		assert.Contains(t, recs[1].ErrorMessage, "before it stopped (timeout): ", "the kind the failure had")
	})
	t.Run("cancelled before it ran", func(t *testing.T) {
		// Its error proves it never reached the tool (an MCP call
		// cancelled while it waited for its server's tools to be listed
		// again): it failed, and did not act.
		sink := &runtime.MemoryAudit{}
		tool := func(ctx context.Context, _ *runtime.ToolCall) (any, error) {
			<-ctx.Done()
			return nil, runtime.NotRun(ctx.Err())
		}
		pl := rt.Build(t, effectPlan(), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool}})
		ctx, cancel := context.WithTimeout(ctx1, 10*time.Millisecond)
		defer cancel()
		_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		recs := sink.Records()
		require.Len(t, recs, 2)
		assert.Equal(t, runtime.DecisionFailed, recs[1].Decision)
	})
	t.Run("timed out", func(t *testing.T) {
		// The tool's own deadline, or an upstream's 504: it may have
		// acted, as idempotent and meter take it (the runtime marks the
		// failure runtime.MayHaveRun).
		for _, terr := range []error{
			&runtime.CallError{Status: 504, Message: "core banking gateway timeout"},
			&runtime.CallError{Kind: runtime.KindTimeout, Message: "no answer from the core within 5s"},
		} {
			sink := &runtime.MemoryAudit{}
			tool := func(context.Context, *runtime.ToolCall) (any, error) { return nil, terr }
			pl := rt.Build(t, effectPlan(), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool}})
			_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
			require.Error(t, err)
			recs := sink.Records()
			require.Len(t, recs, 2)
			assert.Equal(t, runtime.DecisionInDoubt, recs[1].Decision, terr.Error())
			assert.Equal(t, "in_doubt", recs[1].ErrorType)
		}
	})
	t.Run("failed before cancellation", func(t *testing.T) {
		sink := &runtime.MemoryAudit{}
		tool := func(context.Context, *runtime.ToolCall) (any, error) { return nil, errors.New("card declined") }
		pl := rt.Build(t, effectPlan(), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool}})
		_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
		require.Error(t, err)
		recs := sink.Records()
		require.Len(t, recs, 2)
		assert.Equal(t, runtime.DecisionFailed, recs[1].Decision, "a failure the tool reported is not in doubt")
	})
}

// A retry inside audit (trail "logical") whose attempt_timeout ends a
// side-effecting tool's attempt while the tool runs: the logical call may
// have made its effect, and its outcome is in doubt, not failed, though
// audit's own context never ended.
func TestAttemptTimeoutInsideIsInDoubt(t *testing.T) {
	p := toolPlan(rt.Layer("audit", ""),
		rt.Layer("retry", `{"max_attempts":3,"attempt_timeout":"20ms","initial_delay":"1ms","max_delay":"1ms"}`))
	p.Tools = map[string]plan.Tool{"refund": {SideEffecting: true}}
	sink := &runtime.MemoryAudit{}
	tool := rt.NewTool(rt.ToolResult{Hang: true}, rt.ToolResult{Value: "again"})
	pl := rt.Build(t, p, runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.Error(t, err)
	assert.Equal(t, runtime.ClassInDoubt, runtime.Classify(err))
	assert.Equal(t, 1, tool.Calls())
	recs := sink.Records()
	require.Len(t, recs, 2)
	assert.Equal(t, runtime.DecisionInDoubt, recs[1].Decision)
}

func TestOutcomeWrittenAfterCancellation(t *testing.T) {
	sink := &runtime.MemoryAudit{}
	tool := rt.NewTool(rt.ToolResult{Hang: true})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	ctx, cancel := context.WithTimeout(ctx1, 10*time.Millisecond)
	defer cancel()
	_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "refund", Args: map[string]any{}})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	recs := sink.Records()
	require.Len(t, recs, 2)
	assert.Equal(t, "timeout", recs[1].ErrorType)
}

func TestTurn(t *testing.T) {
	sink := &runtime.MemoryAudit{}
	pl := rt.Build(t, rt.Plan(plan.Chains{Turn: []plan.Layer{rt.Layer("audit", `{"include_args": true}`)}}), runtime.Deps{Audit: sink})
	_, err := pl.Turn(ctx1, runtime.TurnRequest{Input: "hello", Session: runtime.Session{ID: "s1"}},
		func(context.Context) (string, error) { return "hi", nil })
	require.NoError(t, err)
	_, err = pl.Turn(ctx1, runtime.TurnRequest{Input: "again"},
		func(context.Context) (string, error) { return "", rt.Permanent("no") })
	require.Error(t, err)
	recs := sink.Records()
	require.Len(t, recs, 4)
	assert.Equal(t, "turn", recs[1].Stage)
	assert.Equal(t, runtime.DecisionOK, recs[1].Decision)
	assert.Equal(t, map[string]any{"input": "hello", "session": "s1"}, recs[1].Args)
	assert.Equal(t, runtime.DecisionFailed, recs[3].Decision)
	assert.NotEqual(t, recs[1].ArgsDigest, recs[3].ArgsDigest)
}

func TestSQLiteSinkIsDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	p := toolPlan(rt.Layer("audit", `{"sink": "ledger"}`))
	p.Stores = map[string]plan.Store{"ledger": {Kind: "sqlite", Path: path}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	require.NoError(t, pl.Close())

	s, err := sqlite.Open(context.Background(), path)
	require.NoError(t, err)
	defer s.Close()
	recs, err := s.Records(context.Background(), "run-1")
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, runtime.PhaseIntent, recs[0].Phase)
	assert.Equal(t, runtime.DecisionOK, recs[1].Decision)
	assert.Equal(t, "refund", recs[1].Tool)
}

// An operator who deletes the trail's file under a running process does not
// get calls that run with their records going nowhere: the next call's
// intent is not written, and the call does not run.
func TestSQLiteFileDeletedUnderARunningPipeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	p := toolPlan(rt.Layer("audit", `{"sink": "ledger"}`))
	p.Stores = map[string]plan.Store{"ledger": {Kind: "sqlite", Path: path}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"}, rt.ToolResult{Value: "R2"})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	require.NoError(t, err)
	defer pl.Close()
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		require.NoError(t, os.Remove(f))
	}
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A2"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "audit intent not written; the call did not run")
	assert.Equal(t, 1, tool.Calls(), "fail closed: the second call did not run")
}

// Arguments and error text PostgreSQL cannot store (a NUL character, bytes
// that are not UTF-8) neither stop the call (its intent refused) nor cost
// the outcome of a call that ran.
func TestPostgresSinkKeepsRecordsOfTextItCannotStore(t *testing.T) {
	store := storetest.Postgres(t)
	p := toolPlan(rt.Layer("audit", `{"sink": "ledger", "include_args": true, "include_errors": true}`))
	p.Stores = map[string]plan.Store{"ledger": {Kind: "postgres", URL: "postgres://unused"}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"}, rt.ToolResult{Err: errors.New("order A\x00\xff: declined \x00")})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Backends: map[string]runtime.StoreBackend{"ledger": store},
		Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	require.NoError(t, err)
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A\x00\xff"}})
	require.NoError(t, err)
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A2"}})
	require.Error(t, err)
	assert.NotErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
	assert.Equal(t, 2, tool.Calls())
	recs, err := store.Records(context.Background(), "run-1")
	require.NoError(t, err)
	require.Len(t, recs, 4)
	assert.Equal(t, map[string]any{"order_id": "A\uFFFD\uFFFD"}, recs[0].Args)
	assert.Equal(t, runtime.DecisionOK, recs[1].Decision)
	assert.Equal(t, runtime.DecisionFailed, recs[3].Decision)
	assert.Equal(t, "order A\uFFFD\uFFFD: declined \uFFFD", recs[3].ErrorMessage)
}

func TestValidate(t *testing.T) {
	_, err := runtime.Build(context.Background(), toolPlan(rt.Layer("audit", `{"trail": "all"}`)), runtime.Deps{})
	assert.ErrorContains(t, err, "trail")
	_, err = runtime.Build(context.Background(), toolPlan(rt.Layer("audit", `{"sink": "nope"}`)), runtime.Deps{})
	assert.ErrorContains(t, err, `store "nope" is not declared`)
}

func TestArgumentsWithoutCanonicalFormHaveNoDigest(t *testing.T) {
	sink := &runtime.MemoryAudit{}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1", "amount": math.NaN()}})
	require.NoError(t, err)
	recs := sink.Records()
	require.Len(t, recs, 2)
	in, out := recs[0], recs[1]
	assert.Empty(t, in.ArgsDigest)
	assert.Empty(t, out.ArgsDigest)
	assert.Contains(t, in.ErrorMessage, "arguments cannot be canonicalised: ")
	assert.Contains(t, in.ErrorMessage, "NaN")
	assert.Equal(t, runtime.DecisionOK, out.Decision)
	assert.Empty(t, out.ErrorMessage, "the outcome describes the call")
	assert.NotEmpty(t, in.IdempotencyKey)
}

// TestAgentTurnEndsWhenAnOutcomeIsNotRecorded runs an agent turn whose
// refund ran but whose audit outcome could not be written: the turn ends
// with the error (runtime.ErrOutcomeUnrecorded) instead of telling the model
// the refund failed, which would have it make the refund again.
func TestAgentTurnEndsWhenAnOutcomeIsNotRecorded(t *testing.T) {
	sink := &flakySink{fail: map[runtime.AuditPhase]bool{runtime.PhaseOutcome: true}}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"}, rt.ToolResult{Value: "R2"})
	call := rt.Response{Stream: []runtime.Delta{{FinishReason: runtime.FinishToolCalls,
		ToolCalls: []runtime.ToolCallDelta{{ID: "c1", Name: "refund", Arguments: `{"order_id":"A1"}`}}}}}
	model := rt.NewModel(call, call, rt.Response{Deltas: []string{"done"}})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink,
		Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}, Models: map[string]runtime.ModelClient{"primary": model}})
	res, err := pl.RunAgent(ctx1, runtime.AgentRequest{Model: "primary", Input: "refund A1"})
	require.ErrorIs(t, err, runtime.ErrOutcomeUnrecorded)
	assert.ErrorIs(t, err, errSink)
	assert.Equal(t, 1, tool.Calls(), "the refund ran once")
	assert.Equal(t, 1, model.Calls(), "the model is not told the refund failed")
	last := res.Messages[len(res.Messages)-1]
	require.Equal(t, "assistant", last.Role, "the call is left unanswered for a person to settle")
}

// The record holds the arguments the layer receives: a pii layer redacting
// outside it has masked them already (the digest is of the masked
// arguments too); one inside it has not, and the trail holds them in clear.
func TestArgumentsAreRecordedAsTheLayerReceivesThem(t *testing.T) {
	args := map[string]any{"order_id": "A1", "email": "ann@example.com"}
	for _, tc := range []struct {
		name  string
		chain []plan.Layer
		clear bool
	}{
		{"pii outside", []plan.Layer{rt.Layer("pii", `{"action": "redact"}`), rt.Layer("audit", `{"include_args": true}`)}, false},
		{"pii inside", []plan.Layer{rt.Layer("audit", `{"include_args": true}`), rt.Layer("pii", `{"action": "redact"}`)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &runtime.MemoryAudit{}
			tool := rt.NewTool(rt.ToolResult{Value: "ok"})
			pl := rt.Build(t, toolPlan(tc.chain...), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
			_, err := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: args})
			require.NoError(t, err)
			recs := sink.Records()
			require.Len(t, recs, 2)
			assert.Equal(t, tc.clear, recs[0].Args["email"] == "ann@example.com", "%v", recs[0].Args)
			assert.Equal(t, "A1", recs[0].Args["order_id"])
		})
	}
}

// TestBudgetRefusalDecisions: a budget's final refusal is denied; one for
// the calls in flight alone, which may pass when sent again, failed with
// kind rate_limited, as a rate_limit's refusal.
func TestBudgetRefusalDecisions(t *testing.T) {
	final := &runtime.BudgetError{Layer: "meter", Resource: "calls", Spent: 3, Limit: 3, Pending: 1}
	held := &runtime.BudgetError{Layer: "meter", Resource: "calls", Spent: 1, Limit: 3, Pending: 2}
	assert.Equal(t, runtime.DecisionDenied, audit.Decision(final, &runtime.Meta{}))
	assert.Equal(t, runtime.DecisionFailed, audit.Decision(held, &runtime.Meta{}))
}
