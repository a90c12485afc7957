// Package storetest checks that a state backend keeps the contracts of the
// runtime's ports (KV, Leaser, RateLimiter, Budgeter, AuditSink), so every
// store kind is held to the same tests, and finds the test servers.
package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// The environment variables that hold the test servers' URLs.
const (
	RedisEnv    = "AGENTC_TEST_REDIS_URL"
	PostgresEnv = "AGENTC_TEST_POSTGRES_URL"
)

// ServerURL returns the URL in the environment variable env, or skips the
// test with one line saying how to run it.
func ServerURL(t testing.TB, env string) string {
	t.Helper()
	u := os.Getenv(env)
	if u == "" {
		t.Skipf("set %s to run against a server (as .ci/run does)", env)
	}
	return u
}

// Prefix returns a key prefix (or schema name) unique to this test run.
func Prefix(t testing.TB) string {
	return strings.ToLower(fmt.Sprintf("t%d_%s", os.Getpid(), rand.Text()[:8]))
}

// Key returns a key unique to the calling test.
func Key(t testing.TB, name string) string { return t.Name() + "/" + name }

// KV checks the key-value port.
func KV(t *testing.T, kv runtime.KV) {
	ctx := context.Background()
	k := Key(t, "a")
	_, ok, err := kv.Get(ctx, k)
	require.NoError(t, err)
	assert.False(t, ok)
	require.NoError(t, kv.Set(ctx, k, []byte("v1"), 0))
	v, ok, err := kv.Get(ctx, k)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "v1", string(v))
	set, err := kv.SetIfAbsent(ctx, k, []byte("v2"), 0)
	require.NoError(t, err)
	assert.False(t, set, "present")
	require.NoError(t, kv.Delete(ctx, k))
	require.NoError(t, kv.Delete(ctx, k), "deleting a missing key is not an error")
	_, ok, err = kv.Get(ctx, k)
	require.NoError(t, err)
	assert.False(t, ok)

	short := Key(t, "ttl")
	require.NoError(t, kv.Set(ctx, short, []byte("x"), 50*time.Millisecond))
	time.Sleep(120 * time.Millisecond)
	_, ok, err = kv.Get(ctx, short)
	require.NoError(t, err)
	assert.False(t, ok, "expired")
	set, err = kv.SetIfAbsent(ctx, short, []byte("y"), time.Minute)
	require.NoError(t, err)
	assert.True(t, set, "an expired key is absent")

	race := Key(t, "race")
	var wins atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			ok, err := kv.SetIfAbsent(ctx, race, []byte("w"), time.Minute)
			assert.NoError(t, err)
			if ok {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), wins.Load(), "exactly one SetIfAbsent wins")
}

