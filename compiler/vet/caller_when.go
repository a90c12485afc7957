package vet

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// CallerControlledWhen reports a protective layer whose when reads a value
// the caller writes.
var CallerControlledWhen = &Rule{
	Name:     "guard/caller-controlled-when",
	Severity: dsl.Warning,
	Doc: `a protective layer's when reads a value the caller writes, so a caller can switch the layer off.

Under agentc serve some of what a when reads is the caller's to write:
the request's metadata (request.params.metadata, user_id included, which
the user field fills), its other parameters (request.params.temperature,
top_p, seed, stop, tool_choice, response_format) and request.max_tokens,
and in the chat and tool stages run.id, which the caller names with the
X-Agentc-Run header; an optional read (run.?id,
request.?params.?metadata) reads them all the same. A layer that checks, masks, limits or charges calls
(one with the guards trait: guard, pii, security, content_filter, judge,
egress, file_check, tool_policy, max_tokens; and redact, rate_limit, a
meter with a budget; and audit, which writes no record of a call it
skips, and idempotent, which lets a repeated side effect it skips run
again) scoped by such a value
(when: "request.params.metadata.tier != 'internal'") is skipped for any
caller that sends the value making the when false: the policy reads as
enforcing, and nothing at vet time shows that the protection is the
caller's to turn off. Scope it by what the caller cannot choose: the
tenant and key agentc serve sets from the API key it admitted
(run.meta.?tenant.orValue('') != 'internal'), or the call itself. A
when that reads only what the layer decides about is not reported: the
transcript, the tools offered, a tool call's tool and arguments. Nor is
request.model: it names one of the policy's models, the documented way
to scope a layer to models, and a caller that picks another model to
escape the layer gets that model's calls, which the layer was not meant
for (keep a model that needs the layer from being reached some other way:
a fallback or hedge outside the layer rewrites request.model, which
guard/inert reports where it leaves the layer inert). A when that is an
||, one of whose terms reads nothing the caller writes, is not reported
either where every term that reads it is false for a caller who sends
nothing (no metadata, no max_tokens, a run of its own): the caller can
only add calls to those the other terms apply the layer to (when:
"tool.side_effecting || run.id.startsWith('audit-')"). A term that holds
for such a caller (request.model == 'big' ||
request.params.metadata.?tier.orValue('') != 'internal') applies the
layer to calls that any caller takes out by sending a value, and is
reported. A when, or a term, that no value the caller can send makes
false is not reported: a run id is never empty nor holds a space (the
caller names 1 to 128 printable characters, which a key's tenant may
precede), a max_tokens is 0 (unset) or from 1 to 1,000,000, so "run.id !=
''" and "request.max_tokens >= 0" hold for every caller. A when matching a
pattern (run.id.matches(...)) is taken to be one the caller can make
false.
Layers that protect nothing (retry, fallback, memoize, log, ...) may be
scoped by anything, and so may output_coerce, which shapes the answer for
the caller, its only reader (when:
"request.params.response_format == 'json_schema'"). The turn stage is not served, and its run and
session are the host's.`,
	Run: func(p *Pass) {
		for _, stage := range []string{"chat", "tool"} {
			for _, e := range p.Policy.Chains[stage] {
				if e.When == nil || !protective(e) {
					continue
				}
				r, ok := callerRead(stage, e.When.Source)
				if !ok {
					continue
				}
				p.Report(dsl.Diagnostic{Pos: e.When.PosAt(r.offset), Message: fmt.Sprintf(
					"the when of %s reads %s, which %s: a caller skips %s by sending a value that makes the when false; scope the layer by the tenant agentc serve sets from the caller's key (run.meta.?tenant.orValue('')), by the policy's own model names (request.model) or by the call itself",
					e.Ref(), r.path, r.writer, e.Ref())})
			}
		}
	},
}

// protective reports whether e checks, masks, limits, charges, records or
// dedupes the calls it applies to, so that skipping it lets a call through
// that it would hold back, or leave a trace of.
func protective(e *dsl.Entry) bool {
	switch {
	case e.Use == "output_coerce":
		// It shapes the answer for the caller, its only reader.
		return false
	case e.Kind != nil && e.Kind.Has("guards"):
		return true
	case e.Use == "redact", e.Use == "rate_limit":
		return true
	case e.Use == "audit", e.Use == "idempotent":
		// A skipped audit writes no record of the call; a skipped
		// idempotent lets a repeated side effect run again.
		return true
	case e.Use == "meter":
		return e.Fields["budget"] != nil
	}
	return false
}

