package compiler

import (
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// ruleLooseMatch reports a test that lets a call through on a regular
// expression not anchored at its end (nor at its start with a rest it
// says any of: .*, or a / that ends a prefix), or on a host suffix that is
// not at a label boundary: it holds for values that merely contain what it
// reads.
const ruleLooseMatch = "cel/loose-match"

// A looseTest is a matches(), matches_any(), host endsWith() or URL
// startsWith() test of a predicate whose constant holds for more values
// than it reads as.
type looseTest struct {
	// offset is the byte offset of the constant in the source.
	offset int
	// pol is the test's polarity (comparisonPolarity's).
	pol int
	// why names the test and says what it lets through.
	why string
}

// checkLooseMatches reports each loose test of the predicate x, of the
// field given ("deny", "require", "when", "admit"), that sits where it
// lets calls (or items) through: in a require or an admit, or under a
// negation in a deny or a when, which then skips its layer.
//
// A pattern tested on a field whose values are known (tool.name among the
// declared tools, a declared model's name, an argument its schema's enum
// holds to) selects among them, whatever it is anchored to: no caller
// writes another, and it is not reported.
func (c *Compilation) checkLooseMatches(x *dsl.Expr, field string, stage predicate.Stage, tools []string) {
	// lets says where a test lets calls through, blocks where it holds
	// them back (or applies a when's layer).
	var lets, blocks func(pol int) (string, bool)
	switch field {
	case "require":
		lets = func(pol int) (string, bool) { return "the require lets the call through", pol > 0 }
		blocks = func(pol int) (string, bool) { return "the require blocks the call", pol < 0 }
	case "admit":
		lets = func(pol int) (string, bool) { return "admit keeps the item", pol > 0 }
		blocks = func(pol int) (string, bool) { return "admit drops the item", pol < 0 }
	case "deny":
		lets = func(pol int) (string, bool) { return "the deny lets the call through", pol < 0 }
		blocks = func(pol int) (string, bool) { return "the deny blocks the call", pol > 0 }
	case "when":
		if c.skipsHarmlessly(x) {
			return
		}
		lets = func(pol int) (string, bool) { return "the when skips the layer", pol < 0 }
		blocks = func(pol int) (string, bool) { return "the when applies the layer", pol > 0 }
	default:
		return
	}
	side := 1
	if field == "deny" || field == "when" {
		side = -1
	}
	closed := func(path string) bool {
		_, ok := c.knownValues(path, stage, tools)
		return ok
	}
	// arg: the arguments a path_arg or url_arg of a tool in scope names.
	var named map[string]prefixArg
	if stage == predicate.Tool {
		named = c.prefixArgs(tools)
	}
	arg := func(key string) (prefixArg, bool) {
		a, ok := named[key]
		return a, ok
	}
	for _, t := range looseTests(x.Source, side, closed, arg) {
		if outcome, ok := lets(t.pol); ok {
			c.report(dsl.Warnf(x.PosAt(t.offset), ruleLooseMatch, "%s on %s", outcome, t.why))
		}
	}
	c.checkPathPrefixes(x, named, lets, blocks)
}

// harmlessSkips are the builtins whose layer, skipped, lets nothing
// through that it would hold back: it retries, falls over, races, caches
// or compacts.
var harmlessSkips = []string{"retry", "fallback", "hedge", "memoize", "semantic_memoize", "compaction", "checkpoint"}

// skipsHarmlessly reports whether x is the when of a layer of one of the
// harmlessSkips builtins.
func (c *Compilation) skipsHarmlessly(x *dsl.Expr) bool {
	for _, stage := range dsl.Stages {
		for _, e := range c.Policy.Chains[stage] {
			if e.When == x {
				return slices.Contains(harmlessSkips, e.Use)
			}
		}
	}
	return false
}

// looseTests returns the loose tests of the predicate src with their
// polarity: matches() and matches_any() with a constant pattern that is
// not anchored (see anchored), url_host() (or lower() of it) tested with
// endsWith() against a constant name that does not begin with a dot or
// with contains(), and startsWith() with a URL that ends at its host
// ('https://api.example.com'). A pattern on a path closed reports true
// for (one whose values are known) is not returned.
//
// side is the polarity that lets calls through (1 in a require, -1 in a
// deny): a loose test is not returned where a conjunct on that side pins
// the host of the URL it reads. arg returns the argument a path_arg or a
// url_arg names by its key (argKeys): a prefix test of path_clean() of a
// path is not returned for the path beside its prefix where a file_check
// layer refuses that path, and a URL a url_arg names is one, whatever it
// reads.
func looseTests(src string, side int, closed func(path string) bool, arg func(key string) (prefixArg, bool)) []looseTest {
	tree, ok := predicate.ParseSyntax(src)
	if !ok {
		return nil
	}
	f := folder{src: src, info: tree.SourceInfo()}
	var out []looseTest
	// bound holds the constants a comprehension's variable ranges over.
	bound := constBinds{}
	consts := bound.strings
	// pinned holds the paths (args.url) whose host a conjunct around the
	// test compares with constants: url_host(args.url) == 'api.example.com'
	// beside args.url.startsWith('https://api.example.com') holds the URL
	// to that host whatever the prefix lets through.
	pinned := map[string]int{}
	// constant reports whether e is a constant string or a list of them.
	constant := func(e ast.Expr) bool {
		if e.Kind() != ast.ListKind {
			return len(consts(e)) > 0
		}
		return !slices.ContainsFunc(e.AsList().Elements(), func(el ast.Expr) bool { return len(consts(el)) == 0 })
	}
	// pins returns the paths whose host the conjunction e, of polarity
	// pol, compares with constants in a conjunct that holds where it lets
	// calls through.
	pins := func(e ast.Expr, pol int) []string {
		var out []string
		lettingConjuncts(e, pol, side, func(c ast.CallExpr, lets bool) {
			a := c.Args()
			if fn := c.FunctionName(); len(a) == 2 && (lets && (fn == operators.Equals || fn == operators.In) || !lets && fn == operators.NotEquals) {
				for i, operand := range a {
					if t, ok := hostOf(operand); ok && pathKey(t) != "" && constant(a[1-i]) {
						out = append(out, pathKey(t))
					}
				}
			}
		}, nil)
		return out
	}
	isPinned := func(t ast.Expr) bool { k := pathKey(t); return k != "" && pinned[k] > 0 }
	var scope locals
	keys := newArgKeys(&scope)
	// isURLArg reports whether e is the URL a url_arg names.
	isURLArg := func(e ast.Expr) bool {
		a, ok := arg(keys.of(e))
		return ok && a.url
	}
	// beside reports whether a prefix test of the path target, which
	// holds for sibling, lets it through: a file_check layer refuses it
	// where target is path_clean() of the argument the layer resolves.
	beside := func(target ast.Expr, sibling string) bool {
		cleaned, ok := cleanedArg(target)
		if !ok || sibling == "" {
			return sibling != ""
		}
		a, ok := arg(keys.of(cleaned))
		return !ok || a.url || a.admits(sibling)
	}
	pattern := func(target, e ast.Expr, pol int) {
		if k := pathKey(target); k != "" && closed(k) {
			return
		}
		for _, k := range consts(e) {
			p := k.s
			ok, startOnly := anchored(p)
			if _, never := dsl.RegexpNeverMatches(p); never {
				// A pattern that never matches is cel/constant's.
				continue
			}
			if ok {
				if pathValued(target) {
					if prefix, sibling := patternSibling(p); beside(target, sibling) {
						what := fmt.Sprintf("the pattern '%s'", p)
						out = append(out, looseTest{offset: f.offset(k.at), pol: pol, why: what + ", which " + siblingAdvice(prefix, sibling, what)})
						continue
					}
				}
				if host, loose := looseHostSuffix(p); loose && isHostOf(target, isPinned) {
					out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
						why: fmt.Sprintf("the pattern '%s', which also matches a host such as %s, whose name only ends like it; begin the name at a label boundary ('(^|\\.)...$') or anchor the pattern at both ends", p, host)})
				} else if u, loose := looseURLHost(p); loose && !isPinned(target) {
					out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
						why: fmt.Sprintf("the pattern '%s', which also matches a URL such as %s, whose host's name only ends like the one it names; begin the name at a label boundary ('[^/]*' before it becomes '([^/.]+\\.)*') or write the host in full", p, u)})
				} else if u, loose := hostGoesOn(p); loose && !isPinned(target) {
					out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
						why: fmt.Sprintf("the pattern '%s', which also matches a URL such as %s, to another host, as it lets the host's name go on; end the host with a / or (/|$), or test url_host()", p, u)})
				} else if host, loose := hostHolds(p); loose && isHostOf(target, isPinned) {
					out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
						why: fmt.Sprintf("the pattern '%s', which is not anchored at its end: it also matches a host such as %s, whose name merely holds a match; end it with $", p, host)})
				} else if u, loose := urlHolds(p); loose && isURLArg(target) && !isPinned(target) {
					out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
						why: fmt.Sprintf("the pattern '%s', which begins with .* and so matches a URL to another host that merely holds a match, such as %s; anchor it at its start ('^https://...')", p, u)})
				}
				continue
			}
			why := fmt.Sprintf("the pattern '%s', which is not anchored at its start or end (in every branch of an alternation): it matches a value that merely holds a match anywhere; write '^...$' to match the whole value, or begin it with .* where a match anywhere is meant", p)
			if startOnly {
				why = fmt.Sprintf("the pattern '%s', which is anchored at its start but not at its end (in every branch of an alternation): it matches a value that merely begins with a match, whatever follows (a path that goes on with /../); end it with $ to match the whole value, or with .* where any rest is meant", p)
			}
			if lineAnchored(p) {
				why = fmt.Sprintf("the pattern '%s', whose m flag makes ^ and $ match at each line break: it matches a value one line of which matches; drop the m flag", p)
			}
			out = append(out, looseTest{offset: f.offset(k.at), pol: pol, why: why})
		}
	}
	// pinning is a junction hook: it counts the paths whose host the
	// junction pins until what it returns is called.
	pinning := func(e ast.Expr, pol int) func() {
		ks := pins(e, pol)
		for _, k := range ks {
			pinned[k]++
		}
		return func() {
			for _, k := range ks {
				pinned[k]--
			}
		}
	}
	walkPolarity(tree.Expr(), polarityHooks{
		junction:    pinning,
		conditional: pinning,
		scope:       scope.enter,
		body: func(comp ast.ComprehensionExpr) func() {
			unbound, unbind := bound.bind(comp), keys.bind(comp)
			return func() { unbind(); unbound() }
		},
		call: func(c ast.CallExpr, pol int) {
			args := c.Args()
			switch fn := c.FunctionName(); {
			case fn == "matches" && c.IsMemberFunction() && len(args) == 1:
				pattern(c.Target(), args[0], pol)
			case fn == "matches" && !c.IsMemberFunction() && len(args) == 2:
				pattern(args[0], args[1], pol)
			case fn == "matches_any" && len(args) == 2 && args[1].Kind() == ast.ListKind:
				for _, el := range args[1].AsList().Elements() {
					pattern(args[0], el, pol)
				}
			case fn == "startsWith" && c.IsMemberFunction() && len(args) == 1 && pathValued(c.Target()):
				for _, k := range consts(args[0]) {
					if sibling, loose := siblingProbe(k.s, nil); loose && beside(c.Target(), sibling) && !strings.Contains(k.s, "://") {
						what := fmt.Sprintf("startsWith('%s')", k.s)
						out = append(out, looseTest{offset: f.offset(k.at), pol: pol, why: what + ", which " + siblingAdvice(k.s, sibling, what)})
					}
				}
			case fn == "endsWith" && c.IsMemberFunction() && len(args) == 1 && isHostOf(c.Target(), isPinned):
				for _, k := range consts(args[0]) {
					if s := k.s; s != "" && isLabelByte(s[0]) {
						out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
							why: fmt.Sprintf("endsWith('%s'), which also holds for a host such as evil%s, whose name only ends like it; write == '%s' || endsWith('.%s')", s, s, s, s)})
					}
				}
			case fn == "contains" && c.IsMemberFunction() && len(args) == 1 && isURLArg(c.Target()) && !isPinned(c.Target()):
				for _, k := range consts(args[0]) {
					if s := k.s; namesHost(s) {
						out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
							why: fmt.Sprintf("contains('%s'), which also holds for a URL to another host that merely holds it, such as https://evil.example/%s; test url_host()", s, strings.TrimPrefix(s, "/"))})
					}
				}
			case fn == "contains" && c.IsMemberFunction() && len(args) == 1 && isHostOf(c.Target(), isPinned):
				for _, k := range consts(args[0]) {
					if s := k.s; s != "" {
						out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
							why: fmt.Sprintf("contains('%s'), which also holds for a host such as %s.evil.example, whose name only holds it; write == '%s' || endsWith('.%s')", s, strings.Trim(s, "."), strings.Trim(s, "."), strings.Trim(s, "."))})
					}
				}
			case fn == "startsWith" && c.IsMemberFunction() && len(args) == 1 && !isPinned(c.Target()):
				for _, k := range consts(args[0]) {
					if s := k.s; bareOrigin().MatchString(s) {
						out = append(out, looseTest{offset: f.offset(k.at), pol: pol,
							why: fmt.Sprintf("startsWith('%s'), which also holds for %s.evil.example/ and %s@evil.example/, URLs to other hosts; write startsWith('%s/'), or test url_host()", s, s, s, s)})
					}
				}
			}
		},
	})
	slices.SortFunc(out, func(a, b looseTest) int { return a.offset - b.offset })
	return out
}

