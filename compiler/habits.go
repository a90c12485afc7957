package compiler

import (
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/dsl"
)

// celEscapes are the escapes a CEL string accepts after a backslash.
const celEscapes = `\'"?abfnrtvxuU01234567` + "`"

var unexpectedWordRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`unexpected '(and|or|not|AND|OR|NOT)'|extraneous input '(and|or|not|AND|OR|NOT)'|mismatched input '(and|or|not|AND|OR|NOT)'`)
})

// habitHint completes a CEL issue caused by another language's habit (=
// for ==, and for &&, len() for size(), list.contains(x) for x in list, a
// regular expression's \. in a string) with what CEL writes instead. offset is the byte offset
// in src.
func habitHint(src string, offset int, msg string) string {
	at := func(i int) byte {
		if i < 0 || i >= len(src) {
			return 0
		}
		return src[i]
	}
	switch {
	case strings.Contains(msg, "token recognition error at: '= ") || strings.HasSuffix(msg, "token recognition error at: '='"):
		if at(offset) == '=' && at(offset+1) != '=' && !strings.ContainsRune("=!<>", rune(at(offset-1))) {
			return "; CEL compares with ==, not ="
		}
	case strings.Contains(msg, "token recognition error at: ''") || strings.Contains(msg, "token recognition error at: '\""):
		if q := at(offset); q == '\'' || q == '"' {
			if esc := badEscape(src[offset:], q); esc != "" {
				cel := `\` + esc
				return "; `" + esc + "` is not an escape of a CEL string: the CEL text needs `" + cel + "`, written `" + strings.ReplaceAll(cel, `\`, `\\`) + "` in a CUE \"...\" string or `" + cel + "` in a #\"...\"# one"
			}
		}
	case strings.Contains(msg, "token recognition error at: '") && offset >= 0 && offset < len(src) && src[offset] >= utf8.RuneSelf:
		r, _ := utf8.DecodeRuneInString(src[offset:])
		return "; " + dsl.RuneNote(r) + " is not ASCII: CEL names and operators are, so retype it"
	case strings.Contains(msg, "extraneous input '>'") && at(offset-1) == '<':
		return "; CEL writes != for not equal"
	case unexpectedWordRE().MatchString(msg):
		return "; CEL writes && for and, || for or, ! for not"
	case msg == "undeclared reference to 'len'":
		return "; CEL writes size(x) for the length of a string, list or map"
	case msg == "undeclared reference to 'True'" || msg == "undeclared reference to 'False'":
		return "; CEL writes true and false in lower case"
	case msg == "undeclared reference to 'None'" || msg == "undeclared reference to 'nil'":
		return "; CEL writes null"
	case strings.HasPrefix(msg, "found no matching overload for 'contains' applied to 'list("):
		return "; contains() looks for a substring of a string: for an element of a list write x in list, or list.exists(e, e.contains('...')) for a substring of an element"
	case strings.HasPrefix(msg, "found no matching overload for 'contains' applied to 'map("):
		return "; contains() looks for a substring of a string: for a key of a map write 'key' in map"
	case strings.HasPrefix(msg, "found no matching overload for '@in' applied to '(string, string)'"):
		return "; `in` tests membership in a list or map: for a substring write s.contains('...')"
	}
	return ""
}

// badEscape returns the first invalid escape (a backslash and the
// character after it) of the quoted CEL string at the start of s, "" if
// there is none before the closing quote.
func badEscape(s string, quote byte) string {
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case quote:
			return ""
		case '\\':
			if i+1 >= len(s) {
				return ""
			}
			if !strings.ContainsRune(celEscapes, rune(s[i+1])) {
				return s[i : i+2]
			}
			i++
		}
	}
	return ""
}
