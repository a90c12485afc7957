package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/token"
	cuejson "cuelang.org/go/encoding/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/envtmpl"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/serve"
)

// withoutOutput returns the policy at path as loadPlan loads it, less the
// file out when it is one of the policy's: the output of a previous run,
// which the listing replaces, is not part of the policy listed (stale, it
// would contradict the policy or fail to load).
func withoutOutput(path, out string) []string {
	if out == "" || strings.HasSuffix(path, ".json") {
		return []string{path}
	}
	files, err := dsl.ResolvePaths([]string{path})
	if err != nil {
		return []string{path}
	}
	ost, err := os.Stat(out)
	if err != nil {
		return []string{path}
	}
	kept := slices.DeleteFunc(slices.Clone(files), func(f string) bool {
		st, err := os.Stat(f)
		return err == nil && os.SameFile(st, ost)
	})
	if len(kept) == 0 || len(kept) == len(files) {
		return []string{path}
	}
	return kept
}

// cmdMCPTools connects to the MCP servers a policy declares and prints
// their tools as CUE `tools:` entries, so that vet types guards against
// the arguments the upstream really takes.
func cmdMCPTools(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlags(env, "mcp-tools")
	url := fs.String("url", "", "list the tools of the MCP server at this URL instead of a policy's")
	out := fs.String("o", "", "write the output to `FILE` (beside the policy: mcp_tools.cue) once every server is listed, not to stdout; nothing is written when one fails")
	pkg := fs.String("package", "", "start the output with package `NAME` (default: the policy's package; none for -url)")
	var headers headerFlags
	fs.Var(&headers, "header", "send the header `Name: value` with every request to the -url server (repeatable; ${NAME} in the value reads the environment variable NAME, $$ writes a $)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if len(headers) > 0 && *url == "" {
		fmt.Fprintln(env.stderr, "agentc: mcp-tools: -header applies to -url; a policy's servers send the headers it declares")
		fs.Usage()
		return exitUsage
	}
	h, err := headers.parse()
	if err != nil {
		fmt.Fprintf(env.stderr, "agentc: mcp-tools: %v\n", err)
		fs.Usage()
		return exitUsage
	}
	if *pkg != "" && !packageName.MatchString(*pkg) {
		fmt.Fprintf(env.stderr, "agentc: mcp-tools: -package %q is not a CUE package name (a letter, then letters, digits or _)\n", *pkg)
		fs.Usage()
		return exitUsage
	}
	servers := map[string]plan.MCPServer{}
	dir := "."
	var policy *plan.Plan
	var declared map[string]declaration
	switch {
	case *url != "":
		if fs.NArg() != 0 {
			fs.Usage()
			return exitUsage
		}
		servers["url"] = plan.MCPServer{URL: *url, Headers: h}
	case fs.NArg() >= 1:
		p, src, code := loadPolicy(ctx, env, withoutOutput(fs.Arg(0), *out)...)
		if p == nil {
			return code
		}
		dir = policyDir(fs.Arg(0))
		policy = p
		declared = declarations(p, src)
		if *pkg == "" {
			*pkg = p.Policy
		}
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
	log := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	scanner, err := toolScanner(ctx, policy, dir, log)
	if err != nil {
		return fail(env, "mcp-tools: %v", err)
	}
	defer func() { _ = scanner.pl.Close() }()
	var buf bytes.Buffer
	if *pkg != "" {
		fmt.Fprintf(&buf, "package %s\n\n", *pkg)
	}
	for i, name := range names {
		s := servers[name]
		tools, err := serve.ListUpstream(ctx, name, s, dir)
		if err != nil {
			return fail(env, "mcp-tools: %v", err)
		}
		listed := make([]serve.ListedTool, len(tools))
		for i, t := range tools {
			listed[i] = serve.ListedTool{Name: s.Prefix + t.Name, Server: name, Tool: t}
		}
		blocked := serve.ScanTools(ctx, scanner.pl, listed, log)
		if i > 0 {
			fmt.Fprintln(&buf)
		}
		if err := writeToolsCUE(&buf, name, s.Prefix, tools, scanner.note(blocked), declared); err != nil {
			return fail(env, "mcp-tools: %v", err)
		}
	}
	if *out == "" {
		_, _ = env.stdout.Write(buf.Bytes())
		return exitOK
	}
	if err := replaceFile(*out, buf.Bytes()); err != nil {
		return fail(env, "mcp-tools: %v", err)
	}
	return exitOK
}

// packageName is a CUE package name as mcp-tools writes one.
var packageName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]*$`)

// replaceFile writes b to path whole or not at all: to a temporary file
// beside it (not named .cue, so a policy loaded meanwhile does not read
// it), then renamed over it.
func replaceFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// headerFlags are the -header flags of mcp-tools, each "Name: value".
type headerFlags []string

func (h *headerFlags) String() string { return "" }

func (h *headerFlags) Set(v string) error {
	*h = append(*h, v)
	return nil
}

// headerName is a header name, an HTTP token (as the policy schema's
// headers have it).
var headerName = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

// parse returns the headers as an MCP server's headers, whose values the
// connection expands as a policy's. A malformed one is an error naming it
// (by its name, or its place when it has none), never its value, which is
// often a credential.
func (h headerFlags) parse() (map[string]string, error) {
	if len(h) == 0 {
		return nil, nil
	}
	out := make(map[string]string, len(h))
	seen := map[string]string{}
	for i, arg := range h {
		name, value, ok := strings.Cut(arg, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("-header %d of %d is not \"Name: value\"", i+1, len(h))
		}
		if !headerName.MatchString(name) {
			return nil, fmt.Errorf("-header %d of %d: its name %q is not a header name (letters, digits and !#$%%&'*+.^_`|~-)", i+1, len(h), name)
		}
		if dsl.TransportHeader(name) {
			return nil, fmt.Errorf("-header %s is set by the MCP transport itself; remove it", name)
		}
		value = strings.TrimSpace(value)
		if strings.ContainsAny(value, "\r\n") {
			return nil, fmt.Errorf("-header %s: its value holds a line break", name)
		}
		if _, err := envtmpl.Vars(value); err != nil {
			return nil, fmt.Errorf("-header %s: its value holds a $ that is neither ${NAME} (an environment variable) nor $$ (a $)", name)
		}
		canon := http.CanonicalHeaderKey(name)
		if first, dup := seen[canon]; dup {
			return nil, fmt.Errorf("-header %s is given twice (as %s before); give it once", name, first)
		}
		seen[canon] = name
		out[name] = value
	}
	return out, nil
}

