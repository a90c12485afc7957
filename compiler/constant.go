package compiler

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
)

// A deadTerm is a part of a predicate that fixes its value whatever the
// variables it reads hold: a constant absorbing its && or || (x || true),
// or comparisons of one field with constants that cannot all hold
// (x < 0.0 && x > 10.0) or that cover every value (n >= 0 || n < 0, for a
// field n that cannot be NaN).
type deadTerm struct {
	value bool
	// why describes the term ("|| true", "args.amount < 0.0 && args.amount
	// > 10.0 cannot both hold").
	why string
	// offset is the byte offset in the source of the term's first token.
	offset int
}

// fieldFacts is what the types of a predicate's fields tell of them:
// exact holds the fields that cannot be NaN (neverNaN), present the paths
// whose presence test holds for every call (predicate.Checked's
// AlwaysPresent: required args fields).
type fieldFacts struct {
	exact, present map[string]bool
}

// factsOf returns the fieldFacts of a checked predicate.
func factsOf(checked *predicate.Checked) fieldFacts {
	present := map[string]bool{}
	for _, p := range checked.AlwaysPresent() {
		present[p] = true
	}
	return fieldFacts{exact: neverNaN(checked), present: present}
}

// constantValue finds whether src, a predicate that reads variables, has
// one value for every call. It only parses src: comparisons are read as
// real numbers, so it reports a range only when it is empty over them.
// Alternatives that cover every number (x >= 0.0 || x < 0.0) are read so
// only for the fields facts.exact names (ints, sizes): a double (or dyn)
// field may hold NaN, for which every comparison is false. A presence
// test of a path facts.present names always holds.
func constantValue(src string, facts fieldFacts) (deadTerm, bool) {
	if ds := constantTerms(src, facts); len(ds) > 0 {
		return ds[0], true
	}
	return deadTerm{}, false
}

// constantTerms is constantValue with every term of a top-level && or ||
// that decides src alone (junctionDead), the one constantValue gives
// first: each is a mistake of its own.
func constantTerms(src string, facts fieldFacts) []deadTerm {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return nil
	}
	f := folder{src: src, info: tree.SourceInfo(), exact: facts.exact, present: facts.present}
	if e := tree.Expr(); e.Kind() == ast.CallKind {
		switch e.AsCall().FunctionName() {
		case operators.LogicalAnd:
			return f.junctionDead(e, false)
		case operators.LogicalOr:
			return f.junctionDead(e, true)
		}
	}
	if d, ok := f.fold(tree.Expr()); ok {
		return []deadTerm{d}
	}
	return nil
}

// neverNaN lists the fields a checked predicate compares with constants
// whose type cannot hold NaN (int, uint).
func neverNaN(checked *predicate.Checked) map[string]bool {
	out := map[string]bool{}
	for _, l := range checked.Literals {
		if l.FieldKind == "int" || l.FieldKind == "uint" {
			out[l.Path] = true
		}
	}
	return out
}

type folder struct {
	src  string
	info *ast.SourceInfo
	// exact holds the fields that cannot be NaN (size(...) never is).
	exact map[string]bool
	// present holds the paths whose presence test always holds.
	present map[string]bool
}

// offset returns the byte offset of the first token of e.
func (f folder) offset(e ast.Expr) int {
	start := -1
	var walk func(ast.Expr)
	walk = func(e ast.Expr) {
		r, ok := f.info.GetOffsetRange(e.ID())
		if !ok {
			r.Start = -1
		}
		at := int(r.Start)
		if ok && e.Kind() == ast.SelectKind && e.AsSelect().IsTestOnly() {
			// has(x) is placed at its parenthesis: its first token is has.
			b := f.byteOffset(at)
			if before := strings.TrimRight(f.src[:b], " \t\r\n"); strings.HasSuffix(before, "has") {
				at -= utf8.RuneCountInString(f.src[len(before)-3 : b])
			}
		}
		if ok && (start < 0 || at < start) {
			start = at
		}
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			if c.IsMemberFunction() {
				walk(c.Target())
			}
			for _, a := range c.Args() {
				walk(a)
			}
		case ast.SelectKind:
			walk(e.AsSelect().Operand())
		}
	}
	walk(e)
	if start < 0 {
		return 0
	}
	return f.byteOffset(start)
}

