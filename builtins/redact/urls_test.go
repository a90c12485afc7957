package redact_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// The URL of an image or a document is no text a model reads, but its
// provider fetches it, from the host the client chose, query included: a
// key in it (?key=sk-...) reached both. A URL masked would locate another
// resource, so one holding a secret refuses the call, naming the message,
// never the URL; a clean one, and a data: URL (read as the text it holds),
// go on as they are.
func TestChatPartURLs(t *testing.T) {
	image := func(u string) []runtime.Message {
		return []runtime.Message{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "see"}, {Type: runtime.PartImage, ImageURL: u}}}}
	}
	for name, tt := range map[string]struct {
		msgs    []runtime.Message
		blocked string
	}{
		"a key in the query": {image("https://img.example/a.png?key=" + projKey),
			"message 0 image URL holds a secret, which the model's provider fetches: a URL masked would locate another resource"},
		"a percent-encoded key in the path": {image("https://img.example/u/token%3D" + awsKey + "/a.png"),
			"message 0 image URL holds a secret"},
		"in a system message": {[]runtime.Message{{Role: "system", Parts: []runtime.ContentPart{{Type: runtime.PartImage, ImageURL: "https://img.example/logo.png?key=" + projKey}}}, {Role: "user", Content: "hi"}},
			"message 0 image URL holds a secret"},
		"a clean URL": {image("https://img.example/cat.png?w=1024"), ""},
	} {
		t.Run(name, func(t *testing.T) {
			model := &requestModel{}
			_, err := redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: tt.msgs})
			if tt.blocked == "" {
				require.NoError(t, err)
				require.Len(t, model.seen, 1)
				assert.Equal(t, tt.msgs, model.seen[0].Messages)
				return
			}
			var blocked *runtime.BlockedError
			require.ErrorAs(t, err, &blocked)
			assert.Contains(t, blocked.Message, tt.blocked)
			assert.NotContains(t, err.Error(), "sk-proj")
			assert.NotContains(t, err.Error(), awsKey)
			assert.Empty(t, model.seen)
		})
	}
}
