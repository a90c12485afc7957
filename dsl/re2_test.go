package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A pattern RE2 refuses is reported at the refused construct, and the
// constructs of backtracking engines that RE2 has not are named as such.
func TestRegexpRefusals(t *testing.T) {
	tests := []struct {
		name, src string
		at        string // "line:col rule"
		want      string
	}{
		{"lookbehind", `chains: tool: [{use: "tool_policy", arg_patterns: [{arg: "url", pattern: "^x(?<=https://)evil"}]}]`,
			"3:77 schema/invalid-value", "chains.tool[0].arg_patterns[0].pattern: not an RE2 regular expression: `(?<=` is a lookbehind, and RE2 syntax, which matches in time linear in the text, has no lookbehind or lookahead"},
		{"negative lookbehind", `chains: chat: [{use: "content_filter", patterns: ["(?<!foo)bar"]}]`,
			"3:52 schema/invalid-value", "chains.chat[0].patterns[0]: not an RE2 regular expression: `(?<!` is a lookbehind"},
		{"lookahead", `chains: chat: [{use: "redact", patterns: ["a(?=b)"]}]`,
			"3:45 schema/invalid-value", "chains.chat[0].patterns[0]: not an RE2 regular expression: `(?=` is a lookahead"},
		{"backreference after an escape", `chains: chat: [{use: "security", patterns: ["\"(a)\\1"]}]`,
			"3:51 schema/invalid-value", "chains.chat[0].patterns[0]: not an RE2 regular expression: `\\1` is a backreference, and RE2 syntax, which matches in time linear in the text, has no backreferences"},
		{"possessive", `chains: chat: [{use: "security", patterns: ["ab*+c"]}]`,
			"3:48 schema/invalid-value", "chains.chat[0].patterns[0]: not an RE2 regular expression: `*+` is a possessive quantifier"},
		{"other errors keep RE2's words", `chains: chat: [{use: "security", patterns: ["a(b"]}]`,
			"3:46 schema/invalid-value", "chains.chat[0].patterns[0]: not an RE2 regular expression: missing closing ): `a(b`"},
		{"state redact", `state: fields: notes: {schema: type: "string", on_set: [{redact: ["x(?<=y)"]}]}`,
			"3:69 schema/invalid-value", "state.fields.notes.on_set[0].redact[0]: not an RE2 regular expression: `(?<=` is a lookbehind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, got := loadSnippet(t, tt.src)
			require.Len(t, diags, 1, "%v", got)
			assert.Equal(t, tt.at, got[0])
			assert.Contains(t, diags[0].Message, tt.want)
		})
	}
}

// A pattern that can match no text is told apart from one that can, and
// the reason names the construct that rules every match out.
func TestRegexpNeverMatches(t *testing.T) {
	never := map[string]string{
		`drop$table`:         "$ (or \\z) matches only at the end",
		`ACCT$[0-9]+`:        "$ (or \\z) matches only at the end",
		`(?i)^xx$[0-9]+`:     "$ (or \\z) matches only at the end",
		`secret\zkey`:        "$ (or \\z) matches only at the end",
		`a^b`:                "^ (or \\A) matches only at the start",
		`(x|y)\Az`:           "^ (or \\A) matches only at the start",
		`[^\x00-\x{10FFFF}]`: "holds no character",
		`a$b|c^d`:            "$ (or \\z) matches only at the end",
		`(?:foo$)+bar`:       "$ (or \\z) matches only at the end",
	}
	for pat, want := range never {
		why, ok := RegexpNeverMatches(pat)
		assert.True(t, ok, pat)
		assert.Contains(t, why, want, pat)
	}
	for _, pat := range []string{`drop\s+table`, `^a$`, `a$$`, `$^`, `^$`, `a$|b`, `a$b?`, `a$(b*)`, `(?m)a$\nb`, `(?m)^x`,
		`x^*`, `\ba\b`, `a\bb`, `\$[0-9]+`, `(?s).*`, ``, `^`, `a?^b`, `(^|,)x`, `x(,|$)`, `[^a]`} {
		_, ok := RegexpNeverMatches(pat)
		assert.False(t, ok, pat)
	}
}