// byteOffset converts an offset in code points, as the source info gives
// it, to one in bytes.
func (f folder) byteOffset(points int) int {
	b := 0
	for i := 0; i < points && b < len(f.src); i++ {
		_, n := utf8.DecodeRuneInString(f.src[b:])
		b += n
	}
	return b
}

// fold returns the constant value of e, when its value does not depend on
// the variables.
func (f folder) fold(e ast.Expr) (deadTerm, bool) {
	switch e.Kind() {
	case ast.LiteralKind:
		if b, ok := e.AsLiteral().(types.Bool); ok {
			return deadTerm{value: bool(b), why: strconv.FormatBool(bool(b)), offset: f.offset(e)}, true
		}
	case ast.SelectKind:
		if path, ok := presenceTest(e); ok && f.present[path] {
			return deadTerm{value: true, why: fmt.Sprintf("the tool's args schema requires %s, and the tool chain checks the arguments against it before any layer runs, so has(%s) always holds", path, path), offset: f.offset(e)}, true
		}
	case ast.CallKind:
		c := e.AsCall()
		switch c.FunctionName() {
		case operators.LogicalNot:
			if d, ok := f.fold(c.Args()[0]); ok {
				d.value = !d.value
				if c.Args()[0].Kind() == ast.LiteralKind {
					d.why = "!" + d.why
				}
				return d, true
			}
		case operators.In:
			// x in []: no element to be.
			if args := c.Args(); len(args) == 2 && args[1].Kind() == ast.ListKind && len(args[1].AsList().Elements()) == 0 {
				return deadTerm{value: false, why: "`in []` holds for no value", offset: f.offset(args[1])}, true
			}
		case "matches", "matches_any":
			return f.neverMatches(c)
		case operators.LogicalAnd:
			return f.foldJunction(e, false)
		case operators.LogicalOr:
			return f.foldJunction(e, true)
		}
	}
	return deadTerm{}, false
}

// neverMatches folds a matches() (or matches_any()) test whose constant
// patterns can all match no text (dsl.RegexpNeverMatches): it is false
// whatever it reads.
func (f folder) neverMatches(c ast.CallExpr) (deadTerm, bool) {
	args := c.Args()
	var pats []ast.Expr
	switch {
	case c.FunctionName() == "matches" && c.IsMemberFunction() && len(args) == 1:
		pats = args
	case c.FunctionName() == "matches" && !c.IsMemberFunction() && len(args) == 2:
		pats = args[1:]
	case c.FunctionName() == "matches_any" && len(args) == 2 && args[1].Kind() == ast.ListKind:
		pats = args[1].AsList().Elements()
	}
	if len(pats) == 0 {
		return deadTerm{}, false
	}
	var whys []string
	for _, p := range pats {
		s, ok := stringLiteral(p)
		if !ok {
			return deadTerm{}, false
		}
		why, never := dsl.RegexpNeverMatches(s)
		if !never {
			return deadTerm{}, false
		}
		whys = append(whys, fmt.Sprintf("the pattern '%s' can never match: %s", s, why))
	}
	return deadTerm{value: false, why: strings.Join(whys, "; "), offset: f.offset(pats[0])}, true
}

// neverMatchingElements returns, for a matches_any() call whose list is
// written out, each constant pattern of it that can match no text
// (dsl.RegexpNeverMatches), at its position.
func (f folder) neverMatchingElements(c ast.CallExpr) []deadTerm {
	args := c.Args()
	if c.FunctionName() != "matches_any" || len(args) != 2 || args[1].Kind() != ast.ListKind {
		return nil
	}
	var out []deadTerm
	for _, p := range args[1].AsList().Elements() {
		s, ok := stringLiteral(p)
		if !ok {
			continue
		}
		if why, never := dsl.RegexpNeverMatches(s); never {
			out = append(out, deadTerm{why: fmt.Sprintf("the pattern '%s' can never match: %s", s, why), offset: f.offset(p)})
		}
	}
	return out
}

