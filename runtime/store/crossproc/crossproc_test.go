package crossproc_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "github.com/agentc-dev/agentc/builtins/all"
	_ "github.com/agentc-dev/agentc/builtins/meter"
	_ "github.com/agentc-dev/agentc/builtins/ratelimit"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/sqlite"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// The worker's environment.
const (
	envScenario = "AGENTC_XPROC"
	envBackend  = "AGENTC_XPROC_BACKEND"
	envURL      = "AGENTC_XPROC_URL"
	envPrefix   = "AGENTC_XPROC_PREFIX"
	envDir      = "AGENTC_XPROC_DIR"
	envStart    = "AGENTC_XPROC_START"
	envArg      = "AGENTC_XPROC_ARG"
)

func TestMain(m *testing.M) {
	if sc := os.Getenv(envScenario); sc != "" {
		go awaitStdinEnd()
		if err := work(sc); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// backend is a shared store under test.
type backend struct{ kind, url string }

func backends(t *testing.T) []backend {
	var out []backend
	for _, b := range []struct{ kind, env string }{{"redis", storetest.RedisEnv}, {"postgres", storetest.PostgresEnv}} {
		if u := os.Getenv(b.env); u != "" {
			out = append(out, backend{b.kind, u})
		}
	}
	if len(out) == 0 {
		t.Skipf("set %s and %s to run the cross-process tests (as .ci/run does)", storetest.RedisEnv, storetest.PostgresEnv)
	}
	return out
}

// group is a set of workers of one scenario sharing a store and a directory.
type group struct {
	t      *testing.T
	b      backend
	prefix string
	dir    string
	start  time.Time
	// n counts the workers spawned; report is told of a stuck one.
	n      int
	report func(*worker)
}

func newGroup(t *testing.T, b backend, lead time.Duration) *group {
	return &group{t: t, b: b, prefix: storetest.Prefix(t), dir: t.TempDir(), start: time.Now().Add(lead), report: reportStuck(t)}
}

// killAt spawns a worker of scenario with arg and kills it (SIGKILL) once
// it wrote the line want.
func (g *group) killAt(scenario, arg, want string) {
	w := g.spawn(scenario, arg)
	require.Equal(g.t, want, w.next(g.t), "the worker of %s reached the point of the kill", scenario)
	require.NoError(g.t, w.kill())
	_ = w.end()
}

// run spawns n workers and returns each one's output lines once all exited
// successfully.
func (g *group) run(scenario string, n int, arg string) [][]string {
	out := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		w := g.spawn(scenario, arg)
		wg.Go(func() {
			for l := range w.lines {
				out[i] = append(out[i], l)
			}
			assert.NoError(g.t, w.end(), "worker %s (its output is shown below)", w.name)
		})
	}
	wg.Wait()
	return out
}

// executions returns the lines of the executions log.
func executions(t *testing.T, dir string) []string {
	b, err := os.ReadFile(filepath.Join(dir, "exec.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return strings.Fields(strings.TrimSpace(strings.ReplaceAll(string(b), " ", "|")))
}

// openStore opens the backend b under prefix in the test process.
func openStore(t *testing.T, b backend, prefix string) runtime.StoreBackend {
	var (
		s   runtime.StoreBackend
		err error
	)
	if b.kind == "redis" {
		s, err = redis.Open(testContext(t), b.url, prefix)
	} else {
		s, err = postgres.Open(testContext(t), b.url, prefix)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// assertOneResult checks that the workers' output holds callers answers,
// all the same.
func assertOneResult(t *testing.T, out [][]string, callers int) {
	t.Helper()
	results := map[string]int{}
	total := 0
	for _, lines := range out {
		for _, l := range lines {
			results[l]++
			total++
		}
	}
	assert.Equal(t, callers, total, "every caller answered")
	assert.Len(t, results, 1, "every caller got the same result: %v", results)
}

func TestIdempotentCallRunsOnceAcrossProcesses(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			g := newGroup(t, b, time.Second)
			assertOneResult(t, g.run("idempotent", 4, ""), 4*64)
			assert.Len(t, executions(t, g.dir), 1, "exactly one execution across 4 processes x 64 goroutines")
		})
	}
}

func TestAKilledLeaseHolderLeavesTheCallInDoubt(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			for _, tool := range []string{"charge", "refund"} { // refund is retry_safe
				g := newGroup(t, b, 0)
				holder := g.spawn("hold", tool)
				require.Equal(t, "started", holder.next(t), "the holder started the call")
				require.NoError(t, holder.kill()) // SIGKILL while it holds the lease
				_ = holder.end()
				begin := time.Now()
				out := g.run("hold-duplicate", 1, tool)
				waited := time.Since(begin)
				require.Len(t, out[0], 1)
				ex := executions(t, g.dir)
				if tool == "charge" {
					assert.Equal(t, "in_doubt", out[0][0], "a tool that is not retry_safe is in doubt")
					assert.Len(t, ex, 1, "and does not run again")
				} else {
					assert.Equal(t, "ok", out[0][0])
					require.Len(t, ex, 2, "a retry_safe tool runs again")
					k0, k1 := strings.Split(ex[0], "|")[1], strings.Split(ex[1], "|")[1]
					assert.Equal(t, k0, k1, "with the same idempotency key")
				}
				assert.Less(t, waited, 15*time.Second, "the duplicate waits about one lease_ttl, not forever")
			}
		})
	}
}

