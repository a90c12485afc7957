package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// A claim the server committed but whose answer was lost is the attempt's
// when it asks again with its owner nonce.
func TestAClaimWhoseReplyWasLostIsTheAttempts(t *testing.T) {
	direct, s, p := viaProxy(t, 2*time.Second)
	storetest.LeaserLostReply(t, direct, s, p)
}

// A settlement the server committed but whose answer was lost charges
// once when it is sent again.
func TestASettlementWhoseReplyWasLostChargesOnce(t *testing.T) {
	direct, s, p := viaProxy(t, 2*time.Second)
	storetest.BudgeterSettleLostReply(t, direct, s, p)
}

// viaProxy returns a store on the test server, the same schema reached
// through a proxy with the given timeout, and the proxy.
func viaProxy(t *testing.T, timeout time.Duration) (direct, s *postgres.Store, p *storetest.Proxy) {
	direct = open(t)
	p = storetest.NewProxy(t, storetest.ServerURL(t, storetest.PostgresEnv))
	s, err := postgres.Open(context.Background(), p.URL, direct.Schema(), postgres.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return direct, s, p
}

// A connection cut while it sat in the pool (a server restart, a proxy or a
// network that dropped it) failed the next append with "unexpected EOF",
// the server being up: an outcome lost. The record is written on another
// connection, once.
func TestAnAuditRecordSurvivesACutConnection(t *testing.T) {
	direct, s, p := viaProxy(t, 5*time.Second)
	ctx := context.Background()
	rec := runtime.AuditRecord{Time: time.Unix(100, 0), Layer: "audit", Tool: "refund", Phase: runtime.PhaseOutcome,
		Decision: runtime.DecisionOK, RunID: "r1", Attempts: 1}
	require.NoError(t, s.Append(ctx, rec))
	p.Cut()
	p.Restore()
	rec.Time = time.Unix(101, 0)
	require.NoError(t, s.Append(ctx, rec), "the server is up: the record is written")
	recs, err := direct.Records(ctx, "r1")
	require.NoError(t, err)
	assert.Len(t, recs, 2)

	// The append that follows a lost answer writes nothing when the first
	// one committed; another record alike in every field is another row.
	const id, other = "0190f5a2-7b3c-7d4e-8f00-000000000001", "0190f5a2-7b3c-7d4e-8f00-000000000002"
	rec.Time = time.Unix(102, 0)
	require.NoError(t, postgres.AppendAs(ctx, s, rec, id))
	require.NoError(t, postgres.AppendAs(ctx, s, rec, id))
	recs, err = direct.Records(ctx, "r1")
	require.NoError(t, err)
	require.Len(t, recs, 3)
	assert.True(t, recs[2].Time.Equal(time.Unix(102, 0)))
	require.NoError(t, postgres.AppendAs(ctx, s, rec, other))
	recs, err = direct.Records(ctx, "r1")
	require.NoError(t, err)
	assert.Len(t, recs, 4, "two records alike, two rows")
}

// A backend terminated under the INSERT (pg_terminate_backend, a server
// shutting down) answers with a FATAL error: the statement did not commit,
// the connection is gone, and the record is written on another one.
func TestAnAuditRecordSurvivesItsBackendTerminated(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	lock, err := s.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, "LOCK TABLE "+s.Schema()+".audit IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		done <- s.Append(ctx, runtime.AuditRecord{Time: time.Unix(100, 0), Phase: runtime.PhaseOutcome, RunID: "r1"})
	}()
	var pid int
	require.Eventually(t, func() bool {
		err := s.Pool().QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE query LIKE 'INSERT INTO `+s.Schema()+`.audit%' AND wait_event_type = 'Lock'`).Scan(&pid)
		return err == nil
	}, 20*time.Second, 10*time.Millisecond, "the append waits for the lock")
	var killed bool
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT pg_terminate_backend($1)`, pid).Scan(&killed))
	require.True(t, killed)
	require.NoError(t, lock.Rollback(ctx))
	require.NoError(t, <-done)
	recs, err := s.Records(ctx, "r1")
	require.NoError(t, err)
	assert.Len(t, recs, 1)
}

