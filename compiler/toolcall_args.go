package compiler

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// A toolCallArgRead is a read of an argument of a tool call a chat
// predicate ranges over (c.args.amount, c.args['amount'], has(c.args.amount),
// 'amount' in c.args in response.tool_calls.exists(c, ...)) or reads by
// index (response.tool_calls[0].args.amount).
type toolCallArgRead struct {
	key    string
	offset int
	// tools are the tools a conjunct around the read narrows the call to
	// (c.name == 'transfer' && ...); none when nothing narrows it.
	tools []string
	// history is set for a call of the conversation (a message's
	// tool_calls), which the client sent: the tool chain never checked it.
	history bool
}

// A callVar is a comprehension variable over a list of tool calls: the
// tools name tests narrow it to, and whether the list is the
// conversation's (anything but response.tool_calls).
type callVar struct {
	tools   []string
	history bool
}

// toolCallArgReads returns the reads of a tool call's arguments in the chat
// predicate src: inside a comprehension over a list of tool calls
// (response.tool_calls, a message's tool_calls), each read of the
// variable's args, with the tools the name tests around it narrow the call
// to. A name test narrows what it guards: the other conjuncts of c.name ==
// 'x' && ... (c.name in ['x', 'y'] && ...), the other disjuncts of c.name !=
// 'x' || ... (!(c.name == 'x') || ...), a conditional's condition the branch
// it selects, and a filter()'s condition the calls it keeps, which a macro
// chained into it ranges over.
func toolCallArgReads(src string) []toolCallArgRead {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return nil
	}
	f := folder{src: src, info: tree.SourceInfo()}
	var out []toolCallArgRead
	// rangeCalls says whether r, a comprehension's range or an indexed
	// list, is a list of tool calls (defined below).
	var rangeCalls func(r ast.Expr, vars map[string]callVar) (callVar, bool)
	// callRef returns the tool call e is, and the key a name test of it
	// narrows it under: a comprehension variable over a list of tool
	// calls (c), or an element of such a list read by index
	// (response.tool_calls[0]), keyed by its path when the path is fixed
	// ("" for response.tool_calls[i], or an element of a filter(), which
	// the filter's condition narrows).
	callRef := func(e ast.Expr, vars map[string]callVar) (string, callVar, bool) {
		switch e.Kind() {
		case ast.IdentKind:
			cv, ok := vars[e.AsIdent()]
			return e.AsIdent(), cv, ok
		case ast.CallKind:
			c := e.AsCall()
			if fn := c.FunctionName(); fn != operators.Index && fn != operators.OptIndex || len(c.Args()) != 2 {
				return "", callVar{}, false
			}
			cv, ok := rangeCalls(c.Args()[0], vars)
			if !ok {
				return "", callVar{}, false
			}
			// Keyed as the path it reads: messages[0].tool_calls[0] is
			// request.messages[0].tool_calls[0].
			key := aliasKey(elementKey(e))
			if n, ok := vars[key]; ok && key != "" {
				cv = n
			}
			return key, cv, true
		}
		return "", callVar{}, false
	}
	// narrowing returns the tools e, a term of an && (or, with or set, of an
	// ||), narrows a call to, the call, and the key it is narrowed under.
	narrowing := func(e ast.Expr, vars map[string]callVar, or bool) (string, callVar, []string) {
		var cv callVar
		key, tools := vet.NameTest(e, or, func(x ast.Expr) string {
			if x.Kind() != ast.SelectKind || x.AsSelect().FieldName() != "name" || x.AsSelect().IsTestOnly() {
				return ""
			}
			key, c, ok := callRef(x.AsSelect().Operand(), vars)
			if !ok {
				return ""
			}
			cv = c
			return key
		})
		return key, cv, tools
	}
	// argRead returns the call and key e reads (or, 'key' in c.args,
	// tests) of a tool call's args, the args selector, and the key's
	// literal when it comes before the selector.
	argRead := func(e ast.Expr, vars map[string]callVar) (callVar, string, ast.Expr, ast.Expr, bool) {
		var m, lit ast.Expr
		var key string
		switch e.Kind() {
		case ast.SelectKind:
			m, key = e.AsSelect().Operand(), e.AsSelect().FieldName()
		case ast.CallKind:
			c := e.AsCall()
			fn := c.FunctionName()
			if (fn == operators.Index || fn == operators.OptIndex || fn == operators.OptSelect) && len(c.Args()) == 2 {
				s, ok := stringLiteral(c.Args()[1])
				if !ok {
					return callVar{}, "", nil, nil, false
				}
				m, key = c.Args()[0], s
			}
			if fn == operators.In && len(c.Args()) == 2 {
				s, ok := stringLiteral(c.Args()[0])
				if !ok {
					return callVar{}, "", nil, nil, false
				}
				m, key, lit = c.Args()[1], s, c.Args()[0]
			}
		}
		if m == nil || m.Kind() != ast.SelectKind || m.AsSelect().FieldName() != "args" || m.AsSelect().IsTestOnly() {
			return callVar{}, "", nil, nil, false
		}
		_, cv, ok := callRef(m.AsSelect().Operand(), vars)
		if !ok {
			return callVar{}, "", nil, nil, false
		}
		return cv, key, m, lit, true
	}
	// narrow returns vars with each variable a term of terms (of an &&, or
	// with or set of an ||) tests the name of narrowed to its tools.
	narrow := func(vars map[string]callVar, terms []ast.Expr, or bool) map[string]callVar {
		narrowed := vars
		for _, t := range terms {
			if key, cv, tools := narrowing(t, vars, or); key != "" {
				narrowed = maps.Clone(narrowed)
				cv.tools = tools
				narrowed[key] = cv
			}
		}
		return narrowed
	}
	// rangeCalls says whether r, a comprehension's range, is a list of tool
	// calls: a tool_calls field, or a filter() of such a list, whose
	// elements its condition narrows.
	rangeCalls = func(r ast.Expr, vars map[string]callVar) (callVar, bool) {
		switch r.Kind() {
		case ast.SelectKind:
			if r.AsSelect().FieldName() == "tool_calls" {
				return callVar{history: pathKey(r) != "response.tool_calls"}, true
			}
		case ast.ComprehensionKind:
			comp := r.AsComprehension()
			cv, ok := rangeCalls(comp.IterRange(), vars)
			// A filter keeps the element itself: accu + [c].
			cond, kept, built := listStep(comp)
			if !ok || !built || cond == nil || !identIs(kept, comp.IterVar()) {
				return callVar{}, false
			}
			inner := maps.Clone(vars)
			inner[comp.IterVar()] = cv
			return narrow(inner, vet.JunctionTerms(cond, operators.LogicalAnd), false)[comp.IterVar()], true
		}
		return callVar{}, false
	}
	var walk func(e ast.Expr, vars map[string]callVar)
	walkAll := func(vars map[string]callVar, es ...ast.Expr) {
		for _, e := range es {
			walk(e, vars)
		}
	}
	walk = func(e ast.Expr, vars map[string]callVar) {
		if cv, key, m, lit, ok := argRead(e, vars); ok {
			// The key is searched for after the args selector: from the
			// start of c.args, the a of c.args.a would be found in args
			// (and an args read by a variable args).
			off := f.offset(m)
			if lit != nil {
				off = f.offset(lit) + 1 // past the quote
			} else if r, ok := f.info.GetOffsetRange(m.ID()); ok {
				off = f.byteOffset(int(r.Start)) // the . of .args
			}
			if i := strings.Index(src[min(off, len(src)):], "args"); i >= 0 && lit == nil {
				off += i + len("args")
			}
			if i := strings.Index(src[min(off, len(src)):], key); i >= 0 {
				off += i
			}
			out = append(out, toolCallArgRead{key: key, offset: off, tools: cv.tools, history: cv.history})
			return
		}
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			if fn := c.FunctionName(); fn == operators.LogicalAnd || fn == operators.LogicalOr {
				terms := vet.JunctionTerms(e, fn)
				walkAll(narrow(vars, terms, fn == operators.LogicalOr), terms...)
				return
			}
			if a := c.Args(); c.FunctionName() == operators.Conditional && len(a) == 3 {
				// The condition narrows the branch it selects, as a
				// conjunct does (a filter's step, a map's with a filter).
				walkAll(vars, a[0], a[2])
				walk(a[1], narrow(vars, vet.JunctionTerms(a[0], operators.LogicalAnd), false))
				return
			}
			if c.IsMemberFunction() {
				walk(c.Target(), vars)
			}
			walkAll(vars, c.Args()...)
		case ast.ComprehensionKind:
			comp := e.AsComprehension()
			walkAll(vars, comp.IterRange(), comp.AccuInit(), comp.LoopCondition(), comp.Result())
			inner := maps.Clone(vars)
			// The variable hides an outer one of its name, and the
			// elements read through it (m.tool_calls[0]).
			maps.DeleteFunc(inner, func(k string, _ callVar) bool {
				return k == comp.IterVar() || strings.HasPrefix(k, comp.IterVar()+".") || strings.HasPrefix(k, comp.IterVar()+"[")
			})
			if cv, ok := rangeCalls(comp.IterRange(), vars); ok {
				inner[comp.IterVar()] = cv
			}
			walk(comp.LoopStep(), inner)
		case ast.SelectKind:
			walk(e.AsSelect().Operand(), vars)
		case ast.ListKind:
			walkAll(vars, e.AsList().Elements()...)
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				m := en.AsMapEntry()
				walkAll(vars, m.Key(), m.Value())
			}
		}
	}
	walk(tree.Expr(), map[string]callVar{})
	return out
}

