package runtime_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// With Deps.RequireServed, a plan declaring a tool or a model the host
// does not serve fails Build, naming every one, rather than its first
// call; without it Build succeeds, as documented.
func TestRequireServedNamesEveryUnservedToolAndModel(t *testing.T) {
	t.Setenv("AGENTC_TEST_SERVED_KEY", "k")
	p := rt.Plan(plan.Chains{})
	p.Tools = map[string]plan.Tool{"lookup": {}, "transfer": {SideEffecting: true}, "refund": {SideEffecting: true}}
	p.Models = map[string]plan.Model{
		"primary": {Provider: "key_echo", ID: "m", APIKeyEnv: "AGENTC_TEST_SERVED_KEY"},
		"backup":  {},
		"local":   {},
	}
	deps := runtime.Deps{
		Models: map[string]runtime.ModelClient{"local": rt.NewModel()},
		Tools:  map[string]runtime.ToolFunc{"lookup": rt.NewTool().Func()},
	}
	pl, err := runtime.Build(context.Background(), p, deps)
	require.NoError(t, err, "the default builds what it cannot serve")
	require.NoError(t, pl.Close())

	deps.RequireServed = true
	_, err = runtime.Build(context.Background(), p, deps)
	require.EqualError(t, err, `build models.backup: no client serves the model (give it in Deps.Models, or declare its provider); Deps.RequireServed is set
build tools.refund: no function serves the tool (give it in Deps.Tools); Deps.RequireServed is set
build tools.transfer: no function serves the tool (give it in Deps.Tools); Deps.RequireServed is set`)

	deps.Models["backup"] = rt.NewModel()
	deps.Tools["refund"], deps.Tools["transfer"] = rt.NewTool().Func(), rt.NewTool().Func()
	pl, err = runtime.Build(context.Background(), p, deps)
	require.NoError(t, err)
	assert.NoError(t, pl.Close())
}