func TestMemoizeSingleFlightAcrossProcesses(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			g := newGroup(t, b, time.Second)
			assertOneResult(t, g.run("memoize", 4, ""), 4*16)
			assert.Len(t, executions(t, g.dir), 1, "one inner execution across 4 processes x 16 goroutines")
		})
	}
}

func TestMemoizeWaiterTakesOverFromAKilledLeader(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			g := newGroup(t, b, 0)
			leader := g.spawn("memoize-hold", "")
			require.Equal(t, "started", leader.next(t), "the leader started the call")
			waiter := g.spawn("memoize-waiter", "")
			time.Sleep(500 * time.Millisecond) // the waiter finds the lease held and waits
			require.NoError(t, leader.kill())
			_ = leader.end()
			begin := time.Now()
			var got []string
			for l := range waiter.lines {
				got = append(got, l)
			}
			require.NoError(t, waiter.end(), "the waiter (its output is shown below)")
			waited := time.Since(begin)
			require.Len(t, got, 1)
			assert.Contains(t, got[0], `"answer":"A-`, "the waiter ran the call itself")
			assert.Len(t, executions(t, g.dir), 2, "the dead leader's execution and the waiter's")
			assert.Less(t, waited, 15*time.Second, "the waiter waits about one lease_ttl (1s), not forever")
		})
	}
}

func TestRateLimitIsSharedAcrossProcesses(t *testing.T) {
	const rate, burst, window = 40, 10, 5 * time.Second
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			g := newGroup(t, b, time.Second)
			out := g.run("rate", 3, window.String())
			admitted := 0
			var first, last int64 = 1<<63 - 1, 0
			for _, lines := range out {
				require.Len(t, lines, 1)
				var n int
				var f, l int64
				_, err := fmt.Sscanf(lines[0], "%d %d %d", &n, &f, &l)
				require.NoError(t, err, lines[0])
				admitted += n
				first, last = min(first, f), max(last, l)
			}
			span := time.Duration(last - first)
			bound := int(rate*span.Seconds()) + burst
			t.Logf("%s: admitted %d in %s across 3 processes (bound R*t+B = %d)", b.kind, admitted, span, bound)
			assert.LessOrEqual(t, admitted, bound)
			assert.GreaterOrEqual(t, admitted, bound*3/4, "the limit admits about its rate")
		})
	}
}

func TestBudgetsAreSharedAcrossProcesses(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			g := newGroup(t, b, time.Second)
			g.run("calls-budget", 4, "")
			ex := executions(t, g.dir)
			assert.Len(t, ex, 50, "a calls budget of 50 across 4 processes runs exactly 50 calls")

			g = newGroup(t, b, time.Second)
			for _, lines := range g.run("usd-budget", 4, "") {
				assert.Empty(t, lines, "no worker failed")
			}
			l, err := openStore(t, b, g.prefix).(runtime.Budgeter).LedgerOf(testContext(t), "agentc/meter/chat/meter/global")
			require.NoError(t, err)
			usd := l.USD
			// Each call costs usdPerCall; at most 4 processes x 8 goroutines
			// are in flight when the ceiling is reached.
			t.Logf("%s: usd ledger %.6f for a ceiling of %.6f", b.kind, usd, usdCeiling)
			assert.GreaterOrEqual(t, usd, usdCeiling)
			assert.LessOrEqual(t, usd, usdCeiling+4*8*usdPerCall+1e-9, "overshoot bounded by the calls in flight")
		})
	}
}

// With on_cross "refuse" the estimates of the calls in flight are reserved
// in the shared store: 4 processes x 8 callers never spend beyond the
// ceiling more than what their calls charged above their estimates.
func TestRefusingBudgetHoldsAcrossProcesses(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.kind, func(t *testing.T) {
			for _, extra := range []int64{0, 20} {
				g := newGroup(t, b, time.Second)
				var calls int64
				for _, lines := range g.run("usd-refuse", 4, strconv.FormatInt(extra, 10)) {
					require.Len(t, lines, 1, "a worker failed: %v", lines)
					n, err := strconv.ParseInt(lines[0], 10, 64)
					require.NoError(t, err, lines[0])
					calls += n
				}
				l, err := openStore(t, b, g.prefix).(runtime.Budgeter).LedgerOf(testContext(t), "agentc/meter/chat/meter/global")
				require.NoError(t, err)
				assert.Equal(t, calls, l.Calls)
				overrun := float64(calls*extra) * 15 / 1e6 // primary: 15 USD per million output tokens
				t.Logf("%s: %d calls charged %.6f USD for a ceiling of %.6f, %.6f of it beyond their estimates",
					b.kind, calls, l.USD, usdCeiling, overrun)
				assert.LessOrEqual(t, l.USD, usdCeiling+overrun+1e-9, "the ceiling holds but for what calls charged beyond their estimates")
				assert.Greater(t, l.USD, usdCeiling*0.9, "the budget is used up")
			}
		})
	}
}

