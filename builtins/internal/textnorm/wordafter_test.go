package textnorm

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEncodingsWordAfterWrappedRun: a word on the line under a value's encoding (a line long
// enough to go on over a line break) is read with the run, but as a word of the text after
// it: the run's first reading ends at the line break, so that a mask of the value leaves the
// word ("\nNOT approved" was masked with the value, turning the text's meaning around). A
// short last line that ends the encoding (its padding, or the rest of the value's text in a
// length an encoding ends in) is the run's.
func TestEncodingsWordAfterWrappedRun(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte("card 4111111111111111"))
	for _, after := range []string{"\nNOT approved by compliance\n", "\r\nNOT approved", "\nNOT\n", "\nNOTE approved", "\ndone\n", "\nNOT."} {
		text := "Transfer ref " + b64 + after
		got := Encodings(text)
		require.Len(t, got, 1, "%q", after)
		rs := got[0].Readings()
		require.Len(t, rs, 2, "%q", after)
		assert.Equal(t, b64, text[rs[0].Start:rs[0].End], "%q", after)
		assert.Contains(t, rs[0].Text, "card 4111111111111111", "%q", after)
		assert.Equal(t, got[0], rs[1], "%q: the whole run is read after", after)
	}
	// the value's own last line
	value := base64.StdEncoding.EncodeToString([]byte("card 4111111111111111, exp 12/29"))
	for _, text := range []string{
		wrapIn(value, 16) + "done", // padded
		wrapIn(base64.StdEncoding.EncodeToString([]byte("card 4111111111111111 ok")), 20), // unpadded, its text
	} {
		got := Encodings(text)
		require.Len(t, got, 1, "%q", text)
		assert.Zero(t, got[0].Cut, "%q", text)
		assert.Len(t, got[0].Readings(), 1, "%q", text)
	}
	assert.True(t, strings.HasSuffix(wrapIn(value, 16), "=\n"))
}
