package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestErrorTextMaskedByAnOuterPII fails a tool call whose error quotes a
// card number and an email address under an audit inside a pii layer: the
// caller reads the text pii masked on the way out, and the trail records
// that text (include_errors) or its digest, never the card or the address;
// a pii layer that detects only emails leaves the card to both alike.
func TestErrorTextMaskedByAnOuterPII(t *testing.T) {
	const card, email = "4111111111111111", "ann@example.com"
	for _, tc := range []struct {
		name, pii, audit string
		kept             []string
	}{
		{"include_errors", `{"action": "redact"}`, `{"include_errors": true}`, nil},
		{"include_errors and include_args", `{"action": "block"}`, `{"include_errors": true, "include_args": true}`, nil},
		{"withheld", `{"action": "redact"}`, `{}`, nil},
		{"email only", `{"action": "redact", "kinds": ["email"]}`, `{"include_errors": true}`, []string{card}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &runtime.MemoryAudit{}
			p := toolPlan(rt.Layer("pii", tc.pii), rt.Layer("audit", tc.audit))
			tool := rt.NewTool(rt.ToolResult{Err: &runtime.CallError{Kind: runtime.KindPermanent,
				Layer: "bank", Message: "card " + card + " declined for " + email}})
			pl := rt.Build(t, p, runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
			_, callErr := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"ref": "R3"}})
			require.Error(t, callErr)
			assert.NotContains(t, callErr.Error(), email, "pii masks the caller's error")
			recs := sink.Records()
			require.Len(t, recs, 2)
			b, err := json.Marshal(recs)
			require.NoError(t, err)
			assert.NotContains(t, string(b), email)
			for _, k := range tc.kept {
				assert.Contains(t, callErr.Error(), k)
			}
			if tc.kept == nil {
				assert.NotContains(t, string(b), card)
			}
			out := recs[1]
			if tc.audit == `{}` {
				sum := sha256.Sum256([]byte(callErr.Error()))
				assert.Contains(t, out.ErrorMessage, "text withheld, sha256 "+hex.EncodeToString(sum[:]),
					"the digest matches the error the caller got")
				return
			}
			assert.Equal(t, callErr.Error(), out.ErrorMessage)
		})
	}
}

// TestErrorTextMaskedByAnOuterRedact fails a tool call whose error quotes a
// secret under an audit inside a tool-chain redact layer, which masks the
// error's text for the caller as pii does: the trail records the text the
// caller reads (include_errors), or its digest, never the secret.
func TestErrorTextMaskedByAnOuterRedact(t *testing.T) {
	const secret = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx"
	for _, audit := range []string{`{"include_errors": true}`, `{}`} {
		t.Run(audit, func(t *testing.T) {
			sink := &runtime.MemoryAudit{}
			p := toolPlan(rt.Layer("redact", `{}`), rt.Layer("audit", audit))
			tool := rt.NewTool(rt.ToolResult{Err: &runtime.CallError{Kind: runtime.KindPermanent,
				Layer: "bank", Message: "key " + secret + " refused"}})
			pl := rt.Build(t, p, runtime.Deps{Audit: sink, Tools: map[string]runtime.ToolFunc{"refund": tool.Func()}})
			_, callErr := pl.Tool(ctx1, runtime.ToolRequest{Name: "refund", Args: map[string]any{"ref": "R3"}})
			require.Error(t, callErr)
			require.NotContains(t, callErr.Error(), secret, "redact masks the caller's error")
			recs := sink.Records()
			require.Len(t, recs, 2)
			out := recs[1]
			assert.NotContains(t, out.ErrorMessage, secret)
			if audit == `{}` {
				sum := sha256.Sum256([]byte(callErr.Error()))
				assert.Contains(t, out.ErrorMessage, "text withheld, sha256 "+hex.EncodeToString(sum[:]),
					"the digest matches the error the caller got")
				return
			}
			assert.Equal(t, callErr.Error(), out.ErrorMessage)
		})
	}
}
