package agentc_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/docgen/gen"
)

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
// fields and methods that exist, with the arguments they take. The blocks
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
		assert.Fail(t, "a Go block of the docs does not compile", "%s", l)
	}
}
