package compiler

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// invariantStage is the pseudo-stage under which knownValues answers for
// the fields of a run's trace that an invariant compares.
const invariantStage predicate.Stage = "invariant"

// traceShape is what one value of a run's trace holds, as agentc run -json
// prints it and an invariant reads it. A nil *traceShape is a value whose
// shape is not known (any JSON).
type traceShape struct {
	// fields are an object's fields (nil: not an object).
	fields map[string]*traceShape
	// list and dict mark a list and a map, elem their element or value.
	list, dict bool
	elem       *traceShape
	// names says what a map's keys name ("tools", "models"), "" for keys
	// that may be anything.
	names string
	// omitted are the object's fields that the trace leaves out where they
	// are empty (omitempty or omitzero): a record may lack them.
	omitted map[string]bool
}

var (
	traceOnce  sync.Once
	traceRoots map[string]*traceShape
)

// traceVariables returns the shapes of an invariant's variables, taken from
// the types the trace is printed from (scenario.Result), so that they stay
// those of the trace.
func traceVariables() map[string]*traceShape {
	traceOnce.Do(func() {
		res := shapeOf(reflect.TypeFor[scenario.Result](), map[reflect.Type]*traceShape{})
		traceRoots = map[string]*traceShape{
			"crashed": {},
			// What prove called: a declared model (chat) or tool.
			"target": {fields: map[string]*traceShape{"stage": {}, "name": {}}},
		}
		for _, name := range []string{"steps", "executions", "audit", "meter"} {
			traceRoots[name] = res.fields[name]
		}
		if ex := traceRoots["executions"]; ex != nil && ex.fields != nil {
			for _, names := range []string{"models", "tools"} {
				if m := ex.fields[names]; m != nil && m.dict {
					named := *m // the two maps share their type's shape
					named.names = names
					ex.fields[names] = &named
				}
			}
		}
	})
	return traceRoots
}

// shapeOf returns the shape of the JSON encoding of a value of type t: its
// objects' fields by their json names. A type with a MarshalJSON of its own,
// or an interface, may encode as anything (nil).
func shapeOf(t reflect.Type, seen map[reflect.Type]*traceShape) *traceShape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := seen[t]; ok {
		return s
	}
	marshaler := reflect.TypeFor[json.Marshaler]()
	if t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Interface:
		return nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &traceShape{} // bytes encode as a string
		}
		s := &traceShape{list: true}
		seen[t] = s
		s.elem = shapeOf(t.Elem(), seen)
		return s
	case reflect.Map:
		s := &traceShape{dict: true}
		seen[t] = s
		s.elem = shapeOf(t.Elem(), seen)
		return s
	case reflect.Struct:
		s := &traceShape{fields: map[string]*traceShape{}, omitted: map[string]bool{}}
		seen[t] = s
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" && f.Anonymous {
				if inner := shapeOf(f.Type, seen); inner != nil {
					for k, v := range inner.fields {
						s.fields[k] = v
						s.omitted[k] = inner.omitted[k]
					}
				}
				continue
			}
			if name == "" {
				name = f.Name
			}
			s.fields[name] = shapeOf(f.Type, seen)
			for _, o := range strings.Split(opts, ",") {
				if (o == "omitempty" || o == "omitzero") && !writtenByProve[t][name] {
					s.omitted[name] = true
				}
			}
		}
		return s
	}
	return &traceShape{}
}

// writtenByProve are the fields the trace types leave out where empty that
// every run prove makes writes all the same: a step's outcome (prove makes
// chat, tool and parallel steps, which always have one; only an admit step
// that succeeded lacks it) and an audit record's tool (prove's records come
// from the tool stage). Warning of an unguarded read of them would flag
// invariants that cannot fail on those runs.
var writtenByProve = map[reflect.Type]map[string]bool{
	reflect.TypeFor[scenario.StepResult](): {"outcome": true},
	reflect.TypeFor[scenario.AuditEntry](): {"tool": true},
}

// traceLocal is a comprehension variable of an invariant: its shape and how
// a literal's path renders it ("audit[]").
type traceLocal struct {
	shape *traceShape
	path  string
}

