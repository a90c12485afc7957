package predicate

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// CostEstimate is the static cost range of a predicate in cel-go cost units. Max is
// math.MaxUint64 when the cost is unbounded.
type CostEstimate struct {
	Min, Max uint64
}

// Checked is a predicate that passed Check: parsed, type-checked, bool-typed and within the cost
// limit. It is immutable and may be turned into any number of Programs.
type Checked struct {
	// Source is the predicate text as given to Check.
	Source string
	// Cost is the static estimate under the declared and assumed input sizes.
	Cost CostEstimate
	// ReadsUntypedArgs is set when the predicate reads args and no schema types it; the compiler
	// reports RuleUntypedArgs.
	ReadsUntypedArgs bool
	// Reads lists the variables the predicate reads, sorted.
	Reads []string
	// KeyReads lists the reads of keys of map-typed inputs (args when untyped, and the objects
	// below it, item.metadata, session.meta, ...), in source order.
	KeyReads []KeyRead
	// UntypedArgReads lists, where a schema types args, the reads of fields below an argument it
	// leaves untyped (an object without properties whose values may be anything, a value of no
	// type), in source order: as in an untyped args, a misspelt field is not caught.
	UntypedArgReads []KeyRead
	// Literals lists the comparisons of a field with a constant (a string, a number or a bool),
	// in source order.
	Literals []Literal

	env *Env
	ast *cel.Ast
	// bounded is set when the cost is within the limit for any input (the strict estimate), so
	// evaluation needs no runtime cost tracker.
	bounded bool
}

// KeyRead is a read of one key of a map-typed input, written m.key, m['key'] or has(m.key).
type KeyRead struct {
	// Map is the path of the map ("args", "item.metadata"); Key is the key.
	Map, Key string
	// Offset is the byte offset of the key in the source.
	Offset int
	// Tested is set when the read cannot fail on an absent key: it is itself a presence test
	// (has(m.key)), or a presence test of the key (has(m.key), 'key' in m) guards it.
	Tested bool
	// Test is set when the read is itself a presence test, has(m.key).
	Test bool
}

// Literal is a comparison of a field with a constant: path == 'v', path != 'v', path in ['v',
// ...] (one Literal per constant of the list), path < 5 (either side may hold the constant).
type Literal struct {
	// Path is the field's path ("tool.name", "response.finish_reason"); a comprehension's
	// variable stands for an element of its range, written range[] ("response.tool_calls[].name"
	// in response.tool_calls.exists(c, c.name == 'refund')).
	Path string
	// Op is "==", "!=", "in", "<", "<=", ">" or ">=", read with the field first (10 < x is
	// x > 10); List numbers the in lists from 1 (0 for
	// the others), so the constants of one list share it.
	Op   string
	List int
	// Kind is the constant's CEL type: "string", "int", "uint", "double", "bool" or "null".
	Kind string
	// FieldKind is the field's type as checked ("int", "double", "dyn", ...): a field of type
	// double or dyn may hold NaN, which no comparison holds for.
	FieldKind string
	// Value is the constant (a number or bool as CEL prints it), Offset the byte offset of its
	// first character (a string's opening quote, a number's sign) in the source.
	Value  string
	Offset int
}

// IsString reports whether l compares the field with a string for equality (==, != or in).
func (l Literal) IsString() bool {
	return l.Kind == "string" && (l.Op == "==" || l.Op == "!=" || l.Op == "in")
}

// Env returns the environment the predicate was checked in.
func (c *Checked) Env() *Env { return c.env }

// Spec returns the plan form of the predicate, from which CompileSpec rebuilds it.
func (c *Checked) Spec() Spec {
	cfg := c.env.cfg
	return Spec{
		Stage:       cfg.Stage,
		Phase:       cfg.Phase,
		Source:      c.Source,
		ArgsSchemas: cloneSchemas(cfg.ArgsSchemas),
		CostLimit:   specCostLimit(cfg.CostLimit),
	}
}

// Check parses and type-checks a predicate. It never panics and its time is bounded by the
// source limits. On success it returns the Checked predicate and no issues; otherwise it returns
// nil and at least one issue (rules cel/syntax, cel/type, cel/not-bool, cel/cost), sorted by
// offset.
func (e *Env) Check(src string) (c *Checked, issues []Issue) {
	return e.CheckGiven(src, nil)
}

