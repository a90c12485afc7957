package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// TestEveryVersionMigratesToTheFreshSchema opens a schema left at each
// version an older build wrote (with the migrations as they shipped,
// testdata/migrations, not as this build has them), and compares what the migration makes of
// it (columns, indexes, triggers, and the text of every function) with a
// schema this build creates: a migration that ran a statement twice, or
// one a fresh schema and an upgraded one take differently, shows here.
func TestEveryVersionMigratesToTheFreshSchema(t *testing.T) {
	fresh := open(t)
	ctx := context.Background()
	want := describe(t, fresh, fresh.Schema())
	require.NotEmpty(t, want)
	shipped := shippedMigrations(t)
	require.Len(t, shipped, postgres.SchemaVersion, "every version's migrations pinned (TestShippedMigrationsAreUnchanged)")
	for v := 1; v < postgres.SchemaVersion; v++ {
		schema := storetest.Prefix(t)
		script := fmt.Sprintf(`CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.schema_version (version integer NOT NULL);`, schema)
		if v >= 3 {
			// The compatible column came with version 3.
			script += fmt.Sprintf(`ALTER TABLE %[1]s.schema_version ADD COLUMN compatible integer NOT NULL DEFAULT 0;
				INSERT INTO %[1]s.schema_version VALUES (%[2]d, 1);`, schema, v)
		} else {
			script += fmt.Sprintf(`INSERT INTO %[1]s.schema_version VALUES (%[2]d);`, schema, v)
		}
		for _, m := range shipped[:v] {
			script += fmt.Sprintf(m, schema)
		}
		_, err := fresh.Pool().Exec(ctx, script)
		require.NoError(t, err, "version %d", v)
		t.Cleanup(func() { _, _ = fresh.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
		s, err := postgres.Open(ctx, storetest.ServerURL(t, storetest.PostgresEnv), schema)
		require.NoError(t, err, "version %d", v)
		assert.Equal(t, want, describe(t, s, schema), "from version %d", v)
		require.NoError(t, s.Close())
	}
}

// describe lists the columns, indexes, triggers and function texts of
// schema, with the schema's name replaced by §.
func describe(t *testing.T, s *postgres.Store, schema string) []string {
	t.Helper()
	rows, err := s.Pool().Query(context.Background(), `
		SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
			CASE WHEN a.attnotnull THEN ' not null' ELSE '' END || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE n.nspname = $1 AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
		UNION ALL
		SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1
		UNION ALL
		SELECT 'trigger ' || pg_get_triggerdef(g.oid) FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT g.tgisinternal
		UNION ALL
		SELECT 'function ' || pg_get_functiondef(p.oid) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
		UNION ALL
		SELECT 'sequence ' || c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'S'
		ORDER BY 1`, schema)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		out = append(out, strings.ReplaceAll(line, schema, "§"))
	}
	require.NoError(t, rows.Err())
	return out
}