// callerVars are the paths a caller writes under agentc serve, with who
// writes them, for messages. A read of the path or of anything under it
// counts; under request.params, the field read is named (temperature).
var callerVars = []struct{ path, writer string }{
	{"request.params.metadata", "the caller sends"},
	{"request.params", "the caller sets"},
	{"request.max_tokens", "the caller sets"},
	{"run.id", "the caller names with the X-Agentc-Run header"},
}

// callerReadAt is a read of a caller-written path in a predicate.
type callerReadAt struct {
	offset       int
	path, writer string
}

// callerRead returns the first read (in source order) of a path the caller
// writes in the when src of a layer of stage, unless a term of a top-level
// || reads none and every term that reads one is false for a caller who
// sends nothing (an opt-in, request.params.metadata.?strict.orValue(”) ==
// 'yes'): the caller can then only add calls to those the layer applies
// to. A term that holds for such a caller (request.params.metadata.?tier
// .orValue(”) != 'internal') is one the caller makes false to skip the
// layer. It reports false for a predicate that does not parse (cel/syntax's
// to say).
func callerRead(stage, src string) (callerReadAt, bool) {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return callerReadAt{}, false
	}
	info := tree.SourceInfo()
	var first, optOut *callerReadAt
	safe := false
	for _, term := range disjuncts(tree.Expr()) {
		var reads []callerReadAt
		ast.PreOrderVisit(term, ast.NewExprVisitor(func(e ast.Expr) {
			root, path, ok := selectPath(e)
			if !ok {
				return
			}
			for _, v := range callerVars {
				if path == v.path || strings.HasPrefix(path, v.path+".") {
					if v.path == "request.params" {
						parts := strings.Split(path, ".")
						path = strings.Join(parts[:min(3, len(parts))], ".")
					} else {
						path = v.path
					}
					r, _ := info.GetOffsetRange(root)
					reads = append(reads, callerReadAt{runeToByte(src, int(r.Start)), path, v.writer})
					return
				}
			}
		}))
		if len(reads) == 0 {
			safe = true
			continue
		}
		// Whether the term holds for a caller who sends nothing, and some
		// value the caller sends makes it false, depends on the term
		// alone: asked once, its first read is reported.
		holds := optOut == nil && holdsByDefault(stage, term, info) && callerFalsifies(stage, term, info)
		for _, r := range reads {
			if first == nil || r.offset < first.offset {
				first = &r
			}
			if holds && optOut == nil {
				optOut = &r
			}
		}
	}
	switch {
	case first == nil:
		return callerReadAt{}, false
	case !safe:
		if !callerFalsifies(stage, tree.Expr(), info) {
			// No value the caller sends makes the when false.
			return callerReadAt{}, false
		}
		return *first, true
	case optOut != nil:
		return *optOut, true
	}
	return callerReadAt{}, false
}

// holdsByDefault reports whether term, a term of a when of a layer of
// stage, is true for a call whose caller sends nothing: no metadata,
// max_tokens unset (0) and a run of its own (run.id "anon-...", or in the
// tool stage an MCP session's, "mcp-..."), the rest of the call unknown. A term it cannot tell holds for is taken not to.
func holdsByDefault(stage string, term ast.Expr, info *ast.SourceInfo) bool {
	prg, unknowns, err := callerProgram(stage, term, info)
	if err != nil {
		return false
	}
	// A request without X-Agentc-Run is a run of its own ("anon-..."); a
	// tool call of an MCP session without it, of the session's ("mcp-...").
	ids := []string{"anon-0"}
	if stage == "tool" {
		ids = append(ids, "mcp-0")
	}
	for _, id := range ids {
		if v, known := evalPartialBool(prg, callerVarsOf(stage, id, 0, map[string]any{}), unknowns); known && v {
			return true
		}
	}
	return false
}

// callerProgram plans x, a when or a term of one, of a layer of stage for
// partial evaluation, with the attributes unknown to it.
func callerProgram(stage string, x ast.Expr, info *ast.SourceInfo) (cel.Program, []*cel.AttributePatternType, error) {
	env, unknowns, err := callerEnvironment(stage)
	if err != nil {
		return nil, nil, err
	}
	prg, err := env.PlanProgram(ast.NewAST(x, info), append([]cel.ProgramOption{cel.EvalOptions(cel.OptPartialEval)}, programOptions...)...)
	return prg, unknowns, err
}

