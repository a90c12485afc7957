package serve

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/agentc-dev/agentc/runtime"
)

// TestCoercionFailureIsAFailure: a model's output that does not match
// output_coerce's schema, after the retry outside re-asked, fails the call
// with kind "failure", the gateway's class of a failure it has no other
// class for, which the Errors table lists with its status: a 502 (the
// model's answer was not a usable one), in the same class on every route,
// naming the layer, its message the diagnostics.
func TestCoercionFailureIsAFailure(t *testing.T) {
	text := reply{body: transcript(t, "openai", "text.sse")} // "Hello! How can I help you today?"
	g := newGateway(t, `{use: "retry", max_attempts: 2, initial_delay: "1ms", max_delay: "1ms"},
	{use: "output_coerce", schema: {type: "object", required: ["answer"]}}`, []reply{text, text, text, text, text, text, text, text, text, text}, nil)
	for _, tc := range []struct {
		route, body string
		kind, typ   string // the paths of the class and of the type
	}{
		{"/v1/chat/completions", `{"model":"primary","messages":[{"role":"user","content":"hi"}]}`, "error.kind", "error.type"},
		{"/v1/chat/completions", `{"model":"primary","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "error.kind", "error.type"},
		{"/v1/messages", `{"model":"primary","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "error.kind", "error.type"},
		{"/v1/messages", `{"model":"primary","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "error.kind", "error.type"},
		{"/v1/responses", `{"model":"primary","input":"hi"}`, "error.kind", "error.type"},
	} {
		status, _, body := do(t, "POST", g.url+tc.route, clientKey, []byte(tc.body), "Content-Type", "application/json", "anthropic-version", "2023-06-01")
		assert.Equal(t, http.StatusBadGateway, status, tc.body)
		assert.Equal(t, "failure", gjson.Get(body, tc.kind).String(), tc.body)
		assert.Equal(t, "failure", gjson.Get(body, "error.code").String(), tc.body)
		assert.Equal(t, "output_coerce", gjson.Get(body, "error.layer").String(), tc.body)
		assert.Contains(t, gjson.Get(body, "error.message").String(), "output does not match the schema", tc.body)
	}

	// With partial, a delta the output can no longer become valid after
	// fails the stream once the first was delivered: the error event of
	// each API carries the same class.
	broken := reply{body: strings.Replace(text.body, `"content":"Hello"`, `"content":"{\"answer\":"`, 1)}
	g = newGateway(t, `{use: "output_coerce", partial: true, schema: {type: "object", required: ["answer"]}}`, []reply{broken, broken}, nil)
	for _, tc := range []struct{ route, body string }{
		{"/v1/chat/completions", `{"model":"primary","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/messages", `{"model":"primary","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		status, _, body := do(t, "POST", g.url+tc.route, clientKey, []byte(tc.body), "Content-Type", "application/json", "anthropic-version", "2023-06-01")
		assert.Equal(t, http.StatusOK, status, "the stream had begun")
		assert.Contains(t, body, `{\"answer\":`, "the valid prefix was delivered")
		i := strings.Index(body, `"kind":`)
		if !assert.Positive(t, i, "an error event: %s", body) {
			continue
		}
		line := body[strings.LastIndex(body[:i], "data: ")+len("data: "):]
		line = line[:strings.IndexByte(line, '\n')]
		assert.Equal(t, "failure", gjson.Get(line, "error.kind").String(), line)
		assert.Equal(t, "failure", gjson.Get(line, "error.code").String(), line)
		assert.Equal(t, "output_coerce", gjson.Get(line, "error.layer").String(), line)
	}
}

// TestErrorsTableListsEveryClass holds the Errors table of docs/serve.md,
// which says that an error's kind is always one of the classes of its last
// column, to the classes the gateway answers with: every kind the runtime
// names a failure by (runtime.KindOf; a call its client cancelled is not
// answered) and the gateway's own, every errCode the package's source
// declares (gatewayClasses), so that a class added without a row fails
// here. "failure", the runtime's class of a failure it has no other for
// (output_coerce's output that does not match the schema), "unavailable"
// (the shutdown), "foreign_host", "cross_origin", "session_key_mismatch"
// and the /mcp route's classes named by a status were answered but not
// listed.
func TestErrorsTableListsEveryClass(t *testing.T) {
	doc, err := os.ReadFile("../docs/serve.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "\n## Errors\n")
	require.True(t, ok, "the Errors section of docs/serve.md")
	section, _, _ = strings.Cut(section, "\n### ")
	listed := map[string]bool{}
	for line := range strings.Lines(section) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 7 || !strings.HasPrefix(line, "| ") {
			continue
		}
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(cells[len(cells)-2], -1) {
			listed[m[1]] = true
		}
	}
	require.NotEmpty(t, listed, "the last column of the Errors table")
	classes, prefixes := gatewayClasses(t)
	require.Contains(t, classes, string(errBadRequest), "the errCode constants of the package")
	require.Contains(t, classes, string(errForeignHost), "the errCode constants of the package")
	require.Contains(t, prefixes, "mcp_", "the classes /mcp names by a status")
	for _, kind := range append(classes, "blocked", "budget", "in_doubt", "store_unavailable", "breaker_open",
		string(runtime.KindTransient), string(runtime.KindRateLimited), string(runtime.KindTimeout), string(runtime.KindPermanent),
		runtime.KindOf(errors.New("unclassified"))) {
		assert.True(t, listed[kind], "the Errors table lists the class %q", kind)
	}
	for _, prefix := range prefixes {
		assert.Contains(t, section, "`"+prefix+"`", "the Errors section says which classes begin with %q", prefix)
	}
	for _, kind := range []string{"mcp_internal_server_error", "mcp_conflict"} {
		assert.Contains(t, section, "`"+kind+"`", "the Errors section gives an example of the /mcp classes")
	}
}

// gatewayClasses returns the classes the package's source (its files
// other than tests) answers with: the values of the constants of type
// errCode and of the conversions errCode("...") of a literal, and the
// literal prefixes of conversions errCode("..." + ...) that build a class.
func gatewayClasses(t *testing.T) (classes, prefixes []string) {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	literal := func(e ast.Expr) (string, bool) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(lit.Value)
		return v, err == nil
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				if id, ok := n.Type.(*ast.Ident); ok && id.Name == "errCode" {
					for _, v := range n.Values {
						lit, ok := literal(v)
						require.True(t, ok, "%s: an errCode constant holds a string literal", fset.Position(v.Pos()))
						classes = append(classes, lit)
					}
				}
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); !ok || id.Name != "errCode" || len(n.Args) != 1 {
					return true
				}
				arg := n.Args[0]
				if lit, ok := literal(arg); ok {
					classes = append(classes, lit)
					return true
				}
				for {
					b, ok := arg.(*ast.BinaryExpr)
					if !ok || b.Op != token.ADD {
						break
					}
					arg = b.X
				}
				lit, ok := literal(arg)
				require.True(t, ok, "%s: a conversion to errCode begins with a string literal", fset.Position(n.Pos()))
				prefixes = append(prefixes, lit)
			}
			return true
		})
	}
	return classes, prefixes
}
