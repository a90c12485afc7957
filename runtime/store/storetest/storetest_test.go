package storetest_test

import (
	"testing"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func TestMemoryStore(t *testing.T) {
	s := runtime.NewMemoryStore()
	t.Run("KV", func(t *testing.T) { storetest.KV(t, s) })
	t.Run("Leaser", func(t *testing.T) { storetest.Leaser(t, runtime.NewKVLeaser(s)) })
	t.Run("LeaserOwner", func(t *testing.T) { storetest.LeaserOwner(t, runtime.NewKVLeaser(s)) })
	t.Run("LeaserNote", func(t *testing.T) { storetest.LeaserNote(t, runtime.NewKVLeaser(s)) })
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
	t.Run("Checkpoints", func(t *testing.T) { storetest.Checkpoints(t, s) })
}
