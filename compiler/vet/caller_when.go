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
reported. A when, or a term, proven true whatever the caller sends is
not reported: a run id is never empty nor holds a space (the caller names
1 to 128 printable characters, which a key's tenant may precede), a
max_tokens is 0 (unset) or from 1 to 1,000,000, so "run.id != ''",
"size(run.id) > 0", "!run.id.contains(' ')", "request.max_tokens >= 0" and
"request.max_tokens <= 1000000" hold for every caller. Any other term
reading what the caller sends is taken to be one the caller can make
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
		holds := optOut == nil && !callerAlwaysTrue(term) && holdsByDefault(stage, term, info)
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
		if callerAlwaysTrue(tree.Expr()) {
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
	env, unknowns, err := callerEnvironment(stage)
	if err != nil {
		return false
	}
	prg, err := env.PlanProgram(ast.NewAST(term, info), append([]cel.ProgramOption{cel.EvalOptions(cel.OptPartialEval)}, programOptions...)...)
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
		vars := map[string]any{"run": map[string]any{"id": id}}
		if stage == "chat" {
			vars["request"] = map[string]any{"params": map[string]any{"metadata": map[string]any{}}, "max_tokens": 0}
		}
		if v, known := evalPartialBool(prg, vars, unknowns); known && v {
			return true
		}
	}
	return false
}

// CallerMaxTokens is the largest max_tokens agentc serve admits
// (serve.MaxOutputTokens, kept equal by a test of serve); unset, it is 0.
const CallerMaxTokens = 1_000_000

// callerAlwaysTrue reports whether x, a when or a term of one, is true
// whatever the caller sends, being made of terms of the few shapes known
// to hold for every value serve admits: a run id is never empty and holds
// no space (run.id != ”, size(run.id) > 0, !run.id.contains(' ')), and
// max_tokens is 0 (unset) or from 1 to 1,000,000 (request.max_tokens >= 0,
// request.max_tokens <= 1000000), joined by && and ||. Any other term is
// taken to be one a caller can make false: a when is reported unless it is
// proven to hold, never because no value tried made it false.
func callerAlwaysTrue(x ast.Expr) bool {
	if x.Kind() != ast.CallKind {
		return false
	}
	c := x.AsCall()
	args := c.Args()
	switch c.FunctionName() {
	case operators.LogicalAnd:
		return len(args) == 2 && callerAlwaysTrue(args[0]) && callerAlwaysTrue(args[1])
	case operators.LogicalOr:
		return len(args) == 2 && (callerAlwaysTrue(args[0]) || callerAlwaysTrue(args[1]))
	case operators.LogicalNot:
		// !run.id.contains(' ')
		if len(args) != 1 || args[0].Kind() != ast.CallKind {
			return false
		}
		in := args[0].AsCall()
		if in.FunctionName() != "contains" || !in.IsMemberFunction() || !isPath(in.Target(), "run.id") || len(in.Args()) != 1 {
			return false
		}
		v, ok := stringLiteral(in.Args()[0])
		return ok && v == " "
	case operators.NotEquals, operators.Greater, operators.GreaterEquals, operators.Less, operators.LessEquals:
	default:
		return false
	}
	if len(args) != 2 {
		return false
	}
	op, a, b := c.FunctionName(), args[0], args[1]
	// Written with the value on the right: 0 < size(run.id) is size(run.id) > 0.
	if _, ok := numberLiteral(a); ok {
		a, b = b, a
		sym, _ := operators.FindReverse(op)
		op, _ = operators.Find(flipped[sym])
	} else if _, ok := stringLiteral(a); ok {
		a, b = b, a
	}
	switch {
	case isPath(a, "run.id"):
		v, ok := stringLiteral(b)
		return op == operators.NotEquals && ok && v == ""
	case isRunIDSize(a):
		n, ok := numberLiteral(b)
		return ok && (op == operators.Greater && n >= 0 && n < 1 || op == operators.GreaterEquals && n <= 1 || op == operators.NotEquals && n == 0)
	case isPath(a, "request.max_tokens"):
		n, ok := numberLiteral(b)
		return ok && (op == operators.GreaterEquals && n <= 0 || op == operators.Greater && n < 0 ||
			op == operators.LessEquals && n >= CallerMaxTokens || op == operators.Less && n > CallerMaxTokens)
	}
	return false
}

// isPath reports whether x selects path (run.id, request.max_tokens).
func isPath(x ast.Expr, path string) bool {
	_, p, ok := selectPath(x)
	return ok && p == path
}

// isRunIDSize reports whether x is size(run.id) or run.id.size().
func isRunIDSize(x ast.Expr) bool {
	if x.Kind() != ast.CallKind || x.AsCall().FunctionName() != "size" {
		return false
	}
	c := x.AsCall()
	if c.IsMemberFunction() {
		return len(c.Args()) == 0 && isPath(c.Target(), "run.id")
	}
	return len(c.Args()) == 1 && isPath(c.Args()[0], "run.id")
}

// stringLiteral returns the value of x, a string literal.
func stringLiteral(x ast.Expr) (string, bool) {
	if x.Kind() != ast.LiteralKind {
		return "", false
	}
	v, ok := x.AsLiteral().Value().(string)
	return v, ok
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
