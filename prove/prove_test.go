package prove_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/prove"
	"github.com/agentc-dev/agentc/runtime/plan"
)

func compile(t *testing.T, dir string) *plan.Plan {
	t.Helper()
	comp, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
	require.NoError(t, err)
	require.NotNil(t, comp.Plan, "%v", comp.Diagnostics)
	return comp.Plan
}

// TestExamplesProveClean explores every example at k = 3: with arguments
// that reach the tools behind a pattern, egress or file_check, k = 4 took
// 880 s on the 2-core CI machine, past go test's default timeout.
func TestExamplesProveClean(t *testing.T) {
	dirs, err := filepath.Glob("../examples/*/policy.cue")
	require.NoError(t, err)
	require.NotEmpty(t, dirs)
	for _, f := range dirs {
		dir := filepath.Dir(f)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			r, err := prove.Explore(context.Background(), compile(t, dir), prove.Options{Depth: 3, Dir: dir})
			require.NoError(t, err)
			t.Logf("%d targets, %d states (%d pruned) in %s: %.0f states/s", r.Targets, r.States, r.Pruned, r.Elapsed, r.StatesPerSecond())
			var b strings.Builder
			for _, v := range r.Violations {
				_ = v.WriteText(&b)
			}
			assert.Empty(t, r.Violations, "%s", b.String())
			assert.Empty(t, r.Unexplored, "every model and tool is reached")
			assert.Greater(t, r.States, 100, "the exploration ran")
		})
	}
}
