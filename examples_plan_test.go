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

// TestReplicatedServicePlanIsUpToDate compiles examples/service/replicated
// and compares the plan with the committed plan.json that the service's
// three-replica test serves: rebuild it with
// `go run ./cmd/agentc build -o examples/service/replicated/plan.json examples/service/replicated`.
func TestReplicatedServicePlanIsUpToDate(t *testing.T) {
	dir := filepath.Join("examples", "service", "replicated")
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
	assert.JSONEq(t, string(want), string(got), "examples/service/replicated/plan.json is stale")
}