// Leaser checks the lease port: one holder, fencing, publication, release,
// the in-doubt state of an expired lease and a claim that outlives keep.
func Leaser(t *testing.T, l runtime.Leaser) {
	ctx := context.Background()
	k := Key(t, "a")
	g, err := l.Acquire(ctx, k, time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	assert.False(t, g.InDoubt)
	tok := g.Token
	g, err = l.Acquire(ctx, k, time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status)
	assert.Greater(t, g.Remaining, 50*time.Second)
	ok, err := l.Renew(ctx, k, tok, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = l.Publish(ctx, k, tok+1000, []byte(`"wrong"`), time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "a token that does not hold the lease is fenced out")
	ok, err = l.Publish(ctx, k, tok, []byte(`"R1"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok)
	g, err = l.Acquire(ctx, k, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseDone, g.Status)
	assert.Equal(t, `"R1"`, string(g.Result))
	ok, err = l.Renew(ctx, k, tok, time.Minute)
	require.NoError(t, err)
	assert.False(t, ok, "a published key has no lease")

	// Release: the next caller acquires afresh, with a new token.
	r := Key(t, "release")
	g, err = l.Acquire(ctx, r, time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	require.NoError(t, l.Release(ctx, r, g.Token))
	g2, err := l.Acquire(ctx, r, time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g2.Status)
	assert.NotEqual(t, g.Token, g2.Token)
	ok, err = l.Publish(ctx, r, g.Token, []byte(`1`), time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "a released token stays fenced out")

	// In doubt: the holder's lease ran out without an outcome.
	d := Key(t, "doubt")
	g, err = l.Acquire(ctx, d, 50*time.Millisecond, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	dead := g.Token
	time.Sleep(120 * time.Millisecond)
	g, err = l.Acquire(ctx, d, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status)
	g, err = l.Acquire(ctx, d, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status, "it stays in doubt")
	g, err = l.Acquire(ctx, d, time.Minute, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	assert.True(t, g.InDoubt)
	assert.NotEqual(t, dead, g.Token)
	ok, err = l.Publish(ctx, d, dead, []byte(`"late"`), time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "the dead holder is fenced out")
	g, err = l.Acquire(ctx, d, time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status)

	// A call that outlives keep while its holder renews stays claimed: the
	// record lives at least as long as the lease, so nobody else claims it.
	o := Key(t, "outlives")
	g, err = l.Acquire(ctx, o, time.Second, 100*time.Millisecond, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	long := g.Token
	time.Sleep(250 * time.Millisecond) // past keep, within the lease
	g, err = l.Acquire(ctx, o, time.Minute, 100*time.Millisecond, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status, "a claim past keep but within its lease is held")
	ok, err = l.Renew(ctx, o, long, 3*time.Second)
	require.NoError(t, err)
	require.True(t, ok)
	time.Sleep(850 * time.Millisecond) // past the first lease, within the renewed one
	g, err = l.Acquire(ctx, o, time.Minute, 100*time.Millisecond, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status, "a renewed claim past keep is held")
	ok, err = l.Publish(ctx, o, long, []byte(`"long"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "the holder that renewed still holds the lease")

	// Concurrent acquirers: one holder.
	c := Key(t, "race")
	var holders atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			g, err := l.Acquire(ctx, c, time.Minute, time.Hour, true)
			assert.NoError(t, err)
			if g.Status == runtime.LeaseAcquired {
				holders.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), holders.Load())
}

// RateLimiter checks the GCRA port.
func RateLimiter(t *testing.T, r runtime.RateLimiter) {
	ctx := context.Background()
	k := Key(t, "a")
	for i := range 3 {
		wait, ok, err := r.Allow(ctx, k, time.Hour, 3, 0)
		require.NoError(t, err)
		require.True(t, ok, "burst call %d", i)
		assert.Zero(t, wait)
	}
	wait, ok, err := r.Allow(ctx, k, time.Hour, 3, 0)
	require.NoError(t, err)
	assert.False(t, ok, "over the burst")
	assert.InDelta(t, time.Hour.Seconds(), wait.Seconds(), 2)
	wait, ok, err = r.Allow(ctx, k, time.Hour, 3, 2*time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "a caller that may wait gets the next slot")
	assert.InDelta(t, time.Hour.Seconds(), wait.Seconds(), 2)
	require.NoError(t, r.ForgetRate(ctx, k))
	_, ok, err = r.Allow(ctx, k, time.Hour, 3, 0)
	require.NoError(t, err)
	assert.True(t, ok, "forgotten")

	// Refill: one slot per interval. The second call is refused only if it
	// reached the store within the interval: on a loaded machine it may
	// not, and then the refill has rightly happened already.
	f := Key(t, "refill")
	const interval = 200 * time.Millisecond
	start := time.Now()
	_, ok, err = r.Allow(ctx, f, interval, 1, 0)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = r.Allow(ctx, f, interval, 1, 0)
	require.NoError(t, err)
	if time.Since(start) < interval {
		assert.False(t, ok, "within the interval")
	}
	time.Sleep(time.Until(start.Add(interval + interval/2)))
	_, ok, err = r.Allow(ctx, f, interval, 1, 0)
	require.NoError(t, err)
	assert.True(t, ok, "after the interval")
}

// Budgeter checks the budget port.
// BudgeterExpiry checks a store whose ledgers expire: a ledger idle for
// its ttl starts afresh for Reserve and Settle, as for LedgerOf, its charges
// and pending calls gone, whether or not the store has purged it yet.
func BudgeterExpiry(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	k := Key(t, "expiring")
	calls := int64(1)
	lim := runtime.BudgetLimits{Calls: &calls}
	ttl := 300 * time.Millisecond
	e, err := b.Reserve(ctx, k, lim, ttl)
	require.NoError(t, err)
	require.Nil(t, e)
	require.NoError(t, b.Settle(ctx, k, true, runtime.Ledger{InputTokens: 7, USD: 0.5, Calls: 1}, ttl))
	_, err = b.Reserve(ctx, k, lim, ttl) // a pending call that never settles
	require.NoError(t, err)
	time.Sleep(2 * ttl)
	l, err := b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{}, l)
	e, err = b.Reserve(ctx, k, lim, ttl)
	require.NoError(t, err)
	require.Nil(t, e, "an expired ledger starts afresh")
	require.NoError(t, b.Settle(ctx, k, true, runtime.Ledger{InputTokens: 2, USD: 0.25, Calls: 1}, ttl))
	l, err = b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 2, USD: 0.25, Calls: 1}, l, "the expired charges are not added to")
	e, err = b.Reserve(ctx, k, lim, ttl)
	require.NoError(t, err)
	require.NotNil(t, e, "the new ledger's ceiling holds")
	assert.Equal(t, 1.0, e.Spent)
}

