package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/serve"
)

// cmdMCPTools connects to the MCP servers a policy declares and prints
// their tools as CUE `tools:` entries, so that vet types guards against
// the arguments the upstream really takes.
func cmdMCPTools(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "mcp-tools")
	url := fs.String("url", "", "list the tools of the MCP server at this URL instead of a policy's")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	servers := map[string]plan.MCPServer{}
	dir := "."
	switch {
	case *url != "":
		if fs.NArg() != 0 {
			fs.Usage()
			return exitUsage
		}
		servers["url"] = plan.MCPServer{URL: *url}
	case fs.NArg() >= 1:
		p, code := loadPlan(ctx, env, fs.Arg(0))
		if p == nil {
			return code
		}
		dir = policyDir(fs.Arg(0))
		names := fs.Args()[1:]
		if len(names) == 0 {
			for name := range p.MCPServers {
				names = append(names, name)
			}
		}
		for _, name := range names {
			s, ok := p.MCPServers[name]
			if !ok {
				return fail(env, "mcp-tools: %s declares no mcp server %q", fs.Arg(0), name)
			}
			servers[name] = s
		}
		if len(servers) == 0 {
			return fail(env, "mcp-tools: %s declares no mcp servers", fs.Arg(0))
		}
	default:
		fs.Usage()
		return exitUsage
	}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		s := servers[name]
		cs, err := serve.Upstream(ctx, name, s, dir)
		if err != nil {
			return fail(env, "mcp-tools: %v", err)
		}
		tools, err := serve.UpstreamTools(ctx, cs)
		_ = cs.Close()
		if err != nil {
			return fail(env, "mcp-tools: mcp server %q: list tools: %v", name, err)
		}
		if i > 0 {
			fmt.Fprintln(env.stdout)
		}
		if err := writeToolsCUE(env.stdout, name, s.Prefix, tools); err != nil {
			return fail(env, "mcp-tools: %v", err)
		}
	}
	return exitOK
}

// pathArgNames and urlArgNames are the argument names mcp-tools declares as
// path_arg and url_arg.
var (
	pathArgNames = []string{"path", "paths", "file", "files", "filename", "filepath", "file_path", "dir", "directory"}
	urlArgNames  = []string{"url", "urls", "uri", "href", "link", "endpoint", "webhook_url", "callback_url"}
)

// argRefsNamed returns a reference to every property among names that
// holds a string ("name") or an array of strings ("/name/*"), as a string
// when there is one, a list when there are several, nil when none.
func argRefsNamed(props map[string]any, names []string) any {
	var refs []string
	for _, name := range names {
		p, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		switch {
		case typeAllows(p["type"], "string"):
			refs = append(refs, name)
		case typeAllows(p["type"], "array"):
			if items, _ := p["items"].(map[string]any); items != nil && typeAllows(items["type"], "string") {
				refs = append(refs, "/"+name+"/*")
			}
		}
	}
	switch len(refs) {
	case 0:
		return nil
	case 1:
		return refs[0]
	}
	return refs
}

// typeAllows reports whether a JSON Schema "type" (absent, a name or a list
// of names) admits want.
func typeAllows(t any, want string) bool {
	switch t := t.(type) {
	case nil:
		return true
	case string:
		return t == want
	case []any:
		for _, x := range t {
			if x == want {
				return true
			}
		}
	}
	return false
}

// writeToolsCUE prints tools as a CUE `tools:` struct: each tool's input
// schema as its args, side_effecting unless the server marks the tool
// read-only, and path_arg / url_arg naming every argument of the schema
// with a name such as path, files or url that holds a string or a list of
// strings, with the tool's description as a comment.
func writeToolsCUE(w io.Writer, server, prefix string, tools []*mcp.Tool) error {
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	ctx := cuecontext.New()
	var fields []ast.Decl
	for _, t := range tools {
		schema := map[string]any{}
		if b, err := json.Marshal(t.InputSchema); err == nil {
			_ = json.Unmarshal(b, &schema)
		}
		entry := map[string]any{"side_effecting": t.Annotations == nil || !t.Annotations.ReadOnlyHint}
		props, _ := schema["properties"].(map[string]any)
		if refs := argRefsNamed(props, pathArgNames); refs != nil {
			entry["path_arg"] = refs
		}
		if refs := argRefsNamed(props, urlArgNames); refs != nil {
			entry["url_arg"] = refs
		}
		if t.Annotations != nil && t.Annotations.IdempotentHint && entry["side_effecting"] == true {
			entry["retry_safe"] = true
		}
		entry["args"] = schema
		v := ctx.Encode(entry)
		if v.Err() != nil {
			return fmt.Errorf("tool %q: %v", t.Name, v.Err())
		}
		expr, ok := v.Syntax().(ast.Expr)
		if !ok {
			return fmt.Errorf("tool %q: schema is not a struct", t.Name)
		}
		f := &ast.Field{Label: ast.NewStringLabel(prefix + t.Name), Value: expr}
		if d := strings.TrimSpace(t.Description); d != "" {
			var lines []*ast.Comment
			for _, l := range strings.Split(d, "\n") {
				lines = append(lines, &ast.Comment{Text: "// " + strings.TrimRight(l, " \t")})
			}
			ast.AddComment(f, &ast.CommentGroup{Doc: true, List: lines})
		}
		fields = append(fields, f)
	}
	file := &ast.File{Decls: []ast.Decl{&ast.Field{Label: ast.NewIdent("tools"), Value: &ast.StructLit{Elts: fields}}}}
	ast.AddComment(file.Decls[0], &ast.CommentGroup{Doc: true, List: []*ast.Comment{{Text: fmt.Sprintf("// The tools of MCP server %q, as `agentc mcp-tools` lists them.", server)}}})
	b, err := format.Node(file)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