// lettingConjuncts calls visit with each call (but !, && and ||) that is
// a conjunct of e, of polarity pol, where the predicate lets calls
// through (side is the polarity that does, as for looseTests), with
// whether it holds there (lets) or fails there: e's conjuncts where e
// must hold to let calls through, its disjuncts where it must fail, and
// so on below a negation, and the condition of a conditional one branch
// of which is the constant that does not let calls through, with the
// other branch. A test in another branch (a disjunct beside the one that
// lets the call through) is not one. Where body is set, so
// is a conjunct of the body of an all() that holds there, or an exists()
// that fails there, which holds (or fails) for each element: body is
// called on entering it, and what it returns on leaving.
func lettingConjuncts(e ast.Expr, pol, side int, visit func(c ast.CallExpr, lets bool), body func(ast.ComprehensionExpr) func()) {
	var add func(e ast.Expr, lets bool)
	add = func(e ast.Expr, lets bool) {
		if e.Kind() == ast.ComprehensionKind {
			comp := e.AsComprehension()
			if step, all, ok := quantifierStep(comp); ok && body != nil && all == lets {
				defer body(comp)()
				add(step, lets)
			}
			return
		}
		if e.Kind() != ast.CallKind {
			return
		}
		c := e.AsCall()
		switch fn := c.FunctionName(); fn {
		case operators.LogicalNot:
			add(c.Args()[0], !lets)
		case operators.LogicalAnd, operators.LogicalOr:
			if (fn == operators.LogicalAnd) == lets {
				add(c.Args()[0], lets)
				add(c.Args()[1], lets)
			}
		case operators.Conditional:
			// c ? a : b, where one branch is the constant that does not
			// let the call through: c holds beside a, or fails beside b.
			a := c.Args()
			for i, holds := range []bool{true, false} {
				if isLiteral(a[2-i], types.Bool(!lets)) {
					add(a[0], holds)
					add(a[1+i], lets)
					break
				}
			}
		default:
			visit(c, lets)
		}
	}
	if pol != 0 {
		add(e, pol*side > 0)
	}
}