// A claim's publish, release, doubt or renewal whose connection was cut
// (a restart, a proxy, a backend terminated) failed with the server up:
// a call that had run and succeeded left its key in doubt for its ttl, and
// every duplicate was refused in doubt instead of getting its result. Each
// is sent again on another connection; a publish whose first answer was
// lost recognises its own result.
func TestAClaimsWritesSurviveACutConnection(t *testing.T) {
	direct, s, p := viaProxy(t, 5*time.Second)
	ctx := context.Background()
	claim := func(key string) int64 {
		g, err := s.Acquire(ctx, key, time.Minute, time.Hour, false)
		require.NoError(t, err)
		require.Equal(t, runtime.LeaseAcquired, g.Status)
		return g.Token
	}
	cut := func() { p.Cut(); p.Restore() }

	tok := claim("publish")
	cut()
	ok, err := s.Publish(ctx, "publish", tok, []byte(`"R1"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok)
	g, err := direct.Acquire(ctx, "publish", time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseDone, g.Status)
	assert.Equal(t, `"R1"`, string(g.Result))

	tok = claim("lost")
	p.LoseNextReply()
	ok, err = s.Publish(ctx, "lost", tok, []byte(`"R2"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "the publish sent again finds its own result")

	tok = claim("renew")
	cut()
	ok, err = s.Renew(ctx, "renew", tok, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	cut()
	ok, err = s.Doubt(ctx, "renew", tok, time.Hour)
	require.NoError(t, err)
	assert.True(t, ok)

	cut()
	g, err = s.AcquireAs(ctx, "owned", "attempt-1", nil, time.Minute, time.Hour, false)
	require.NoError(t, err, "a claim with an owner is asked for again")
	assert.Equal(t, runtime.LeaseAcquired, g.Status)

	tok = claim("release")
	cut()
	require.NoError(t, s.Release(ctx, "release", tok))
	g, err = direct.Acquire(ctx, "release", time.Minute, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseAcquired, g.Status, "the released key is free")
	assert.False(t, g.InDoubt)
}

// An INSERT of an audit record whose connection was cut while the server
// still ran it (a network that failed: the driver's cancel request does
// not get through either, or reaches the statement in its commit) commits
// after the client gave up on it. The append sent again on another
// connection looked for the row before that commit, found none and added
// it: one logical record, two rows. The second append waits for the
// first one's transaction and adds nothing once it committed. The first
// INSERT is held at a gate the test opens, not for a time: a test slowed
// down under load did not find it on the server before it committed.
func TestAnAuditAppendSentAgainWhileTheFirstCommitsWritesOneRow(t *testing.T) {
	direct, s, p := viaProxy(t, 10*time.Second)
	ctx := context.Background()
	schema := direct.Schema()
	// The first INSERT of a run "slow..." holds its transaction open after
	// its row is in until the test opens the gate (an advisory lock the
	// test holds), a cancel request notwithstanding; the one sent again
	// does not wait there.
	gate := `hashtext('` + schema + ` gate')`
	_, err := direct.Pool().Exec(ctx, `CREATE FUNCTION `+schema+`.slow_audit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.run_id LIKE 'slow%' AND pg_try_advisory_xact_lock(hashtext('`+schema+` ' || NEW.run_id)) THEN
				BEGIN
					PERFORM pg_advisory_xact_lock(`+gate+`);
				EXCEPTION WHEN query_canceled THEN
					PERFORM pg_advisory_xact_lock(`+gate+`);
				END;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER slow_audit AFTER INSERT ON `+schema+`.audit FOR EACH ROW EXECUTE FUNCTION `+schema+`.slow_audit()`)
	require.NoError(t, err)
	// waiting counts the audit INSERTs running that wait on a lock of
	// kind event (advisory: the first, at the gate), or all of them ("").
	waiting := func(event string) int {
		var n int
		require.NoError(t, direct.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE state = 'active'
			AND ($1 = '' OR wait_event_type = 'Lock' AND wait_event = $1) AND query LIKE 'INSERT INTO `+schema+`.audit%'`, event).Scan(&n))
		return n
	}
	keeper, err := pgx.Connect(ctx, storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	t.Cleanup(func() { _ = keeper.Close(context.Background()) })

	for i := range 6 {
		_, err := keeper.Exec(ctx, `SELECT pg_advisory_lock(`+gate+`)`)
		require.NoError(t, err, "the gate is closed")
		run := fmt.Sprintf("slow%d", i)
		done := make(chan error, 1)
		go func() {
			done <- s.Append(ctx, runtime.AuditRecord{Time: time.Unix(100, 0), Layer: "audit", Tool: "refund",
				Phase: runtime.PhaseOutcome, Decision: runtime.DecisionOK, RunID: run, Attempts: 1})
		}()
		require.Eventually(t, func() bool { return waiting("advisory") == 1 }, 10*time.Second, 5*time.Millisecond,
			"the first INSERT runs on the server, its row in, at the gate")
		p.Drop()
		// The gate opens: the first INSERT commits, before or after the
		// one sent again looks for its row.
		_, err = keeper.Exec(ctx, `SELECT pg_advisory_unlock(`+gate+`)`)
		require.NoError(t, err)
		require.NoError(t, <-done, "the server is up: the record is written")

		// Once the first INSERT's transaction ended, the trail holds the
		// record once.
		require.Eventually(t, func() bool { return waiting("") == 0 }, 10*time.Second, 5*time.Millisecond)
		recs, err := direct.Records(ctx, run)
		require.NoError(t, err)
		require.Len(t, recs, 1, "one logical record, one row (try %d)", i)
	}
}

// openNamed opens the test server under application_name name, in a
// schema of the test's own, so that the test can end its connections.
func openNamed(t *testing.T, name string) *postgres.Store {
	t.Helper()
	direct := open(t)
	s, err := postgres.Open(context.Background(), storetest.ServerURL(t, storetest.PostgresEnv)+"&application_name="+name, direct.Schema())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// terminateIdle ends, on the server, the idle connections opened under
// name (a proxy or a restart that cut them while they sat in the pool).
func terminateIdle(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	defer c.Close(ctx)
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND state = 'idle'`, name).Scan(&n))
	require.Positive(t, n)
	// The backends are gone before the next statement is sent.
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, name).Scan(&left))
		return left == 0
	}, 5*time.Second, 10*time.Millisecond)
}

