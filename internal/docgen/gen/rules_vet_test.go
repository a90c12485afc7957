package gen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all" // the middlewares agentc vet links
	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/conformance"
	"github.com/agentc-dev/agentc/dsl"
)

// TestRulesPageExamplesVet vets every policy the rules page shows as
// agentc vet does (load, compile, the vet suite), not just the rule it
// illustrates: the rule testdata's own tests skip the earlier rounds, so an
// example could stop at an error of another rule there. The failing policy
// reports the rule on each line marked `// vet:`, as many times as it is
// marked, and nowhere else, with no error of another rule; the passing one
// has no error and does not report the rule.
func TestRulesPageExamplesVet(t *testing.T) {
	cases, err := conformance.Load(filepath.Join(root, "conformance", "testdata"))
	require.NoError(t, err)
	for _, r := range compiler.Rules() {
		t.Run(r.ID, func(t *testing.T) {
			t.Parallel()
			fail, pass, _, err := ruleExamples(root, r, cases)
			require.NoError(t, err)
			is := func(d dsl.Diagnostic) bool {
				if r.ID == "order/<id>" {
					return strings.HasPrefix(d.Rule, "order/") && !isRule(d.Rule)
				}
				return d.Rule == r.ID
			}

			dir, got := vetExample(t, fail)
			var reported []string
			for _, d := range got {
				switch {
				case is(d):
					reported = append(reported, lineOf(t, dir, d.Pos))
				case d.Severity == dsl.Error:
					t.Errorf("Fails (%s) has an error of another rule: %s", fail.Source, d)
				}
			}
			sort.Strings(reported)
			assert.Equal(t, markedLines(fail), reported, "Fails (%s): the rule's diagnostics are not on the marked lines:\n%v", fail.Source, got)

			_, got = vetExample(t, pass)
			for _, d := range got {
				assert.False(t, is(d), "Passes (%s) reports the rule: %s", pass.Source, d)
				assert.NotEqual(t, dsl.Error, d.Severity, "Passes (%s) has an error: %s", pass.Source, d)
			}
		})
	}
}

// vetExample writes e's files into a directory (a baseline's beside it)
// and vets them as agentc vet does, with -baseline when e has one.
func vetExample(t *testing.T, e *policyExample) (string, dsl.Diagnostics) {
	t.Helper()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "policy")
	baseline := false
	for _, f := range e.Files {
		path := filepath.Join(dir, filepath.FromSlash(f.Name))
		if rest, ok := strings.CutPrefix(f.Name, "baseline/"); ok {
			path = filepath.Join(tmp, "baseline", filepath.FromSlash(rest))
			baseline = true
		}
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, f.Data, 0o644))
	}
	ctx := context.Background()
	c, err := compiler.Compile(ctx, []string{dir}, compiler.Options{})
	require.NoError(t, err)
	if baseline {
		old, err := compiler.LoadBaseline(ctx, filepath.Join(tmp, "baseline"), compiler.Options{})
		require.NoError(t, err)
		c.CompareBaseline(old)
	}
	return dir, c.Diagnostics
}

func lineOf(t *testing.T, dir string, p dsl.Pos) string {
	t.Helper()
	rel, err := filepath.Rel(dir, p.File)
	require.NoError(t, err)
	return fmt.Sprintf("%s:%d", filepath.ToSlash(rel), p.Line)
}

var vetMark = regexp.MustCompile(`// vet: (.*)$`)

// markedLines lists "file:line" once per rule id of each `// vet:` mark
// of e's policy files.
func markedLines(e *policyExample) []string {
	var out []string
	for _, f := range e.Files {
		if !strings.HasSuffix(f.Name, ".cue") || strings.HasPrefix(f.Name, "baseline/") {
			continue
		}
		for i, l := range strings.Split(string(f.Data), "\n") {
			if m := vetMark.FindStringSubmatch(l); m != nil {
				for range strings.Split(m[1], ", ") {
					out = append(out, fmt.Sprintf("%s:%d", f.Name, i+1))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func isRule(id string) bool {
	for _, r := range compiler.Rules() {
		if r.ID == id {
			return true
		}
	}
	return false
}
