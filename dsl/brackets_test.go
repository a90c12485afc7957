package dsl

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnclosedBracket(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		want      Pos    // zero: balanced
		msg       string // a fragment
	}{
		{"balanced", "package p\nx: {a: [1, 2], b: (1)}\n", Pos{}, ""},
		{"brackets in strings and comments", "package p\nx: \"{[(\" // }\ny: '''\n  ]\n  '''\nz: \"\"\"\n  {\n  \"\"\"\n", Pos{}, ""},
		{"an entry left open", "package p\n\nchains: chat: [\n\t{use: \"retry\", max_attempts: 3,\n\t{use: \"tracing\"},\n]\n",
			Pos{File: "p.cue", Line: 4, Col: 33}, "missing '}': the '{' at line 4, column 2 is never closed"},
		{"a list left open at the end", "package p\n\nchains: chat: [\n\t{use: \"retry\"}, // first\n\t{use: \"tracing\"},\n\ntools: t: {}\n",
			Pos{File: "p.cue", Line: 5, Col: 19}, "missing ']': the '[' at line 3, column 15"},
		{"a struct over several lines", "package p\n\nchains: {\n\tchat: [\n\t\t{use: \"retry\"},\n\t]\n\ntools: refund: {}\n",
			Pos{File: "p.cue", Line: 6, Col: 3}, "missing '}': the '{' at line 3, column 9"},
		{"an extra closer is left to CUE", "package p\nx: 1}\n", Pos{}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			at, msg, ok := unclosedBracket("p.cue", []byte(tt.src))
			if tt.want == (Pos{}) {
				assert.False(t, ok, "%s %s", at, msg)
				return
			}
			assert.True(t, ok)
			assert.Equal(t, tt.want, at)
			assert.Contains(t, msg, tt.msg)
		})
	}
}

// A parse error caused by another language's habit says what CUE writes
// instead: a regular expression's \d in a "..." string, a # comment. A
// definition, whose name starts with #, is no comment.
func TestSyntaxHints(t *testing.T) {
	for _, tt := range []struct{ name, src, want string }{
		{"escape", `chains: tool: [{use: "redact", patterns: ["card-\d+"]}]`,
			"1:50 unknown escape sequence: `\\d` is not an escape of a CUE string; a regular expression's backslash is written `\\\\d` in a \"...\" string, or as it is in a raw string, #\"\\d\"#"},
		{"hash comment", "# the chains\nchains: chat: [{use: \"retry\"}]",
			"1:3 expected label or ':', found 'IDENT' the: a CUE comment starts with //, not #"},
		{"definition", "#Base: {use: \"retry\"\nchains: chat: [#Base]",
			"missing '}'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, _ := loadSnippet(t, tt.src)
			require.Len(t, diags, 1)
			assert.Equal(t, "cue/syntax", diags[0].Rule)
			got := fmt.Sprintf("%d:%d %s", diags[0].Pos.Line-2, diags[0].Pos.Col, diags[0].Message)
			assert.Contains(t, got, tt.want)
			if tt.name == "definition" {
				assert.NotContains(t, got, "comment")
			}
		})
	}
}
