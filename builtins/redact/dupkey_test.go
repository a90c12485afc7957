package redact_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDuplicatedKeyInRawResult: a tool's result of raw JSON whose key is written twice holds
// two members, which the model reads both: a secret in the first is masked, though a decoder
// into a map keeps the last.
func TestDuplicatedKeyInRawResult(t *testing.T) {
	for _, raw := range []string{
		`{"k": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx", "k": "x"}`,
		`{"k": "x", "k": "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx"}`,
		`[{"password": "hunter22x", "password": ""}]`,
	} {
		got := toolResultThrough(t, json.RawMessage(raw))
		assert.Contains(t, got, "[REDACTED:", raw)
		assert.NotContains(t, got, "AbCdEfGh", raw)
		assert.NotContains(t, got, "hunter22x", raw)
	}
}
