package prove_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// summary is everything of a report but its wall time: what must come out
// the same from every exploration of one plan with the same options.
func summary(t *testing.T, r *prove.Report) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "k=%d copies=%d targets=%d symmetric=%d states=%d pruned=%d bound=%q done=%d proved=%d\n",
		r.Depth, r.Copies, r.Targets, r.Symmetric, r.States, r.Pruned, r.Bound, r.Done, r.Proved)
	for _, v := range r.Violations {
		require.NoError(t, v.WriteText(&b))
		fmt.Fprintf(&b, "interleaving=%v\n", v.Interleaving)
		sc, err := v.ScenarioJSON()
		require.NoError(t, err)
		b.Write(sc)
	}
	return b.String()
}

// exploreRepeatedly explores p several times on one and on two processors
// and returns the summary of each run.
func exploreRepeatedly(t *testing.T, p *plan.Plan, opts prove.Options, times int) []string {
	t.Helper()
	var out []string
	for _, procs := range []int{1, 2} {
		old := goruntime.GOMAXPROCS(procs)
		for range times {
			r, err := prove.Explore(context.Background(), p, opts)
			if err != nil {
				goruntime.GOMAXPROCS(old)
				require.NoError(t, err)
			}
			out = append(out, summary(t, r))
		}
		goruntime.GOMAXPROCS(old)
	}
	return out
}

func assertAllEqual(t *testing.T, runs []string) {
	t.Helper()
	for i, s := range runs[1:] {
		assert.Equal(t, runs[0], s, "run %d of %d differs from the first", i+2, len(runs))
	}
}

// An exploration is reproducible: the same plan and options give the same
// states, pruned states, verdict and counterexamples, run after run, on one
// processor or several, whatever order the goroutines of the concurrent
// copies of a step are scheduled in.
func TestExploreIsDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("explores a policy twelve times")
	}
	dir := "../examples/agent"
	p := compile(t, dir)
	runs := exploreRepeatedly(t, p, prove.Options{Depth: 2, Dir: dir}, 6)
	assertAllEqual(t, runs)
	assert.Contains(t, runs[0], "bound=\"\"")
}

// A state bound stops the exploration at the same scripts every time: the
// targets that share the bound take it in their order, not as the
// scheduler lets them run.
func TestMaxStatesStopsAtTheSamePoint(t *testing.T) {
	dir := "../examples/agent"
	p := compile(t, dir)
	for _, n := range []int{10, 50, 200} {
		runs := exploreRepeatedly(t, p, prove.Options{Depth: 2, Dir: dir, MaxStates: n}, 4)
		assertAllEqual(t, runs)
		assert.Contains(t, runs[0], fmt.Sprintf("states=%d ", n))
		assert.Contains(t, runs[0], `bound="max_states"`)
	}
}

// A counterexample of concurrent copies (two deliveries of a refund admitted
// together past a hand-written dedupe table) comes out the same every time:
// its script, its trace, its scenario and whether it needs the copies to
// interleave.
func TestConcurrentCounterexampleIsDeterministic(t *testing.T) {
	if testing.Short() {
		t.Skip("explores a policy eight times")
	}
	p, dir := policyPlan(t, refundTool+oneDeliveryRuns+`chains: tool: [{use: "audit"}, {use: "provetest.check_then_run"}, {use: "retry", max_attempts: 2}]`)
	runs := exploreRepeatedly(t, p, prove.Options{Depth: 2, Dir: dir}, 4)
	assertAllEqual(t, runs)
	assert.Contains(t, runs[0], "violated one_delivery_runs")
	assert.Contains(t, runs[0], "admitted together")
	assert.Contains(t, runs[0], "interleaving=true")
}
