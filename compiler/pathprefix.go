package compiler

import (
	"fmt"
	"net/url"
	"path"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/argpath"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// checkPathPrefixes reports, as cel/loose-match, each prefix test of a
// path a tool's path_arg names (startsWith('/srv/data/') with a constant,
// a concatenation or a list's member, or matches() and matches_any() with
// a pattern anchored at its start that also matches a prefix followed by
// a traversal, traversalMatches) that sits where lets says it lets calls
// through, when no file_check layer without a when covers the tool:
// /srv/data/../../etc/passwd
// begins with /srv/data/ and names /etc/passwd. So is one of a URL a
// tool's url_arg names whose prefix reaches into the URL's path
// ('https://api.example.com/v1/public/'): a URL that goes on with ../ or
// %2e%2e/ leaves it where it is resolved. A path_arg or url_arg below the
// top of the arguments (/request/path, /files/*/path) is read through its
// object, a constant index, or the variable of a macro over its list (or
// a filter() of it, or a map() of it to the path), as it is or
// lower-cased. A test of path_clean() of the path, or one beside a test
// of the same path (or element) that fails for each value leaving the
// prefix (dotProbes; for a URL, percentProbes too), is not one.
// A prefix test of a path (not a URL) that sits where blocks says it
// holds calls back is reported too: /srv/../etc/passwd names /etc/passwd
// without beginning with /etc/, and /./etc/passwd gets past a test for
// ".." beside it; but not one beside a test of path_clean() of the path
// with the same prefix, which holds for those. So is a prefix test of a
// URL reaching into its path on the side that blocks:
// https://api.example.com/v1/x/../admin, https://API.example.com/v1/admin
// and https://api.example.com:443/v1/%61dmin reach /v1/admin without
// beginning with https://api.example.com/v1/admin; url_host() and
// url_path() of the URL are the test that holds for them.
//
// named holds the arguments a path_arg or a url_arg of a tool in scope
// names (prefixArgs), none outside the tool stage.
func (c *Compilation) checkPathPrefixes(x *dsl.Expr, named map[string]prefixArg, lets, blocks func(pol int) (string, bool)) {
	if len(named) == 0 {
		return
	}
	tree, ok := predicate.ParseSyntax(x.Source)
	if !ok {
		return
	}
	f := folder{src: x.Source, info: tree.SourceInfo()}
	type test struct {
		at      ast.Expr
		key     string
		written string
		what    string
		pol     int
		// prefix is the prefix the test reads; probe is a value that
		// goes on from it with a traversal out of it that the test also
		// holds for ("" for none).
		prefix string
		probe  string
		// sibling is a path (or URL) beside the one prefix names, not
		// below it, that the test also holds for (siblingProbe).
		sibling string
		// dots and pct say that a conjunct beside the test, where the
		// predicate lets calls through, fails for each value that goes
		// on from the prefix with .. (dotProbes), and for each with a
		// percent escape of a dot (percentProbes); cleaned that one
		// tests path_clean() of it for the prefix.
		dots, pct, cleaned bool
	}
	var tests []test
	side := -1
	if _, ok := lets(1); ok {
		side = 1
	}
	// beside holds the conjuncts beside the tests being walked that test
	// a path (by its exact key, argKeys) on its text, or path_clean() of it
	// for a prefix (besideTests).
	var beside []besideTest
	var scope locals
	keys := newArgKeys(&scope)
	add := func(at, target ast.Expr, what, prefix, pattern string, pol int, probe, sibling string) {
		key := keys.of(target)
		arg, ok := named[key]
		if !ok || prefix == "" || arg.url && !reachesPath(prefix) {
			return
		}
		exact := keys.exact(target)
		// fail reports whether a test beside this one fails for each
		// of the probes.
		fail := func(probes []string) bool {
			return !slices.ContainsFunc(probes, func(p string) bool {
				return !slices.ContainsFunc(beside, func(b besideTest) bool { return b.holds != nil && covers(b.key, exact) && b.holds(p) })
			})
		}
		cleaned := slices.ContainsFunc(beside, func(b besideTest) bool {
			return b.holds == nil && (b.prefix != "" && b.prefix == prefix || b.pattern != "" && b.pattern == pattern) && covers(b.key, exact)
		})
		tests = append(tests, test{at, key, f.exprText(target), what, pol, prefix, probe, sibling,
			fail(dotProbes(prefix, arg.url)), arg.url && fail(percentProbes(prefix)), cleaned})
	}
	junction := func(e ast.Expr, pol int) func() {
		n := len(beside)
		lettingConjuncts(e, pol, side, func(call ast.CallExpr, lets bool) {
			if lets != (call.FunctionName() == operators.NotEquals) {
				// A test that holds where the call is let through
				// excuses nothing, but for s != '..', which fails
				// there where s == '..' holds.
				return
			}
			if b, ok := besideTestOf(call, keys); ok {
				beside = append(beside, b)
			}
		}, keys.every)
		return func() { beside = beside[:n] }
	}
	bound := constBinds{}
	body := func(comp ast.ComprehensionExpr) func() {
		unbound, unbind := bound.bind(comp), keys.bind(comp)
		return func() { unbind(); unbound() }
	}
	walkPolarity(tree.Expr(), polarityHooks{scope: scope.enter, body: body, junction: junction, conditional: junction, call: func(call ast.CallExpr, pol int) {
		args := call.Args()
		target := call.Target()
		if !call.IsMemberFunction() && len(args) > 0 {
			target = args[0]
		}
		// A test of the path lower-cased holds for its traversals as one
		// of the path does.
		for inner, ok := lowerOf(target); ok; inner, ok = lowerOf(target) {
			target = inner
		}
		var patterns []constString
		switch fn := call.FunctionName(); {
		case fn == "startsWith" && call.IsMemberFunction() && len(args) == 1:
			for _, k := range bound.strings(args[0]) {
				sibling, _ := siblingProbe(k.s, nil)
				add(k.at, target, fmt.Sprintf("startsWith('%s')", k.s), k.s, "", pol, traversals(k.s, named[keys.of(target)].url)[0], sibling)
			}
			return
		case fn == "matches" && call.IsMemberFunction() && len(args) == 1:
			patterns = bound.strings(args[0])
		case fn == "matches" && !call.IsMemberFunction() && len(args) == 2:
			patterns = bound.strings(args[1])
		case fn == "matches_any" && len(args) == 2 && args[1].Kind() == ast.ListKind:
			for _, el := range args[1].AsList().Elements() {
				patterns = append(patterns, bound.strings(el)...)
			}
		}
		for _, k := range patterns {
			prefix, probe, sibling := traversalMatches(k.s, named[keys.of(target)].url)
			if strings.Contains(k.s, `\.\.`) {
				// A pattern that spells .. out says what it lets through.
				probe = ""
			}
			add(k.at, target, fmt.Sprintf("the pattern '%s'", k.s), prefix, k.s, pol, probe, sibling)
		}
	}})
	for _, t := range tests {
		arg := named[t.key]
		outcome, ok := lets(t.pol)
		kind := map[bool]string{true: "URL", false: "path"}[arg.url]
		// beside is what the message of a test that lets calls through
		// says of a prefix that does not end in a /.
		beside := ""
		if ok && t.sibling != "" && arg.admits(t.sibling) {
			beside = "; it " + siblingAdvice(t.prefix, t.sibling, t.what)
		}
		if arg.checked || ok && (t.probe == "" || t.dots && (!arg.url || t.pct)) {
			// Its traversals are a file_check layer's, or excused.
			if beside != "" {
				c.report(dsl.Warnf(x.PosAt(f.offset(t.at)), ruleLooseMatch,
					"%s on %s, a prefix test of %s, the %s %s: %s", outcome, t.what, t.written, kind, arg.what, beside[2:]))
			}
			continue
		}
		if !ok {
			if outcome, ok := blocks(t.pol); ok && arg.url {
				host, path, example := urlPrefixParts(t.prefix)
				c.report(dsl.Warnf(x.PosAt(f.offset(t.at)), ruleLooseMatch,
					"%s on %s, a prefix test of %s, the URL %s: it does not hold for a URL a server routes to the same path without beginning with the prefix, such as %s (or one with the host in capitals, a port, user info, %%2e%%2e for .., or %%61 for a), and egress checks the host alone; test url_host(%s) == '%s' && url_path(%s).startsWith('%s'), the host and the path as a server routes it",
					outcome, t.what, t.written, arg.what, example, t.written, host, t.written, path))
				continue
			}
			if outcome, ok := blocks(t.pol); ok && !arg.url && namesBelowRoot(t.prefix) && !t.cleaned {
				c.report(dsl.Warnf(x.PosAt(f.offset(t.at)), ruleLooseMatch,
					"%s on %s, a prefix test of %s, the path %s: it does not hold for a path that names what the prefix does without beginning with it, such as one beginning %s, and no file_check layer without a when covers the tool; test path_clean(%s), the path with . and .. resolved, or add a file_check layer with the roots",
					outcome, t.what, t.written, arg.what, aside(t.prefix, t.dots), t.written))
			}
			continue
		}
		if arg.url {
			host, path, _ := urlPrefixParts(t.prefix)
			if !strings.HasSuffix(path, "/") {
				path += "/"
			}
			c.report(dsl.Warnf(x.PosAt(f.offset(t.at)), ruleLooseMatch,
				"%s on %s, a prefix test of %s, the URL %s: it also holds for a URL whose path goes on with ../ (or %%2e%%2e/, read as ..) out of the prefix, such as %s, which a WHATWG URL parser, fetch, and many servers resolve outside it (egress checks the host alone); test url_host(%s) == '%s' && url_path(%s).startsWith('%s'), the host and the path as a server routes it, write !%s.contains('..') && !%s.contains('%%') beside it, or compare the URL in full%s",
				outcome, t.what, t.written, arg.what, t.probe, t.written, host, t.written, path, t.written, t.written, beside))
			continue
		}
		c.report(dsl.Warnf(x.PosAt(f.offset(t.at)), ruleLooseMatch,
			"%s on %s, a prefix test of %s, the path %s: it also holds for a path that goes on with ../ out of the prefix, such as %s, and no file_check layer without a when covers the tool; test path_clean(%s), the path with . and .. resolved, or add a file_check layer with the roots%s",
			outcome, t.what, t.written, arg.what, t.probe, t.written, beside))
	}
}

// A besideTest is a test of a path beside a prefix test of it: holds
// says whether it holds for a value of the path (its text, as contains(),
// matches() or their _any() forms test it), or, where holds is nil, the
// test is path_clean() of the path tested for prefix (startsWith()) or
// with pattern (matches()). key is the path's exact key (argKeys.exact).
type besideTest struct {
	key             string
	holds           func(string) bool
	prefix, pattern string
}

// besideTestOf returns the test call is of a path, for a value of it
// (contains(), endsWith(), matches(), contains_any(), matches_any() with
// constants, of the path or lower() of it), or of path_clean() of it for
// a prefix (startsWith()).
func besideTestOf(call ast.CallExpr, keys argKeys) (besideTest, bool) {
	args := call.Args()
	target := call.Target()
	if !call.IsMemberFunction() {
		if len(args) != 2 {
			return besideTest{}, false
		}
		target, args = args[0], args[1:]
	}
	if len(args) != 1 {
		return besideTest{}, false
	}
	fn := call.FunctionName()
	if b, ok := segmentTest(call, keys); ok {
		return b, true
	}
	if cleaned, ok := cleanedArg(target); ok {
		c, ok := stringLiteral(args[0])
		switch fn {
		case "startsWith":
			return besideTest{key: keys.exact(cleaned), prefix: c}, ok
		case "matches":
			return besideTest{key: keys.exact(cleaned), pattern: c}, ok
		}
		return besideTest{}, false
	}
	lowered := false
	for {
		if inner, ok := lowerOf(target); ok {
			target, lowered = inner, true
			continue
		}
		break
	}
	var consts []string
	if args[0].Kind() == ast.ListKind && strings.HasSuffix(fn, "_any") {
		for _, el := range args[0].AsList().Elements() {
			if c, ok := stringLiteral(el); ok {
				consts = append(consts, c)
			}
		}
	} else if c, ok := stringLiteral(args[0]); ok && !strings.HasSuffix(fn, "_any") {
		consts = append(consts, c)
	}
	var one func(v, c string) bool
	switch fn {
	case "contains", "contains_any":
		one = strings.Contains
	case "endsWith":
		one = strings.HasSuffix
	case "matches", "matches_any":
		one = func(v, c string) bool {
			re, err := regexp.Compile(c)
			return err == nil && re.MatchString(v)
		}
	}
	key := keys.exact(target)
	if one == nil || len(consts) == 0 || key == "" {
		return besideTest{}, false
	}
	return besideTest{key: key, holds: func(v string) bool {
		if lowered {
			v = strings.ToLower(v)
		}
		return slices.ContainsFunc(consts, func(c string) bool { return one(v, c) })
	}}, true
}

// segmentTest returns the test call is of a path for a segment, where it
// is: '..' in args.path.split('/'), or s == '..' where s ranges over
// args.path.split('/') (args.path.split('/').exists(s, s == '..')); for
// s != '..' (all(s, s != '..')), the test that it fails.
func segmentTest(call ast.CallExpr, keys argKeys) (besideTest, bool) {
	a := call.Args()
	if len(a) != 2 || call.IsMemberFunction() {
		return besideTest{}, false
	}
	var key, sep, seg string
	switch fn := call.FunctionName(); fn {
	case operators.In:
		c, ok := stringLiteral(a[0])
		target, s, split := splitOf(a[1])
		if !ok || !split {
			return besideTest{}, false
		}
		key, sep, seg = keys.exact(target), s, c
	case operators.Equals, operators.NotEquals:
		for i := range a {
			c, ok := stringLiteral(a[1-i])
			k, s, found := strings.Cut(keys.exact(a[i]), splitMark)
			if ok && found {
				key, sep, seg = k, s, c
			}
		}
	}
	if key == "" {
		return besideTest{}, false
	}
	return besideTest{key: key, holds: func(v string) bool { return slices.Contains(strings.Split(v, sep), seg) }}, true
}

// splitMark joins the exact key of a path to the separator a split() of
// it reads, in the exact key of the segments it returns.
const splitMark = "\x00split:"

// splitOf returns the value e splits and the separator, where e is
// value.split(sep) with a constant separator.
func splitOf(e ast.Expr) (target ast.Expr, sep string, ok bool) {
	if e.Kind() != ast.CallKind {
		return nil, "", false
	}
	c := e.AsCall()
	if c.FunctionName() != "split" || !c.IsMemberFunction() || len(c.Args()) != 1 {
		return nil, "", false
	}
	sep, ok = stringLiteral(c.Args()[0])
	return c.Target(), sep, ok && sep != ""
}

// lowerOf returns the value of which e is lower() or lowerAscii().
func lowerOf(e ast.Expr) (ast.Expr, bool) {
	if e.Kind() != ast.CallKind {
		return nil, false
	}
	switch c := e.AsCall(); {
	case c.FunctionName() == "lower" && len(c.Args()) == 1 && !c.IsMemberFunction():
		return c.Args()[0], true
	case c.FunctionName() == "lowerAscii" && len(c.Args()) == 0 && c.IsMemberFunction():
		return c.Target(), true
	}
	return nil, false
}

// A prefixArg is an argument a path_arg or a url_arg names: what a
// message says of it ("read_file's path_arg names"), whether it is a
// URL, and whether a file_check layer covers every tool in scope that
// names it (a path's), with the roots of each layer covering each of
// them.
type prefixArg struct {
	what    string
	url     bool
	checked bool
	roots   [][][]string
}

// admits reports whether a call with the path p gets past the file_check
// layers covering one of the tools that name a's path: p is inside a root
// of each (a root or a path that is not absolute, ~/x, may hold anything).
// Where none covers it, every path does.
func (a prefixArg) admits(p string) bool {
	if !a.checked {
		return true
	}
	return slices.ContainsFunc(a.roots, func(layers [][]string) bool {
		return !slices.ContainsFunc(layers, func(roots []string) bool {
			return !slices.ContainsFunc(roots, func(r string) bool {
				r = path.Clean(r)
				return !path.IsAbs(r) || !path.IsAbs(p) || p == r || strings.HasPrefix(p, strings.TrimSuffix(r, "/")+"/")
			})
		})
	})
}

// prefixArgs returns the arguments that a path_arg of a tool in scope
// (every declared tool when scope is empty) names, checked where a
// file_check layer covers each tool that names it, and those a url_arg
// names, by their key (argKeys: args.path, args.request.path,
// args.files[].path); a path_arg wins over a url_arg naming the same
// argument.
func (c *Compilation) prefixArgs(scope []string) map[string]prefixArg {
	p := c.Policy
	if len(scope) == 0 {
		scope = sortedNames(p.Tools)
	}
	// roots returns the roots of each file_check layer covering tool: one
	// with a when covers none, as the calls it skips reach the tool as
	// they are spelled.
	roots := func(tool string) [][]string {
		var out [][]string
		for _, e := range p.Chains["tool"] {
			if e.Use == "file_check" && e.When == nil && (len(e.Tools) == 0 || slices.Contains(e.Tools, tool)) {
				var rs []string
				list, _ := e.Fields["roots"].([]any)
				for _, r := range list {
					if r, ok := r.(string); ok {
						rs = append(rs, r)
					}
				}
				if len(rs) < len(list) || len(rs) == 0 {
					// Roots not read as written hold anything.
					rs = []string{"."}
				}
				out = append(out, rs)
			}
		}
		return out
	}
	covered := func(tool string) bool { return len(roots(tool)) > 0 }
	out := map[string]prefixArg{}
	for _, pass := range []struct{ url, checked bool }{{false, false}, {false, true}, {true, false}} {
		url := pass.url
		for _, name := range scope {
			t := p.Tools[name]
			if t == nil || !url && covered(name) != pass.checked {
				continue
			}
			refs, kind := t.PathArgs, "path_arg"
			if url {
				refs, kind = t.URLArgs, "url_arg"
			}
			for _, ref := range refs {
				a, err := argpath.Parse(ref)
				if err != nil {
					continue
				}
				key := "args"
				for _, tok := range a.Tokens() {
					if tok == "*" {
						key += "[]"
					} else {
						key += "." + tok
					}
				}
				if seen, ok := out[key]; ok {
					if seen.checked && pass.checked {
						seen.roots = append(seen.roots, roots(name))
						out[key] = seen
					}
					continue
				}
				what := fmt.Sprintf("%s's %s names", name, kind)
				if len(a.Tokens()) > 1 {
					what = fmt.Sprintf("%s's %s %s names", name, kind, ref)
				}
				arg := prefixArg{what: what, url: url, checked: pass.checked}
				if pass.checked {
					arg.roots = [][][]string{roots(name)}
				}
				out[key] = arg
			}
		}
	}
	return out
}

// argKeys names what an expression reads by its place in the arguments:
// args.request.path, args.files[].path for a field of an element of
// args.files, read by an index or as the variable of a macro over the
// list; "" where it is not a field path of the arguments (a comprehension
// variable that ranges over something else, or shadows args). Its exact
// form names the element too: args.files[0].path for a constant index,
// args.files[@n].path for the variable of the nth macro bound, one
// element, args.files[].path for every element (a variable bound with
// every), args.files[?].path for an element it cannot name.
type argKeys struct {
	scope *locals
	// binds holds, by comprehension variable, the key of the elements it
	// ranges over and its exact form ("" for none).
	binds map[string][2]string
	// n counts the variables bound, to tell their elements apart.
	n *int
}

// newArgKeys returns an argKeys that reads the variables in scope.
func newArgKeys(scope *locals) argKeys {
	return argKeys{scope: scope, binds: map[string][2]string{}, n: new(int)}
}

// of returns e's key.
func (k argKeys) of(e ast.Expr) string { return k.key(e, false) }

// exact returns e's key in its exact form.
func (k argKeys) exact(e ast.Expr) string { return k.key(e, true) }

// key returns e's key, in its exact form where exact is set.
func (k argKeys) key(e ast.Expr, exact bool) string {
	switch e.Kind() {
	case ast.IdentKind:
		if key, ok := k.binds[e.AsIdent()]; ok {
			if exact {
				return key[1]
			}
			return key[0]
		}
		if k.scope.shadows(e.AsIdent()) {
			return ""
		}
		return e.AsIdent()
	case ast.SelectKind:
		if s := e.AsSelect(); !s.IsTestOnly() {
			if base := k.key(s.Operand(), exact); base != "" {
				return base + "." + s.FieldName()
			}
		}
	case ast.CallKind:
		c := e.AsCall()
		switch fn := c.FunctionName(); {
		case (fn == "orValue" && len(c.Args()) == 1 || fn == "value" && len(c.Args()) == 0) && c.IsMemberFunction():
			// The value of an optional read (args.files[?0].path.orValue('')).
			return k.key(c.Target(), exact)
		case fn == operators.OptSelect && len(c.Args()) == 2:
			if field, ok := stringLiteral(c.Args()[1]); ok {
				if base := k.key(c.Args()[0], exact); base != "" {
					return base + "." + field
				}
			}
			return ""
		}
		if fn := c.FunctionName(); (fn == operators.Index || fn == operators.OptIndex) && len(c.Args()) == 2 {
			if base := k.key(c.Args()[0], exact); base != "" {
				if !exact {
					return base + "[]"
				}
				if i := c.Args()[1]; i.Kind() == ast.LiteralKind {
					switch n := i.AsLiteral().(type) {
					case types.Int, types.Uint:
						return fmt.Sprintf("%s[%v]", base, n)
					}
				}
				return base + "[?]"
			}
		}
	case ast.ComprehensionKind:
		// A filter() of a list holds elements of it.
		comp := e.AsComprehension()
		if cond, elem, ok := listStep(comp); ok && cond != nil && identIs(elem, comp.IterVar()) {
			return k.key(comp.IterRange(), exact)
		}
	}
	return ""
}

// bind is a body hook of walkPolarity: it binds the comprehension's
// variable to the key of the elements of its range, one element of them,
// until what it returns is called.
func (k argKeys) bind(comp ast.ComprehensionExpr) func() {
	*k.n++
	return k.bindAs(comp, fmt.Sprintf("[@%d]", *k.n))
}

// every binds the comprehension's variable to every element of its range
// as bind does, where the range holds each of them: a filter() of a list
// keeps some, and its variable is bound to none.
func (k argKeys) every(comp ast.ComprehensionExpr) func() {
	return k.bindAs(comp, "[]")
}

// bindAs binds the comprehension's variable to the key of the elements of
// its range (elements), with elem as their index in its exact form.
func (k argKeys) bindAs(comp ast.ComprehensionExpr, elem string) func() {
	v := comp.IterVar()
	prev, had := k.binds[v]
	k.binds[v] = k.elements(comp.IterRange(), elem)
	return func() {
		if had {
			k.binds[v] = prev
		} else {
			delete(k.binds, v)
		}
	}
}

// elements returns the key of the elements of the list e and its exact
// form, with elem as their index: args.files[] and args.files[@1] for
// args.files, what a map() of a list reads of each of its elements
// (args.files[].path for args.files.map(f, f.path)), and those of the
// list a filter() keeps some of, but for every element (elem []), which
// a filter() does not hold.
func (k argKeys) elements(e ast.Expr, elem string) [2]string {
	if e.Kind() == ast.ComprehensionKind {
		comp := e.AsComprehension()
		cond, x, ok := listStep(comp)
		if !ok || cond != nil && (elem == "[]" || !identIs(x, comp.IterVar())) {
			return [2]string{}
		}
		defer k.bindAs(comp, elem)()
		return [2]string{k.of(x), k.exact(x)}
	}
	if target, sep, ok := splitOf(e); ok {
		// The segments of a path, which a test for a segment reads.
		if key := k.exact(target); key != "" {
			return [2]string{"", key + splitMark + sep}
		}
	}
	if r := k.of(e); r != "" {
		return [2]string{r + "[]", k.exact(e) + elem}
	}
	return [2]string{}
}

// covers reports whether the exact key b, of a test beside another,
// names every element the exact key e of that other names: the same
// fields, each index of b every element ([]) or the one e names.
func covers(b, e string) bool {
	for {
		bi, ei := strings.IndexByte(b, '['), strings.IndexByte(e, '[')
		if bi < 0 || ei < 0 || b[:bi] != e[:ei] {
			return bi < 0 && ei < 0 && b == e
		}
		bj, ej := bi+strings.IndexByte(b[bi:], ']'), ei+strings.IndexByte(e[ei:], ']')
		if bx, ex := b[bi+1:bj], e[ei+1:ej]; bx != "" && (bx != ex || ex == "?") {
			return false
		}
		b, e = b[bj+1:], e[ej+1:]
	}
}

// reachesPath reports whether the URL prefix reaches past the root of its
// path and ends in it: https://api.example.com/v1 does,
// https://api.example.com/ does not, as .. at the root stays there, nor
// does https://api.example.com/search?q=, as what follows it is the
// query's, not the path's.
func reachesPath(prefix string) bool {
	_, rest, ok := strings.Cut(prefix, "://")
	if !ok {
		return false
	}
	_, path, ok := strings.Cut(rest, "/")
	return ok && path != "" && !strings.ContainsAny(path, "?#")
}

// urlPrefixParts returns the host and the path of a URL prefix that
// reaches into its path (reachesPath), the host as url_host() returns it,
// the path as url_path() returns it (decoded, its slashes joined), and a
// URL a server routes below the prefix's path without beginning with it:
// api.example.com, /v1/admin and https://api.example.com/v1/x/../admin
// for https://api.example.com/v1/admin.
func urlPrefixParts(prefix string) (host, path, example string) {
	scheme, rest, _ := strings.Cut(prefix, "://")
	authority, path, _ := strings.Cut(rest, "/")
	path = "/" + path
	host = authority
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i]
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	dir := strings.TrimSuffix(path, "/")
	i := strings.LastIndexByte(dir, '/')
	example = scheme + "://" + authority + dir[:i] + "/x/.." + path[i:]
	// The path as url_path() returns it: decoded, repeated slashes joined.
	if dec, err := url.PathUnescape(path); err == nil {
		path = dec
	}
	return host, joinSlashes(path), example
}