// callerVarsOf is the activation of a call whose caller sends run id,
// max_tokens and metadata, the rest of the call unknown.
func callerVarsOf(stage, id string, maxTokens int64, metadata map[string]any) map[string]any {
	vars := map[string]any{"run": map[string]any{"id": id}}
	if stage == "chat" {
		vars["request"] = map[string]any{"params": map[string]any{"metadata": metadata}, "max_tokens": maxTokens}
	}
	return vars
}

// The bounds agentc serve holds what a caller sends to: a run id it names
// is 1 to 128 printable ASCII characters without a space, and starts with
// neither of the prefixes of the runs it gives (serve.validRunID); a
// max_tokens is unset (0) or from 1 to 1,000,000 (serve.MaxOutputTokens).
const (
	callerRunIDMax     = 128
	callerMaxTokensMax = 1_000_000
)

// callerFalsifies reports whether some value a caller can send makes x, a
// when or a term of one, of a layer of stage, false, or leaves it unknown.
// The values tried are a caller's who sends nothing, and those varying one
// of run.id, request.max_tokens and request.params.metadata from it by the
// literals x compares them to, their neighbours, and the bounds, a run id
// with a tenant before it too, metadata with a long value or many keys: a term
// none of them makes false (run.id != ”, request.max_tokens >= 0) is one
// no caller makes false, as a run id is never empty nor max_tokens
// negative.
func callerFalsifies(stage string, x ast.Expr, info *ast.SourceInfo) bool {
	prg, unknowns, err := callerProgram(stage, x, info)
	if err != nil {
		return true
	}
	var strs []string
	var ints []int64
	keys := map[string]bool{"x": true, "y": true}
	pattern := false
	ast.PreOrderVisit(x, ast.NewExprVisitor(func(e ast.Expr) {
		// The strings a pattern matches are not among the values tried.
		pattern = pattern || e.Kind() == ast.CallKind && e.AsCall().FunctionName() == "matches"
		if e.Kind() == ast.LiteralKind {
			switch v := e.AsLiteral().Value().(type) {
			case string:
				strs = append(strs, v)
			case int64:
				ints = append(ints, v)
			case uint64:
				ints = append(ints, int64(min(v, callerMaxTokensMax+1)))
			case float64:
				ints = append(ints, int64(max(min(v, callerMaxTokensMax+1), -1)))
			}
		}
		if _, path, ok := selectPath(e); ok {
			if key, ok := strings.CutPrefix(path, "request.params.metadata."); ok {
				keys[strings.Split(key, ".")[0]] = true
			}
		}
	}))
	if pattern {
		return true
	}
	strs = strs[:min(len(strs), 16)]
	ints = ints[:min(len(ints), 16)]
	falsifies := func(vars map[string]any) bool {
		v, known := evalPartialBool(prg, vars, unknowns)
		return !known || !v
	}
	defaultID := "anon-0"
	ids := []string{defaultID, "x", "X", "0", "~", strings.Repeat("x", callerRunIDMax)}
	if stage == "tool" {
		ids = append(ids, "mcp-0")
	}
	for _, s := range strs {
		ids = append(ids, s, s+"x", "x"+s, "x"+s+"x", s[:max(len(s)-1, 0)], strings.ToUpper(s))
	}
	for _, id := range ids {
		if id != defaultID && id != "mcp-0" && !callerRunID(id) {
			continue
		}
		// Under keys the run id carries the caller's tenant before it.
		for _, run := range []string{id, "acme/" + id} {
			if falsifies(callerVarsOf(stage, run, 0, map[string]any{})) {
				return true
			}
		}
	}
	if stage != "chat" {
		return false
	}
	for _, n := range append([]int64{1, callerMaxTokensMax}, ints...) {
		for _, m := range []int64{n - 1, n, n + 1} {
			if m >= 1 && m <= callerMaxTokensMax && falsifies(callerVarsOf(stage, defaultID, m, map[string]any{})) {
				return true
			}
		}
	}
	for _, s := range strs {
		keys[s] = true
	}
	values := append([]string{"", "x", strings.Repeat("x", 1<<16)}, strs...)
	for _, s := range strs {
		values = append(values, s+"x")
	}
	for _, v := range values {
		all := map[string]any{}
		for k := range keys {
			all[k] = v
			if falsifies(callerVarsOf(stage, defaultID, 0, map[string]any{k: v})) {
				return true
			}
		}
		if falsifies(callerVarsOf(stage, defaultID, 0, all)) {
			return true
		}
	}
	// Metadata of many keys.
	many := map[string]any{}
	for i := range 1024 {
		many[fmt.Sprintf("k%d", i)] = "x"
	}
	return falsifies(callerVarsOf(stage, defaultID, 0, many))
}