// checkNeverMatchTerms reports each matches() (matches_any()) test of x
// whose patterns can match no text (neverMatches) where it does not decide
// the predicate (checkDeadTerm's): the term is always false, and dead. The
// severity follows what that makes of the predicate (of its field: deny,
// require, when or admit): an error where it can let calls through (a term of a deny or a
// when, under no negation; of a require or an admit, under one; an
// argument of a function), a warning where it can only block more. A test
// at one of decided, the byte offsets of the terms checkDeadTerm reported
// as deciding the predicate, is that report's and left out.
func (c *Compilation) checkNeverMatchTerms(x *dsl.Expr, field string, decided []int) {
	tree, ok := predicate.ParseSyntax(x.Source)
	if !ok {
		return
	}
	f := folder{src: x.Source, info: tree.SourceInfo()}
	walkPolarity(tree.Expr(), polarityHooks{call: func(call ast.CallExpr, pol int) {
		diag, outcome := deadTermEffect(field, false, pol)
		if d, ok := f.neverMatches(call); ok {
			if slices.Contains(decided, d.offset) {
				return
			}
			c.report(diag(x.PosAt(d.offset), ruleConstant, "a term of the %s is always false, and dead: %s, whatever its variables hold, so %s; fix the pattern", field, d.why, outcome))
			return
		}
		// A matches_any() some of whose patterns can match: each pattern
		// that cannot is a dead term of the || the list stands for.
		for _, d := range f.neverMatchingElements(call) {
			c.report(diag(x.PosAt(d.offset), ruleConstant, "a pattern of the matches_any() list in the %s is dead: %s, so the test matches only what the other patterns match and %s; fix the pattern", field, d.why, outcome))
		}
	}})
}

// checkDeadSubterms reports each chain of && or || in x that does not
// decide the predicate (under an ||, a !, a ternary or a function) whose
// terms, by their relation alone (relations: comparisons of one field
// with numbers that cannot all hold, or whose negations cannot, two
// equalities of one field with different strings, a presence test beside
// its negation), fix its value: the chain is a dead term, stuck at that
// value. The severity follows what the stuck term makes of the predicate,
// as checkNeverMatchTerms's does. The chain the predicate is (under its
// leading !s) is checkDeadTerm's, and so is a term at one of decided, the
// byte offsets of the terms it reported as deciding the predicate.
func (c *Compilation) checkDeadSubterms(x *dsl.Expr, checked *predicate.Checked, field string, decided []int) {
	tree, ok := predicate.ParseSyntax(x.Source)
	if !ok {
		return
	}
	facts := factsOf(checked)
	f := folder{src: x.Source, info: tree.SourceInfo(), exact: facts.exact, present: facts.present}
	top := tree.Expr()
	for top.Kind() == ast.CallKind && top.AsCall().FunctionName() == operators.LogicalNot {
		top = top.AsCall().Args()[0]
	}
	// inner holds the junctions that continue a chain of their operator
	// (a && b && c is (a && b) && c): the chain is read at its head.
	inner := map[int64]bool{}
	reported := map[int]bool{}
	walkPolarity(tree.Expr(), polarityHooks{
		call: func(ast.CallExpr, int) {},
		junction: func(e ast.Expr, pol int) func() {
			op := e.AsCall().FunctionName()
			for _, a := range e.AsCall().Args() {
				if a.Kind() == ast.CallKind && a.AsCall().FunctionName() == op {
					inner[a.ID()] = true
				}
			}
			if inner[e.ID()] || e.ID() == top.ID() {
				return func() {}
			}
			or := op == operators.LogicalOr
			for _, d := range f.relations(chainTerms(e, or), or) {
				if slices.Contains(decided, d.offset) || reported[d.offset] {
					continue
				}
				reported[d.offset] = true
				c.report(deadTermDiag(x, field, d, pol))
			}
			return func() {}
		},
	})
}

// deadTermDiag reports d, a term of x (its field's predicate) of polarity
// pol (walkPolarity's) that is stuck at d.value and decides nothing, with
// deadTermEffect's severity.
func deadTermDiag(x *dsl.Expr, field string, d deadTerm, pol int) dsl.Diagnostic {
	diag, outcome := deadTermEffect(field, d.value, pol)
	return diag(x.PosAt(d.offset), ruleConstant, "a term of the %s is always %t, and dead: %s, whatever its variables hold, so %s; fix the condition", field, d.value, d.why, outcome)
}

