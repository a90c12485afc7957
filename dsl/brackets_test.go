package dsl

import (
	"testing"

	"github.com/stretchr/testify/assert"
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
