package textnorm

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
)

// TestHexRunStart: a text ending in bytes of hex with separators or prefixes that the next
// line may go on with (a byte array wrapped over lines, od -An's lines) is held from where
// the bytes start; prose, one byte and a line of other text after them are not.
func TestHexRunStart(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int
	}{
		{"key = [0x41, 0x4b, 0x49, 0x41,\n", len("key = [")},
		{"key = [0x41, 0x4b, 0x49, 0x41,\n    0x49, 0x4f,\n", len("key = [")},
		{"key = [0x41, 0x4b,\n    0x49\n", len("key = [")},
		{"$ od -An -tx1 f\n 41 4b 49 41 49 4f 53 46\n 4f 44 4e 4e 37 45 58 41\n", len("$ od -An -tx1 f\n ")},
		{`s = "\x41\x4b\x49\x41` + "\n", len(`s = "`)},
		{"fp 41:4b:49:41\n", len("fp ")},
		{"be ad\n", 0},
		{"ok\n", -1},
		{"a word be\n", -1},
		{"0x41\n", -1},
		{"key = [0x41, 0x4b,\n    0x49, 0x4f]\n", -1},
		{"key = [0x41, 0x4b, 0x49, 0x41,\ndone\n", -1},
		{"41 4b 49 41", -1},
		{"", -1},
	} {
		assert.Equal(t, tt.want, HexRunStart(tt.text), "%q", tt.text)
	}
}

// TestWalkOfAppendedLines: the walks of a text held while lines are appended to it, each
// taking what the walk before found, return at every line what a walk of the whole text
// returns.
func TestWalkOfAppendedLines(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b64 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("the key is in the file ", 20)))
	lines := []string{"ok", "", "  0x41, 0x4b,", "0x49, 0x4f", " 41 4b 49 41 49 4f 53 46", b64[:64], b64[64:128], b64[:10],
		"be ad", `\x41\x4b`, "done."}
	for _, l := range strings.SplitAfter(textnormtest.Dump("AKIAIOSFODNN7EXAMPLE and more text here\n", 2, ": ", true), "\n") {
		lines = append(lines, strings.TrimSuffix(l, "\n"))
	}
	for iter := 0; iter < 500; iter++ {
		var (
			text                 strings.Builder
			wrapped, dump, bytes Walk
		)
		same := 0
		for range 1 + r.IntN(30) {
			text.WriteString(lines[r.IntN(len(lines))])
			text.WriteString([]string{"\n", "\r\n"}[r.IntN(2)])
			s := text.String()
			require.Equal(t, WrappedRunStart(s), wrapped.WrappedRunStart(s, same), "%q", s)
			require.Equal(t, DumpRunStart(s), dump.DumpRunStart(s, same), "%q", s)
			require.Equal(t, HexRunStart(s), bytes.HexRunStart(s, same), "%q", s)
			same = len(s)
		}
	}
}
