package runtime_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

func idlePipeline(t *testing.T, runIdle string, clock runtime.Clock, tool runtime.ToolFunc) (*runtime.Pipeline, runtime.LedgerReader) {
	t.Helper()
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("meter", `{"scope": "run"}`)}})
	p.Settings.RunIdle = runIdle
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Clock: clock, Tools: map[string]runtime.ToolFunc{"t": tool}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = pl.Close() })
	return pl, pl.Layers(plan.StageTool)[0].Middleware.(runtime.LedgerReader)
}

// A named run that has had no call for settings.run_idle is ended: its
// per-run state is dropped as EndRun would. A run with a call in flight is
// never idle, and a run the host ended is no longer tracked.
func TestIdleRunsAreEnded(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Unix(1_700_000_000, 0))
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	pl, ledger := idlePipeline(t, "1h", clock, func(_ context.Context, c *runtime.ToolCall) (any, error) {
		if c.Args["wait"] == true {
			started <- struct{}{}
			<-release
		}
		return "ok", nil
	})
	call := func(run string, args map[string]any) {
		_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: run}), runtime.ToolRequest{Name: "t", Args: args})
		require.NoError(t, err)
	}
	call("r1", nil)
	call("r2", nil)
	require.Equal(t, int64(1), ledger.Ledger("r1").Calls)

	clock.Advance(40 * time.Minute)
	call("r2", nil) // r2 stays busy
	assert.Zero(t, pl.ExpireIdleRuns(), "nothing is idle for an hour yet")
	clock.Advance(30 * time.Minute)
	assert.Equal(t, 1, pl.ExpireIdleRuns(), "r1 has been idle for 70 minutes")
	assert.Zero(t, ledger.Ledger("r1").Calls, "r1's ledger is dropped")
	assert.Equal(t, int64(2), ledger.Ledger("r2").Calls)

	// A call in flight keeps its run, however long it takes.
	done := make(chan struct{})
	go func() { defer close(done); call("r3", map[string]any{"wait": true}) }()
	<-started
	clock.Advance(2 * time.Hour)
	assert.Equal(t, 1, pl.ExpireIdleRuns(), "r2 expires; r3 has a call in flight")
	close(release)
	<-done
	assert.Equal(t, int64(1), ledger.Ledger("r3").Calls)
	clock.Advance(59 * time.Minute)
	assert.Zero(t, pl.ExpireIdleRuns(), "r3's call ended 59 minutes ago")

	pl.EndRun("r3")
	clock.Advance(2 * time.Hour)
	assert.Zero(t, pl.ExpireIdleRuns(), "an ended run is not tracked")
}

func TestRunIdleSetting(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Unix(1_700_000_000, 0))
	ok := func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }
	pl, ledger := idlePipeline(t, "0s", clock, ok)
	_, err := pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	clock.Advance(1000 * time.Hour)
	assert.Zero(t, pl.ExpireIdleRuns(), `"0s" keeps runs until they are ended`)
	assert.Equal(t, int64(1), ledger.Ledger("r").Calls)

	// The default is a day.
	pl, ledger = idlePipeline(t, "", clock, ok)
	_, err = pl.Tool(runtime.WithRun(context.Background(), runtime.Run{ID: "r"}), runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	clock.Advance(23 * time.Hour)
	assert.Zero(t, pl.ExpireIdleRuns())
	clock.Advance(2 * time.Hour)
	assert.Equal(t, 1, pl.ExpireIdleRuns())
	assert.Zero(t, ledger.Ledger("r").Calls)

	p := rt.Plan(plan.Chains{})
	p.Settings.RunIdle = "soon"
	_, err = runtime.Build(context.Background(), p, runtime.Deps{})
	assert.ErrorContains(t, err, `settings.run_idle "soon": want a duration such as 24h`)
}

// TestRunIdleDropsRunState: with no layer that is a RunEnder, a run idle
// for settings.run_idle still loses its run state; a state operation is
// activity of the run, and reading a run creates no state for it.
func TestRunIdleDropsRunState(t *testing.T) {
	clock := runtime.NewVirtualClock(time.Unix(1_700_000_000, 0))
	p := rt.Plan(plan.Chains{})
	p.Settings.RunIdle = "1h"
	p.State = &plan.State{Fields: map[string]plan.StateField{"n": {}}}
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Clock: clock,
		Tools: map[string]runtime.ToolFunc{"t": func(context.Context, *runtime.ToolCall) (any, error) { return "ok", nil }}})
	require.NoError(t, err)
	defer pl.Close()
	_, err = pl.Checkpointer("")
	require.NoError(t, err)

	unknown := runtime.WithRun(context.Background(), runtime.Run{ID: "never-seen"})
	_, ok := pl.GetState(unknown, "n")
	assert.False(t, ok)
	assert.Empty(t, pl.StateFields(unknown))
	assert.Empty(t, pl.Transcript(unknown))
	assert.Zero(t, runtime.RunStates(pl), "reads create no run state")

	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: "r"})
	_, err = pl.Tool(ctx, runtime.ToolRequest{Name: "t"})
	require.NoError(t, err)
	clock.Advance(50 * time.Minute)
	_, err = pl.SetState(ctx, "n", 1)
	require.NoError(t, err)
	clock.Advance(50 * time.Minute)
	assert.Zero(t, pl.ExpireIdleRuns(), "the set 50 minutes ago is activity")
	clock.Advance(2 * time.Hour)
	assert.Equal(t, 1, pl.ExpireIdleRuns())
	_, ok = pl.GetState(ctx, "n")
	assert.False(t, ok, "the idle run's state is dropped")
	assert.Zero(t, runtime.RunStates(pl))
}
