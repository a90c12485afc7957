package runtime_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestStateKeepsNumbersExactly: a state field was set through encoding/json
// (every number a float64) and a set handler's int came back as a float64,
// so an account id of 9007199254740993 was held, checked by the field's
// handlers, returned and checkpointed as 9007199254740992 (a deny of that
// neighbour refused it). The value keeps the number it carries: an int64
// where a float64 does not hold it; a number neither holds is refused.
func TestStateKeepsNumbersExactly(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Fields: map[string]plan.StateField{
		"acct": {Schema: json.RawMessage(`{"type": "integer"}`), OnSet: []plan.StateHandler{
			{Deny: statePred(plan.StateOnSet, "value == 9007199254740992"), Message: "the neighbour"},
			{Set: statePred(plan.StateOnSet, "value")},
		}},
		"ids": {Schema: json.RawMessage(`{"type": "array", "items": {"type": "integer"}}`)},
		"any": {Schema: json.RawMessage(`{}`)},
	}}
	pl := rt.Build(t, p, runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	big := int64(9007199254740993)

	v, err := pl.SetState(ctx, "acct", big)
	require.NoError(t, err)
	assert.Equal(t, big, v)
	got, ok := pl.GetState(ctx, "acct")
	require.True(t, ok)
	assert.Equal(t, big, got)
	_, err = pl.SetState(ctx, "acct", json.Number("9007199254740993"))
	require.NoError(t, err)
	_, err = pl.SetState(ctx, "acct", int64(9007199254740992))
	assert.Error(t, err, "the neighbour is denied; the number itself was not")

	v, err = pl.AppendState(ctx, "ids", big)
	require.NoError(t, err)
	assert.Equal(t, big, v)
	_, err = pl.SetState(ctx, "any", map[string]any{"n": json.Number("1e2"), "m": -0.0, "k": 5})
	require.NoError(t, err)
	got, _ = pl.GetState(ctx, "any")
	assert.Equal(t, map[string]any{"n": 100.0, "m": 0.0, "k": 5.0}, got)

	var be *runtime.BlockedError
	_, err = pl.SetState(ctx, "any", json.Number("0.1000000000000000055511151231257827"))
	require.ErrorAs(t, err, &be)
	assert.Contains(t, be.Message, "neither")

	// A checkpoint reads them back so.
	b, err := runtime.MarshalCheckpoint(runtime.Checkpoint{RunID: "r1", Status: runtime.RunRunning, Time: time.Unix(0, 0).UTC(),
		Fields: pl.StateFields(ctx)})
	require.NoError(t, err)
	cp, err := runtime.UnmarshalCheckpoint(b, 1)
	require.NoError(t, err)
	assert.Equal(t, big, cp.Fields["acct"])
	assert.Equal(t, []any{big}, cp.Fields["ids"])
	assert.Equal(t, 5.0, cp.Fields["any"].(map[string]any)["k"])
	_, err = runtime.UnmarshalCheckpoint([]byte(`{"run_id":"r1","version":0,"status":"running","time":"1970-01-01T00:00:00Z","fields":{"a":1},"extra":1}`), 1)
	assert.Error(t, err, "a property this build does not know is still an error")
}
