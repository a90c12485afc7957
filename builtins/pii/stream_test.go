package pii_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// chunkModel streams the deltas it is given for each call.
type chunkModel struct{ deltas []string }

func (m *chunkModel) Stream(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	for _, d := range m.deltas {
		if !yield(runtime.Delta{Text: d}) {
			return nil
		}
	}
	return nil
}

// TestOutputSplitAtEveryOffset: a value the model streams is found wherever
// the stream cuts it, in two or three deltas, within a line or wrapped over
// two lines ("4111 1111\n1111 1111").
func TestOutputSplitAtEveryOffset(t *testing.T) {
	cases := []struct{ text, redacted, kinds string }{
		{"Hello.\nCard: 4111 1111 1111 1111 ok\nbye", "Hello.\nCard: [REDACTED:card] ok\nbye", "card"},
		{"Hello.\nCard: 4111 1111\n1111 1111 ok\nbye", "Hello.\nCard: [REDACTED:card] ok\nbye", "card"},
		{"Hello.\nCard: 4111-1111-\n1111-1111\n", "Hello.\nCard: [REDACTED:card]\n", "card"},
		{"Hello.\nCard: 4111 1111 \n  1111 1111 ok\n", "Hello.\nCard: [REDACTED:card] ok\n", "card"},
		{"Hello.\nSSN 123-45-\n6789 ok\n", "Hello.\nSSN [REDACTED:ssn] ok\n", "ssn"},
		{"Hello.\nSSN 123 - 45 - \n6789 ok\n", "Hello.\nSSN [REDACTED:ssn] ok\n", "ssn"},
		{"Hello.\ncall 415-555-\n2671 ok\n", "Hello.\ncall [REDACTED:phone] ok\n", "phone"},
		{"Hello.\noffice +44 20 7946-\n0958 ok\n", "Hello.\noffice [REDACTED:phone] ok\n", "phone"},
		// the next line ends in digits too, and is held for the lines after it
		{"Hello.\nCard: 4111-1111-\n1111-1111 ok 12\nbye\n", "Hello.\nCard: [REDACTED:card] ok 12\nbye\n", "card"},
		{"Hello.\nCard: 4111 1111 \n1111 1111 ok 12\nbye\n", "Hello.\nCard: [REDACTED:card] ok 12\nbye\n", "card"},
		{"Hello.\ncall 415-555-\n2671 ok 12\nbye\n", "Hello.\ncall [REDACTED:phone] ok 12\nbye\n", "phone"},
		{"Hello.\nSSN 123 - 45 - \n6789 ok 12\nbye\n", "Hello.\nSSN [REDACTED:ssn] ok 12\nbye\n", "ssn"},
		{"Hello.\nCard: 4111  1111 1111 1111 ok\n", "Hello.\nCard: [REDACTED:card] ok\n", "card"},
		{"Hello.\n4111\r\n1111 1111 1111 ok", "Hello.\n[REDACTED:card] ok", "card"},
		{"Hello.\nCard: 4111.1111\n1111.1111 ok\nbye", "Hello.\nCard: [REDACTED:card] ok\nbye", "card"},
		{"Hello.\n4111_1111_\r\n1111_1111\n", "Hello.\n4111_1111_\r\n1111_1111\n", ""},
		{"Hello.\n4111_1111\n1111_1111\n", "Hello.\n[REDACTED:card]\n", "card"},
		{"Hello.\nwrite to ann@example.com today\n", "Hello.\nwrite to [REDACTED:email] today\n", "email"},
		{"Lines:\n1234\n5678\n9012\n3456\n", "Lines:\n1234\n5678\n9012\n3456\n", ""},
		// Digits the detector reads as ASCII ones (full-width, mathematical),
		// Unicode spaces, and a format character it skips, at a line's end.
		{"Hello.\n4111 111１\n１１１１ 1111 ok\n", "Hello.\n[REDACTED:card] ok\n", "card"},
		{"Hello.\n4111-1111-111𝟏\n1111\n", "Hello.\n[REDACTED:card]\n", "card"},
		{"Hello.\n4111 1111\u200b\n1111 1111\n", "Hello.\n[REDACTED:card]\n", "card"},
		{"Hello.\n4111\u00a01111\u00a0\r\n1111\u00a01111\n", "Hello.\n[REDACTED:card]\n", "card"},
		// An IBAN wraps after a group, its first line ending in letters.
		{"Hello.\nIBAN GB29 NWBK\n6016 1331 9268 19 ok\nbye", "Hello.\nIBAN [REDACTED:iban] ok\nbye", "iban"},
		{"Hello.\ngb29nwbk\r\n60161331\n926819\n", "Hello.\n[REDACTED:iban]\n", "iban"},
		{"Hello.\nGB29 NWBK\nfoo bar\n", "Hello.\nGB29 NWBK\nfoo bar\n", ""},
	}
	model := &chunkModel{}
	block := chatPipeline(t, `{}`, model)
	redact := chatPipeline(t, `{"action":"redact"}`, model)
	run := func(pl *runtime.Pipeline, deltas []string) (string, error) {
		model.deltas = deltas
		var got strings.Builder
		_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary",
			Messages: []runtime.Message{{Role: "user", Content: "hi"}}},
			func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
		return got.String(), err
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%q", tc.text), func(t *testing.T) {
			var splits [][]string
			for i := 0; i <= len(tc.text); i++ {
				for j := i; j <= len(tc.text); j++ {
					splits = append(splits, []string{tc.text[:i], tc.text[i:j], tc.text[j:]})
				}
			}
			for _, deltas := range splits {
				got, err := run(redact, deltas)
				require.NoError(t, err)
				require.Equal(t, tc.redacted, got, "redact, deltas %q", deltas)
				got, err = run(block, deltas)
				if tc.kinds == "" {
					require.NoError(t, err, "deltas %q", deltas)
					require.Equal(t, tc.text, got)
					continue
				}
				var b *runtime.BlockedError
				require.ErrorAs(t, err, &b, "block, deltas %q", deltas)
				assert.Contains(t, b.Message, "("+tc.kinds+")")
				require.True(t, strings.HasPrefix("Hello.\n", got), "only the clean line before may go out, got %q for deltas %q", got, deltas)
			}
		})
	}
}

