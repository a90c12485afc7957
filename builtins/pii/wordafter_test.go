package pii

import (
	"encoding/base64"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
)

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
	textnormtest.WordsAroundSurvive(t, r, 2000, func() string {
		return []string{"card " + validCard(r, "4", 16), "ssn 078-05-1120", "mail jane.doe@example.com", "call +1 415 555 2671"}[r.IntN(4)]
	}, s.Redact)
}
