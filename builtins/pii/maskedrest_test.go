package pii_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMaskedRunRestAtStreamEnd: a run read at the bound once it holds an address (masked),
// an item's encoding straddling that cut, and the stream ending on the run's last line, with
// no line break: the rest of the run goes out as nothing, as the lines released before the
// end do. It was released without the hold's reading and went out as it was.
func TestMaskedRunRestAtStreamEnd(t *testing.T) {
	prose := strings.Repeat("the quick brown fox jumps over a lazy dog. ", 3000)
	item := "4111 1111 1111 1111"
	at := 57*852 - 1
	plain := prose[:1000] + " mail jane.doe@example.com " + prose[1027:at] + item + prose[at+len(item):at+len(item)+10]
	run := wrapLines(base64.StdEncoding.EncodeToString([]byte(plain)), 76)
	text := strings.TrimSuffix("the payload:\n"+run, "\n")
	got, _, err := streamHeld(t, `{"action":"redact"}`, byLines(text))
	require.NoError(t, err)
	last := got[strings.LastIndexByte(got, '\n')+1:]
	dec, _ := base64.StdEncoding.DecodeString(last)
	t.Logf("output ends %q, which decodes to %q", last, dec)
	require.NotContains(t, string(dec), "1111 1111 1111")
}