// joinSlashes joins the repeated slashes of p, as url_path() does.
func joinSlashes(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	return p
}

// namesBelowRoot reports whether a path prefix names something below the
// root or the working directory (/etc/, secrets/): a path can name it
// without beginning with it. / and ./ are what every path of their kind
// begins with, and ~ and . begin names a tool may read otherwise.
func namesBelowRoot(prefix string) bool {
	name := strings.TrimLeft(prefix, "/")
	return name != "" && !strings.HasPrefix(name, "~") && !strings.HasPrefix(name, ".")
}

// aside returns the start of a path that names what prefix does without
// beginning with it: /srv/../etc/ for /etc/, or /./etc/ where dots says
// the path is also tested for "..", and ./secrets/ for secrets/.
func aside(prefix string, dots bool) string {
	switch {
	case !strings.HasPrefix(prefix, "/"):
		return "./" + prefix
	case dots:
		return "/." + prefix
	}
	return "/srv/.." + prefix
}

// dotProbes returns the values that a test of a path (or a URL, where
// url is set) for .. must fail for to excuse a prefix test of it: those
// that go on from prefix with a .. segment, in the middle (traversals) or
// at the end (/srv/data/.., which names /srv, and /srv/data/../): a test
// that fails for the first alone for a word it names (passwd) does not.
func dotProbes(prefix string, url bool) []string {
	p := strings.TrimSuffix(prefix, "/")
	return append(traversals(prefix, url)[:1], p+"/..", p+"/../")
}

