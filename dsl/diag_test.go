package dsl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQuoteFile(t *testing.T) {
	for name, want := range map[string]string{
		"policy.cue":           "policy.cue",
		"dir with space/p.cue": "dir with space/p.cue",
		"política.cue":         "política.cue",
		"a\nb.cue":             `"a\nb.cue"`,
		"evil\x1b[2J.cue":      `"evil\x1b[2J.cue"`,
		"bad\xffutf8.cue":      `"bad\xffutf8.cue"`,
		`"quoted".cue`:         `"\"quoted\".cue"`,
		"tab\there.cue":        `"tab\there.cue"`,
		"zero\u200bwidth.cue":  `"zero\u200bwidth.cue"`,
		"del\x7f.cue":          `"del\x7f.cue"`,
		"":                     "",
	} {
		assert.Equal(t, want, QuoteFile(name), "%q", name)
	}
}

// A diagnostic of a file whose name holds a newline stays on one line.
func TestDiagnosticOfAnOddFileNameIsOneLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a\nb.cue")
	require.NoError(t, os.WriteFile(path, []byte("package p\nchains: chat: [{use: \"retri\"}]\n"), 0o644))
	_, diags, err := Load(context.Background(), []string{path}, Options{})
	require.NoError(t, err)
	require.NotEmpty(t, diags)
	line := diags[0].String()
	assert.NotContains(t, line, "\n")
	assert.True(t, strings.HasPrefix(line, `"`+strings.ReplaceAll(dir, `\`, `\\`)+`/a\nb.cue":2:`), line)
}
