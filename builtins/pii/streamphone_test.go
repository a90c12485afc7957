package pii_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
)

// TestStreamedPhonesMaskedAsWhole: a text the model streams goes out of the layer as Redact
// masks the whole text, in one delta, cut in two at every byte or in three: a phone number
// whose area code or country code ends a line is held with the next line, and a phone word,
// an SSN's label, on the lines released before still counts for the number after it.
func TestStreamedPhonesMaskedAsWhole(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	model := &chunkModel{}
	redact := chatPipeline(t, `{"action":"redact"}`, model)
	block := chatPipeline(t, `{"action":"block"}`, model)
	run := func(pl *runtime.Pipeline, deltas []string) (string, error) {
		model.deltas = deltas
		var got strings.Builder
		_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary",
			Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
			func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
		return got.String(), err
	}
	for _, text := range []string{
		"Hello.\ncall (415)\n555-2671 now\nbye",
		"Hello.\ncall (415)\r\n555-2671 now\n",
		"Hello.\noffice +44 20\n7946 0958\nbye",
		"Hello.\noffice +44\n20 7946 0958\n",
		"Hello.\ncall 415-555\n2671 now\n",
		"Hello.\ncall me on\n9472 7916\nbye",
		"Hello.\nFax:\n9498777106\n",
		"Hello.\nmy SSN is\n123456789\n",
		"Hello.\nphone\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n9472 7916\n",
	} {
		t.Run(fmt.Sprintf("%q", text), func(t *testing.T) {
			want, n := s.Redact(text)
			require.NotZero(t, n, "the whole text holds a phone number")
			splits := [][]string{{text}}
			for i := 0; i <= len(text); i++ {
				splits = append(splits, []string{text[:i], text[i:]})
				for j := i; j <= len(text) && len(text) < 48; j++ {
					splits = append(splits, []string{text[:i], text[i:j], text[j:]})
				}
			}
			for _, deltas := range splits {
				got, err := run(redact, deltas)
				require.NoError(t, err)
				require.Equal(t, want, got, "deltas %q", deltas)
				got, err = run(block, deltas)
				var b *runtime.BlockedError
				require.ErrorAs(t, err, &b, "deltas %q", deltas)
				first := strings.Index(want, "[REDACTED:")
				require.True(t, strings.HasPrefix(text[:first], got), "only clean lines before may go out, got %q for deltas %q", got, deltas)
			}
		})
	}
}
