package redact

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// randomWords returns n words of 1 to 12 letters of either case.
func randomWords(r *rand.Rand, n int) []string {
	words := make([]string, n)
	for i := range words {
		b := make([]byte, 1+r.IntN(12))
		for k := range b {
			b[k] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[r.IntN(52)]
		}
		words[i] = string(b)
	}
	return words
}

// TestEncodedSecretLeavesTheWordsAfterIt: a secret's base64 with words on the next line is
// masked without them: "\nNOT" went with the key's mask ("NOT for production" became "for
// production"). Words before and after the encoding, after any separator, come out unchanged
// and in order, and the secret does not.
func TestEncodedSecretLeavesTheWordsAfterIt(t *testing.T) {
	r0 := newRedactor(t, Config{})
	cfg := base64.StdEncoding.EncodeToString([]byte("key=sk-ant-api03-" + strings.Repeat("A", 94)))
	got, _ := r0.Redact("cfg " + cfg + "\nNOT for production\n")
	assert.Equal(t, "cfg [REDACTED:anthropic-key]\nNOT for production\n", got)

	r := rand.New(rand.NewPCG(7, 11))
	encodings := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}
	for i := 0; i < 2000; i++ {
		secret := []string{"key=" + anthropicKey, "id " + awsKeyID, "token " + openAIKey, "gh " + githubToken}[r.IntN(4)]
		secret = strings.Join(randomWords(r, r.IntN(4)), " ") + " " + secret + " " + strings.Join(randomWords(r, r.IntN(4)), " ")
		value := encodings[r.IntN(len(encodings))].EncodeToString([]byte(secret))
		before := strings.Join(randomWords(r, 1+r.IntN(4)), " ") + []string{" ", "\n", "\t", ": "}[r.IntN(4)]
		sep := []string{"\n", "\r\n", " ", "\n\n", ".\n", "\n  ", ", "}[r.IntN(7)]
		// several words, or one whose length no encoding ends in: a lone word of a multiple
		// of four letters on its own line, decoding as text, may be the end of the encoding
		after := randomWords(r, 1+r.IntN(5))
		for len(after) == 1 && len(after[0])%4 == 0 {
			after = randomWords(r, 1)
		}
		tail := strings.Join(after, " ") + []string{"", "\n", "."}[r.IntN(3)]
		text := before + value + sep + tail
		got, n := r0.Redact(text)
		if !assert.NotZero(t, n, "%q", text) {
			break
		}
		assert.NotContains(t, got, value, "%q", text)
		if !assert.True(t, strings.HasPrefix(got, before) && strings.HasSuffix(got, sep+tail), "%q\n-> %q", text, got) {
			break
		}
	}
}
