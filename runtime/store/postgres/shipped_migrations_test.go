package postgres_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
)

// shippedMigrations returns the migrations as they shipped, copied to
// testdata/migrations/NN.sql (NN the version each brings the tables to):
// the texts that upgraded the databases deployed, which a change to
// postgres.go cannot move.
func shippedMigrations(t *testing.T) []string {
	t.Helper()
	var out []string
	for v := 1; ; v++ {
		b, err := os.ReadFile(filepath.Join("testdata", "migrations", fmt.Sprintf("%02d.sql", v)))
		if os.IsNotExist(err) {
			return out
		}
		require.NoError(t, err)
		out = append(out, string(b))
	}
}

// TestShippedMigrationsAreUnchanged: a database a build upgraded to version
// v ran migrations 1..v as they were then, and never runs them again, so a
// change to one of them reaches fresh databases only, and the two differ.
// A change goes in a new migration; a new migration is copied to
// testdata/migrations once it ships.
func TestShippedMigrationsAreUnchanged(t *testing.T) {
	shipped := shippedMigrations(t)
	require.NotEmpty(t, shipped)
	require.LessOrEqual(t, len(shipped), len(postgres.Migrations), "a shipped migration is gone")
	for i, text := range shipped {
		assert.Equal(t, text, postgres.Migrations[i],
			"migration %d changed since it shipped: leave it as testdata/migrations/%02d.sql has it and make the change in a new migration", i+1, i+1)
	}
	for i := len(shipped); i < len(postgres.Migrations); i++ {
		t.Errorf("migration %d is not in testdata/migrations: copy its text to testdata/migrations/%02d.sql", i+1, i+1)
	}
	assert.Equal(t, postgres.SchemaVersion, len(postgres.Migrations), "one migration per schema version")
}
