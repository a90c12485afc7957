package vet

import (
	"slices"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

// A ResultRead is a read of one field of a tool's result in a predicate:
// result.status, has(result.status), result['status'] or result.?status
// (or of one of its arguments, args.path: ArgReads).
type ResultRead struct {
	Field string
	// Offset is the byte offset of the field's name in the source.
	Offset int
	// Tools are the tools a name test around the read narrows the call
	// to (tool.name == 'x' && args.path...); nil when nothing narrows it.
	Tools []string
	// Sized is set when only the value's size is read (size(args.files),
	// args.files.size()), not what it holds.
	Sized bool
}

// ResultReads returns the fields a predicate reads off result, in source
// order; none when it does not parse.
func ResultReads(src string) []ResultRead { return fieldReads(src, "result", true) }

// ArgReads returns the arguments whose value a predicate reads off args
// (args.path, args['path'], args.?path), in source order; none when it
// does not parse. A presence test (has(args.path)) does not read the value.
func ArgReads(src string) []ResultRead { return fieldReads(src, "args", false) }

// ArgAccesses returns the arguments a predicate reads off args or tests
// with has(), in source order; none when it does not parse.
func ArgAccesses(src string) []ResultRead { return fieldReads(src, "args", true) }

// fieldReads returns the fields a predicate reads off the variable root,
// with presence tests when tests is set, each with the tools the name
// tests around it narrow the call to: the other conjuncts of tool.name ==
// 'x' && ... (tool.name in ['x', 'y'] && ...), the other disjuncts of
// tool.name != 'x' || ... (!(tool.name == 'x') || ...), and a
// conditional's condition the branch it selects.
func fieldReads(src, root string, tests bool) []ResultRead {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return nil
	}
	info := tree.SourceInfo()
	// at returns the byte offset of name at or just after e's first token.
	at := func(e ast.Expr, name string, within int) int {
		r, _ := info.GetOffsetRange(e.ID())
		off := runeToByte(src, int(r.Start))
		if i := strings.Index(src[off:], name); i >= 0 && (within < 0 || i <= within) {
			off += i
		}
		return off
	}
	isRoot := func(e ast.Expr) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == root }
	// read returns the read e makes of a field of root.
	read := func(e ast.Expr) (ResultRead, bool) {
		switch e.Kind() {
		case ast.SelectKind:
			if s := e.AsSelect(); isRoot(s.Operand()) && (tests || !s.IsTestOnly()) {
				return ResultRead{Field: s.FieldName(), Offset: at(s.Operand(), s.FieldName(), -1)}, true
			}
		case ast.CallKind:
			c := e.AsCall()
			if fn := c.FunctionName(); fn != operators.Index && fn != operators.OptIndex && fn != operators.OptSelect || len(c.Args()) != 2 || !isRoot(c.Args()[0]) {
				break
			}
			if s, ok := stringLiteral(c.Args()[1]); ok {
				within := 3 // past the quote
				if c.FunctionName() == operators.OptSelect {
					within = -1
				}
				return ResultRead{Field: s, Offset: at(c.Args()[1], s, within)}, true
			}
		}
		return ResultRead{}, false
	}
	var out []ResultRead
	var walk func(e ast.Expr, tools []string, sized bool)
	walkAll := func(tools []string, es ...ast.Expr) {
		for _, e := range es {
			walk(e, tools, false)
		}
	}
	walk = func(e ast.Expr, tools []string, sized bool) {
		if r, ok := read(e); ok {
			r.Tools, r.Sized = tools, sized
			out = append(out, r)
			return
		}
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			a := c.Args()
			switch fn := c.FunctionName(); {
			case fn == operators.LogicalAnd || fn == operators.LogicalOr:
				terms := JunctionTerms(e, fn)
				walkAll(narrowTools(tools, terms, fn == operators.LogicalOr), terms...)
				return
			case fn == operators.Conditional && len(a) == 3:
				walkAll(tools, a[0], a[2])
				walk(a[1], narrowTools(tools, JunctionTerms(a[0], operators.LogicalAnd), false), false)
				return
			case fn == overloads.Size && c.IsMemberFunction() && len(a) == 0:
				walk(c.Target(), tools, true)
				return
			case fn == overloads.Size && !c.IsMemberFunction() && len(a) == 1:
				walk(a[0], tools, true)
				return
			}
			if c.IsMemberFunction() {
				walk(c.Target(), tools, false)
			}
			walkAll(tools, a...)
		case ast.ComprehensionKind:
			comp := e.AsComprehension()
			walkAll(tools, comp.IterRange(), comp.AccuInit(), comp.LoopCondition(), comp.LoopStep(), comp.Result())
		case ast.SelectKind:
			walk(e.AsSelect().Operand(), tools, false)
		case ast.ListKind:
			walkAll(tools, e.AsList().Elements()...)
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				m := en.AsMapEntry()
				walkAll(tools, m.Key(), m.Value())
			}
		}
	}
	walk(tree.Expr(), nil, false)
	slices.SortStableFunc(out, func(a, b ResultRead) int { return a.Offset - b.Offset })
	return out
}

