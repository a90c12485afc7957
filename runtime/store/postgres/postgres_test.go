package postgres_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func open(t *testing.T) *postgres.Store { return storetest.Postgres(t) }

func TestPorts(t *testing.T) {
	s := open(t)
	t.Run("KV", func(t *testing.T) { storetest.KV(t, s) })
	t.Run("Leaser", func(t *testing.T) { storetest.Leaser(t, s) })
	t.Run("LeaserOwner", func(t *testing.T) { storetest.LeaserOwner(t, s) })
	t.Run("LeaserNote", func(t *testing.T) { storetest.LeaserNote(t, s) })
	t.Run("RateLimiter", func(t *testing.T) { storetest.RateLimiter(t, s) })
	t.Run("RateLimiterRescale", func(t *testing.T) { storetest.RateLimiterRescale(t, s) })
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

func TestVectorIndex(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	require.NoError(t, s.Upsert(ctx, "p", "a", []float32{1, 0, 0}, []byte("A"), 0))
	require.NoError(t, s.Upsert(ctx, "p", "b", []float32{1, 1, 0}, []byte("B"), 0))
	require.NoError(t, s.Upsert(ctx, "p", "c", []float32{0, 0, 1}, []byte("C"), 500*time.Millisecond))
	require.NoError(t, s.Upsert(ctx, "other", "x", []float32{1, 0, 0}, []byte("X"), 0))
	require.NoError(t, s.Upsert(ctx, "p", "short", []float32{1, 0}, []byte("S"), 0))
	got, err := s.Query(ctx, "p", []float32{2, 0, 0}, 5)
	require.NoError(t, err)
	require.Len(t, got, 3, "same partition and dimension only")
	assert.Equal(t, "a", got[0].ID)
	assert.InDelta(t, 1.0, got[0].Score, 1e-6)
	assert.Equal(t, "B", string(got[1].Value))
	assert.InDelta(t, 0.7071, got[1].Score, 1e-3)
	time.Sleep(600 * time.Millisecond)
	got, err = s.Query(ctx, "p", []float32{0, 0, 1}, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.NotEqual(t, "c", got[0].ID, "expired")
	require.NoError(t, s.Upsert(ctx, "p", "a", []float32{0, 0, 1}, []byte("A2"), 0))
	got, err = s.Query(ctx, "p", []float32{0, 0, 1}, 1)
	require.NoError(t, err)
	assert.Equal(t, "A2", string(got[0].Value), "an upsert replaces")
	empty, err := s.Query(ctx, "none", []float32{1, 0, 0}, 3)
	require.NoError(t, err)
	assert.Empty(t, empty)
}

func TestSchemaIsVersionedAndReopens(t *testing.T) {
	s := open(t)
	var v int
	require.NoError(t, s.Pool().QueryRow(context.Background(), "SELECT version FROM "+s.Schema()+".schema_version").Scan(&v))
	assert.Equal(t, postgres.SchemaVersion, v)
	again, err := postgres.Open(context.Background(), storetest.ServerURL(t, storetest.PostgresEnv), s.Schema())
	require.NoError(t, err, "opening an existing schema migrates nothing")
	require.NoError(t, again.Close())
	_, err = postgres.Open(context.Background(), "postgres://127.0.0.1/test", "Bad-Name")
	assert.ErrorContains(t, err, "must be a lower-case identifier")
	// What vet refuses at the prefix field, the store refuses too.
	for prefix, want := range map[string]string{
		"pg_catalog":         "a schema PostgreSQL keeps for itself",
		"information_schema": "a schema PostgreSQL keeps for itself",
		"public":             "the database's default schema",
	} {
		_, err = postgres.Open(context.Background(), "postgres://127.0.0.1/test", prefix)
		assert.ErrorContains(t, err, want, prefix)
	}
}

// TestUpgradeFromVersion1 opens a schema left at version 1 and checks that
// the replaced lease_acquire serves a published result and still claims.
func TestUpgradeFromVersion1(t *testing.T) {
	old := open(t)
	ctx := context.Background()
	schema := storetest.Prefix(t)
	_, err := old.Pool().Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.schema_version (version integer NOT NULL);
		INSERT INTO %[1]s.schema_version VALUES (1);`, schema)+fmt.Sprintf(postgres.Migrations[0], schema))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = old.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	s, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), schema)
	require.NoError(t, err)
	defer s.Close()
	var v int
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT version FROM "+schema+".schema_version").Scan(&v))
	assert.Equal(t, postgres.SchemaVersion, v)
	g, err := s.Acquire(ctx, "k", time.Second, time.Hour, false)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	ok, err := s.Publish(ctx, "k", g.Token, []byte(`"r"`), time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	g, err = s.Acquire(ctx, "k", time.Second, time.Hour, false)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseDone, g.Status)
	assert.Equal(t, `"r"`, string(g.Result))
}

// TestExpiredRowsArePurgedInTheBackground checks that the purge every
// purgeEvery writes removes expired rows, and that Close waits for it.
func TestExpiredRowsArePurgedInTheBackground(t *testing.T) {
	defer postgres.SetPurgeEvery(2)()
	url := storetest.ServerURL(t, storetest.PostgresEnv)
	schema := storetest.Prefix(t)
	ctx := context.Background()
	s, err := postgres.Open(ctx, url, schema)
	require.NoError(t, err)
	check, err := postgres.Open(ctx, url, schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = check.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = check.Close()
	})
	require.NoError(t, s.Set(ctx, "old", []byte("x"), time.Millisecond))
	g, err := s.Acquire(ctx, "running", time.Minute, time.Millisecond, false) // a claim that outlives its keep
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status)
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, s.Set(ctx, "new", []byte("y"), 0)) // the second write starts a purge
	require.NoError(t, s.Close())                         // and Close waits for it
	var keys []string
	rows, err := check.Pool().Query(ctx, "SELECT key FROM "+schema+".kv ORDER BY key")
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		keys = append(keys, k)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"new"}, keys, "the expired row is gone from the table")
	var claims int
	require.NoError(t, check.Pool().QueryRow(ctx, "SELECT count(*) FROM "+schema+".lease WHERE key = 'running'").Scan(&claims))
	assert.Equal(t, 1, claims, "a claim within its lease is not purged")
}

// TestWritesAfterCloseStartNoPurge checks that a write that ends after
// Close began starts no purge, and that writes racing Close never misuse
// the purge's wait group (run with -race).
func TestWritesAfterCloseStartNoPurge(t *testing.T) {
	defer postgres.SetPurgeEvery(1)()
	ctx := context.Background()
	keeper := open(t) // drops the schema at the end
	for range 5 {
		s, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), keeper.Schema())
		require.NoError(t, err)
		var wg sync.WaitGroup
		for i := range 4 {
			wg.Go(func() {
				for j := range 20 {
					_ = s.Set(ctx, fmt.Sprint(i, "/", j), []byte("x"), time.Millisecond)
				}
			})
		}
		time.Sleep(5 * time.Millisecond)
		require.NoError(t, s.Close())
		wg.Wait()
		postgres.Wrote(s)
		assert.False(t, postgres.Purging(s), "a closed store starts no purge")
	}
}

// setVersion sets the version row of the schema of s.
func setVersion(t *testing.T, s *postgres.Store, version, compatible int) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), "UPDATE "+s.Schema()+".schema_version SET version = $1, compatible = $2", version, compatible)
	require.NoError(t, err)
}

// TestNewerSchemaOpensWhenCompatible stands for a rolling upgrade or a
// rollback: a schema migrated by a newer build opens in this one when the
// newer build declared it usable from this build's version, and is left
// at its version; otherwise Open refuses it with the version it needs.
func TestNewerSchemaOpensWhenCompatible(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	url := storetest.ServerURL(t, storetest.PostgresEnv)
	newer := postgres.SchemaVersion + 1
	setVersion(t, s, newer, postgres.SchemaVersion)
	again, err := postgres.Open(ctx, url, s.Schema())
	require.NoError(t, err, "a newer schema usable by this build")
	require.NoError(t, again.Close())
	var v int
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT version FROM "+s.Schema()+".schema_version").Scan(&v))
	assert.Equal(t, newer, v, "an older build never lowers the version")

	setVersion(t, s, newer, newer)
	_, err = postgres.Open(ctx, url, s.Schema())
	assert.ErrorContains(t, err, fmt.Sprintf("is at version %d, newer than this build knows (%d) and not usable by it; run a build that knows version %d",
		newer, postgres.SchemaVersion, newer))
	setVersion(t, s, newer, 0)
	_, err = postgres.Open(ctx, url, s.Schema())
	assert.ErrorContains(t, err, "not usable by it", "a schema that records no compatible version is only for its own builds")
	assert.ErrorIs(t, err, runtime.ErrStoreUnusable, "a host does not try it again until another build runs")
}

// TestUpgradeFromVersion2KeepsLiveClaims migrates a schema at version 2
// holding a claim whose record expires before its lease (as version 2
// wrote them): the migration makes it live as long as its lease, so it is
// still held, and a renewal past its keep keeps it.
func TestUpgradeFromVersion2KeepsLiveClaims(t *testing.T) {
	old := open(t)
	ctx := context.Background()
	schema := storetest.Prefix(t)
	_, err := old.Pool().Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.schema_version (version integer NOT NULL);
		INSERT INTO %[1]s.schema_version VALUES (2);`, schema)+fmt.Sprintf(postgres.Migrations[0], schema)+fmt.Sprintf(postgres.Migrations[1], schema)+
		fmt.Sprintf(`INSERT INTO %[1]s.lease (key, state, token, until, expires)
			VALUES ('k', 'pending', 7, now() + interval '1 minute', now() + interval '50 milliseconds')`, schema))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = old.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	s, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), schema)
	require.NoError(t, err)
	defer s.Close()
	var v, compatible int
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT version, compatible FROM "+schema+".schema_version").Scan(&v, &compatible))
	assert.Equal(t, postgres.SchemaVersion, v)
	assert.Equal(t, postgres.CompatibleSince, compatible)
	time.Sleep(100 * time.Millisecond) // past the claim's old expiry
	g, err := s.Acquire(ctx, "k", time.Second, 50*time.Millisecond, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status, "the claim lives as long as its lease")
	ok, err := s.Publish(ctx, "k", 7, []byte(`"r"`), time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "its holder still holds it")
}