// invariantWalker checks the reads of an invariant against the trace's
// shape and collects its comparisons with string constants.
type invariantWalker struct {
	c        *Compilation
	x        *dsl.Expr
	info     *ast.SourceInfo
	literals []predicate.Literal
	lists    int
	// facts are the reads, as the invariant writes them (s.outcome), that
	// a presence test guarantees wherever the part being walked decides
	// the result; warned the trace paths of the reads already warned about.
	facts  []string
	warned []string
}

// checkInvariantReads reports each field an invariant reads that the trace
// does not have (executions.tool for executions.tools, audit[0].tol), each
// model or tool name it reads from executions that the policy does not
// declare, and each comparison of a name or a stage of the trace with a
// string constant it never holds (target.name == 'refnd'). The invariant
// has type-checked: it parses.
func (c *Compilation) checkInvariantReads(x *dsl.Expr) {
	tree, ok := predicate.ParseSyntax(x.Source)
	if !ok {
		return
	}
	w := &invariantWalker{c: c, x: x, info: tree.SourceInfo()}
	w.visit(tree.Expr(), nil)
	c.checkLiterals(x, invariantStage, nil, nil, w.literals, "invariant")
	c.checkInvariantSources(x, tree)
}

// checkInvariantSources reports an invariant's read of a part of the trace
// that nothing in the policy fills, so that it is the same in every run
// and the test of it decides nothing: meter (the chat chain's meter's
// ledger) in a policy whose chat chain has no meter, audit where no layer
// writes audit records (no audit layer or other recording middleware of
// the tool and turn chains, no grounding record_grounding, no state sink
// of kind audit). A warning (cel/constant) at the first read of each.
func (c *Compilation) checkInvariantSources(x *dsl.Expr, tree *ast.AST) {
	p := c.Policy
	filled := map[string]bool{}
	for _, e := range p.Chains["chat"] {
		filled["meter"] = filled["meter"] || e.Use == "meter"
	}
	for _, stage := range []string{"tool", "turn"} {
		for _, e := range p.Chains[stage] {
			filled["audit"] = filled["audit"] || e.Use != "meter" && (e.Use == "audit" || e.Kind == nil || e.Kind.Has("records"))
		}
	}
	if p.Grounding != nil && p.Grounding.Record {
		filled["audit"] = true
	}
	if p.State != nil {
		for _, f := range p.State.Fields {
			for _, s := range f.Background {
				filled["audit"] = filled["audit"] || s.Sink == "audit"
			}
		}
	}
	why := map[string]string{
		"meter": "the policy's chat chain has no meter, so meter (its ledger) is all zeros in every run",
		"audit": "nothing in the policy writes an audit record (no audit layer, grounding record_grounding nor state sink \"audit\"), so audit is empty in every run",
	}
	f := folder{src: x.Source, info: tree.SourceInfo()}
	seen := map[string]bool{}
	var walk func(e ast.Expr, bound map[string]bool)
	walk = func(e ast.Expr, bound map[string]bool) {
		switch e.Kind() {
		case ast.IdentKind:
			name := e.AsIdent()
			if _, ok := why[name]; ok && !bound[name] && !filled[name] && !seen[name] {
				seen[name] = true
				c.report(dsl.Warnf(x.PosAt(f.offset(e)), ruleConstant, "invariant: %s: a test of it decides nothing, and prove finds no run that violates it on that account", why[name]))
			}
		case ast.CallKind:
			call := e.AsCall()
			if call.IsMemberFunction() {
				walk(call.Target(), bound)
			}
			for _, a := range call.Args() {
				walk(a, bound)
			}
		case ast.SelectKind:
			walk(e.AsSelect().Operand(), bound)
		case ast.ListKind:
			for _, el := range e.AsList().Elements() {
				walk(el, bound)
			}
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				walk(en.AsMapEntry().Key(), bound)
				walk(en.AsMapEntry().Value(), bound)
			}
		case ast.ComprehensionKind:
			comp := e.AsComprehension()
			walk(comp.IterRange(), bound)
			inner := maps.Clone(bound)
			if inner == nil {
				inner = map[string]bool{}
			}
			inner[comp.IterVar()] = true
			inner[comp.AccuVar()] = true
			for _, sub := range []ast.Expr{comp.AccuInit(), comp.LoopCondition(), comp.LoopStep(), comp.Result()} {
				walk(sub, inner)
			}
		}
	}
	walk(tree.Expr(), nil)
}

