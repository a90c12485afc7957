package gen

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/compiler/sarif"
)

const root = "../../.."

// TestDocsUpToDate fails when docs/language.md or docs/rules.md is not what
// the code generates.
func TestDocsUpToDate(t *testing.T) {
	stale, err := Stale(root)
	require.NoError(t, err)
	assert.Empty(t, stale, "generated docs are stale: run %s", Command)
}

func generated(t *testing.T) map[string]string {
	t.Helper()
	pages, err := Generate(root)
	require.NoError(t, err)
	out := map[string]string{}
	for k, v := range pages {
		out[k] = string(v)
	}
	return out
}

// TestRulesPage checks that every rule has its section at the anchor its
// SARIF help URI names, with a failing and a passing policy.
func TestRulesPage(t *testing.T) {
	page := generated(t)["docs/rules.md"]
	for _, r := range compiler.Rules() {
		a := sarif.Anchor(r.ID)
		i := strings.Index(page, `<a id="`+a+`"></a>`)
		if !assert.True(t, i >= 0, "no anchor %s for %s", a, r.ID) {
			continue
		}
		section := page[i:]
		if j := strings.Index(section[1:], `<a id="`); j >= 0 {
			section = section[:j+1]
		}
		has(t, section, "### `"+r.ID+"`")
		has(t, section, "**Fails**", r.ID)
		has(t, section, "**Passes**", r.ID)
		// The failing policy marks the line of the diagnostic.
		fails := section[strings.Index(section, "**Fails**"):strings.Index(section, "**Passes**")]
		has(t, fails, "// vet: ", r.ID)
		passes := section[strings.Index(section, "**Passes**"):]
		assert.False(t, strings.Contains(passes, "// vet: "), "%s: the passing policy has a diagnostic", r.ID)
		assert.False(t, strings.Contains(section, "// want"), "%s: a want comment is left", r.ID)
	}
}

// TestLanguagePage checks that every builtin has its section with fields,
// semantics and an example, and that every policy section is there.
func TestLanguagePage(t *testing.T) {
	page := generated(t)["docs/language.md"]
	cat, err := loadCatalog(root)
	require.NoError(t, err)
	require.NotEmpty(t, cat.Builtins)
	for id, m := range cat.Builtins {
		has(t, page, "### `"+id+"`\n\n"+strings.TrimSuffix(m.Doc, ".")+".", id)
		has(t, page, "#### Fields of `"+id+"`", id)
		has(t, page, "#### Semantics of `"+id+"`\n\nPackage ", id)
		has(t, page, "#### Example of `"+id+"`", id)
		assert.True(t, regexp.MustCompile("(?s)#### Example of `"+id+"`.*?```cue\nchains: (chat|tool|turn): \\[\n(\t//[^\n]*\n)*\t\\{.*use: *\""+id+"\"").MatchString(page), "no example of %s", id)
	}
	s, err := loadSchemas(root)
	require.NoError(t, err)
	for _, f := range topFields(s.defs["#Policy"].Expr) {
		has(t, page, "### `"+f.name+"`", f.name)
	}
	// A few rows whose rendering is fixed.
	has(t, page, "| `max_attempts` | `int` | `>=1`, `<=10` | `3` |")
	has(t, page, "| `breaker.cooldown` | [`#PositiveDuration`](#positiveduration) |  | `\"30s\"` |")
	has(t, page, "| `trail` | one of `\"logical\"`, `\"attempts\"` |  | `\"logical\"` |")
	has(t, page, "| `allow` | list of `string` or `\"*\"` (`=~")
	has(t, page, "| `model` | [`#Identifier`](#identifier) |  | *required* when `strategy == \"summarize\"` | model writes the summary")
	has(t, page, "| `arg_patterns[].pattern` | `string` | non-empty | *required* |")
}

var linkRE = regexp.MustCompile(`\]\(([^)]+)\)`)
var headingRE = regexp.MustCompile("(?m)^#{1,6} (.+)$")
var anchorRE = regexp.MustCompile(`<a id="([^"]+)"></a>`)

var fenceRE = regexp.MustCompile("(?ms)^[ \t]*```.*?^[ \t]*```[^\n]*$")

