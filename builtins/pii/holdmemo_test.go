package pii

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/linehold"
)

// TestHoldReadsACutOnce: once the hold has cut before an item that runs across a line break
// ("+100000" then "00X0"), text added after the cut by letters and digits alone is not read
// again, and the answer is the one a reading gives; a separator or a line break has it read
// again.
func TestHoldReadsACutOnce(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	o := &outputHold{scanner: s}
	var h linehold.Hold
	buf := "Hello.\n+100000\n00X0\nok"
	n := o.releasable(buf, &h)
	require.Equal(t, len("Hello.\n"), n, "the line of the number is held")
	require.Equal(t, 1, o.scans)
	o.tail("", buf[:n])
	buf = buf[n:]

	buf += "ay"
	assert.Equal(t, 0, o.releasable(buf, &h))
	assert.Equal(t, 1, o.scans, "letters after the cut: not read again")
	fresh := &outputHold{scanner: s, before: o.before}
	assert.Equal(t, 0, fresh.releasable(buf, &linehold.Hold{}), "a reading holds the same")

	buf += " then"
	assert.Equal(t, 0, o.releasable(buf, &h))
	assert.Equal(t, 2, o.scans, "a separator after the cut: read again")

	buf += "\nbye"
	assert.Equal(t, len("+100000\n00X0\nokay then\n"), o.releasable(buf, &h), "the number goes out whole")
	assert.Equal(t, 3, o.scans, "a new line break: read again")
}

// TestHoldContextIsBounded: the output released that the hold reads the text held after is
// the context the detectors read back, 2*contextWindow+maxWordLen bytes, or more where they
// skip characters in it, not the whole tail kept.
func TestHoldContextIsBounded(t *testing.T) {
	plain := strings.Repeat("word ", 3000)
	assert.Len(t, contextOf(plain), 2*contextWindow+maxWordLen)
	invisible := "call me on" + strings.Repeat("\u200b", 100)
	got := contextOf(strings.Repeat("x", 1000) + invisible)
	assert.True(t, strings.HasSuffix(got, invisible), "the word before the characters skipped is read")
	assert.Less(t, len(got), 1000+len(invisible))
	assert.Equal(t, "ab", contextOf("ab"))
}
