package compiler

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Two patterns meet where some string matches both, each read as a
// search (a match anywhere, ^ and $ at the text's ends). A test of a
// literal is the pattern of its constant: startsWith('ir') is ^ir,
// endsWith('.pdf') \.pdf$, contains('-') -. Where the walk cannot
// decide (an assertion other than ^ and $, two large classes) the
// patterns are taken to meet.
func TestPatternsMeet(t *testing.T) {
	const iban = `^[A-Z]{2}[0-9]{2}[A-Z0-9]{4,30}$`
	for _, tc := range []struct {
		a, b string
		meet bool
	}{
		{iban, `^ir`, false},
		{iban, `^IR`, true},
		{iban, `^IR0`, true},
		{iban, `^IRX`, false},
		{iban, `x$`, false},
		{iban, `X$`, true},
		{iban, `01$`, true},
		{iban, `-`, false},
		{iban, `IR06`, true},
		{iban, `[a-z]`, false},
		{iban, `(?i)[a-z]`, true},
		{iban, `^.{40}`, false},
		{iban, `^.{34}$`, true},
		{`[A-Z]+`, `^ir`, true},
		{`[A-Z]+`, `x$`, true},
		{`[A-Z]+$`, `x$`, false},
		{`^ab`, `^abc`, true},
		{`^ab$`, `^abc`, false},
		{`^ab\b`, `^abc`, true}, // \b is taken to hold
		{`^(?i)ir`, `^IR`, true},
		{`^(foo|bar)-`, `^baz`, false},
		{`^a*$`, `^`, true},
		{`^a*$`, `b`, false},
		{`\Aab`, `^x`, false},
		{`^.*\.pdf$`, `\.PDF$`, false},
		{`^.*\.pdf$`, `\.pdf$`, true},
		{`(?i)^.*\.pdf$`, `\.PDF$`, true},
		{`^[^/]+$`, `/`, false},
		{`^[^/]+$`, `\.\.`, true},
		{`^\p{L}+$`, `Ж`, true},
		{`^\p{L}+$`, `1`, false},
		{`^[a-z]+$`, `(`, true}, // not Go syntax: taken to meet
	} {
		assert.Equal(t, tc.meet, patternsMeet(tc.a, tc.b), "%s %s", tc.a, tc.b)
		if _, err := regexp.Compile(tc.b); err == nil {
			assert.Equal(t, tc.meet, patternsMeet(tc.b, tc.a), "%s %s", tc.b, tc.a)
		}
	}
}

// patternsMeet is never false where a string matches both: every pair
// of a set of patterns (case folding, the Kelvin sign a folded k
// matches, Unicode classes, . beside a line break, (?m), an empty
// pattern) is checked against every string of up to four characters over
// their alphabet, and a pair some string matches both must meet.
func TestPatternsMeetIsSound(t *testing.T) {
	pats := []string{`^a`, `a$`, `^a+$`, `b`, `^(ab)+$`, `^a*b?$`, `a-b`, `^[ab]{2}$`, `-$`, `^-`, `(?i)^A`, `^[^a]*$`, `\bb`, `^$`, `a|^b`, `(?m)^b`, `^.{3}$`,
		`(?i)k`, `\x{212A}`, `^k*$`, `^[[:upper:]]+$`, `\p{Lu}$`, `^.$`, `(?s)^.$`, `\n`, `^[^\n]+$`, `(?m)a$`, `\Bk`, `^(?:a|\n){2,3}$`, ``}
	var strs []string
	var grow func(s string)
	grow = func(s string) {
		strs = append(strs, s)
		if len(s) < 4 {
			for _, c := range []string{"a", "b", "-", "A", "k", "\u212a", "\n"} {
				grow(s + c)
			}
		}
	}
	grow("")
	meets := 0
	for _, a := range pats {
		for _, b := range pats {
			ra, rb := regexp.MustCompile(a), regexp.MustCompile(b)
			both := ""
			for _, s := range strs {
				if ra.MatchString(s) && rb.MatchString(s) {
					both = s
					break
				}
			}
			got := patternsMeet(a, b)
			if both != "" {
				meets++
				assert.True(t, got, "%s and %s both match %q", a, b, both)
			}
		}
	}
	assert.Greater(t, meets, 0)
}

// Two patterns whose joint walk takes more than meetBudget steps are
// taken to meet, however they would end: the walk stops there.
func TestPatternsMeetBounded(t *testing.T) {
	// No string matches both (the second ends in c), but a string of a
	// and b leaves either pattern in any of its 400 places.
	assert.True(t, patternsMeet(`^[ab]*a[ab]{400}$`, `^[ab]*b[ab]{400}c$`))
	assert.False(t, patternsMeet(`^[ab]*a[ab]{40}$`, `^[ab]*b[ab]{40}c$`))
	// Few pairs of states, but a state of the first reaches a thousand
	// others without reading a character: the walk counts those too,
	// and stops (it took seconds to find that no string matches both).
	assert.True(t, patternsMeet(`^(?:a?){1000}a{1000}$`, `^(?:a{45})*b`))
	assert.False(t, patternsMeet(`^(?:a?){10}a{10}$`, `^(?:a{5})*b`))
	// Two classes of thousands of characters each are compared by their
	// ranges: disjoint, they share none.
	assert.False(t, patternsMeet(`^[\x{1000}-\x{2fff}]+$`, `[\x{3000}-\x{4fff}]`))
	assert.True(t, patternsMeet(`^[\x{1000}-\x{2fff}]+$`, `[\x{2fff}-\x{4fff}]`))
}
