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

// A RegexpField is a regular expression an entry's config holds: its
// path under the entry (patterns.0, arg_patterns.1.pattern) and the
// pattern.
type RegexpField struct {
	Path, Pattern string
}

// Regexps returns the RE2 regular expressions of the entry's config, in
// the order written.
func (e *Entry) Regexps() []RegexpField {
	field, ok := regexpFields[e.Use]
	if !ok {
		return nil
	}
	var out []RegexpField
	list, _ := e.Fields[field].([]any)
	for i, item := range list {
		at := fmt.Sprintf("%s.%d", field, i)
		pat, ok := item.(string)
		if m, isMap := item.(map[string]any); isMap {
			pat, ok = m["pattern"].(string)
			at += ".pattern"
		}
		if ok {
			out = append(out, RegexpField{Path: at, Pattern: pat})
		}
	}
	return out
}

// checkRegexps compiles the entry's regular expressions, so that a pattern
// Go's RE2 engine refuses is a vet error at the construct it refuses.
func (l *loader) checkRegexps(e *Entry, path []string) {
	for _, r := range e.Regexps() {
		l.checkRegexp(append(append([]string{}, path...), strings.Split(r.Path, ".")...), r.Pattern)
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

// RegexpNeverMatches reports whether the RE2 pattern pat matches no text
// at all, and says why: an end-of-text assertion ($ without the m flag, or
// \z) with text required after it ('drop$table', where \s+ or \$ was
// meant), a start-of-text assertion (^ without the m flag, or \A) with text
// required before it, or a character class that holds no character
// ([^\x00-\x{10FFFF}]). It is sound: a pattern it reports can match
// nothing, and one it cannot decide (word boundaries, the m flag's ^ and
// $) counts as one that may match. A pattern RE2 refuses is left to
// checkRegexp.
func RegexpNeverMatches(pat string) (why string, never bool) {
	re, err := syntax.Parse(pat, syntax.Perl)
	if err != nil {
		return "", false
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return "", false
	}
	// A state is where the program is, whether a character has been
	// consumed (the position is past the start of the text, where ^ fails)
	// and whether $ has been asserted (no character may follow). A search
	// may start at the start of the text, so the first state has neither.
	type state struct {
		pc              uint32
		consumed, ended bool
	}
	const (
		afterEnd = 1 << iota
		beforeStart
		emptyClass
	)
	var dead int
	seen := map[state]bool{}
	todo := []state{{pc: uint32(prog.Start)}}
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[s] {
			continue
		}
		seen[s] = true
		in := &prog.Inst[s.pc]
		next := s
		next.pc = in.Out
		switch in.Op {
		case syntax.InstMatch:
			return "", false
		case syntax.InstFail:
			dead |= emptyClass
			continue
		case syntax.InstAlt, syntax.InstAltMatch:
			alt := s
			alt.pc = in.Arg
			todo = append(todo, alt)
		case syntax.InstEmptyWidth:
			op := syntax.EmptyOp(in.Arg)
			if op&syntax.EmptyBeginText != 0 && s.consumed {
				dead |= beforeStart
				continue
			}
			if op&syntax.EmptyEndText != 0 {
				next.ended = true
			}
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL:
			if s.ended {
				dead |= afterEnd
				continue
			}
			if in.Op == syntax.InstRune && len(in.Rune) == 0 {
				dead |= emptyClass
				continue
			}
			next.consumed = true
		}
		todo = append(todo, next)
	}
	var whys []string
	if dead&afterEnd != 0 {
		whys = append(whys, "$ (or \\z) matches only at the end of the text, yet the pattern requires text after it (write \\$ for a dollar sign, \\s+ for white space)")
	}
	if dead&beforeStart != 0 {
		whys = append(whys, "^ (or \\A) matches only at the start of the text, yet the pattern requires text before it (write \\^ for a caret)")
	}
	if dead&emptyClass != 0 {
		whys = append(whys, "a character class in it holds no character")
	}
	return strings.Join(whys, "; "), true
}
