package all_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/dsl" // test only: the schemas are the reference
	"github.com/agentc-dev/agentc/runtime"
)

// TestStateModulesMatchSchemas checks that the state builtins declare the
// stages, traits and repeatability of their schemas, and that the sqlite
// store kind is linked.
func TestStateModulesMatchSchemas(t *testing.T) {
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	cat := schema.Catalog()
	for _, id := range []string{"memoize", "semantic_memoize", "idempotent", "audit"} {
		t.Run(id, func(t *testing.T) {
			m, ok := runtime.LookupModule(id)
			require.True(t, ok, "registered")
			k := cat.Lookup(id)
			require.NotNil(t, k, "in the schemas")
			var stages, traits []string
			for _, s := range m.Stages {
				stages = append(stages, string(s))
			}
			for _, tr := range m.Traits {
				traits = append(traits, string(tr))
			}
			slices.Sort(stages)
			slices.Sort(traits)
			assert.Equal(t, slices.Sorted(slices.Values(k.Stages)), stages)
			assert.Equal(t, slices.Sorted(slices.Values(k.Traits)), traits)
			assert.Equal(t, k.Repeatable, m.Repeatable)
			assert.NotEmpty(t, m.Doc)
		})
	}
	assert.Contains(t, runtime.StoreKinds(), "sqlite")
}
