package redis_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"

	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func open(t *testing.T) *redis.Store { return storetest.Redis(t) }

func TestPorts(t *testing.T) {
	s := open(t)
	t.Run("KV", func(t *testing.T) { storetest.KV(t, s) })
	t.Run("Leaser", func(t *testing.T) { storetest.Leaser(t, s) })
	t.Run("LeaserOwner", func(t *testing.T) { storetest.LeaserOwner(t, s) })
	t.Run("LeaserNote", func(t *testing.T) { storetest.LeaserNote(t, s) })
	t.Run("RateLimiter", func(t *testing.T) { storetest.RateLimiter(t, s) })
	t.Run("RateLimiterRescale", func(t *testing.T) { storetest.RateLimiterRescale(t, s) })
	t.Run("RateLimiterExact", func(t *testing.T) { storetest.RateLimiterExact(t, s) })
	t.Run("Budgeter", func(t *testing.T) { storetest.Budgeter(t, s) })
	t.Run("BudgeterReservesEstimates", func(t *testing.T) { storetest.BudgeterReservesEstimates(t, s) })
	t.Run("BudgeterFinalBeforeInFlight", func(t *testing.T) { storetest.BudgeterFinalBeforeInFlight(t, s) })
	t.Run("BudgeterLeases", func(t *testing.T) { storetest.BudgeterLeases(t, s) })
	t.Run("BudgeterSettlesOnce", func(t *testing.T) { storetest.BudgeterSettlesOnce(t, s) })
	t.Run("BudgeterRenews", func(t *testing.T) { storetest.BudgeterRenews(t, s) })
	t.Run("BudgeterConcurrent", func(t *testing.T) {
		spent, overrun := storetest.BudgeterConcurrent(t, s, 16)
		t.Logf("spent %.4f of 1.0000 (overrun of the calls beyond their estimates %.4f)", spent, overrun)
	})
	t.Run("BudgeterExpiry", func(t *testing.T) { storetest.BudgeterExpiry(t, s) })
	t.Run("Audit", func(t *testing.T) { storetest.Audit(t, s, s.Records) })
}

// A ledger an older build wrote (its reservations only a pending count)
// keeps its charges, its pending count no longer holds the ceiling, and a
// reservation of this build is still counted in it for the older builds
// of a rollout.
func TestLedgerOfAnOlderBuild(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	k := storetest.Key(t, "g")
	require.NoError(t, s.Client().HSet(ctx, s.Prefix()+k, "in", 40, "usd", "0.5", "calls", 3, "pending", 2).Err())
	t.Cleanup(func() { _ = s.ForgetLedger(context.Background(), k) })
	calls := int64(4)
	e, err := s.Reserve(ctx, k, "r1", runtime.BudgetLimits{Calls: &calls}, 0)
	require.NoError(t, err)
	require.Nil(t, e, "3 charged calls under a ceiling of 4")
	n, err := s.Client().HGet(ctx, s.Prefix()+k, "pending").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	require.NoError(t, s.Settle(ctx, k, "r1", runtime.Ledger{InputTokens: 10, USD: 0.25, Calls: 1}, 0))
	n, err = s.Client().HGet(ctx, s.Prefix()+k, "pending").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	l, err := s.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 50, USD: 0.75, Calls: 4}, l)
}
