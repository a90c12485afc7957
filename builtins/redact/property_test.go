package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/runtime"
)

// TestSecretCutAnywhereIsMasked: a text holding a secret, cut at every point into two text
// parts of a message, into two consecutive user messages, into a tool result and the user's
// text after it, or into two consecutive strings of
// an array or two consecutive values of an object (in a value, nested in objects, in a tool
// call's arguments, or in a tool message holding them as JSON text), reaches the model
// with no secret the whole text holds, nor a piece of one, read run together or joined by a
// line break.
func TestSecretCutAnywhereIsMasked(t *testing.T) {
	r := newRedactor(t, Config{})
	tr := mask.Transcript{Mask: r.Redact, System: true}
	trFind := mask.Transcript{Mask: r.Redact, Find: r.items, System: true}
	for _, text := range []string{
		"key " + openAIKey + " ok", "id " + awsKeyID + ".", "aws_secret_access_key=" + awsSecret,
		"gh " + githubToken, "jwt " + jwt + " end", "Authorization: Bearer abcdefghijklmnopqrstu",
		"https://bob:pa55word@example.com/x", "password: hunter22x!", pemBlock,
		"k=sk%2D" + openAIKey[3:], `{\"password\":\"hunter22x\"}`, `{\\\"password\\\":\\\"hunter22x\\\"}`,
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
			// as the strings of an array, in a value and in a tool call's arguments
			for _, v := range []any{[]any{a, b}, []string{a, b}, map[string]any{"rows": []any{map[string]any{"text": []any{a, b, "x"}}, 7}},
				map[string]any{"head": a, "tail": b, "z": 7}, map[string]string{"head": a, "tail": b}} {
				red, _ := r.RedactValue(v)
				args, err := json.Marshal(v)
				require.NoError(t, err)
				out, _ := mask.Args(args, r.Redact, r.items)
				var pieces []string
				collectStrings(red, &pieces)
				assertNoSecretPiece(t, pieces, secrets, "%q cut at %d into %T", text, cut, v)
				assertNoSecretPiece(t, []string{string(out)}, secrets, "%q cut at %d into %T, arguments", text, cut, v)
				// and as a tool message holding the value as JSON text
				msgs, _ := trFind.Messages("", []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: string(args)}})
				var back any
				require.NoError(t, json.Unmarshal([]byte(msgs[0].Content), &back), msgs[0].Content)
				pieces = nil
				collectStrings(back, &pieces)
				assertNoSecretPiece(t, pieces, secrets, "%q cut at %d into %T, tool message", text, cut, v)
			}
			// and as a tool message holding an object written out of the order of its keys,
			// which the model reads as written
			qa, err := json.Marshal(a)
			require.NoError(t, err)
			qb, err := json.Marshal(b)
			require.NoError(t, err)
			content := `{"tail": ` + string(qa) + `, "head": ` + string(qb) + `, "n": 7}`
			msgs, _ := trFind.Messages("", []runtime.Message{{Role: "tool", ToolCallID: "c1", Content: content}})
			assertNoSecretPiece(t, []string{msgs[0].Content}, secrets, "%q cut at %d, written out of key order", text, cut)
			out, _ := mask.Args(json.RawMessage(content), r.Redact, r.items)
			assertNoSecretPiece(t, []string{string(out)}, secrets, "%q cut at %d, arguments written out of key order", text, cut)
			for _, msgs := range [][]runtime.Message{
				{{Role: "user", Content: a, Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: b}}}},
				{{Role: "user", Content: a}, {Role: "user", Content: b}},
				// a tool result and the user's text after it, one user turn to Anthropic's API
				{{Role: "tool", ToolCallID: "c1", Content: a}, {Role: "user", Content: b}},
				{{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c1", Text: a}, {Type: runtime.PartText, Text: b}}}},
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
				assertNoSecretPiece(t, pieces, secrets, "%q cut at %d", text, cut)
			}
		}
	}
}

// assertNoSecretPiece checks that pieces, read run together or joined by line breaks, hold
// none of secrets, nor a piece of one (eight bytes of it in a row).
func assertNoSecretPiece(t *testing.T, pieces, secrets []string, msgAndArgs ...any) {
	t.Helper()
	for _, sep := range []string{"", "\n"} {
		got := strings.Join(pieces, sep)
		for _, s := range secrets {
			for k := 0; k+min(8, len(s)) <= len(s); k++ {
				assert.NotContains(t, got, s[k:k+min(8, len(s))], msgAndArgs...)
			}
		}
	}
}

// collectStrings appends the strings of a JSON-like value to out, in order (object keys
// sorted).
func collectStrings(v any, out *[]string) {
	switch x := v.(type) {
	case string:
		*out = append(*out, x)
	case []string:
		*out = append(*out, x...)
	case []any:
		for _, e := range x {
			collectStrings(e, out)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			*out = append(*out, k)
			collectStrings(x[k], out)
		}
	}
}