// scanner is the pipeline whose chat chain checks the tools' definitions
// as `agentc serve` does before it lists them (serve.ScanTools), and whether
// its layers are the policy's own or the security builtin with its defaults.
type scanner struct {
	pl       *runtime.Pipeline
	defaults bool
}

// toolScanner builds the layers that check the listed tools: the policy's
// chat layers that check tool definitions (security), as serve runs them;
// without a policy, when it has none, or when they cannot be built (a
// classifier's model without its API key), the security builtin with its
// defaults, which is what marks a poisoned tool in the output either way.
func toolScanner(ctx context.Context, p *plan.Plan, dir string, log *slog.Logger) (scanner, error) {
	if p != nil {
		var layers []plan.Layer
		for _, l := range p.Chains.Chat {
			if m, ok := runtime.LookupModule(l.Use); ok && m.New != nil {
				if _, scans := m.New().(interface {
					ScanTool(context.Context, runtime.ToolDef) error
				}); scans {
					layers = append(layers, l)
				}
			}
		}
		if len(layers) > 0 {
			sp := &plan.Plan{Version: p.Version, Policy: p.Policy, Models: p.Models, Chains: plan.Chains{Chat: layers}}
			pl, err := runtime.Build(ctx, sp, runtime.Deps{Dir: dir, Logger: log})
			if err == nil {
				return scanner{pl: pl}, nil
			}
			log.Warn("mcp-tools: the policy's security layers cannot be built; checking the tools with the default detector", "error", err)
		}
	}
	sp := &plan.Plan{Version: plan.Version, Policy: "mcp-tools", Chains: plan.Chains{Chat: []plan.Layer{{Use: "security", Name: "security"}}}}
	pl, err := runtime.Build(ctx, sp, runtime.Deps{Dir: dir, Logger: log})
	if err != nil {
		return scanner{}, err
	}
	return scanner{pl: pl, defaults: true}, nil
}

// note returns the CUE comment of each blocked tool, by its upstream name
// (without the server's prefix, which blocked keys carry).
func (s scanner) note(blocked map[string]*runtime.BlockedError) func(name string) string {
	return func(name string) string {
		b := blocked[name]
		if b == nil {
			return ""
		}
		why := fmt.Sprintf("agentc serve withholds this tool: layer %q blocked its definition", b.Layer)
		if s.defaults && b.Layer != "mcp" { // "mcp" withholds a tool whatever the layers (serve.ScanTools)
			why = "agentc serve withholds this tool under a security layer: its default detector blocks its definition"
		}
		reason := strings.Join(strings.Fields(b.Message), " ")
		return fmt.Sprintf("WITHHELD: %s (%s). No entry: its description and input schema are not reproduced here; read them at the server before you declare the tool.", why, reason)
	}
}

