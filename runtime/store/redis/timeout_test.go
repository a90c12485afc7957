package redis_test

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A server that does not answer (its writes paused) makes a budget
// reservation and an idempotency claim fail within the store's timeout, and
// the store serves again once the server does.
func TestAnOperationOnAPausedServerFailsWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	s := storetest.Redis(t, redis.WithTimeout(timeout))
	ctx := context.Background()
	opt := s.Client().Options()
	assert.Equal(t, timeout, opt.ReadTimeout)
	assert.Equal(t, timeout, opt.WriteTimeout)
	assert.Equal(t, timeout, opt.DialTimeout)
	assert.Zero(t, opt.MaxRetries, "the client never sends a command again by itself")
	calls := int64(10)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err := s.Reserve(ctx, "ledger", "r0", lim, 0)
	require.NoError(t, err, "the scripts are loaded")
	_, err = s.Acquire(ctx, "other", time.Minute, time.Hour, false)
	require.NoError(t, err)

	// WRITE pauses only the commands that may write (scripts included),
	// for as long as the test needs, and not the other clients' reads.
	pause := 1200 * time.Millisecond
	admin := goredis.NewClient(&goredis.Options{Addr: opt.Addr, DB: opt.DB, Username: opt.Username, Password: opt.Password})
	t.Cleanup(func() { _ = admin.Close() })
	require.NoError(t, admin.Do(ctx, "CLIENT", "PAUSE", pause.Milliseconds(), "WRITE").Err())
	paused := time.Now()
	t.Cleanup(func() { admin.Do(context.Background(), "CLIENT", "UNPAUSE") })

	start := time.Now()
	_, err = s.Reserve(ctx, "ledger", "r1", lim, 0)
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "redis budget")
	assert.Less(t, took, timeout+200*time.Millisecond, "bounded by the timeout")

	start = time.Now()
	_, err = s.Acquire(ctx, "refund", time.Minute, time.Hour, false)
	took = time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, timeout+200*time.Millisecond)

	start = time.Now()
	err = s.Settle(ctx, "ledger", "", runtime.Ledger{Calls: 1}, 0)
	took = time.Since(start)
	require.Error(t, err)
	assert.Less(t, took, timeout+200*time.Millisecond)

	time.Sleep(time.Until(paused.Add(pause + 100*time.Millisecond)))
	_, err = s.Reserve(ctx, "ledger", "r2", lim, 0)
	assert.NoError(t, err, "the store serves again once the server answers")
	l, err := s.LedgerOf(ctx, "ledger")
	require.NoError(t, err)
	assert.LessOrEqual(t, l.Calls, int64(1), "the settlement that timed out was not sent again")
}
