package agentc_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// TestServicePlansAreUpToDate compiles the policies of examples/service
// and compares each plan with the committed plan.json its tests serve:
// rebuild one with
// `go run ./cmd/agentc build -o examples/service/plan.json examples/service`
// (examples/service/replicated likewise).
func TestServicePlansAreUpToDate(t *testing.T) {
	for _, dir := range []string{filepath.Join("examples", "service"), filepath.Join("examples", "service", "replicated")} {
		c, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
		require.NoError(t, err)
		require.NotNil(t, c.Plan, "%v", c.Diagnostics)
		b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
		require.NoError(t, err)
		var committed plan.Plan
		require.NoError(t, json.Unmarshal(b, &committed))
		want, err := json.Marshal(c.Plan)
		require.NoError(t, err)
		got, err := json.Marshal(&committed)
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got), "%s is stale", filepath.Join(dir, "plan.json"))
	}
}
