package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const awkwardSchema = `{
 "type": "object",
 "$defs": {"addr": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["zip"], "additionalProperties": false}},
 "properties": {
  "shipping": {"$ref": "#/$defs/addr"},
  "items": {"type": "array", "minItems": 1, "items": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}}, "required": ["sku"]}},
  "mode": {"enum": ["fast", "slow", null]},
  "target": {"oneOf": [{"type": "string", "format": "uri"}, {"type": "object", "properties": {"id": {"type": "integer"}}}]},
  "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "He said \"hi\"\nthen left — ü ✓ \u2028 sep \\ back", "default": null},
  "labels": {"type": "object", "additionalProperties": {"type": "string"}},
  "when": {"type": "string", "format": "date-time", "default": "2020-01-01T00:00:00Z"},
  "ratio": {"type": "number", "default": 0.5, "multipleOf": 0.1},
  "big": {"type": "integer", "maximum": 9007199254740991, "minimum": -1e300},
  "_hidden": {"type": "string"},
  "#def": {"type": "string"},
  "$dollar": {"type": "string"},
  "a.b": {"type": "string"},
  "with space": {"type": "integer", "default": 3}
 },
 "required": ["shipping"],
 "additionalProperties": false
}`

// TestMCPToolsAwkwardSchemas lists tools whose schemas use what generated
// schemas do ($defs and $ref, arrays of objects, enums with null, oneOf and
// anyOf, additionalProperties, format, default, integers past 2^53, names
// CUE would read as hidden fields or definitions) under names with dots,
// dashes, colons and slashes: the printed entries hold the schema as the
// server gave it, vet clean, and type guards, misspellings included.
func TestMCPToolsAwkwardSchemas(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "awk", Version: "1"}, nil)
	h := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	for _, name := range []string{"orders.create", "orders-list", "ns:tool", "a/b"} {
		srv.AddTool(&mcp.Tool{Name: name, Description: "Quotes \"x\" and 'y'\r\nünïcode — ✓\r\rend */", InputSchema: json.RawMessage(awkwardSchema)}, h)
	}
	srv.AddTool(&mcp.Tool{Name: "move", InputSchema: json.RawMessage(`{"type": "object", "properties": {
		"source": {"type": "string"}, "destination": {"type": "string"}, "outputPath": {"type": "string"},
		"backupFiles": {"type": "array", "items": {"type": "string"}}, "callbackURL": {"type": "string"},
		"profile": {"type": "string"}, "sourceCount": {"type": "integer"}}}`)}, h)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer ts.Close()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(fmt.Sprintf("package p\n\nmcp: servers: awk: {url: %q, prefix: \"awk_\"}\n", ts.URL)), 0o644))
	var stdout, stderr strings.Builder
	require.Equal(t, exitOK, Main(context.Background(), []string{"mcp-tools", dir}, &stdout, &stderr), stderr.String())
	out := stdout.String()

	// Numbers are printed as the server wrote them, not as float64.
	assert.Contains(t, out, "maximum: 9007199254740991\n")
	assert.Regexp(t, `\sminItems: +1\n`, out)
	assert.Regexp(t, `\sminimum: +1\n`, out)
	assert.Regexp(t, `\sdefault: +3\n`, out)
	assert.NotContains(t, out, "1.0\n")
	assert.NotContains(t, out, "\r", "a carriage return in a description ends its comment line")
	assert.Contains(t, out, "\t// Quotes \"x\" and 'y'\n\t// ünïcode — ✓\n\t//\n\t// end */\n\t\"awk_orders.create\": {")
	for _, label := range []string{`"awk_orders-list": {`, `"awk_ns:tool": {`, `"awk_a/b": {`, `"_hidden": {`, `"#def": {`, `"a.b": {`, `"with space": {`} {
		assert.Contains(t, out, label)
	}
	assert.Regexp(t, `path_arg: +\["source", "destination", "/backupFiles/\*", "outputPath"\]`, out,
		"the filesystem server's move_file takes source and destination")
	assert.Regexp(t, `url_arg: +"callbackURL"`, out)

	// Pasted into the policy, the entries vet clean, and a guard scoped to
	// one of the tools is typed by its schema, $ref included.
	guard := "\nchains: tool: [{use: \"guard\", tools: [\"awk_orders.create\", \"awk_ns:tool\"], deny: %q}]\n"
	vet := func(expr string) (int, string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tools.cue"), []byte(out+fmt.Sprintf(guard, expr)), 0o644))
		var o, e strings.Builder
		return Main(context.Background(), []string{"vet", dir}, &o, &e), o.String() + e.String()
	}
	for _, expr := range []string{
		"args.shipping.zip == '75001'",
		"has(args.items) && args.items.exists(i, i.sku == 'x' && has(i.qty) && i.qty > 3)",
		"has(args.labels) && 'x' in args.labels",
		"has(args.big) && args.big > 9007199254740990",
		"has(args.mode) && args.mode == 'fast'",
	} {
		code, msg := vet(expr)
		assert.Equal(t, exitOK, code, "%s: %s", expr, msg)
	}
	for expr, want := range map[string]string{
		"args.shipping.zipp == '1'":                          "undefined field 'zipp'; did you mean 'zip'?",
		"has(args.items) && args.items.all(i, i.skuu != '')": "undefined field 'skuu'; did you mean 'sku'?",
		"has(args.notee)":                                    "undefined field 'notee'; did you mean 'note'?",
	} {
		code, msg := vet(expr)
		assert.Equal(t, exitProblems, code, expr)
		assert.Contains(t, msg, "cel/type", expr)
		assert.Contains(t, msg, want, expr)
	}
}
