package pii_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
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

// TestMaskedRunRestReleasedWithoutHold: the rest of a run read at the bound once it holds an
// address (masked), an item's encoding straddling that cut, goes out as nothing however the
// text held is released: at the end of the stream with or without a last line break, with a
// last line too short to be read as an encoding of its own ("MSAxMTEx", of "1 1111"), and
// when tool calls arrive right after the run; "block" refuses. A line after the run goes out
// as the whole text's reading leaves it. Pieces of the item went out.
func TestMaskedRunRestReleasedWithoutHold(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	prose := strings.Repeat("the quick brown fox jumps over a lazy dog. ", 3000)
	cutAt := 57 * 852 // the plain text of the run's lines up to its first reading at the bound
	call := runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "post", Arguments: `{}`}}}
	for _, item := range []string{"4111 1111 1111 1111", "jane.doe@example.com"} {
		for _, off := range []int{1, 4, 7, len(item) - 1} {
			at := cutAt - off
			for _, after := range []int{0, 3, 10, 200} {
				plain := prose[:1000] + " mail jane.doe@example.com " + prose[1027:at] + item + prose[at+len(item):at+len(item)+after]
				run := wrapLines(base64.StdEncoding.EncodeToString([]byte(plain)), 76)
				lines := strings.Split(strings.TrimSuffix(run, "\n"), "\n")[at*4/3/76:]
				for ending, text := range map[string]string{
					"no line break": "the payload:\n" + strings.TrimSuffix(run, "\n"),
					"line break":    "the payload:\n" + run,
					"text after":    "the payload:\n" + run + "done\n",
				} {
					want, n := s.Redact(text)
					require.NotZero(t, n)
					for _, calls := range []bool{false, true} {
						var deltas []runtime.Delta
						for _, d := range byLines(text) {
							deltas = append(deltas, runtime.Delta{Text: d})
						}
						if calls {
							deltas = append(deltas, call, runtime.Delta{FinishReason: runtime.FinishToolCalls})
						}
						name := fmt.Sprintf("%q off %d after %d, %s, tool calls %v", item, off, after, ending, calls)
						_, _, err := streamPII(t, `{"action":"block"}`, deltas)
						var b *runtime.BlockedError
						require.ErrorAs(t, err, &b, name)
						got, args, err := streamPII(t, `{"action":"redact"}`, deltas)
						require.NoError(t, err, name)
						assert.Contains(t, got, "[REDACTED:", name)
						if calls {
							assert.Equal(t, `{}`, args, name)
						}
						if strings.HasSuffix(want, "\ndone\n") {
							// the encodings take in a short line after a run: the whole text's
							// reading then leaves no "done" either
							assert.True(t, strings.HasSuffix(got, "\ndone\n"), "%s: the text after the run was left out", name)
						}
						for _, l := range lines {
							assert.NotContains(t, got, l, "%s: a line of the item went out", name)
						}
					}
				}
			}
		}
	}
}
