package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// docs/state.md ("Three replicas behind one Redis and one PostgreSQL")
// said agentc serve ran examples/service/replicated the same way as the
// example service; it refuses it, its models being the service's own
// clients. What the doc says now: the refusal, and that a policy of
// serve's own with the example's stores and models given a provider
// serves on several replicas started on one policy with the variables set.
func TestServeTheReplicatedExampleAsTheDocSays(t *testing.T) {
	redisURL := storetest.ServerURL(t, storetest.RedisEnv)
	pgURL := storetest.ServerURL(t, storetest.PostgresEnv)
	t.Setenv("REDIS_URL", redisURL)
	t.Setenv("DATABASE_URL", pgURL)
	example := filepath.Join("..", "..", "examples", "service", "replicated")
	stderr := &rt.LogBuffer{}
	rc := cmdServe(context.Background(), &cliEnv{stdout: io.Discard, stderr: stderr, wd: t.TempDir()}, []string{"-listen", "127.0.0.1:0", "-watch", "0", example})
	assert.Equal(t, exitUsage, rc)
	assert.Contains(t, stderr.String(), `models "backup", "primary" declare no provider`)

	src, err := os.ReadFile(filepath.Join(example, "policy.cue"))
	require.NoError(t, err)
	prefix := storetest.Prefix(t)
	policy := strings.ReplaceAll(string(src), `prefix: "service"`, `prefix: "`+prefix+`"`)
	policy = strings.Replace(policy, "primary: {usd_per_mtok_in", `primary: {provider: "anthropic", model: "claude-sonnet-4-5", api_key_env: "ANTHROPIC_API_KEY", usd_per_mtok_in`, 1)
	policy = strings.Replace(policy, "backup: {usd_per_mtok_in", `backup: {provider: "openai", model: "gpt-4.1-mini", api_key_env: "OPENAI_API_KEY", usd_per_mtok_in`, 1)
	require.NotEqual(t, string(src), policy)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "policy.cue"), []byte(policy), 0o644))
	t.Setenv("ANTHROPIC_API_KEY", "k")
	t.Setenv("OPENAI_API_KEY", "k")
	t.Cleanup(func() {
		ctx := context.Background()
		if s, err := postgres.Open(ctx, pgURL, prefix); err == nil {
			_, _ = s.Pool().Exec(ctx, "DROP SCHEMA "+prefix+" CASCADE")
			s.Close()
		}
		if s, err := redis.Open(ctx, redisURL, prefix); err == nil {
			if keys, _ := s.Client().Keys(ctx, s.Prefix()+"*").Result(); len(keys) > 0 {
				s.Client().Del(ctx, keys...)
			}
			s.Close()
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dones []chan int
	for range 2 {
		listen := freeAddr(t)
		done := make(chan int, 1)
		dones = append(dones, done)
		go func() {
			done <- cmdServe(ctx, &cliEnv{stdout: io.Discard, stderr: &rt.LogBuffer{}, wd: dir}, []string{"-listen", listen, "-watch", "0", dir})
		}()
		require.Eventually(t, func() bool {
			code, _, err := get("http://" + listen + "/readyz")
			return err == nil && code == 200
		}, 30*time.Second, 10*time.Millisecond, "a replica did not come up")
	}
	for _, done := range dones {
		stopServe(t, cancel, done)
	}
}
