package compiler

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// ruleUncheckedIndex is the rule for a predicate that reads an element of
// a list by a constant index that no size test guards.
const ruleUncheckedIndex = "cel/unchecked-index"

// An indexRead is a read of a list by a constant index (l[0]) that no
// test of the list's size guards.
type indexRead struct {
	// list is the path of the list (response.tool_calls, args.files).
	list  string
	index int64
	// offset is the byte offset of the index in the source.
	offset int
	// certain is set when nothing else in the predicate can decide it
	// before the read: it is not under a conditional's branch, a macro's
	// step, nor beside a term of an && or || that does not read the list
	// by index too.
	certain bool
}

// uncheckedIndexes returns the reads of a list by a constant index in the
// predicate src that no test of the list's size guards, in source order,
// one per list (certain if one of its reads is), the list path being one
// list says is a list of no fixed size. A guard is a term beside the read
// of an && (or, negated, of an ||), or a conditional's condition (negated
// for the else branch), that bounds the size from below: size(l) > 0,
// l.size() >= 1, size(l) != 0, !(size(l) == 0), size(l) == 2, or
// l.exists(...), which holds only for a list with an element; so is the
// entry's when, which runs first. A read of a list the when tests in
// another way is not certain. An optional index (l[?0]) is not reported.
func uncheckedIndexes(src, when string, list func(path, root string, vars map[string]bool) bool) []indexRead {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return nil
	}
	var guard map[string]int64
	// read holds the lists the when reads in a form sizeBounds does not
	// know (l != [], 'a' in l.map(...), l.exists_one(...)): a read of one
	// of them is reported, but never as certain.
	read := map[string]bool{}
	if w, ok := predicate.ParseSyntax(when); ok && when != "" {
		guard = sizeBounds(w.Expr(), false, nil)
		ast.PreOrderVisit(w.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
			if k := elementKey(e); k != "" {
				read[k] = true
			}
		}))
	}
	f := folder{src: src, info: tree.SourceInfo()}
	var out []indexRead
	at := map[string]int{}
	var walk func(e ast.Expr, guard map[string]int64, certain map[string]bool, vars map[string]bool)
	never := map[string]bool{}
	walk = func(e ast.Expr, guard map[string]int64, certain map[string]bool, vars map[string]bool) {
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			a := c.Args()
			switch fn := c.FunctionName(); {
			case fn == operators.Index && len(a) == 2:
				if i, ok := constIndex(a[1]); ok {
					if key := elementKey(a[0]); key != "" && guard[key] <= i && list(key, rootOf(key), vars) {
						sure := certain == nil || certain[key]
						if j, ok := at[key]; ok {
							out[j].certain = out[j].certain || sure
						} else {
							off := f.offset(a[0])
							if r, ok := f.info.GetOffsetRange(e.ID()); ok {
								off = f.byteOffset(int(r.Start))
							}
							if k := strings.IndexByte(src[min(off, len(src)):], '['); k >= 0 {
								off += k + 1
							}
							at[key] = len(out)
							out = append(out, indexRead{list: key, index: i, offset: off, certain: sure})
						}
					}
				}
			case fn == operators.LogicalAnd || fn == operators.LogicalOr:
				terms := vet.JunctionTerms(e, fn)
				b := map[string]int64{}
				for _, t := range terms {
					addSizeBounds(t, fn == operators.LogicalOr, b)
				}
				inner := withBounds(guard, b)
				read := make([]map[string]bool, len(terms))
				for i, t := range terms {
					read[i] = indexedLists(t)
				}
				sure := siblingsRead(certain, read)
				for _, t := range terms {
					walk(t, inner, sure, vars)
				}
				return
			case fn == operators.Conditional && len(a) == 3:
				walk(a[0], guard, certain, vars)
				walk(a[1], sizeBounds(a[0], false, guard), never, vars)
				walk(a[2], sizeBounds(a[0], true, guard), never, vars)
				return
			}
			if c.IsMemberFunction() {
				walk(c.Target(), guard, certain, vars)
			}
			for _, x := range a {
				walk(x, guard, certain, vars)
			}
		case ast.ComprehensionKind:
			comp := e.AsComprehension()
			for _, x := range []ast.Expr{comp.IterRange(), comp.AccuInit()} {
				walk(x, guard, certain, vars)
			}
			v := comp.IterVar()
			inner := maps.Clone(guard)
			maps.DeleteFunc(inner, func(k string, _ int64) bool {
				return k == v || strings.HasPrefix(k, v+".") || strings.HasPrefix(k, v+"[")
			})
			iv := maps.Clone(vars)
			iv[v] = true
			for _, x := range []ast.Expr{comp.LoopCondition(), comp.LoopStep(), comp.Result()} {
				walk(x, inner, never, iv)
			}
		case ast.SelectKind:
			walk(e.AsSelect().Operand(), guard, certain, vars)
		case ast.ListKind:
			for _, x := range e.AsList().Elements() {
				walk(x, guard, certain, vars)
			}
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				m := en.AsMapEntry()
				walk(m.Key(), guard, certain, vars)
				walk(m.Value(), guard, certain, vars)
			}
		}
	}
	walk(tree.Expr(), guard, nil, map[string]bool{})
	for i := range out {
		if read[out[i].list] {
			out[i].certain = false
		}
	}
	return out
}

