package redact

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
)

// TestEncodedSecretLeavesTheWordsAfterIt: a secret's base64 with words on the next line is
// masked without them: "\nNOT" went with the key's mask ("NOT for production" became "for
// production"). Words before and after the encoding, after any separator, come out unchanged
// and in order, and the secret does not.
func TestEncodedSecretLeavesTheWordsAfterIt(t *testing.T) {
	red := newRedactor(t, Config{})
	cfg := base64.StdEncoding.EncodeToString([]byte("key=sk-ant-api03-" + strings.Repeat("A", 94)))
	got, _ := red.Redact("cfg " + cfg + "\nNOT for production\n")
	assert.Equal(t, "cfg [REDACTED:anthropic-key]\nNOT for production\n", got)

	r := rand.New(rand.NewPCG(7, 11))
	textnormtest.WordsAroundSurvive(t, r, 2000, func() string {
		return []string{"key=" + anthropicKey, "id " + awsKeyID, "token " + openAIKey, "gh " + githubToken}[r.IntN(4)]
	}, red.Redact)
}