// TestFindWrappedCard: a card written in groups and wrapped over lines is
// found; a column of numbers, one a line, is not read as one.
func TestFindWrappedCard(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for _, text := range []string{"4111 1111\n1111 1111", "4111\n1111 1111 1111", "4111-1111-1111\r\n1111"} {
		ms := s.Find(text)
		require.Len(t, ms, 1, text)
		assert.Equal(t, pii.KindCard, ms[0].Kind)
		assert.Equal(t, text, text[ms[0].Start:ms[0].End])
	}
	assert.Empty(t, s.Find("4111\n1111\n1111\n1111"))
	assert.Empty(t, s.Find("4111 1111\n\n1111 1111"))
}

// The tool calls the model makes are output too: with output on, a call
// whose arguments hold personal data is refused (block) or goes out with
// them masked (redact), as a line of its text would, whichever deltas carry
// the fragments.
func TestOutputToolCalls(t *testing.T) {
	stream := []runtime.Delta{
		{Text: "Sending it.\n"},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "send_email", Arguments: `{"to":"ann@exa`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `mple.com","ssn":"123-45-6789"}`}}, FinishReason: runtime.FinishToolCalls},
	}
	model := rt.NewModel(rt.Response{Stream: stream})
	req := runtime.ChatRequest{Model: "primary", Messages: []runtime.Message{{Role: "user", Content: "hi"}}}
	var args strings.Builder
	collect := func(d runtime.Delta) bool {
		for _, tc := range d.ToolCalls {
			args.WriteString(tc.Arguments)
		}
		return true
	}

	_, err := chatPipeline(t, `{}`, model).Stream(context.Background(), req, collect)
	var b *runtime.BlockedError
	require.ErrorAs(t, err, &b)
	assert.Equal(t, "privacy", b.Layer)
	assert.Contains(t, b.Message, "send_email")
	assert.NotContains(t, b.Message, "ann@")
	assert.Empty(t, args.String(), "no fragment of the call went out")

	args.Reset()
	_, err = chatPipeline(t, `{"action":"redact"}`, model).Stream(context.Background(), req, collect)
	require.NoError(t, err)
	assert.NotContains(t, args.String(), "ann@example.com")
	assert.NotContains(t, args.String(), "123-45-6789")
	assert.Contains(t, args.String(), "[REDACTED:email]")

	args.Reset()
	_, err = chatPipeline(t, `{"output":false}`, model).Stream(context.Background(), req, collect)
	require.NoError(t, err, "output false leaves the calls alone")
	assert.Contains(t, args.String(), "ann@example.com")
}