// narrowTools returns tools narrowed by each of terms (of an &&, or with
// or set of an ||) that tests tool.name: to the names it admits, within
// tools when they are narrowed already.
func narrowTools(tools []string, terms []ast.Expr, or bool) []string {
	for _, t := range terms {
		names, ok := toolNameTest(t, or)
		if !ok {
			continue
		}
		if tools == nil {
			tools = names
			continue
		}
		kept := []string{}
		for _, n := range names {
			if slices.Contains(tools, n) {
				kept = append(kept, n)
			}
		}
		tools = kept
	}
	return tools
}

// toolNameTest returns the tools e, a term of an && (or, with or set, of
// an ||), narrows the other terms to: tool.name == 'x' or tool.name in
// ['x', 'y'] (tool.name != 'x' or !(tool.name == 'x') in an ||).
func toolNameTest(e ast.Expr, or bool) ([]string, bool) {
	v, names := NameTest(e, or, func(x ast.Expr) string {
		if x.Kind() == ast.SelectKind && x.AsSelect().FieldName() == "name" && !x.AsSelect().IsTestOnly() &&
			x.AsSelect().Operand().Kind() == ast.IdentKind && x.AsSelect().Operand().AsIdent() == "tool" {
			return "tool"
		}
		return ""
	})
	return names, v != ""
}

// NameTest returns the names e, a term of an && (or, with or set, of an
// ||), narrows the subject of a name to, and that subject: name(x) ==
// 'x' or name(x) in ['x', 'y'] (name(x) != 'x' or !(name(x) == 'x') in an
// ||), name returning the subject x names ("" when x is not a name).
func NameTest(e ast.Expr, or bool, name func(x ast.Expr) string) (string, []string) {
	if e.Kind() != ast.CallKind {
		return "", nil
	}
	c := e.AsCall()
	a := c.Args()
	if c.FunctionName() == operators.LogicalNot && or && len(a) == 1 && a[0].Kind() == ast.CallKind {
		c, a, or = a[0].AsCall(), a[0].AsCall().Args(), false
	}
	if len(a) != 2 {
		return "", nil
	}
	want := operators.Equals
	if or {
		want = operators.NotEquals
	}
	switch fn := c.FunctionName(); {
	case fn == want:
		for i := range 2 {
			if v := name(a[i]); v != "" {
				if s, ok := stringLiteral(a[1-i]); ok {
					return v, []string{s}
				}
			}
		}
	case fn == operators.In && !or && a[1].Kind() == ast.ListKind:
		v := name(a[0])
		var names []string
		for _, el := range a[1].AsList().Elements() {
			s, ok := stringLiteral(el)
			if !ok {
				return "", nil
			}
			names = append(names, s)
		}
		if v != "" && len(names) > 0 {
			return v, names
		}
	}
	return "", nil
}

// JunctionTerms flattens the chain of fn (&& or ||) e into its terms.
func JunctionTerms(e ast.Expr, fn string) []ast.Expr {
	if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == fn {
		var out []ast.Expr
		for _, a := range e.AsCall().Args() {
			out = append(out, JunctionTerms(a, fn)...)
		}
		return out
	}
	return []ast.Expr{e}
}
