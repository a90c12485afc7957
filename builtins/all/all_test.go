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

// TestModulesMatchSchemas checks that every builtin of the schemas is
// registered and declares the stages, traits and repeatability of its
// schemas/<id>.cue metadata, which is what the compiler's vet rules rely on.
func TestModulesMatchSchemas(t *testing.T) {
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	cat := schema.Catalog()
	require.Len(t, cat.IDs(), 25)
	for _, id := range cat.IDs() {
		t.Run(id, func(t *testing.T) {
			m, ok := runtime.LookupModule(id)
			require.True(t, ok, "registered")
			k := cat.Lookup(id)
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
			assert.Equal(t, k.DistinctBy, m.DistinctBy)
			for _, f := range k.DistinctBy {
				assert.Contains(t, k.Config, f, "distinct_by names a config field")
			}
			assert.NotEmpty(t, m.Doc)
			assert.True(t, m.Builtin, "marked a builtin")
		})
	}
	for _, m := range runtime.Modules() {
		assert.Equal(t, cat.Lookup(m.ID) != nil, m.Builtin, "%s is marked a builtin when the schemas have it", m.ID)
	}
}

// TestStoreKindsLinked checks that the sqlite store kind comes with the
// builtins.
func TestStoreKindsLinked(t *testing.T) {
	assert.Subset(t, runtime.StoreKinds(), []string{"memory", "postgres", "redis", "sqlite"})
	assert.Contains(t, runtime.StoreKinds(), "memory")
}
