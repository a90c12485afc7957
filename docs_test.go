package agentc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
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

// goBlockRE finds a fenced Go block, indented or not: its indentation, and
// its text up to the closing fence.
var goBlockRE = regexp.MustCompile("(?ms)^([ \t]*)```go\n(.*?)^[ \t]*```[ \t]*$")

// snippetImports are the packages a Go block of the docs may use without
// importing them: the block is a fragment of a host's file.
var snippetImports = map[string]string{
	"context":   "context",
	"errors":    "errors",
	"fmt":       "fmt",
	"log":       "log",
	"maps":      "maps",
	"os":        "os",
	"time":      "time",
	"agentc":    "github.com/agentc-dev/agentc",
	"compiler":  "github.com/agentc-dev/agentc/compiler",
	"runtime":   "github.com/agentc-dev/agentc/runtime",
	"plan":      "github.com/agentc-dev/agentc/runtime/plan",
	"openai":    "github.com/openai/openai-go/v3",
	"option":    "github.com/openai/openai-go/v3/option",
	"anthropic": "github.com/anthropics/anthropic-sdk-go/v2",
	"aoption":   "github.com/anthropics/anthropic-sdk-go/v2/option",
}

// snippetPrelude declares what the blocks take as given: the host's
// variables (a context, a pipeline, its models and tools...) and the
// functions of its own they call.
const snippetPrelude = `
var (
	ctx        context.Context
	err        error
	pipe, pl   *runtime.Pipeline
	p          *plan.Plan
	cp         *runtime.Checkpointer
	models     map[string]runtime.ModelClient
	tools      map[string]runtime.ToolFunc
	myClient   runtime.ModelClient
	refund     runtime.ToolFunc
	fn         runtime.TurnFunc
	req        runtime.ChatRequest
	msgs       []runtime.Message
	items      []runtime.Item
	args       map[string]any
	runID      string
	runIDs     []string
	customerID string
	text       string
	query      string
	key        string
	job        any
)

func ack(any)                {}
func retryLater(any)         {}
func retryAt(any, time.Time) {}

var search struct {
	TopK func(context.Context, string, int) ([]runtime.Item, error)
}

func newBedrockClient(id, apiKey, baseURL string) (runtime.ModelClient, error) { return nil, nil }

var (
	_ = context.Background
	_ = errors.New
	_ = fmt.Sprint
	_ = log.Print
	_ = maps.Clone[map[string]string]
	_ = os.Exit
	_ = time.Now
	_ = agentc.Load
	_ = compiler.Compile
	_ = runtime.Build
	_ = plan.Load
	_ = openai.NewClient
	_ = option.WithBaseURL
	_ = anthropic.NewClient
	_ = aoption.WithBaseURL
)
`

// importRE is a block's import declaration, grouped or not.
var importRE = regexp.MustCompile(`(?ms)^import (?:\((.*?)^\)|(.*?))$\n?`)

