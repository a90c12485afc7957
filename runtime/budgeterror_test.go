package runtime_test

import (
	"context"
	"fmt"
	"math"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// A calls ceiling reached by calls in flight (another replica's, or a
// replica killed mid-call whose reservation holds its place until its lease
// ends) says so: "ceiling 2 reached (spent 1)" read as a miscount.
func TestBudgetErrorNamesTheCallsInFlight(t *testing.T) {
	e := &runtime.BudgetError{Layer: "meter", Resource: "calls", Spent: 1, Limit: 2, Pending: 1}
	assert.Equal(t, "budget held by calls in flight at meter: calls ceiling 2 reached (spent 1, 1 reserved by calls in flight); try again once they end", e.Error())
	// On a shared ledger a place may be held by a process that stopped:
	// it comes back once the reservation lapses, at the end of its lease.
	e.Lease = 10 * time.Minute
	assert.Equal(t, "budget held by calls in flight at meter: calls ceiling 2 reached (spent 1, 1 reserved by calls in flight); try again once they end, or once those of a process that stopped lapse (lease 10m0s)", e.Error())
	e.Spent = 2
	assert.Equal(t, "budget exhausted at meter: calls ceiling 2 reached (spent 2, 1 reserved by calls in flight)", e.Error())
	e.Pending = 0
	assert.Equal(t, "budget exhausted at meter: calls ceiling 2 reached (spent 2)", e.Error())
}

// A refusal for the reservations of calls in flight alone (a meter outside
// a rate_limit on a shared store, whose rejected calls still hold their
// places for a round trip) was final: a 402 that SDKs do not retry,
// though the calls holding the places may end uncharged and the budget
// was not spent. It is now a failure to try again after a second, of kind
// rate_limited; a refusal the charged ledger (with the call's own
// estimate) makes stays final.
func TestARefusalForCallsInFlightIsNotFinal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		e        *runtime.BudgetError
		inFlight bool
	}{
		{"calls held by calls in flight", &runtime.BudgetError{Resource: "calls", Spent: 0, Limit: 25, Pending: 25}, true},
		{"calls spent", &runtime.BudgetError{Resource: "calls", Spent: 25, Limit: 25, Pending: 3}, false},
		{"calls spent, none in flight", &runtime.BudgetError{Resource: "calls", Spent: 25, Limit: 25}, false},
		{"estimate fits without the calls in flight", &runtime.BudgetError{Resource: "tokens", Spent: 100, Limit: 1500, Estimate: 1000, Pending: 1000}, true},
		{"estimate crosses alone", &runtime.BudgetError{Resource: "usd", Spent: 1, Limit: 1.5, Estimate: 1, Pending: 0.2}, false},
		{"tokens spent", &runtime.BudgetError{Resource: "tokens", Spent: 1500, Limit: 1500}, false},
		{"calls held by the call's own caller", &runtime.BudgetError{Resource: "calls", Spent: 0, Limit: 1, Pending: 1, Held: 1}, false},
		{"calls held by its caller and another call", &runtime.BudgetError{Resource: "calls", Spent: 0, Limit: 2, Pending: 2, Held: 1}, true},
		{"estimate fits only without its caller's", &runtime.BudgetError{Resource: "tokens", Spent: 100, Limit: 1500, Estimate: 1000, Pending: 1500, Held: 500}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fmt.Errorf("chat: %w", tc.e)
			assert.Equal(t, tc.inFlight, tc.e.InFlight())
			d, ok := runtime.RetryAfterOf(err)
			if tc.inFlight {
				assert.Equal(t, runtime.ClassFailure, runtime.Classify(err))
				assert.Equal(t, string(runtime.KindRateLimited), runtime.KindOf(err))
				assert.True(t, ok)
				assert.Equal(t, time.Second, d)
				assert.True(t, runtime.DidNotRun(err), "refused before it ran")
				return
			}
			assert.Equal(t, runtime.ClassBudget, runtime.Classify(err))
			assert.Equal(t, "budget", runtime.KindOf(err))
			assert.False(t, ok)
		})
	}
}

