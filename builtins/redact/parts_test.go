package redact_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestChatSecretAcrossParts: a secret cut across two text pieces of a message (its content
// and its text parts), which the model reads run together, is masked, the text around it
// kept: the placeholder takes the place of the part of the secret in the first piece it
// starts in, its parts in the others are removed. Text glued to a secret across two parts is
// read as the model reads it, as the secret's tail.
func TestChatSecretAcrossParts(t *testing.T) {
	text := func(s string) runtime.ContentPart { return runtime.ContentPart{Type: runtime.PartText, Text: s} }
	pemBody := "\nMIIEowIBAAKCAQEA1234567890abcdef\n-----END RSA PRIVATE KEY-----"
	for _, tt := range []struct {
		name    string
		msg     runtime.Message
		content string
		parts   []string
	}{
		{"key cut in two parts", runtime.Message{Role: "user", Parts: []runtime.ContentPart{text("my key is sk-proj-abcdefghij"), text("klmnopqrstuvwx, thanks")}},
			"", []string{"my key is [REDACTED:openai-key]", ", thanks"}},
		{"value in the part after its name", runtime.Message{Role: "user", Content: "log in with password=", Parts: []runtime.ContentPart{text("hunter22x please")}},
			"log in with password=", []string{"[REDACTED:password-assignment] please"}},
		{"key over three parts", runtime.Message{Role: "assistant", Parts: []runtime.ContentPart{text("AKIA"), text("IOSFODNN"), text("7EXAMPLE ok")}},
			"", []string{"[REDACTED:aws-access-key-id]", "", " ok"}},
		{"private key body in the next part", runtime.Message{Role: "user", Parts: []runtime.ContentPart{text("-----BEGIN RSA PRIVATE KEY-----"), text(pemBody)}},
			"", []string{"[REDACTED:private-key]", ""}},
		{"url credentials before the at sign's part", runtime.Message{Role: "system", Content: "fetch https://bob:pa55word", Parts: []runtime.ContentPart{text("@example.com/x")}},
			"fetch https://bob:[REDACTED:url-credentials]", []string{"@example.com/x"}},
		{"tool result read joined by a line break", runtime.Message{Role: "tool", ToolCallID: "c1", Content: "aws_secret_access_key:", Parts: []runtime.ContentPart{text("wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY")}},
			"aws_secret_access_key:", []string{"[REDACTED:aws-secret-access-key]"}},
		{"the tail of a key matched whole in the first part", runtime.Message{Role: "user", Parts: []runtime.ContentPart{text("key " + projKey), text("Zz9Yy8Xx7 ok")}},
			"", []string{"key [REDACTED:openai-key]", " ok"}},
		{"each part on its own", runtime.Message{Role: "user", Parts: []runtime.ContentPart{text("key " + projKey), text(" ok")}},
			"", []string{"key [REDACTED:openai-key]", " ok"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := sendThrough(t, []runtime.Message{tt.msg})[0]
			assert.Equal(t, tt.content, got.Content)
			parts := make([]string, len(got.Parts))
			for i := range got.Parts {
				parts[i] = got.Parts[i].Text
			}
			assert.Equal(t, tt.parts, parts)
		})
	}
}

// TestChatSecretAcrossMessages: a secret cut across consecutive messages of one role, which
// Anthropic's API merges into one turn, is masked; messages of different roles, each opening
// with its role's markers, and tool results, each its own block, are read each on its own.
func TestChatSecretAcrossMessages(t *testing.T) {
	msgs := []runtime.Message{
		{Role: "system", Content: "deploy with token="},
		{Role: "system", Content: "Zq81mNb0Xc"},
		{Role: "user", Content: "my key is sk-proj-abcdefghij"},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartText, Text: "klmnopqrstuvwx"}, {Type: runtime.PartText, Text: " thanks"}}},
		{Role: "assistant", Content: "noted AKIAIOSF"},
		{Role: "user", Content: "ODNN7EXAMPLE is not a key here"},
		{Role: "tool", ToolCallID: "c1", Content: "password="},
		{Role: "tool", ToolCallID: "c2", Content: "hunter22x"},
	}
	got := sendThrough(t, msgs)
	assert.Equal(t, "deploy with token=", got[0].Content)
	assert.Equal(t, "[REDACTED:password-assignment]", got[1].Content)
	assert.Equal(t, "my key is [REDACTED:openai-key]", got[2].Content)
	assert.Equal(t, []runtime.ContentPart{{Type: runtime.PartText}, {Type: runtime.PartText, Text: " thanks"}}, got[3].Parts)
	assert.Equal(t, msgs[4:], got[4:], "different roles and separate results are read each on its own")
}

// sendThrough sends msgs through a redact layer and returns the messages the model read,
// checking that the caller's are untouched.
func sendThrough(t *testing.T, msgs []runtime.Message) []runtime.Message {
	t.Helper()
	before, err := json.Marshal(msgs)
	require.NoError(t, err)
	model := &recordingModel{}
	_, err = redactPipeline(t, model).Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	kept, err := json.Marshal(msgs)
	require.NoError(t, err)
	assert.JSONEq(t, string(before), string(kept), "the caller's messages are untouched")
	return model.seen[0]
}
