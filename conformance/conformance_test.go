package conformance

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
)

var caseFilter = flag.String("case", "", "run only the cases whose name matches this regexp")

func TestConformance(t *testing.T) {
	cases, err := Load("testdata")
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	var re *regexp.Regexp
	if *caseFilter != "" {
		re = regexp.MustCompile(*caseFilter)
	}
	for _, c := range cases {
		if re != nil && !re.MatchString(c.Name) {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			dir, err := c.Extract(t.TempDir())
			require.NoError(t, err)
			comp, err := compiler.Compile(context.Background(), []string{dir}, compiler.Options{})
			require.NoError(t, err)
			if c.Baseline {
				old, err := compiler.LoadBaseline(context.Background(), filepath.Join(filepath.Dir(dir), "baseline"), compiler.Options{})
				require.NoError(t, err)
				comp.CompareBaseline(old)
			}
			if c.WantVet != nil {
				got := []string{}
				for _, d := range comp.Diagnostics {
					rel, err := filepath.Rel(dir, d.Pos.File)
					require.NoError(t, err)
					got = append(got, fmt.Sprintf("%s:%d %s", filepath.ToSlash(rel), d.Pos.Line, d.Rule))
				}
				sort.Strings(got)
				assert.Equal(t, c.WantVet, got, "diagnostics:\n%v", comp.Diagnostics)
			}
			if c.Scenario != nil {
				require.False(t, comp.Diagnostics.HasErrors(), "policy of a run case must vet: %v", comp.Diagnostics)
				runCase(t, c, comp, dir)
			}
			if c.WantProve != nil {
				proveCase(t, c, comp, dir)
			}
		})
	}
}

// TestDifferences: every difference is reported, in the order Subset
// looks (the keys of an object sorted), not the first alone; a list of
// another length is one difference, its elements not compared.
func TestDifferences(t *testing.T) {
	want := map[string]any{
		"steps":      []any{map[string]any{"outcome": "ok", "agent": map[string]any{"blocked": 1.0, "stop": "done"}}},
		"executions": map[string]any{"tools": map[string]any{"refund": 0.0}},
		"audit":      []any{1.0},
	}
	got := map[string]any{
		"steps":      []any{map[string]any{"outcome": "ok", "agent": map[string]any{"blocked": 0.0, "stop": "max_steps"}}},
		"executions": map[string]any{"tools": map[string]any{"refund": 1.0}},
		"audit":      []any{1.0, 2.0},
	}
	assert.Equal(t, []string{
		"$.audit: want 1 elements, got 2: [1,2]",
		"$.executions.tools.refund: want 0, got 1",
		"$.steps[0].agent.blocked: want 1, got 0",
		`$.steps[0].agent.stop: want "done", got "max_steps"`,
	}, Differences(want, got, ""))
	assert.Equal(t, "$.audit: want 1 elements, got 2: [1,2]", Subset(want, got, ""), "the first")
	assert.Empty(t, Differences(want, want, ""))
}

func TestSubset(t *testing.T) {
	tests := []struct {
		name      string
		want, got any
		diff      string
	}{
		{"equal", map[string]any{"a": 1.0}, map[string]any{"a": 1.0, "b": 2.0}, ""},
		{"missing", map[string]any{"a": 1.0}, map[string]any{"b": 1.0}, "$.a: missing"},
		{"value", map[string]any{"a": "x"}, map[string]any{"a": "y"}, `$.a: want "x", got "y"`},
		{"list length", []any{1.0}, []any{1.0, 2.0}, "$: want 1 elements, got 2: [1,2]"},
		{"nested", map[string]any{"s": []any{map[string]any{"k": true}}}, map[string]any{"s": []any{map[string]any{"k": false, "z": 1.0}}}, "$.s[0].k: want true, got false"},
		{"type", map[string]any{"a": map[string]any{}}, map[string]any{"a": 1.0}, "$.a: want an object, got 1"},
		{"absent null", map[string]any{"a": nil}, map[string]any{"b": 1.0}, ""},
		{"absent empty list", map[string]any{"a": []any{}}, map[string]any{"b": 1.0}, ""},
		{"null present", map[string]any{"a": nil}, map[string]any{"a": map[string]any{"kind": "blocked"}}, `$.a: want null, got {"kind":"blocked"}`},
		{"empty list present", map[string]any{"a": []any{}}, map[string]any{"a": []any{1.0}}, "$.a: want 0 elements, got 1: [1]"},
		{"absent zero", map[string]any{"a": 0.0}, map[string]any{}, "$.a: missing"},
		{"dotted name", map[string]any{"models": map[string]any{"gpt-4.1": 1.0}}, map[string]any{"models": map[string]any{"gpt-4.1": 2.0}}, `$.models."gpt-4.1": want 1, got 2`},
		{"dotted name missing", map[string]any{"gpt-4.1": 1.0}, map[string]any{}, `$."gpt-4.1": missing`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.diff, Subset(tt.want, tt.got, ""))
		})
	}
}
