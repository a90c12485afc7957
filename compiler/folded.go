package compiler

import (
	"fmt"
	"net"
	"net/url"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// A fold is a function whose result a predicate compares: url_host(),
// lower(), lowerAscii() and upperAscii() return strings of a known form,
// and a constant not of that form never equals them.
type fold struct {
	// call is how the message names the function ("url_host()").
	call string
	// host: the result is a host name, lower-cased, without a trailing
	// dot, port or brackets (url_host()).
	host bool
	// ascii: only ASCII letters are lower-cased (lowerAscii()).
	ascii bool
	// upper: ASCII letters are upper-cased instead (upperAscii()).
	upper bool
	// path: the result is a URL's path as a server routes it, its case
	// kept, without "//", a "." or ".." segment or a ";" (url_path()).
	path bool
}

// foldOf returns the fold of e when e is a call of url_host(), url_path(), lower(),
// lowerAscii() or upperAscii() (lower() of url_host() is a host).
func foldOf(e ast.Expr) (fold, bool) {
	if e.Kind() != ast.CallKind {
		return fold{}, false
	}
	c := e.AsCall()
	switch fn := c.FunctionName(); {
	case fn == "url_host" && (len(c.Args()) == 1 && !c.IsMemberFunction() || len(c.Args()) == 0 && c.IsMemberFunction()):
		return fold{call: "url_host()", host: true}, true
	case fn == "url_path" && (len(c.Args()) == 1 && !c.IsMemberFunction() || len(c.Args()) == 0 && c.IsMemberFunction()):
		return fold{call: "url_path()", path: true}, true
	case fn == "lower" && len(c.Args()) == 1 && !c.IsMemberFunction():
		if inner, ok := foldOf(c.Args()[0]); ok && inner.host {
			return inner, true
		}
		return fold{call: "lower()"}, true
	case fn == "lowerAscii" && len(c.Args()) == 0 && c.IsMemberFunction():
		if inner, ok := foldOf(c.Target()); ok && inner.host {
			return inner, true
		}
		return fold{call: "lowerAscii()", ascii: true}, true
	case fn == "upperAscii" && len(c.Args()) == 0 && c.IsMemberFunction():
		return fold{call: "upperAscii()", ascii: true, upper: true}, true
	}
	return fold{}, false
}

// lowered returns s as the fold writes it: lower-cased (upper-cased for
// upperAscii()).
func (f fold) lowered(s string) string {
	switch {
	case f.upper:
		return shiftASCII(s, 'a', 'A')
	case f.ascii:
		return shiftASCII(s, 'A', 'a')
	}
	return strings.ToLower(s)
}

// shiftASCII returns s with each ASCII letter of the case that starts at
// from written in the case that starts at to.
func shiftASCII(s string, from, to rune) string {
	return strings.Map(func(r rune) rune {
		if r >= from && r <= from+'z'-'a' {
			return r + to - from
		}
		return r
	}, s)
}

// cased says how the fold writes its value's letters.
func (f fold) cased() string {
	if f.upper {
		return "upper-cased"
	}
	return "lower-cased"
}

// neverMatches says why a value of the fold never matches the regular
// expression pattern: each match needs a letter the fold never writes (a
// capital, for a lower-casing fold); "" when a match may need none, or the
// pattern does not parse.
func (f fold) neverMatches(pattern string) string {
	if f.path {
		return ""
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return ""
	}
	if !f.canMatch(re.Simplify()) {
		letter := "a capital"
		if f.upper {
			letter = "a lower-case letter"
		}
		return fmt.Sprintf("it returns the value %s, and every match needs %s", f.cased(), letter)
	}
	return ""
}

// canMatch reports whether re may match a string the fold writes (all its
// letters cased as the fold cases them), counting a class as able to
// wherever it holds a rune other than the ASCII letters the fold never
// writes: false only where every match needs such a letter.
func (f fold) canMatch(re *syntax.Regexp) bool {
	never := func(r rune) bool { return f.lowered(string(r)) != string(r) && r < utf8.RuneSelf }
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 {
			return true
		}
		return !slices.ContainsFunc(re.Rune, never)
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if !never(r) {
					return true
				}
			}
		}
		return false
	case syntax.OpStar, syntax.OpQuest:
		return true
	case syntax.OpRepeat:
		return re.Min == 0 || f.canMatch(re.Sub[0])
	case syntax.OpPlus, syntax.OpCapture:
		return f.canMatch(re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if !f.canMatch(sub) {
				return false
			}
		}
		return true
	case syntax.OpAlternate:
		return slices.ContainsFunc(re.Sub, f.canMatch)
	}
	return true
}