// checkToolCallArgs reports, in a chat predicate, each read of an argument
// of a tool call the model proposes (a map of any keys to CEL) that no
// tool it can be a call of declares, as the tool stage's typed args do:
// where a name test narrows the call to declared tools whose args schemas
// are closed, an argument none of them has is a cel/type error (a call
// its tool accepts never carries it, so the read fails, or has() of it is
// false, on every one); where nothing narrows it, an argument no declared
// tool's closed schema has is a cel/untyped-args warning (the model may
// name a tool the policy does not declare, which the tool stage then
// refuses), and so is a narrowed one of a call in request.messages (the
// client's history, which the tool chain never checked). Nothing is said
// where a tool's schema is open, or, unnarrowed, where undeclared or MCP
// tools may run.
func (c *Compilation) checkToolCallArgs(x *dsl.Expr) {
	p := c.Policy
	if len(p.Tools) == 0 {
		return
	}
	seen := map[string]bool{}
	for _, r := range toolCallArgReads(x.Source) {
		if seen[r.key] {
			continue
		}
		tools := r.tools
		narrowed := len(tools) > 0
		if !narrowed {
			if p.AllowUndeclaredTools || len(p.MCPServers) > 0 {
				continue
			}
			tools = sortedNames(p.Tools)
		}
		names, closed := c.toolsArgNames(tools)
		if !closed || slices.Contains(names, r.key) {
			continue
		}
		seen[r.key] = true
		suggest := ""
		if best := textdist.Closest(r.key, names); best != "" {
			suggest = fmt.Sprintf("; did you mean '%s'?", best)
		}
		if narrowed && r.history {
			c.report(dsl.Warnf(x.PosAt(r.offset), predicate.RuleUntypedArgs,
				"the args schema of %s, which the name test narrows the call to, has no '%s': a call of it the tool chain accepts never carries one, but a call in request.messages is the client's, unchecked; the read fails, or has() of it is false, on every call its tool accepts%s",
				"`"+strings.Join(tools, "`, `")+"`", r.key, suggest))
			continue
		}
		if narrowed {
			c.report(dsl.Errorf(x.PosAt(r.offset), predicate.RuleType,
				"undefined field '%s': the args schema of %s, which the name test narrows the call to, has no '%s', and a call of it carrying one is refused: the read fails, or has() of it is false, on every call it accepts%s",
				r.key, "`"+strings.Join(tools, "`, `")+"`", r.key, suggest))
			continue
		}
		c.report(dsl.Warnf(x.PosAt(r.offset), predicate.RuleUntypedArgs,
			"a tool call's args are not typed in the chat stage, and no declared tool's args schema has '%s' (tools: %s): the read fails, or has() of it is false, on every call a declared tool accepts; test c.name == '...' to narrow the call to its tool%s",
			r.key, nameList(tools), suggest))
	}
}