// snippetSource makes a Go file of package name from a Go block of the docs
// at page:line: its imports join the usual ones (an import of a host's own
// package, example.com/..., is left out), "{ ... }" and "...;" placeholders
// are dropped, and a block that declares no function or type is the body
// of a function. A //line directive makes errors name the page's lines.
func snippetSource(name, page string, line int, block string) string {
	imports := map[string]bool{}
	for name, path := range snippetImports {
		imports[name+` "`+path+`"`] = true
	}
	for _, m := range importRE.FindAllStringSubmatch(block, -1) {
		for _, l := range strings.Split(m[1]+"\n"+m[2], "\n") {
			l, _, _ = strings.Cut(l, "//")
			l = strings.TrimSpace(l)
			known := slices.ContainsFunc(slices.Collect(maps.Values(snippetImports)), func(path string) bool { return l == `"`+path+`"` })
			if l != "" && !known && !strings.Contains(l, `"example.com/`) {
				imports[l] = true
			}
		}
	}
	// Keep the block's lines where they were: an import becomes blank lines.
	block = importRE.ReplaceAllStringFunc(block, func(s string) string { return strings.Repeat("\n", strings.Count(s, "\n")) })
	block = strings.NewReplacer("{ ... }", "{}", "...;", "").Replace(block)
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\nimport (\n", name)
	for _, spec := range slices.Sorted(maps.Keys(imports)) {
		fmt.Fprintf(&b, "\t%s\n", spec)
	}
	b.WriteString(")\n" + snippetPrelude)
	top := regexp.MustCompile(`(?m)^(func|type) `).MatchString(block)
	if !top {
		b.WriteString("\nfunc snippet() error {\n")
	}
	fmt.Fprintf(&b, "//line %s:%d\n%s\n", page, line+1, block)
	if !top {
		b.WriteString("\treturn nil\n}\n")
	}
	return b.String()
}

// TestDocsGoSnippetsCompile type-checks every Go block of the pages
// written by hand (README.md and docs/) against the current API, as a
// reader who copies one into a host would: each names functions, types,
// fields and methods that exist, with the arguments they take. So it does
// for the names of the API the pages' text quotes (docNamesSource). The blocks
// are fragments: the host's variables (ctx, pipe, models...) are declared
// beforehand, and a variable the block declares without using it is fine.
func TestDocsGoSnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go build")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	root, err := filepath.Abs(".")
	require.NoError(t, err)
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	require.NoError(t, err)
	pages = append(pages, "README.md")
	dir := t.TempDir()
	overlay := map[string]string{}
	var pkgs []string
	for _, page := range pages {
		page = filepath.ToSlash(page)
		if slices.Contains(gen.Pages, page) {
			continue
		}
		b, err := os.ReadFile(page)
		require.NoError(t, err)
		text := string(b)
		for _, m := range goBlockRE.FindAllStringSubmatchIndex(text, -1) {
			indent, block := text[m[2]:m[3]], text[m[4]:m[5]]
			block = strings.ReplaceAll("\n"+block, "\n"+indent, "\n")[1:]
			line := strings.Count(text[:m[0]], "\n") + 1
			name := fmt.Sprintf("s%d", len(pkgs))
			file := filepath.Join(dir, name+".go")
			require.NoError(t, os.WriteFile(file, []byte(snippetSource(name, page, line, block)), 0o644))
			overlay[filepath.Join(root, "internal", "docsnippets", name, "snippet.go")] = file
			pkgs = append(pkgs, "./internal/docsnippets/"+name)
		}
	}
	require.Greater(t, len(pkgs), 15, "the Go blocks found")
	names, n := docNamesSource(t, root, pages)
	require.Greater(t, n, 200, "the names of the API found in the pages' text")
	file := filepath.Join(dir, "names.go")
	require.NoError(t, os.WriteFile(file, []byte(names), 0o644))
	overlay[filepath.Join(root, "internal", "docsnippets", "names", "names.go")] = file
	pkgs = append(pkgs, "./internal/docsnippets/names")
	ov, err := json.Marshal(map[string]any{"Replace": overlay})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "overlay.json"), ov, 0o644))
	cmd := exec.Command("go", append([]string{"build", "-gcflags=-e", "-overlay", filepath.Join(dir, "overlay.json")}, pkgs...)...)
	out, _ := cmd.CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if l == "" || strings.HasPrefix(l, "#") || strings.Contains(l, "declared and not used") ||
			strings.Contains(l, "imported and not used") {
			continue
		}
		assert.Fail(t, "a Go block of the docs, or a name of the API their text quotes, does not compile", "%s", l)
	}
}

// docPackages are the packages whose names the pages' text quotes, by the
// name it qualifies them with, and their directories.
var docPackages = map[string]string{
	"agentc":    ".",
	"compiler":  "compiler",
	"runtime":   "runtime",
	"plan":      "runtime/plan",
	"grounding": "runtime/grounding",
	"redis":     "runtime/store/redis",
	"storetest": "runtime/store/storetest",
	"egress":    "builtins/egress",
	"serve":     "serve",
}

