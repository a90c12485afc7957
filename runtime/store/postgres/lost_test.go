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
// when it asks again with its owner nonce; anyone else finds it held.
func TestAClaimWhoseReplyWasLostIsTheAttempts(t *testing.T) {
	ctx := context.Background()
	direct := open(t)
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	s, err := postgres.Open(ctx, p.URL, direct.Schema(), postgres.WithTimeout(2*time.Second))
	require.NoError(t, err)
	defer s.Close()

	p.LoseNextReply()
	_, err = s.AcquireAs(ctx, "refund", "attempt-1", time.Minute, time.Hour, false)
	require.Error(t, err, "the answer was lost")
	g, err := direct.Acquire(ctx, "refund", time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseHeld, g.Status, "the server committed the claim")

	g, err = s.AcquireAs(ctx, "refund", "attempt-1", time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status, "the attempt asking again gets its claim")
	assert.False(t, g.InDoubt)
	ok, err := s.Publish(ctx, "refund", g.Token, []byte(`"R1"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "with the claim's token")
}
