package dsl

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"cuelang.org/go/cue/ast"
)

// regexpFields lists the config fields that hold RE2 regular expressions:
// a list of patterns, or a list of structs with a "pattern" field.
var regexpFields = map[string]string{
	"security":       "patterns",
	"content_filter": "patterns",
	"redact":         "patterns",
	"tool_policy":    "arg_patterns",
}

// checkRegexps compiles the entry's regular expressions, so that a pattern
// Go's RE2 engine refuses is a vet error at the construct it refuses.
func (l *loader) checkRegexps(e *Entry, path []string) {
	field, ok := regexpFields[e.Use]
	if !ok {
		return
	}
	list, _ := e.Fields[field].([]any)
	for i, item := range list {
		pat, ok := item.(string)
		at := append(append([]string{}, path...), field, fmt.Sprint(i))
		if m, isMap := item.(map[string]any); isMap {
			pat, ok = m["pattern"].(string)
			at = append(at, "pattern")
		}
		if ok {
			l.checkRegexp(at, pat)
		}
	}
}

// checkRegexp reports the pattern written at path when RE2 refuses it,
// placed at the refused construct when the pattern is a literal.
func (l *loader) checkRegexp(path []string, pat string) {
	_, err := regexp.Compile(pat)
	if err == nil {
		return
	}
	msg, off := regexpProblem(pat, err)
	l.errorf(l.literalAt(path, pat).PosAt(off), "schema/invalid-value", "%s: not an RE2 regular expression: %s", fieldName(path), msg)
}

// literalAt returns s, the string written at path, as an Expr whose PosAt
// places an offset of s inside the string literal (at the literal when it
// is not one, such as a string built by interpolation).
func (l *loader) literalAt(path []string, s string) *Expr {
	x := &Expr{Source: s, Pos: l.userPos(path)}
	if lit, ok := l.pos.node[strings.Join(path, ".")].(*ast.BasicLit); ok {
		x.lit = lit.Value
		x.Pos = cuePos(lit.Pos(), x.Pos)
	}
	return x
}

// regexpProblem says why RE2 refuses pat (err, from regexp.Compile) and
// returns the offset of the refused construct in pat. The constructs of
// backtracking engines (PCRE, JavaScript, Python) that RE2 leaves out on
// purpose, to match in time linear in the text, are named as such.
func regexpProblem(pat string, err error) (string, int) {
	var se *syntax.Error
	if !errors.As(err, &se) {
		return strings.TrimPrefix(err.Error(), "error parsing regexp: "), 0
	}
	off := max(strings.Index(pat, se.Expr), 0)
	const linear = "RE2 syntax, which matches in time linear in the text, has"
	construct := func(n int) string { return "`" + se.Expr[:min(n, len(se.Expr))] + "`" }
	switch {
	case strings.HasPrefix(se.Expr, "(?<=") || strings.HasPrefix(se.Expr, "(?<!"):
		return fmt.Sprintf("%s is a lookbehind, and %s no lookbehind or lookahead: match the text before as part of the pattern", construct(4), linear), off
	case se.Expr == "(?=" || se.Expr == "(?!":
		return fmt.Sprintf("%s is a lookahead, and %s no lookahead or lookbehind: match the text after as part of the pattern", construct(3), linear), off
	case se.Code == syntax.ErrInvalidEscape && len(se.Expr) == 2 && (se.Expr[1] >= '1' && se.Expr[1] <= '9' || se.Expr[1] == 'k'):
		return fmt.Sprintf("%s is a backreference, and %s no backreferences: write out the text the group matches", construct(2), linear), off
	case se.Expr == "(?>":
		return fmt.Sprintf("%s is an atomic group, and %s none (it never backtracks): write a plain group (?:...)", construct(3), linear), off
	case se.Code == syntax.ErrInvalidRepeatOp && strings.HasSuffix(se.Expr, "+"):
		return fmt.Sprintf("`%s` is a possessive quantifier, and %s none (it never backtracks): drop the last +", se.Expr, linear), off
	}
	return fmt.Sprintf("%s: `%s`", se.Code, se.Expr), off
}