// toolsArgNames returns the arguments the args schemas of tools declare,
// when each is a declared tool whose schema is closed (an undeclared name
// is cel/unknown-value's).
func (c *Compilation) toolsArgNames(tools []string) ([]string, bool) {
	var names []string
	for _, name := range tools {
		t := c.Policy.Tools[name]
		if t == nil {
			return nil, false
		}
		args, ok := t.ClosedArgNames()
		if !ok {
			return nil, false
		}
		for _, a := range args {
			if !slices.Contains(names, a) {
				names = append(names, a)
			}
		}
	}
	return names, true
}

// checkNarrowedArgs reports, in a tool-stage predicate of an entry not
// scoped to tools, each argument read (or tested with has()) where a test
// of tool.name narrows the call to declared tools (see vet.ArgAccesses)
// none of whose closed args schemas has it, as cel/type does for an entry
// scoped to them: a call of them never carries it, so the read fails, or
// has() of it is false, on every one. An argument no declared tool has is
// checkUndeclaredArgs'. It reports whether it found one.
func (c *Compilation) checkNarrowedArgs(x *dsl.Expr) bool {
	if len(c.Policy.Tools) == 0 {
		return false
	}
	all, allClosed := c.toolsArgNames(sortedNames(c.Policy.Tools))
	var seen []string
	for _, r := range vet.ArgAccesses(x.Source) {
		if len(r.Tools) == 0 || slices.Contains(seen, r.Field) || allClosed && !slices.Contains(all, r.Field) {
			continue
		}
		names, closed := c.toolsArgNames(r.Tools)
		if !closed || slices.Contains(names, r.Field) {
			continue
		}
		seen = append(seen, r.Field)
		msg := fmt.Sprintf("undefined field '%s': the args schema of %s, which the test of tool.name narrows the call to, has no '%s', and a call of it carrying one is refused: the read fails, or has() of it is false, on every call it accepts",
			r.Field, "`"+strings.Join(r.Tools, "`, `")+"`", r.Field)
		if best := textdist.Closest(r.Field, names); best != "" {
			msg += fmt.Sprintf("; did you mean '%s'?", best)
		}
		c.report(dsl.Errorf(x.PosAt(r.Offset), predicate.RuleType, "%s", msg))
	}
	return len(seen) > 0
}

// elementKey returns the path of e, an element of a list read by a
// constant index (response.tool_calls[0], request.messages[1].tool_calls[0]),
// or "" for another expression: two reads of it with one key read the
// same element.
func elementKey(e ast.Expr) string {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent()
	case ast.SelectKind:
		if s := e.AsSelect(); !s.IsTestOnly() {
			if k := elementKey(s.Operand()); k != "" {
				return k + "." + s.FieldName()
			}
		}
	case ast.CallKind:
		c := e.AsCall()
		if fn := c.FunctionName(); fn != operators.Index && fn != operators.OptIndex || len(c.Args()) != 2 || c.Args()[1].Kind() != ast.LiteralKind {
			return ""
		}
		var i string
		switch n := c.Args()[1].AsLiteral().(type) {
		case types.Int:
			i = strconv.FormatInt(int64(n), 10)
		case types.Uint:
			i = strconv.FormatUint(uint64(n), 10)
		default:
			return ""
		}
		if k := elementKey(c.Args()[0]); k != "" {
			if c.FunctionName() == operators.OptIndex {
				return k + "[?" + i + "]"
			}
			return k + "[" + i + "]"
		}
	}
	return ""
}