// A statement is not sent on a pooled connection the server ended while
// it sat idle: it would fail although it never reached the server, and a
// reservation or a rate limit's decision cannot be sent again (one whose
// statement ran would count twice). It is sent on another, once.
func TestNoStatementIsSentOnAnEndedIdleConnection(t *testing.T) {
	name := storetest.Prefix(t)
	s := openNamed(t, name)
	ctx := context.Background()
	calls := int64(2)
	lim := runtime.BudgetLimits{Calls: &calls, Lease: time.Minute}
	refusal, err := s.Reserve(ctx, "k", "a", lim, 0)
	require.NoError(t, err)
	require.Nil(t, refusal)
	terminateIdle(t, name)
	refusal, err = s.Reserve(ctx, "k", "b", lim, 0)
	require.NoError(t, err, "the server is up")
	require.Nil(t, refusal)
	refusal, err = s.Reserve(ctx, "k", "c", lim, 0)
	require.NoError(t, err)
	require.NotNil(t, refusal, "two calls reserved, once each")
	assert.Equal(t, "calls", refusal.Resource)

	_, ok, err := s.Allow(ctx, "r", time.Hour, 2, 0)
	require.NoError(t, err)
	require.True(t, ok)
	terminateIdle(t, name)
	_, ok, err = s.Allow(ctx, "r", time.Hour, 2, 0)
	require.NoError(t, err, "the server is up")
	require.True(t, ok)
	_, ok, err = s.Allow(ctx, "r", time.Hour, 2, 0)
	require.NoError(t, err)
	assert.False(t, ok, "two calls let through, once each")

	terminateIdle(t, name)
	require.NoError(t, s.Settle(ctx, "k", "a", runtime.Ledger{Calls: 1}, 0))
	l, err := s.LedgerOf(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, int64(1), l.Calls)
}
