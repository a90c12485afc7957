package scenario_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// runEnds records the runs ended on layers of module test.run_ender.
var runEnds struct {
	mu   sync.Mutex
	runs []string
}

type runEnder struct{}

func (runEnder) WrapTool(next runtime.ToolHandler) runtime.ToolHandler { return next }

func (runEnder) EndRun(runID string) {
	runEnds.mu.Lock()
	runEnds.runs = append(runEnds.runs, runID)
	runEnds.mu.Unlock()
}

func init() {
	runtime.Register(runtime.Module{ID: "test.run_ender", Stages: []plan.Stage{plan.StageTool},
		New: func() runtime.Middleware { return runEnder{} }})
}

func TestRunEndsTheRun(t *testing.T) {
	s, err := scenario.Parse([]byte(`{"run_id": "r7", "tools": {"refund": [{"result": {"ok": true}}]},
		"steps": [{"tool": {"name": "refund", "args": {}}}]}`))
	require.NoError(t, err)
	_, err = scenario.Run(context.Background(), planWith(plan.Chains{Tool: []plan.Layer{layer("test.run_ender", "")}}), s, scenario.Options{})
	require.NoError(t, err)
	runEnds.mu.Lock()
	defer runEnds.mu.Unlock()
	assert.Equal(t, []string{"r7"}, runEnds.runs)
}
