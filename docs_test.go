package agentc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/docgen/gen"
	"github.com/agentc-dev/agentc/policytest"
	"github.com/agentc-dev/agentc/runtime"
)

// TestDocsUpToDate fails when a change here leaves the generated pages
// (docs/language.md, docs/rules.md) stale.
func TestDocsUpToDate(t *testing.T) { gen.AssertUpToDate(t, ".") }

// cueBlockRE finds a fenced CUE block, indented (in a list item) or not:
// its indentation, and its text up to the closing fence.
var cueBlockRE = regexp.MustCompile("(?ms)^([ \t]*)```cue\n(.*?)^[ \t]*```[ \t]*$")

// testsRE tells a block of test cases (a `*_test.cue` file) from a policy.
var testsRE = regexp.MustCompile(`(?m)^tests:`)

// TestDocsCUEExamplesVet vets every CUE block of the pages written by hand
// (README.md and docs/), as a reader who copies one into a policy would:
// a policy, or a fragment of one, alone in a package, must have no error;
// a block of test cases must be cases `agentc test` reads. The generated
// pages quote vetted policies already.
func TestDocsCUEExamplesVet(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, "README.md")
	n := 0
	for _, page := range pages {
		if slices.Contains(gen.Pages, filepath.ToSlash(page)) {
			continue
		}
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		text := string(b)
		for _, m := range cueBlockRE.FindAllStringSubmatchIndex(text, -1) {
			n++
			indent, block := text[m[2]:m[3]], text[m[4]:m[5]]
			block = strings.ReplaceAll("\n"+block, "\n"+indent, "\n")[1:]
			line := strings.Count(text[:m[0]], "\n") + 1
			t.Run(fmt.Sprintf("%s:%d", filepath.ToSlash(page), line), func(t *testing.T) {
				vetDocBlock(t, block)
			})
		}
	}
	assert.Greater(t, n, 10, "the CUE blocks found")
}

func vetDocBlock(t *testing.T, block string) {
	dir := t.TempDir()
	if !regexp.MustCompile(`(?m)^package `).MatchString(block) {
		block = "package doc\n\n" + block
	}
	ctx := context.Background()
	if testsRE.MatchString(block) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "doc_test.cue"), []byte(block), 0o644))
		cases, err := policytest.Discover(ctx, dir, dsl.DataOptions{})
		require.NoError(t, err)
		assert.NotEmpty(t, cases)
		return
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(block), 0o644))
	c, err := compiler.Compile(ctx, []string{dir}, compiler.Options{})
	require.NoError(t, err)
	assert.False(t, c.Diagnostics.HasErrors(), "%v\n%s", c.Diagnostics, block)
}

// fenceRE is a line that opens or closes a fenced block: its indentation,
// the backticks and what follows them.
var fenceRE = regexp.MustCompile("^([ \t]*)(```+)(.*)$")

// TestDocsFencesClose checks that every fenced block of the pages closes:
// a closing fence with text after it (```` ``` `Builtin` ````) is no fence,
// so the block ran on to the end of the page and the prose after it was
// shown as code.
func TestDocsFencesClose(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, "README.md")
	for _, page := range pages {
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		open := 0 // the line of the open fence, 0 outside a block
		for i, line := range strings.Split(string(b), "\n") {
			m := fenceRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			switch {
			case open == 0:
				open = i + 1
			case strings.TrimSpace(m[3]) == "":
				open = 0
			default:
				assert.Failf(t, "fence with text after it", "%s:%d: %q inside the block opened at line %d does not close it", page, i+1, line, open)
			}
		}
		assert.Zero(t, open, "%s: the block opened at this line never closes", page)
	}
}

// TestEmbeddingDepsTable: the table of runtime.Deps in docs/embedding.md
// names every field a host may set, so none goes undocumented.
func TestEmbeddingDepsTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("docs", "embedding.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(b), "`runtime.Deps` carries everything a plan does not hold:")
	require.True(t, ok, "docs/embedding.md has no table of runtime.Deps")
	table, _, _ = strings.Cut(table, "\n\n#")
	named := map[string]bool{}
	for _, row := range regexp.MustCompile("(?m)^\\| (`[^|]+) \\|").FindAllStringSubmatch(table, -1) {
		for _, f := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(row[1], -1) {
			named[f[1]] = true
		}
	}
	deps := reflect.TypeFor[runtime.Deps]()
	for i := range deps.NumField() {
		if f := deps.Field(i); f.IsExported() {
			assert.True(t, named[f.Name], "docs/embedding.md's table of runtime.Deps has no row for %s", f.Name)
		}
	}
}