// An estimate whose output is near the largest int64 (a request's
// max_tokens of 2^63-1) plus its input tokens wrapped around to a negative
// count, which a tokens ceiling admitted and a lapsed reservation held as
// nothing. The sum saturates: the call is refused, the hold is the most.
func TestHugeEstimateIsNotWrappedAround(t *testing.T) {
	ceiling := int64(1000)
	est := &runtime.Ledger{InputTokens: 5, OutputTokens: math.MaxInt64}
	assert.Equal(t, int64(math.MaxInt64), est.Tokens())
	e := runtime.CheckBudget(runtime.Ledger{}, runtime.Ledger{}, runtime.BudgetLimits{Tokens: &ceiling, Estimate: est})
	if assert.NotNil(t, e, "the estimate crosses the ceiling") {
		assert.Equal(t, "tokens", e.Resource)
	}
	assert.Equal(t, int64(math.MaxInt64), runtime.Hold(est).InputTokens)
	assert.Equal(t, int64(math.MaxInt64), runtime.Usage{InputTokens: 5, OutputTokens: math.MaxInt64}.Total())
}

// A refusal names the budget it comes from, so that two meters of one
// chain (a tenant's daily budget, a run's) are told apart.
func TestBudgetErrorNamesTheBudget(t *testing.T) {
	e := &runtime.BudgetError{Layer: "daily", Resource: "usd", Spent: 20, Limit: 20, Scope: "key", Window: "24h",
		Resets: time.Date(2031, 3, 11, 0, 0, 0, 0, time.UTC)}
	assert.Equal(t, "budget exhausted at daily: usd ceiling 20 reached (spent 20); per-key budget of the 24h window that resets at 2031-03-11T00:00:00Z", e.Error())
	e = &runtime.BudgetError{Layer: "per_run", Resource: "calls", Spent: 3, Limit: 3, Scope: "run"}
	assert.Equal(t, "budget exhausted at per_run: calls ceiling 3 reached (spent 3); per-run budget", e.Error())
	e.Scope = "global"
	assert.Equal(t, "budget exhausted at per_run: calls ceiling 3 reached (spent 3); global budget", e.Error())
}

// A ledger written with a ttl expires once idle for it, and the expired
// ledgers are swept as new ones come, so the ledgers of past windows are
// not kept for good; one written without a ttl stays.
func TestMemoryBudgeterExpiresLedgers(t *testing.T) {
	b := runtime.NewMemoryBudgeter()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	runtime.SetMemoryBudgeterClock(b, func() time.Time { return now })
	ctx := context.Background()
	one := int64(1)
	require.NoError(t, b.Settle(ctx, "kept", "", runtime.Ledger{Calls: 1}, 0))
	e, err := b.Reserve(ctx, "w0", "r", runtime.BudgetLimits{Calls: &one}, time.Minute)
	require.NoError(t, err)
	require.Nil(t, e)
	require.NoError(t, b.Settle(ctx, "w0", "r", runtime.Ledger{Calls: 1}, time.Minute))
	e, err = b.Reserve(ctx, "w0", "r2", runtime.BudgetLimits{Calls: &one}, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, e, "spent while it lives")
	now = now.Add(time.Minute)
	l, err := b.LedgerOf(ctx, "w0")
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{}, l, "expired")
	for i := range 1000 {
		now = now.Add(time.Second)
		require.NoError(t, b.Settle(ctx, fmt.Sprintf("w%d", i+1), "", runtime.Ledger{Calls: 1}, 10*time.Second))
	}
	assert.LessOrEqual(t, runtime.MemoryBudgeterLen(b), 64, "expired ledgers are swept")
	l, err = b.LedgerOf(ctx, "kept")
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{Calls: 1}, l, "a ledger without a ttl stays")
}