// byteOffset returns the byte offset in the source of e's own position
// (a select's is its dot, a literal's its first character).
func (w *invariantWalker) byteOffset(e ast.Expr) int {
	r, ok := w.info.GetOffsetRange(e.ID())
	if !ok {
		return 0
	}
	src := w.x.Source
	b := 0
	for i := 0; i < int(r.Start) && b < len(src); i++ {
		_, n := utf8.DecodeRuneInString(src[b:])
		b += n
	}
	return b
}

// nameAfter returns the byte offset of name at or after e's position.
func (w *invariantWalker) nameAfter(e ast.Expr, name string) int {
	off := w.byteOffset(e)
	if i := strings.Index(w.x.Source[off:], name); i >= 0 {
		return off + i
	}
	return off
}

// declared returns the names a map of the trace is keyed by.
func (w *invariantWalker) declared(names string) []string {
	if names == "models" {
		return sortedNames(w.c.Policy.Models)
	}
	return sortedNames(w.c.Policy.Tools)
}

// member returns the shape of the member key of a value of shape s at path,
// reporting a key s never has; off is the key's offset.
func (w *invariantWalker) member(s *traceShape, path, key string, off int, test bool) (*traceShape, string) {
	fails := "the read fails on every run, and prove reports the invariant violated"
	if test {
		fails = "has() of it is always false"
	}
	switch {
	case s == nil:
		return nil, ""
	case s.fields != nil:
		f, ok := s.fields[key]
		if !ok {
			names := slices.Sorted(func(yield func(string) bool) {
				for k := range s.fields {
					if !yield(k) {
						return
					}
				}
			})
			msg := fmt.Sprintf("invariant: %s has no field '%s' (its fields: %s): %s", path, key, strings.Join(names, ", "), fails)
			if best := textdist.Closest(key, names); best != "" {
				msg += fmt.Sprintf("; did you mean '%s'?", best)
			}
			w.c.report(dsl.Errorf(w.x.PosAt(off), predicate.RuleType, "%s", msg))
			return nil, ""
		}
		return f, path + "." + key
	case s.dict && s.names != "":
		names := w.declared(s.names)
		if !slices.Contains(names, key) {
			msg := fmt.Sprintf("invariant: %s has no key '%s': its keys are the declared %s (%s), so %s", path, key, s.names, nameList(names), fails)
			if best := textdist.Closest(key, names); best != "" {
				msg += fmt.Sprintf("; did you mean '%s'?", best)
			}
			w.c.report(dsl.Errorf(w.x.PosAt(off), predicate.RuleType, "%s", msg))
			return nil, ""
		}
		return s.elem, ""
	case s.dict:
		return s.elem, ""
	}
	return nil, ""
}

// resolve returns the shape of e and its path ("target.name",
// "audit[].tool"; "" when it has none), reporting the reads the trace does
// not have on the way.
func (w *invariantWalker) resolve(e ast.Expr, locals map[string]traceLocal) (*traceShape, string) {
	switch e.Kind() {
	case ast.IdentKind:
		if l, ok := locals[e.AsIdent()]; ok {
			return l.shape, l.path
		}
		return traceVariables()[e.AsIdent()], e.AsIdent()
	case ast.SelectKind:
		sel := e.AsSelect()
		s, path := w.resolve(sel.Operand(), locals)
		if path == "" {
			return nil, ""
		}
		off := w.nameAfter(e, sel.FieldName())
		if !sel.IsTestOnly() {
			w.checkOmitted(s, sel.FieldName(), path, e, off)
		}
		return w.member(s, path, sel.FieldName(), off, sel.IsTestOnly())
	case ast.CallKind:
		call := e.AsCall()
		if fn := call.FunctionName(); (fn == operators.Index || fn == operators.OptIndex) && len(call.Args()) == 2 {
			s, path := w.resolve(call.Args()[0], locals)
			key := call.Args()[1]
			w.visit(key, locals)
			if s == nil || path == "" {
				return nil, ""
			}
			if s.list {
				return s.elem, path + "[]"
			}
			if k, ok := stringLiteral(key); ok {
				if fn == operators.Index {
					w.checkOmitted(s, k, path, e, w.nameAfter(key, k))
				}
				return w.member(s, path, k, w.nameAfter(key, k), false)
			}
			return nil, ""
		}
	}
	w.visit(e, locals)
	return nil, ""
}