// quantifierStep returns the predicate of comp, an all() (all set) or an
// exists() of one variable: P in l.all(x, P).
func quantifierStep(comp ast.ComprehensionExpr) (step ast.Expr, all, ok bool) {
	init := comp.AccuInit()
	if comp.HasIterVar2() || init.Kind() != ast.LiteralKind || !identIs(comp.Result(), comp.AccuVar()) {
		return nil, false, false
	}
	v, isBool := init.AsLiteral().(types.Bool)
	if !isBool {
		return nil, false, false
	}
	op := map[bool]string{true: operators.LogicalAnd, false: operators.LogicalOr}[bool(v)]
	if s, ok := callOf(comp.LoopStep(), op, 2); ok && identIs(s[0], comp.AccuVar()) {
		return s[1], bool(v), true
	}
	return nil, false, false
}

// polarityHooks are what walkPolarity calls as it walks a predicate.
type polarityHooks struct {
	// call is called for each call but !, &&, || and ?:, with its
	// polarity (comparisonPolarity's), before its operands are walked.
	call func(c ast.CallExpr, pol int)
	// junction, when set, is called at each && and ||, with its polarity,
	// before its operands are walked; what it returns is called after.
	junction func(e ast.Expr, pol int) (after func())
	// conditional, when set, is called at each ?: as junction is.
	conditional func(e ast.Expr, pol int) (after func())
	// body, when set, is called before a comprehension's loop step is
	// walked; what it returns is called after.
	body func(comp ast.ComprehensionExpr) (after func())
	// scope, when set, is called with the comprehension variables (the
	// accumulator's, the iteration's; cel.bind's name is an accumulator)
	// before the parts they are in scope in are walked; what it returns is
	// called after.
	scope func(vars []string) (after func())
}