// deadTermEffect says what a term of polarity pol (walkPolarity's) stuck
// at value makes of its field's predicate, and how grave that is: an
// error where it can let calls through (it makes a deny or a when hold for
// fewer calls, a require or an admit for more, or its effect is not known:
// an argument of a function), a warning where it can only block more.
func deadTermEffect(field string, value bool, pol int) (diag func(dsl.Pos, string, string, ...any) dsl.Diagnostic, outcome string) {
	// A term stuck at false where it counts positively, or at true under a
	// negation, leaves the predicate holding for fewer calls.
	fewer := (pol >= 0) != value
	outcome = "the predicate holds for more calls than written"
	if fewer {
		outcome = "the predicate holds for fewer calls than written"
	}
	if pol == 0 || fewer == (field == "deny" || field == "when") {
		return dsl.Errorf, outcome
	}
	return dsl.Warnf, outcome
}

// foldJunction folds a chain of && (or, with or set, of ||): a term equal to
// the absorbing value (false for &&, true for ||) decides it, and so do
// comparisons of one field with constants that cannot all hold (&&) or
// whose negations cannot all hold (||).
func (f folder) foldJunction(e ast.Expr, or bool) (deadTerm, bool) {
	if ds := f.junctionDead(e, or); len(ds) > 0 {
		return ds[0], true
	}
	return deadTerm{}, false
}

// junctionDead returns what decides the chain e (foldJunction's): each
// term equal to the absorbing value, each field's first two string
// equalities (inequalities) that cannot both hold (hold for every
// value), each path's presence test beside its negation, and each
// field's comparisons with numbers that cannot all hold,
// in that order; or, where every term is constant and none decides it,
// that. None when nothing decides it.
func (f folder) junctionDead(e ast.Expr, or bool) []deadTerm {
	sep := " && "
	if or {
		sep = " || "
	}
	terms := chainTerms(e, or)
	var out []deadTerm
	known := 0
	for _, t := range terms {
		d, ok := f.fold(t)
		if !ok {
			continue
		}
		if d.value == or {
			if !strings.Contains(d.why, " ") { // a literal, or its negation
				d.why = fmt.Sprintf("the term `%s %s` decides it", strings.TrimSpace(sep), d.why)
			}
			out = append(out, d)
			continue
		}
		known++
	}
	if len(out) == 0 && known == len(terms) {
		return []deadTerm{{value: !or, why: "every term is constant", offset: f.offset(e)}}
	}
	return append(out, f.relations(terms, or)...)
}

// chainTerms returns the terms of the chain of && (or, with or set, of ||)
// e: its operands, and theirs when they are the same operator.
func chainTerms(e ast.Expr, or bool) []ast.Expr {
	op := operators.LogicalAnd
	if or {
		op = operators.LogicalOr
	}
	var terms []ast.Expr
	var flatten func(ast.Expr)
	flatten = func(e ast.Expr) {
		if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == op {
			for _, a := range e.AsCall().Args() {
				flatten(a)
			}
			return
		}
		terms = append(terms, e)
	}
	flatten(e)
	return terms
}

// relations returns what decides a chain of && (||) of terms by the
// relation of its terms, whatever each term's own value: each field's
// first two string equalities (inequalities) that cannot both hold (hold
// for every value), each path's presence test beside its negation, and
// each field's comparisons with numbers that cannot all hold (whose
// negations cannot), in that order.
func (f folder) relations(terms []ast.Expr, or bool) []deadTerm {
	sep := " && "
	if or {
		sep = " || "
	}
	var out []deadTerm
	// Comparisons of one field with numbers: intersect their ranges (for
	// ||, the ranges of their negations).
	byField := map[string][]comparison{}
	var order []string
	for _, t := range terms {
		cmp, ok := f.comparison(t)
		if !ok {
			continue
		}
		if or {
			// NaN satisfies neither x < c nor its negation x >= c.
			if !f.exact[cmp.field] && !strings.HasPrefix(cmp.field, "size(") {
				continue
			}
			if cmp, ok = cmp.negate(); !ok {
				continue
			}
		}
		// One field however the predicate names it (an alias).
		k := fieldKey(cmp.field)
		if _, seen := byField[k]; !seen {
			order = append(order, k)
		}
		byField[k] = append(byField[k], cmp)
	}
	out = append(out, f.stringEqualities(terms, or)...)
	out = append(out, f.presencePairs(terms, or)...)
	for _, field := range order {
		cmps := byField[field]
		if len(cmps) < 2 || !emptyRange(cmps) {
			continue
		}
		parts := make([]string, len(cmps))
		for i, c := range cmps {
			if or {
				c, _ = c.negate()
			}
			parts[i] = c.String()
		}
		why := strings.Join(parts, sep) + " cannot all hold"
		if or {
			why = strings.Join(parts, sep) + " holds for every value"
			if len(cmps) == 2 {
				why = strings.Join(parts, " or ") + ": one of them holds for every value"
			}
		} else if len(cmps) == 2 {
			why = strings.Join(parts, " and ") + " cannot both hold"
		}
		out = append(out, deadTerm{value: or, why: why, offset: cmps[0].offset})
	}
	return out
}

