package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