// never says why a value of the fold never passes test (==, !=, in:
// equals s; startsWith, endsWith, contains: holds it), with the constant
// it was likely meant as ("" when none); "" when it may.
func (f fold) never(s, test string) (why, meant string) {
	whole := test == "==" || test == "!=" || test == "in"
	suffix := test == "endsWith"
	if f.path {
		return pathNever(s, test)
	}
	if f.host {
		if i := strings.IndexAny(s, "/?#@[] \t\r\n"); i >= 0 {
			why = fmt.Sprintf("a host holds no %q", s[i:i+1])
			if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
				meant = strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
			}
			return why, meant
		}
		if (whole || suffix) && strings.HasSuffix(s, ".") {
			return "it returns the host without a trailing dot", f.lowered(strings.TrimSuffix(s, "."))
		}
		if h, port, err := net.SplitHostPort(s); whole && err == nil && port != "" && net.ParseIP(s) == nil {
			// A name or an IPv4 address with a port; an IPv6 address
			// holds colons of its own.
			return "it returns the host without its port", f.lowered(strings.TrimSuffix(h, "."))
		}
	}
	if l := f.lowered(s); l != s {
		return "it returns the value " + f.cased(), l
	}
	return "", ""
}

// pathNever says why url_path() never passes test with s, as never does:
// it returns the path alone (no scheme and host), decoded, its repeated
// slashes joined, its "." and ".." segments resolved and its backslashes
// read as slashes, and refuses a ";", a "%" before two hex digits and a
// segment that ends in a dot or a space or holds ":$". A "." or
// ".." at an end of s that the path may go on from ("/v1/.." as a prefix,
// of "/v1/..x") is not a segment.
func pathNever(s, test string) (why, meant string) {
	if scheme, rest, ok := strings.Cut(s, "://"); ok && scheme != "" && !strings.Contains(scheme, "/") {
		if _, p, ok := strings.Cut(rest, "/"); ok {
			meant = "/" + p
		}
		return "it returns the path alone, without the scheme and host", meant
	}
	if strings.Contains(s, "//") {
		return "it joins repeated slashes", joinSlashes(s)
	}
	if strings.Contains(s, ";") {
		return "it refuses a path holding \";\"", ""
	}
	if dec, err := url.PathUnescape(s); err == nil && dec != s {
		// s holds an escape, "%" and two hex digits.
		return "it returns the path decoded, and refuses one still holding an escape", dec
	}
	if strings.Contains(s, `\`) {
		return "it reads a backslash as a slash (and refuses one in a URL of another scheme)", joinSlashes(strings.ReplaceAll(s, `\`, "/"))
	}
	segs := strings.Split(s, "/")
	lo, hi := 0, len(segs)
	if test == "startsWith" || test == "contains" {
		hi--
	}
	if test == "endsWith" || test == "contains" {
		lo++
	}
	for _, seg := range segs[max(lo, 0):max(hi, lo, 0)] {
		if seg == "." || seg == ".." {
			return "it resolves . and .. segments", ""
		}
	}
	// A segment's end is the constant's where the path cannot go on from
	// it: all but the last of a startsWith() or contains() constant.
	for i, seg := range segs {
		if strings.Contains(seg, ":$") {
			for i, seg := range segs {
				segs[i], _, _ = strings.Cut(seg, ":")
			}
			return "it refuses a segment holding \":$\", an NTFS stream to a Windows server", strings.Join(segs, "/")
		}
		if i == len(segs)-1 && (test == "startsWith" || test == "contains") || seg == "." || seg == ".." {
			continue
		}
		if strings.HasSuffix(seg, ".") || strings.HasSuffix(seg, " ") {
			for i, seg := range segs {
				if seg != "." && seg != ".." && (i < len(segs)-1 || test != "startsWith" && test != "contains") {
					segs[i] = strings.TrimRight(seg, ". ")
				}
			}
			return "it refuses a segment that ends in a dot or a space, which a Windows server drops", strings.Join(segs, "/")
		}
	}
	return "", ""
}

// checkFoldedLiterals reports each comparison of a url_host(), url_path(),
// lower() or lowerAscii() result with a string constant it never equals, and each
// endsWith(), startsWith() or contains() test of one with a constant it
// never holds: url_host(args.url) == 'Evil.com' is always false (the host
// is lower-cased), so a deny with it never fires. The severity follows
// what the dead test makes of the predicate of the field given, as for
// the other cel/unknown-value findings: a warning where it can only make
// it fail closed, an error otherwise.
func (c *Compilation) checkFoldedLiterals(x *dsl.Expr, field string) {
	tree, ok := predicate.ParseSyntax(x.Source)
	if !ok {
		return
	}
	f := folder{src: x.Source, info: tree.SourceInfo()}
	src := f.exprText
	whole := func(test string) bool { return test == "==" || test == "!=" || test == "in" }
	report := func(fo fold, target, constant ast.Expr, s, test string, always, live bool, pol int) {
		why, meant := fo.never(s, test)
		if why == "" {
			return
		}
		if !always {
			pol = -pol
		}
		sev := dsl.Error
		var note string
		if closed := closedWhenTrue(field, pol); closed != "" {
			sev, note = dsl.Warning, ": "+closed
		}
		if live {
			// Another constant of the list may match: this one is dead,
			// the test is not.
			sev, note = dsl.Warning, " (its other values may)"
		}
		var outcome string
		switch test {
		case "==", "!=":
			outcome = fmt.Sprintf("%s %s '%s' is always %t", src(target), test, s, always)
		case "in":
			outcome = "the in test is always false"
			if live {
				outcome = fmt.Sprintf("'%s' in the list never matches", s)
			}
		default:
			outcome = fmt.Sprintf("%s.%s('%s') is always false", src(target), test, s)
		}
		msg := fmt.Sprintf("%s never returns a value that %s '%s': %s, so %s%s", fo.call, map[bool]string{true: "is", false: "holds"}[whole(test)], s, why, outcome, note)
		if meant != "" && meant != s {
			msg += fmt.Sprintf("; did you mean '%s'?", meant)
		}
		c.report(dsl.Diagnostic{Pos: x.PosAt(f.offset(constant)), Severity: sev, Rule: ruleUnknownValue, Message: msg})
	}
	walkPolarity(tree.Expr(), polarityHooks{call: func(call ast.CallExpr, pol int) {
		args := call.Args()
		switch fn := call.FunctionName(); {
		case (fn == operators.Equals || fn == operators.NotEquals) && len(args) == 2:
			for i := range args {
				fo, ok := foldOf(args[i])
				s, lit := stringLiteral(args[1-i])
				if ok && lit {
					report(fo, args[i], args[1-i], s, map[bool]string{true: "==", false: "!="}[fn == operators.Equals], fn == operators.NotEquals, false, pol)
				}
			}
		case fn == operators.In && len(args) == 2 && args[1].Kind() == ast.ListKind:
			if fo, ok := foldOf(args[0]); ok {
				els := args[1].AsList().Elements()
				live := false
				for _, el := range els {
					s, lit := stringLiteral(el)
					if why, _ := fo.never(s, "in"); !lit || why == "" {
						live = true
					}
				}
				for _, el := range els {
					if s, lit := stringLiteral(el); lit {
						report(fo, args[0], el, s, "in", false, live, pol)
					}
				}
			}
		case fn == "matches" && (call.IsMemberFunction() && len(args) == 1 || !call.IsMemberFunction() && len(args) == 2):
			target, pattern := call.Target(), args[0]
			if !call.IsMemberFunction() {
				target, pattern = args[0], args[1]
			}
			fo, ok := foldOf(target)
			s, lit := stringLiteral(pattern)
			if !ok || !lit {
				break
			}
			if why := fo.neverMatches(s); why != "" {
				sev, note := dsl.Error, ""
				if closed := closedWhenTrue(field, -pol); closed != "" {
					sev, note = dsl.Warning, ": "+closed
				}
				c.report(dsl.Diagnostic{Pos: x.PosAt(f.offset(pattern)), Severity: sev, Rule: ruleUnknownValue,
					Message: fmt.Sprintf("%s never returns a value that matches '%s': %s, so %s.matches('%s') is always false%s", fo.call, s, why, src(target), s, note)})
			}
		case (fn == "endsWith" || fn == "startsWith" || fn == "contains") && call.IsMemberFunction() && len(args) == 1:
			if fo, ok := foldOf(call.Target()); ok {
				if s, lit := stringLiteral(args[0]); lit {
					report(fo, call.Target(), args[0], s, fn, false, false, pol)
				}
			}
		}
	}})
}