// percentProbes returns the URLs that a test of a URL for percent escapes
// must fail for to excuse a prefix test of it: those that go on from
// prefix with a segment a WHATWG parser reads as .., in either case, with
// a name after it and without (/v1/public/%2e%2e names /v1): a test that
// fails for the first alone for a word it names (admin) does not.
func percentProbes(prefix string) []string {
	p := strings.TrimSuffix(prefix, "/")
	var out []string
	for _, dots := range []string{"%2e%2e", "%2E%2E", ".%2e", "%2E."} {
		out = append(out, p+"/"+dots+"/admin", p+"/"+dots+"/", p+"/"+dots)
	}
	return out
}

// traversals returns the probes of a prefix test: values that begin with
// prefix and leave it once resolved. A path goes on with /../../etc/passwd;
// a URL with /../../admin, and with /%2e%2e/%2e%2e/admin, which a WHATWG
// parser reads as the same.
func traversals(prefix string, url bool) []string {
	p := strings.TrimSuffix(prefix, "/")
	if url {
		return []string{p + "/../../admin", p + "/%2e%2e/%2e%2e/admin"}
	}
	return []string{p + "/../../etc/passwd"}
}

// traversalMatches returns the prefix of the RE2 pattern p, anchored at
// its start, a value p matches that goes on from the prefix with a
// traversal out of it (leaving; "" for none), and a path beside the prefix
// that p matches (patternSibling): /srv/data-secrets for '^/srv/data.*'.
// The prefix is p's literal one ('/srv/data/' for '^/srv/data/' and
// '^/srv/data/.*', which match /srv/data/../../etc/passwd, and
// '^/srv/data/[^/]+$', which matches /srv/data/..; none for
// '^/srv/data/[a-z]+\.txt$'); where that leaves nothing, or p has none,
// it is the longest part ending in a / of a value p matches (leastSample)
// that p goes on from with a traversal: '/srv/data/' for
// '^/srv/(data|reports)/' and for '^/srv/data/.*\.csv$', which matches
// /srv/data/../../x/.csv, or, before those, that value where p goes on
// from it with one: '/srv/data' for '^/srv/(data|reports).*'. A pattern with no such part whose literal
// prefix names nothing below the root (or, for a URL, no path) has the
// value it matches as its prefix, which it names on the side that blocks:
// /etc/passwd for '^/(etc|root)/passwd$'.
func traversalMatches(p string, url bool) (prefix, probe, sibling string) {
	prefix, m, _ := literalPrefix(p)
	if prefix != "" {
		_, sibling = patternSibling(p)
		if probe = leaving(prefix, "", url, m); probe != "" {
			return prefix, probe, sibling
		}
	}
	re, m, ok := parsePattern(p)
	if !ok || re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return prefix, "", sibling
	}
	s, ok := leastSample(re)
	if l := strings.ToLower(s); ok && m.MatchString(l) {
		s = l
	} else if !ok || !m.MatchString(s) {
		return prefix, "", sibling
	}
	if !strings.HasSuffix(s, "/") {
		// It goes on from the whole value ('^/srv/(data|reports).*').
		if probe := leaving(s, "", url, m); probe != "" {
			return s, probe, sibling
		}
	}
	for i := len(s); i > 0; i-- {
		if s[i-1] != '/' {
			continue
		}
		if probe := leaving(s[:i], s[i:], url, m); probe != "" {
			return s[:i], probe, sibling
		}
	}
	if prefix == "" || !namesBelowRoot(prefix) || url && !reachesPath(prefix) {
		// What it names is that value's.
		prefix = s
	}
	return prefix, "", sibling
}

