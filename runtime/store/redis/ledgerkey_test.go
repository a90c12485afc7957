package redis_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestLedgerKeysDisjoint: a run whose id ends in "#reservations" or
// "#settled" (a client chooses its run id) has a ledger of its own, not the
// reservations or settlements of the run whose id it extends; each ledger keeps its charges and its
// reservations apart, whatever order they are written in.
func TestLedgerKeysDisjoint(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	base := storetest.Key(t, "run/x")
	keys := []string{base, base + "#reservations", base + "#reservations#", base + "#reservations#reservations",
		base + "#settled", base + "#settled#", base + "#reservations#settled"}
	t.Cleanup(func() {
		for _, k := range keys {
			_ = s.ForgetLedger(context.Background(), k)
		}
	})
	calls := int64(10)
	for round := range 2 {
		for i, k := range keys {
			e, err := s.Reserve(ctx, k, "r", runtime.BudgetLimits{Calls: &calls}, 0)
			require.NoError(t, err, "reserve %q", k)
			require.Nil(t, e)
			require.NoError(t, s.Settle(ctx, k, "r", runtime.Ledger{InputTokens: int64(i + 1), Calls: 1}, 0), "settle %q", k)
			_, err = s.RenewReservation(ctx, k, "r", 0)
			require.NoError(t, err, "renew %q", k)
			l, err := s.LedgerOf(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, runtime.Ledger{InputTokens: int64((i + 1) * (round + 1)), Calls: int64(round + 1)}, l, "ledger %q", k)
		}
	}
	// A ledger whose key needs no escape is where it always was: the data
	// of a running deployment is read as before.
	n, err := s.Client().HGet(ctx, s.Prefix()+base, "calls").Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	require.NoError(t, s.ForgetLedger(ctx, base+"#reservations"))
	l, err := s.LedgerOf(ctx, base)
	require.NoError(t, err)
	assert.Equal(t, int64(2), l.Calls, "forgetting one ledger leaves the other")
}
