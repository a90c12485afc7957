package redact_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/redact"
)

// TestOverlappingSecretsAreMaskedWhole: two matches that overlap, the one that starts later
// running past the end of the one that starts first, are masked as one span: the later one's
// tail is part of its secret and must not survive. Whichever comes first in the rule list.
func TestOverlappingSecretsAreMaskedWhole(t *testing.T) {
	a := redact.Pattern{ID: "badge", Regex: `BADGE-\d{4}`}
	b := redact.Pattern{ID: "vault", Regex: `\d{4}-VAULT-[a-z]{6}`}
	for _, ps := range [][]redact.Pattern{{a, b}, {b, a}} {
		r, err := redact.New(redact.Config{DisableDefaults: true, Patterns: ps})
		require.NoError(t, err)
		out, n := r.Redact("id BADGE-1234-VAULT-qwerty end")
		assert.NotContains(t, out, "qwerty", ps)
		assert.NotContains(t, out, "1234", ps)
		assert.Contains(t, out, "id [REDACTED:badge]", ps)
		assert.Contains(t, out, " end", ps)
		assert.Equal(t, 1, n, ps)
	}
}
