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
// the in-doubt state of an expired lease, a lease its holder ended in doubt
// and a claim that outlives keep.
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
	// A publish sent again, its first answer lost: the outcome is the
	// token's already, and stays as it was.
	ok, err = l.Publish(ctx, k, tok, []byte(`"R1 again"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "a repeat of the publish that stored the outcome")
	ok, err = l.Publish(ctx, k, tok+1000, []byte(`"wrong"`), time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "another token does not own the outcome")
	g, err = l.Acquire(ctx, k, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, `"R1"`, string(g.Result), "a repeat changes nothing")

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

	leaserDoubt(t, l)

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

// leaserDoubt checks Doubt: a holder whose call may have had its effect
// ends its lease at once, and a duplicate finds the key in doubt without
// waiting out the lease (an hour here), for keep from then.
func leaserDoubt(t *testing.T, l runtime.Leaser) {
	ctx := context.Background()
	k := Key(t, "doubted")
	g, err := l.AcquireAs(ctx, k, "n1", nil, time.Hour, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	tok := g.Token
	ok, err := l.Doubt(ctx, k, tok+1000, time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "a token that does not hold the lease is fenced out")
	g, err = l.Acquire(ctx, k, time.Hour, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status, "and changes nothing")
	ok, err = l.Doubt(ctx, k, tok, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	for _, owner := range []string{"", "n1"} {
		g, err = l.AcquireAs(ctx, k, owner, nil, time.Hour, time.Hour, false)
		require.NoError(t, err)
		assert.Equal(t, runtime.LeaseInDoubt, g.Status, "in doubt at once, for owner %q too", owner)
	}
	g, err = l.Acquire(ctx, k, time.Hour, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status, "a retry-safe caller takes it over")
	assert.True(t, g.InDoubt)
	assert.NotEqual(t, tok, g.Token)
	ok, err = l.Doubt(ctx, k, tok, time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "the claim taken over is no longer the first holder's")
	ok, err = l.Publish(ctx, k, g.Token, []byte(`"R"`), time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = l.Doubt(ctx, k, g.Token, time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "a published key has no lease")
	g, err = l.Acquire(ctx, k, time.Hour, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseDone, g.Status)

	// The record lives keep from the doubt, not from the claim: here
	// shorter than the claim's lease.
	s := Key(t, "doubted-short")
	g, err = l.Acquire(ctx, s, time.Hour, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	ok, err = l.Doubt(ctx, s, g.Token, 300*time.Millisecond)
	require.NoError(t, err)
	require.True(t, ok)
	g, err = l.Acquire(ctx, s, time.Hour, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status)
	time.Sleep(700 * time.Millisecond)
	g, err = l.Acquire(ctx, s, time.Hour, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseAcquired, g.Status, "the doubt ends with keep")
	assert.False(t, g.InDoubt)
}

// LeaserNote checks the notes of claims (AcquireAs): a claim keeps its
// note while held, renewed and ended in doubt, and returns it to a caller
// that finds it so; a claim in doubt is taken over only with its note (a
// caller with another is answered in doubt, the claim untouched), and one
// without a note by any caller, whose note it keeps.
func LeaserNote(t *testing.T, l runtime.Leaser) {
	ctx := context.Background()
	k := Key(t, "noted")
	g, err := l.AcquireAs(ctx, k, "n1", []byte(`{"args":"nine"}`), time.Hour, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	tok := g.Token
	ok, err := l.Renew(ctx, k, tok, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	g, err = l.AcquireAs(ctx, k, "n2", []byte(`{"args":"900"}`), time.Hour, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status)
	assert.Equal(t, `{"args":"nine"}`, string(g.Note), "a claim held tells its note")
	ok, err = l.Doubt(ctx, k, tok, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)

	g, err = l.AcquireAs(ctx, k, "n2", []byte(`{"args":"900"}`), time.Hour, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status, "another note does not take it over")
	assert.Equal(t, `{"args":"nine"}`, string(g.Note))
	g, err = l.Acquire(ctx, k, time.Hour, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status, "nor does none")
	g, err = l.AcquireAs(ctx, k, "n3", []byte(`{"args":"nine"}`), time.Hour, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status, "without takeover, in doubt")
	assert.Equal(t, `{"args":"nine"}`, string(g.Note))

	g, err = l.AcquireAs(ctx, k, "n3", []byte(`{"args":"nine"}`), time.Hour, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status, "its own note takes it over")
	assert.True(t, g.InDoubt)
	ok, err = l.Doubt(ctx, k, g.Token, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	g, err = l.AcquireAs(ctx, k, "n4", nil, time.Hour, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status, "the claim taken over keeps the note")
	assert.Equal(t, `{"args":"nine"}`, string(g.Note))

	bare := Key(t, "bare")
	g, err = l.Acquire(ctx, bare, time.Hour, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	ok, err = l.Doubt(ctx, bare, g.Token, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	g, err = l.AcquireAs(ctx, bare, "n5", []byte(`{"args":"nine"}`), time.Hour, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status)
	assert.Nil(t, g.Note, "a claim without a note tells none")
	g, err = l.AcquireAs(ctx, bare, "n5", []byte(`{"args":"nine"}`), time.Hour, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status, "a claim without a note is taken over with one")
	assert.True(t, g.InDoubt)
	tok = g.Token
	g, err = l.AcquireAs(ctx, bare, "n6", nil, time.Hour, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status)
	assert.Equal(t, `{"args":"nine"}`, string(g.Note), "and keeps the taker's note")
	ok, err = l.Doubt(ctx, bare, tok, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	g, err = l.AcquireAs(ctx, bare, "n6", []byte(`{"args":"900"}`), time.Hour, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status, "which a caller with another note does not take over")
	assert.Equal(t, `{"args":"nine"}`, string(g.Note))

	none := Key(t, "none")
	g, err = l.Acquire(ctx, none, time.Hour, time.Hour, false)
	require.NoError(t, err)
	ok, err = l.Doubt(ctx, none, g.Token, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	g, err = l.AcquireAs(ctx, none, "n7", nil, time.Hour, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseAcquired, g.Status, "and without one, as before")
}

// LeaserOwner checks AcquireAs: an attempt that asks again with its owner
// nonce (its first answer was lost) gets its claim back, with its token and
// without doubt, even after the claim's lease ended; any other caller finds
// it held or in doubt, and a claim taken over is no longer the attempt's.
func LeaserOwner(t *testing.T, l runtime.Leaser) {
	ctx := context.Background()
	k := Key(t, "owned")
	g, err := l.AcquireAs(ctx, k, "n1", nil, time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	tok := g.Token
	again, err := l.AcquireAs(ctx, k, "n1", nil, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseGrant{Status: runtime.LeaseAcquired, Token: tok}, again, "the attempt asking again gets its claim")
	for _, owner := range []string{"n2", ""} {
		g, err = l.AcquireAs(ctx, k, owner, nil, time.Minute, time.Hour, true)
		require.NoError(t, err)
		assert.Equal(t, runtime.LeaseHeld, g.Status, "another owner %q finds it held", owner)
	}
	ok, err := l.Publish(ctx, k, tok, []byte(`"R"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok)
	g, err = l.AcquireAs(ctx, k, "n1", nil, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseDone, g.Status, "a published result is replayed, whoever asks")

	// The claim's lease ended: in doubt for others, the attempt's own
	// for it (nothing ran under a claim whose token it never learned).
	d := Key(t, "owned-expired")
	tok = expiredClaim(t, l, d, "n3")
	g, err = l.AcquireAs(ctx, d, "other", nil, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status)
	g, err = l.AcquireAs(ctx, d, "n3", nil, time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseGrant{Status: runtime.LeaseAcquired, Token: tok}, g)
	g, err = l.AcquireAs(ctx, d, "other", nil, time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status, "its lease runs again from the second answer")

	// Taken over after its lease ended: no longer the attempt's.
	x := Key(t, "owned-taken")
	expiredClaim(t, l, x, "n4")
	g, err = l.AcquireAs(ctx, x, "n5", nil, time.Minute, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	assert.True(t, g.InDoubt)
	g, err = l.AcquireAs(ctx, x, "n4", nil, time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status, "the claim taken over belongs to its new holder")
}

// expiredClaim claims key under owner for 50 ms and returns its token once
// that lease has ended.
func expiredClaim(t *testing.T, l runtime.Leaser, key, owner string) int64 {
	g, err := l.AcquireAs(context.Background(), key, owner, nil, 50*time.Millisecond, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	time.Sleep(120 * time.Millisecond)
	return g.Token
}

// LeaserLostReply checks, on a store seen directly and through the proxy
// p, that a claim the server applied but whose answer p lost is the
// attempt's when it asks again with its owner nonce, while anyone else
// finds it held. A store that asks again itself on another connection
// (postgres) answers the first attempt with the claim.
func LeaserLostReply(t *testing.T, direct, via runtime.Leaser, p *Proxy) {
	ctx := context.Background()
	_, err := via.Acquire(ctx, "warm", time.Minute, time.Hour, false) // the server knows the script or statement
	require.NoError(t, err)
	p.LoseNextReply()
	g, err := via.AcquireAs(ctx, "refund", "attempt-1", nil, time.Minute, time.Hour, false)
	if err == nil {
		require.Equal(t, runtime.LeaseAcquired, g.Status, "asked again, the attempt got its claim")
	}
	g, err = direct.Acquire(ctx, "refund", time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseHeld, g.Status, "the server applied the claim")
	g, err = via.AcquireAs(ctx, "refund", "attempt-1", nil, time.Minute, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status, "the attempt asking again gets its claim")
	assert.False(t, g.InDoubt)
	ok, err := via.Publish(ctx, "refund", g.Token, []byte(`"R1"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "with the claim's token")
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

// RateLimiterRescale checks that a bucket follows the interval of the
// call that uses it, as after a reload or a replica's restart with another
// policy: the calls a bucket has taken are counted in intervals, so raising
// the rate shortens the wait at once, and lowering it lets no burst of the
// old rate through.
func RateLimiterRescale(t *testing.T, r runtime.RateLimiter) {
	ctx := context.Background()
	k := Key(t, "raised")
	_, ok, err := r.Allow(ctx, k, time.Hour, 1, 0)
	require.NoError(t, err)
	require.True(t, ok)
	wait, ok, err := r.Allow(ctx, k, time.Minute, 1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "one call taken: the next one an interval later")
	assert.InDelta(t, time.Minute.Seconds(), wait.Seconds(), 2, "the raised rate's interval, not the old hour")
	wait, ok, err = r.Allow(ctx, k, time.Minute, 1, 2*time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.InDelta(t, time.Minute.Seconds(), wait.Seconds(), 2)

	k = Key(t, "lowered")
	for i := range 3 {
		_, ok, err := r.Allow(ctx, k, time.Minute, 3, 0)
		require.NoError(t, err)
		require.True(t, ok, "burst call %d", i)
	}
	wait, ok, err = r.Allow(ctx, k, time.Hour, 3, 0)
	require.NoError(t, err)
	assert.False(t, ok, "the burst spent under the old rate is spent under the new one")
	assert.InDelta(t, time.Hour.Seconds(), wait.Seconds(), 5)
	wait, ok, err = r.Allow(ctx, k, time.Hour, 3, 0)
	require.NoError(t, err)
	assert.False(t, ok, "asked again under the new rate")
	assert.InDelta(t, time.Hour.Seconds(), wait.Seconds(), 5)
	wait, ok, err = r.Allow(ctx, k, time.Minute, 3, 0)
	require.NoError(t, err)
	assert.False(t, ok, "back to the old rate: the bucket is as it was")
	assert.InDelta(t, time.Minute.Seconds(), wait.Seconds(), 2)
}

// RateLimiterExact checks that a limiter admits no more than one call per
// interval when the interval is not a whole number of its time unit: a
// store that rounded 1000.999 µs down to 1000 µs let one call in a
// thousand more through than the limit, and one that rounded 1.9 µs down
// to 1 µs nearly twice as many. Calls made faster than the interval, each
// willing to wait, are queued one interval apart: the last one's wait,
// with the time they all took, covers every interval.
// A store that keeps a call a millisecond or more (postgres commits each)
// cannot make enough calls in a test's time to show a microsecond.
func RateLimiterExact(t *testing.T, r runtime.RateLimiter) {
	const (
		n        = 10000
		interval = 1000999 * time.Nanosecond
	)
	ctx := context.Background()
	k := Key(t, "exact")
	var (
		mu      sync.Mutex
		longest time.Duration
		next    atomic.Int64
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= n {
				wait, ok, err := r.Allow(ctx, k, interval, 1, time.Hour)
				if !assert.NoError(t, err) || !assert.True(t, ok) {
					return
				}
				mu.Lock()
				longest = max(longest, wait)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if took >= (n-1)*interval {
		t.Skipf("the calls took %s, longer than the intervals they queue for", took)
	}
	assert.GreaterOrEqual(t, longest+took, (n-1)*interval,
		"%d calls one interval (%s) apart: the last waits %s after %s", n, interval, longest, took)
}

// BudgeterExpiry checks a store whose ledgers expire: a ledger idle for
// its ttl starts afresh for Reserve and Settle, as for LedgerOf, its charges
// and pending calls gone, whether or not the store has purged it yet.
func BudgeterExpiry(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	k := Key(t, "expiring")
	calls := int64(1)
	lim := runtime.BudgetLimits{Calls: &calls}
	ttl := 300 * time.Millisecond
	e, err := b.Reserve(ctx, k, "r1", lim, ttl)
	require.NoError(t, err)
	require.Nil(t, e)
	require.NoError(t, b.Settle(ctx, k, "r1", runtime.Ledger{InputTokens: 7, USD: 0.5, Calls: 1}, ttl))
	_, err = b.Reserve(ctx, k, "r2", lim, ttl) // a pending call that never settles
	require.NoError(t, err)
	time.Sleep(2 * ttl)
	l, err := b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{}, l)
	e, err = b.Reserve(ctx, k, "r3", lim, ttl)
	require.NoError(t, err)
	require.Nil(t, e, "an expired ledger starts afresh")
	require.NoError(t, b.Settle(ctx, k, "r3", runtime.Ledger{InputTokens: 2, USD: 0.25, Calls: 1}, ttl))
	l, err = b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 2, USD: 0.25, Calls: 1}, l, "the expired charges are not added to")
	e, err = b.Reserve(ctx, k, "r4", lim, ttl)
	require.NoError(t, err)
	require.NotNil(t, e, "the new ledger's ceiling holds")
	assert.Equal(t, 1.0, e.Spent)
}

// Budgeter checks the budget port.
func Budgeter(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	k := Key(t, "a")
	calls := int64(2)
	lim := runtime.BudgetLimits{Calls: &calls}
	for _, id := range []string{"r1", "r2"} {
		e, err := b.Reserve(ctx, k, id, lim, time.Hour)
		require.NoError(t, err)
		require.Nil(t, e)
	}
	e, err := b.Reserve(ctx, k, "r3", lim, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "two calls in flight reach the ceiling")
	assert.Equal(t, runtime.BudgetError{Resource: "calls", Limit: 2, Pending: 2}, *e)
	require.NoError(t, b.Settle(ctx, k, "r1", runtime.Ledger{}, time.Hour)) // released, not charged
	require.NoError(t, b.Settle(ctx, k, "r1", runtime.Ledger{}, time.Hour), "a reservation settled twice is released once")
	e, err = b.Reserve(ctx, k, "r4", lim, time.Hour)
	require.NoError(t, err)
	require.Nil(t, e, "a released reservation frees its call")
	e, err = b.Reserve(ctx, k, "r5", lim, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "settling r1 twice freed one call, not two")
	require.NoError(t, b.Settle(ctx, k, "r2", runtime.Ledger{InputTokens: 10, OutputTokens: 5, USD: 0.25, Calls: 1}, time.Hour))
	require.NoError(t, b.Settle(ctx, k, "r4", runtime.Ledger{InputTokens: 1, USD: 0.5, Calls: 1}, time.Hour))
	l, err := b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 11, OutputTokens: 5, USD: 0.75, Calls: 2}, l)
	e, err = b.Reserve(ctx, k, "r6", lim, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e)
	assert.Equal(t, 2.0, e.Spent)

	usd, tokens := 0.75, int64(17)
	e, err = b.Reserve(ctx, k, "r7", runtime.BudgetLimits{USD: &usd}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e)
	assert.Equal(t, "usd", e.Resource)
	assert.InDelta(t, 0.75, e.Spent, 1e-9)
	e, err = b.Reserve(ctx, k, "r8", runtime.BudgetLimits{Tokens: &tokens}, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, e, "16 tokens under a ceiling of 17")
	require.NoError(t, b.Settle(ctx, k, "r8", runtime.Ledger{}, time.Hour))

	// An estimate that would cross a ceiling refuses the call in the same
	// step; one that reaches it exactly does not.
	tokens, usd = 20, 1.0
	e, err = b.Reserve(ctx, k, "r9", runtime.BudgetLimits{Tokens: &tokens, Estimate: &runtime.Ledger{InputTokens: 3, OutputTokens: 2}}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "16 charged and 5 estimated cross 20")
	assert.Equal(t, runtime.BudgetError{Resource: "tokens", Spent: 16, Limit: 20, Estimate: 5}, *e)
	e, err = b.Reserve(ctx, k, "r10", runtime.BudgetLimits{Tokens: &tokens, Estimate: &runtime.Ledger{OutputTokens: 4}}, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, e, "16 charged and 4 estimated reach 20 without crossing it")
	require.NoError(t, b.Settle(ctx, k, "r10", runtime.Ledger{}, time.Hour))
	e, err = b.Reserve(ctx, k, "r11", runtime.BudgetLimits{USD: &usd, Estimate: &runtime.Ledger{USD: 0.3}}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e)
	assert.Equal(t, "usd", e.Resource)
	assert.InDelta(t, 0.75, e.Spent, 1e-9)
	assert.InDelta(t, 0.3, e.Estimate, 1e-9)
	fresh, one := Key(t, "fresh"), int64(1)
	e, err = b.Reserve(ctx, fresh, "r1", runtime.BudgetLimits{Tokens: &tokens, Calls: &one, Estimate: &runtime.Ledger{InputTokens: 21}}, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "an estimate above the ceiling refuses the first call of a ledger")
	assert.Equal(t, runtime.BudgetError{Resource: "tokens", Limit: 20, Estimate: 21}, *e)
	e, err = b.Reserve(ctx, fresh, "r2", runtime.BudgetLimits{Calls: &one}, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, e, "a refused call reserves nothing")
	require.NoError(t, b.ForgetLedger(ctx, fresh))
	e, err = b.Reserve(ctx, fresh, "r3", runtime.BudgetLimits{Calls: &one}, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, e, "a forgotten ledger's reservations are gone with it")
	require.NoError(t, b.ForgetLedger(ctx, fresh))
	require.NoError(t, b.ForgetLedger(ctx, k))
	l, err = b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Zero(t, l)
}

// BudgeterReservesEstimates checks that the estimates of the calls in
// flight count against the tokens and usd ceilings until they settle, and
// that a settlement replaces a call's estimate with its charge, in full
// when it exceeds the estimate.
func BudgeterReservesEstimates(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	k := Key(t, "estimates")
	tokens, usd := int64(100), 1.0
	lim := func(n int64, cost float64) runtime.BudgetLimits {
		return runtime.BudgetLimits{Tokens: &tokens, USD: &usd, Estimate: &runtime.Ledger{InputTokens: n, USD: cost}}
	}
	for _, id := range []string{"a", "b"} {
		e, err := b.Reserve(ctx, k, id, lim(40, 0.25), time.Hour)
		require.NoError(t, err)
		require.Nil(t, e)
	}
	e, err := b.Reserve(ctx, k, "c", lim(40, 0.25), time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "nothing charged yet, but 80 reserved and 40 estimated cross 100")
	assert.Equal(t, runtime.BudgetError{Resource: "tokens", Limit: 100, Estimate: 40, Pending: 80}, *e)
	assert.Contains(t, e.Message(), "80 reserved by calls in flight")
	e, err = b.Reserve(ctx, k, "c", lim(20, 0.6), time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e, "0.5 reserved and 0.6 estimated cross 1")
	assert.Equal(t, "usd", e.Resource)
	assert.InDelta(t, 0.5, e.Pending, 1e-9)
	require.NoError(t, b.Settle(ctx, k, "a", runtime.Ledger{InputTokens: 10, USD: 0.05, Calls: 1}, time.Hour))
	e, err = b.Reserve(ctx, k, "c", lim(50, 0.25), time.Hour)
	require.NoError(t, err)
	require.Nil(t, e, "a's estimate of 40 replaced by its charge of 10: 10 + 40 + 50 reach 100")
	require.NoError(t, b.Settle(ctx, k, "b", runtime.Ledger{InputTokens: 70, USD: 0.5, Calls: 1}, time.Hour))
	require.NoError(t, b.Settle(ctx, k, "c", runtime.Ledger{InputTokens: 50, USD: 0.25, Calls: 1}, time.Hour))
	l, err := b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, int64(130), l.Tokens(), "b charged 70 for an estimate of 40: in full")
	assert.InDelta(t, 0.8, l.USD, 1e-9)
	require.NoError(t, b.ForgetLedger(ctx, k))
}

// BudgeterFinalBeforeInFlight checks that a call the charged ledger alone
// refuses (one ceiling reached, or crossed by the call's estimate) gets
// that final refusal, not one for the calls in flight
// (runtime.BudgetError.InFlight) that another ceiling would give it: the
// calls ending gives it no room.
func BudgeterFinalBeforeInFlight(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	tokens, usd, calls := int64(100), 1.0, int64(3)
	for _, c := range []struct {
		name    string
		charge  runtime.Ledger
		want    string
		pending float64
	}{
		{"usd reached", runtime.Ledger{InputTokens: 10, USD: 1, Calls: 1}, "usd", 0},
		{"calls reached", runtime.Ledger{InputTokens: 10, USD: 0.1, Calls: 3}, "calls", 1},
		{"usd crossed by the estimate", runtime.Ledger{InputTokens: 10, USD: 0.9, Calls: 1}, "usd", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := Key(t, "final")
			lim := runtime.BudgetLimits{Tokens: &tokens, USD: &usd, Estimate: &runtime.Ledger{InputTokens: 40, USD: 0.2}}
			e, err := b.Reserve(ctx, k, "spent", lim, time.Hour)
			require.NoError(t, err)
			require.Nil(t, e)
			require.NoError(t, b.Settle(ctx, k, "spent", c.charge, time.Hour))
			e, err = b.Reserve(ctx, k, "flight", runtime.BudgetLimits{Tokens: &tokens, Estimate: &runtime.Ledger{InputTokens: 60}}, time.Hour)
			require.NoError(t, err)
			require.Nil(t, e)
			lim.Calls = &calls
			e, err = b.Reserve(ctx, k, "refused", lim, time.Hour)
			require.NoError(t, err)
			require.NotNil(t, e)
			assert.Equal(t, c.want, e.Resource, "%+v", *e)
			assert.False(t, e.InFlight(), "the charged ledger alone refuses it: %+v", *e)
			assert.InDelta(t, c.pending, e.Pending, 1e-9, "what the calls in flight hold, told")
			require.NoError(t, b.ForgetLedger(ctx, k))
		})
	}
}

// BudgeterLeases checks that a reservation never settled (its process
// died, or every Settle of it failed) is charged its hold once its lease
// ends (one call, its estimate's tokens and cost), never refunded, and
// that a settlement after that charges only what it exceeds the hold by,
// once.
func BudgeterLeases(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	k := Key(t, "leases")
	calls, usd := int64(2), 1.0
	lease := 300 * time.Millisecond
	lim := runtime.BudgetLimits{Calls: &calls, USD: &usd, Estimate: &runtime.Ledger{InputTokens: 10, USD: 0.25}, Lease: lease}
	for _, id := range []string{"lost", "late"} { // a ledger that never expires (scope global or key)
		e, err := b.Reserve(ctx, k, id, lim, 0)
		require.NoError(t, err)
		require.Nil(t, e)
	}
	e, err := b.Reserve(ctx, k, "third", lim, 0)
	require.NoError(t, err)
	require.NotNil(t, e, "the pending reservations hold both calls")
	time.Sleep(2 * lease)
	l, err := b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 20, USD: 0.5, Calls: 2}, l, "past their lease both are charged their hold")
	e, err = b.Reserve(ctx, k, "third", lim, 0)
	require.NoError(t, err)
	require.NotNil(t, e, "the lapsed reservations spent both calls")
	assert.Equal(t, runtime.BudgetError{Resource: "calls", Spent: 2, Limit: 2}, *e)
	for range 2 {
		require.NoError(t, b.Settle(ctx, k, "late", runtime.Ledger{InputTokens: 4, OutputTokens: 8, USD: 0.125, Calls: 1}, 0))
	}
	l, err = b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 20, OutputTokens: 2, USD: 0.5, Calls: 2}, l,
		"a settlement after the lease adds what exceeds the hold (12 tokens for 10 held), once")
	require.NoError(t, b.Settle(ctx, k, "lost", runtime.Ledger{InputTokens: 30, USD: 0.375, Calls: 1}, 0))
	l, err = b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 40, OutputTokens: 2, USD: 0.625, Calls: 2}, l)
	require.NoError(t, b.ForgetLedger(ctx, k))
}

// BudgeterSettlesOnce checks that a Settle repeated (its reply was lost,
// and it was sent again) charges once: of a live reservation, and of an
// id under which nothing was reserved.
func BudgeterSettlesOnce(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	k := Key(t, "once")
	calls := int64(3)
	lim := runtime.BudgetLimits{Calls: &calls}
	e, err := b.Reserve(ctx, k, "a", lim, time.Hour)
	require.NoError(t, err)
	require.Nil(t, e)
	for range 3 {
		require.NoError(t, b.Settle(ctx, k, "a", runtime.Ledger{InputTokens: 5, USD: 0.25, Calls: 1}, time.Hour))
		require.NoError(t, b.Settle(ctx, k, "unreserved", runtime.Ledger{OutputTokens: 1, Calls: 1}, time.Hour))
	}
	l, err := b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 5, OutputTokens: 1, USD: 0.25, Calls: 2}, l)
	e, err = b.Reserve(ctx, k, "b", lim, time.Hour)
	require.NoError(t, err)
	require.Nil(t, e, "two calls charged, none pending")
	e, err = b.Reserve(ctx, k, "c", lim, time.Hour)
	require.NoError(t, err)
	require.NotNil(t, e)
	require.NoError(t, b.ForgetLedger(ctx, k))
}

// BudgeterSettleLostReply checks, on a store seen directly and through the
// proxy p, that a Settle the server applied but whose answer p lost
// charges once when it is sent again, and frees its reservation.
func BudgeterSettleLostReply(t *testing.T, direct, via runtime.Budgeter, p *Proxy) {
	ctx := context.Background()
	k := Key(t, "lost-settle")
	calls := int64(2)
	lim := runtime.BudgetLimits{Calls: &calls}
	_, err := via.Reserve(ctx, k, "warm", lim, time.Hour) // the server knows the scripts or statements
	require.NoError(t, err)
	require.NoError(t, via.Settle(ctx, k, "warm", runtime.Ledger{}, time.Hour))
	e, err := direct.Reserve(ctx, k, "r", lim, time.Hour)
	require.NoError(t, err)
	require.Nil(t, e)
	p.LoseNextReply()
	charge := runtime.Ledger{InputTokens: 7, OutputTokens: 3, USD: 0.5, Calls: 1}
	require.Error(t, via.Settle(ctx, k, "r", charge, time.Hour), "the answer was lost")
	l, err := direct.LedgerOf(ctx, k)
	require.NoError(t, err)
	require.Equal(t, charge, l, "the server applied the settlement")
	require.NoError(t, via.Settle(ctx, k, "r", charge, time.Hour), "sent again")
	l, err = direct.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, charge, l, "charged once")
	e, err = direct.Reserve(ctx, k, "s", lim, time.Hour)
	require.NoError(t, err)
	assert.Nil(t, e, "one call charged, none pending")
	require.NoError(t, direct.ForgetLedger(ctx, k))
}

// BudgeterRenews checks that a reservation renewed within its lease keeps
// holding its call and estimate past the lease it was reserved with, and
// that a reservation settled, lapsed or unknown is not renewed (and so not
// brought back).
func BudgeterRenews(t *testing.T, b runtime.Budgeter) {
	ctx := context.Background()
	k := Key(t, "renews")
	calls := int64(1)
	lease := 300 * time.Millisecond
	lim := runtime.BudgetLimits{Calls: &calls, Lease: lease}
	e, err := b.Reserve(ctx, k, "long", lim, 0)
	require.NoError(t, err)
	require.Nil(t, e)
	for range 4 { // 4 × 100 ms: past the reserved lease
		time.Sleep(lease / 3)
		ok, err := b.RenewReservation(ctx, k, "long", lease)
		require.NoError(t, err)
		require.True(t, ok, "a live reservation is renewed")
	}
	e, err = b.Reserve(ctx, k, "next", lim, 0)
	require.NoError(t, err)
	require.NotNil(t, e, "the renewed reservation still holds the only call")
	assert.Equal(t, 1.0, e.Pending)
	require.NoError(t, b.Settle(ctx, k, "long", runtime.Ledger{}, 0))
	ok, err := b.RenewReservation(ctx, k, "long", lease)
	require.NoError(t, err)
	assert.False(t, ok, "a settled reservation is not renewed")
	ok, err = b.RenewReservation(ctx, k, "unknown", lease)
	require.NoError(t, err)
	assert.False(t, ok)
	e, err = b.Reserve(ctx, k, "short", lim, 0)
	require.NoError(t, err)
	require.Nil(t, e, "the settled reservation freed its call")
	time.Sleep(2 * lease)
	ok, err = b.RenewReservation(ctx, k, "short", lease)
	require.NoError(t, err)
	assert.False(t, ok, "a lapsed reservation is not renewed")
	e, err = b.Reserve(ctx, k, "after", lim, 0)
	require.NoError(t, err)
	require.NotNil(t, e)
	assert.Equal(t, runtime.BudgetError{Resource: "calls", Spent: 1, Limit: 1}, *e,
		"the lapsed reservation was charged its call, not brought back")
	require.NoError(t, b.ForgetLedger(ctx, k))
}

// BudgeterConcurrent checks that, with estimates, concurrent callers of
// one ledger (workers goroutines on b) never spend beyond the ceiling more
// than what their calls charged above their estimates: every other call
// charges its estimate, one in three a third more. It returns the spend and
// the overrun.
func BudgeterConcurrent(t *testing.T, b runtime.Budgeter, workers int) (spent, overrun float64) {
	ctx := context.Background()
	k := Key(t, "concurrent")
	ceiling := 1.0
	var (
		mu sync.Mutex
		n  int
		wg sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				est := 0.03 + 0.01*float64(i%3)
				id := fmt.Sprintf("%d-%d", w, i)
				e, err := b.Reserve(ctx, k, id, runtime.BudgetLimits{USD: &ceiling, Estimate: &runtime.Ledger{USD: est}}, time.Hour)
				if !assert.NoError(t, err) || e != nil {
					return
				}
				time.Sleep(time.Millisecond)
				cost := est
				if (w+i)%3 == 0 {
					cost = est * 4 / 3
				}
				if !assert.NoError(t, b.Settle(ctx, k, id, runtime.Ledger{USD: cost, Calls: 1}, time.Hour)) {
					return
				}
				mu.Lock()
				n++
				overrun += cost - est
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	l, err := b.LedgerOf(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, int64(n), l.Calls)
	assert.LessOrEqual(t, l.USD, ceiling+overrun+1e-9, "spend within the ceiling and the overrun of the calls beyond their estimates")
	assert.Greater(t, l.USD, ceiling-0.05-1e-9, "the ceiling is used up to less than the largest estimate")
	require.NoError(t, b.ForgetLedger(ctx, k))
	return l.USD, overrun
}

// Audit checks the audit sink; records reads the stored records of a run.
func Audit(t *testing.T, s runtime.AuditSink, records func(ctx context.Context, runID string) ([]runtime.AuditRecord, error)) {
	ctx := context.Background()
	run := Key(t, "run")
	at := time.Now().UTC().Truncate(time.Microsecond)
	in := []runtime.AuditRecord{
		{Time: at, Layer: "audit", Stage: "tool", Tool: "refund", Phase: runtime.PhaseIntent, RunID: run, IdempotencyKey: "k1",
			ArgsDigest: "d1", Args: map[string]any{"order_id": "A1", "amount": 12.5, "n": 3.0,
				// read back as the call carried it, not as 9007199254740992
				"account": int64(9007199254740993)}},
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

// StoreID checks the identity of a shared store (runtime.SharedLeaser):
// every process that opens its namespace (reopen) gets the same one,
// created once however many ask at once; another namespace (other) has
// another; and the namespace emptied (empty, which returns the store the
// next process opens there) gets a new one, which it keeps.
func StoreID(t *testing.T, s runtime.SharedLeaser, reopen func() runtime.SharedLeaser, other runtime.SharedLeaser, empty func() runtime.SharedLeaser) {
	ctx := context.Background()
	procs := make([]runtime.SharedLeaser, 8)
	for i := range procs {
		procs[i] = reopen()
	}
	ids := make([]string, len(procs))
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := p.StoreID(ctx)
			assert.NoError(t, err)
			ids[i] = id
		}()
	}
	wg.Wait()
	id, err := s.StoreID(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, id)
	for _, got := range ids {
		assert.Equal(t, id, got, "every process of the namespace has one identity")
	}
	again, err := s.StoreID(ctx)
	require.NoError(t, err)
	assert.Equal(t, id, again)

	o, err := other.StoreID(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, id, o, "another namespace is another store")

	e := empty()
	after, err := e.StoreID(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, id, after, "an emptied store is another store")
	again, err = reopen().StoreID(ctx)
	require.NoError(t, err)
	assert.Equal(t, after, again, "and keeps its new identity")
}