// leaving returns the first of the values that go on from prefix with a
// traversal out of it that m matches, or "": those of traversals, one
// that ends with .. after it (/srv/data/..), and, where rest is what
// follows prefix in a value m matches, that value with a traversal
// between the two.
func leaving(prefix, rest string, url bool, m *regexp.Regexp) string {
	probes := append(traversals(prefix, url), strings.TrimSuffix(prefix, "/")+"/..")
	if rest != "" {
		probes = append(probes, prefix+"../../x/"+rest)
		if url {
			probes = append(probes, prefix+"%2e%2e/%2e%2e/x/"+rest)
		}
	}
	if i := slices.IndexFunc(probes, m.MatchString); i >= 0 {
		return probes[i]
	}
	return ""
}

// literalPrefix returns the literal prefix of the RE2 pattern p, where p
// is anchored at its start with one ('/srv/data/' for '^/srv/data/.*'),
// p compiled, and what follows the prefix in p (nil for nothing).
func literalPrefix(p string) (string, *regexp.Regexp, *syntax.Regexp) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return "", nil, nil
	}
	var prefix []rune
	var next *syntax.Regexp
	for _, s := range re.Sub[1:] {
		if s.Op != syntax.OpLiteral || s.Flags&syntax.FoldCase != 0 {
			next = s
			break
		}
		prefix = append(prefix, s.Rune...)
	}
	m, err := regexp.Compile(p)
	if len(prefix) == 0 || err != nil {
		return "", nil, nil
	}
	return string(prefix), m, next
}

