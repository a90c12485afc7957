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

func TestValidate(t *testing.T) {
	_, err := runtime.Build(context.Background(), rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("hedge", `{"models":["primary"]}`)}}), runtime.Deps{})
	assert.ErrorContains(t, err, "at least two models")
}