func Budgeter(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	k := Key(t, "a")
	calls := int64(2)
	lim := runtime.BudgetLimits{Calls: &calls}
	for range 2 {
		e, err := b.Reserve(ctx, k, lim, time.Hour)
		require.NoError(t, err)
		require.Nil(t, e)
	}
	e, err := b.Reserve(ctx, k, lim, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "two calls in flight reach the ceiling")
	assert.Equal(t, "calls", e.Resource)
	assert.Equal(t, 2.0, e.Limit)
	require.NoError(t, b.Settle(ctx, k, true, runtime.Ledger{}, time.Hour)) // released, not charged
	e, err = b.Reserve(ctx, k, lim, time.Hour)
	require.NoError(t, err)
	require.Nil(t, e, "a released reservation frees its call")
	require.NoError(t, b.Settle(ctx, k, true, runtime.Ledger{InputTokens: 10, OutputTokens: 5, USD: 0.25, Calls: 1}, time.Hour))
	require.NoError(t, b.Settle(ctx, k, true, runtime.Ledger{InputTokens: 1, USD: 0.5, Calls: 1}, time.Hour))
	l, err := b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 11, OutputTokens: 5, USD: 0.75, Calls: 2}, l)
	e, err = b.Reserve(ctx, k, lim, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e)
	assert.Equal(t, 2.0, e.Spent)

	usd, tokens := 0.75, int64(17)
	e, err = b.Reserve(ctx, k, runtime.BudgetLimits{USD: &usd}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e)
	assert.Equal(t, "usd", e.Resource)
	assert.InDelta(t, 0.75, e.Spent, 1e-9)
	e, err = b.Reserve(ctx, k, runtime.BudgetLimits{Tokens: &tokens}, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, e, "16 tokens under a ceiling of 17")

	// An estimate that would cross a ceiling refuses the call in the same
	// step; one that reaches it exactly does not.
	tokens, usd = 20, 1.0
	e, err = b.Reserve(ctx, k, runtime.BudgetLimits{Tokens: &tokens, Estimate: &runtime.Ledger{InputTokens: 3, OutputTokens: 2}}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "16 charged and 5 estimated cross 20")
	assert.Equal(t, runtime.BudgetError{Resource: "tokens", Spent: 16, Limit: 20, Estimate: 5}, *e)
	e, err = b.Reserve(ctx, k, runtime.BudgetLimits{Tokens: &tokens, Estimate: &runtime.Ledger{OutputTokens: 4}}, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, e, "16 charged and 4 estimated reach 20 without crossing it")
	e, err = b.Reserve(ctx, k, runtime.BudgetLimits{USD: &usd, Estimate: &runtime.Ledger{USD: 0.3}}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e)
	assert.Equal(t, "usd", e.Resource)
	assert.InDelta(t, 0.75, e.Spent, 1e-9)
	assert.InDelta(t, 0.3, e.Estimate, 1e-9)
	fresh, one := Key(t, "fresh"), int64(1)
	e, err = b.Reserve(ctx, fresh, runtime.BudgetLimits{Tokens: &tokens, Calls: &one, Estimate: &runtime.Ledger{InputTokens: 21}}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "an estimate above the ceiling refuses the first call of a ledger")
	assert.Equal(t, runtime.BudgetError{Resource: "tokens", Limit: 20, Estimate: 21}, *e)
	e, err = b.Reserve(ctx, fresh, runtime.BudgetLimits{Calls: &one}, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, e, "a refused call reserves nothing")
	require.NoError(t, b.ForgetLedger(ctx, fresh))
	require.NoError(t, b.ForgetLedger(ctx, k))
	l, err = b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Zero(t, l)
}