// locals are the comprehension variables in scope where walkPolarity
// is, kept by its scope hook (locals.enter).
type locals []string

// enter is a scope hook: it adds vars until what it returns is called.
func (l *locals) enter(vars []string) func() {
	n := len(*l)
	*l = append(*l, vars...)
	return func() { *l = (*l)[:n] }
}

// shadows reports whether the root of path (as fieldPath writes it:
// "tool.name", "size(args.items)") is a comprehension variable in scope,
// which names an element or a bound value, not the variable of that name:
// tool.name in args.targets.exists(tool, tool.name == 'x') is a target's.
func (l locals) shadows(path string) bool {
	root := path
	for strings.HasPrefix(root, "size(") {
		root = root[len("size("):]
	}
	if i := strings.IndexAny(root, ".[)"); i >= 0 {
		root = root[:i]
	}
	return slices.Contains(l, root)
}

// walkPolarity walks the predicate root, of polarity 1, giving each call
// its polarity: 1 where the predicate is true for more values when the
// call is (under &&, || and the branches of a ternary, in the body of
// exists() and all()), -1 under a negation, 0 elsewhere (an argument of a
// function, a ternary's condition but where a branch is constant, see
// conditionPolarity, the body of filter() or exists_one()).
func walkPolarity(root ast.Expr, h polarityHooks) {
	var walk func(e ast.Expr, pol int)
	walkAll := func(pol int, es ...ast.Expr) {
		for _, e := range es {
			walk(e, pol)
		}
	}
	walk = func(e ast.Expr, pol int) {
		switch e.Kind() {
		case ast.CallKind:
			c := e.AsCall()
			args := c.Args()
			switch fn := c.FunctionName(); {
			case fn == operators.LogicalNot:
				walkAll(-pol, args...)
				return
			case fn == operators.LogicalAnd || fn == operators.LogicalOr:
				if h.junction != nil {
					defer h.junction(e, pol)()
				}
				walkAll(pol, args...)
				return
			case fn == operators.Conditional:
				if h.conditional != nil {
					defer h.conditional(e, pol)()
				}
				walk(args[0], conditionPolarity(args, pol))
				walkAll(pol, args[1:]...)
				return
			}
			h.call(c, pol)
			if c.IsMemberFunction() {
				walk(c.Target(), 0)
			}
			walkAll(0, args...)
		case ast.ComprehensionKind:
			comp := e.AsComprehension()
			walkAll(0, comp.IterRange(), comp.AccuInit())
			vars := []string{comp.AccuVar(), comp.IterVar()}
			if comp.HasIterVar2() {
				vars = append(vars, comp.IterVar2())
			}
			inScope := func(vars []string, walk func()) {
				if h.scope != nil {
					defer h.scope(vars)()
				}
				walk()
			}
			inScope(vars, func() { walk(comp.LoopCondition(), 0) })
			inScope(vars[:1], func() { walk(comp.Result(), 0) })
			inScope(vars, func() {
				if h.body != nil {
					defer h.body(comp)()
				}
				walk(comp.LoopStep(), bodyPolarity(comp, pol))
			})
		case ast.SelectKind:
			walk(e.AsSelect().Operand(), 0)
		case ast.ListKind:
			walkAll(0, e.AsList().Elements()...)
		case ast.MapKind:
			for _, en := range e.AsMap().Entries() {
				m := en.AsMapEntry()
				walkAll(0, m.Key(), m.Value())
			}
		}
	}
	walk(root, 1)
}