// auditRuns is how many workers the kill -9 audit test kills: 20, or
// AGENTC_XPROC_AUDIT_RUNS (200 take about 45 s on a loaded 2-core machine).
func auditRuns(t *testing.T) int {
	if v := os.Getenv("AGENTC_XPROC_AUDIT_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "AGENTC_XPROC_AUDIT_RUNS")
		return n
	}
	return 20
}

// killAuditWorkers runs n audit workers of g one after another and kills
// each with SIGKILL after a varying number (from first, spread over spread)
// of acknowledged calls, so the kill lands mid-call. It returns the runs
// whose calls were acknowledged.
func killAuditWorkers(t *testing.T, g *group, n, first, spread int) map[string]bool {
	acked := map[string]bool{}
	for i := range n {
		w := g.spawn("audit", fmt.Sprintf("w%d", i))
		want := first + (i*7)%spread
		for l := range w.lines {
			if run, ok := strings.CutPrefix(l, "ack "); ok {
				acked[run] = true
				want--
				if want == 0 {
					require.NoError(t, w.kill())
				}
			}
		}
		_ = w.end()
	}
	return acked
}

func TestAuditSurvivesKillNine(t *testing.T) {
	var pg *backend
	for _, b := range backends(t) {
		if b.kind == "postgres" {
			pg = &b
		}
	}
	if pg == nil {
		t.Skipf("set %s to run the audit test", storetest.PostgresEnv)
	}
	g := newGroup(t, *pg, 0)
	runs := auditRuns(t)
	acked := killAuditWorkers(t, g, runs, 5, 40)
	s := openStore(t, *pg, g.prefix).(*postgres.Store)
	recs, err := s.Records(testContext(t), "")
	require.NoError(t, err)
	outcome := map[string]bool{}
	intents := 0
	for _, r := range recs {
		if r.Phase == runtime.PhaseOutcome && r.Decision == runtime.DecisionOK {
			outcome[r.RunID] = true
		} else if r.Phase == runtime.PhaseIntent {
			intents++
		}
	}
	missing := 0
	for run := range acked {
		if !outcome[run] {
			missing++
		}
	}
	t.Logf("%d workers killed: %d acknowledged calls, %d intent rows, %d outcome rows, %d acknowledged without an outcome",
		runs, len(acked), intents, len(outcome), missing)
	assert.Zero(t, missing, "every acknowledged call has its outcome row")
	assert.GreaterOrEqual(t, intents, len(acked))
}

// The SQLite audit sink under kill -9: workers append audit records to one
// file and are killed mid-call; every call a worker acknowledged has its
// outcome record, and the file passes PRAGMA integrity_check. No server is
// needed; AGENTC_XPROC_SQLITE_KILLS sets the number of kills (default 30,
// measured at 200 and more before a release).
func TestSQLiteAuditSurvivesKillNine(t *testing.T) {
	kills := 30
	if v := os.Getenv("AGENTC_XPROC_SQLITE_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, "AGENTC_XPROC_SQLITE_KILLS")
		kills = n
	}
	dir := t.TempDir()
	g := newGroup(t, backend{kind: "sqlite", url: filepath.Join(dir, "audit.db")}, 0)
	acked := killAuditWorkers(t, g, kills, 1, 25)
	s, err := sqlite.Open(context.Background(), g.b.url)
	require.NoError(t, err)
	defer s.Close()
	db, err := sql.Open("sqlite", g.b.url)
	require.NoError(t, err)
	defer db.Close()
	var check string
	require.NoError(t, db.QueryRowContext(context.Background(), "PRAGMA integrity_check").Scan(&check))
	assert.Equal(t, "ok", check, "integrity_check after %d kills", kills)
	recs, err := s.Records(testContext(t), "")
	require.NoError(t, err)
	outcome := map[string]bool{}
	for _, r := range recs {
		if r.Phase == runtime.PhaseOutcome && r.Decision == runtime.DecisionOK {
			outcome[r.RunID] = true
		}
	}
	missing := 0
	for run := range acked {
		if !outcome[run] {
			missing++
		}
	}
	t.Logf("%d kills: %d acknowledged calls, %d outcome records, %d acknowledged without an outcome", kills, len(acked), len(outcome), missing)
	require.NotEmpty(t, acked)
	assert.Zero(t, missing, "every acknowledged call has its outcome record")
}