// A value whose base64 the model wraps over two lines of its output is held until the run
// ends and read whole.
func TestOutputEncodingWrappedOverLines(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString([]byte("write to jane.doe@example.com about it"))
	wrapped := enc[:16] + "\n" + enc[16:]
	for _, deltas := range [][]string{
		{"here:\n" + wrapped + "\n\nbye\n"},
		{"here:\n" + enc[:16] + "\n", enc[16:] + "\n\nbye\n"},
		{"here:\n" + enc[:16] + "\r\n", enc[16:30], enc[30:] + " ok\n\nbye\n"},
	} {
		model := &chunkModel{deltas: deltas}
		var got strings.Builder
		_, err := chatPipeline(t, `{"action":"redact"}`, model).Stream(context.Background(), runtime.ChatRequest{Model: "primary",
			Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
		require.NoError(t, err)
		assert.Contains(t, got.String(), "[REDACTED:email]")
		assert.NotContains(t, got.String(), enc[:16])
		assert.NotContains(t, got.String(), enc[20:])
		assert.True(t, strings.HasPrefix(got.String(), "here:\n"))
		assert.True(t, strings.HasSuffix(got.String(), "\n\nbye\n"))

		got.Reset()
		_, err = chatPipeline(t, `{}`, model).Stream(context.Background(), runtime.ChatRequest{Model: "primary",
			Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
		var b *runtime.BlockedError
		require.ErrorAs(t, err, &b)
		assert.NotContains(t, got.String(), enc[:16])
	}
}

// A card written as bytes of hex with separators wrapped over lines of the output (od -An's
// lines, a byte array in source) is held until the bytes end and read whole, as in a text:
// masked with "redact", refused with "block", a line at a time or all at once.
func TestOutputHexWrappedOverLines(t *testing.T) {
	for _, lines := range [][]string{
		{"$ od -An -tx1 card.txt\n", " 63 61 72 64 20 34 31 31 31 20 31 31 31 31 20 31\n", " 31 31 31 20 31 31 31 31 0a\n", "bye\n"},
		{"card = [0x34, 0x31, 0x31, 0x31, 0x31, 0x31, 0x31, 0x31,\n", "        0x31, 0x31, 0x31, 0x31,\n",
			"        0x31, 0x31, 0x31, 0x31]\n", "bye\n"},
	} {
		for _, deltas := range [][]string{lines, {strings.Join(lines, "")}} {
			model := &chunkModel{deltas: deltas}
			var got strings.Builder
			_, err := chatPipeline(t, `{"action":"redact"}`, model).Stream(context.Background(), runtime.ChatRequest{Model: "primary",
				Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
			require.NoError(t, err)
			assert.Contains(t, got.String(), "[REDACTED:card]")
			assert.NotContains(t, got.String(), "31 31")
			assert.NotContains(t, got.String(), "0x31, 0x31")
			assert.True(t, strings.HasPrefix(got.String(), lines[0][:5]))
			assert.True(t, strings.HasSuffix(got.String(), "bye\n"))

			got.Reset()
			_, err = chatPipeline(t, `{}`, model).Stream(context.Background(), runtime.ChatRequest{Model: "primary",
				Messages: []runtime.Message{{Role: "user", Content: "hi"}}}, func(d runtime.Delta) bool { got.WriteString(d.Text); return true })
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.NotContains(t, got.String(), "31 31")
			assert.NotContains(t, got.String(), "0x31, 0x31")
		}
	}
}
