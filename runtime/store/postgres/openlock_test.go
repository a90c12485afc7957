package postgres_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// holdLock opens a connection of its own and runs stmts in a transaction
// it keeps open (holding their locks) until the test ends.
func holdLock(t *testing.T, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "BEGIN")
	require.NoError(t, err)
	for _, stmt := range stmts {
		_, err = conn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
}

// openTimed opens schema with opts, and returns how long that took.
func openTimed(t *testing.T, schema string, opts ...postgres.Option) (*postgres.Store, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	s, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), schema, opts...)
	return s, time.Since(start), err
}

// TestOpeningAMigratedSchemaWaitsForNoReader: a session reading
// schema_version in a transaction it keeps open (as pg_dump does for a
// whole backup) does not hold up the opening of a schema at this build's
// version: opening it takes no exclusive lock.
func TestOpeningAMigratedSchemaWaitsForNoReader(t *testing.T) {
	s := open(t)
	holdLock(t, "SELECT * FROM "+s.Schema()+".schema_version")
	again, took, err := openTimed(t, s.Schema(), postgres.WithTimeout(time.Second))
	require.NoError(t, err)
	require.NoError(t, again.Close())
	assert.Less(t, took, time.Second, "opened within the store's timeout")
}

// TestOpeningUnderAnExclusiveLockIsBounded: a session holding an exclusive
// lock on schema_version makes the opening of the store fail within its
// timeout, with an error naming the lock and who holds it, instead of
// waiting for the lock's end.
func TestOpeningUnderAnExclusiveLockIsBounded(t *testing.T) {
	s := open(t)
	holdLock(t, "LOCK TABLE "+s.Schema()+".schema_version IN ACCESS EXCLUSIVE MODE")
	// A timeout of 2.5 s waits 2 s for the lock and leaves half a second
	// to name its holders: with 500 ms (a 100 ms margin) a loaded machine
	// ran out of the timeout before the lock wait ended.
	_, took, err := openTimed(t, s.Schema(), postgres.WithTimeout(2500*time.Millisecond))
	require.Error(t, err)
	t.Logf("after %s: %v", took, err)
	assert.Less(t, took, 5*time.Second, "gave up within about the store's timeout")
	assert.ErrorContains(t, err, "waited 2s for a lock on "+s.Schema()+".schema_version")
	assert.ErrorContains(t, err, "AccessExclusiveLock", "the holder's lock is named")
	assert.ErrorContains(t, err, "LOCK TABLE", "the holder's statement is named")
}

// TestMigrationWaitingForALockSaysSoAndGivesUp: a migration (here the
// creation of a schema) that waits for a lock another session holds (here
// the advisory lock of the schema's migrations, as another process
// migrating it would) logs that it waits, and for whom, and gives up
// after the migration's lock bound with an error naming the wait.
func TestMigrationWaitingForALockSaysSoAndGivesUp(t *testing.T) {
	defer postgres.SetLockWaits(50*time.Millisecond, 700*time.Millisecond)()
	schema := storetest.Prefix(t)
	holdLock(t, "SELECT pg_advisory_xact_lock(hashtext('agentc schema "+schema+"'))")
	// The store logs from a goroutine of its own, which Open waits for.
	var logs bytes.Buffer
	_, took, err := openTimed(t, schema, postgres.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	require.Error(t, err)
	t.Logf("after %s: %v\n%s", took, err, logs.String())
	assert.Less(t, took, 5*time.Second, "gave up after the migration's lock bound")
	assert.ErrorContains(t, err, "waited 700ms for the lock of schema "+schema+"'s migrations")
	assert.Contains(t, logs.String(), "waits for a lock")
	assert.Contains(t, logs.String(), "schema="+schema)
	assert.Contains(t, logs.String(), "pg_advisory_xact_lock", "the holder's statement is logged")
}

// TestAMigrationOnAPoolOfOneConnectionEnds: a migration that runs past the
// lock notice, on a pool of one connection (the migration's), ends: the
// notice's look at the sessions it waits for cannot have a connection
// while the migration holds the only one, and it no longer holds the
// migration up waiting for one (it did, for ever under a context without
// a deadline).
func TestAMigrationOnAPoolOfOneConnectionEnds(t *testing.T) {
	defer postgres.SetLockWaits(time.Nanosecond, 30*time.Second)()
	cfg, err := pgxpool.ParseConfig(storetest.ServerURL(t, storetest.PostgresEnv))
	require.NoError(t, err)
	cfg.MaxConns = 1
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	s, err := postgres.OpenConfig(ctx, cfg, storetest.Prefix(t))
	require.NoError(t, err, "after %s", time.Since(start))
	t.Cleanup(func() {
		_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA "+s.Schema()+" CASCADE")
		s.Close()
	})
	assert.Less(t, time.Since(start), 10*time.Second, "the migration did not wait for its own notice")
}