// siblingsRead returns the lists a read in a term of a junction is certain
// to fail on: those certain already, and read by index in every term of
// it (none of which can then decide the junction before the read fails),
// read holding the lists each term reads.
func siblingsRead(certain map[string]bool, read []map[string]bool) map[string]bool {
	count := map[string]int{}
	for _, r := range read {
		for k := range r {
			count[k]++
		}
	}
	out := map[string]bool{}
	for k, n := range count {
		if n == len(read) && (certain == nil || certain[k]) {
			out[k] = true
		}
	}
	return out
}

// indexedLists returns the lists e reads by a constant index outside a
// conditional's branches and a macro's step.
func indexedLists(e ast.Expr) map[string]bool {
	out := map[string]bool{}
	var walk func(e ast.Expr)
	walk = func(e ast.Expr) {
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			a := c.Args()
			if c.FunctionName() == operators.Index && len(a) == 2 {
				if _, ok := constIndex(a[1]); ok {
					if k := elementKey(a[0]); k != "" {
						out[k] = true
					}
				}
			}
			if c.FunctionName() == operators.Conditional && len(a) == 3 {
				walk(a[0])
				return
			}
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, x := range a {
				walk(x)
			}
		case ast.ComprehensionKind:
			walk(e.AsComprehension().IterRange())
		case ast.SelectKind:
			walk(e.AsSelect().Operand())
		}
	}
	walk(e)
	return out
}

// constIndex returns the constant index e is (0, 1u), not negative.
func constIndex(e ast.Expr) (int64, bool) {
	if e.Kind() != ast.LiteralKind {
		return 0, false
	}
	switch n := e.AsLiteral().(type) {
	case types.Int:
		return int64(n), n >= 0
	case types.Uint:
		return int64(n), n <= 1<<62
	}
	return 0, false
}

// sizeBounds returns guard with the least size of each list e (negated
// with neg set) holding implies added: guard itself when e bounds none, a
// copy otherwise.
func sizeBounds(e ast.Expr, neg bool, guard map[string]int64) map[string]int64 {
	b := map[string]int64{}
	addSizeBounds(e, neg, b)
	return withBounds(guard, b)
}

// withBounds returns guard with the bounds b added: guard itself when b is
// empty, a copy otherwise.
func withBounds(guard, b map[string]int64) map[string]int64 {
	if len(b) == 0 {
		return guard
	}
	out := maps.Clone(guard)
	if out == nil {
		out = map[string]int64{}
	}
	for k, n := range b {
		out[k] = max(out[k], n)
	}
	return out
}

// addSizeBounds adds to b the least size of each list e (negated with neg
// set) holding implies.
func addSizeBounds(e ast.Expr, neg bool, b map[string]int64) {
	set := func(key string, n int64) {
		if key != "" {
			b[key] = max(b[key], n)
		}
	}
	switch e.Kind() {
	case ast.CallKind:
		c := e.AsCall()
		a := c.Args()
		switch fn := c.FunctionName(); {
		case fn == operators.LogicalNot && len(a) == 1:
			addSizeBounds(a[0], !neg, b)
		case fn == operators.LogicalAnd && !neg, fn == operators.LogicalOr && neg:
			for _, t := range a {
				addSizeBounds(t, neg, b)
			}
		case len(a) == 2:
			op := fn
			key, n, ok := sizeCompared(a[0], a[1])
			if !ok {
				if key, n, ok = sizeCompared(a[1], a[0]); !ok {
					return
				}
				op = flipped[op]
			}
			if neg {
				op = negated[op]
			}
			switch {
			case op == operators.Greater:
				set(key, n+1)
			case op == operators.GreaterEquals || op == operators.Equals:
				set(key, n)
			case op == operators.NotEquals && n == 0:
				set(key, 1)
			}
		}
	case ast.ComprehensionKind:
		// exists() starts false and all() true, each its accumulator's
		// value: exists() true, or all() false, needs an element.
		comp := e.AsComprehension()
		init := comp.AccuInit()
		if r := comp.Result(); r.Kind() != ast.IdentKind || r.AsIdent() != comp.AccuVar() || init.Kind() != ast.LiteralKind {
			return
		}
		if v, ok := init.AsLiteral().(types.Bool); ok && bool(v) == neg {
			set(elementKey(comp.IterRange()), 1)
		}
	}
}

// flipped and negated map a comparison to the one with its sides swapped,
// and to its negation.
var (
	flipped = map[string]string{operators.Less: operators.Greater, operators.LessEquals: operators.GreaterEquals,
		operators.Greater: operators.Less, operators.GreaterEquals: operators.LessEquals,
		operators.Equals: operators.Equals, operators.NotEquals: operators.NotEquals}
	negated = map[string]string{operators.Less: operators.GreaterEquals, operators.LessEquals: operators.Greater,
		operators.Greater: operators.LessEquals, operators.GreaterEquals: operators.Less,
		operators.Equals: operators.NotEquals, operators.NotEquals: operators.Equals}
)

