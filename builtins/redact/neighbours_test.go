package redact

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/runtime"
)

// TestBase64SecretLeavesNeighbourFieldsIntact: a secret inside the base64 data of an MCP image
// result is masked in that field alone; the fields read side by side with it (its type, its
// media type, a resource's uri) keep their text, and the value keeps its shape.
func TestBase64SecretLeavesNeighbourFieldsIntact(t *testing.T) {
	r, err := New(Config{})
	require.NoError(t, err)
	data := base64.StdEncoding.EncodeToString([]byte("config: aws key AKIAIOSFODNN7EXAMPLE in it"))
	v := map[string]any{"content": []any{
		map[string]any{"type": "image", "mimeType": "image/png", "data": data},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///b", "mimeType": "text/plain", "text": "ok"}},
	}}
	red, n := r.RedactValue(v)
	assert.Positive(t, n)
	content := red.(map[string]any)["content"].([]any)
	img := content[0].(map[string]any)
	assert.Equal(t, "image", img["type"])
	assert.Equal(t, "image/png", img["mimeType"])
	assert.Equal(t, "[REDACTED:aws-access-key-id]", img["data"])
	res := content[1].(map[string]any)["resource"].(map[string]any)
	assert.Equal(t, map[string]any{"uri": "file:///b", "mimeType": "text/plain", "text": "ok"}, res)
	assert.Equal(t, "resource", content[1].(map[string]any)["type"])

	// a resource whose blob holds it, and the strings of an array
	red, n = r.RedactValue(map[string]any{"uri": "file:///b", "mimeType": "application/octet-stream", "blob": data})
	assert.Equal(t, 1, n)
	assert.Equal(t, map[string]any{"uri": "file:///b", "mimeType": "application/octet-stream", "blob": "[REDACTED:aws-access-key-id]"}, red)
	for _, elems := range [][]any{{data, "file:///b"}, {"file:///b", data}, {"image", data, "image/png"}} {
		red, n = r.RedactValue(elems)
		assert.Equal(t, 1, n, "%q", elems)
		want := make([]any, len(elems))
		for i, e := range elems {
			want[i] = e
			if e == data {
				want[i] = "[REDACTED:aws-access-key-id]"
			}
		}
		assert.Equal(t, want, red)
	}
}

// TestBase64SecretLeavesNeighbourPartIntact: a message's content holding the run and its
// text part after it, read run together (before each is masked, as the layer reads them), keep
// the part's text.
func TestBase64SecretLeavesNeighbourPartIntact(t *testing.T) {
	r, err := New(Config{})
	require.NoError(t, err)
	data := base64.StdEncoding.EncodeToString([]byte("config: aws key AKIAIOSFODNN7EXAMPLE in it"))
	tr := mask.Transcript{Mask: r.Redact, Find: r.items, System: true}
	msgs := []runtime.Message{{Role: "user", Content: data, Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "image/png is the type"}}}}
	out, _ := tr.AcrossParts(msgs, r.items, true)
	out, _ = tr.Messages("", out)
	assert.Equal(t, "[REDACTED:aws-access-key-id]", out[0].Content)
	assert.Equal(t, "image/png is the type", out[0].Parts[0].Text)
}

// TestBase64SecretCutOverElementsMaskedInEach: a run whose decoding holds a secret cut over
// two strings, each holding a part of the secret's bytes, is masked in both.
func TestBase64SecretCutOverElementsMaskedInEach(t *testing.T) {
	r, err := New(Config{})
	require.NoError(t, err)
	data := base64.StdEncoding.EncodeToString([]byte("config: aws key AKIAIOSFODNN7EXAMPLE in it"))
	cut := len(data) / 2 // inside the key's bytes
	red, n := r.RedactValue([]any{data[:cut], data[cut:], "image/png"})
	assert.Positive(t, n)
	assert.Equal(t, []any{"[REDACTED:aws-access-key-id]", "", "image/png"}, red)
}

// BenchmarkRedactValueImageSecret: an MCP image result whose 6 KB of base64 data holds a key,
// with its type and media type; unpadded, its run read run together takes in theirs.
func BenchmarkRedactValueImageSecret(b *testing.B) {
	r, err := New(Config{})
	require.NoError(b, err)
	data := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("pixels ", 300) + "AKIAIOSFODNN7EXAMPLE" + strings.Repeat(" pixels", 300) + "."))
	v := map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": data}}}
	b.ReportAllocs()
	for b.Loop() {
		if _, n := r.RedactValue(v); n == 0 {
			b.Fatal("nothing masked")
		}
	}
}