// TestLinks checks that every relative link of the Markdown pages, the
// generated ones and those written by hand (README.md, docs/, examples/...),
// names a file of the repository and every fragment a heading or anchor of
// its page. Code blocks are left out: a `#` line there is no heading.
func TestLinks(t *testing.T) {
	pages := generated(t)
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Hidden directories (.git, .ci with the packages CI installs),
		// node_modules and testdata hold pages that are not the
		// repository's own.
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := pages[rel]; !ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			pages[rel] = string(b)
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, pages, "README.md")
	for name, page := range pages {
		pages[name] = fenceRE.ReplaceAllString(page, "")
	}
	anchors := map[string]map[string]bool{}
	for name, page := range pages {
		set := map[string]bool{}
		seen := map[string]int{}
		for _, m := range headingRE.FindAllStringSubmatch(page, -1) {
			s := slug(m[1])
			if n := seen[s]; n > 0 {
				set[s+"-"+itoa(n)] = true
			} else {
				set[s] = true
			}
			seen[s]++
		}
		for _, m := range anchorRE.FindAllStringSubmatch(page, -1) {
			set[m[1]] = true
		}
		anchors[name] = set
	}
	for name, page := range pages {
		for _, m := range linkRE.FindAllStringSubmatch(page, -1) {
			link := m[1]
			if strings.HasPrefix(link, "http://") || strings.HasPrefix(link, "https://") {
				continue
			}
			file, frag, _ := strings.Cut(link, "#")
			target := name
			if file != "" {
				target = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(name), file)))
				_, err := os.Stat(filepath.Join(root, target))
				assert.NoError(t, err, "%s links to %s", name, link)
			}
			if frag == "" {
				continue
			}
			if set, ok := anchors[target]; ok {
				assert.True(t, set[frag], "%s links to %s: no such anchor", name, link)
			}
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestTraitsDocumented keeps traitDocs in step with the traits
// #BuiltinInfo allows.
func TestTraitsDocumented(t *testing.T) {
	s, err := loadSchemas(root)
	require.NoError(t, err)
	info := s.defs["#BuiltinInfo"]
	require.NotNil(t, info)
	var allowed []string
	ast.Walk(info.Expr, func(n ast.Node) bool {
		if f, ok := n.(*ast.Field); ok {
			if name, _ := labelName(f.Label); name == "traits" {
				for _, d := range disjuncts(listElem(unparen(f.Value).(*ast.ListLit))) {
					allowed = append(allowed, strings.Trim(cueText(d), `"`))
				}
				return false
			}
		}
		return true
	}, nil)
	require.NotEmpty(t, allowed)
	assert.ElementsMatch(t, allowed, sortedKeys(traitDocs))
}

// TestDescribe checks the rendering of field types, bounds and defaults.
func TestDescribe(t *testing.T) {
	link := func(name string) string {
		if name == "#Duration" {
			return "D"
		}
		return ""
	}
	for src, want := range map[string][3]string{
		`*3 | int & >=1 & <=10`:         {"`int`", "`>=1`, `<=10`", "3"},
		`*"100ms" | #Duration`:          {"D", "", `"100ms"`},
		`*"a" | "b" | "c"`:              {"one of `\"a\"`, `\"b\"`, `\"c\"`", "", `"a"`},
		`string & !=""`:                 {"`string`", "non-empty", ""},
		`=~"^x$"`:                       {"`string`", "`=~\"^x$\"`", ""},
		`[#Identifier, ...#Identifier]`: {"list of `#Identifier`, at least 1", "", ""},
		`[...("a" | "b")]`:              {"list of one of `\"a\"`, `\"b\"`", "", ""},
		`{...} | string`:                {"struct (any fields) or `string`", "", ""},
		`[string]: string`:              {"map from `string` to `string`", "", ""},
		`number & >0 & <=1`:             {"`number`", "`>0`, `<=1`", ""},
		`*false | bool`:                 {"`bool`", "", "false"},
	} {
		e, err := parser.ParseExpr("x", src)
		if strings.HasPrefix(src, "[string]") {
			e, err = parser.ParseExpr("x", "{"+src+"}")
		}
		require.NoError(t, err, src)
		typ, bounds, dflt := describe(e, link)
		assert.Equal(t, want, [3]string{typ, bounds, dflt}, src)
	}
}

func TestSlug(t *testing.T) {
	assert.Equal(t, "max_tokens", slug("`max_tokens`"))
	assert.Equal(t, "identifier", slug("`#Identifier`"))
	assert.Equal(t, "fields-of-retry", slug("Fields of `retry`"))
}

// has asserts that page holds s, without printing the page.
func has(t *testing.T, page, s string, args ...any) {
	t.Helper()
	if !strings.Contains(page, s) {
		t.Errorf("the page does not hold %q %v", s, args)
	}
}

// TestDocsIndex checks that docs/README.md lists every page of docs/.
func TestDocsIndex(t *testing.T) {
	index, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, pages)
	for _, p := range pages {
		name := filepath.Base(p)
		if name == "README.md" {
			continue
		}
		assert.Contains(t, string(index), "]("+name+")", "docs/README.md does not list %s", name)
	}
}

// TestReadmeListsOrderRules checks that the ordering table of the
// repository's README has a row for every order/ and guard/ rule.
func TestReadmeListsOrderRules(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	n := 0
	for _, r := range compiler.Rules() {
		if strings.HasPrefix(r.ID, "order/") || strings.HasPrefix(r.ID, "guard/") {
			n++
			has(t, string(readme), "| `"+r.ID+"` |", "README.md's ordering table")
		}
	}
	require.NotZero(t, n)
}