// CheckGiven checks src as Check does, where the paths of given (as
// Checked.PresentIfTrue renders them: "args.reason", "session.meta.tier")
// are known to be present: the predicate of a layer whose `when` tests
// them runs only where it holds, so a read of them needs no test of its
// own.
func (e *Env) CheckGiven(src string, given []string) (c *Checked, issues []Issue) {
	pos := newPositions(src)
	if iss := checkText(pos, src); iss != nil {
		return nil, iss
	}
	defer func() {
		if r := recover(); r != nil {
			c = nil
			issues = []Issue{pos.issue(RuleSyntax, 0, fmt.Sprintf("internal error checking the expression: %v", r))}
		}
	}()
	parsed, iss := e.cel.Parse(src)
	if iss.Err() != nil {
		out := pos.celIssues(RuleSyntax, iss)
		for i := range out {
			if out[i].Message == "invalid argument to has() macro" {
				out[i].Message += ": has() takes a field read (has(args.reason); a name that is not an identifier goes between backticks: has(args.`x-api-key`)); a map's key is tested with 'key' in map"
			}
		}
		return nil, sortIssues(out)
	}
	if out := twoVariableCalls(pos, parsed.NativeRep()); out != nil {
		return nil, out
	}
	checked, iss := e.cel.Check(parsed)
	if iss.Err() != nil {
		out := pos.celIssues(RuleType, iss)
		for i := range out {
			if off, ok := hasFieldOffset(src, out[i]); ok {
				out[i] = pos.issue(out[i].Rule, off, out[i].Message)
			}
			e.suggestField(src, &out[i])
			e.suggestTextOperand(&out[i])
			suggestNullOperand(src, &out[i])
			suggestSchemaObjectIndex(src, &out[i])
		}
		return nil, sortIssues(out)
	}
	w := &walker{env: e, ast: checked.NativeRep(), pos: pos, reads: map[string]bool{}}
	w.visit(w.ast.Expr(), slices.Clip(given), nil)
	if len(w.issues) > 0 {
		return nil, sortIssues(w.issues)
	}
	if e.cfg.Value {
		if out := checked.OutputType(); out.Kind() != types.DynKind && !e.valueType.IsAssignableType(out) {
			return nil, []Issue{pos.issue(RuleType, firstNonSpace(src),
				fmt.Sprintf("expression has type %s, want %s (the field's schema)", out, describeValueType(e.valueType)))}
		}
	} else if out := checked.OutputType(); !out.IsExactType(types.BoolType) {
		msg := fmt.Sprintf("expression has type %s, want bool", out)
		if out.Kind() == types.DynKind {
			msg += " (compare the value, e.g. x == true)"
		}
		return nil, []Issue{pos.issue(RuleNotBool, firstNonSpace(src), msg)}
	}
	c = &Checked{Source: src, env: e, ast: checked}
	for name := range w.reads {
		c.Reads = append(c.Reads, name)
	}
	slices.Sort(c.Reads)
	c.KeyReads = w.keyReads
	c.UntypedArgReads = w.untypedArgReads
	c.Literals = w.literals
	slices.SortStableFunc(c.KeyReads, func(a, b KeyRead) int { return a.Offset - b.Offset })
	c.ReadsUntypedArgs = e.cfg.Stage == Tool && !e.argsTyped && w.reads["args"]

	lenient, err := e.cel.EstimateCost(checked, &costEstimator{hints: e.hints})
	if err != nil {
		return nil, []Issue{pos.issue(RuleCost, firstNonSpace(src), "cannot estimate the cost: "+cleanMessage(err.Error()))}
	}
	c.Cost = CostEstimate{Min: lenient.Min, Max: lenient.Max}
	if lenient.Max >= math.MaxUint64/16 {
		off, what := w.unboundedRange()
		if off < 0 {
			off = firstNonSpace(src)
		}
		return nil, []Issue{pos.issue(RuleCost, off, "estimated cost is unbounded: "+what)}
	}
	if lenient.Max > e.cfg.CostLimit {
		return nil, []Issue{pos.issue(RuleCost, firstNonSpace(src),
			fmt.Sprintf("estimated cost %d exceeds the limit %d%s", lenient.Max, e.cfg.CostLimit, w.costAdvice()))}
	}
	strict, err := e.cel.EstimateCost(checked, &costEstimator{strict: true})
	c.bounded = err == nil && strict.Max <= e.cfg.CostLimit
	return c, nil
}

// twoVariableMacros are the macros of cel-go's two-variable
// comprehensions (all(k, v, p), transformList(i, v, f)), which the
// environment does not declare, each with the one-variable macro to
// write instead.
var twoVariableMacros = map[string]string{"all": "all", "exists": "exists", "existsOne": "exists_one", "exists_one": "exists_one", "transformList": "map", "transformMap": "map", "transformMapEntry": "map"}

// twoVariableCalls reports each call of a two-variable macro in tree, at
// its name: the checker would report the name and each variable as an
// undeclared reference, which does not say that the form is what is
// missing.
func twoVariableCalls(pos *positions, tree *ast.AST) []Issue {
	var out []Issue
	ast.PreOrderVisit(tree.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		c := e.AsCall()
		fn, args := c.FunctionName(), c.Args()
		if !c.IsMemberFunction() || twoVariableMacros[fn] == "" || len(args) < 3 || args[0].Kind() != ast.IdentKind || args[1].Kind() != ast.IdentKind {
			return
		}
		off := 0
		if r, ok := tree.SourceInfo().GetOffsetRange(e.ID()); ok {
			off = pos.fromRuneOffset(int(r.Start))
		}
		if strings.HasSuffix(pos.src[:off], fn) {
			off -= len(fn)
		}
		out = append(out, pos.issue(RuleType, off, fmt.Sprintf(
			"%s(%s, %s, ...) binds two variables, a form the agentc CEL environment does not have: its macros (all, exists, exists_one, map, filter) bind one, a list's element or a map's key; write %s(%s, ...) and read the value by its key (m.all(k, m[k] > 0))",
			fn, args[0].AsIdent(), args[1].AsIdent(), twoVariableMacros[fn], args[1].AsIdent())))
	}))
	return sortIssues(out)
}

