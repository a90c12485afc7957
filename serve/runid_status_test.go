package serve_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/serve"
)

// A run id the runtime refuses (a host's, over runtime.MaxRunIDBytes) is
// the caller's fault: StatusOf answers 400, not 502.
func TestStatusOfRunIDRefused(t *testing.T) {
	pl := rt.Build(t, rt.Plan(plan.Chains{}), runtime.Deps{
		Tools: map[string]runtime.ToolFunc{"lookup": rt.NewTool(rt.ToolResult{Value: "ok"}).Func()}})
	ctx := runtime.WithRun(context.Background(), runtime.Run{ID: strings.Repeat("r", runtime.MaxRunIDBytes+1)})
	_, err := pl.Tool(ctx, runtime.ToolRequest{Name: "lookup"})
	require.ErrorContains(t, err, "the run id is 1025 bytes long")
	status, retryAfter := serve.StatusOf(err)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Zero(t, retryAfter)
}
