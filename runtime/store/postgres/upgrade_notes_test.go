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

// TestUpgradeFromVersion9WhileAnOlderReplicaRuns migrates a schema at
// version 9 (before notes) while an older replica holds a transaction open
// on the lease table: the migration waits for it, then the older claims
// are read as claims without a note. One held is still held; one in doubt
// is taken over by a caller with a note, which it keeps from then on. An
// older replica's lease_acquire_as goes on working beside, and takes a
// noted claim in doubt over whatever its note.
func TestUpgradeFromVersion9WhileAnOlderReplicaRuns(t *testing.T) {
	old := open(t)
	ctx := context.Background()
	schema := storetest.Prefix(t)
	script := fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.schema_version (version integer NOT NULL, compatible integer NOT NULL DEFAULT 0);
		INSERT INTO %[1]s.schema_version VALUES (9, 1);`, schema)
	for _, m := range postgres.Migrations[:9] {
		script += fmt.Sprintf(m, schema)
	}
	_, err := old.Pool().Exec(ctx, script)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = old.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	acquire := func(k string, takeover bool) (status int, tok int64) {
		t.Helper()
		require.NoError(t, old.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT status, tok FROM %s.lease_acquire_as($1, 'r0', 60000000, 3600000000, $2)`, schema), k, takeover).Scan(&status, &tok))
		return status, tok
	}
	st, _ := acquire("held", false)
	require.Equal(t, 0, st)
	st, tok := acquire("doubted", false)
	require.Equal(t, 0, st)
	_, err = old.Pool().Exec(ctx, fmt.Sprintf(`UPDATE %s.lease SET until = clock_timestamp() WHERE key = 'doubted' AND token = $1`, schema), tok)
	require.NoError(t, err)

	tx, err := old.Pool().Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, fmt.Sprintf(`SELECT * FROM %s.lease_acquire_as('busy', 'r0', 60000000, 3600000000, false)`, schema))
	require.NoError(t, err)
	type opened struct {
		s   *postgres.Store
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), schema)
		done <- opened{s, err}
	}()
	require.Eventually(t, func() bool {
		var waiting bool
		require.NoError(t, old.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND relation = $1::regclass)`, schema+".lease").Scan(&waiting))
		return waiting
	}, 10*time.Second, 5*time.Millisecond, "the migration waits for the older replica's transaction")
	require.NoError(t, tx.Commit(ctx))
	o := <-done
	require.NoError(t, o.err)
	s := o.s
	defer s.Close()
	var v int
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT version FROM "+schema+".schema_version").Scan(&v))
	assert.Equal(t, postgres.SchemaVersion, v)

	g, err := s.AcquireAs(ctx, "held", "n1", []byte("A"), time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseHeld, g.Status)
	assert.Nil(t, g.Note)
	g, err = s.AcquireAs(ctx, "doubted", "n1", []byte("A"), time.Minute, time.Hour, true)
	require.NoError(t, err)
	require.Equal(t, runtime.LeaseAcquired, g.Status, "a claim of a build before notes is taken over with a note")
	assert.True(t, g.InDoubt)
	ok, err := s.Doubt(ctx, "doubted", g.Token, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	g, err = s.AcquireAs(ctx, "doubted", "n2", []byte("B"), time.Minute, time.Hour, true)
	require.NoError(t, err)
	assert.Equal(t, runtime.LeaseInDoubt, g.Status, "it keeps the note of its taker")
	assert.Equal(t, "A", string(g.Note))

	g, err = s.AcquireAs(ctx, "noted", "n3", []byte("B"), time.Minute, time.Hour, false)
	require.NoError(t, err)
	ok, err = s.Doubt(ctx, "noted", g.Token, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	st, _ = acquire("noted", true)
	assert.Equal(t, 0, st, "an older replica takes a claim over whatever its note")
}
