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
// of a set of patterns is checked against every string of up to six
// characters over their alphabet, and a pair some string matches both
// must meet.
func TestPatternsMeetIsSound(t *testing.T) {
	pats := []string{`^a`, `a$`, `^a+$`, `b`, `^(ab)+$`, `^a*b?$`, `a-b`, `^[ab]{2}$`, `-$`, `^-`, `(?i)^A`, `^[^a]*$`, `\bb`, `^$`, `a|^b`, `(?m)^b`, `^.{3}$`}
	var strs []string
	var grow func(s string)
	grow = func(s string) {
		strs = append(strs, s)
		if len(s) < 6 {
			for _, c := range []string{"a", "b", "-", "A"} {
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

// Two patterns whose joint walk passes maxMeetStates pairs of states are
// taken to meet, however they would end: the walk stops there.
func TestPatternsMeetBounded(t *testing.T) {
	// No string matches both (the second ends in c), but a string of a
	// and b leaves either pattern in any of its 400 places.
	assert.True(t, patternsMeet(`^[ab]*a[ab]{400}$`, `^[ab]*b[ab]{400}c$`))
	assert.False(t, patternsMeet(`^[ab]*a[ab]{40}$`, `^[ab]*b[ab]{40}c$`))
}
