package anthropic

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestDataURLsOfAnySpellingAreSentAsData: a data: URL is read by the
// layers (runtime.DataURL) in any case, past white space and with its tabs
// and line breaks dropped, as a URL parser reads it. The client sent only
// one spelt "data:" as data: "DATA:" went as a URL source, which the API
// refuses to fetch (or fetches otherwise than the layers read it), and a
// plain (percent-encoded) URL's text as if it were base64. Each is a
// base64 source holding the data the layers read.
func TestDataURLsOfAnySpellingAreSentAsData(t *testing.T) {
	c, err := New(Config{Model: "m"})
	require.NoError(t, err)
	for u, want := range map[string][2]string{
		"DATA:image/png;base64,iVBORw0KGgo=":        {"image/png", "iVBORw0KGgo="},
		" Data:image/png;BASE64,iVBO\nRw0K Ggo=\t":  {"image/png", "iVBORw0KGgo="},
		"da\tta:image/png;base64,iVBORw0KGgo=":      {"image/png", "iVBORw0KGgo="},
		"data:text/plain,hello%20you":               {"text/plain", "aGVsbG8geW91"},
		"data:image/png;name=a.png;base64,iVBORw0=": {"image/png", "iVBORw0="},
	} {
		parts := []runtime.ContentPart{{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: u}}
		if strings.HasPrefix(want[0], "image/") { // else text, a document (TestImagePartsHoldingTextAreTextDocuments)
			parts = append(parts, runtime.ContentPart{Type: runtime.PartImage, ImageURL: u})
		}
		got, err := c.body(&runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Parts: parts}}})
		require.NoError(t, err, u)
		var body struct {
			Messages []struct {
				Content []struct {
					Type   string
					Source map[string]string
				}
			}
		}
		require.NoError(t, json.Unmarshal(got, &body), "%s", got)
		require.Len(t, body.Messages, 1, "%s", got)
		require.Len(t, body.Messages[0].Content, len(parts), "%s", got)
		for _, bl := range body.Messages[0].Content {
			assert.Equal(t, map[string]string{"type": "base64", "media_type": want[0], "data": want[1]}, bl.Source, "%q %s", u, bl.Type)
		}
	}
}
