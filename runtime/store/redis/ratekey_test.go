package redis_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestRateBucketsKeepTheirInterval: a bucket an older build wrote (its tat
// alone, in microseconds) is read where it always was and counts in the
// interval of the call that finds it; from then on its interval is kept
// beside it, and a bucket whose key ends in "#interval" (a tenant chooses
// its name) is its own, not the interval of another.
func TestRateBucketsKeepTheirInterval(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	base := storetest.Key(t, "tenant")
	now, err := s.Client().Time(ctx).Result()
	require.NoError(t, err)
	require.NoError(t, s.Client().Set(ctx, s.Prefix()+base, now.Add(time.Minute).UnixMicro(), time.Hour).Err())
	wait, ok, err := s.Allow(ctx, base, time.Minute, 1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "the older build's call is counted")
	assert.InDelta(t, time.Minute.Seconds(), wait.Seconds(), 2)
	iv, err := s.Client().Get(ctx, s.Prefix()+base+"#interval").Int64()
	require.NoError(t, err)
	assert.Equal(t, time.Minute.Microseconds(), iv, "the interval is kept once a call used the bucket")

	for _, k := range []string{base + "#interval", base + "#interval#"} {
		_, ok, err = s.Allow(ctx, k, time.Second, 1, 0)
		require.NoError(t, err)
		assert.True(t, ok, "%q is a bucket of its own", k)
	}
	wait, ok, err = s.Allow(ctx, base, time.Hour, 1, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.InDelta(t, time.Hour.Seconds(), wait.Seconds(), 120, "rescaled from its own minute, not the other buckets' second")
	require.NoError(t, s.ForgetRate(ctx, base))
	n, err := s.Client().Exists(ctx, s.Prefix()+base, s.Prefix()+base+"#interval").Result()
	require.NoError(t, err)
	assert.Zero(t, n, "forgotten with its interval")
}
