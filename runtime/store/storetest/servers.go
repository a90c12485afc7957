package storetest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
)

// Redis opens the test Redis server under a prefix of the test's own, or
// skips the test; its keys are deleted when the test ends.
func Redis(t testing.TB, opts ...redis.Option) *redis.Store {
	t.Helper()
	s, err := redis.Open(context.Background(), ServerURL(t, RedisEnv), Prefix(t), opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx := context.Background()
		keys, _ := s.Client().Keys(ctx, s.Prefix()+"*").Result()
		if len(keys) > 0 {
			s.Client().Del(ctx, keys...)
		}
		_ = s.Close()
	})
	return s
}

// NamespacedRedis registers kind, a redis store kind that opens its
// stores in the namespace last given to the func it returns, rather than
// the server's default, which a store a policy declares without a prefix
// opens in: a test that builds such a policy gives it a namespace of its
// own (Prefix) and leaves the default one alone. Call it from a package's
// variable declaration or init, as runtime.RegisterStoreKind.
func NamespacedRedis(kind string) (in func(namespace string)) {
	var ns atomic.Pointer[string]
	runtime.RegisterStoreKind(kind, func(ctx context.Context, _ string, s plan.Store) (runtime.StoreBackend, error) {
		n := ns.Load()
		if n == nil {
			return nil, fmt.Errorf("store kind %s: no namespace given (storetest.NamespacedRedis)", kind)
		}
		return redis.Open(ctx, s.URL, *n)
	})
	return func(namespace string) { ns.Store(&namespace) }
}

// Postgres opens the test PostgreSQL server in a schema of the test's own,
// or skips the test; the schema is dropped when the test ends.
func Postgres(t testing.TB, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	schema := Prefix(t)
	s, err := postgres.Open(context.Background(), slowConnect(ServerURL(t, PostgresEnv)), schema, opts...)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = s.Close()
	})
	return s
}

// slowConnect returns the server URL u with a connect timeout of its own
// (10 s) unless u sets one: a store opened with a short timeout to test its
// operations would otherwise be bounded by it when it connects, and fail to
// open on a loaded machine, where starting a server process can take longer.
func slowConnect(u string) string {
	if strings.Contains(u, "connect_timeout=") {
		return u
	}
	if strings.Contains(u, "?") {
		return u + "&connect_timeout=10"
	}
	return u + "?connect_timeout=10"
}

// Shared is a store that several pipelines share, as replicas do.
type Shared struct {
	Name string
	KV   runtime.KV
}

// SharedStores returns a memory store, and the Redis and PostgreSQL test
// servers whose URLs are set, for tests that run replicas over each.
func SharedStores(t testing.TB) []Shared {
	t.Helper()
	out := []Shared{{"memory", runtime.NewMemoryKV()}}
	if os.Getenv(RedisEnv) != "" {
		out = append(out, Shared{"redis", Redis(t)})
	}
	if os.Getenv(PostgresEnv) != "" {
		out = append(out, Shared{"postgres", Postgres(t)})
	}
	return out
}
