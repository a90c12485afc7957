package pii

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// TestEncodedValueLeavesTheWordsAfterIt: a value's base64 with words on the next line is
// masked without them: "\nNOT" went with the card's mask, turning "NOT approved" into
// "approved". Words before and after the encoding, after any separator, come out unchanged
// and in order, and the value does not.
func TestEncodedValueLeavesTheWordsAfterIt(t *testing.T) {
	s, err := New(Config{})
	require.NoError(t, err)
	ref := base64.StdEncoding.EncodeToString([]byte("card 4111111111111111"))
	got, _ := s.Redact("Transfer ref " + ref + "\nNOT approved by compliance\n")
	assert.Equal(t, "Transfer ref [REDACTED:card]\nNOT approved by compliance\n", got)

	r := rand.New(rand.NewPCG(7, 11))
	encodings := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}
	for i := 0; i < 2000; i++ {
		secret := []string{"card " + validCard(r, "4", 16), "ssn 078-05-1120", "mail jane.doe@example.com", "call +1 415 555 2671"}[r.IntN(4)]
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
		got, n := s.Redact(text)
		require.NotZero(t, n, "%q", text)
		assert.NotContains(t, got, value, "%q", text)
		if !assert.True(t, strings.HasPrefix(got, before) && strings.HasSuffix(got, sep+tail), "%q\n-> %q", text, got) {
			break
		}
	}
}