// A constString is a constant string of a predicate and the expression
// that writes it.
type constString struct {
	s  string
	at ast.Expr
}

// constBinds holds, by comprehension variable, the constants it ranges
// over (d in ['a.example', 'b.example'].exists(d, ...)).
type constBinds map[string][]ast.Expr

// strings returns the constant strings e stands for, each with the
// expression to report at: a literal, a concatenation of constants
// ('https://' + 'api.example.com'), or a variable bound to a list of
// them.
func (b constBinds) strings(e ast.Expr) []constString {
	if s, ok := stringLiteral(e); ok {
		return []constString{{s, e}}
	}
	switch e.Kind() {
	case ast.IdentKind:
		var out []constString
		for _, el := range b[e.AsIdent()] {
			out = append(out, b.strings(el)...)
		}
		return out
	case ast.CallKind:
		if c := e.AsCall(); c.FunctionName() == operators.Add && len(c.Args()) == 2 {
			l, r := b.strings(c.Args()[0]), b.strings(c.Args()[1])
			if len(l) == 1 && len(r) == 1 {
				return []constString{{l[0].s + r[0].s, e}}
			}
		}
	}
	return nil
}

// bind is a body hook of walkPolarity: it binds the comprehension's
// variable to the elements of its range, where that is a list written
// out, until what it returns is called.
func (b constBinds) bind(comp ast.ComprehensionExpr) func() {
	v := comp.IterVar()
	saved, had := b[v]
	b[v] = nil
	if r := comp.IterRange(); r.Kind() == ast.ListKind {
		b[v] = r.AsList().Elements()
	}
	return func() {
		if had {
			b[v] = saved
		} else {
			delete(b, v)
		}
	}
}

// isLabelByte reports whether b can begin a label of a host name: a
// suffix that begins with one is not at a label boundary.
func isLabelByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b >= 0x80
}

// lineAnchored reports whether the RE2 pattern p uses ^ or $ under the m
// flag, where they match at each line break.
func lineAnchored(p string) bool {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return false
	}
	var has func(re *syntax.Regexp) bool
	has = func(re *syntax.Regexp) bool {
		return re.Op == syntax.OpBeginLine || re.Op == syntax.OpEndLine || slices.ContainsFunc(re.Sub, has)
	}
	return has(re)
}

// looseHostSuffix reports whether the RE2 pattern p, anchored at its end,
// matches a host whose name only ends like the name it ends with: for
// each branch of an alternation, the name its end matches (example.com for
// 'example\.(com|org)$', taking the first of each alternation) is read
// off it, and where it begins with a label byte, p is tried on evil and
// that name. host is the host it matches.
func looseHostSuffix(p string) (host string, loose bool) {
	re, match, ok := parsePattern(p)
	if !ok {
		return "", false
	}
	branches := []*syntax.Regexp{re}
	if re.Op == syntax.OpCapture && re.Sub[0].Op == syntax.OpAlternate {
		re = re.Sub[0]
	}
	if re.Op == syntax.OpAlternate {
		branches = re.Sub
	}
	for _, b := range branches {
		name := tailName(b)
		if name == "" || !isLabelByte(name[0]) {
			continue
		}
		if probe := "evil" + strings.ToLower(name); match.MatchString(probe) {
			return probe, true
		}
	}
	return "", false
}

// tailName returns a string that the end of re matches, up to its end
// anchor: its literals, the first branch of an alternation, the first
// character of a class, read back from $ to the first element that is
// none of these (an anchor, a repetition).
func tailName(re *syntax.Regexp) string {
	if re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpConcat {
		subs = re.Sub
	}
	if len(subs) == 0 || subs[len(subs)-1].Op != syntax.OpEndText {
		return ""
	}
	var name string
	for i := len(subs) - 2; i >= 0; i-- {
		s, ok := sample(subs[i])
		if !ok {
			break
		}
		name = s + name
	}
	return name
}