// checkText applies the limits on the raw text.
func checkText(pos *positions, src string) []Issue {
	if !utf8.ValidString(src) {
		off := 0
		for off < len(src) {
			r, size := utf8.DecodeRuneInString(src[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return []Issue{pos.issue(RuleSyntax, off, "expression is not valid UTF-8")}
	}
	if len(src) > MaxSourceBytes {
		return []Issue{pos.issue(RuleSyntax, 0, fmt.Sprintf("expression longer than %d bytes (%d)", MaxSourceBytes, len(src)))}
	}
	if strings.TrimSpace(src) == "" {
		return []Issue{pos.issue(RuleSyntax, 0, "empty expression")}
	}
	return nil
}

func firstNonSpace(src string) int {
	return len(src) - len(strings.TrimLeft(src, " \t\r\n"))
}

func sortIssues(iss []Issue) []Issue {
	slices.SortStableFunc(iss, func(a, b Issue) int { return a.Offset - b.Offset })
	return iss
}

// walker inspects a checked AST: reads of variables, reads of optional args fields without a
// presence test, constant regular expressions, and comprehension ranges of unknown size.
type walker struct {
	env    *Env
	ast    *ast.AST
	pos    *positions
	reads  map[string]bool
	issues []Issue
	ranges []ast.Expr // comprehension ranges, in visit order
	// keyReads are the reads of keys of map-typed inputs; untypedArgReads those of them below
	// an argument a schema leaves untyped.
	keyReads        []KeyRead
	untypedArgReads []KeyRead
	// literals are the comparisons of fields with string constants; binds maps the
	// comprehension variables in scope to the path of their range's elements.
	literals []Literal
	lists    int
	binds    map[string]string
	// regex is set when the expression calls matches() or matches_any().
	regex bool
}

// isInputType reports whether a struct type name (as written, or resolved by the checker) is
// one of the agentc variable types.
func (w *walker) isInputType(name string) bool {
	_, ok := w.env.prov.lookup(name)
	return ok || strings.HasPrefix(name, "agentc.")
}

// offsetOf returns the byte offset of an expression's start.
func (w *walker) offsetOf(e ast.Expr) int {
	if r, ok := w.ast.SourceInfo().GetOffsetRange(e.ID()); ok {
		return w.pos.fromRuneOffset(int(r.Start))
	}
	return 0
}

// visit walks e. facts are the rendered paths known to be present wherever e decides the result;
// locals are the comprehension variables in scope.
func (w *walker) visit(e ast.Expr, facts, locals []string) {
	switch e.Kind() {
	case ast.IdentKind:
		if name := e.AsIdent(); !slices.Contains(locals, name) {
			w.reads[name] = true
		}
	case ast.SelectKind:
		sel := e.AsSelect()
		if !sel.IsTestOnly() {
			w.checkOptional(e, facts)
		}
		w.keyRead(sel.Operand(), sel.FieldName(), fieldOffset(w, e), sel.IsTestOnly(), facts, locals)
		w.visit(sel.Operand(), facts, locals)
	case ast.CallKind:
		w.visitCall(e, facts, locals)
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			w.visit(el, facts, locals)
		}
	case ast.MapKind:
		for _, ent := range e.AsMap().Entries() {
			me := ent.AsMapEntry()
			w.visit(me.Key(), facts, locals)
			w.visit(me.Value(), facts, locals)
		}
	case ast.StructKind:
		if name := e.AsStruct().TypeName(); w.isInputType(name) {
			// The struct's offset is its brace; the type name precedes it.
			off := w.offsetOf(e)
			if start := off - len(name); start >= 0 && w.pos.src[start:off] == name {
				off = start
			}
			w.issues = append(w.issues, w.pos.issue(RuleType, off,
				fmt.Sprintf("cannot construct %s: the types of the variables are read-only", name)))
		}
		for _, f := range e.AsStruct().Fields() {
			w.visit(f.AsStructField().Value(), facts, locals)
		}
	case ast.ComprehensionKind:
		comp := e.AsComprehension()
		w.visit(comp.IterRange(), facts, locals)
		w.visit(comp.AccuInit(), facts, locals)
		if !isBind(comp) {
			w.ranges = append(w.ranges, comp.IterRange())
		}
		inner := slices.Clone(locals)
		inner = append(inner, comp.AccuVar(), comp.IterVar())
		if comp.HasIterVar2() {
			inner = append(inner, comp.IterVar2())
		}
		innerFacts := append(dropRoots(facts, inner[len(locals):]), filteredFacts(comp.IterRange(), comp.IterVar())...)
		prev, bound := w.binds[comp.IterVar()]
		if r, ok := w.elemPath(comp.IterRange()); ok && !comp.HasIterVar2() {
			if w.binds == nil {
				w.binds = map[string]string{}
			}
			w.binds[comp.IterVar()] = r
		} else {
			delete(w.binds, comp.IterVar())
		}
		w.visit(comp.LoopCondition(), innerFacts, inner)
		w.visit(comp.LoopStep(), innerFacts, inner)
		if bound {
			w.binds[comp.IterVar()] = prev
		} else {
			delete(w.binds, comp.IterVar())
		}
		w.visit(comp.Result(), innerFacts, append(slices.Clone(locals), comp.AccuVar()))
	}
}

// filteredFacts returns the paths known present in each element of e, when
// e is a filter() (or a chain of them) whose condition tests them, written
// for the comprehension variable v that a macro over e's result binds to
// its elements: in xs.filter(i, has(i.qty)).exists(x, x.qty > 100), x.qty.
func filteredFacts(e ast.Expr, v string) []string {
	if e.Kind() != ast.ComprehensionKind {
		return nil
	}
	comp := e.AsComprehension()
	step, accu, iter := comp.LoopStep(), comp.AccuVar(), comp.IterVar()
	isIdent := func(x ast.Expr, name string) bool { return x.Kind() == ast.IdentKind && x.AsIdent() == name }
	if comp.HasIterVar2() || !isIdent(comp.Result(), accu) || step.Kind() != ast.CallKind || step.AsCall().FunctionName() != operators.Conditional {
		return nil
	}
	args := step.AsCall().Args()
	if len(args) != 3 || !isIdent(args[2], accu) || args[1].Kind() != ast.CallKind || args[1].AsCall().FunctionName() != operators.Add {
		return nil
	}
	add := args[1].AsCall().Args()
	if len(add) != 2 || !isIdent(add[0], accu) || add[1].Kind() != ast.ListKind || add[1].AsList().Size() != 1 || !isIdent(add[1].AsList().Elements()[0], iter) {
		return nil // not a filter: map(x, p, f) keeps f(x), not x
	}
	out := filteredFacts(comp.IterRange(), v)
	for _, p := range presentIfTrue(args[0]) {
		if p == iter || strings.HasPrefix(p, iter+".") || strings.HasPrefix(p, iter+"[") {
			out = append(out, v+p[len(iter):])
		}
	}
	return out
}

func isBind(comp ast.ComprehensionExpr) bool {
	r := comp.IterRange()
	return r.Kind() == ast.ListKind && r.AsList().Size() == 0 && comp.IterVar() == "#unused"
}

func (w *walker) visitCall(e ast.Expr, facts, locals []string) {
	call := e.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case operators.LogicalAnd:
		// An operand decides the result only when the others are true (false absorbs errors).
		for i, a := range args {
			f := facts
			for j, b := range args {
				if j != i {
					f = append(slices.Clone(f), presentIfTrue(b)...)
				}
			}
			w.visit(a, f, locals)
		}
		return
	case operators.LogicalOr:
		// An operand decides the result only when the others are false (true absorbs errors).
		for i, a := range args {
			f := facts
			for j, b := range args {
				if j != i {
					f = append(slices.Clone(f), presentIfFalse(b)...)
				}
			}
			w.visit(a, f, locals)
		}
		return
	case operators.Conditional:
		if len(args) == 3 {
			w.visit(args[0], facts, locals)
			w.visit(args[1], append(slices.Clone(facts), presentIfTrue(args[0])...), locals)
			w.visit(args[2], append(slices.Clone(facts), presentIfFalse(args[0])...), locals)
			return
		}
	case "matches":
		w.regex = true
		pattern := -1
		switch {
		case call.IsMemberFunction() && len(args) == 1:
			pattern = 0
		case !call.IsMemberFunction() && len(args) == 2:
			pattern = 1
		}
		if pattern >= 0 {
			w.checkRegexLiteral(args[pattern], "matches()")
		}
	case operators.Equals, operators.NotEquals:
		if len(args) == 2 {
			op := "=="
			if call.FunctionName() == operators.NotEquals {
				op = "!="
			}
			w.literal(op, args[0], args[1])
			w.literal(op, args[1], args[0])
			w.checkNullObject(e, op, args[0], args[1], locals)
			w.checkNullObject(e, op, args[1], args[0], locals)
		}
	case operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
		if len(args) == 2 {
			op := strings.Trim(call.FunctionName(), "_")
			w.literal(op, args[0], args[1])
			// 10 < x is x > 10.
			w.literal(map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<="}[op], args[1], args[0])
		}
	case operators.In:
		if len(args) == 2 && args[1].Kind() != ast.ListKind && args[1].Kind() != ast.MapKind {
			// A membership test scans its list: a range too.
			w.ranges = append(w.ranges, args[1])
			// 'refund' in response.tool_calls.map(c, c.name): a
			// constant equal to one of the field's values.
			if path, ok := w.mappedElems(args[1]); ok {
				w.literalAt("==", path, args[0], "string")
			} else if t := w.ast.GetType(args[1].ID()); t != nil && t.Kind() == types.ListKind {
				if path, ok := w.renderBound(args[1]); ok { // 'urgent' in args.tags
					w.literalAt("==", path+"[]", args[0], "string")
				}
			}
		}
		if len(args) == 2 && args[1].Kind() == ast.ListKind {
			w.lists++
			elems := args[1].AsList().Elements()
			// A list that holds the default matches where the field is absent.
			_, def, opt := w.renderOrValue(args[0])
			if !opt || !slices.ContainsFunc(elems, func(el ast.Expr) bool { return sameString(el, def) }) {
				for _, el := range elems {
					w.literal("in", args[0], el)
				}
			}
		}
	case operators.Index:
		if len(args) == 2 && args[1].Kind() == ast.LiteralKind {
			if key, ok := args[1].AsLiteral().(types.String); ok {
				w.keyRead(args[0], string(key), w.offsetOf(args[1]), false, facts, locals)
			}
		}
	case "duration", "timestamp":
		if !call.IsMemberFunction() && len(args) == 1 {
			w.checkTimeLiteral(args[0], call.FunctionName())
		}
	case "matches_any":
		w.regex = true
		if len(args) == 2 && args[1].Kind() == ast.ListKind {
			for _, el := range args[1].AsList().Elements() {
				w.checkRegexLiteral(el, "matches_any()")
			}
		}
	}
	if call.IsMemberFunction() {
		w.visit(call.Target(), facts, locals)
	}
	for _, a := range args {
		w.visit(a, facts, locals)
	}
}

// stringConstant returns the value of a string constant.
func stringConstant(e ast.Expr) (types.String, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return s, ok
}

func (w *walker) checkRegexLiteral(e ast.Expr, fn string) {
	s, ok := stringConstant(e)
	if !ok {
		return
	}
	if _, err := validateRegexes([]string{string(s)}); err != nil {
		w.issues = append(w.issues, w.pos.issue(RuleSyntax, w.offsetOf(e),
			fmt.Sprintf("invalid regular expression in %s: %v", fn, err)))
	}
}

// checkTimeLiteral reports a string constant that fn (duration or timestamp) cannot convert:
// evaluation would fail on every call that reaches it.
func (w *walker) checkTimeLiteral(e ast.Expr, fn string) {
	s, ok := stringConstant(e)
	if !ok {
		return
	}
	to, want := types.DurationType, "a duration such as '90s', '1h30m' or '500ms' (units h, m, s, ms, us, ns; no days)"
	if fn == "timestamp" {
		to, want = types.TimestampType, "an RFC 3339 timestamp such as '2025-01-31T12:00:00Z' (a date, a time and a zone)"
	}
	v := s.ConvertToType(to)
	if !types.IsError(v) {
		return
	}
	why := cleanMessage(fmt.Sprint(v))
	if fn == "duration" {
		if _, err := time.ParseDuration(string(s)); err != nil {
			why = strings.TrimPrefix(err.Error(), "time: ")
		}
	}
	w.issues = append(w.issues, w.pos.issue(RuleSyntax, w.offsetOf(e),
		fmt.Sprintf("invalid %s in %s(): %s; write %s, or every evaluation that reaches it fails", fn, fn, why, want)))
}

// checkOptional reports a read of an args field that the schema does not require, unless a
// presence test of the same path guards it.
func (w *walker) checkOptional(e ast.Expr, facts []string) {
	sel := e.AsSelect()
	t := w.ast.GetType(sel.Operand().ID())
	if t == nil || t.Kind() != types.StructKind {
		return
	}
	o, ok := w.env.prov.lookup(t.TypeName())
	if !ok || !o.json {
		return
	}
	f, ok := o.fields[sel.FieldName()]
	if !ok || f.required {
		return
	}
	path, ok := render(e)
	if ok && slices.Contains(facts, path) {
		return
	}
	if !ok {
		path = "." + sel.FieldName()
	}
	w.issues = append(w.issues, w.pos.issue(RuleType, fieldOffset(w, e), fmt.Sprintf(
		"%s is optional (not in the schema's required list): test has(%s) first or read %s",
		path, path, optionalForm(path))))
}

// fieldOffset returns the offset of a select's field name: the select's own offset is its dot,
// or for has(m.f) the macro's parenthesis.
func fieldOffset(w *walker, e ast.Expr) int {
	src := w.pos.src
	off := w.offsetOf(e)
	if e.AsSelect().IsTestOnly() {
		end := strings.IndexByte(src[off:], ')')
		if end < 0 {
			end = len(src) - off
		}
		if i := strings.LastIndex(src[off:off+end], e.AsSelect().FieldName()); i >= 0 {
			return off + i
		}
		return off
	}
	if off < len(src) && src[off] == '.' {
		off = skipSelector(src, off)
	}
	return off
}

// keyRead records a read of key in the value m when m is a map-typed path rooted at a variable
// (not a comprehension variable), or a dyn-typed one below untyped args (args.shipping).
func (w *walker) keyRead(m ast.Expr, key string, off int, test bool, facts, locals []string) {
	t := w.ast.GetType(m.ID())
	if t == nil {
		return
	}
	path, ok := render(m)
	if !ok {
		return
	}
	root := pathRoot(path)
	w.untypedArgRead(m, t, key, off, test)
	switch {
	case slices.Contains(locals, root):
		return
	case t.Kind() == types.MapKind:
	case t.Kind() == types.DynKind && root == "args" && strings.HasPrefix(path, "args.") && !strings.Contains(path, "["):
	default:
		return
	}
	w.keyReads = append(w.keyReads, KeyRead{Map: path, Key: key, Offset: off, Tested: test || slices.Contains(facts, path+"."+key), Test: test})
}

// pathRoot returns the variable a rendered path starts from ("args" of
// args.items[0].x).
func pathRoot(path string) string {
	root, _, _ := strings.Cut(path, ".")
	root, _, _ = strings.Cut(root, "[")
	return root
}

// untypedArgRead records, where a schema types args, a read of key in m, a
// value below args of type t, when t leaves its fields untyped: dyn (a
// value of no type, an element of a list whose items have none) or a map
// whose values are dyn (an object without properties). m may be an
// element read by index (args.items[0]) or a comprehension variable bound
// to the elements of a list below args (args.items.exists(i, i.x)), which
// is named by its range's path (args.items[]).
func (w *walker) untypedArgRead(m ast.Expr, t *types.Type, key string, off int, test bool) {
	if !w.env.argsTyped || t.Kind() != types.DynKind && (t.Kind() != types.MapKind || len(t.Parameters()) != 2 || t.Parameters()[1].Kind() != types.DynKind) {
		return
	}
	path, ok := w.renderBound(m)
	if !ok || pathRoot(path) != "args" {
		return
	}
	w.untypedArgReads = append(w.untypedArgReads, KeyRead{Map: path, Key: key, Offset: off, Test: test})
}

func optionalForm(path string) string {
	i := strings.LastIndex(path, ".")
	if i < 0 {
		return path
	}
	return path[:i] + ".?" + path[i+1:] + ".orValue(...)"
}

// unboundedRange returns the offset and a description of the first comprehension whose range
// has no known size, or -1.
func (w *walker) unboundedRange() (int, string) {
	est := &costEstimator{hints: w.env.hints}
	for _, r := range w.ranges {
		switch r.Kind() {
		case ast.ListKind, ast.MapKind:
			continue
		}
		if path, ok := render(r); ok {
			if est.sizeOfPath(strings.Split(path, ".")) != nil {
				continue
			}
			return w.offsetOf(rootOf(r)), fmt.Sprintf("it iterates over %s, whose size is unknown (%s)", path, w.unboundedAdvice(path))
		}
		// args.?items.orValue([]): the advice is the variable's.
		root := r
		for done := false; !done; {
			switch {
			case root.Kind() == ast.SelectKind:
				root = root.AsSelect().Operand()
			case root.Kind() == ast.CallKind && root.AsCall().IsMemberFunction():
				root = root.AsCall().Target()
			case root.Kind() == ast.CallKind && len(root.AsCall().Args()) > 0:
				root = root.AsCall().Args()[0]
			default:
				done = true
			}
		}
		name := ""
		if root.Kind() == ast.IdentKind {
			name = root.AsIdent() + "."
		}
		return w.offsetOf(r), fmt.Sprintf("it iterates over a value whose size is unknown (%s)", w.unboundedAdvice(name))
	}
	if w.env.argsTyped {
		return -1, "it works on input whose size is unknown (declare maxLength/maxItems in the schema)"
	}
	return -1, "it works on input whose size is unknown"
}

// unboundedAdvice says how to give the value at path, which a predicate scans, a size: only a
// tool's schema declares one.
func (w *walker) unboundedAdvice(path string) string {
	switch {
	case strings.HasPrefix(path, "args.") && w.env.argsTyped:
		return "declare maxItems in the tool's schema"
	case strings.HasPrefix(path, "args."):
		return "scope the entry to tools whose schema declares it with maxItems"
	}
	return "a dyn value, which no schema sizes: no cost limit admits a scan of it; test a string instead, one the host joins the list into"
}

// costAdvice explains an estimate over the limit: the sizes it assumed where nothing declares
// one, and what would lower it. Only a tool schema can declare a size (maxLength, maxItems);
// the other inputs have the sizes of doc.go.
func (w *walker) costAdvice() string {
	var parts []string
	est := &costEstimator{hints: w.env.hints}
	seen := map[string]bool{}
	str := fmt.Sprintf("%d characters in a string", DefaultStringSize)
	for _, r := range w.ranges {
		path, ok := render(r)
		if !ok || seen[path] || strings.HasPrefix(path, "args.") {
			continue
		}
		seen[path] = true
		if h, ok := est.hints[path]; ok && h.declared == nil && h.assumed != nil {
			parts = append(parts, fmt.Sprintf("%d elements in %s", h.assumed.Max, path))
		}
		if c, ok := est.hints[path+".@items.content"]; ok && c.assumed == assumedContent {
			str = fmt.Sprintf("%d characters in a message's content", DefaultContentSize)
		}
	}
	var advice []string
	if w.env.argsTyped && w.reads["args"] {
		advice = append(advice, "declare maxLength/maxItems in the tool's schema")
	}
	if len(parts) > 0 || len(advice) == 0 {
		parts = append(parts, str)
	}
	if w.regex {
		advice = append(advice, "contains() with a fixed string costs less than matches()")
	}
	var msg string
	if len(parts) > 0 {
		msg = " (it assumes " + strings.Join(parts, " and ") + ")"
	}
	for _, a := range advice {
		msg += "; " + a
	}
	return msg
}

// rootOf returns the innermost operand of a select/index chain, where its text starts.
func rootOf(e ast.Expr) ast.Expr {
	for {
		switch e.Kind() {
		case ast.SelectKind:
			e = e.AsSelect().Operand()
		case ast.CallKind:
			if c := e.AsCall(); c.FunctionName() == operators.Index && len(c.Args()) == 2 {
				e = c.Args()[0]
				continue
			}
			return e
		default:
			return e
		}
	}
}

// literal records field op value when field is a path and value a constant.
func (w *walker) literal(op string, field, value ast.Expr) {
	if value.Kind() != ast.LiteralKind {
		return
	}
	var kind, v string
	switch c := value.AsLiteral().(type) {
	case types.String:
		kind, v = "string", string(c)
	case types.Int, types.Uint, types.Double, types.Bool:
		kind, v = c.Type().TypeName(), fmt.Sprint(c.Value())
	case types.Null:
		kind, v = "null", "null"
	default:
		return
	}
	path, ok := w.renderBound(field)
	if p, def, opt := w.renderOrValue(field); opt {
		// A field read with a default compares as the field, where the
		// default is another string: args.?tier.orValue('') == 'gld'
		// holds only where tier is 'gld'.
		path, ok = p, kind == "string" && op != "<" && op != "<=" && op != ">" && op != ">=" && stringLiteral(def) && !sameString(value, def)
	}
	if ok {
		l := Literal{Path: path, Op: op, Kind: kind, FieldKind: w.ast.GetType(field.ID()).String(), Value: v, Offset: w.offsetOf(value)}
		if op == "in" {
			l.List = w.lists
		}
		w.literals = append(w.literals, l)
	}
}

// literalAt records a comparison of the field at path, of the CEL type
// fieldKind, with value when value is a string constant.
func (w *walker) literalAt(op, path string, value ast.Expr, fieldKind string) {
	if !stringLiteral(value) {
		return
	}
	w.literals = append(w.literals, Literal{Path: path, Op: op, Kind: "string", FieldKind: fieldKind,
		Value: string(value.AsLiteral().(types.String)), Offset: w.offsetOf(value)})
}

// elemPath returns the path of the elements of the list e: e's own with
// [] (response.tool_calls[]), or, for a list mapped to a field of another
// list's elements, that field (response.tool_calls[].name for
// response.tool_calls.map(c, c.name)).
func (w *walker) elemPath(e ast.Expr) (string, bool) {
	if r, ok := w.renderBound(e); ok {
		return r + "[]", true
	}
	return w.mappedElems(e)
}

// mappedElems returns the path of the elements of a list a map() or
// filter() macro builds from another list (l.map(x, x.f), l.filter(x, p),
// l.map(x, p, x.f)) where each is a path of an element of that list.
func (w *walker) mappedElems(e ast.Expr) (string, bool) {
	if e.Kind() != ast.ComprehensionKind {
		return "", false
	}
	comp := e.AsComprehension()
	isAccu := func(x ast.Expr) bool { return x.Kind() == ast.IdentKind && x.AsIdent() == comp.AccuVar() }
	if comp.HasIterVar2() || comp.AccuInit().Kind() != ast.ListKind || comp.AccuInit().AsList().Size() != 0 || !isAccu(comp.Result()) {
		return "", false
	}
	step := comp.LoopStep()
	if step.Kind() == ast.CallKind && step.AsCall().FunctionName() == operators.Conditional && len(step.AsCall().Args()) == 3 && isAccu(step.AsCall().Args()[2]) {
		step = step.AsCall().Args()[1] // filter, or map with a predicate
	}
	if step.Kind() != ast.CallKind || step.AsCall().FunctionName() != operators.Add || len(step.AsCall().Args()) != 2 {
		return "", false
	}
	add := step.AsCall().Args()
	if !isAccu(add[0]) || add[1].Kind() != ast.ListKind || add[1].AsList().Size() != 1 {
		return "", false
	}
	base, ok := w.elemPath(comp.IterRange())
	if !ok {
		return "", false
	}
	prev, bound := w.binds[comp.IterVar()]
	if w.binds == nil {
		w.binds = map[string]string{}
	}
	w.binds[comp.IterVar()] = base
	path, ok := w.renderBound(add[1].AsList().Elements()[0])
	if bound {
		w.binds[comp.IterVar()] = prev
	} else {
		delete(w.binds, comp.IterVar())
	}
	return path, ok
}

// checkNullObject reports field op value where value is null and field a field typed as an
// object by a schema. The type checker admits the comparison (an object type may be null in
// CEL), but it never decides anything: a JSON null reads as absent, so the read of a null field
// is a "no such key" error, and a field that is there is an object. A comparison of a scalar
// with null is a type error of the checker's own (see suggestNullOperand). Field reads, map
// entries read by a literal key and the variables themselves are checked: an element of a list
// may be null.
func (w *walker) checkNullObject(e ast.Expr, op string, field, value ast.Expr, locals []string) {
	if value.Kind() != ast.LiteralKind || !nullComparable(field, locals) {
		return
	}
	if _, ok := value.AsLiteral().(types.Null); !ok {
		return
	}
	t := w.ast.GetType(field.ID())
	if t == nil || t.Kind() != types.StructKind {
		return
	}
	o, ok := w.env.prov.lookup(t.TypeName())
	if !ok {
		return
	}
	never := "true"
	if op == "!=" {
		never = "false"
	}
	if !o.json {
		// A variable of a fixed type, or its object field (request,
		// request.params, response.usage): a Go struct, always there.
		name, ok := render(field)
		if !ok || field.Kind() != ast.IdentKind && field.Kind() != ast.SelectKind {
			return
		}
		w.issues = append(w.issues, w.pos.issue(RuleType, w.offsetOf(e), fmt.Sprintf(
			"%s is always an object, never null, so %s %s null is never %s; test one of its fields instead (%s)",
			name, name, op, never, fieldExamples(o, name))))
		return
	}
	if field.Kind() == ast.IdentKind {
		name := field.AsIdent()
		w.issues = append(w.issues, w.pos.issue(RuleType, w.offsetOf(e), fmt.Sprintf(
			"%s is always an object, never null, so %s %s null is never %s; test one of its fields with has(%s.name) instead",
			name, name, op, never, name)))
		return
	}
	test, when := nullTest(op == "!=")
	var path string
	if field.Kind() == ast.CallKind { // a map entry: args.books["home"]
		args := field.AsCall().Args()
		m, ok := w.renderBound(args[0])
		if !ok {
			return
		}
		key := strconv.Quote(string(args[1].AsLiteral().(types.String)))
		path = m + "[" + key + "]"
		test = "!(" + key + " in %s)"
		if op == "!=" {
			test = key + " in %s"
		}
		test = fmt.Sprintf(test, m)
	} else {
		p, ok := w.renderBound(field)
		if !ok {
			return
		}
		path = p
		test = fmt.Sprintf(test, path)
	}
	w.issues = append(w.issues, w.pos.issue(RuleType, w.offsetOf(e), fmt.Sprintf(
		"%s is an object, never null: a JSON null reads as absent, never as null, so where it is null reading it is a \"no such key\" error, and %s %s null is never %s; test %s instead (%s)",
		path, path, op, never, test, when)))
}

// fieldExamples names up to three fields of the fixed type o read under path, for a message
// (request.params.max_tokens, request.params.metadata, ...).
func fieldExamples(o *objectType, path string) string {
	names := o.names[:min(len(o.names), 3)]
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = path + "." + n
	}
	if len(o.names) > len(names) {
		out = append(out, "...")
	}
	return strings.Join(out, ", ")
}

// nullComparable reports whether e is a read checkNullObject judges: a field read (args.ship),
// a map entry read with a string key (args.books["home"]), or a variable of the stage (args
// itself). A comprehension's variable (locals) may stand for a list element, which may be null,
// and so may an element read by its index.
func nullComparable(e ast.Expr, locals []string) bool {
	switch e.Kind() {
	case ast.IdentKind:
		return !slices.Contains(locals, e.AsIdent())
	case ast.SelectKind:
		return !e.AsSelect().IsTestOnly()
	case ast.CallKind:
		call := e.AsCall()
		if call.FunctionName() != operators.Index || len(call.Args()) != 2 || call.Args()[1].Kind() != ast.LiteralKind {
			return false
		}
		_, str := call.Args()[1].AsLiteral().(types.String)
		return str
	}
	return false
}

// renderBound renders e as render does, a comprehension variable in scope standing for the
// path of its range's elements.
func (w *walker) renderBound(e ast.Expr) (string, bool) {
	path, ok := render(e)
	if !ok {
		return "", false
	}
	root, rest, _ := strings.Cut(path, ".")
	if r, ok := w.binds[root]; ok {
		if rest == "" {
			return r, true
		}
		return r + "." + rest, true
	}
	return path, true
}

// renderOrValue renders a field read as an optional with a default,
// x.?a.?b.orValue(d), as the field's path ("x.a.b", with a comprehension
// variable standing for its range's elements) and returns the default d.
func (w *walker) renderOrValue(e ast.Expr) (path string, def ast.Expr, ok bool) {
	if e.Kind() != ast.CallKind {
		return "", nil, false
	}
	call := e.AsCall()
	if call.FunctionName() != "orValue" || !call.IsMemberFunction() || len(call.Args()) != 1 {
		return "", nil, false
	}
	var steps []string
	t := call.Target()
	for t.Kind() == ast.CallKind && t.AsCall().FunctionName() == operators.OptSelect && len(t.AsCall().Args()) == 2 {
		args := t.AsCall().Args()
		if !stringLiteral(args[1]) {
			return "", nil, false
		}
		steps = append([]string{string(args[1].AsLiteral().(types.String))}, steps...)
		t = args[0]
	}
	if len(steps) == 0 {
		return "", nil, false
	}
	root, ok := w.renderBound(t)
	if !ok {
		return "", nil, false
	}
	return root + "." + strings.Join(steps, "."), call.Args()[0], true
}

// stringLiteral reports whether e is a string constant.
func stringLiteral(e ast.Expr) bool {
	if e.Kind() != ast.LiteralKind {
		return false
	}
	_, ok := e.AsLiteral().(types.String)
	return ok
}

// sameString reports whether a and b are the same string constant.
func sameString(a, b ast.Expr) bool {
	if !stringLiteral(a) || !stringLiteral(b) {
		return false
	}
	return a.AsLiteral().(types.String) == b.AsLiteral().(types.String)
}

// render prints an identifier/field path ("args.shipping.zip"), or reports false.
func render(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent(), true
	case ast.SelectKind:
		sel := e.AsSelect()
		if sel.IsTestOnly() {
			return "", false
		}
		op, ok := render(sel.Operand())
		return op + "." + sel.FieldName(), ok
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if call.FunctionName() == operators.Index && len(args) == 2 && args[1].Kind() == ast.LiteralKind {
			op, ok := render(args[0])
			return fmt.Sprintf("%s[%v]", op, args[1].AsLiteral().Value()), ok
		}
	}
	return "", false
}