// Audit checks the audit sink; records reads the stored records of a run.
func Audit(t *testing.T, s runtime.AuditSink, records func(ctx context.Context, runID string) ([]runtime.AuditRecord, error)) {
	ctx := context.Background()
	run := Key(t, "run")
	at := time.Now().UTC().Truncate(time.Microsecond)
	in := []runtime.AuditRecord{
		{Time: at, Layer: "audit", Stage: "tool", Tool: "refund", Phase: runtime.PhaseIntent, RunID: run, IdempotencyKey: "k1",
			ArgsDigest: "d1", Args: map[string]any{"order_id": "A1"}},
		{Time: at.Add(time.Millisecond), Layer: "audit", Stage: "tool", Tool: "refund", Phase: runtime.PhaseOutcome,
			Decision: runtime.DecisionFailed, ErrorType: "transient", ErrorMessage: "boom", Attempts: 2, RunID: run,
			IdempotencyKey: "k1", Duration: time.Millisecond, ArgsDigest: "d1"},
		// A call in doubt, and one as earlier versions recorded it
		// ("failed" with error type "in_doubt"): both read back as written.
		{Time: at.Add(2 * time.Millisecond), Layer: "audit", Stage: "tool", Tool: "refund", Phase: runtime.PhaseOutcome,
			Decision: runtime.DecisionInDoubt, ErrorType: "in_doubt", ErrorMessage: "idem: call of refund is in doubt", Attempts: 1,
			RunID: run, IdempotencyKey: "k2"},
		{Time: at.Add(3 * time.Millisecond), Layer: "audit", Stage: "tool", Tool: "refund", Phase: runtime.PhaseOutcome,
			Decision: runtime.DecisionFailed, ErrorType: "in_doubt", ErrorMessage: "idem: call of refund is in doubt", Attempts: 1,
			RunID: run, IdempotencyKey: "k3"},
	}
	for _, r := range in {
		require.NoError(t, s.Append(ctx, r))
	}
	require.NoError(t, s.Append(ctx, runtime.AuditRecord{Time: at, Phase: runtime.PhaseIntent, RunID: run + "-other"}))
	got, err := records(ctx, run)
	require.NoError(t, err)
	require.Len(t, got, len(in))
	for i := range in {
		assert.True(t, in[i].Time.Equal(got[i].Time))
		got[i].Time = in[i].Time
	}
	assert.Equal(t, in, got)
}
