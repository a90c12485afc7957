package pii

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/linehold"
)

// TestRunPartReadsALongFirstLineOnce: a run whose first line is longer than the bound but for
// runKept bytes (a base64 payload on one line, then lines of 16 characters) is read at the
// bound once, and then once the text held passes that line by runKept bytes, not at every
// line after it: each reading read all the text held, and the hold cost the square of it.
func TestRunPartReadsALongFirstLineOnce(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(5, 8))
	raw := make([]byte, 60<<10)
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	enc := base64.StdEncoding.EncodeToString(raw) // 80 KiB
	var short strings.Builder
	for short.Len() < 12<<10 {
		short.WriteString(enc[short.Len()%len(enc) : short.Len()%len(enc)+16])
		short.WriteByte('\n')
	}
	lines := append([]string{"the payload:\n", enc + "\n"}, strings.SplitAfter(short.String(), "\n")...)
	o := &outputHold{scanner: s}
	h := &linehold.Hold{}
	buf, out := "", ""
	for _, l := range lines {
		buf += l
		if n := o.releasable(buf, h); n > 0 {
			out += buf[:n]
			o.tail(o.before, buf[:n])
			buf, h = buf[n:], &linehold.Hold{}
		}
	}
	assert.LessOrEqual(t, o.scans, 4, "readings of the text held")
	assert.True(t, strings.HasPrefix(out, "the payload:\n"+enc+"\n"), "the first line goes out once the text passes it by runKept bytes")
}