// comparison is field op number.
type comparison struct {
	field, op, num string
	value          float64
	offset         int
}

func (c comparison) String() string { return c.field + " " + c.op + " " + c.num }

// negate returns the comparison that holds where c does not, over numbers
// that are not NaN (a caller checks the field cannot be); == has no single
// negation.
func (c comparison) negate() (comparison, bool) {
	n, ok := map[string]string{"<": ">=", "<=": ">", ">": "<=", ">=": "<"}[c.op]
	c.op = n
	return c, ok
}

// comparison reads e as a comparison of a field path with a number.
func (f folder) comparison(e ast.Expr) (comparison, bool) {
	if e.Kind() != ast.CallKind {
		return comparison{}, false
	}
	c := e.AsCall()
	ops := map[string]string{operators.Less: "<", operators.LessEquals: "<=", operators.Greater: ">", operators.GreaterEquals: ">=", operators.Equals: "=="}
	op, ok := ops[c.FunctionName()]
	if !ok || len(c.Args()) != 2 {
		return comparison{}, false
	}
	l, r := c.Args()[0], c.Args()[1]
	if _, isNum := number(l); isNum {
		// 10 < x is x > 10.
		l, r = r, l
		op = map[string]string{"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "=="}[op]
	}
	field, ok := fieldPath(l)
	if !ok {
		return comparison{}, false
	}
	v, ok := number(r)
	if !ok {
		return comparison{}, false
	}
	lit := strconv.FormatFloat(v, 'g', -1, 64)
	if r.Kind() == ast.LiteralKind {
		if _, isDouble := r.AsLiteral().(types.Double); isDouble && !strings.ContainsAny(lit, ".eE") {
			lit += ".0"
		}
	}
	return comparison{field: field, op: op, num: lit, value: v, offset: f.offset(l)}, true
}

// number returns the value of a numeric literal (or of its negation).
func number(e ast.Expr) (float64, bool) {
	if e.Kind() == ast.CallKind && e.AsCall().FunctionName() == operators.Negate && len(e.AsCall().Args()) == 1 {
		v, ok := number(e.AsCall().Args()[0])
		return -v, ok
	}
	if e.Kind() != ast.LiteralKind {
		return 0, false
	}
	switch v := e.AsLiteral().(type) {
	case types.Int:
		return float64(v), true
	case types.Uint:
		return float64(v), true
	case types.Double:
		if math.IsNaN(float64(v)) {
			return 0, false
		}
		return float64(v), true
	}
	return 0, false
}

// fieldPath renders a chain of field selections from an identifier
// (args.amount); a presence test or anything else is not a field.
func fieldPath(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent(), true
	case ast.SelectKind:
		s := e.AsSelect()
		if s.IsTestOnly() {
			return "", false
		}
		base, ok := fieldPath(s.Operand())
		return base + "." + s.FieldName(), ok
	case ast.CallKind:
		// size(x) and x.size() are numbers too.
		c := e.AsCall()
		var arg ast.Expr
		switch {
		case c.FunctionName() != "size":
			return "", false
		case c.IsMemberFunction() && len(c.Args()) == 0:
			arg = c.Target()
		case !c.IsMemberFunction() && len(c.Args()) == 1:
			arg = c.Args()[0]
		default:
			return "", false
		}
		base, ok := fieldPath(arg)
		return "size(" + base + ")", ok
	}
	return "", false
}

