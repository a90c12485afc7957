package textnorm

import (
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/internal/cputime"
)

// TestHexDumps: the lines of a hex dump (xxd, hexdump -C, od, hexdump's and od -x's
// little-endian words) are read together as the bytes they write, a value cut across lines
// whole, and the run covers the lines with their column of characters; tables of numbers,
// logs and dumps of binary give nothing.
func TestHexDumps(t *testing.T) {
	const file = "AKIAIOSFODNN7EXAMPLE and more text here\n"
	for _, tt := range []struct{ name, dump, want string }{
		{"xxd", textnormtest.Dump(file, 2, ": ", true), file},
		{"hexdump -C", textnormtest.Dump(file, 1, "  ", true) + "00000028\n", file},
		{"od -A x -t x1z", "000000 41 4b 49 41 49 4f 53 46 4f 44 4e 4e 37 45 58 41  >AKIAIOSFODNN7EXA<\n" +
			"000010 4d 50 4c 45 20 61 6e 64 20 6d 6f 72 65 20 74 65  >MPLE and more te<\n" +
			"000020 78 74 20 68 65 72 65 0a                          >xt here.<\n000028\n", file},
		{"hexdump, words", "0000000 4b41 4149 4f49 4653 444f 4e4e 4537 4158\n0000010 504d 454c 6120 646e 6d20 726f 2065 6574\n" +
			"0000020 7478 6820 7265 0a65\n0000028\n", file},
		{"od -x, octal offsets", "0000000 4b41 4149 4f49 4653 444f 4e4e 4537 4158\n0000020 504d 454c 6120 646e 6d20 726f 2065 6574\n" +
			"0000040 7478 6820 7265 0a65\n0000050\n", file},
		{"binary around text, squeezed", "00000000  00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00  |................|\n*\n" +
			"00000020  00 00 00 00 00 00 00 00  41 4b 49 41 49 4f 53 46  |........AKIAIOSF|\n" +
			"00000030  4f 44 4e 4e 37 45 58 41  4d 50 4c 45 0a           |ODNN7EXAMPLE.|\n0000003d\n", "AKIAIOSFODNN7EXAMPLE\n"},
		{"a column of characters that looks like hex", textnormtest.Dump("cafe babe dead beef 4111111111111111 face", 2, ": ", true),
			"cafe babe dead beef 4111111111111111 face"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text := "$ dump f\n" + tt.dump + "$ "
			var dump []Encoded
			for _, e := range Encodings(text) {
				if e.Start == len("$ dump f\n") {
					dump = append(dump, e)
				}
			}
			require.Len(t, dump, 1)
			assert.Contains(t, dump[0].Text, strings.TrimSuffix(tt.want, "\n"), "read whole")
			assert.Equal(t, len(text)-len("\n$ "), dump[0].End, "the run covers the dump's lines")
		})
	}
	r := rand.New(rand.NewPCG(3, 4))
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(r.Uint32())
	}
	for _, text := range []string{
		"2024 1131 3131 3131\n2025 3131 3131 3131\n",
		"0001 12 34 56 78 90 12 34 56\n0002 12 34 56 78 90 12 34 56\n",
		"10:42:01 GET /a 200 12 ms\n10:42:02 GET /b 404 3 ms\n",
		"1000 2000 3000 4000\n1010 2010 3010 4010\n",
		textnormtest.Dump(string(bin), 1, "  ", true),
		textnormtest.Dump(string(bin), 2, ": ", true),
	} {
		for _, e := range Encodings(text) {
			for piece := range strings.SplitSeq(e.Text, "\n") {
				assert.Less(t, len(piece), 16, "%.60q holds no dump of text", text)
			}
		}
	}
}

// TestDumpRunStart: a text ending in lines of a hex dump is held from the dump's first line;
// a dump that ended (its last offset written) or a line of another kind is not held.
func TestDumpRunStart(t *testing.T) {
	dump := textnormtest.Dump("card 4111111111111111 exp 12/29\n", 2, ": ", true)
	assert.Equal(t, len("sure:\n"), DumpRunStart("sure:\n"+dump))
	assert.Equal(t, 0, DumpRunStart(dump))
	assert.Equal(t, -1, DumpRunStart("sure:\n"+dump+"00000020\n"))
	assert.Equal(t, -1, DumpRunStart(dump+"done\n"))
	assert.Equal(t, -1, DumpRunStart(dump[:len(dump)-1]))
}

// TestLargeAdversarialInputsStayLinear: texts of megabytes shaped to make the readings of
// dumps and of nested escapes work hard are read in time proportional to their length: a
// text four times as long takes well under sixteen times as long (a quadratic reading would).
func TestLargeAdversarialInputsStayLinear(t *testing.T) {
	repeat := func(unit string) func(int) string {
		return func(n int) string { return strings.Repeat(unit, n/len(unit)) }
	}
	for name, gen := range map[string]func(n int) string{
		"dump lines whose offsets do not follow": repeat("0000 41 41 41 41 41 41 41 41\n"),
		"dump lines of one long line":            repeat("00000000 " + strings.Repeat("41 ", 64)),
		"squeezed dump lines":                    repeat("00000000  41 41 41 41 41 41 41 41\n*\n"),
		"a dump whose lines change width":        repeat("00000000 4141 4141\n00000004 41 41 41 41\n"),
		"escapes escaped":                        repeat(`\\\\u0041%25%2525&amp;amp;`),
		"a dump of text":                         func(n int) string { return textnormtest.Dump(strings.Repeat("A", n/4), 2, ": ", true) },
	} {
		t.Run(name, func(t *testing.T) {
			run := func(n int) time.Duration {
				text := gen(n)
				return cputime.Of(func() {
					Encodings(text)
					UnescapeNested(text, true)
					DumpRunStart(text + "\n")
				})
			}
			run(1 << 16) // warm up
			small, large := run(1<<18), run(1<<20)
			assert.Less(t, large, 16*small+100*time.Millisecond, "256 KiB took %v, 1 MiB %v", small, large)
		})
	}
}

// TestSeparatedHexOverLines: hex with its bytes separated goes on over line breaks, as a byte
// array in source or a dump without offsets wraps it; lines of other bytes stay apart.
func TestSeparatedHexOverLines(t *testing.T) {
	const secret = "AKIAIOSFODNN7EXAMPLE"
	// od -An -tx1: the bytes, 16 a line, after a space, without offsets
	var rows []string
	for off := 0; off < len(secret); off += 16 {
		rows = append(rows, " "+spaced(hex.EncodeToString([]byte(secret[off:min(off+16, len(secret))])), " "))
	}
	cArray := "static const char k[] = {\n    0x41, 0x4b, 0x49, 0x41, 0x49, 0x4f, 0x53, 0x46,\n    0x4f, 0x44, 0x4e, 0x4e, 0x37, 0x45, 0x58, 0x41,\n    0x4d, 0x50, 0x4c, 0x45 };"
	for name, text := range map[string]string{
		"spaced bytes over lines": "bytes:\n" + strings.Join(rows, "\n") + "\nend",
		"a C array":               cArray,
	} {
		t.Run(name, func(t *testing.T) {
			var texts []string
			for _, e := range Encodings(text) {
				texts = append(texts, e.Text)
			}
			assert.Contains(t, texts, secret)
		})
	}
	assert.Empty(t, Encodings("00:1a:2b:3c:4d:5e\n00:1a:2b:3c:4d:5f\n"), "MAC addresses on two lines")
}