// patternSibling returns the literal prefix of the RE2 pattern p and, as
// siblingProbe does, a path beside the one it names that p matches (or ""):
// /v1/public-secrets for '^/v1/public.*'. A pattern whose prefix is
// followed by a class of characters without a / ('^/v1/agent[^/]*',
// '^/v1/run[-a-z0-9]+$') says how the name goes on, and has none.
func patternSibling(p string) (prefix, sibling string) {
	prefix, m, next := literalPrefix(p)
	if prefix == "" {
		return "", ""
	}
	for next != nil && len(next.Sub) == 1 && (next.Op == syntax.OpStar || next.Op == syntax.OpPlus ||
		next.Op == syntax.OpQuest || next.Op == syntax.OpRepeat || next.Op == syntax.OpCapture) {
		next = next.Sub[0]
	}
	if next != nil && next.Op == syntax.OpCharClass && !classHolds(next.Rune, '/') {
		return prefix, ""
	}
	sibling, _ = siblingProbe(prefix, m.MatchString)
	return prefix, sibling
}

// classHolds reports whether the ranges of a character class (pairs of
// their first and last runes) hold r.
func classHolds(ranges []rune, r rune) bool {
	for i := 0; i+1 < len(ranges); i += 2 {
		if ranges[i] <= r && r <= ranges[i+1] {
			return true
		}
	}
	return false
}