// PresentIfTrue lists the paths (such as "args.reason") that are present
// wherever the predicate evaluates to true: those its has() tests, and its
// 'key' in map tests, prove there.
func (c *Checked) PresentIfTrue() []string {
	return presentIfTrue(c.ast.NativeRep().Expr())
}

// presentIfTrue lists the paths that are present whenever e evaluates to true.
func presentIfTrue(e ast.Expr) []string {
	switch e.Kind() {
	case ast.SelectKind:
		sel := e.AsSelect()
		if !sel.IsTestOnly() {
			return nil
		}
		op, ok := render(sel.Operand())
		if !ok {
			return nil
		}
		// has(a.b.c) is true only when a.b is present too.
		out := []string{op + "." + sel.FieldName()}
		for cur := sel.Operand(); cur.Kind() == ast.SelectKind; cur = cur.AsSelect().Operand() {
			if p, ok := render(cur); ok {
				out = append(out, p)
			}
		}
		return out
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		switch call.FunctionName() {
		case operators.LogicalNot:
			return presentIfFalse(args[0])
		case operators.LogicalAnd:
			var out []string
			for _, a := range args {
				out = append(out, presentIfTrue(a)...)
			}
			return out
		case operators.LogicalOr:
			return intersectAll(args, presentIfTrue)
		case operators.In:
			// 'key' in m: m.key is present.
			if len(args) == 2 && args[0].Kind() == ast.LiteralKind {
				key, isString := args[0].AsLiteral().(types.String)
				if m, ok := render(args[1]); ok && isString {
					return []string{m + "." + string(key)}
				}
			}
		}
	}
	return nil
}