// pathArgs and urlArgs are the argument names mcp-tools declares as
// path_arg and url_arg: these names, and names with one of these endings
// (target_path, outputDir, callback_url...).
var (
	pathArgs = argNames{
		names:  []string{"path", "paths", "file", "files", "filename", "filepath", "file_path", "dir", "directory", "source", "destination", "src", "dst", "dest"},
		ending: []string{"_path", "Path", "_paths", "Paths", "_file", "File", "_files", "Files", "_filename", "Filename", "_dir", "Dir", "_directory", "Directory"},
	}
	urlArgs = argNames{
		names:  []string{"url", "urls", "uri", "href", "link", "endpoint", "webhook_url", "callback_url"},
		ending: []string{"_url", "Url", "URL", "_urls", "Urls", "URLs", "_uri", "Uri", "URI", "_endpoint", "Endpoint"},
	}
)

// argNames is a set of argument names: some names, and the names with
// one of some endings.
type argNames struct{ names, ending []string }

// rank orders the names of a set: a name listed by its place in the list,
// a name with one of the endings after them; ok is false for other names.
func (a argNames) rank(name string) (rank int, ok bool) {
	if i := slices.Index(a.names, name); i >= 0 {
		return i, true
	}
	for _, e := range a.ending {
		if len(name) > len(e) && strings.HasSuffix(name, e) {
			return len(a.names), true
		}
	}
	return 0, false
}

// argRefsNamed returns a reference to every property named as in set that
// holds a string ("name") or an array of strings ("/name/*"), as a string
// when there is one, a list when there are several, nil when none.
func argRefsNamed(props map[string]any, set argNames) any {
	type ref struct {
		rank int
		name string
		ref  string
	}
	var refs []ref
	for name, p := range props {
		p, ok := p.(map[string]any)
		rank, named := set.rank(name)
		if !ok || !named {
			continue
		}
		switch {
		case typeAllows(p["type"], "string"):
			refs = append(refs, ref{rank, name, name})
		case typeAllows(p["type"], "array"):
			if items, _ := p["items"].(map[string]any); items != nil && typeAllows(items["type"], "string") {
				refs = append(refs, ref{rank, name, "/" + name + "/*"})
			}
		}
	}
	slices.SortFunc(refs, func(a, b ref) int { return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.name, b.name)) })
	switch len(refs) {
	case 0:
		return nil
	case 1:
		return refs[0].ref
	}
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.ref
	}
	return out
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

