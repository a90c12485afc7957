package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// The environment of a replica: the test binary re-executes itself and runs
// main with these flags.
const (
	envReplicaPlan = "AGENTC_SERVICE_REPLICA_PLAN"
	envReplicaAddr = "AGENTC_SERVICE_REPLICA_ADDR"
)

func TestMain(m *testing.M) {
	if planPath := os.Getenv(envReplicaPlan); planPath != "" {
		os.Args = []string{os.Args[0], "-plan", planPath, "-addr", os.Getenv(envReplicaAddr)}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// replica is one service process.
type replica struct {
	cmd  *exec.Cmd
	base string
}

// startReplicas starts n service processes serving planPath on free
// loopback ports, with env added to their environment, and waits until
// each one accepts connections. They are interrupted (and killed if they do
// not stop) when the test ends.
func startReplicas(t *testing.T, n int, planPath string, env ...string) []*replica {
	t.Helper()
	out := make([]*replica, n)
	for i := range out {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		require.NoError(t, ln.Close())
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(append(os.Environ(), env...), envReplicaPlan+"="+planPath, envReplicaAddr+"="+addr)
		var logs bytes.Buffer
		cmd.Stdout, cmd.Stderr = &logs, &logs
		require.NoError(t, cmd.Start())
		out[i] = &replica{cmd: cmd, base: "http://" + addr}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				assert.NoError(t, err, "replica %d:\n%s", i, logs.String())
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Errorf("replica %d did not stop on interrupt:\n%s", i, logs.String())
			}
		})
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
				break
			}
			require.True(t, time.Now().Before(deadline), "replica %d never listened on %s:\n%s", i, addr, logs.String())
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}

var requestID atomic.Int64

// call posts body to path on r in a run of its own and returns the status
// and the body.
func (r *replica) call(t *testing.T, path string, body any) (int, []byte) {
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, r.base+path, bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("X-Run-ID", fmt.Sprintf("run-%d", requestID.Add(1)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// onEach makes perReplica concurrent calls on every replica and returns
// the statuses and bodies.
func onEach(t *testing.T, rs []*replica, perReplica int, path string, body any) (statuses []int, bodies []string) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range rs {
		for range perReplica {
			wg.Go(func() {
				status, b := r.call(t, path, body)
				mu.Lock()
				statuses, bodies = append(statuses, status), append(bodies, string(b))
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	return statuses, bodies
}

// TestThreeReplicasShareTheirState starts three service processes on
// replicated/plan.json behind the local Redis and PostgreSQL and checks
// that together they keep one idempotency table, one budget, one rate
// limit and one audit trail.
func TestThreeReplicasShareTheirState(t *testing.T) {
	redisURL := storetest.ServerURL(t, storetest.RedisEnv)
	pgURL := storetest.ServerURL(t, storetest.PostgresEnv)
	p, err := plan.Load(filepath.Join("replicated", "plan.json"))
	require.NoError(t, err, "the committed replicated plan must validate")

	// The test's own prefixes, so that runs never see each other's state.
	prefix := storetest.Prefix(t)
	for name, s := range p.Stores {
		s.Prefix = prefix
		p.Stores[name] = s
	}
	b, err := json.Marshal(p)
	require.NoError(t, err)
	planPath := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(planPath, b, 0o644))
	t.Cleanup(func() { dropState(redisURL, pgURL, prefix) })

	rs := startReplicas(t, 3, planPath, "REDIS_URL="+redisURL, "DATABASE_URL="+pgURL)

	// One idempotency table: the same refund sent 4 times to each replica
	// at once runs once and every caller gets its result.
	statuses, bodies := onEach(t, rs, 4, "/v1/tools/refund", map[string]any{"args": map[string]any{"order_id": "R1", "amount": 10}})
	for i, s := range statuses {
		require.Equal(t, http.StatusOK, s, bodies[i])
	}
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(bodies[0]), &first))
	for _, body := range bodies {
		var got map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &got))
		assert.Equal(t, first["value"], got["value"], "every caller gets the one execution's result")
	}

	// One budget: 40 tool calls for the three replicas together, the
	// refund's one execution included (its replays are not charged).
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for _, r := range rs {
		for range 4 {
			wg.Go(func() {
				for {
					status, body := r.call(t, "/v1/tools/lookup_order", map[string]any{"args": map[string]any{"order_id": "A1"}})
					switch status {
					case http.StatusOK:
						ok.Add(1)
						continue
					case http.StatusTooManyRequests:
						// The ceiling is held by calls in flight, which
						// may yet give their places back: try again.
						continue
					case http.StatusPaymentRequired:
						refused.Add(1)
					default:
						t.Errorf("lookup_order: %d %s", status, body)
					}
					return
				}
			})
		}
	}
	wg.Wait()
	assert.Equal(t, int64(39), ok.Load(), "39 lookups and the refund reach the ceiling of 40 calls, across all replicas")
	assert.Equal(t, int64(12), refused.Load(), "every caller was refused in the end")

	// One rate limit: 6 turns a minute (burst 6) for the whole service.
	start := time.Now()
	statuses, bodies = onEach(t, rs, 4, "/v1/turn", map[string]any{"input": "hello there"})
	admitted := 0
	for i, s := range statuses {
		switch s {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("turn: %d %s", s, bodies[i])
		}
	}
	refill := int(time.Since(start) / (10 * time.Second)) // one token every 10 s
	assert.GreaterOrEqual(t, admitted, 6, "the burst is admitted")
	assert.LessOrEqual(t, admitted, 6+refill, "12 turns on 3 replicas share one limit of 6 (not 18)")

	// One audit trail: every execution of every replica, intent and
	// outcome, in the one table.
	trail, err := postgres.Open(context.Background(), pgURL, prefix)
	require.NoError(t, err)
	defer trail.Close()
	records, err := trail.Records(context.Background(), "")
	require.NoError(t, err)
	intents, outcomes := map[string]int{}, map[string]int{}
	for _, r := range records {
		if r.Phase == runtime.PhaseIntent {
			intents[r.Tool]++
		} else {
			outcomes[r.Tool]++
		}
	}
	assert.Equal(t, map[string]int{"refund": 1, "lookup_order": 39}, intents, "one refund execution and 39 lookups, from three processes")
	assert.Equal(t, intents, outcomes, "every execution has its outcome")
}

// dropState removes what a test left under prefix in both servers.
func dropState(redisURL, pgURL, prefix string) {
	ctx := context.Background()
	if s, err := redis.Open(ctx, redisURL, prefix); err == nil {
		if keys, _ := s.Client().Keys(ctx, s.Prefix()+"*").Result(); len(keys) > 0 {
			s.Client().Del(ctx, keys...)
		}
		_ = s.Close()
	}
	if s, err := postgres.Open(ctx, pgURL, prefix); err == nil {
		_, _ = s.Pool().Exec(ctx, "DROP SCHEMA "+prefix+" CASCADE")
		_ = s.Close()
	}
}
