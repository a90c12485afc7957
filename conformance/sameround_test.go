package conformance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
)

var packageClause = regexp.MustCompile(`(?m)^package (\w+)`)

// TestCELFindingsInTheRoundOfASchemaError checks, over every case whose
// policy passes the schema, that an error in a part no predicate reads (a
// store) leaves the CEL findings as they are: each is reported in the
// round of the schema's error.
func TestCELFindingsInTheRoundOfASchemaError(t *testing.T) {
	cases, err := Load("testdata")
	require.NoError(t, err)
	celFindings := func(diags dsl.Diagnostics, dir string) []string {
		var out []string
		for _, d := range diags {
			if strings.HasPrefix(d.Rule, "cel/") {
				rel, _ := filepath.Rel(dir, d.Pos.File)
				out = append(out, fmt.Sprintf("%s:%d:%d %s %s", rel, d.Pos.Line, d.Pos.Col, d.Rule, d.Message))
			}
		}
		sort.Strings(out)
		return out
	}
	compared := 0
	for _, c := range cases {
		if c.WantVet == nil || c.Baseline {
			continue
		}
		dir, err := c.Extract(t.TempDir())
		require.NoError(t, err)
		clean, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{StopAfter: "compile-cel"})
		require.NoError(t, err)
		if !slices.Contains(clean.Stages, "compile-cel") {
			continue // the schema has errors already
		}
		want := celFindings(clean.Diagnostics, dir)
		if len(want) == 0 {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.cue"))
		require.NotEmpty(t, files, c.Name)
		src, err := os.ReadFile(files[0])
		require.NoError(t, err)
		m := packageClause.FindSubmatch(src)
		require.NotNil(t, m, c.Name)
		broken := fmt.Sprintf("package %s\n\nstores: zz_broken: {kind: 5}\n", m[1])
		require.NoError(t, os.WriteFile(filepath.Join(dir, "zz_broken.cue"), []byte(broken), 0o644))
		got, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
		require.NoError(t, err)
		require.Equal(t, []string{"load-policy"}, got.Stages, c.Name)
		assert.Equal(t, want, celFindings(got.Diagnostics, dir), c.Name)
		compared++
	}
	t.Logf("%d cases compared", compared)
	assert.Positive(t, compared)
}
