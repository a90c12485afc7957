package all_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	"github.com/agentc-dev/agentc/dsl" // test only: the schemas are the reference
	"github.com/agentc-dev/agentc/internal/jsonfields"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/schemas"
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

// TestConfigFieldsMatchTheCatalog: the fields the catalog lists for each
// builtin's config (schemas/catalog.json "fields", which plan.Load holds a
// plan's configs to) are those the module decodes, nested structs
// included: a field only the catalog has would make Build refuse a plan
// Load passed, one only the module has Load refuse a config Build reads.
func TestConfigFieldsMatchTheCatalog(t *testing.T) {
	var cat struct {
		Fields map[string]map[string]string `json:"fields"`
	}
	require.NoError(t, json.Unmarshal(schemas.CatalogJSON, &cat))
	require.Len(t, cat.Fields, 25)
	for id, fields := range cat.Fields {
		m, ok := runtime.LookupModule(id)
		require.True(t, ok, id)
		got := map[string]bool{}
		var walk func(t reflect.Type, prefix string)
		// value names the field at path and what its lists' elements and
		// its maps' values hold, as the catalog names them ("[]", "*").
		var value func(ft reflect.Type, path string)
		value = func(ft reflect.Type, path string) {
			got[path] = true
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
				value(ft.Elem(), path+".[]")
			case ft.Kind() == reflect.Map:
				value(ft.Elem(), path+".*")
			case ft.Kind() == reflect.Struct && !jsonfields.Open(ft) && fields[path] == "struct":
				walk(ft, path+".")
			}
		}
		walk = func(t reflect.Type, prefix string) {
			for name, ft := range jsonfields.Of(t) {
				value(ft, prefix+name)
			}
		}
		walk(reflect.TypeOf(m.New()).Elem(), "")
		assert.Equal(t, slices.Sorted(maps.Keys(fields)), slices.Sorted(maps.Keys(got)), id)
	}
}