// checkOmitted warns about a read of the field key of a value of shape s
// at path, read (s.outcome or s['outcome']), that the trace leaves out
// where it is empty, unless a presence test guards the read: where a record
// lacks the field, the read fails, and prove reports the invariant violated
// (evaluation failed).
func (w *invariantWalker) checkOmitted(s *traceShape, key, path string, read ast.Expr, off int) {
	if s == nil || !s.omitted[key] || slices.Contains(w.warned, path+"."+key) {
		return
	}
	written, ok := writtenRead(read)
	if ok && slices.Contains(w.facts, written) {
		return
	}
	w.warned = append(w.warned, path+"."+key)
	fix := "test it first with has()"
	if ok {
		fix = fmt.Sprintf("test it first: has(%s) && ... or !has(%s) || ...", written, written)
	} else {
		written = "it"
	}
	w.c.report(dsl.Warnf(w.x.PosAt(off), ruleUncheckedKey,
		"invariant: the trace leaves %s.%s out where it is empty: where a record lacks it, reading %s fails, and prove reports the invariant violated (evaluation failed), unless the rest of the invariant decides it; %s",
		path, key, written, fix))
}

// writtenRead renders a read as the invariant would write it in has():
// s.outcome for s.outcome and s['outcome'], steps[0].error.kind.
func writtenRead(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent(), true
	case ast.SelectKind:
		sel := e.AsSelect()
		op, ok := writtenRead(sel.Operand())
		return op + "." + sel.FieldName(), ok
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		if call.FunctionName() != operators.Index || len(args) != 2 {
			return "", false
		}
		op, ok := writtenRead(args[0])
		if k, isString := stringLiteral(args[1]); isString && isIdent(k) {
			return op + "." + k, ok
		}
		if args[1].Kind() == ast.LiteralKind {
			if n, isInt := args[1].AsLiteral().(types.Int); isInt {
				return fmt.Sprintf("%s[%d]", op, n), ok
			}
		}
	}
	return "", false
}

// present lists the reads (as writtenRead renders them) that are present
// wherever e evaluates to when: has(s.error.kind) true guarantees
// s.error.kind and s.error, 'outcome' in s true s.outcome, and !, && and
// || combine them.
func present(e ast.Expr, when bool) []string {
	switch e.Kind() {
	case ast.SelectKind:
		if !when || !e.AsSelect().IsTestOnly() {
			return nil
		}
		var out []string
		for cur := e; cur.Kind() == ast.SelectKind; cur = cur.AsSelect().Operand() {
			if p, ok := writtenRead(cur); ok {
				out = append(out, p)
			}
		}
		return out
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		switch fn := call.FunctionName(); fn {
		case operators.LogicalNot:
			return present(args[0], !when)
		case operators.LogicalAnd, operators.LogicalOr:
			// a && b true (a || b false) needs both; else either will do.
			if (fn == operators.LogicalAnd) == when {
				var out []string
				for _, a := range args {
					out = append(out, present(a, when)...)
				}
				return out
			}
			out := present(args[0], when)
			for _, a := range args[1:] {
				next := present(a, when)
				out = slices.DeleteFunc(out, func(p string) bool { return !slices.Contains(next, p) })
			}
			return out
		case operators.In:
			if k, ok := stringLiteral(args[0]); ok && when && isIdent(k) {
				if m, ok := writtenRead(args[1]); ok {
					return []string{m + "." + k}
				}
			}
		}
	}
	return nil
}

// visitWith walks e with the facts that hold where it decides the result.
func (w *invariantWalker) visitWith(e ast.Expr, locals map[string]traceLocal, facts []string) {
	saved := w.facts
	w.facts = facts
	w.visit(e, locals)
	w.facts = saved
}

// stringLiteral returns the value of a string constant.
func stringLiteral(e ast.Expr) (string, bool) {
	if e.Kind() != ast.LiteralKind {
		return "", false
	}
	s, ok := e.AsLiteral().(types.String)
	return string(s), ok
}

