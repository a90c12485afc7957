package pii_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
)

// taggedValues are items written in tag characters, which a model reads as the ASCII they
// stand for, wholly or in part.
var taggedValues = []struct{ name, in, kind string }{
	{"email", textnormtest.Tags("jane.doe@example.com"), "email"},
	{"card", textnormtest.Tags("4111 1111 1111 1111"), "card"},
	{"card half tagged", "4111 1111 " + textnormtest.Tags("1111 1111"), "card"},
	{"iban", textnormtest.Tags("GB29 NWBK 6016 1331 9268 19"), "iban"},
	{"ssn", "ssn " + textnormtest.Tags("123-45-6789"), "ssn"},
	{"phone", "call " + textnormtest.Tags("+1 415 555 2671"), "phone"},
	{"ipv4", textnormtest.Tags("192.168.10.42"), "ipv4"},
}

// TestTaggedItemsMasked: an item written in tag characters is found, and masked with the
// characters that spell it.
func TestTaggedItemsMasked(t *testing.T) {
	s, err := pii.New(pii.Config{})
	require.NoError(t, err)
	for _, tt := range taggedValues {
		t.Run(tt.name, func(t *testing.T) {
			text := "before " + tt.in + " after"
			ms := s.Find(text)
			require.Len(t, ms, 1, "%q", text)
			assert.Equal(t, tt.kind, string(ms[0].Kind))
			got, n := s.Redact(text)
			assert.Equal(t, 1, n)
			assert.True(t, strings.HasPrefix(got, "before "), got)
			assert.True(t, strings.HasSuffix(got, " after"), got)
			assert.Contains(t, got, "[REDACTED:"+tt.kind+"]")
			assert.NotContains(t, got, "\U000E0031", "no tag character of the value is left")
		})
	}
	t.Run("flag", func(t *testing.T) {
		flag := "🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F"
		assert.Empty(t, s.Find("the flag "+flag+" of 2024"), "an emoji's tag sequence is not an item")
	})
}

// TestTaggedInputMasked: a message holding an item written in tag characters reaches the
// model masked.
func TestTaggedInputMasked(t *testing.T) {
	model := &chunkModel{deltas: []string{"ok"}}
	var seen string
	pl := chatPipeline(t, `{"action":"redact"}`, runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		seen = req.Messages[0].Content
		return model.Stream(ctx, req, yield)
	}))
	_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary",
		Messages: []runtime.Message{{Role: "user", Content: "mail " + textnormtest.Tags("jane.doe@example.com")}}},
		func(runtime.Delta) bool { return true })
	require.NoError(t, err)
	assert.Equal(t, "mail [REDACTED:email]", seen)
}

// TestTaggedToolResultMasked: a tool result holding an item in tag characters is masked.
func TestTaggedToolResultMasked(t *testing.T) {
	fn := func(context.Context, *runtime.ToolCall) (any, error) {
		return "card " + textnormtest.Tags("4111 1111 1111 1111") + " on file", nil
	}
	res, err := toolPipeline(t, `{"action":"redact"}`, fn).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{}})
	require.NoError(t, err)
	out, err := json.Marshal(res.Value)
	require.NoError(t, err)
	assert.Equal(t, `"card [REDACTED:card] on file"`, string(out))
}

// TestStreamedTaggedOutputMaskedAsWhole: random texts whose pieces are written in tag
// characters or not go out of the layer as the whole text is masked, however they are cut.
func TestStreamedTaggedOutputMaskedAsWhole(t *testing.T) {
	c := newStreamedAsWhole(t)
	rng := rand.New(rand.NewPCG(13, 17))
	n := 60
	if testing.Short() {
		n = 15
	}
	tagged := 0
	for range n {
		var b strings.Builder
		for range 3 + rng.IntN(7) {
			p := streamPieces[rng.IntN(len(streamPieces))]
			if rng.IntN(2) == 0 {
				p = textnormtest.Tags(p)
			}
			b.WriteString(p)
		}
		text := b.String()
		if len(c.s.Find(text)) > 0 && strings.Contains(text, "\U000E0031") {
			tagged++
		}
		c.checkCuts(t, text, rng)
	}
	assert.Greater(t, tagged, n/10, "texts holding an item and tag characters")
}
