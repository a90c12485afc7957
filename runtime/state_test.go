package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func statePred(op, src string) *plan.Predicate {
	return &plan.Predicate{Stage: plan.StageState, Phase: op, Source: src}
}

// statePlan declares a state field "limit" (an integer up to 1000) whose
// on_set denies values over 100 and then adds one, and a field "notes" (a
// list of strings) with the given background sinks.
func statePlan(queue int, sinks ...plan.StateSink) *plan.Plan {
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Queue: queue, Fields: map[string]plan.StateField{
		"limit": {Schema: json.RawMessage(`{"type": "integer", "maximum": 1000}`), OnSet: []plan.StateHandler{
			{Deny: statePred(plan.StateOnSet, "value > 100"), Message: "over 100"},
			{Set: statePred(plan.StateOnSet, "value + 1")},
		}},
		"notes": {Schema: json.RawMessage(`{"type": "array", "items": {"type": "string"}}`), Background: sinks,
			OnAppend: []plan.StateHandler{{Truncate: 5}}},
		"token": {Schema: json.RawMessage(`{"type": "string"}`), Secret: true, Background: sinks},
	}}
	return p
}

func TestStateVetoStopsLaterHandlers(t *testing.T) {
	pl := rt.Build(t, statePlan(0), runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})

	v, err := pl.SetState(ctx, "limit", 10)
	require.NoError(t, err)
	assert.Equal(t, 11.0, v, "the set transform after the deny ran")

	_, err = pl.SetState(ctx, "limit", 500)
	var be *runtime.BlockedError
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "state.limit.on_set[0]", be.Layer)
	assert.Equal(t, "over 100", be.Message)
	got, ok := pl.GetState(ctx, "limit")
	require.True(t, ok)
	assert.Equal(t, 11.0, got, "a vetoed set leaves the field as it was, and the transform did not run")

	_, err = pl.SetState(ctx, "limit", "eleven")
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "state.limit", be.Layer)
	assert.Contains(t, be.Message, "limit: expected integer")

	_, err = pl.SetState(ctx, "nope", 1)
	assert.ErrorContains(t, err, `state field "nope" is not declared`)
	_, err = pl.SetState(context.Background(), "limit", 1)
	assert.ErrorContains(t, err, "no run id")

	// Runs do not share state, and ending a run forgets it.
	other := runtime.WithRun(context.Background(), runtime.Run{ID: "r2"})
	_, ok = pl.GetState(other, "limit")
	assert.False(t, ok)
	pl.EndRun("r1")
	_, ok = pl.GetState(ctx, "limit")
	assert.False(t, ok)
}

func TestStateAppendTransforms(t *testing.T) {
	pl := rt.Build(t, statePlan(0), runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, err := pl.AppendState(ctx, "notes", "called back")
	require.NoError(t, err)
	_, err = pl.AppendState(ctx, "notes", 3)
	require.Error(t, err, "an element that breaks the items schema is refused")
	_, err = pl.AppendState(ctx, "notes", "ok")
	require.NoError(t, err)
	got, _ := pl.GetState(ctx, "notes")
	assert.Equal(t, []any{"calle", "ok"}, got)
}

// TestStateBackgroundDropsCounted holds the background sinks, overfills the
// bounded queue and checks that the drops are counted and the queued events
// delivered, once, when the queue drains.
func TestStateBackgroundDropsCounted(t *testing.T) {
	audit := &runtime.MemoryAudit{}
	hold := make(chan struct{})
	pl := rt.Build(t, statePlan(2, plan.StateSink{Sink: "audit"}), runtime.Deps{Audit: audit, StateHold: hold})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		_, err := pl.AppendState(ctx, "notes", n)
		require.NoError(t, err)
	}
	st := pl.StateStats()
	assert.Equal(t, int64(2), st.Queued)
	assert.Equal(t, int64(3), st.Dropped)
	assert.Empty(t, audit.Records(), "held sinks deliver nothing")
	close(hold)
	require.NoError(t, pl.DrainState(ctx))
	st = pl.StateStats()
	assert.Equal(t, int64(2), st.Delivered)
	assert.Zero(t, st.Pending)
	recs := audit.Records()
	require.Len(t, recs, 2)
	assert.Equal(t, "state.notes", recs[0].Layer)
	assert.Equal(t, map[string]any{"op": "append", "value": "a"}, recs[0].Args)
}

// TestStateWebhookSecret posts the events to a local webhook; a secret
// field's value is masked.
func TestStateWebhookSecret(t *testing.T) {
	var mu sync.Mutex
	var got []runtime.StateEvent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev runtime.StateEvent
		if json.Unmarshal(b, &ev) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	}))
	defer srv.Close()
	pl := rt.Build(t, statePlan(0, plan.StateSink{Sink: "webhook", URL: srv.URL}), runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, err := pl.SetState(ctx, "token", "sk-live-1234")
	require.NoError(t, err)
	_, err = pl.AppendState(ctx, "notes", "hello")
	require.NoError(t, err)
	require.NoError(t, pl.DrainState(ctx))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, got, 2)
	assert.Equal(t, "[SECRET]", got[0].Value, "a secret value never leaves in clear")
	assert.Equal(t, "r1", got[0].RunID)
	assert.Equal(t, "hello", got[1].Value)
	assert.Equal(t, int64(2), pl.StateStats().Delivered)
}

func TestStateWebhookFailureCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	pl := rt.Build(t, statePlan(0, plan.StateSink{Sink: "webhook", URL: srv.URL}), runtime.Deps{})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, err := pl.AppendState(ctx, "notes", "x")
	require.NoError(t, err, "a failing sink never fails the operation")
	require.NoError(t, pl.DrainState(ctx))
	assert.Equal(t, int64(1), pl.StateStats().Failed)
}

// A webhook that answers with a redirect has not taken the event: net/http
// would follow a 302 with a GET without the body (and count the event
// delivered on the 200 it gets), a 307 would post the event to another
// URL. No redirect is followed; the delivery fails.
func TestStateWebhookRedirectIsAFailure(t *testing.T) {
	for _, code := range []int{http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			var elsewhere atomic.Int32
			target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
			defer target.Close()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL, code)
			}))
			defer srv.Close()
			for _, client := range []*http.Client{nil, {}} {
				pl := rt.Build(t, statePlan(0, plan.StateSink{Sink: "webhook", URL: srv.URL}), runtime.Deps{HTTPClient: client})
				ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
				_, err := pl.AppendState(ctx, "notes", "x")
				require.NoError(t, err)
				require.NoError(t, pl.DrainState(ctx))
				assert.Equal(t, runtime.StateStats{Queued: 1, Failed: 1}, pl.StateStats())
			}
			assert.Zero(t, elsewhere.Load(), "nothing reached the redirect's target")
		})
	}
}

func TestStateBuildErrors(t *testing.T) {
	p := statePlan(0)
	f := p.State.Fields["limit"]
	f.OnSet = []plan.StateHandler{{Set: statePred(plan.StateOnSet, "'x'")}}
	p.State.Fields["limit"] = f
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "state.limit.on_set[0]")
	assert.False(t, errors.Is(err, context.Canceled))
}

// TestStateSinksMaskRunSecrets: the background sinks see a run's secrets
// masked, as the audit trail does: a denial message quoting a secret of the
// run and a value of a field that is not secret holding one reach the log,
// the webhook and the audit sink with "[SECRET]" in its place, even when
// the events are delivered after the run ended.
func TestStateSinksMaskRunSecrets(t *testing.T) {
	var mu sync.Mutex
	var posted []runtime.StateEvent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev runtime.StateEvent
		if json.NewDecoder(r.Body).Decode(&ev) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		posted = append(posted, ev)
		mu.Unlock()
	}))
	defer srv.Close()
	sinks := []plan.StateSink{{Sink: "log"}, {Sink: "webhook", URL: srv.URL}, {Sink: "audit"}}
	p := rt.Plan(plan.Chains{})
	p.State = &plan.State{Fields: map[string]plan.StateField{
		"token": {Schema: json.RawMessage(`{"type": "string"}`), Secret: true},
		"notes": {Schema: json.RawMessage(`{"type": "array", "items": {"type": "string"}}`), Background: sinks,
			OnAppend: []plan.StateHandler{{Deny: statePred(plan.StateOnAppend, "value.contains('revoke')"),
				Message: "the key sk-live-1234 is revoked"}}},
	}}
	var logged rt.LogBuffer
	audit := &runtime.MemoryAudit{}
	hold := make(chan struct{})
	pl := rt.Build(t, p, runtime.Deps{Audit: audit, StateHold: hold,
		Logger: slog.New(slog.NewJSONHandler(&logged, nil))})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r1"})
	_, err := pl.SetState(ctx, "token", "sk-live-1234")
	require.NoError(t, err)
	_, err = pl.AppendState(ctx, "notes", "the key is sk-live-1234")
	require.NoError(t, err)
	_, err = pl.AppendState(ctx, "notes", "revoke it")
	require.Error(t, err)
	pl.EndRun("r1")
	close(hold)
	require.NoError(t, pl.DrainState(ctx))
	assert.Equal(t, int64(6), pl.StateStats().Delivered)

	assert.NotContains(t, logged.String(), "sk-live-1234")
	assert.Contains(t, logged.String(), "[SECRET]")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, posted, 2)
	assert.Equal(t, "[SECRET]", posted[0].Value)
	assert.True(t, posted[1].Denied)
	assert.Equal(t, "the key [SECRET] is revoked", posted[1].Message)
	recs := audit.Records()
	require.Len(t, recs, 2)
	assert.Equal(t, map[string]any{"op": "append", "value": "[SECRET]"}, recs[0].Args)
	assert.Equal(t, "the key [SECRET] is revoked", recs[1].ErrorMessage)
}