// visit walks e, resolving every read and collecting the comparisons of a
// path with string constants.
func (w *invariantWalker) visit(e ast.Expr, locals map[string]traceLocal) {
	switch e.Kind() {
	case ast.IdentKind, ast.SelectKind:
		w.resolve(e, locals)
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		switch fn := call.FunctionName(); {
		case fn == operators.LogicalAnd || fn == operators.LogicalOr:
			// An operand decides the result only where the others are true
			// (&&) or false (||): false and true absorb its failure.
			for i, a := range args {
				facts := slices.Clone(w.facts)
				for j, b := range args {
					if j != i {
						facts = append(facts, present(b, fn == operators.LogicalAnd)...)
					}
				}
				w.visitWith(a, locals, facts)
			}
			return
		case fn == operators.Conditional && len(args) == 3:
			w.visit(args[0], locals)
			w.visitWith(args[1], locals, append(slices.Clone(w.facts), present(args[0], true)...))
			w.visitWith(args[2], locals, append(slices.Clone(w.facts), present(args[0], false)...))
			return
		case fn == operators.Index || fn == operators.OptIndex:
			w.resolve(e, locals)
			return
		case (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2:
			op := "=="
			if fn == operators.NotEquals {
				op = "!="
			}
			for i, side := range args {
				_, path := w.resolve(side, locals)
				if v, ok := stringLiteral(args[1-i]); ok && path != "" {
					w.literals = append(w.literals, predicate.Literal{Path: path, Op: op, Kind: "string", Value: v, Offset: w.byteOffset(args[1-i])})
				}
			}
			return
		case fn == operators.In && len(args) == 2:
			_, path := w.resolve(args[0], locals)
			s, _ := w.resolve(args[1], locals)
			if k, ok := stringLiteral(args[0]); ok && s != nil && s.dict && s.names != "" {
				if names := w.declared(s.names); !slices.Contains(names, k) {
					msg := fmt.Sprintf("invariant: '%s' in executions.%s is always false: its keys are the declared %s (%s)", k, s.names, s.names, nameList(names))
					if best := textdist.Closest(k, names); best != "" {
						msg += fmt.Sprintf("; did you mean '%s'?", best)
					}
					w.c.report(dsl.Errorf(w.x.PosAt(w.byteOffset(args[0])), ruleUnknownValue, "%s", msg))
				}
			}
			if path != "" && args[1].Kind() == ast.ListKind {
				w.lists++
				for _, el := range args[1].AsList().Elements() {
					if v, ok := stringLiteral(el); ok {
						w.literals = append(w.literals, predicate.Literal{Path: path, Op: "in", List: w.lists, Kind: "string", Value: v, Offset: w.byteOffset(el)})
					}
				}
			}
			return
		}
		if call.IsMemberFunction() {
			w.visit(call.Target(), locals)
		}
		for _, a := range args {
			w.visit(a, locals)
		}
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			w.visit(el, locals)
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			w.visit(en.AsMapEntry().Key(), locals)
			w.visit(en.AsMapEntry().Value(), locals)
		}
	case ast.ComprehensionKind:
		comp := e.AsComprehension()
		r, path := w.resolve(comp.IterRange(), locals)
		inner := map[string]traceLocal{}
		for k, v := range locals {
			inner[k] = v
		}
		var el traceLocal
		if r != nil && r.list && path != "" {
			el = traceLocal{shape: r.elem, path: path + "[]"}
		}
		inner[comp.IterVar()] = el
		if v2 := comp.IterVar2(); v2 != "" {
			inner[v2] = traceLocal{}
		}
		w.visit(comp.AccuInit(), locals)
		inner[comp.AccuVar()] = traceLocal{}
		// The facts about the names the comprehension shadows do not hold
		// inside it.
		facts := slices.DeleteFunc(slices.Clone(w.facts), func(p string) bool {
			root := p[:strings.IndexFunc(p+".", func(r rune) bool { return r == '.' || r == '[' })]
			return root == comp.IterVar() || root == comp.IterVar2() || root == comp.AccuVar()
		})
		w.visitWith(comp.LoopCondition(), inner, facts)
		w.visitWith(comp.LoopStep(), inner, facts)
		w.visitWith(comp.Result(), inner, facts)
	}
}