// siblingProbe returns a path beside the one prefix names, not below it,
// that a prefix test with it holds for (and match, when set, matches):
// /v1/public-secrets for /v1/public, where prefix names something below
// the root (namesBelowRoot) and ends in a letter or a digit, in a name
// that may go on. A prefix ending in a / names a directory, and one
// ending in another character ('/tmp/upload-', '/srv/report.',
// '/v1/items:') the start of a name by design.
func siblingProbe(prefix string, match func(string) bool) (string, bool) {
	last, _ := utf8.DecodeLastRuneInString(prefix)
	if !unicode.IsLetter(last) && !unicode.IsDigit(last) || !namesBelowRoot(prefix) {
		return "", false
	}
	probe := prefix + "-secrets"
	if match != nil && !match(probe) {
		return "", false
	}
	return probe, true
}

// siblingAdvice says that a prefix test (what: startsWith('/v1/public'),
// the pattern '^/v1/public.*') also holds for sibling, a path beside the
// one prefix names, and what to write.
func siblingAdvice(prefix, sibling, what string) string {
	fix := fmt.Sprintf("end the prefix with a / ('%s/'), or write == '%s' || startsWith('%s/') where %s itself is meant", prefix, prefix, prefix, prefix)
	if !strings.HasPrefix(what, "startsWith") {
		fix = fmt.Sprintf("end the prefix with a / ('%s/'), or follow it with (/|$)", prefix)
	}
	return fmt.Sprintf("also holds for %s, beside %s rather than below it, as the prefix does not end in a /; %s", sibling, prefix, fix)
}
