package redact

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/credential"
)

// shapeSamples holds a credential of each shape of credential.Shapes and of
// redact's own rules, by label, assembled at run time.
var shapeSamples = map[string][]string{
	"private-key":       {pemBlock},
	"anthropic-key":     {anthropicKey},
	"openai-key":        {openAIKey, "sk-" + strings.Repeat("a1B2", 5)},
	"aws-access-key-id": {awsKeyID, "ASIA" + "IOSFODNN7EXAMPLE"},
	"github-token":      {githubToken, githubPAT, "ghs" + "_" + strings.Repeat("a1B2", 6)},
	"gitlab-token":      {"glpat" + "-" + strings.Repeat("x1Y2z", 5)},
	"slack-token":       {slackToken, "xox" + "s-1234567890-abcdefghij"},
	"google-api-key":    {googleKey},
	"stripe-key":        {stripeKey, "rk" + "_test_" + strings.Repeat("4eC3", 5)},
	"huggingface-token": {"hf" + "_" + strings.Repeat("AbCdEf", 6)},
	"jwt":               {jwt},
	"bearer-token":      {"Bearer " + strings.Repeat("abc.DEF-", 3)},
}

// Every credential shape of the one list (credential.Shapes) and of
// redact's default rules is masked by redact, under its label, and
// scrubbed from a log line by credential.Scrub; redact's assignment rules
// (a key word and the value beside it) are its own.
func TestCredentialShapesCaughtByRedactAndScrubber(t *testing.T) {
	r := newRedactor(t, Config{})
	assignment := map[string]bool{"aws-secret-access-key": true, "basic-auth": true, "url-credentials": true, "password-assignment": true}
	labels := map[string]bool{}
	for _, sh := range credential.Shapes {
		labels[sh.Label] = true
	}
	for _, p := range DefaultPatterns() {
		if !assignment[p.ID] {
			labels[p.ID] = true
		}
	}
	for label := range labels {
		require.NotEmpty(t, shapeSamples[label], "no sample of shape %s", label)
		for _, s := range shapeSamples[label] {
			text := "id " + s + " end"
			got, _ := r.Redact(text)
			assert.NotContains(t, got, s, label)
			assert.Contains(t, got, "[REDACTED:"+label+"]", "%s: %s", label, got)
			assert.NotContains(t, credential.Scrub(text), s, "scrubbed %s", label)
		}
	}
}