// writeToolsCUE prints tools as a CUE `tools:` struct (a tool withheld
// returns a note for is a comment in place of its entry): each tool's input
// schema as its args, side_effecting unless the server marks the tool
// read-only, and path_arg / url_arg naming every argument of the schema
// with a name such as path, files or url that holds a string or a list of
// strings, with the tool's description as a comment. A field the policy
// declares for the tool (declared, by the name served) is left to it, so
// that the output unifies with the policy: its args, path_arg and url_arg
// when it declares them, and side_effecting and retry_safe when it writes
// a value of its own (as for a tool whose annotations are not trusted)
// that differs from the one written. The schema's default, false, is not
// one: the server's value is written over it, as a tool the server does
// not mark read-only is side-effecting.
func writeToolsCUE(w io.Writer, server, prefix string, tools []*mcp.Tool, withheld func(name string) string, declared map[string]declaration) error {
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	ctx := cuecontext.New()
	var fields []ast.Decl
	for _, t := range tools {
		if note := withheld(prefix + t.Name); note != "" {
			// Not an entry, as serve does not list it: its description and
			// input schema (parameter descriptions included) are not
			// reproduced in a policy.
			fields = append(fields, &ast.CommentGroup{Doc: true, List: []*ast.Comment{{Text: "// " + strconv.Quote(prefix+t.Name) + ": " + note}}})
			continue
		}
		raw, err := json.MarshalIndent(t.InputSchema, "", "\t")
		if err != nil {
			return fmt.Errorf("tool %q: input schema: %v", t.Name, err)
		}
		schema := map[string]any{}
		_ = json.Unmarshal(raw, &schema)
		// The schema is printed from its JSON text, not encoded from the
		// map, whose numbers CUE would print as floats (minItems: 1.0).
		args, err := cuejson.Extract(t.Name, raw)
		if err != nil {
			return fmt.Errorf("tool %q: input schema: %v", t.Name, err)
		}
		compactLists(args)
		closeArgs(args, schema)
		entry := map[string]any{"side_effecting": t.Annotations == nil || !t.Annotations.ReadOnlyHint}
		props, _ := schema["properties"].(map[string]any)
		if refs := argRefsNamed(props, pathArgs); refs != nil {
			entry["path_arg"] = refs
		}
		if refs := argRefsNamed(props, urlArgs); refs != nil {
			entry["url_arg"] = refs
		}
		if t.Annotations != nil && t.Annotations.IdempotentHint && entry["side_effecting"] == true {
			entry["retry_safe"] = true
		}
		decl, isDeclared := declared[prefix+t.Name]
		var left []string
		if isDeclared {
			left = leaveDeclared(entry, decl)
		}
		v := ctx.Encode(entry)
		if v.Err() != nil {
			return fmt.Errorf("tool %q: %v", t.Name, v.Err())
		}
		expr, ok := v.Syntax().(*ast.StructLit)
		if !ok {
			return fmt.Errorf("tool %q: entry is not a struct", t.Name)
		}
		if !isDeclared || len(decl.Args) == 0 {
			expr.Elts = append([]ast.Decl{&ast.Field{Label: ast.NewIdent("args"), Value: args}}, expr.Elts...)
		}
		f := &ast.Field{Label: ast.NewStringLabel(prefix + t.Name), Value: expr}
		if d := strings.TrimSpace(t.Description); d != "" {
			var lines []*ast.Comment
			for _, l := range strings.Split(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(d), "\n") {
				lines = append(lines, &ast.Comment{Text: strings.TrimRight("// "+l, " \t")})
			}
			ast.AddComment(f, &ast.CommentGroup{Doc: true, List: lines})
		}
		if len(left) > 0 {
			ast.AddComment(f, &ast.CommentGroup{Doc: true, List: []*ast.Comment{{Text: "// Left to the policy's declaration of this tool: " + strings.Join(left, ", ") + "."}}})
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

// declaration is the policy's declaration of a tool, and whether it
// writes side_effecting and retry_safe or takes the schema's default.
type declaration struct {
	plan.Tool
	setsSideEffecting, setsRetrySafe bool
}

// declarations returns the tools p declares, by name. src is the policy p
// is compiled from; for a plan.json (src nil), which keeps the values and
// not whether they were written, every value counts as written: a field
// whose value differs from the server's is left to the plan, which the
// output must not contradict.
func declarations(p *plan.Plan, src *dsl.Policy) map[string]declaration {
	out := make(map[string]declaration, len(p.Tools))
	for name, t := range p.Tools {
		d := declaration{Tool: t, setsSideEffecting: true, setsRetrySafe: true}
		if src != nil {
			st := src.Tools[name]
			d.setsSideEffecting = st != nil && st.SideEffectingSet
			d.setsRetrySafe = st != nil && st.RetrySafeSet
		}
		out[name] = d
	}
	return out
}

// leaveDeclared removes from entry the fields decl, the policy's
// declaration of the tool, gives a value of its own (writeToolsCUE), and
// says what each would have been.
func leaveDeclared(entry map[string]any, decl declaration) []string {
	var left []string
	leave := func(field string, declares bool) {
		if v, ok := entry[field]; ok && declares {
			b, _ := json.Marshal(v)
			left = append(left, fmt.Sprintf("%s (the server's definition gives %s)", field, b))
			delete(entry, field)
		}
	}
	leave("path_arg", len(decl.PathArgs) > 0 || decl.PathArg != "")
	leave("url_arg", len(decl.URLArgs) > 0 || decl.URLArg != "")
	leave("side_effecting", decl.setsSideEffecting && entry["side_effecting"] != decl.SideEffecting)
	leave("retry_safe", decl.setsRetrySafe && entry["retry_safe"] != nil && entry["retry_safe"] != decl.RetrySafe)
	return left
}

// compactLists lays a list of scalars (required, enum) out on one line, as
// the indented JSON it was extracted from has it on one line per element.
func compactLists(n ast.Node) {
	ast.Walk(n, func(n ast.Node) bool {
		l, ok := n.(*ast.ListLit)
		if !ok {
			return true
		}
		for _, e := range l.Elts {
			if _, scalar := e.(*ast.BasicLit); !scalar {
				return true
			}
		}
		for i, e := range l.Elts {
			pos := token.Blank
			if i == 0 {
				pos = token.NoSpace
			}
			ast.SetRelPos(e, pos)
		}
		l.Rbrack = token.NoPos
		return false
	}, nil)
}