// presentIfFalse lists the paths that are present whenever e evaluates to false.
func presentIfFalse(e ast.Expr) []string {
	if e.Kind() != ast.CallKind {
		return nil
	}
	call := e.AsCall()
	args := call.Args()
	switch call.FunctionName() {
	case operators.LogicalNot:
		return presentIfTrue(args[0])
	case operators.LogicalOr:
		var out []string
		for _, a := range args {
			out = append(out, presentIfFalse(a)...)
		}
		return out
	case operators.LogicalAnd:
		return intersectAll(args, presentIfFalse)
	}
	return nil
}

func intersectAll(args []ast.Expr, f func(ast.Expr) []string) []string {
	if len(args) == 0 {
		return nil
	}
	out := f(args[0])
	for _, a := range args[1:] {
		next := f(a)
		out = slices.DeleteFunc(out, func(p string) bool { return !slices.Contains(next, p) })
	}
	return out
}

// dropRoots removes the facts about paths rooted at shadowed names.
func dropRoots(facts, names []string) []string {
	if len(facts) == 0 {
		return facts
	}
	return slices.DeleteFunc(slices.Clone(facts), func(p string) bool {
		root, _, _ := strings.Cut(p, ".")
		root, _, _ = strings.Cut(root, "[")
		return slices.Contains(names, root)
	})
}

