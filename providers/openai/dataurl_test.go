package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestDataURLsOfAnySpellingAreSentAsData: the layers take "DATA:", a
// spaced URL or one with a tab or line break for a data: URL, as a URL
// parser does (runtime.DataURL). This client refused a PDF so spelt as one
// known by its URL, and sent an image's URL as the client wrote it, which a
// server may read otherwise. Both go as the URL the layers read, spelt
// "data:" and without the white space (runtime.CanonicalDataURL).
func TestDataURLsOfAnySpellingAreSentAsData(t *testing.T) {
	c, err := New(Config{Model: "m"})
	require.NoError(t, err)
	for u, want := range map[string]string{
		"DATA:application/pdf;base64,JVBERi0=":      "data:application/pdf;base64,JVBERi0=",
		" Data:application/pdf;base64,JVBE\nRi0=\t": "data:application/pdf;base64,JVBERi0=",
		"da\tta:application/pdf;base64,JVBERi0=":    "data:application/pdf;base64,JVBERi0=",
	} {
		got, err := c.body(&runtime.ChatRequest{Messages: []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{
			{Type: runtime.PartImage, ImageURL: u},
			{Type: runtime.PartDocument, MediaType: "application/pdf", ImageURL: u},
		}}}})
		require.NoError(t, err, u)
		var body struct {
			Messages []struct {
				Content []struct {
					ImageURL struct{ URL string } `json:"image_url"`
					File     struct {
						FileData string `json:"file_data"`
					}
				}
			}
		}
		require.NoError(t, json.Unmarshal(got, &body), "%s", got)
		require.Len(t, body.Messages, 1, "%s", got)
		require.Len(t, body.Messages[0].Content, 2, "%s", got)
		assert.Equal(t, want, body.Messages[0].Content[0].ImageURL.URL, "%q", u)
		assert.Equal(t, want, body.Messages[0].Content[1].File.FileData, "%q", u)
	}
}
