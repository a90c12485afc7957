package audit_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// committedThenCut is a sink whose first intent is written and whose
// connection is then cut before the answer: the caller is told the write
// failed.
type committedThenCut struct {
	runtime.AuditSink
	cut  func()
	done atomic.Bool
}

func (s *committedThenCut) Append(ctx context.Context, r runtime.AuditRecord) error {
	err := s.AuditSink.Append(ctx, r)
	if r.Phase == runtime.PhaseIntent && s.done.CompareAndSwap(false, true) {
		s.cut()
		return errors.Join(err, errors.New("unexpected EOF"))
	}
	return err
}

// An intent the store wrote, though the layer was told it was not (the
// connection was cut after the INSERT committed), is followed by an
// outcome that says the call did not run: the trail does not read as a
// crash in the middle of the call.
func TestAnIntentReportedUnwrittenIsFollowedByAnOutcome(t *testing.T) {
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	direct := storetest.Postgres(t)
	via, err := postgres.Open(context.Background(), p.URL, direct.Schema(), postgres.WithTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = via.Close() })
	sink := &committedThenCut{AuditSink: via, cut: p.Drop}
	tool := rt.NewTool(rt.ToolResult{Value: "R1"})
	pl := rt.Build(t, toolPlan(rt.Layer("audit", "")), runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
	_, err = pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"order_id": "A1"}})
	require.ErrorContains(t, err, "audit intent not written; the call did not run")
	assert.Equal(t, 0, tool.Calls())
	recs, err := direct.Records(context.Background(), "run-1")
	require.NoError(t, err)
	require.Len(t, recs, 2, "the intent, committed, and an outcome")
	assert.Equal(t, runtime.PhaseIntent, recs[0].Phase)
	out := recs[1]
	assert.Equal(t, runtime.PhaseOutcome, out.Phase)
	assert.Equal(t, runtime.DecisionFailed, out.Decision, "a failed call did not happen")
	assert.Equal(t, "store_unavailable", out.ErrorType)
	assert.Contains(t, out.ErrorMessage, "the call did not run")
	assert.Equal(t, recs[0].IdempotencyKey, out.IdempotencyKey)
	assert.Equal(t, recs[0].ArgsDigest, out.ArgsDigest)
}