// emptyRange reports whether no number satisfies every comparison.
func emptyRange(cmps []comparison) bool {
	lo, hi := math.Inf(-1), math.Inf(1)
	loOpen, hiOpen := false, false
	for _, c := range cmps {
		switch c.op {
		case ">", ">=":
			if c.value > lo || (c.value == lo && c.op == ">") {
				lo, loOpen = c.value, c.op == ">"
			}
		case "<", "<=":
			if c.value < hi || (c.value == hi && c.op == "<") {
				hi, hiOpen = c.value, c.op == "<"
			}
		case "==":
			if c.value > lo || (c.value == lo && loOpen) {
				lo, loOpen = c.value, false
			} else if c.value < lo {
				return true
			}
			if c.value < hi || (c.value == hi && hiOpen) {
				hi, hiOpen = c.value, false
			} else if c.value > hi {
				return true
			}
		}
	}
	return lo > hi || (lo == hi && (loOpen || hiOpen))
}

// stringEqualities finds, in the terms of a && chain, two equalities of one
// field with different strings (x == 'a' && x == 'b': never both), and in
// the terms of a || chain two inequalities (x != 'a' || x != 'b': always
// one): the first two of each field.
func (f folder) stringEqualities(terms []ast.Expr, or bool) []deadTerm {
	var out []deadTerm
	done := map[string]bool{}
	want, op := operators.Equals, "=="
	if or {
		want, op = operators.NotEquals, "!="
	}
	// first holds, by field (an alias read as its path), the first
	// equality's field as written and its string.
	first := map[string][2]string{}
	for _, t := range terms {
		if t.Kind() != ast.CallKind || t.AsCall().FunctionName() != want || len(t.AsCall().Args()) != 2 {
			continue
		}
		l, r := t.AsCall().Args()[0], t.AsCall().Args()[1]
		if l.Kind() == ast.LiteralKind {
			l, r = r, l
		}
		field, ok := fieldPath(l)
		if k := elementKey(l); !ok && strings.Contains(k, "[") && !strings.Contains(k, "[?") {
			// A field of an element read by a constant index
			// (response.tool_calls[0].name) is one field too.
			field, ok = k, true
		}
		if !ok || r.Kind() != ast.LiteralKind {
			continue
		}
		str, ok := r.AsLiteral().(types.String)
		if !ok {
			continue
		}
		v := string(str)
		prev, seen := first[fieldKey(field)]
		if !seen {
			first[fieldKey(field)] = [2]string{field, v}
			continue
		}
		if prev[1] == v || done[fieldKey(field)] {
			continue
		}
		done[fieldKey(field)] = true
		a := fmt.Sprintf("%s %s '%s'", prev[0], op, prev[1])
		b := fmt.Sprintf("%s %s '%s'", field, op, v)
		why := a + " and " + b + " cannot both hold"
		if or {
			why = a + " or " + b + ": one of them holds for every value"
		}
		out = append(out, deadTerm{value: or, why: why, offset: f.offset(t)})
	}
	return out
}

// presenceTest returns the path e tests the presence of, when e is
// has(path).
func presenceTest(e ast.Expr) (string, bool) {
	if e.Kind() != ast.SelectKind || !e.AsSelect().IsTestOnly() {
		return "", false
	}
	base, ok := fieldPath(e.AsSelect().Operand())
	return base + "." + e.AsSelect().FieldName(), ok
}

// presencePairs finds, in the terms of a && chain (or of a || chain), a
// presence test of a path beside its negation, has(x) && !has(x) (never
// both) or has(x) || !has(x) (always one), at the second of the two; a
// path whose test always holds is left to fold.
func (f folder) presencePairs(terms []ast.Expr, or bool) []deadTerm {
	var out []deadTerm
	// seen holds, by path, whether its first test was negated.
	seen := map[string]bool{}
	done := map[string]bool{}
	for _, t := range terms {
		e, negated := t, false
		if t.Kind() == ast.CallKind && t.AsCall().FunctionName() == operators.LogicalNot && len(t.AsCall().Args()) == 1 {
			e, negated = t.AsCall().Args()[0], true
		}
		path, ok := presenceTest(e)
		if !ok || f.present[path] || done[path] {
			continue
		}
		first, ok := seen[path]
		if !ok {
			seen[path] = negated
			continue
		}
		if first == negated {
			continue
		}
		done[path] = true
		a, b := "has("+path+")", "!has("+path+")"
		if first {
			a, b = b, a
		}
		why := a + " and " + b + " cannot both hold"
		if or {
			why = a + " or " + b + ": one of them holds for every value"
		}
		out = append(out, deadTerm{value: or, why: why, offset: f.offset(t)})
	}
	return out
}