// A ledger remembered each reservation it settled for an hour
// (runtime.SettleMemory), and every Reserve and Settle went through all
// of them to forget the old ones: a tenant's meter at 1,000 calls a second
// walked up to 3.6 million entries per call, and held them. Forgetting now
// looks only at the entries due, oldest first, so a call costs the same
// after 20,000 settled reservations as after none; in process a settled
// one is remembered a minute, a lapsed one an hour.
func TestMemoryBudgeterCallCostDoesNotGrowWithSettledCalls(t *testing.T) {
	b := runtime.NewMemoryBudgeter()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	runtime.SetMemoryBudgeterClock(b, func() time.Time { return now })
	ctx := context.Background()
	calls := int64(math.MaxInt64)
	lim := runtime.BudgetLimits{Calls: &calls}
	round := func(key, prefix string, n int) time.Duration {
		start := time.Now()
		for i := range n {
			id := fmt.Sprintf("%s%d", prefix, i)
			e, err := b.Reserve(ctx, key, id, lim, 0)
			require.NoError(t, err)
			require.Nil(t, e)
			require.NoError(t, b.Settle(ctx, key, id, runtime.Ledger{Calls: 1}, 0))
		}
		return time.Since(start)
	}
	round("busy", "warm", 20000)
	require.Equal(t, 20000, runtime.MemoryBudgeterRemembered(b, "busy"))
	var busy, quiet time.Duration
	for range 3 { // the best of three, against a loaded machine
		q, bz := round("quiet", "q", 2000), round("busy", "b", 2000)
		if quiet == 0 || q < quiet {
			quiet = q
		}
		if busy == 0 || bz < busy {
			busy = bz
		}
	}
	assert.Less(t, busy, 10*quiet+20*time.Millisecond, "2,000 calls took %v on a ledger remembering 20,000 settled calls, %v on one remembering none", busy, quiet)

	// A settled one is remembered a minute in process (a repeat of its
	// Settle charges nothing more), a lapsed one an hour (a late Settle
	// charges only what exceeds its hold).
	require.NoError(t, b.Settle(ctx, "busy", "warm0", runtime.Ledger{Calls: 1}, 0))
	l, err := b.LedgerOf(ctx, "busy")
	require.NoError(t, err)
	assert.Equal(t, int64(26000), l.Calls)
	lim.Lease = time.Second
	e, err := b.Reserve(ctx, "busy", "slow", lim, 0)
	require.NoError(t, err)
	require.Nil(t, e)
	now = now.Add(time.Minute)
	_, err = b.LedgerOf(ctx, "busy")
	require.NoError(t, err)
	assert.Equal(t, 1, runtime.MemoryBudgeterRemembered(b, "busy"), "the settled forgotten after a minute, the lapsed kept")
	require.NoError(t, b.Settle(ctx, "busy", "slow", runtime.Ledger{Calls: 1, OutputTokens: 7}, 0))
	l, err = b.LedgerOf(ctx, "busy")
	require.NoError(t, err)
	assert.Equal(t, int64(26001), l.Calls, "the lapsed call charged once")
	assert.Equal(t, int64(7), l.OutputTokens)
	now = now.Add(time.Minute)
	_, err = b.LedgerOf(ctx, "busy")
	require.NoError(t, err)
	assert.Zero(t, runtime.MemoryBudgeterRemembered(b, "busy"), "forgotten when due")
}