// callerRunID reports whether a caller may name its run id.
func callerRunID(id string) bool {
	if id == "" || len(id) > callerRunIDMax || strings.HasPrefix(id, "anon-") || strings.HasPrefix(id, "mcp-") {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

var (
	callerEnvMu sync.Mutex
	callerEnvs  = map[string]*cel.Env{}
	callerUnk   = map[string][]*cel.AttributePatternType{}
)

// callerEnvironment returns the CEL environment of stage with every
// variable dyn, and the attributes unknown to holdsByDefault: all but
// run.id and, in the chat stage, request.max_tokens and
// request.params.metadata.
func callerEnvironment(stage string) (*cel.Env, []*cel.AttributePatternType, error) {
	callerEnvMu.Lock()
	defer callerEnvMu.Unlock()
	if env, ok := callerEnvs[stage]; ok {
		return env, callerUnk[stage], nil
	}
	st := predicate.Chat
	if stage == "tool" {
		st = predicate.Tool
	}
	opts := []cel.EnvOption{cel.OptionalTypes()}
	var unknowns []*cel.AttributePatternType
	known := map[string]string{"run": "id"}
	if stage == "chat" {
		known["request"] = "max_tokens"
	}
	for _, v := range predicate.Variables(st) {
		opts = append(opts, cel.Variable(v.Name, cel.DynType))
		if _, ok := known[v.Name]; !ok {
			unknowns = append(unknowns, cel.AttributePattern(v.Name))
		}
	}
	for name, keep := range known {
		fields, _ := predicate.ObjectFields("agentc." + name)
		for _, f := range fields {
			if f.Name != keep && !(name == "request" && f.Name == "params") {
				unknowns = append(unknowns, cel.AttributePattern(name).QualString(f.Name))
			}
		}
	}
	if stage == "chat" {
		fields, _ := predicate.ObjectFields("agentc.params")
		for _, f := range fields {
			if f.Name != "metadata" {
				unknowns = append(unknowns, cel.AttributePattern("request").QualString("params").QualString(f.Name))
			}
		}
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, nil, err
	}
	callerEnvs[stage], callerUnk[stage] = env, unknowns
	return env, unknowns, nil
}

// disjuncts splits x at its top-level ||.
func disjuncts(x ast.Expr) []ast.Expr {
	if x.Kind() == ast.CallKind && x.AsCall().FunctionName() == operators.LogicalOr {
		var out []ast.Expr
		for _, a := range x.AsCall().Args() {
			out = append(out, disjuncts(a)...)
		}
		return out
	}
	return []ast.Expr{x}
}

// selectPath returns the dotted path of a chain of selects rooted at an
// identifier (request.params.metadata.tier), with the identifier's id; an
// optional select (run.?id) is a select of its field. A comprehension's
// variable that shadows request or run is read as the variable: no policy
// names its variable so.
func selectPath(x ast.Expr) (int64, string, bool) {
	var fields []string
	for {
		if x.Kind() == ast.SelectKind {
			fields = append(fields, x.AsSelect().FieldName())
			x = x.AsSelect().Operand()
			continue
		}
		if field, operand, ok := optSelect(x); ok {
			fields = append(fields, field)
			x = operand
			continue
		}
		break
	}
	if len(fields) == 0 || x.Kind() != ast.IdentKind {
		return 0, "", false
	}
	fields = append(fields, x.AsIdent())
	slices.Reverse(fields)
	return x.ID(), strings.Join(fields, "."), true
}

// optSelect returns the field and the operand of an optional select
// (x.?field), which parses as a call of operators.OptSelect.
func optSelect(x ast.Expr) (string, ast.Expr, bool) {
	if x.Kind() != ast.CallKind || x.AsCall().FunctionName() != operators.OptSelect {
		return "", nil, false
	}
	args := x.AsCall().Args()
	if len(args) != 2 || args[1].Kind() != ast.LiteralKind {
		return "", nil, false
	}
	field, ok := args[1].AsLiteral().Value().(string)
	return field, args[0], ok
}
