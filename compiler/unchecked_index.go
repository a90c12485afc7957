package compiler

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

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
	// list is the list as the predicate writes it (on one line, without
	// parentheses around it): its path (response.tool_calls, args.files),
	// or a filter() or a map() of one.
	list string
	// index is the index, negative for one that fails on every list.
	index int64
	// offset is the byte offset of the index in the source.
	offset int
	// certain is set when nothing else in the predicate can decide it
	// before the read: it is not under a conditional's branch, a macro's
	// step, nor beside a term of an && or || that does not read the list
	// by index too.
	certain bool
	// filtered is set for the elements of a filter() (or of a map() with
	// a condition), which may keep none whatever the list holds; exists
	// is then the exists() that holds where it keeps one.
	filtered bool
	exists   string
	// keys are the size key of the list (sizeKey) and those of the lists
	// it is computed from, a test of any of which in the when may guard it.
	keys []string
}

// uncheckedIndexes returns the reads of a list by a constant index in the
// predicate src that no test of the list's size guards, in source order,
// one per list (certain if one of its reads is): of a list path list says
// is a list, with the least size it says the list has (an index below it
// is read safely), of a map() of one (it has as many elements), and of a
// filter() (or a map() with a condition) of anything, which may keep no
// element. A guard is a term beside the read of an && (or, negated, of an
// ||), or a conditional's condition (negated for the else branch), that
// bounds the size from below: size(l) > 0, l.size() >= 1, 1 <= size(l),
// size(l) != 0, !(size(l) == 0), size(l) == 2, size(l) > 0u, or
// l.exists(...) or l.exists_one(...), which hold only for a list with an
// element; l.exists(c, P) also guards l.filter(c, P) (whatever the
// variable's name), and l.exists(c, P && Q) l.filter(c, P). So is the entry's when, which runs first. A read of a
// list the when tests in another way is not certain. An optional index
// (l[?0]) is not reported; a constant expression (l[1 - 1]) is read as its
// value, and a negative one, which fails on every list, is reported
// whatever guards it.
func uncheckedIndexes(src, when string, list func(path, root string, vars map[string]bool) (int64, bool)) []indexRead {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return nil
	}
	var guard map[string]int64
	// read holds the lists the when reads in a form sizeBounds does not
	// know (l != [], 'a' in l.map(...), l.filter(...) != []): a read of one
	// of them, or of a list computed from one, is reported, but never as
	// certain.
	read := map[string]bool{}
	if w, ok := predicate.ParseSyntax(when); ok && when != "" {
		guard = sizeBounds(w.Expr(), false, nil)
		ast.PreOrderVisit(w.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
			if k, _ := sizeKey(e); k != "" {
				read[k] = true
			}
		}))
	}
	f := folder{src: src, info: tree.SourceInfo()}
	var out []indexRead
	at := map[string]int{}
	// certain holds, for each list, the greatest index (math.MaxInt64 for
	// a negative one) up to which a read of it is certain to fail: every
	// term of the junctions around it reads the list at that index or
	// past it, failing wherever the read does; nil for every list.
	var walk func(e ast.Expr, guard map[string]int64, certain map[string]int64, vars map[string]bool)
	never := map[string]int64{}
	walk = func(e ast.Expr, guard map[string]int64, certain map[string]int64, vars map[string]bool) {
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			a := c.Args()
			switch fn := c.FunctionName(); {
			case fn == operators.Index && len(a) == 2:
				if r, ok := f.indexRead(e, guard, vars, list); ok {
					if n, ok := certain[r.keys[0]]; certain == nil || ok && failsFrom(r.index) <= n {
						r.certain = true
					}
					// Each index is a finding of its own (a test
					// guarding one may not guard another), each negative
					// one too: the list's other reads may be guarded, it
					// is not. A read of the same element again is not.
					k := r.keys[0] + "[" + strconv.FormatInt(r.index, 10) + "]"
					if j, ok := at[k]; ok {
						out[j].certain = out[j].certain || r.certain
					} else {
						at[k] = len(out)
						out = append(out, r)
					}
				}
			case fn == operators.LogicalAnd || fn == operators.LogicalOr:
				terms := vet.JunctionTerms(e, fn)
				b := map[string]int64{}
				for _, t := range terms {
					addSizeBounds(t, fn == operators.LogicalOr, b)
				}
				inner := withBounds(guard, b)
				read := make([]map[string]int64, len(terms))
				for i, t := range terms {
					read[i] = indexedLists(t, inner, vars, list)
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
			maps.DeleteFunc(inner, func(k string, _ int64) bool { return mentions(k, v) })
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
		// A negative index fails whatever the when tested.
		if out[i].index >= 0 && slices.ContainsFunc(out[i].keys, func(k string) bool { return read[k] }) {
			out[i].certain = false
		}
	}
	return out
}

// indexRead returns the read e, an index, is when it reads a list by a
// constant index the list may be too short for (see uncheckedIndexes),
// certain left unset.
func (f folder) indexRead(e ast.Expr, guard map[string]int64, vars map[string]bool, list func(path, root string, vars map[string]bool) (int64, bool)) (indexRead, bool) {
	a := e.AsCall().Args()
	i, ok := constInt(a[1])
	if !ok {
		return indexRead{}, false
	}
	key, filtered := sizeKey(a[0])
	if key == "" {
		return indexRead{}, false
	}
	least := int64(0)
	if !filtered {
		x := a[0]
		for x.Kind() == ast.ComprehensionKind {
			x = x.AsComprehension().IterRange()
		}
		// A variable of a macro named as an alias is not the list.
		if root := rootOf(elementKey(x)); vars[root] && root != rootOf(key) {
			return indexRead{}, false
		}
		if least, ok = list(key, rootOf(key), vars); !ok {
			return indexRead{}, false
		}
	}
	if i >= 0 && leastSizeOf(guard, key, least) > i {
		return indexRead{}, false
	}
	r := indexRead{list: key, index: i, filtered: filtered, keys: []string{key}}
	if a[0].Kind() != ast.ComprehensionKind {
		// Named as the predicate writes it, not by its alias's key.
		r.list = elementKey(a[0])
	}
	for x := a[0]; x.Kind() == ast.ComprehensionKind; {
		x = x.AsComprehension().IterRange()
		if k, _ := sizeKey(x); k != "" && k != r.keys[len(r.keys)-1] {
			r.keys = append(r.keys, k)
		}
	}
	r.offset = f.offset(a[0])
	if span, ok := f.info.GetOffsetRange(e.ID()); ok {
		r.offset = f.byteOffset(int(span.Start))
	}
	if k := strings.IndexByte(f.src[min(r.offset, len(f.src)):], '['); k >= 0 {
		r.offset += k
		if a[0].Kind() == ast.ComprehensionKind {
			// A filter() or a map() is named as the predicate writes it.
			if start := f.macroStart(a[0]); start <= r.offset {
				r.list = unwrapped(f.written(start, r.offset))
			}
			r.exists = f.existsOf(a[0], r.offset)
		}
		r.offset++
	}
	return r, true
}

// siblingsRead returns, for each list, the greatest index (failsFrom) up
// to which a read in a term of a junction is certain to fail: one certain
// already, and read by index at or past it in every term of the junction
// (none of which can then decide it before the read fails), read holding
// the greatest index each term reads each list at that can fail.
func siblingsRead(certain map[string]int64, read []map[string]int64) map[string]int64 {
	out := maps.Clone(read[0])
	for _, r := range read[1:] {
		for k, n := range out {
			if m, ok := r[k]; ok {
				out[k] = min(n, m)
			} else {
				delete(out, k)
			}
		}
	}
	if certain != nil {
		for k, n := range out {
			if m, ok := certain[k]; ok {
				out[k] = min(n, m)
			} else {
				delete(out, k)
			}
		}
	}
	return out
}

// failsFrom returns the index i as the reads that fail wherever it does
// see it: a read at i fails where the list has i elements or fewer, and
// so does one at any greater index; a negative one fails on every list,
// where only another negative one surely does too.
func failsFrom(i int64) int64 {
	if i < 0 {
		return math.MaxInt64
	}
	return i
}

// indexedLists returns the lists e reads by a constant index outside a
// conditional's branches and a macro's step, with the greatest index
// (failsFrom) of a read that can fail: at or past the list's least size
// (list) and its guard, or negative.
func indexedLists(e ast.Expr, guard map[string]int64, vars map[string]bool, list func(path, root string, vars map[string]bool) (int64, bool)) map[string]int64 {
	out := map[string]int64{}
	var walk func(e ast.Expr)
	walk = func(e ast.Expr) {
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			a := c.Args()
			if c.FunctionName() == operators.Index && len(a) == 2 {
				if i, ok := constInt(a[1]); ok {
					if k, filtered := sizeKey(a[0]); k != "" {
						least, known := int64(0), true
						if !filtered {
							least, known = list(k, rootOf(k), vars)
						}
						if known && (i < 0 || i >= leastSizeOf(guard, k, least)) {
							if n, ok := out[k]; !ok || failsFrom(i) > n {
								out[k] = failsFrom(i)
							}
						}
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

// constInt returns the int constant e is: a literal (0, 1u), or a
// negation, sum, difference or product of int constants that does not
// overflow (1 - 1).
func constInt(e ast.Expr) (int64, bool) {
	n, ok := constInteger(e)
	if !ok || !n.IsInt64() {
		return 0, false
	}
	return n.Int64(), true
}

// constInteger returns the value of the constant constInt reads; a uint
// is not an int, and only stands alone.
func constInteger(e ast.Expr) (*big.Int, bool) {
	switch e.Kind() {
	case ast.LiteralKind:
		switch n := e.AsLiteral().(type) {
		case types.Int:
			return big.NewInt(int64(n)), true
		case types.Uint:
			if n <= math.MaxInt64 {
				return new(big.Int).SetUint64(uint64(n)), true
			}
		}
	case ast.CallKind:
		c := e.AsCall()
		a := c.Args()
		switch op, ok := intOps[c.FunctionName()]; {
		case c.FunctionName() == operators.Negate && len(a) == 1:
			if x, ok := intOperand(a[0]); ok {
				return checkedInt(new(big.Int).Neg(x))
			}
		case ok && len(a) == 2:
			x, ok1 := intOperand(a[0])
			y, ok2 := intOperand(a[1])
			if ok1 && ok2 {
				return checkedInt(op(new(big.Int), x, y))
			}
		}
	}
	return nil, false
}

// intOps are the operations constInt folds.
var intOps = map[string]func(z, x, y *big.Int) *big.Int{
	operators.Add: (*big.Int).Add, operators.Subtract: (*big.Int).Sub, operators.Multiply: (*big.Int).Mul,
}

// intOperand returns the value of e, an operand of an int operation: an
// int constant, not a uint one (CEL does not mix them).
func intOperand(e ast.Expr) (*big.Int, bool) {
	if e.Kind() == ast.LiteralKind {
		if _, ok := e.AsLiteral().(types.Int); !ok {
			return nil, false
		}
	}
	return constInteger(e)
}

// checkedInt returns n when an int holds it: the operation giving it does
// not overflow, which is an error in CEL.
func checkedInt(n *big.Int) (*big.Int, bool) {
	return n, n.IsInt64()
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
		case fn == operators.In && len(a) == 2:
			// x in l holds only where l has an element, x in l.map(c, f)
			// only where one has f == x.
			if neg {
				return
			}
			key, _ := sizeKey(a[1])
			set(key, 1)
			if a[1].Kind() != ast.ComprehensionKind {
				return
			}
			comp := a[1].AsComprehension()
			var x strings.Builder
			exprKey(&x, a[0], nil, 0)
			if cond, elem, ok := listStep(comp); ok && cond == nil && !mentions(x.String(), comp.IterVar()) {
				set(filterKey(comp, ast.NewExprFactory().NewCall(0, operators.Equals, elem, a[0])), 1)
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
			if least, ok := leastSize(op, n); ok {
				set(key, least)
			} else if v, ok := n.(types.Int); ok && op == operators.NotEquals && v > 0 {
				// A size it is not raises a least size equal to it.
				set(notSizeKey(key, int64(v)), 1)
			}
		}
	case ast.ComprehensionKind:
		// A comprehension over no element gives its result of its
		// accumulator's first value: exists() (false) true, all() (true)
		// false, or exists_one() (0 == 1) true, needs an element.
		// exists(c, P) and exists_one(c, P) need one P holds for, which
		// filter(c, P) keeps, and so does filter(c, T) for each term T of
		// P's && (P itself being P && Q).
		comp := e.AsComprehension()
		key, _ := sizeKey(comp.IterRange())
		init, r, step := comp.AccuInit(), comp.Result(), comp.LoopStep()
		if init.Kind() != ast.LiteralKind || comp.HasIterVar2() {
			return
		}
		var cond ast.Expr
		switch v := init.AsLiteral().(type) {
		case types.Bool:
			if !identIs(r, comp.AccuVar()) || bool(v) != neg {
				return
			}
			if s, ok := callOf(step, operators.LogicalOr, 2); ok && !neg && identIs(s[0], comp.AccuVar()) {
				cond = s[1]
			}
			// all(c, P) is false where an element has !P.
			if s, ok := callOf(step, operators.LogicalAnd, 2); ok && neg && identIs(s[0], comp.AccuVar()) {
				cond = negation(s[1])
			}
		case types.Int:
			eq, ok := callOf(r, operators.Equals, 2)
			if neg || v != 0 || !ok || !identIs(eq[0], comp.AccuVar()) || !isLiteral(eq[1], types.Int(1)) {
				return
			}
			if s, ok := callOf(step, operators.Conditional, 3); ok && identIs(s[2], comp.AccuVar()) {
				cond = s[0]
			}
		default:
			return
		}
		set(key, 1)
		if cond != nil {
			set(filterKey(comp, cond), 1)
			// The element P && Q holds for, P holds for too.
			for _, t := range vet.JunctionTerms(cond, operators.LogicalAnd) {
				set(filterKey(comp, t), 1)
			}
		}
	}
}

// negation returns an expression that holds where e does not: R for !R,
// x == y for x != y, !e otherwise.
func negation(e ast.Expr) ast.Expr {
	if a, ok := callOf(e, operators.LogicalNot, 1); ok {
		return a[0]
	}
	f := ast.NewExprFactory()
	if a, ok := callOf(e, operators.NotEquals, 2); ok {
		return f.NewCall(0, operators.Equals, a...)
	}
	return f.NewCall(0, operators.LogicalNot, e)
}

// leastSizeOf returns the least size of the list key: the greater of
// least, which its type says, and the bound guard holds, raised past each
// size guard says it does not have (size(l) != 1).
func leastSizeOf(guard map[string]int64, key string, least int64) int64 {
	n := max(least, guard[key])
	for guard[notSizeKey(key, n)] > 0 {
		n++
	}
	return n
}

// notSizeKey returns the key under which a guard holds that the list key
// does not have n elements.
func notSizeKey(key string, n int64) string {
	return key + "\x00!=" + strconv.FormatInt(n, 10)
}

// leastSize returns the least size a comparison of a size with op and the
// constant n (size(l) > 0, size(l) >= 0.5) implies.
func leastSize(op string, n ref.Val) (int64, bool) {
	var lo, hi int64 // the integers just below and above n
	switch v := n.(type) {
	case types.Int:
		lo, hi = int64(v), int64(v)
	case types.Uint:
		lo = int64(min(uint64(v), math.MaxInt64))
		hi = lo
	case types.Double:
		d := float64(v)
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return 0, false
		}
		d = max(min(d, 1<<62), -1<<62)
		lo, hi = int64(math.Floor(d)), int64(math.Ceil(d))
	default:
		return 0, false
	}
	switch op {
	case operators.Greater:
		if lo == math.MaxInt64 {
			return lo, true
		}
		return lo + 1, true
	case operators.GreaterEquals, operators.Equals:
		return hi, true
	case operators.NotEquals:
		if lo == 0 && hi == 0 {
			return 1, true
		}
	}
	return 0, false
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

// sizeCompared returns the size key (sizeKey) of the list whose size s
// reads (size(l), l.size()) and the numeric constant n.
func sizeCompared(s, n ast.Expr) (string, ref.Val, bool) {
	// double(size(l)) and int(size(l)) are the size.
	for s.Kind() == ast.CallKind && !s.AsCall().IsMemberFunction() && len(s.AsCall().Args()) == 1 &&
		slices.Contains([]string{overloads.TypeConvertDouble, overloads.TypeConvertInt, overloads.TypeConvertUint}, s.AsCall().FunctionName()) {
		s = s.AsCall().Args()[0]
	}
	if n.Kind() != ast.LiteralKind || s.Kind() != ast.CallKind {
		return "", nil, false
	}
	c := s.AsCall()
	if c.FunctionName() != overloads.Size {
		return "", nil, false
	}
	var key string
	switch {
	case c.IsMemberFunction() && len(c.Args()) == 0:
		key, _ = sizeKey(c.Target())
	case !c.IsMemberFunction() && len(c.Args()) == 1:
		key, _ = sizeKey(c.Args()[0])
	default:
		return "", nil, false
	}
	return key, n.AsLiteral(), true
}

// sizeKey returns the key under which the size of the list e is known:
// its path (l, args.to), for a map() its range's key (it has as many
// elements), for a filter() or a map() with a condition the filter
// (filterKey), filtered then set. "" for another expression.
func sizeKey(e ast.Expr) (key string, filtered bool) {
	for e.Kind() == ast.ComprehensionKind {
		comp := e.AsComprehension()
		cond, _, ok := listStep(comp)
		if !ok {
			return "", false
		}
		if cond != nil {
			return filterKey(comp, cond), true
		}
		e = comp.IterRange()
	}
	return aliasKey(elementKey(e)), false
}

// macroStart returns the byte offset of the first token of e, a
// comprehension being read from its range's (offset reads a
// comprehension's from its macro's parenthesis).
func (f folder) macroStart(e ast.Expr) int {
	for e.Kind() == ast.ComprehensionKind {
		e = e.AsComprehension().IterRange()
	}
	return f.offset(e)
}

// existsOf returns the exists() that holds where the list e, a filter()
// or a map() with a condition, or a map() of one, keeps an element, as
// the predicate writes its range and condition: l.exists(c, P) for
// l.filter(c, P) and l.map(c, P, f). end is the byte offset just past e.
// "" for another list.
func (f folder) existsOf(e ast.Expr, end int) string {
	for e.Kind() == ast.ComprehensionKind {
		comp := e.AsComprehension()
		cond, kept, ok := listStep(comp)
		span, known := f.info.GetOffsetRange(e.ID())
		if !ok || !known {
			return ""
		}
		// The macro's ( opens its arguments, after its name and a dot.
		open := f.byteOffset(int(span.Start))
		dot := strings.LastIndexByte(f.src[:min(open, len(f.src))], '.')
		start := f.macroStart(comp.IterRange())
		if dot < start || open >= end || end > len(f.src) {
			return ""
		}
		if cond == nil {
			e, end = comp.IterRange(), dot
			continue
		}
		args := f.written(open, end)
		if strings.TrimSpace(f.src[dot+1:open]) == "map" {
			// map(c, P, f): the transform, perhaps in parentheses, is the
			// element appended.
			if t := f.offset(kept); t > open && t < end {
				args = strings.TrimRight(f.written(open, t), " ,(") + ")"
			}
		}
		return unwrapped(f.written(start, dot)) + ".exists" + args
	}
	return ""
}

// written returns the source from start to end on one line, its runs of
// white space outside string literals one space, and its parentheses
// matched: one the text closes but does not open is opened by the
// parenthesis before start, or where none is, ends the text there.
func (f folder) written(start, end int) string {
	var b strings.Builder
	depth := 0
	for i := start; i < end; i++ {
		switch c := f.src[i]; {
		case c == '\'' || c == '"':
			j := literalEnd(f.src[:end], i)
			b.WriteString(f.src[i:j])
			i = j - 1
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if !strings.HasSuffix(b.String(), " ") && b.Len() > 0 {
				b.WriteByte(' ')
			}
		case c == '(':
			depth++
			b.WriteByte(c)
		case c == ')' && depth == 0:
			before := strings.TrimRight(f.src[:start], " \t\n\r")
			if !strings.HasSuffix(before, "(") {
				return strings.TrimSpace(b.String())
			}
			start = len(before) - 1
			return f.written(start, end)
		case c == ')':
			depth--
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}

// literalEnd returns the offset just past the string literal that starts
// at s[i], a quote ('a', "a", ”'a”' or """a"""), or len(s) where s ends
// first.
func literalEnd(s string, i int) int {
	q := s[i : i+1]
	if strings.HasPrefix(s[i:], strings.Repeat(q, 3)) {
		q = strings.Repeat(q, 3)
	}
	j := i + len(q)
	for j < len(s) && !strings.HasPrefix(s[j:], q) {
		if s[j] == '\\' {
			j++
		}
		j++
	}
	return min(j+len(q), len(s))
}

// unwrapped returns s, an expression, without the parentheses around the
// whole of it.
func unwrapped(s string) string {
	for strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
		depth := 0
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '\'', '"':
				i = literalEnd(s, i) - 1
			case '(':
				depth++
			case ')':
				depth--
				if depth == 0 && i < len(s)-1 {
					return s
				}
			}
		}
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

// listStep tells a comprehension that builds a list of its range's
// elements, as filter() and map() do: ok, with elem the element it
// appends for one (the variable for a filter(), the transform for a
// map()) and cond the condition that keeps an element for a filter() (and
// a map() with a condition), nil for a map(), which keeps every one.
func listStep(comp ast.ComprehensionExpr) (cond, elem ast.Expr, ok bool) {
	init, accu := comp.AccuInit(), comp.AccuVar()
	if init.Kind() != ast.ListKind || len(init.AsList().Elements()) != 0 || !identIs(comp.Result(), accu) ||
		!isLiteral(comp.LoopCondition(), types.True) || comp.HasIterVar2() {
		return nil, nil, false
	}
	// appended returns x where e is accu + [x].
	appended := func(e ast.Expr) (ast.Expr, bool) {
		a, ok := callOf(e, operators.Add, 2)
		if !ok || !identIs(a[0], accu) || a[1].Kind() != ast.ListKind || len(a[1].AsList().Elements()) != 1 {
			return nil, false
		}
		return a[1].AsList().Elements()[0], true
	}
	step := comp.LoopStep()
	if a, ok := callOf(step, operators.Conditional, 3); ok && identIs(a[2], accu) {
		if x, ok := appended(a[1]); ok {
			return a[0], x, true
		}
	}
	elem, ok = appended(step)
	return nil, elem, ok
}

// filterKey returns the size key of the elements of comp's range cond
// holds for: l.filter(c, P), l.map(c, P, f), what l.exists(c, P)
// bounds. The variable is renamed (exprKey): l.filter(c, c.x) and
// l.filter(d, d.x) have one key.
func filterKey(comp ast.ComprehensionExpr, cond ast.Expr) string {
	var b strings.Builder
	b.WriteString("filter(")
	exprKey(&b, comp.IterRange(), nil, 0)
	b.WriteString(", ")
	exprKey(&b, cond, map[string]string{comp.IterVar(): "@0"}, 1)
	b.WriteString(")")
	return b.String()
}

// exprKey writes e to b in one form, its names quoted and the variables
// of its comprehensions named by their depth (bound holds those of the
// comprehensions around it, depth their number), so two expressions that
// differ only in those names are written alike. A name that is not bound
// is written as is, so mentions finds it.
func exprKey(b *strings.Builder, e ast.Expr, bound map[string]string, depth int) {
	list := func(open, close string, es ...ast.Expr) {
		b.WriteString(open)
		for i, x := range es {
			if i > 0 {
				b.WriteString(", ")
			}
			exprKey(b, x, bound, depth)
		}
		b.WriteString(close)
	}
	switch e.Kind() {
	case ast.LiteralKind:
		switch v := e.AsLiteral().(type) {
		case types.String:
			b.WriteString(strconv.Quote(string(v)))
		case types.Bytes:
			b.WriteString("b" + strconv.Quote(string(v)))
		case types.Double:
			b.WriteString(strconv.FormatFloat(float64(v), 'g', -1, 64) + "d")
		case types.Uint:
			b.WriteString(strconv.FormatUint(uint64(v), 10) + "u")
		default:
			fmt.Fprint(b, v.Value())
		}
	case ast.IdentKind:
		if n, ok := bound[e.AsIdent()]; ok {
			b.WriteString(n)
		} else if k := aliasKey(e.AsIdent()); k != e.AsIdent() {
			// Written as the select it names is.
			b.WriteString(rootOf(k) + "." + strconv.Quote(k[len(rootOf(k))+1:]))
		} else {
			b.WriteString(e.AsIdent())
		}
	case ast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			b.WriteString("has ")
		}
		exprKey(b, s.Operand(), bound, depth)
		b.WriteString("." + strconv.Quote(s.FieldName()))
	case ast.CallKind:
		c := e.AsCall()
		if fn := c.FunctionName(); (fn == operators.Equals || fn == operators.NotEquals) && len(c.Args()) == 2 {
			// x == y and y == x are written alike.
			var x, y strings.Builder
			exprKey(&x, c.Args()[0], bound, depth)
			exprKey(&y, c.Args()[1], bound, depth)
			sides := []string{x.String(), y.String()}
			slices.Sort(sides)
			b.WriteString(strconv.Quote(fn) + "(" + sides[0] + ", " + sides[1] + ")")
			return
		}
		if c.IsMemberFunction() {
			exprKey(b, c.Target(), bound, depth)
			b.WriteString(".")
		}
		b.WriteString(strconv.Quote(c.FunctionName()))
		list("(", ")", c.Args()...)
	case ast.ListKind:
		l := e.AsList()
		fmt.Fprint(b, l.OptionalIndices())
		list("[", "]", l.Elements()...)
	case ast.MapKind:
		b.WriteString("{")
		for _, en := range e.AsMap().Entries() {
			m := en.AsMapEntry()
			if m.IsOptional() {
				b.WriteString("?")
			}
			list("", ": ", m.Key())
			list("", ", ", m.Value())
		}
		b.WriteString("}")
	case ast.StructKind:
		s := e.AsStruct()
		b.WriteString(strconv.Quote(s.TypeName()) + "{")
		for _, fd := range s.Fields() {
			f := fd.AsStructField()
			if f.IsOptional() {
				b.WriteString("?")
			}
			b.WriteString(strconv.Quote(f.Name()))
			list(": ", ", ", f.Value())
		}
		b.WriteString("}")
	case ast.ComprehensionKind:
		comp := e.AsComprehension()
		list("each(", "; ", comp.IterRange(), comp.AccuInit())
		inner := maps.Clone(bound)
		if inner == nil {
			inner = map[string]string{}
		}
		inner[comp.IterVar()] = "@" + strconv.Itoa(depth)
		if comp.HasIterVar2() {
			inner[comp.IterVar2()] = "@" + strconv.Itoa(depth) + "v"
		}
		inner[comp.AccuVar()] = "@" + strconv.Itoa(depth) + "a"
		for _, x := range []ast.Expr{comp.LoopCondition(), comp.LoopStep(), comp.Result()} {
			exprKey(b, x, inner, depth+1)
			b.WriteString("; ")
		}
		b.WriteString(")")
	default:
		b.WriteString("?")
	}
}

// mentions says whether the size key k reads the variable v: a name in it
// (not a field, which follows a dot; not in a quoted string) is v.
func mentions(k, v string) bool {
	word := func(c byte) bool {
		return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	for i := 0; i < len(k); {
		switch {
		case k[i] == '"':
			q, err := strconv.QuotedPrefix(k[i:])
			if err != nil {
				return true
			}
			i += len(q)
		case word(k[i]):
			j := i
			for j < len(k) && word(k[j]) {
				j++
			}
			if k[i:j] == v && (i == 0 || k[i-1] != '.') {
				return true
			}
			i = j
		default:
			i++
		}
	}
	return false
}

// callOf returns the arguments of e when it is a call of fn with n of them.
func callOf(e ast.Expr, fn string, n int) ([]ast.Expr, bool) {
	if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != fn || len(e.AsCall().Args()) != n {
		return nil, false
	}
	return e.AsCall().Args(), true
}

// identIs says whether e is the identifier name.
func identIs(e ast.Expr, name string) bool {
	return e.Kind() == ast.IdentKind && e.AsIdent() == name
}

// isLiteral says whether e is the literal v.
func isLiteral(e ast.Expr, v ref.Val) bool {
	return e.Kind() == ast.LiteralKind && e.AsLiteral().Equal(v) == types.True && e.AsLiteral().Type() == v.Type()
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
// that no test of the list's size guards (see uncheckedIndexes): in the
// chat stage, of the transcript, a message's or the answer's tool calls,
// the tools offered or the stop sequences; in the tool stage, of an
// argument every declared tool (of tools, when the entry is scoped) whose
// schema lists it types as an array that may hold no more elements than
// the index (its minItems, the least of them, does not reach past it); in
// either, of a filter() of anything. Where the list is too short the read
// fails (index out of bounds), and the predicate as failure says: an
// error where nothing else in the predicate can decide it first, a
// warning where something may, and for the first message of the
// transcript, which is empty only in a request without messages. A size
// test in the entry's when (of phase before: the layers an after-phase
// guard holds may rewrite what its when read) guards the predicate. A
// negative index fails on every list.
func (c *Compilation) checkUncheckedIndexes(x *dsl.Expr, stage predicate.Stage, tools []string, failure string, when *dsl.Expr) {
	var list func(path, root string, vars map[string]bool) (int64, bool)
	switch stage {
	case predicate.Chat:
		list = func(path, root string, vars map[string]bool) (int64, bool) {
			last := path[strings.LastIndexAny(path, ".[")+1:]
			return 0, path != root && slices.Contains(chatLists, last) && (root == "request" || root == "response" || vars[root])
		}
	case predicate.Tool:
		list = func(path, root string, vars map[string]bool) (int64, bool) {
			if root != "args" || vars["args"] || strings.Contains(path, "[") {
				return 0, false
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
		c.report(uncheckedIndexDiagnostic(x, r, failure))
	}
}

// uncheckedIndexDiagnostic returns the finding of the read r in x, which
// fails as failure says.
func uncheckedIndexDiagnostic(x *dsl.Expr, r indexRead, failure string) dsl.Diagnostic {
	transcript := (r.keys[0] == "messages" || r.keys[0] == "request.messages") && r.index == 0
	unless := ""
	if !r.certain || transcript {
		unless = ", unless the rest of the predicate decides it"
	}
	var msg string
	if r.index < 0 {
		msg = fmt.Sprintf("%s[%d] is read: a negative index is out of bounds on every list, so the read always fails, and %s%s; read the last element after a size test, size(%s) > 0 && %s[size(%s) - 1]",
			r.list, r.index, failure, unless, r.list, r.list, r.list)
	} else {
		why := fmt.Sprintf("where %s has %d element%s or fewer", r.list, r.index, plural(r.index))
		test := fmt.Sprintf("size(%s) > %d", r.list, r.index)
		switch {
		case r.filtered && r.index == 0:
			why = "where no element matches"
			if r.exists != "" {
				test = r.exists
			}
		case r.filtered:
			why = fmt.Sprintf("where %d element%s or fewer match", r.index, plural(r.index))
		case r.index == 0 && r.list == "response.tool_calls":
			why = "on an answer without tool calls"
		case r.index == 0 && strings.HasSuffix(r.list, ".tool_calls"):
			why = "on a message without tool calls"
		case r.index == 0:
			why = "where " + r.list + " is empty"
		}
		msg = fmt.Sprintf("%s[%d] is read with no test of the list's size: %s the read fails (index out of bounds), and %s%s; test %s && ... first, or read %s[?%d]",
			r.list, r.index, why, failure, unless, test, r.list, r.index)
	}
	if r.certain && !transcript {
		return dsl.Errorf(x.PosAt(r.offset), ruleUncheckedIndex, "%s", msg)
	}
	return dsl.Warnf(x.PosAt(r.offset), ruleUncheckedIndex, "%s", msg)
}

// plural returns "s" unless n is 1.
func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// arrayArg says whether the argument at path is a list, and the least
// size it has: at least one of the tools (every declared tool when none
// are given) has it in its args schema, and each that has it types it as
// an array, the least size being the least of their minItems (0 for one
// without). The layer tools checks the arguments against the schema
// before any predicate of the stage reads them. prefixItems and a tuple's
// items say nothing of the size: an array shorter than they are is valid.
func (c *Compilation) arrayArg(path []string, tools []string) (int64, bool) {
	if len(tools) == 0 {
		tools = sortedNames(c.Policy.Tools)
	}
	least, has := int64(0), false
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
			Type     any      `json:"type"`
			MinItems *float64 `json:"minItems"`
		}
		if json.Unmarshal(sub, &s) != nil || s.Type != "array" {
			return 0, false
		}
		n := int64(0)
		if s.MinItems != nil && *s.MinItems > 0 {
			n = int64(min(math.Ceil(*s.MinItems), 1<<62))
		}
		if !has || n < least {
			least = n
		}
		has = true
	}
	return least, has
}