// sample returns a string re matches where re is a literal, a class, or a
// group or an alternation of them (its first branch); ok is false for
// anything else.
func sample(re *syntax.Regexp) (string, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return string(re.Rune), true
	case syntax.OpCharClass:
		if len(re.Rune) > 0 {
			return string(re.Rune[0]), true
		}
	case syntax.OpCapture:
		return sample(re.Sub[0])
	case syntax.OpAlternate:
		return sample(re.Sub[0])
	case syntax.OpConcat:
		var out string
		for _, sub := range re.Sub {
			s, ok := sample(sub)
			if !ok {
				return "", false
			}
			out += s
		}
		return out, true
	}
	return "", false
}

// parsePattern returns the syntax tree of the RE2 pattern p and p
// compiled; ok is false where p does not parse.
func parsePattern(p string) (*syntax.Regexp, *regexp.Regexp, bool) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return nil, nil, false
	}
	match, err := regexp.Compile(p)
	return re, match, err == nil
}

// looseURLHost reports whether the RE2 pattern p, matched against a whole
// URL, matches one whose host's name only ends like the name it allows:
// a URL p matches is built (the least of each repetition, the first
// branch of each alternation), and where it names a host whose first label
// p fixes (the URL with another first label does not match) and p also
// matches it with evil written before the host's name, p is loose. probe
// is that URL.
func looseURLHost(p string) (probe string, loose bool) {
	re, match, ok := parsePattern(p)
	if !ok {
		return "", false
	}
	s, ok := leastSample(re)
	if !ok {
		return "", false
	}
	if l := strings.ToLower(s); match.MatchString(l) {
		s = l
	} else if !match.MatchString(s) {
		return "", false
	}
	scheme := strings.Index(s, "://")
	u, err := url.Parse(s)
	if scheme < 0 || err != nil || u.Host == "" {
		return "", false
	}
	host := u.Hostname()
	start := scheme + len("://")
	auth := s[start:]
	if i := strings.IndexAny(auth, "/?#"); i >= 0 {
		auth = auth[:i]
	}
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		start += at + 1
	}
	if host == "" || !strings.HasPrefix(s[start:], host) || !isLabelByte(host[0]) {
		return "", false
	}
	// other is host with its first label another of the same length.
	label, rest, _ := strings.Cut(host, ".")
	fill := "z"
	if strings.Trim(label, "z") == "" {
		fill = "y"
	}
	other := strings.Repeat(fill, len(label))
	if rest != "" {
		other += "." + rest
	}
	if match.MatchString(s[:start] + other + s[start+len(host):]) {
		// Its first label is any label: a host of the same parent.
		return "", false
	}
	if probe = s[:start] + "evil" + s[start:]; match.MatchString(probe) {
		return probe, true
	}
	return "", false
}

// hostGoesOn reports whether the RE2 pattern p, anchored, matched against
// a whole URL, matches one whose host's name goes on past the name it
// allows: a URL p matches is built (leastSample), and p is tried on it with
// .evil.example, and @evil.example, after its host, where it does not
// match the URL with another host in its place. probe is the URL it
// matches: https://api.example.com.evil.example for
// '^https://api\.example\.com.*'.
func hostGoesOn(p string) (probe string, loose bool) {
	s, match, ok := sampleOf(p)
	scheme := strings.Index(s, "://")
	if !ok || scheme <= 0 {
		return "", false
	}
	start := scheme + len("://")
	end := len(s)
	if i := strings.IndexAny(s[start:], "/?#"); i >= 0 {
		end = start + i
	}
	if end == start || !isLabelByte(s[end-1]) {
		return "", false
	}
	if match.MatchString(s[:start] + "evil.example" + s[end:]) {
		// It names no host ('^https://[^/]+/v1/'): its host is egress's.
		return "", false
	}
	for _, more := range []string{".evil.example", "@evil.example"} {
		if probe = s[:end] + more + s[end:]; match.MatchString(probe) {
			return probe, true
		}
	}
	return "", false
}

// hostHolds reports whether the RE2 pattern p, matched against a host,
// matches one that merely holds a name it allows: a host p matches is
// built (leastSample), and p is tried on it with .evil.example after it,
// where p does not match a host it names nothing of (other.invalid).
// host is the host it matches: a.example.com.evil.example for
// '.*\.example\.com'.
func hostHolds(p string) (host string, loose bool) {
	s, match, ok := sampleOf(p)
	if !ok || s == "" || match.MatchString("other.invalid") {
		// It names no host ('^[a-z0-9.-]+$'): any host's name is one.
		return "", false
	}
	if strings.HasPrefix(s, ".") {
		s = "a" + s
	}
	if host = s + ".evil.example"; match.MatchString(host) {
		return host, true
	}
	return "", false
}

