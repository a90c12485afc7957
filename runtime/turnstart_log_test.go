package runtime_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// turnRefuser refuses every turn at its start, as a checkpoint's Check
// refuses a run another process ended.
type turnRefuser struct{}

func (turnRefuser) Provision(b *runtime.BuildContext) error {
	b.OnTurnStart(func(context.Context) error {
		return &runtime.BlockedError{Layer: "test.turnrefuser", Message: "the run was ended by another process"}
	})
	return nil
}

func (turnRefuser) WrapChat(next runtime.ChatHandler) runtime.ChatHandler { return next }

func init() {
	runtime.Register(runtime.Module{ID: "test.turnrefuser", Stages: []plan.Stage{plan.StageChat}, New: func() runtime.Middleware { return turnRefuser{} }})
}

// TestATurnRefusedAtItsStartIsLogged: a turn the turn-start check refused
// left no trace in the pipeline's log, unlike the other refusals. It
// logs the run and the reason.
func TestATurnRefusedAtItsStartIsLogged(t *testing.T) {
	var logs bytes.Buffer
	pl := rt.Build(t, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("test.turnrefuser", "")}}), runtime.Deps{
		Models: map[string]runtime.ModelClient{"primary": rt.NewModel(rt.Response{Deltas: []string{"hi"}})},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "run-7"})
	_, err := pl.Turn(ctx, runtime.TurnRequest{Input: "go"}, func(context.Context) (string, error) { return "done", nil })
	require.Error(t, err)
	assert.Contains(t, logs.String(), "run-7")
	assert.Contains(t, logs.String(), "the run was ended by another process")
}
