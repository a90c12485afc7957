package pii_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// pngWithCard is a PNG whose text chunk holds a card number, among binary bytes.
func pngWithCard() []byte {
	b := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	b = append(b, make([]byte, 13)...)
	b = append(b, "tEXtComment\x00card 4111 1111 1111 1111 here\x00"...)
	for i := range 256 {
		b = append(b, byte(i))
	}
	return b
}

// TestToolResultsMasked: in the tool chain, a result holding personal data is masked with
// "redact" as redact masks a secret (its text, its structured content, bytes, raw JSON, and
// an image whose text chunk holds it, the data replaced by the mask), the error text of a
// failed call too; with "block" the call fails with a refusal that names the tool, marked as
// a call that ran.
func TestToolResultsMasked(t *testing.T) {
	image := base64.StdEncoding.EncodeToString(pngWithCard())
	results := map[string]any{
		"text":       "customer card 4111 1111 1111 1111 on file",
		"structured": map[string]any{"content": []any{map[string]any{"type": "text", "text": "card 4111111111111111"}}, "structuredContent": map[string]any{"card": "4111-1111-1111-1111"}},
		"bytes":      []byte("mail ann@example.com"),
		"raw JSON":   json.RawMessage(`{"ssn":"078-05-1120"}`),
		"image":      map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": image}}},
	}
	for name, result := range results {
		t.Run(name, func(t *testing.T) {
			fn := func(context.Context, *runtime.ToolCall) (any, error) { return result, nil }
			redact := toolPipeline(t, `{"action":"redact"}`, fn)
			res, err := redact.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{"path": "a"}})
			require.NoError(t, err)
			out, err := json.Marshal(res.Value)
			require.NoError(t, err)
			if b, ok := res.Value.([]byte); ok {
				out = b // bytes are read as text
			}
			assert.Contains(t, string(out), "REDACTED")
			for _, leak := range []string{"4111", "ann@example.com", "078-05-1120", image} {
				assert.NotContains(t, string(out), leak)
			}

			block := toolPipeline(t, `{"action":"block"}`, fn)
			_, err = block.Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{"path": "a"}})
			var b *runtime.BlockedError
			require.ErrorAs(t, err, &b)
			assert.Equal(t, "privacy", b.Layer)
			assert.Contains(t, b.Message, "tool lookup: its result contains personal data")
			assert.True(t, errors.Is(err, runtime.ErrRan), "the tool ran")
		})
	}

	fail := func(context.Context, *runtime.ToolCall) (any, error) {
		return nil, errors.New("no account for ann@example.com")
	}
	_, err := toolPipeline(t, `{"action":"redact"}`, fail).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{}})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "ann@example.com")

	clean := func(context.Context, *runtime.ToolCall) (any, error) { return "nothing here", nil }
	for _, action := range []string{"redact", "block"} {
		res, err := toolPipeline(t, `{"action":"`+action+`"}`, clean).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{}})
		require.NoError(t, err)
		assert.Equal(t, "nothing here", res.Value)
	}
}

// TestToolResultInvalidBytesInACard: a tool result whose card groups are joined by bytes
// that are no UTF-8 reaches the model with U+FFFD in their place (its JSON encoding), which
// reads as one card: "redact" masks it and "block" refuses the call, as for U+FFFD itself.
func TestToolResultInvalidBytesInACard(t *testing.T) {
	result := "customer card 4111\xff1111\xfe1111\xc01111 on file"
	wire, err := json.Marshal(result)
	require.NoError(t, err)
	var asModelReads string
	require.NoError(t, json.Unmarshal(wire, &asModelReads))
	fn := func(context.Context, *runtime.ToolCall) (any, error) { return result, nil }
	res, err := toolPipeline(t, `{"action":"redact"}`, fn).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{}})
	require.NoError(t, err)
	assert.NotContains(t, res.Value, "1111", "redact: the card reaches the model unmasked")
	_, err = toolPipeline(t, `{"action":"block"}`, fn).Tool(context.Background(), runtime.ToolRequest{Name: "lookup", Args: map[string]any{}})
	assert.Error(t, err, "block: the card %q reaches the model", asModelReads)
}