// urlHolds reports whether the RE2 pattern p, that names a scheme and a
// host ('.*://api\.example\.com/.*'), matched against a whole URL,
// matches a URL to another host that holds one it allows in its query:
// a string p matches is built (leastSample), and p is tried on it after
// https://evil.example/?u=. probe is that URL.
func urlHolds(p string) (probe string, loose bool) {
	s, match, ok := sampleOf(p)
	if !ok || !strings.Contains(s, "://") {
		return "", false
	}
	if probe = "https://evil.example/?u=" + s; match.MatchString(probe) {
		return probe, true
	}
	return "", false
}

// sampleOf returns a string the RE2 pattern p matches (leastSample, lower-
// cased where p matches that too) and p compiled.
func sampleOf(p string) (string, *regexp.Regexp, bool) {
	re, match, ok := parsePattern(p)
	if !ok {
		return "", nil, false
	}
	s, ok := leastSample(re)
	if l := strings.ToLower(s); ok && match.MatchString(l) {
		return l, match, true
	}
	return s, match, ok && match.MatchString(s)
}

// hostName matches a constant that names a host, with a scheme or a port
// or not (api.example.com, https://api.example.com/), and fileName one that
// names a file (report.pdf); compiled on first use.
var (
	hostName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)^([a-z][a-z0-9+.-]*://)?[a-z0-9-]+(\.[a-z0-9-]+)*\.[a-z]{2,}\.?(:[0-9]+)?/?$`)
	})
	fileName = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)\.(pdf|csv|tsv|json|ya?ml|toml|txt|xml|rss|html?|php|aspx?|jsp|js|css|svg|webp|zip|gz|tgz|tar|png|jpe?g|gif|docx?|xlsx?|md|log)$`)
	})
)

// namesHost reports whether s, a constant a URL is tested to contain,
// names a host: a URL to another host may hold it anywhere. One with a
// scheme does (https://api.example.com/v1/), as does a host's name
// (api.example.com), but for a file's (report.pdf).
func namesHost(s string) bool {
	return strings.Contains(s, "://") || hostName().MatchString(s) && !fileName().MatchString(s)
}

// leastSample returns a string re matches, or may match where it holds
// an assertion the string does not meet (a word boundary): the least
// number of each repetition, the first branch of each alternation, a
// letter, a digit or the first character of each class, empty anchors.
// ok is false for an element it cannot sample (a class of no character).
func leastSample(re *syntax.Regexp) (string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpStar, syntax.OpQuest:
		return "", true
	case syntax.OpLiteral:
		return string(re.Rune), true
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return "a", true
	case syntax.OpCharClass:
		for _, c := range "a0" {
			for i := 0; i+1 < len(re.Rune); i += 2 {
				if re.Rune[i] <= c && c <= re.Rune[i+1] {
					return string(c), true
				}
			}
		}
		if len(re.Rune) > 0 {
			return string(re.Rune[0]), true
		}
	case syntax.OpCapture, syntax.OpPlus:
		return leastSample(re.Sub[0])
	case syntax.OpRepeat:
		one, ok := leastSample(re.Sub[0])
		return strings.Repeat(one, re.Min), ok
	case syntax.OpAlternate:
		return leastSample(re.Sub[0])
	case syntax.OpConcat:
		var b strings.Builder
		for _, sub := range re.Sub {
			one, ok := leastSample(sub)
			if !ok {
				return "", false
			}
			b.WriteString(one)
		}
		return b.String(), true
	}
	return "", false
}

// bareOrigin matches a URL that ends with its host (or port), with no
// path: a prefix of other hosts' URLs.
var bareOrigin = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)^[a-z][a-z0-9+.-]*://[^/?#\s]+$`) })

// hostOf returns the URL of which e is url_host(url), or lower() of it.
func hostOf(e ast.Expr) (ast.Expr, bool) {
	if e.Kind() != ast.CallKind {
		return nil, false
	}
	c := e.AsCall()
	switch {
	case c.FunctionName() == "url_host" && len(c.Args()) == 1 && !c.IsMemberFunction():
		return c.Args()[0], true
	case c.FunctionName() == "url_host" && len(c.Args()) == 0 && c.IsMemberFunction():
		return c.Target(), true
	case c.FunctionName() == "lower" && len(c.Args()) == 1:
		return hostOf(c.Args()[0])
	case c.FunctionName() == "lowerAscii" && c.IsMemberFunction():
		return hostOf(c.Target())
	}
	return nil, false
}

// pathValued reports whether e is a path: url_path() or path_clean() of
// a value, or lower() of one.
func pathValued(e ast.Expr) bool {
	if e.Kind() != ast.CallKind {
		return false
	}
	c := e.AsCall()
	switch fn := c.FunctionName(); {
	case fn == "url_path" || fn == "path_clean":
		return len(c.Args()) == 1 && !c.IsMemberFunction() || len(c.Args()) == 0 && c.IsMemberFunction()
	case fn == "lower" && len(c.Args()) == 1:
		return pathValued(c.Args()[0])
	case fn == "lowerAscii" && c.IsMemberFunction():
		return pathValued(c.Target())
	}
	return false
}

