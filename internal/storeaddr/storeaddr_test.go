package storeaddr

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDescribeTellsDatabasesApart checks that two addresses of different
// databases read differently, that the same database reads the same, and
// that no credential is shown.
func TestDescribeTellsDatabasesApart(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://127.0.0.1:16390?db=1":                        "redis://127.0.0.1:16390/1",
		"redis://127.0.0.1:16390/2":                           "redis://127.0.0.1:16390/2",
		"redis://:secret@cache:6379/0?read_timeout=2s":        "redis://cache:6379/0",
		"redis://agentc:secret@cache:6379/3?db=4":             "redis://agentc@cache:6379/4",
		"unix:///run/redis.sock?db=2&password=x":              "unix:///run/redis.sock?db=2",
		"postgres://app:pw@db:5432/app?sslmode=disable":       "postgres://app@db:5432/app",
		"postgres:///app?host=/run/postgresql&sslkey=/k.pem":  "postgres:///app?host=%2Frun%2Fpostgresql",
		"postgres://db/app?user=app&password=pw":              "postgres://db/app?user=app",
		"host=127.0.0.1 user=postgres dbname=test":            "host=127.0.0.1 user=postgres dbname=test",
		"host=db password=pw database=other sslpassword=x":    "host=db dbname=other",
		"host=db dbname='my app'":                             "host=db dbname='my app'",
		"host=db dbname=app options='-c x=a://b' password=pw": "host=db dbname=app",
	} {
		got, ok := Describe(raw)
		require.True(t, ok, raw)
		assert.Equal(t, want, got, raw)
	}
	for _, raw := range []string{"", "not an address", "password=pw", "%zz://x"} {
		_, ok := Describe(raw)
		assert.False(t, ok, raw)
	}
}

// TestPostgresSchema checks the prefixes a postgres store takes.
func TestPostgresSchema(t *testing.T) {
	for _, ok := range []string{"agentc", "billing", "billing_v2", "_x", "pgx"} {
		assert.Empty(t, PostgresSchema(ok), ok)
	}
	for prefix, want := range map[string]string{
		"Billing":            "lower-case identifier",
		"billing.v2":         "lower-case identifier",
		"2fa":                "lower-case identifier",
		"":                   "lower-case identifier",
		"pg_catalog":         "PostgreSQL keeps for itself",
		"pg_billing":         "PostgreSQL keeps for itself",
		"information_schema": "PostgreSQL keeps for itself",
		"public":             "default schema",
		"b012345678901234567890123456789012345678901234567890123456789012": "64 bytes long",
	} {
		assert.Contains(t, PostgresSchema(prefix), want, prefix)
	}
}

// A postgres URL's ?database= names the database as ?dbname= does, for
// the client as for the state's identity: two such URLs of different
// databases read differently, and a URL reads the same either way.
func TestDescribeReadsAPostgresDatabaseParameter(t *testing.T) {
	a, ok := Describe("postgres://db/app?database=billing_a")
	require.True(t, ok)
	b, _ := Describe("postgres://db/app?database=billing_b")
	ca, err := pgconn.ParseConfig("postgres://db/app?database=billing_a")
	require.NoError(t, err)
	cb, err := pgconn.ParseConfig("postgres://db/app?database=billing_b")
	require.NoError(t, err)
	require.NotEqual(t, ca.Database, cb.Database, "the client reads two databases")
	assert.NotEqual(t, a, b, "two databases read the same")
	d, _ := Describe("postgres://db/app?dbname=billing_a")
	assert.Equal(t, d, a, "database and dbname alike")
	last, _ := Describe("postgres://db/app?dbname=billing_b&database=billing_a")
	assert.Equal(t, a, last, "the last of them wins, as for the client")
}

// Identity writes the addresses of one database alike, and those of two
// databases apart.
func TestIdentityReadsOneDatabaseAlike(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://db/app":                     "postgres://db:5432/app",
		"postgresql://app:pw@DB:5432/app":       "postgres://app@db:5432/app",
		"postgres://[::1]/app":                  "postgres://[::1]:5432/app",
		"postgres://h1,h2:5433/app":             "postgres://h1,h2:5433/app",
		"postgres:///app?host=/run/postgresql":  "postgres:///app?host=%2Frun%2Fpostgresql",
		"redis://Cache?db=2":                    "redis://cache:6379/2",
		"redis://cache":                         "redis://cache:6379/0",
		"rediss://cache:6380/1":                 "rediss://cache:6380/1",
		"unix:///run/redis.sock?db=2":           "unix:///run/redis.sock?db=2",
		"host=DB port=5432 user=app dbname=app": "host=db user=app dbname=app",
		"host=/run/PG port=5433 dbname=app":     "host=/run/PG port=5433 dbname=app",
	} {
		got, ok := Identity(raw)
		require.True(t, ok, raw)
		assert.Equal(t, want, got, raw)
	}
	d, ok := Describe("postgres://DB/app")
	require.True(t, ok)
	assert.Equal(t, "postgres://DB/app", d, "a description shows the address as written")
}

// A repeated keyword/value setting is read as the client reads it, the
// last one winning: port=5433 port=5432 names the database on 5432, not
// the one on 5433, and a repeated host likewise.
func TestIdentityReadsTheLastOfARepeatedSetting(t *testing.T) {
	for _, tc := range []struct{ repeated, same, other string }{
		{"host=db port=5433 port=5432 dbname=app", "host=db dbname=app", "host=db port=5433 dbname=app"},
		{"host=db port=5432 port=5433 dbname=app", "host=db port=5433 dbname=app", "host=db dbname=app"},
		{"host=a host=b dbname=app", "host=b dbname=app", "host=a dbname=app"},
		{"host=db dbname=x database=app", "host=db dbname=app", "host=db dbname=x"},
	} {
		cr, err := pgconn.ParseConfig(tc.repeated)
		require.NoError(t, err)
		cs, err := pgconn.ParseConfig(tc.same)
		require.NoError(t, err)
		co, err := pgconn.ParseConfig(tc.other)
		require.NoError(t, err)
		require.Equal(t, []any{cs.Host, cs.Port, cs.Database}, []any{cr.Host, cr.Port, cr.Database}, "the client reads %q as %q", tc.repeated, tc.same)
		require.NotEqual(t, []any{co.Host, co.Port, co.Database}, []any{cr.Host, cr.Port, cr.Database}, tc.other)

		r, ok := Identity(tc.repeated)
		require.True(t, ok)
		same, _ := Identity(tc.same)
		other, _ := Identity(tc.other)
		assert.Equal(t, same, r, tc.repeated)
		assert.NotEqual(t, other, r, tc.repeated)
	}
	d, ok := Describe("host=db port=5433 port=5432 dbname=app")
	require.True(t, ok)
	assert.Equal(t, "host=db port=5432 dbname=app", d, "a description shows the setting the client reads")
}
