package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/dsl"
)

func TestSourceExcerptPutsTheCaretUnderTheColumn(t *testing.T) {
	cases := []struct {
		name, line string
		col        int // byte offset
		want       string
	}{
		{"plain", `chains: chat: [{use: "retyr"}]`, 21,
			"\tchains: chat: [{use: \"retyr\"}]\n\t                     ^"},
		{"tabs are kept", "\t{use: \"guard\", deny: \"args.ammount > 1\"},", 28,
			"\t\t{use: \"guard\", deny: \"args.ammount > 1\"},\n\t\t                           ^"},
		{"multibyte before the column", `name: "trаnsfer", x: 1`, 19,
			"\tname: \"trаnsfer\", x: 1\n\t                  ^"},
		{"wide characters take two columns", `d: "日本", x: 1`, 12,
			"\td: \"日本\", x: 1\n\t          ^"},
		{"past the end", `a: {`, 4, "\ta: {\n\t    ^"},
		{"control bytes are not sent", "x: \"\x1b[2Jboom\"", 0, "\tx: \"?[2Jboom\"\n\t^"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, sourceExcerpt(c.line, c.col))
		})
	}
}

func TestSourceExcerptCutsALongLineAroundTheCaret(t *testing.T) {
	line := strings.Repeat("a", 500) + "TYPO" + strings.Repeat("b", 500)
	got := sourceExcerpt(line, 500)
	lines := strings.Split(got, "\n")
	require.Len(t, lines, 2)
	assert.Contains(t, lines[0], "TYPO")
	assert.True(t, strings.HasPrefix(lines[0], "\t…") && strings.HasSuffix(lines[0], "…"), lines[0])
	assert.LessOrEqual(t, len([]rune(lines[0])), maxExcerptWidth+4)
	// The caret sits under the T of TYPO.
	caret := strings.IndexByte(lines[1], '^')
	assert.Equal(t, "T", string([]rune(lines[0])[caret]))
}

// On a terminal, vet shows the line a diagnostic points at with a caret under
// the typo; piped, it keeps one line per diagnostic.
func TestVetShowsTheSourceLineOnATerminal(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte("package p\n\nchains: chat: [{use: \"retyr\"}]\n"), 0o644))
	var stdout, stderr bytes.Buffer
	env := &cliEnv{stdout: &stdout, stderr: &stderr, wd: dir, excerpts: true}
	require.Equal(t, exitProblems, cmdVet(context.Background(), env, []string{dir}))
	assert.Equal(t, "p.cue:3:22: error schema/unknown-middleware: unknown middleware \"retyr\"; did you mean \"retry\"?\n"+
		"\tchains: chat: [{use: \"retyr\"}]\n"+
		"\t                     ^\n", stderr.String())

	stderr.Reset()
	env.excerpts = false
	require.Equal(t, exitProblems, cmdVet(context.Background(), env, []string{dir}))
	assert.Equal(t, 1, strings.Count(stderr.String(), "\n"), stderr.String())
}

func TestExcerptOfAnUnreadableOrShortFileIsEmpty(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte("a: 1\n"), 0o644))
	s := &sources{wd: dir}
	assert.Empty(t, s.excerpt(dsl.Pos{File: "missing.cue", Line: 1, Col: 1}))
	assert.Empty(t, s.excerpt(dsl.Pos{File: "p.cue", Line: 3, Col: 1}))
	assert.Empty(t, s.excerpt(dsl.Pos{}))
	assert.Equal(t, "\ta: 1\n\t   ^", s.excerpt(dsl.Pos{File: "p.cue", Line: 1, Col: 4}))
}

// A policy saved with a UTF-8 byte order mark is read without it, and its
// positions count from the text after it: the excerpt of its first line
// puts the caret under the column the position names, without the mark.
func TestExcerptSkipsAByteOrderMark(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.cue"), []byte("\uFEFFa: 1\n"), 0o644))
	s := &sources{wd: dir}
	assert.Equal(t, "\ta: 1\n\t   ^", s.excerpt(dsl.Pos{File: "p.cue", Line: 1, Col: 4}))
}
