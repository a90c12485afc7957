package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

func open(t *testing.T) *postgres.Store {
	t.Helper()
	url := storetest.ServerURL(t, storetest.PostgresEnv)
	schema := storetest.Prefix(t)
	s, err := postgres.Open(context.Background(), url, schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = s.Close()
	})
	return s
}

func TestPorts(t *testing.T) {
	s := open(t)
	t.Run("KV", func(t *testing.T) { storetest.KV(t, s) })
	t.Run("Leaser", func(t *testing.T) { storetest.Leaser(t, s) })
	t.Run("RateLimiter", func(t *testing.T) { storetest.RateLimiter(t, s) })
	t.Run("Budgeter", func(t *testing.T) { storetest.Budgeter(t, s) })
	t.Run("Audit", func(t *testing.T) { storetest.Audit(t, s, s.Records) })
}

func TestVectorIndex(t *testing.T) {
	s := open(t)
	ctx := context.Background()
	require.NoError(t, s.Upsert(ctx, "p", "a", []float32{1, 0, 0}, []byte("A"), 0))
	require.NoError(t, s.Upsert(ctx, "p", "b", []float32{1, 1, 0}, []byte("B"), 0))
	require.NoError(t, s.Upsert(ctx, "p", "c", []float32{0, 0, 1}, []byte("C"), 50*time.Millisecond))
	require.NoError(t, s.Upsert(ctx, "other", "x", []float32{1, 0, 0}, []byte("X"), 0))
	require.NoError(t, s.Upsert(ctx, "p", "short", []float32{1, 0}, []byte("S"), 0))
	got, err := s.Query(ctx, "p", []float32{2, 0, 0}, 5)
	require.NoError(t, err)
	require.Len(t, got, 3, "same partition and dimension only")
	assert.Equal(t, "a", got[0].ID)
	assert.InDelta(t, 1.0, got[0].Score, 1e-6)
	assert.Equal(t, "B", string(got[1].Value))
	assert.InDelta(t, 0.7071, got[1].Score, 1e-3)
	time.Sleep(100 * time.Millisecond)
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
}
