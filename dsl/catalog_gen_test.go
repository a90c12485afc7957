package dsl

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateCatalog = flag.Bool("update-catalog", false, "rewrite schemas/catalog.json from the CUE schema")

// TestCatalogUpToDate evaluates the CUE schema's builtins and constraints
// and checks that schemas/catalog.json holds exactly them. Run with
// -update-catalog after changing a builtin's metadata or constraints.
func TestCatalogUpToDate(t *testing.T) {
	s, err := DefaultSchema()
	require.NoError(t, err)
	v, err := s.build(cuecontext.New())
	require.NoError(t, err)

	var cat catalogFile
	require.NoError(t, v.LookupPath(cue.ParsePath("builtins")).Decode(&cat.Builtins))
	require.NoError(t, v.LookupPath(cue.ParsePath("constraints")).Decode(&cat.Constraints))
	cat.Configs = map[string]map[string]string{}
	cat.Enums = map[string]map[string][]string{}
	for id := range cat.Builtins {
		def := v.LookupPath(cue.ParsePath(defName(id)))
		require.True(t, def.Exists(), "builtin %q has no definition %s", id, defName(id))
		cat.Configs[id], err = configFields(def)
		require.NoError(t, err, "builtin %q", id)
		if enums := configEnums(def); enums != nil {
			cat.Enums[id] = enums
		}
	}
	want, err := json.MarshalIndent(cat, "", "  ")
	require.NoError(t, err)
	want = append(want, '\n')

	path := filepath.Join("..", "schemas", "catalog.json")
	if *updateCatalog {
		require.NoError(t, os.WriteFile(path, want, 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "schemas/catalog.json is stale: go test ./dsl -run TestCatalogUpToDate -update-catalog")
}