var _ checker.CostEstimator = (*costEstimator)(nil)

// hasFieldOffset places an "undefined field 'x'" issue that cel-go reports at
// a has() macro (at its opening parenthesis) on the field inside it: the
// first selection of x, as `.x` or `?.x`, between the parenthesis and the
// one that closes it.
func hasFieldOffset(src string, is Issue) (int, bool) {
	name, ok := strings.CutPrefix(is.Message, "undefined field '")
	name, ok2 := strings.CutSuffix(name, "'")
	off := is.Offset
	if !ok || !ok2 || name == "" || off >= len(src) || src[off] != '(' || !strings.HasSuffix(strings.TrimRight(src[:off], " \t\r\n"), "has") {
		return 0, false
	}
	depth := 0
	for i := off; i < len(src); i++ {
		switch src[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return 0, false
			}
		case '.':
			j := i + 1
			for j < len(src) && strings.IndexByte(" \t\r\n", src[j]) >= 0 {
				j++
			}
			if strings.HasPrefix(src[j:], name) && (j+len(name) == len(src) || !isIdentByte(src[j+len(name)])) {
				return j, true
			}
		}
	}
	return 0, false
}

// AlwaysPresent lists the paths (such as "args.order_id"), in source order
// and once each, of the presence tests the predicate makes that hold for
// every call it sees: has() of an args field the tool's schema requires,
// at every level of the path, with a type that rejects null (a null reads
// as absent, and an untyped field may be one). The tool chain refuses
// arguments that do not match the schema before any layer runs, so such a
// test never fails.
func (c *Checked) AlwaysPresent() []string {
	native := c.ast.NativeRep()
	var out []string
	ast.PreOrderVisit(native.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.SelectKind || !e.AsSelect().IsTestOnly() || !c.requiredField(native, e) {
			return
		}
		op, ok := render(e.AsSelect().Operand())
		if p := op + "." + e.AsSelect().FieldName(); ok && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}))
	return out
}

// requiredField reports whether the select e reads an args field that is
// present in every call: required by the schema with a type that rejects
// null, below args or such a field.
func (c *Checked) requiredField(native *ast.AST, e ast.Expr) bool {
	sel := e.AsSelect()
	op := sel.Operand()
	t := native.GetType(op.ID())
	if t == nil || t.Kind() != types.StructKind {
		return false
	}
	o, ok := c.env.prov.lookup(t.TypeName())
	if !ok || !o.json {
		return false
	}
	f, ok := o.fields[sel.FieldName()]
	if !ok || !f.required || f.ft.Type == nil || f.ft.Type.Kind() == types.DynKind {
		return false
	}
	switch op.Kind() {
	case ast.IdentKind:
		return op.AsIdent() == "args"
	case ast.SelectKind:
		return !op.AsSelect().IsTestOnly() && c.requiredField(native, op)
	}
	return false
}
