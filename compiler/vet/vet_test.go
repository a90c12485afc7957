package vet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
)

// testdataFile is the archive of a rule: testdata/<rule id>.txtar, with
// order/<id> (the policy's own constraints) as testdata/order/user.txtar.
func testdataFile(r *vet.Rule) string {
	return filepath.Join("testdata", strings.ReplaceAll(r.Name, "<id>", "user")+".txtar")
}

// TestRules runs each rule of the suite over the policies of its archive.
// Each top-level directory of the archive (or the files at its root) is
// one policy; a line whose diagnostic is expected carries
// `// want "regexp"` (one quoted regexp per diagnostic, matched against
// the message). Every diagnostic of the rule must be wanted, every want
// matched, and every diagnostic must name its second layer as a related
// position.
func TestRules(t *testing.T) {
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	for _, r := range vet.Suite {
		t.Run(r.Name, func(t *testing.T) {
			ar, err := txtar.ParseFile(testdataFile(r))
			require.NoError(t, err, "every rule needs testdata")
			policies := splitPolicies(ar)
			require.NotEmpty(t, policies)
			var sawWant, sawClean bool
			for _, name := range sortedKeys(policies) {
				files := policies[name]
				t.Run(name, func(t *testing.T) {
					dir := t.TempDir()
					wants := map[string][]*regexp.Regexp{} // "file:line" -> regexps
					for _, f := range files {
						path := filepath.Join(dir, filepath.Base(f.Name))
						require.NoError(t, os.WriteFile(path, f.Data, 0o644))
						for k, res := range parseWants(t, filepath.Base(f.Name), f.Data) {
							wants[k] = append(wants[k], res...)
						}
					}
					if len(wants) == 0 {
						sawClean = true
					} else {
						sawWant = true
					}
					p, diags, err := dsl.Load(context.Background(), []string{dir}, dsl.Options{Schema: schema})
					require.NoError(t, err)
					require.False(t, diags.HasErrors(), "policy does not load: %v", diags)
					got := vet.Run(vet.Analyze(p, schema.Constraints()), r)
					for _, d := range got {
						if d.Rule != r.Name && !(r == vet.UserConstraint && strings.HasPrefix(d.Rule, "order/")) {
							continue
						}
						if r.Severity != "" && !(r.Warns && d.Severity == dsl.Warning) {
							assert.Equal(t, r.Severity, d.Severity, "%s", d)
						}
						if strings.HasPrefix(r.Name, "order/") {
							require.NotEmpty(t, d.Related, "a diagnostic names both layers: %s", d)
						}
						for _, rel := range d.Related {
							assert.True(t, rel.Pos.IsValid(), "related position of %s", d)
						}
						key := fmt.Sprintf("%s:%d", filepath.Base(d.Pos.File), d.Pos.Line)
						matched := false
						for i, re := range wants[key] {
							if re.MatchString(d.Message) {
								wants[key] = append(wants[key][:i], wants[key][i+1:]...)
								matched = true
								break
							}
						}
						assert.True(t, matched, "unexpected diagnostic %s", d.String())
					}
					for key, res := range wants {
						for _, re := range res {
							t.Errorf("%s: no diagnostic matching %q", key, re)
						}
					}
				})
			}
			assert.True(t, sawWant, "the archive needs a policy with wants")
			assert.True(t, sawClean, "the archive needs a clean policy (no wants)")
		})
	}
}

// splitPolicies groups an archive's files by their top-level directory.
func splitPolicies(ar *txtar.Archive) map[string][]txtar.File {
	out := map[string][]txtar.File{}
	for _, f := range ar.Files {
		dir := "."
		if i := strings.Index(f.Name, "/"); i >= 0 {
			dir = f.Name[:i]
		}
		out[dir] = append(out[dir], f)
	}
	return out
}

var wantRE = regexp.MustCompile(`//\s*want\s+(.*)$`)

// parseWants returns the want regexps of a file by "file:line".
func parseWants(t *testing.T, name string, data []byte) map[string][]*regexp.Regexp {
	out := map[string][]*regexp.Regexp{}
	for i, line := range strings.Split(string(data), "\n") {
		m := wantRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rest := strings.TrimSpace(m[1])
		for rest != "" {
			q, err := strconv.QuotedPrefix(rest)
			require.NoError(t, err, "%s:%d: want needs quoted regexps", name, i+1)
			s, err := strconv.Unquote(q)
			require.NoError(t, err)
			re, err := regexp.Compile(s)
			require.NoError(t, err, "%s:%d", name, i+1)
			key := fmt.Sprintf("%s:%d", name, i+1)
			out[key] = append(out[key], re)
			rest = strings.TrimSpace(rest[len(q):])
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestCallProduct(t *testing.T) {
	tests := []struct {
		name     string
		attempts []int
		want     string
	}{
		{name: "none", want: "1"},
		{name: "small", attempts: []int{3, 4}, want: "12"},
		{name: "at the limit", attempts: []int{1000, 1000}, want: "1000000"},
		{name: "above the limit", attempts: []int{1000, 1001}, want: "more than 1,000,000"},
		{name: "would overflow", attempts: slices.Repeat([]int{3}, 50), want: "more than 1,000,000"},
		{name: "zero counts as one", attempts: []int{0, 5}, want: "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, vet.Calls(vet.CallProduct(tt.attempts...)))
		})
	}
}

func TestFactors(t *testing.T) {
	assert.Equal(t, "3 × 4", vet.Factors([]string{"3", "4"}, "retries"))
	assert.Equal(t, "1 × 2 × 3 × 4", vet.Factors([]string{"1", "2", "3", "4"}, "retries"))
	many := slices.Repeat([]string{"3"}, 2000)
	assert.Equal(t, "3 × 3 × 3 × … (2000 retries)", vet.Factors(many, "retries"))
}

// The nested-retry rule is linear in the chain: n retries in one chain cost
// O(n) overlap checks and report n-1 diagnostics with one product.
func TestNestedRetryIsLinear(t *testing.T) {
	schema, err := dsl.DefaultSchema()
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString("package p\n\nchains: chat: [\n")
	const n = 400
	for i := range n {
		fmt.Fprintf(&b, "\t{use: \"retry\", name: \"r%d\"},\n", i)
	}
	b.WriteString("]\n")
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte(b.String()), 0o644))
	p, diags, err := dsl.Load(context.Background(), []string{dir}, dsl.Options{Schema: schema})
	require.NoError(t, err)
	require.False(t, diags.HasErrors(), "%v", diags)
	a := vet.Analyze(p, schema.Constraints())
	before := vet.OverlapChecks(a)
	got := vet.Run(a, vet.NestedRetry)
	require.Len(t, got, n-1)
	assert.Contains(t, got[n-2].Message, "more than 1,000,000 times")
	assert.LessOrEqual(t, vet.OverlapChecks(a)-before, 4*n, "overlap checks for %d retries", n)
}