// cleanedArg returns the value of which e is path_clean(), or lower() of
// it.
func cleanedArg(e ast.Expr) (ast.Expr, bool) {
	if e.Kind() != ast.CallKind {
		return nil, false
	}
	c := e.AsCall()
	switch fn := c.FunctionName(); {
	case fn == "path_clean" && len(c.Args()) == 1 && !c.IsMemberFunction():
		return c.Args()[0], true
	case fn == "path_clean" && len(c.Args()) == 0 && c.IsMemberFunction():
		return c.Target(), true
	case fn == "lower" && len(c.Args()) == 1:
		return cleanedArg(c.Args()[0])
	case fn == "lowerAscii" && c.IsMemberFunction():
		return cleanedArg(c.Target())
	}
	return nil, false
}

// isHostOf reports whether e is the host of a URL (hostOf) that pinned
// does not hold.
func isHostOf(e ast.Expr, pinned func(ast.Expr) bool) bool {
	t, ok := hostOf(e)
	return ok && !pinned(t)
}

// pathKey returns the path e reads (args.url), or "" for another
// expression.
func pathKey(e ast.Expr) string {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent()
	case ast.SelectKind:
		if k := pathKey(e.AsSelect().Operand()); k != "" {
			return k + "." + e.AsSelect().FieldName()
		}
	}
	return ""
}

// anchored reports whether the RE2 pattern p is anchored, in every branch
// of an alternation: at its end, with $ or \z, which says where it
// matches ('@corp\.example$'); or at its start, with ^ (without the m
// flag) or \A, where it also ends with .* (or .+), which says any rest is
// meant ('^/srv/public/.*'), or with a /, a prefix test as
// startsWith('/srv/a/') is ('^/srv/a/'), or with a group each branch of
// which ends in one of these ('^/srv/data(/|$)'). One that begins with .* (or .+)
// says it matches anywhere: it counts as anchored. startOnly is set when p is not
// anchored but every branch of it is anchored at its start: it matches a
// value that merely begins with a match ('^/srv/data/[a-z]+\.txt' matches
// /srv/data/a.txt/../../../etc/passwd). One that does not parse is left to
// the runtime's error.
func anchored(p string) (ok, startOnly bool) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil {
		return true, false
	}
	anyRun := func(re *syntax.Regexp) bool {
		return (re.Op == syntax.OpStar || re.Op == syntax.OpPlus) && (re.Sub[0].Op == syntax.OpAnyChar || re.Sub[0].Op == syntax.OpAnyCharNotNL)
	}
	// edge reports whether the first element of re (its last, with last
	// set), in every branch of an alternation, is one is holds for.
	var edge func(re *syntax.Regexp, last bool, is func(*syntax.Regexp) bool) bool
	edge = func(re *syntax.Regexp, last bool, is func(*syntax.Regexp) bool) bool {
		if is(re) {
			return true
		}
		switch re.Op {
		case syntax.OpConcat, syntax.OpCapture:
			if len(re.Sub) == 0 {
				return false
			}
			if last {
				return edge(re.Sub[len(re.Sub)-1], last, is)
			}
			return edge(re.Sub[0], last, is)
		case syntax.OpAlternate:
			for _, sub := range re.Sub {
				if !edge(sub, last, is) {
					return false
				}
			}
			return true
		}
		return false
	}
	op := func(o syntax.Op) func(*syntax.Regexp) bool {
		return func(re *syntax.Regexp) bool { return re.Op == o }
	}
	// dirPrefix reports whether re is a literal that ends with a /: a
	// pattern that ends with one is a prefix test ('^/srv/a/'), as
	// startsWith('/srv/a/') is.
	dirPrefix := func(re *syntax.Regexp) bool {
		return re.Op == syntax.OpLiteral && len(re.Rune) > 0 && re.Rune[len(re.Rune)-1] == '/'
	}
	// tail: a pattern anchored at its start is tight where each branch of
	// its end closes it at the end, on any rest or with a /
	// ('^https://api\.example\.com(/|$)').
	tail := func(re *syntax.Regexp) bool {
		return re.Op == syntax.OpEndText || anyRun(re) || dirPrefix(re)
	}
	branch := func(re *syntax.Regexp) (ok, startOnly bool) {
		atStart := edge(re, false, op(syntax.OpBeginText))
		if edge(re, true, op(syntax.OpEndText)) || edge(re, false, anyRun) || atStart && edge(re, true, tail) {
			return true, false
		}
		return false, atStart
	}
	whole := func(re *syntax.Regexp) (ok, startOnly bool) {
		if re.Op == syntax.OpCapture && re.Sub[0].Op == syntax.OpAlternate {
			re = re.Sub[0]
		}
		if re.Op != syntax.OpAlternate {
			return branch(re)
		}
		ok, startOnly = true, true
		for _, sub := range re.Sub {
			subOK, subStart := branch(sub)
			ok = ok && subOK
			startOnly = startOnly && (subOK || subStart)
		}
		return ok, !ok && startOnly
	}
	return whole(re)
}
