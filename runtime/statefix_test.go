package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestSecretNumberFieldNotSaved: a redact handler leaves a secret number
// as it is, so the field is not clean: the save is refused and the sink
// sees the secret mark, not the number.
func TestSecretNumberFieldNotSaved(t *testing.T) {
	audit := &runtime.MemoryAudit{}
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Fields: map[string]plan.StateField{
		"pin": {Schema: json.RawMessage(`{"type": "integer"}`), Secret: true, Background: []plan.StateSink{{Sink: "audit"}},
			OnSet: []plan.StateHandler{{Redact: &plan.StateRedact{Replacement: "[X]"}}}},
	}}
	pl := rt.Build(t, p, runtime.Deps{Audit: audit})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err := pl.SetState(ctx, "pin", 482913)
	require.NoError(t, err)
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	_, err = c.Save(ctx)
	var se *runtime.SecretError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "fields.pin", se.Path)
	require.NoError(t, pl.DrainState(ctx))
	records := audit.Records()
	require.Len(t, records, 1)
	assert.NotEqual(t, 482913.0, records[0].Args["value"])
}

// TestSecretSinkNeverSeesClearValue: a redact handler that matched nothing
// hides nothing, and a set handler failing after it reports the value as
// the handlers left it (redacted), not the original: the sinks never see
// the secret.
func TestSecretSinkNeverSeesClearValue(t *testing.T) {
	audit := &runtime.MemoryAudit{}
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Fields: map[string]plan.StateField{
		"token": {Schema: json.RawMessage(`{"type": "string"}`), Secret: true, Background: []plan.StateSink{{Sink: "audit"}},
			OnSet: []plan.StateHandler{{Redact: &plan.StateRedact{Patterns: []string{"tok_[0-9]+"}, Replacement: "[X]"}}}},
		"limit": {Schema: json.RawMessage(`{"type": "string"}`), Secret: true, Background: []plan.StateSink{{Sink: "audit"}},
			OnSet: []plan.StateHandler{{Redact: &plan.StateRedact{Patterns: []string{"sk-live"}, Replacement: "[X]"}},
				{Set: statePred(plan.StateOnSet, "[value][1]")}}},
	}}
	pl := rt.Build(t, p, runtime.Deps{Audit: audit})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err := pl.SetState(ctx, "token", "sk-live-ABCDEF")
	require.NoError(t, err)
	_, err = pl.SetState(ctx, "limit", "sk-live-GHIJKL")
	require.Error(t, err, "the set handler fails")
	require.NoError(t, pl.DrainState(ctx))
	records := audit.Records()
	require.Len(t, records, 2)
	for _, r := range records {
		assert.NotContains(t, r.Args["value"], "sk-live", "field %v", r.Args["field"])
	}
}

// TestAppendChecksFieldSchema: an append is refused when the list it would
// make breaks the field's schema: a field that is not an array, maxItems.
func TestAppendChecksFieldSchema(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Fields: map[string]plan.StateField{
		"limit": {Schema: json.RawMessage(`{"type": "integer"}`)},
		"tags":  {Schema: json.RawMessage(`{"type": "array", "items": {"type": "string"}, "maxItems": 2}`)},
	}}
	pl := rt.Build(t, p, runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err := pl.AppendState(ctx, "limit", 5)
	var be *runtime.BlockedError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "state.limit", be.Layer)
	_, ok := pl.GetState(ctx, "limit")
	assert.False(t, ok, "the integer field holds no array")
	for _, s := range []string{"a", "b"} {
		_, err = pl.AppendState(ctx, "tags", s)
		require.NoError(t, err)
	}
	_, err = pl.AppendState(ctx, "tags", "c")
	require.ErrorAs(t, err, &be)
	assert.Contains(t, be.Message, "the list after the append")
	v, _ := pl.GetState(ctx, "tags")
	assert.Equal(t, []any{"a", "b"}, v)
}

