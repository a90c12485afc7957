package redact

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
)

// TestTaggedSecretsMasked: a secret written in tag characters, which a model reads as the
// ASCII they stand for, is masked with the characters that spell it, by the default rules and
// by a configured pattern.
func TestTaggedSecretsMasked(t *testing.T) {
	r := newRedactor(t, Config{Patterns: []Pattern{{ID: "acct", Regex: `ACCT-[0-9]{6}`}}})
	tags := textnormtest.Tags
	for _, tt := range []struct{ name, in, want string }{
		{"api key", "key " + tags(openAIKey) + " end", "key [REDACTED:openai-key] end"},
		{"aws key id half tagged", "id AKIA" + tags(awsKeyID[4:]) + ".", "id [REDACTED:aws-access-key-id]."},
		{"assignment", tags("password=hunter22x") + " ok", tags("password=") + "[REDACTED:password-assignment] ok"},
		{"configured pattern", "ref " + tags("ACCT-123456") + "!", "ref [REDACTED:acct]!"},
		{"tags without a secret", "flag 🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F ok", "flag 🏴\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F ok"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, n := r.Redact(tt.in)
			assert.Equal(t, tt.want, got)
			if tt.want != tt.in {
				assert.Equal(t, 1, n)
			}
		})
	}
}

// TestStreamedTaggedOutputMaskedAsWhole: random texts whose pieces are written in tag
// characters or not go out of the layer as Redact masks the whole text, however they are cut.
func TestStreamedTaggedOutputMaskedAsWhole(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 23))
	n := 10
	if testing.Short() {
		n = 4
	}
	tagged := 0
	configs := openConfigs(t)
	for config, r := range configs {
		for range n {
			var b strings.Builder
			for range 3 + rng.IntN(6) {
				p := openPieces[rng.IntN(len(openPieces))](rng)
				if rng.IntN(2) == 0 {
					p = textnormtest.Tags(p)
				}
				b.WriteString(p)
			}
			text := b.String()
			if _, k := r.Redact(text); k > 0 && strings.ContainsRune(text, 0xE0020) {
				tagged++
			}
			checkCutsStreamedAsWhole(t, config, r, text, rng)
		}
	}
	assert.Positive(t, tagged, "texts holding a secret and tag characters")
}
