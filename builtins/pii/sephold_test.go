package pii_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
)

// TestLinesEndingInASeparatorAreHeldBriefly: a line ending in a digit and a separator is held
// with the next, which may go on with a card's, a phone number's or an SSN's groups; a stream
// of many such lines (a numbered list, a column of ranges) is held no further back than the
// digits a card may hold, not until it ends, and what goes out is what Redact makes of the
// whole text.
func TestLinesEndingInASeparatorAreHeldBriefly(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for _, line := range []string{"1-\n", "7 - \n", "12.\n", "3 -  \n", "- - 5-\n", "1/\n", "4111-\n"} {
		text := "list:\n" + strings.Repeat(line, 5000) + "done\n"
		want, _ := s.Redact(text)
		got, model, err := streamHeld(t, `{"action":"redact"}`, byLines(text))
		require.NoError(t, err, "%q", line)
		assert.True(t, want == got, "%q: the output is not what Redact makes of the whole text", line)
		// the lines holding a card's digits, and the delta that came
		assert.LessOrEqual(t, model.maxHeld, 20*len(line), "%q: held %d bytes", line, model.maxHeld)
		t.Logf("%q: held %d bytes at most", line, model.maxHeld)
	}
}