// TestSaveAfterFinishRefused: a run that ended stays ended: a save after
// Finish is refused and Resume still refuses the run.
func TestSaveAfterFinishRefused(t *testing.T) {
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err = c.Finish(ctx, runtime.RunFailed)
	require.NoError(t, err)
	_, err = c.Save(ctx)
	var be *runtime.BlockedError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, runtime.LayerCheckpoint, be.Layer)
	var te *runtime.TerminalRunError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, runtime.RunFailed, te.Status)
	_, err = c.Resume(ctx, "r")
	require.ErrorAs(t, err, &te, "a failed run is never resumed")
	vs, err := c.Versions(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, []int{1}, vs)
}

// TestDrainStateAfterClose: DrainState returns after Close, and the events
// Close left undelivered are counted as dropped; a state operation after
// Close fails with ErrClosed and pushes none.
func TestDrainStateAfterClose(t *testing.T) {
	hold := make(chan struct{})
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Fields: map[string]plan.StateField{"n": {Background: []plan.StateSink{{Sink: "log"}}}}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{StateHold: hold})
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err = pl.SetState(ctx, "n", 1)
	require.NoError(t, err)
	require.NoError(t, pl.Close())
	_, err = pl.SetState(ctx, "n", 2)
	require.ErrorIs(t, err, runtime.ErrClosed, "a state operation after Close does not run")
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	require.NoError(t, pl.DrainState(dctx))
	assert.Equal(t, runtime.StateStats{Queued: 1, Dropped: 1}, pl.StateStats())
}

// TestStateSaveConcurrent runs state operations, saves, transcripts and
// run ends of one run concurrently (for the race detector); the queue
// drains after.
func TestStateSaveConcurrent(t *testing.T) {
	audit := &runtime.MemoryAudit{}
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Queue: 4, Fields: map[string]plan.StateField{
		"notes": {Schema: json.RawMessage(`{"type": "array", "items": {"type": "string"}}`), Background: []plan.StateSink{{Sink: "audit"}, {Sink: "log"}},
			OnAppend: []plan.StateHandler{{Truncate: 5}}},
		"tok": {Secret: true, Background: []plan.StateSink{{Sink: "audit"}}, OnSet: []plan.StateHandler{{Redact: &plan.StateRedact{Replacement: "x"}}}},
	}}
	pl := rt.Build(t, p, runtime.Deps{Audit: audit})
	c, err := pl.Checkpointer("")
	require.NoError(t, err)
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				_, _ = pl.AppendState(ctx, "notes", "hello world")
				_, _ = pl.SetState(ctx, "tok", "secret-value")
				_, _ = c.Save(ctx)
				_ = pl.StateFields(ctx)
				pl.RecordTranscript(ctx, []runtime.Message{{Role: "user", Content: "x"}})
				if i == 0 {
					pl.EndRun("r")
				}
				_ = pl.StateStats()
			}
		})
	}
	wg.Wait()
	require.NoError(t, pl.DrainState(ctx))
}

// TestConcurrentAppendsAreJudgedInTurn: the handlers of concurrent
// operations on one run see each other's writes, so a deny that caps a list
// at 3 holds however many appends race.
func TestConcurrentAppendsAreJudgedInTurn(t *testing.T) {
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Fields: map[string]plan.StateField{
		"notes": {Schema: json.RawMessage(`{"type": "array", "items": {"type": "string"}}`), OnAppend: []plan.StateHandler{
			{Deny: statePred(plan.StateOnAppend, "has(state.notes) && size(state.notes) >= 3"), Message: "at most 3"}}},
	}}
	pl := rt.Build(t, p, runtime.Deps{})
	for round := range 50 {
		ctx := runtime.WithRun(context.Background(), runtime.Run{ID: fmt.Sprintf("r%d", round)})
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { _, _ = pl.AppendState(ctx, "notes", "x") })
		}
		wg.Wait()
		v, ok := pl.GetState(ctx, "notes")
		require.True(t, ok)
		require.Len(t, v, 3, "round %d", round)
	}
}