// A burst of settled calls grew a ledger's queue of entries to forget and
// its map of remembered reservations, and forgetting them kept their room
// (a slice moved to its start, a map never shrinks): 42 MB held after
// 300,000 calls for the life of the ledger. The queue moves to a smaller
// array once its rest fills under a quarter of its room, and the map is
// made anew once it holds under a quarter of its peak.
func TestMemoryBudgeterGivesBackTheRoomOfABurst(t *testing.T) {
	b := runtime.NewMemoryBudgeter()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	runtime.SetMemoryBudgeterClock(b, func() time.Time { return now })
	ctx := context.Background()
	for i := range 300000 {
		require.NoError(t, b.Settle(ctx, "k", fmt.Sprintf("r%d", i), runtime.Ledger{Calls: 1}, 0))
	}
	require.GreaterOrEqual(t, runtime.MemoryBudgeterQueueCap(b, "k"), 300000)
	now = now.Add(2 * time.Minute)
	for i := range 10 {
		require.NoError(t, b.Settle(ctx, "k", fmt.Sprintf("s%d", i), runtime.Ledger{Calls: 1}, 0))
	}
	l, err := b.LedgerOf(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(300010), l.Calls)
	assert.Equal(t, 10, runtime.MemoryBudgeterRemembered(b, "k"))
	assert.Less(t, runtime.MemoryBudgeterQueueCap(b, "k"), 1000, "the queue's room given back")
	require.NoError(t, b.Settle(ctx, "k", "s0", runtime.Ledger{Calls: 1}, 0))
	l, err = b.LedgerOf(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(300010), l.Calls, "a repeated Settle still charges nothing")

	heap := func() uint64 {
		var m goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	kept := heap()
	require.NoError(t, b.ForgetLedger(ctx, "k"))
	held := int64(kept) - int64(heap())
	assert.Less(t, held, int64(4<<20), "a ledger remembering 10 reservations holds %d bytes", held)
	require.NoError(t, b.Settle(ctx, "k", "t", runtime.Ledger{Calls: 1}, 0))
}

// A budget's figures read as money and counts: "spent 1.0000001e+06" was
// a million dollars in exponent form, and a sum of prices carries float
// noise (0.30000000000000004). Dollars are shown to the millionth (below a
// dollar to six significant digits), counts whole, neither in exponent form.
func TestBudgetErrorPrintsFiguresReadably(t *testing.T) {
	e := &runtime.BudgetError{Layer: "meter", Resource: "usd", Spent: 1.0000001e+06, Limit: 1000}
	assert.Equal(t, "budget exhausted at meter: usd ceiling 1000 reached (spent 1000000.1)", e.Error())
	e = &runtime.BudgetError{Layer: "meter", Resource: "usd", Spent: 0.3, Limit: 0.25, Estimate: 0.0000123, Pending: 0.05}
	assert.Equal(t, "budget exhausted at meter: usd ceiling 0.25 would be crossed (spent 0.3, 0.05 reserved by calls in flight, the call is estimated at 0.0000123)", e.Error())
	// A spend below the millionth is not 0: one cheap call's 4e-7 read
	// "usd ceiling 0 reached (spent 0)".
	e = &runtime.BudgetError{Layer: "meter", Resource: "usd", Spent: 4.2e-7, Limit: 4e-7}
	assert.Equal(t, "budget exhausted at meter: usd ceiling 0.0000004 reached (spent 0.00000042)", e.Error())
	e = &runtime.BudgetError{Layer: "meter", Resource: "usd", Spent: 0.1 + 0.2, Limit: 0.3}
	assert.Equal(t, "budget exhausted at meter: usd ceiling 0.3 reached (spent 0.3)", e.Error())
	e = &runtime.BudgetError{Layer: "meter", Resource: "tokens", Spent: 2e9, Limit: 1e9}
	assert.Equal(t, "budget exhausted at meter: tokens ceiling 1000000000 reached (spent 2000000000)", e.Error())
}

// A negative count in a usage report is absurd, not nothing: the sum
// becomes the largest count, which a meter refuses as absurd usage, where
// it was dropped and the call charged as if it had reported none of it.
func TestANegativeCountIsAbsurd(t *testing.T) {
	u := runtime.Usage{InputTokens: 10, OutputTokens: 5}
	u.Add(runtime.Usage{InputTokens: -5, OutputTokens: 7, CachedInputTokens: -1})
	assert.Equal(t, runtime.Usage{InputTokens: math.MaxInt64, OutputTokens: 12, CachedInputTokens: math.MaxInt64}, u)
	u.Add(runtime.Usage{InputTokens: 3})
	assert.Equal(t, int64(math.MaxInt64), u.InputTokens, "it stays absurd")
}
