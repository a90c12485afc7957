package dsl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"regexp/syntax"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// cueString returns pat as a CUE string literal and, for each byte of pat
// and one past its end, the offset in the literal of the text it is
// written with.
func cueString(pat string) (string, []int) {
	var b strings.Builder
	at := make([]int, 0, len(pat)+1)
	b.WriteByte('"')
	for _, r := range pat {
		start := b.Len()
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
		for range utf8.RuneLen(r) {
			at = append(at, start)
		}
	}
	at = append(at, b.Len())
	b.WriteByte('"')
	return b.String(), at
}

// FuzzRegexpField: any pattern of a regex field either compiles and draws
// no RE2 diagnostic, or draws one placed, inside its string literal, at
// the construct RE2 refuses: the offset regexpProblem gives holds what RE2
// names.
func FuzzRegexpField(f *testing.F) {
	for _, s := range []string{`^x(?<=https://)evil`, `(?<!foo)bar`, `a(?=b)`, `"(a)\1`, `ab*+c`, `a(b`, `x\k<n>`, `(?>ab)`,
		`é(?<=x)`, "a\n(?=b)", `\p{Foo}`, `[z-a]`, `x{2,1}`, `a**`, `(?P<n>a)(?P<n>b)`, `\8`, `ok`, `\Q(?=\E(?=`} {
		f.Add(s)
	}
	schema, dir, path := fuzzPolicy(f)
	const prefix = `chains: chat: [{use: "redact", patterns: [`
	f.Fuzz(func(t *testing.T, pat string) {
		if !utf8.ValidString(pat) || strings.ContainsRune(pat, '\r') {
			return
		}
		_, compileErr := regexp.Compile(pat)
		if compileErr != nil {
			msg, off := regexpProblem(pat, compileErr)
			if msg == "" || off < 0 || off > len(pat) {
				t.Fatalf("%q: %q at %d", pat, msg, off)
			}
			var se *syntax.Error
			if errors.As(compileErr, &se) && off > 0 && !strings.HasPrefix(pat[off:], se.Expr) {
				t.Fatalf("%q: offset %d does not hold %q", pat, off, se.Expr)
			}
		}
		lit, at := cueString(pat)
		if err := os.WriteFile(path, []byte("package p\n\n"+prefix+lit+"]}]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, diags, err := Load(context.Background(), []string{dir}, Options{Schema: schema, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("%q: %v", pat, err)
		}
		var re2 []Diagnostic
		for _, d := range diags {
			if strings.Contains(d.Message, "not an RE2 regular expression") {
				re2 = append(re2, d)
			}
		}
		if compileErr == nil {
			if len(re2) > 0 {
				t.Fatalf("%q compiles, yet %v", pat, re2)
			}
			return
		}
		if len(re2) != 1 {
			t.Fatalf("%q: %v: %d RE2 diagnostics: %v", pat, compileErr, len(re2), diags)
		}
		_, off := regexpProblem(pat, compileErr)
		want := len(prefix) + 1 + at[off]
		if d := re2[0]; d.Pos.Line != 3 || d.Pos.Col != want {
			t.Fatalf("%q: %v placed at %d:%d, want 3:%d (pattern offset %d)", pat, compileErr, d.Pos.Line, d.Pos.Col, want, off)
		}
	})
}

// FuzzRegexpNeverMatches: a pattern RegexpNeverMatches reports matches no
// text, the fuzzed one nor any of its substrings.
func FuzzRegexpNeverMatches(f *testing.F) {
	for _, s := range []string{`a$b`, `^a$`, `a^b`, `$^`, `(a|$)b`, `x\z`, `[^\x00-\x{10FFFF}]`, `a$b?`} {
		f.Add(s, "ab")
	}
	f.Fuzz(func(t *testing.T, pat, text string) {
		re, err := regexp.Compile(pat)
		if err != nil {
			return
		}
		if _, never := RegexpNeverMatches(pat); never && re.MatchString(text) {
			t.Fatalf("%q reported as never matching, yet it matches %q", pat, text)
		}
		if _, never := RegexpNeverMatches(pat); never && re.MatchString(pat) {
			t.Fatalf("%q reported as never matching, yet it matches itself", pat)
		}
	})
}
