package compiler

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"

	"github.com/google/cel-go/common/ast"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/argpath"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// checkPathPrefixes reports, as cel/loose-match, each prefix test of a
// path a tool's path_arg names (startsWith('/srv/data/'), or matches() and
// matches_any() with a pattern anchored at its start that also matches the
// prefix followed by ../) that sits where lets says it lets calls through,
// when no file_check layer covers the tool: /srv/data/../../etc/passwd
// begins with /srv/data/ and names /etc/passwd. A test of path_clean() of
// the path, or one beside a test of the same path for "..", is not one.
func (c *Compilation) checkPathPrefixes(x *dsl.Expr, stage predicate.Stage, tools []string, lets func(pol int) (string, bool)) {
	if stage != predicate.Tool {
		return
	}
	paths := c.uncheckedPathArgs(tools)
	if len(paths) == 0 {
		return
	}
	tree, ok := predicate.ParseSyntax(x.Source)
	if !ok {
		return
	}
	f := folder{src: x.Source, info: tree.SourceInfo()}
	type test struct {
		at   ast.Expr
		key  string
		what string
		pol  int
		// prefix is the literal prefix the test reads.
		prefix string
	}
	var tests []test
	dots := map[string]bool{} // the paths tested for ".."
	var scope locals
	walkPolarity(tree.Expr(), polarityHooks{scope: scope.enter, call: func(call ast.CallExpr, pol int) {
		args := call.Args()
		target := call.Target()
		if !call.IsMemberFunction() && len(args) > 0 {
			target = args[0]
		}
		if scope.shadows(pathKey(target)) {
			return // a comprehension variable named args
		}
		pattern := ""
		switch fn := call.FunctionName(); {
		case fn == "contains" && call.IsMemberFunction() && len(args) == 1:
			if s, ok := stringLiteral(args[0]); ok && strings.Contains(s, "..") {
				dots[pathKey(call.Target())] = true
			}
			return
		case fn == "startsWith" && call.IsMemberFunction() && len(args) == 1:
			if s, ok := stringLiteral(args[0]); ok && paths[pathKey(call.Target())] != "" {
				tests = append(tests, test{args[0], pathKey(call.Target()), fmt.Sprintf("startsWith('%s')", s), pol, s})
			}
			return
		case fn == "matches" && call.IsMemberFunction() && len(args) == 1:
			target = call.Target()
			pattern, _ = stringLiteral(args[0])
		case fn == "matches" && !call.IsMemberFunction() && len(args) == 2:
			target = args[0]
			pattern, _ = stringLiteral(args[1])
		case fn == "matches_any" && len(args) == 2 && args[1].Kind() == ast.ListKind:
			for _, el := range args[1].AsList().Elements() {
				if p, ok := stringLiteral(el); ok && paths[pathKey(args[0])] != "" {
					if prefix, ok := traversalMatches(p); ok {
						tests = append(tests, test{el, pathKey(args[0]), fmt.Sprintf("the pattern '%s'", p), pol, prefix})
					}
				}
			}
			return
		default:
			return
		}
		if strings.Contains(pattern, `\.\.`) {
			dots[pathKey(target)] = true
		} else if prefix, ok := traversalMatches(pattern); ok && paths[pathKey(target)] != "" {
			tests = append(tests, test{args[len(args)-1], pathKey(target), fmt.Sprintf("the pattern '%s'", pattern), pol, prefix})
		}
	}})
	for _, t := range tests {
		outcome, ok := lets(t.pol)
		if !ok || dots[t.key] {
			continue
		}
		c.report(dsl.Warnf(x.PosAt(f.offset(t.at)), ruleLooseMatch,
			"%s on %s, a prefix test of %s, the path %s: it also holds for a path that goes on with ../ out of the prefix, such as %s, and no file_check layer covers the tool; test path_clean(%s), the path with . and .. resolved, or add a file_check layer with the roots",
			outcome, t.what, t.key, paths[t.key], traversal(t.prefix), t.key))
	}
}

// uncheckedPathArgs returns the arguments (args.path) that a path_arg of a
// tool in scope (every declared tool when scope is empty) names at the top
// of its arguments, with what the message says of them ("read_file's
// path_arg names"), leaving out the tools a file_check layer covers.
func (c *Compilation) uncheckedPathArgs(scope []string) map[string]string {
	p := c.Policy
	if len(scope) == 0 {
		scope = sortedNames(p.Tools)
	}
	covered := func(tool string) bool {
		for _, e := range p.Chains["tool"] {
			if e.Use == "file_check" && (len(e.Tools) == 0 || slices.Contains(e.Tools, tool)) {
				return true
			}
		}
		return false
	}
	out := map[string]string{}
	for _, name := range scope {
		t := p.Tools[name]
		if t == nil || covered(name) {
			continue
		}
		for _, ref := range t.PathArgs {
			a, err := argpath.Parse(ref)
			if err != nil || len(a.Tokens()) != 1 {
				continue
			}
			key := "args." + a.Tokens()[0]
			if out[key] == "" {
				out[key] = fmt.Sprintf("%s's path_arg names", name)
			}
		}
	}
	return out
}

// traversal returns a path that begins with prefix and leaves it.
func traversal(prefix string) string {
	return strings.TrimSuffix(prefix, "/") + "/../../etc/passwd"
}

// traversalMatches returns the literal prefix of the RE2 pattern p when p
// is anchored at its start with one and also matches it followed by ../
// ('^/srv/data/', '^/srv/data/.*', but not '^/srv/data/[a-z]+\.txt$').
func traversalMatches(p string) (string, bool) {
	re, err := syntax.Parse(p, syntax.Perl)
	if err != nil || re.Op != syntax.OpConcat || len(re.Sub) < 2 || re.Sub[0].Op != syntax.OpBeginText {
		return "", false
	}
	var prefix []rune
	for _, s := range re.Sub[1:] {
		if s.Op != syntax.OpLiteral || s.Flags&syntax.FoldCase != 0 {
			break
		}
		prefix = append(prefix, s.Rune...)
	}
	m, err := regexp.Compile(p)
	if len(prefix) == 0 || err != nil {
		return "", false
	}
	return string(prefix), m.MatchString(traversal(string(prefix)))
}