// sizeCompared returns the list whose size s reads (size(l), l.size())
// and the int constant n.
func sizeCompared(s, n ast.Expr) (string, int64, bool) {
	if n.Kind() != ast.LiteralKind || s.Kind() != ast.CallKind {
		return "", 0, false
	}
	v, ok := n.AsLiteral().(types.Int)
	c := s.AsCall()
	if !ok || c.FunctionName() != overloads.Size {
		return "", 0, false
	}
	switch {
	case c.IsMemberFunction() && len(c.Args()) == 0:
		return elementKey(c.Target()), int64(v), true
	case !c.IsMemberFunction() && len(c.Args()) == 1:
		return elementKey(c.Args()[0]), int64(v), true
	}
	return "", 0, false
}

// rootOf returns the variable a path starts with.
func rootOf(path string) string {
	if i := strings.IndexAny(path, ".["); i >= 0 {
		return path[:i]
	}
	return path
}

// chatLists are the list fields of the chat stage's variables.
var chatLists = []string{"messages", "tool_calls", "tools", "stop"}

// checkUncheckedIndexes reports each read of a list by a constant index
// that no size test guards (see uncheckedIndexes): in the chat stage, of
// the transcript, a message's or the answer's tool calls, the tools
// offered or the stop sequences; in the tool stage, of an argument every
// declared tool (of tools, when the entry is scoped) whose schema lists it
// types as an array that may hold no more elements than the index. Where
// the list is too short the read fails (index out of bounds), and the
// predicate as failure says: an error where nothing else in the predicate
// can decide it first, a warning where something may, and for the first
// message of the transcript, which is empty only in a request without
// messages. A size test in the entry's when (of phase before: the layers
// an after-phase guard holds may rewrite what its when read) guards the
// predicate.
func (c *Compilation) checkUncheckedIndexes(x *dsl.Expr, stage predicate.Stage, tools []string, failure string, when *dsl.Expr) {
	var list func(path, root string, vars map[string]bool) bool
	switch stage {
	case predicate.Chat:
		list = func(path, root string, vars map[string]bool) bool {
			if path == "messages" {
				return !vars["messages"]
			}
			last := path[strings.LastIndexAny(path, ".[")+1:]
			return path != root && slices.Contains(chatLists, last) && (root == "request" || root == "response" || vars[root])
		}
	case predicate.Tool:
		list = func(path, root string, vars map[string]bool) bool {
			if root != "args" || vars["args"] || strings.Contains(path, "[") {
				return false
			}
			return c.arrayArg(strings.Split(path, ".")[1:], tools)
		}
	default:
		return
	}
	w := ""
	if when != nil && when != x {
		w = when.Source
	}
	for _, r := range uncheckedIndexes(x.Source, w, list) {
		transcript := (r.list == "messages" || r.list == "request.messages") && r.index == 0
		why := fmt.Sprintf("where %s has %d element%s or fewer", r.list, r.index, plural(r.index))
		switch {
		case r.index == 0 && r.list == "response.tool_calls":
			why = "on an answer without tool calls"
		case r.index == 0 && strings.HasSuffix(r.list, ".tool_calls"):
			why = "on a message without tool calls"
		case r.index == 0:
			why = "where " + r.list + " is empty"
		}
		msg := fmt.Sprintf("%s[%d] is read with no test of the list's size: %s the read fails (index out of bounds), and %s",
			r.list, r.index, why, failure)
		if !r.certain || transcript {
			msg += ", unless the rest of the predicate decides it"
		}
		msg += fmt.Sprintf("; test size(%s) > %d && ... first, or read %s[?%d]", r.list, r.index, r.list, r.index)
		if r.certain && !transcript {
			c.report(dsl.Errorf(x.PosAt(r.offset), ruleUncheckedIndex, "%s", msg))
		} else {
			c.report(dsl.Warnf(x.PosAt(r.offset), ruleUncheckedIndex, "%s", msg))
		}
	}
}

// plural returns "s" unless n is 1.
func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// arrayArg says whether the argument at path is a list of no fixed size:
// at least one of the tools (every declared tool when none are given) has
// it in its args schema, and each that has it types it as an array with
// no minItems.
func (c *Compilation) arrayArg(path []string, tools []string) bool {
	if len(tools) == 0 {
		tools = sortedNames(c.Policy.Tools)
	}
	has := false
	for _, name := range tools {
		t := c.Policy.Tools[name]
		if t == nil || len(t.Args) == 0 {
			continue
		}
		sub, ok := subSchema(t.Args, path)
		if !ok {
			continue
		}
		var s struct {
			Type     any  `json:"type"`
			MinItems *int `json:"minItems"`
		}
		if json.Unmarshal(sub, &s) != nil || s.Type != "array" || s.MinItems != nil && *s.MinItems > 0 {
			return false
		}
		has = true
	}
	return has
}
