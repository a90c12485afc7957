package runtime_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

// TestRedactURLTellsDatabasesApart checks that an address shown in a
// message names the database (host, port, database number or name, user)
// and no credential, whether the database is chosen by the URL's path, its
// query or a keyword/value connection string.
func TestRedactURLTellsDatabasesApart(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://127.0.0.1:16390?db=1":                                   "redis://127.0.0.1:16390/1",
		"redis://127.0.0.1:16390?db=2":                                   "redis://127.0.0.1:16390/2",
		"redis://agentc:secret@cache:6379/0?read_timeout=2s":             "redis://agentc@cache:6379/0",
		"postgres://app:pw@db:5432/app?sslmode=disable&password=x":       "postgres://app@db:5432/app",
		"host=127.0.0.1 user=postgres dbname=test":                       "host=127.0.0.1 user=postgres dbname=test",
		"host=127.0.0.1 user=postgres password=pw dbname=other sslkey=k": "host=127.0.0.1 user=postgres dbname=other",
	} {
		got := runtime.RedactURL(raw)
		assert.Equal(t, want, got, raw)
		for _, secret := range []string{"secret", "pw", "sslkey", "password"} {
			assert.NotContains(t, got, secret, raw)
		}
	}
}

// TestStateChangesSayWhichDatabase checks that a store pointed at another
// database of the same server, by the URL's query or a keyword/value
// string, is a reset whose two sides read differently, and that a password
// changed alone (a rotation) is none.
func TestStateChangesSayWhichDatabase(t *testing.T) {
	at := func(url string) *plan.Plan {
		p := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)))
		p.Stores["shared"] = plan.Store{Kind: "redis", URL: url, Prefix: "billing"}
		return p
	}
	for _, tc := range [][2]string{
		{"redis://127.0.0.1:16390?db=1", "redis://127.0.0.1:16390?db=2"},
		{"host=127.0.0.1 user=postgres dbname=test", "host=127.0.0.1 user=postgres dbname=other"},
	} {
		cs := runtime.StateChanges(at(tc[0]), at(tc[1]))
		require.NotEmpty(t, cs, tc)
		assert.Equal(t, []string{"stores.shared"}, cs[0].Fields)
		require.Len(t, cs[0].Was, 1)
		assert.NotEqual(t, cs[0].Was, cs[0].Now, "the two sides of %v read the same: %s", tc, cs[0].Message())
	}
	assert.Empty(t, runtime.StateChanges(at("redis://:old@cache:6379/1"), at("redis://:new@cache:6379/1")), "a password rotated")
	assert.Empty(t, runtime.StateChanges(at("redis://cache:6379?db=1"), at("redis://cache:6379/1")), "the same database")
}

// A store's address written with or without its scheme's default port, or
// its host in another case, names the same database: no reset. Another
// port, host or database still is one.
func TestStateChangesReadDefaultPortsAndHostCaseAlike(t *testing.T) {
	at := func(kind, url string) *plan.Plan {
		p := resetPlan(toolChain(rt.Layer("idempotent", `{"store":"shared","key_args":["order_id"]}`)))
		p.Stores["shared"] = plan.Store{Kind: kind, URL: url, Prefix: "billing"}
		return p
	}
	for _, tc := range [][3]string{
		{"postgres", "postgres://db/app", "postgres://db:5432/app"},
		{"postgres", "postgresql://app:pw@DB.example.com/app", "postgresql://app:other@db.example.com:5432/app"},
		{"postgres", "postgres://[::1]/app", "postgres://[::1]:5432/app"},
		{"redis", "redis://cache/1", "redis://cache:6379/1"},
		{"redis", "redis://Cache:6379?db=1", "redis://cache/1"},
		{"redis", "rediss://cache/0", "rediss://cache:6379/0"},
		{"redis", "redis://cache", "redis://cache:6379/0"},
	} {
		assert.Empty(t, runtime.StateChanges(at(tc[0], tc[1]), at(tc[0], tc[2])), "%s and %s name one database", tc[1], tc[2])
	}
	for _, tc := range [][3]string{
		{"postgres", "postgres://db/app", "postgres://db:5433/app"},
		{"postgres", "postgres://db/app", "postgres://db2/app"},
		{"redis", "redis://cache/1", "redis://cache:6380/1"},
		{"redis", "redis://cache", "redis://cache/1"},
	} {
		assert.NotEmpty(t, runtime.StateChanges(at(tc[0], tc[1]), at(tc[0], tc[2])), "%s and %s name two databases", tc[1], tc[2])
	}
}
