package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A claim the server committed but whose answer was lost is the attempt's
// when it asks again with its owner nonce.
func TestAClaimWhoseReplyWasLostIsTheAttempts(t *testing.T) {
	direct := open(t)
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	s, err := postgres.Open(context.Background(), p.URL, direct.Schema(), postgres.WithTimeout(2*time.Second))
	require.NoError(t, err)
	defer s.Close()
	storetest.LeaserLostReply(t, direct, s, p)
}

// A connection cut while it sat in the pool (a server restart, a proxy or a
// network that dropped it) failed the next append with "unexpected EOF",
// the server being up: an outcome lost. The record is written on another
// connection, once.
func TestAnAuditRecordSurvivesACutConnection(t *testing.T) {
	direct := open(t)
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	s, err := postgres.Open(context.Background(), p.URL, direct.Schema(), postgres.WithTimeout(5*time.Second))
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	rec := runtime.AuditRecord{Time: time.Unix(100, 0), Layer: "audit", Tool: "refund", Phase: runtime.PhaseOutcome,
		Decision: runtime.DecisionOK, RunID: "r1", Attempts: 1}
	require.NoError(t, s.Append(ctx, rec))
	p.Cut()
	p.Restore()
	rec.Time = time.Unix(101, 0)
	require.NoError(t, s.Append(ctx, rec), "the server is up: the record is written")
	recs, err := direct.Records(ctx, "r1")
	require.NoError(t, err)
	assert.Len(t, recs, 2)

	// The append that follows a lost answer writes nothing when the first
	// one committed.
	require.NoError(t, postgres.AppendAgain(ctx, s, rec))
	rec.Time = time.Unix(102, 0)
	require.NoError(t, postgres.AppendAgain(ctx, s, rec))
	recs, err = direct.Records(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.True(t, recs[2].Time.Equal(time.Unix(102, 0)))
}
