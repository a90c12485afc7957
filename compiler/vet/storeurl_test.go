package vet

import (
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A postgres url vet passes is one the store's client reads, and one it
// refuses is one the client refuses: the two agree on every string of
// the table, whose settings name no file and no environment variable.
func TestAPostgresURLIsJudgedAsItsClientReadsIt(t *testing.T) {
	withoutPGEnv(t)
	for _, raw := range []string{
		"postgres://app@db:5432/app?sslmode=disable",
		"postgresql://app:pw@db/app?application_name=billing",
		"postgres:///app?host=/run/postgresql",
		"host=db user=app dbname=app",
		"host=db dbname = 'my app' password='it''s'",
		`host=db dbname='a\'b'`,
		"  host=db   port=5433  ",
		"host=db application_name=a://b",
		"host=db dbname='app",
		"host db",
		"redis://127.0.0.1:6379/0",
		"http://db:5432/app",
		"postgres://db:port/app",
		"=db",
		// A password holding #, ? or [, which the client reads.
		"postgres://app:p#ss@127.0.0.1:5432/app",
		"postgres://app:p#ss@db/app",
		"postgres://app:p?ss@db/app",
		"postgres://app:pa[ss@db/app",
		"postgres://app:p%zzss@db/app",
		"postgres://app:p ss@h1/app",
		"postgres://app:p%20ss@h1/app",
		// Several hosts, IPv6 ones included.
		"postgres://app@h1:5432,h2:5433/app?target_session_attrs=read-write",
		"postgres://app@[::1]:5432,[::2]:5433/app",
		"postgres://app@h1,h2/app",
		"postgres://app@h1:5432,h2:5433,h3:5434/app",
		"host=h1,h2 port=5432,5433,5434",
		"postgres://app@h1/my app",
		"postgres://app@h1/app?options=-c%20search_path%3Dx",
		// Settings the client refuses.
		"postgres://db/app?x=%zz",
		"postgres://db/app?sslmode",
		"postgres://db/app?a=b=c",
		"postgres://db/app?foo=bar",
		"postgres://db/app?sslmode=bogus",
		"postgres://db/app?target_session_attrs=bogus",
		"postgres://db/app?connect_timeout=soon",
		"postgres://db/app?pool_max_conns=many",
		"postgres://db/app?statement_cache_capacity=x",
		"host=db port=x",
		"host=db foo=bar",
		"host=db sslmode=bogus",
		"host=db channel_binding=maybe",
	} {
		_, want := pgxpool.ParseConfig(raw)
		got := storeURLProblem("postgres", raw)
		assert.Equal(t, want == nil, got == nil, "%s: client: %v; vet: %v", raw, want, got)
	}
	err := storeURLProblem("postgres", "redis://127.0.0.1:6379/0")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "it is a redis:// URL; a postgres url is a postgres:// or postgresql:// URL")
	for _, raw := range []string{"postgres://app:secret@db:port/app", "postgres://app:secret@db/app?sslmode=bogus", "host=db password=secret port=x"} {
		err = storeURLProblem("postgres", raw)
		require.Error(t, err, raw)
		assert.NotContains(t, err.Error(), "secret", raw)
	}
}

// What the client reads besides the string is not vet's to judge: a
// certificate missing here, or a PG* variable set here, leaves a url the
// client reads on the serving machine unreported, on every machine alike.
func TestAPostgresURLIsJudgedWithoutThisMachinesFilesOrEnvironment(t *testing.T) {
	withoutPGEnv(t)
	assert.NoError(t, storeURLProblem("postgres", "postgres://db/app?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"))
	assert.NoError(t, storeURLProblem("postgres", "host=db service=billing servicefile=/nonexistent/pg_service.conf"))
	t.Setenv("PGSSLMODE", "bogus")
	_, err := pgxpool.ParseConfig("postgres://db/app")
	require.Error(t, err, "the client reads the variable")
	assert.NoError(t, storeURLProblem("postgres", "postgres://db/app"))
	assert.Error(t, storeURLProblem("postgres", "postgres://db/app?x=%zz"), "a string the client cannot parse at all is still refused")
}

// withoutPGEnv unsets the PG* variables the client reads until the test
// ends, so that the client reads the string alone.
func withoutPGEnv(t *testing.T) {
	for _, v := range pgEnv {
		if old, ok := os.LookupEnv(v); ok {
			t.Setenv(v, old) // restored when the test ends
			require.NoError(t, os.Unsetenv(v))
		}
	}
}
