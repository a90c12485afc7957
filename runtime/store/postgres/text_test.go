package postgres_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// PostgreSQL text refuses a NUL character and bytes that are not UTF-8,
// and jsonb the escape \u0000 and an unpaired surrogate. A tool's arguments
// or error text holding them must not cost the record: an intent refused
// stops the call, an outcome refused loses the trail of a call that ran.
func TestAuditRecordsWithTextPostgresRefusesAreKept(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	r := runtime.AuditRecord{Time: time.Unix(100, 0), Layer: "audit\x00", Stage: "tool", Tool: "re\x00fund",
		Phase: runtime.PhaseOutcome, Decision: runtime.DecisionFailed, ErrorType: "failure",
		ErrorMessage: "card \x00 4111\xff\xfe declined", RunID: "run\x00\xc3", IdempotencyKey: "k\x00",
		ArgsDigest: "d", Args: map[string]any{
			"note\x00": "a\x00b\xffc",
			"nested":   []any{map[string]any{"x": "\x00"}, `\u0000 written out`, "\\\x00"},
			"raw":      json.RawMessage(`"\ud800 lone, \udc00 low, \ud83d\ude00 pair"`),
			"plain":    "é ✓",
		}}
	require.NoError(t, s.Append(ctx, r))
	recs, err := s.Records(ctx, "run\x00\xc3")
	require.NoError(t, err)
	require.Len(t, recs, 1, "the run's records are found by the id it was written with")
	got := recs[0]
	assert.Equal(t, "audit\uFFFD", got.Layer)
	assert.Equal(t, "re\uFFFDfund", got.Tool)
	assert.Equal(t, "card \uFFFD 4111\uFFFD declined", got.ErrorMessage)
	assert.Equal(t, "run\uFFFD\uFFFD", got.RunID)
	assert.Equal(t, "k\uFFFD", got.IdempotencyKey)
	assert.Equal(t, map[string]any{
		"note\uFFFD": "a\uFFFDb\uFFFDc",
		"nested":     []any{map[string]any{"x": "\uFFFD"}, `\u0000 written out`, "\\\uFFFD"},
		"raw":        "\uFFFD lone, \uFFFD low, \U0001F600 pair",
		"plain":      "é ✓",
	}, got.Args)
}