// docNameRE is a name of the API quoted in a page's text: pkg.Name, or
// pkg.Type.Member, anywhere in a code span; Type.Member (a type of
// runtime's) when it opens the span.
var (
	codeSpanRE = regexp.MustCompile("`([^`\n]+)`")
	docNameRE  = regexp.MustCompile(`(?:^|[^\w.])(agentc|compiler|runtime|plan|grounding|redis|storetest|egress|serve)\.([A-Z]\w*)(?:\.([A-Z]\w*))?\b`)
	typeNameRE = regexp.MustCompile(`^([A-Z]\w*)\.([A-Z]\w*)\b`)
)

// exportedDecls returns the exported top-level names the package in dir
// declares outside its tests: whether each is a type (a generic one is left
// out, as is a generic function: neither can be named without its
// arguments).
func exportedDecls(t *testing.T, dir string) map[string]bool {
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	require.NoError(t, err)
	decls := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, d := range af.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() && d.Type.TypeParams == nil {
					decls[d.Name.Name] = false
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && s.TypeParams == nil {
							decls[s.Name.Name] = true
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								decls[n.Name] = false
							}
						}
					}
				}
			}
		}
	}
	return decls
}

// docNamesSource makes a Go file that refers to every name of the API the
// pages' code spans quote (runtime.Classify, Pipeline.EndRun,
// grounding.Template.Delimiters), each under a //line directive naming the
// page's line, so that a name renamed or removed without its page fails to
// compile there. A pkg.Name its package does not declare is referred to all
// the same (the compiler names it); a Type.Member whose Type is not one of
// runtime's is not taken for a name of the API. It returns the file and how
// many names it holds.
func docNamesSource(t *testing.T, root string, pages []string) (string, int) {
	decls := map[string]map[string]bool{}
	for name, dir := range docPackages {
		decls[name] = exportedDecls(t, filepath.Join(root, dir))
	}
	var b strings.Builder
	b.WriteString("package names\n\nimport (\n")
	for _, name := range slices.Sorted(maps.Keys(docPackages)) {
		path := "github.com/agentc-dev/agentc"
		if dir := docPackages[name]; dir != "." {
			path += "/" + dir
		}
		fmt.Fprintf(&b, "\t%s %q\n", name, path)
	}
	b.WriteString(")\n")
	seen := map[string]bool{}
	refer := func(page string, line int, pkg, name, member string) {
		ref := pkg + "." + name + "." + member
		if seen[ref] {
			return
		}
		seen[ref] = true
		fmt.Fprintf(&b, "\n//line %s:%d\n", page, line)
		switch {
		case decls[pkg][name] && member != "":
			fmt.Fprintf(&b, "var _ = func(v %s.%s) { _ = v.%s }\n", pkg, name, member)
		case decls[pkg][name]:
			fmt.Fprintf(&b, "var _ *%s.%s\n", pkg, name)
		case member != "":
			fmt.Fprintf(&b, "var _ = %s.%s.%s\n", pkg, name, member)
		default:
			fmt.Fprintf(&b, "var _ = %s.%s\n", pkg, name)
		}
	}
	for _, page := range pages {
		text, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		// Leave the fenced blocks out: the Go ones are compiled whole, and
		// the others are not Go.
		prose := regexp.MustCompile("(?ms)^[ \t]*```.*?^[ \t]*```[ \t]*$").ReplaceAllStringFunc(string(text), func(s string) string {
			return strings.Repeat("\n", strings.Count(s, "\n"))
		})
		for _, m := range codeSpanRE.FindAllStringSubmatchIndex(prose, -1) {
			span := prose[m[2]:m[3]]
			line := strings.Count(prose[:m[0]], "\n") + 1
			for _, n := range docNameRE.FindAllStringSubmatch(span, -1) {
				refer(page, line, n[1], n[2], n[3])
			}
			if n := typeNameRE.FindStringSubmatch(span); n != nil && decls["runtime"][n[1]] {
				refer(page, line, "runtime", n[1], n[2])
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(docPackages)) {
		fmt.Fprintf(&b, "\nvar _ = %s.%s\n", name, firstDecl(decls[name]))
	}
	return b.String(), len(seen)
}

// firstDecl is a value the package declares, so that its import is used.
func firstDecl(decls map[string]bool) string {
	for _, name := range slices.Sorted(maps.Keys(decls)) {
		if !decls[name] {
			return name
		}
	}
	return ""
}
