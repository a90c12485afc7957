package pii

import (
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEncodedItemLeavesNeighbourFieldsIntact: an address inside the base64 data of an MCP
// image result, or a resource's blob, is masked in that field alone; the fields read side by
// side with it keep their text, and the value keeps its shape.
func TestEncodedItemLeavesNeighbourFieldsIntact(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	data := base64.StdEncoding.EncodeToString([]byte("contact: bob.smith@example.com for it"))
	v := map[string]any{"content": []any{
		map[string]any{"type": "image", "mimeType": "image/png", "data": data},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///b", "mimeType": "text/plain", "blob": data}},
	}}
	red, n := s.RedactValue(v)
	assert.Equal(t, 2, n)
	assert.Equal(t, map[string]any{"content": []any{
		map[string]any{"type": "image", "mimeType": "image/png", "data": "[REDACTED:email]"},
		map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///b", "mimeType": "text/plain", "blob": "[REDACTED:email]"}},
	}}, red)
	red, n = s.RedactValue([]any{data, "file:///b"})
	assert.Equal(t, 1, n)
	assert.Equal(t, []any{"[REDACTED:email]", "file:///b"}, red)
}
