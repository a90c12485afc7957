package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A claim the server applied but whose reply was lost is the attempt's
// when it asks again with its owner nonce; anyone else finds it held.
func TestAClaimWhoseReplyWasLostIsTheAttempts(t *testing.T) {
	ctx := context.Background()
	direct := open(t)
	p := storetest.NewProxy(t, storetest.ServerURL(t, storetest.RedisEnv))
	s, err := redis.Open(ctx, p.URL, strings.TrimSuffix(direct.Prefix(), ":"), redis.WithTimeout(time.Second))
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Acquire(ctx, "warm", time.Minute, time.Hour, false) // the server knows the script: EVALSHA runs it
	require.NoError(t, err)

	p.LoseNextReply()
	_, err = s.AcquireAs(ctx, "refund", "attempt-1", time.Minute, time.Hour, false)
	require.Error(t, err, "the reply was lost")
	g, err := direct.Acquire(ctx, "refund", time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseHeld, g.Status, "the server applied the claim")

	g, err = s.AcquireAs(ctx, "refund", "attempt-1", time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status, "the attempt asking again gets its claim")
	assert.False(t, g.InDoubt)
	ok, err := s.Publish(ctx, "refund", g.Token, []byte(`"R1"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "with the claim's token")
}
