package hedge_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/hedge"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func build(t *testing.T, config string, primary, backup *rt.Model) *runtime.Pipeline {
	t.Helper()
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
	require.NoError(t, err)
	return pl
}

func TestPrimaryWinsBeforeTheDelay(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Deltas: []string{"p"}})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
	text, resp, err := rt.Collect(context.Background(), build(t, `{"models":["primary","backup"],"delay":"1s"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "p", text)
	assert.Equal(t, "primary", resp.Model)
	assert.Zero(t, backup.Calls(), "no hedge before the delay")
}

func TestAPermanentFailureDoesNotEndTheRace(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Delay: 40 * time.Millisecond, Deltas: []string{"p"}})
	backup := rt.NewModel(rt.Response{Err: rt.Permanent("backup rejects request")})
	text, resp, err := rt.Collect(context.Background(), build(t, `{"models":["primary","backup"],"delay":"5ms"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.NoError(t, err, "the healthy primary still wins")
	assert.Equal(t, "p", text)
	assert.Equal(t, "primary", resp.Model)
	assert.Equal(t, 1, backup.Calls())
}

func TestAPermanentFailureStartsTheNextAtOnce(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Err: rt.Permanent("bad request")})
	backup := rt.NewModel(rt.Response{Deltas: []string{"b"}})
	start := time.Now()
	text, resp, err := rt.Collect(context.Background(), build(t, `{"models":["primary","backup"],"delay":"1h"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.NoError(t, err)
	assert.Equal(t, "b", text)
	assert.Equal(t, "backup", resp.Model)
	assert.Less(t, time.Since(start), time.Second, "the backup did not wait for the delay")
}

func TestEveryModelFailingReturnsTheLastError(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Delay: 30 * time.Millisecond, Err: rt.Permanent("primary rejects request")})
	backup := rt.NewModel(rt.Response{Err: rt.Permanent("backup rejects request")})
	_, _, err := rt.Collect(context.Background(), build(t, `{"models":["primary","backup"],"delay":"1ms"}`, primary, backup),
		runtime.ChatRequest{}, 0)
	require.ErrorContains(t, err, "primary rejects request", "the race ends when the last running model fails")
	assert.Zero(t, primary.Running())
	assert.Zero(t, backup.Running())
}

func buildClients(t *testing.T, config string, primary, backup runtime.ModelClient) *runtime.Pipeline {
	t.Helper()
	pl, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": primary, "backup": backup}})
	require.NoError(t, err)
	return pl
}

func TestAPanickingModelPanicsInTheCaller(t *testing.T) {
	rt.CheckGoroutines(t)
	boom := runtime.ModelFunc(func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error { panic("client bug") })
	pl := buildClients(t, `{"models":["primary","backup"],"delay":"1ms"}`, boom, boom)
	assert.PanicsWithValue(t, "client bug", func() { _, _, _ = rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0) })
}

func TestAPanicCancelsAndAwaitsTheOtherRacers(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Delay: time.Hour, Deltas: []string{"never"}})
	boom := runtime.ModelFunc(func(context.Context, *runtime.ChatRequest, func(runtime.Delta) bool) error { panic("client bug") })
	pl := buildClients(t, `{"models":["primary","backup"],"delay":"1ms"}`, primary, boom)
	start := time.Now()
	assert.PanicsWithValue(t, "client bug", func() { _, _, _ = rt.Collect(context.Background(), pl, runtime.ChatRequest{}, 0) })
	assert.Less(t, time.Since(start), time.Second)
	assert.Zero(t, primary.Running(), "the other racer returned before the panic reached the caller")
	assert.Equal(t, 1, primary.Cancelled())
}

func TestAPanickingConsumerLeaksNoRacer(t *testing.T) {
	rt.CheckGoroutines(t)
	primary := rt.NewModel(rt.Response{Deltas: []string{"1", "2"}, Hang: true})
	backup := rt.NewModel(rt.Response{Delay: 20 * time.Millisecond, Deltas: []string{"b"}})
	pl := build(t, `{"models":["primary","backup"],"delay":"1ms"}`, primary, backup)
	assert.PanicsWithValue(t, "consumer bug", func() {
		_, _ = pl.Stream(context.Background(), runtime.ChatRequest{}, func(runtime.Delta) bool { panic("consumer bug") })
	})
	assert.Zero(t, primary.Running(), "the winner returned before the panic reached the caller")
	assert.Zero(t, backup.Running())
}

func TestValidate(t *testing.T) {
	_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary"]}`)}}), runtime.Deps{})
	assert.ErrorContains(t, err, "at least two models")
}
