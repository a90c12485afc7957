package redact

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/runtime"
)

// TestSecretCutAnywhereIsMasked: a text holding a secret, cut at every point into two text
// parts of a message, or into two consecutive user messages, reaches the model with no
// secret the whole text holds, nor a piece of one, read run together or joined by a line
// break.
func TestSecretCutAnywhereIsMasked(t *testing.T) {
	r := newRedactor(t, Config{})
	tr := mask.Transcript{Mask: r.Redact, System: true}
	for _, text := range []string{
		"key " + openAIKey + " ok", "id " + awsKeyID + ".", "aws_secret_access_key=" + awsSecret,
		"gh " + githubToken, "jwt " + jwt + " end", "Authorization: Bearer abcdefghijklmnopqrstu",
		"https://bob:pa55word@example.com/x", "password: hunter22x!", pemBlock,
		"k=sk%2D" + openAIKey[3:], `{\"password\":\"hunter22x\"}`,
		"b64 " + base64.StdEncoding.EncodeToString([]byte("key "+awsKeyID)) + " ok",
		"hex " + hex.EncodeToString([]byte(githubToken)),
	} {
		var secrets []string
		for _, sp := range r.find(text) {
			secrets = append(secrets, text[sp.start:sp.end])
		}
		if !assert.NotEmpty(t, secrets, text) {
			continue
		}
		for cut := 1; cut < len(text); cut++ {
			a, b := text[:cut], text[cut:]
			for _, msgs := range [][]runtime.Message{
				{{Role: "user", Content: a, Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: b}}}},
				{{Role: "user", Content: a}, {Role: "user", Content: b}},
			} {
				joined, _ := tr.AcrossParts(msgs, r.items, true)
				out, _ := tr.Messages("", joined)
				var pieces []string
				for _, m := range out {
					pieces = append(pieces, m.Content)
					for _, p := range m.Parts {
						pieces = append(pieces, p.Text)
					}
				}
				for _, sep := range []string{"", "\n"} {
					got := strings.Join(pieces, sep)
					for _, s := range secrets {
						// Nor any piece of it (eight bytes of it in a row).
						for k := 0; k+min(8, len(s)) <= len(s); k++ {
							assert.NotContains(t, got, s[k:k+min(8, len(s))], "%q cut at %d", text, cut)
						}
					}
				}
			}
		}
	}
}