// TestUpgradeFromVersion3KeepsLedgers opens a schema left at version 3
// with a ledger in use: its charges carry over, the calls an older build
// counted as pending in it no longer hold its ceiling in this build, and a
// reservation of this build is still counted in ledger.pending for the
// older builds of a rollout.
func TestUpgradeFromVersion3KeepsLedgers(t *testing.T) {
	old := open(t)
	ctx := context.Background()
	schema := storetest.Prefix(t)
	_, err := old.Pool().Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.schema_version (version integer NOT NULL);
		INSERT INTO %[1]s.schema_version VALUES (3);`, schema)+fmt.Sprintf(postgres.Migrations[0], schema)+
		fmt.Sprintf(postgres.Migrations[1], schema)+fmt.Sprintf(postgres.Migrations[2], schema)+
		fmt.Sprintf(`INSERT INTO %[1]s.ledger (key, in_tokens, usd, calls, pending) VALUES ('g', 40, 0.5, 3, 2)`, schema))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = old.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	s, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), schema)
	require.NoError(t, err)
	defer s.Close()
	l, err := s.LedgerOf(ctx, "g")
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 40, USD: 0.5, Calls: 3}, l)
	calls := int64(4)
	e, err := s.Reserve(ctx, "g", "r1", runtime.BudgetLimits{Calls: &calls}, 0)
	require.NoError(t, err)
	require.Nil(t, e, "3 charged calls under a ceiling of 4")
	var pending int64
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT pending FROM "+schema+".ledger WHERE key = 'g'").Scan(&pending))
	assert.Equal(t, int64(3), pending)
	require.NoError(t, s.Settle(ctx, "g", "r1", runtime.Ledger{InputTokens: 10, USD: 0.25, Calls: 1}, 0))
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT pending FROM "+schema+".ledger WHERE key = 'g'").Scan(&pending))
	assert.Equal(t, int64(2), pending)
	l, err = s.LedgerOf(ctx, "g")
	require.NoError(t, err)
	assert.Equal(t, runtime.Ledger{InputTokens: 50, USD: 0.75, Calls: 4}, l)
}

// A vector with a NaN or infinite component is refused, and an entry
// stored with one before (PostgreSQL ranks NaN above every number) never
// takes the top place from the real matches.
func TestVectorIndexNonFinite(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	nan := float32(math.NaN())
	require.Error(t, s.Upsert(ctx, "p", "n", []float32{nan, 0, 0}, []byte("N"), 0))
	require.Error(t, s.Upsert(ctx, "p", "i", []float32{float32(math.Inf(1)), 0, 0}, []byte("I"), 0))
	_, err := s.Query(ctx, "p", []float32{nan, 1, 0}, 1)
	require.Error(t, err)

	require.NoError(t, s.Upsert(ctx, "p", "a", []float32{1, 0, 0}, []byte("A"), 0))
	_, err = s.Pool().Exec(ctx, `INSERT INTO `+s.Schema()+`.vectors (scope, id, vec, norm, value) VALUES ('p', 'old', '{NaN,0,0}', 'NaN', 'OLD')`)
	require.NoError(t, err)
	got, err := s.Query(ctx, "p", []float32{1, 0, 0}, 2)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "a", got[0].ID)
}

// TestStoreIdentity: the processes that open a schema share one identity;
// another schema is another store, and so is the schema dropped and
// created again by the next process to open it.
func TestStoreIdentity(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	url := storetest.ServerURL(t, storetest.PostgresEnv)
	reopen := func() runtime.SharedLeaser {
		o, err := postgres.Open(ctx, url, s.Schema())
		require.NoError(t, err)
		t.Cleanup(func() { _ = o.Close() })
		return o
	}
	storetest.StoreID(t, s, reopen, open(t), func() runtime.SharedLeaser {
		_, err := s.Pool().Exec(ctx, "DROP SCHEMA "+s.Schema()+" CASCADE")
		require.NoError(t, err)
		return reopen()
	})
}

// TestUpgradeFromVersion7KeepsRateBuckets opens a schema left at version
// 7, its bucket without the interval it counts in, from several replicas
// at once: each opens it (one migrates, the others find it migrated), the
// bucket keeps the calls it took, counted in the interval of the call
// that finds it and kept with it from then on, and the statement of an
// older build still works on the table during a rollout.
func TestUpgradeFromVersion7KeepsRateBuckets(t *testing.T) {
	old := open(t)
	ctx := context.Background()
	schema := storetest.Prefix(t)
	script := fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.schema_version (version integer NOT NULL);
		ALTER TABLE %[1]s.schema_version ADD COLUMN compatible integer NOT NULL DEFAULT 0;
		INSERT INTO %[1]s.schema_version VALUES (7, 1);`, schema)
	for _, m := range postgres.Migrations[:7] {
		script += fmt.Sprintf(m, schema)
	}
	script += fmt.Sprintf(`INSERT INTO %[1]s.rate (key, tat, ok, wait)
		VALUES ('b', (extract(epoch FROM now()) * 1000000)::bigint + 60000000, true, 0)`, schema)
	_, err := old.Pool().Exec(ctx, script)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = old.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })

	stores := make([]*postgres.Store, 4)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			s, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), schema)
			if assert.NoError(t, err, "replica %d", i) {
				stores[i] = s
			}
		})
	}
	wg.Wait()
	for _, s := range stores {
		if s != nil {
			defer s.Close()
		}
	}
	s := stores[0]
	require.NotNil(t, s)
	var v int
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT version FROM "+schema+".schema_version").Scan(&v))
	assert.Equal(t, postgres.SchemaVersion, v)

	wait, ok, err := s.Allow(ctx, "b", time.Minute, 1, 0)
	require.NoError(t, err)
	assert.False(t, ok, "the call the older build counted is kept")
	assert.InDelta(t, time.Minute.Seconds(), wait.Seconds(), 2)
	wait, ok, err = stores[1].Allow(ctx, "b", time.Second, 1, 0)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.InDelta(t, 1, wait.Seconds(), 0.5, "rescaled from the minute it was kept in")

	// An older build's statement, which names the columns it writes.
	_, err = s.Pool().Exec(ctx, fmt.Sprintf(`INSERT INTO %[1]s.rate AS r (key, tat, ok, wait) VALUES ('c', 1, true, 0)
		ON CONFLICT (key) DO UPDATE SET tat = r.tat + 1`, schema))
	require.NoError(t, err)
	_, ok, err = s.Allow(ctx, "c", time.Second, 1, 0)
	require.NoError(t, err)
	assert.True(t, ok, "a row an older build wrote beside")
}
