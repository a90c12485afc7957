package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/store/postgres"
	"github.com/agentc-dev/agentc/runtime/store/redis"
	"github.com/agentc-dev/agentc/runtime/store/storetest"
)

// replicaPolicy is a policy of two replicas sharing store "shared" (%s the
// store's kind and url, %s its prefix or schema) whose tool chain is %s.
const replicaPolicy = `package gw

keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
stores: shared: {kind: "%s", url: "%s", prefix: "%s"}
settings: replicas: 2
chains: tool: [%s]
`

// sharedStoreURLs returns the test servers that are set, by store kind.
func sharedStoreURLs(t *testing.T) map[string]string {
	out := map[string]string{}
	for kind, env := range map[string]string{"redis": storetest.RedisEnv, "postgres": storetest.PostgresEnv} {
		if u := os.Getenv(env); u != "" {
			out[kind] = u
		}
	}
	if len(out) == 0 {
		t.Skipf("set %s or %s to run replicas over a shared store", storetest.RedisEnv, storetest.PostgresEnv)
	}
	return out
}

// TestAReplicaThatSawARunGoIdleKeepsItsSharedState: a named run whose
// requests the load balancer sends to replica A, then only to replica B, is
// idle on A, not over. A's idle sweep must not drop the run's ledger and
// bucket in the store every replica shares: B would start the run's budget
// and rate limit afresh.
func TestAReplicaThatSawARunGoIdleKeepsItsSharedState(t *testing.T) {
	urls := sharedStoreURLs(t)
	upstream, _ := inProcessUpstream(t)
	for kind, url := range urls {
		for name, tc := range map[string]struct{ layer, refusal string }{
			"meter":      {`{use: "meter", scope: "run", budget: calls: 1, store: "shared"}`, "budget"},
			"rate_limit": {`{use: "rate_limit", rate: 1, per: "1h", mode: "reject", scope: "run", store: "shared"}`, "rate limit of 1 per 1h0m0s exceeded"},
		} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				prefix := storetest.Prefix(t)
				if kind == "postgres" {
					t.Cleanup(func() { dropSchema(t, url, prefix) })
				}
				dir := writePolicy(t, fmt.Sprintf(replicaPolicy, sha("agent-key"), upstream, kind, url, prefix, tc.layer))
				a := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, RunIdle: 100 * time.Millisecond})
				b := startServer(t, Options{Source: cueSource(dir), WatchInterval: -1, RunIdle: time.Hour})
				header := map[string]string{RunHeader: "case-9"}
				lookup := func(s *served) *mcp.CallToolResult {
					res, err := connectProxy(t, s.url, "agent-key", header).CallTool(context.Background(),
						&mcp.CallToolParams{Name: "lookup", Arguments: map[string]any{"order_id": "A1"}})
					require.NoError(t, err)
					return res
				}
				res := lookup(a)
				require.False(t, res.IsError, text(t, res))
				// A ends the run it has not seen for 100 ms.
				require.Eventually(t, func() bool {
					a.srv.runs.mu.Lock()
					defer a.srv.runs.mu.Unlock()
					return len(a.srv.runs.runs) == 0
				}, 5*time.Second, 10*time.Millisecond)
				time.Sleep(100 * time.Millisecond) // its layers are told after the tracker forgets it
				res = lookup(b)
				assert.True(t, res.IsError, "the run's second call went through replica B: %s", text(t, res))
				assert.Contains(t, text(t, res), tc.refusal)
			})
		}
	}
}

// dropSchema drops the PostgreSQL schema a test's replicas created.
func dropSchema(t *testing.T, url, schema string) {
	s, err := postgres.Open(context.Background(), url, schema)
	if err != nil {
		t.Logf("drop schema %s: %v", schema, err)
		return
	}
	defer s.Close()
	_, _ = s.Pool().Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
}

// bank is a loopback MCP upstream with one side-effecting tool, refund,
// whose executions it counts. A refund waits for gate, when set, or for
// its call to be cancelled.
type bank struct {
	url     string
	refunds atomic.Int64
	started chan string
	gate    chan struct{}
	open    sync.Once
}

// release lets every refund waiting at the gate, and every later one, be
// made.
func (b *bank) release() {
	if b.gate != nil {
		b.open.Do(func() { close(b.gate) })
	}
}

func newBank(t *testing.T, gated bool) *bank {
	t.Helper()
	b := &bank{started: make(chan string, 64)}
	if gated {
		b.gate = make(chan struct{})
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "bank", Version: "1"}, nil)
	type in struct {
		OrderID string  `json:"order_id"`
		Amount  float64 `json:"amount"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "refund", Description: "Refund an order."},
		func(ctx context.Context, _ *mcp.CallToolRequest, a in) (*mcp.CallToolResult, any, error) {
			b.refunds.Add(1)
			b.started <- a.OrderID
			if b.gate != nil {
				select {
				case <-b.gate:
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("refunded %.2f on %s", a.Amount, a.OrderID)}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	// Before the server closes (cleanups run last first), a refund still
	// waiting at the gate is let go: a cancellation that never reached the
	// bank (a replica shut down before its client could send one) would
	// otherwise hold Close, which waits for the calls in flight.
	t.Cleanup(b.release)
	b.url = ts.URL
	return b
}

// fleetPolicy is the head of a policy served by replicas sharing store
// "shared": its kind, url and prefix.
const fleetPolicy = `package gw

stores: shared: {kind: "%s", url: "%s", prefix: "%s"}
settings: replicas: 3
`

// fleet is n replicas of one policy over one shared store.
type fleet struct {
	kind, url, prefix string
	replicas          []*served
}

// startFleet serves body (a policy without package and stores) on n
// replicas sharing a new namespace of the store kind at url, with opts.
func startFleet(t *testing.T, kind, url string, n int, body string, opts ...func(*Options)) *fleet {
	t.Helper()
	f := &fleet{kind: kind, url: url, prefix: storetest.Prefix(t)}
	t.Cleanup(func() { f.drop(t) })
	dir := writePolicy(t, fmt.Sprintf(fleetPolicy, kind, url, f.prefix)+body)
	for range n {
		o := Options{Source: cueSource(dir), WatchInterval: -1}
		for _, fn := range opts {
			fn(&o)
		}
		f.replicas = append(f.replicas, startServer(t, o))
	}
	return f
}

// drop deletes the fleet's namespace.
func (f *fleet) drop(t *testing.T) {
	ctx := context.Background()
	switch f.kind {
	case "postgres":
		dropSchema(t, f.url, f.prefix)
	case "redis":
		s, err := redis.Open(ctx, f.url, f.prefix)
		if err != nil {
			return
		}
		defer s.Close()
		if keys, _ := s.Client().Keys(ctx, s.Prefix()+"*").Result(); len(keys) > 0 {
			s.Client().Del(ctx, keys...)
		}
	}
}

// trail returns the audit records the fleet's replicas wrote in its store.
func (f *fleet) trail(t *testing.T) []runtime.AuditRecord {
	t.Helper()
	ctx := context.Background()
	var recs []runtime.AuditRecord
	var err error
	switch f.kind {
	case "postgres":
		s, oerr := postgres.Open(ctx, f.url, f.prefix)
		require.NoError(t, oerr)
		defer s.Close()
		recs, err = s.Records(ctx, "")
	case "redis":
		s, oerr := redis.Open(ctx, f.url, f.prefix)
		require.NoError(t, oerr)
		defer s.Close()
		recs, err = s.Records(ctx, "")
	}
	require.NoError(t, err)
	return recs
}

const refundPolicy = `
keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
chains: tool: [
	{use: "audit", sink: "shared"},
	{use: "idempotent", store: "shared", key_args: ["order_id"], lease_ttl: "%s"},
]
`

// refundA1 refunds 10 on order A1.
var refundA1 = &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1", "amount": 10}}

// refundThrough sends refundA1 through replica s on a session of its own.
func refundThrough(t *testing.T, s *served) *mcp.CallToolResult {
	t.Helper()
	res, err := connectProxy(t, s.url, "agent-key", nil).CallTool(context.Background(), refundA1)
	require.NoError(t, err)
	return res
}

// assertInDoubt asserts that res is the idempotent layer's answer to a call
// in doubt.
func assertInDoubt(t *testing.T, res *mcp.CallToolResult) {
	t.Helper()
	require.NotNil(t, res)
	assert.True(t, res.IsError)
	assert.Contains(t, text(t, res), "in_doubt by idempotent")
}

// TestReplicasRefundOnce: the same refund sent at once through three
// replicas, from four MCP sessions each and from different runs, reaches
// the bank once; every caller gets its result, and the one trail holds an
// intent and an outcome for each caller, one of them the execution and
// the others replays.
func TestReplicasRefundOnce(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			b := newBank(t, true)
			f := startFleet(t, kind, url, 3, fmt.Sprintf(refundPolicy, sha("agent-key"), b.url, "5s"))
			var sessions []*mcp.ClientSession
			for i, r := range f.replicas {
				for j := range 4 {
					sessions = append(sessions, connectProxy(t, r.url, "agent-key", map[string]string{RunHeader: fmt.Sprintf("case-%d-%d", i, j)}))
				}
			}
			results := make([]string, len(sessions))
			var wg sync.WaitGroup
			for i, cs := range sessions {
				wg.Go(func() {
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund",
						Arguments: map[string]any{"order_id": "A1", "amount": 10}})
					if assert.NoError(t, err) {
						results[i] = text(t, res)
						assert.False(t, res.IsError, results[i])
					}
				})
			}
			<-b.started
			time.Sleep(300 * time.Millisecond) // lets the duplicates arrive while the refund runs
			b.release()
			wg.Wait()
			assert.Equal(t, int64(1), b.refunds.Load(), "the refund ran once across the replicas")
			for _, r := range results {
				assert.Equal(t, "refunded 10.00 on A1", r)
			}
			decisions := map[string]int{}
			intents := 0
			for _, r := range f.trail(t) {
				if r.Phase == runtime.PhaseIntent {
					intents++
				} else {
					decisions[string(r.Decision)]++
				}
			}
			assert.Equal(t, len(sessions), intents)
			assert.Equal(t, map[string]int{"ok": 1, "deduped": len(sessions) - 1}, decisions)
		})
	}
}

// TestAReplicaCutMidCallLeavesTheRefundInDoubt: a replica whose client
// goes away, or which shuts down, while a refund runs ends its claim in
// doubt; a duplicate through another replica, waiting or later, is
// answered in doubt and the bank sees one refund.
func TestAReplicaCutMidCallLeavesTheRefundInDoubt(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		for _, how := range []string{"client", "shutdown"} {
			t.Run(kind+"/"+how, func(t *testing.T) {
				b := newBank(t, true)
				f := startFleet(t, kind, url, 2, fmt.Sprintf(refundPolicy, sha("agent-key"), b.url, "30s"),
					func(o *Options) { o.ShutdownTimeout = 50 * time.Millisecond })
				a, other := f.replicas[0], f.replicas[1]
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				first := make(chan error, 1)
				csA, csOther := connectProxy(t, a.url, "agent-key", nil), connectProxy(t, other.url, "agent-key", nil)
				go func() {
					_, err := csA.CallTool(ctx, refundA1)
					first <- err
				}()
				<-b.started
				waiting := make(chan *mcp.CallToolResult, 1)
				go func() {
					res, err := csOther.CallTool(context.Background(), refundA1)
					assert.NoError(t, err)
					waiting <- res
				}()
				time.Sleep(200 * time.Millisecond) // the duplicate finds the claim held and waits
				switch how {
				case "client":
					cancel()
				case "shutdown":
					require.NoError(t, a.stop())
				}
				<-first
				var res *mcp.CallToolResult
				select {
				case res = <-waiting:
				case <-time.After(10 * time.Second):
					t.Fatal("the duplicate waited for the lease to expire (30s): the claim was not ended in doubt")
				}
				assertInDoubt(t, res)
				assertInDoubt(t, refundThrough(t, other))
				assert.Equal(t, int64(1), b.refunds.Load())
				var phases []string
				for _, r := range f.trail(t) {
					phases = append(phases, string(r.Phase)+" "+string(r.Decision))
				}
				assert.ElementsMatch(t, []string{"intent ", "intent ", "intent ", "outcome in_doubt", "outcome in_doubt", "outcome in_doubt"}, phases)
			})
		}
	}
}

// TestADeadReplicasLeaseExpiresIntoDoubt: a replica that lost its store
// while a refund ran (it cannot renew its claim nor end it) is as good as
// dead: its lease expires and the duplicate through another replica is
// answered in doubt, never run.
func TestADeadReplicasLeaseExpiresIntoDoubt(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			b := newBank(t, true)
			px := storetest.NewProxy(t, url)
			prefix := storetest.Prefix(t)
			body := fmt.Sprintf(refundPolicy, sha("agent-key"), b.url, "1s")
			fa := &fleet{kind: kind, url: url, prefix: prefix}
			t.Cleanup(func() { fa.drop(t) })
			a := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(fleetPolicy, kind, px.URL, prefix)+body)), WatchInterval: -1})
			other := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(fleetPolicy, kind, url, prefix)+body)), WatchInterval: -1})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			csA := connectProxy(t, a.url, "agent-key", nil)
			go func() {
				_, _ = csA.CallTool(ctx, refundA1)
			}()
			<-b.started
			px.Cut() // replica a can no longer renew, release or end its claim
			cancel()
			assertInDoubt(t, refundThrough(t, other))
			assert.Equal(t, int64(1), b.refunds.Load())
		})
	}
}

// chatFleetPolicy declares a model at the loopback upstream and a key.
const chatFleetPolicy = `
models: primary: {provider: "openai", model: "gpt-4.1-mini", base_url: "%s/v1", api_key_env: "AGENTC_TEST_OPENAI_KEY",
	usd_per_mtok_in: 0.4, usd_per_mtok_out: 1.6}
keys: app: {sha256: "%s", tenant: "acme"}
chains: chat: [
%s
]
`

// chatFleet serves chain on n replicas sharing the store kind at url, in
// front of a loopback model that answers calls completions (text.sse: 19
// input and 10 output tokens).
func chatFleet(t *testing.T, kind, url string, n, calls int, chain string) (*fleet, *upstream) {
	t.Helper()
	t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
	replies := make([]reply, calls)
	for i := range replies {
		replies[i] = reply{body: transcript(t, "openai", "text.sse")}
	}
	up := newUpstream(t, replies...)
	return startFleet(t, kind, url, n, fmt.Sprintf(chatFleetPolicy, up.URL, sha(clientKey), chain)), up
}

func fleetClient(s *served, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(s.url + "/v1/"), option.WithAPIKey(clientKey), option.WithMaxRetries(0)}, opts...)...)
}

// hello is a user message of 80 bytes: its estimate (24 tokens) covers the
// 19 input tokens text.sse charges.
var hello = strings.Repeat("Hello. ", 11) + "Hi!"

// race sends n completions at once, spread over the replicas, and returns
// the successes and the API errors by status.
func race(t *testing.T, f *fleet, n int, params openai.ChatCompletionNewParams, opts ...option.RequestOption) (ok []*openai.ChatCompletion, refused map[int]int) {
	var mu sync.Mutex
	refused = map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		c := fleetClient(f.replicas[i%len(f.replicas)], opts...)
		wg.Go(func() {
			res, err := c.Chat.Completions.New(context.Background(), params)
			mu.Lock()
			defer mu.Unlock()
			var apiErr *openai.Error
			switch {
			case err == nil:
				ok = append(ok, res)
			case errors.As(err, &apiErr):
				refused[apiErr.StatusCode]++
			default:
				t.Errorf("request %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	return ok, refused
}

// TestReplicasKeepOneBudgetAndOneRateLimit: completions raced through
// three replicas at the edge of a tenant's token budget (on_cross
// "refuse") never spend past it, and a tenant's burst is one across them.
func TestReplicasKeepOneBudgetAndOneRateLimit(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		params := openai.ChatCompletionNewParams{Model: "primary", MaxTokens: openai.Int(10),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(hello)}}
		t.Run(kind+"/meter", func(t *testing.T) {
			f, up := chatFleet(t, kind, url, 3, 24,
				`{use: "meter", budget: tokens: 110, on_cross: "refuse", scope: "key", store: "shared"},`)
			var total int64
			for round := range 3 {
				ok, refused := race(t, f, 8, params)
				for _, c := range ok {
					total += c.Usage.TotalTokens
				}
				t.Logf("round %d: %d admitted, refused %v, %d tokens in all", round, len(ok), refused, total)
				for code := range refused {
					// 429 (to try again) while the calls in flight hold the
					// rest of the budget, 402 once it is charged.
					assert.Contains(t, []int{http.StatusPaymentRequired, http.StatusTooManyRequests}, code)
				}
				if round == 2 {
					assert.Equal(t, map[int]int{http.StatusPaymentRequired: 8}, refused, "nothing in flight: the budget is spent")
				}
			}
			assert.LessOrEqual(t, total, int64(110), "the tenant's spend over every replica")
			assert.Equal(t, up.requests()*29, int(total), "every call that reached the model was charged")
			// Each call is estimated 44 tokens (34 of input, 10 of output).
			assert.Equal(t, 3, up.requests(), "110 tokens hold three calls of 29")
		})
		t.Run(kind+"/rate_limit", func(t *testing.T) {
			f, up := chatFleet(t, kind, url, 3, 12,
				`{use: "rate_limit", rate: 1, per: "1h", burst: 4, mode: "reject", scope: "key", store: "shared"},`)
			ok, refused := race(t, f, 12, params)
			assert.Len(t, ok, 4, "the tenant's burst across the replicas")
			assert.Equal(t, map[int]int{http.StatusTooManyRequests: 8}, refused)
			assert.Equal(t, 4, up.requests())
		})
	}
}

// TestARunAlternatingBetweenReplicas: a run whose requests a load
// balancer sends to each replica in turn has one budget and one rate
// limit.
func TestARunAlternatingBetweenReplicas(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			f, up := chatFleet(t, kind, url, 2, 8, `
	{use: "rate_limit", rate: 1, per: "1h", burst: 4, mode: "reject", scope: "run", store: "shared"},
	{use: "meter", budget: calls: 3, scope: "run", store: "shared"},`)
			params := openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}}
			var codes []int
			for i := range 5 {
				c := fleetClient(f.replicas[i%2], option.WithHeader(RunHeader, "case-9"))
				_, err := c.Chat.Completions.New(context.Background(), params)
				var apiErr *openai.Error
				switch {
				case err == nil:
					codes = append(codes, 200)
				case errors.As(err, &apiErr):
					codes = append(codes, apiErr.StatusCode)
				default:
					t.Fatal(err)
				}
			}
			assert.Equal(t, []int{200, 200, 200, 402, 429}, codes)
			// Another run has its own budget and bucket.
			c := fleetClient(f.replicas[1], option.WithHeader(RunHeader, "case-10"))
			_, err := c.Chat.Completions.New(context.Background(), params)
			require.NoError(t, err)
			assert.Equal(t, 4, up.requests())
		})
	}
}

// TestReplicasAnswerACachedCompletionOnce: identical completions sent at
// once through three replicas, streamed and not, with a tenant's cache
// (single_flight) in the shared store, reach the model once; every client
// reads the same answer and the meter charges the one call.
func TestReplicasAnswerACachedCompletionOnce(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			t.Setenv("AGENTC_TEST_OPENAI_KEY", openAIKey)
			gate := make(chan struct{})
			replies := []reply{{body: transcript(t, "openai", "text.sse"), gate: gate, holdAfter: 2}}
			for range 12 {
				replies = append(replies, reply{body: transcript(t, "openai", "text.sse")})
			}
			up := newUpstream(t, replies...)
			f := startFleet(t, kind, url, 3, fmt.Sprintf(chatFleetPolicy, up.URL, sha(clientKey), `
	{use: "meter", budget: tokens: 30, scope: "key", store: "shared"},
	{use: "memoize", scope: "key", single_flight: true, store: "shared", lease_ttl: "5s"},`))
			params := openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello")}}
			var mu sync.Mutex
			var answers []string
			var wg sync.WaitGroup
			for i := range 12 {
				c := fleetClient(f.replicas[i%3])
				wg.Go(func() {
					var got string
					if i%2 == 0 {
						res, err := c.Chat.Completions.New(context.Background(), params)
						if !assert.NoError(t, err) {
							return
						}
						got = res.Choices[0].Message.Content
					} else {
						s := c.Chat.Completions.NewStreaming(context.Background(), params)
						var acc openai.ChatCompletionAccumulator
						for s.Next() {
							acc.AddChunk(s.Current())
						}
						if !assert.NoError(t, s.Err()) {
							return
						}
						got = acc.Choices[0].Message.Content
					}
					mu.Lock()
					answers = append(answers, got)
					mu.Unlock()
				})
			}
			require.Eventually(t, func() bool { return up.requests() == 1 }, 10*time.Second, 5*time.Millisecond)
			time.Sleep(300 * time.Millisecond) // lets the others arrive while the first streams
			close(gate)
			wg.Wait()
			assert.Equal(t, 1, up.requests(), "one model call across the replicas")
			require.Len(t, answers, 12)
			for _, a := range answers {
				assert.Equal(t, "Hello! How can I help you today?", a)
			}
			// 29 tokens charged of 30: a new question is still admitted
			// (the ceiling compares what was charged), and then none.
			c := fleetClient(f.replicas[1])
			_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello again")}})
			require.NoError(t, err)
			_, err = c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "primary",
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("And again")}})
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, http.StatusPaymentRequired, apiErr.StatusCode)
		})
	}
}

// TestACancelledRefundCountsAgainstTheCallsBudget: a tenant's calls budget
// on a side-effecting tool bounds the refunds the bank makes, across the
// replicas, even when the client cancels each call once the bank has it:
// the refund may have been made, so it is charged, and the third is
// refused.
func TestACancelledRefundCountsAgainstTheCallsBudget(t *testing.T) {
	for kind, url := range sharedStoreURLs(t) {
		t.Run(kind, func(t *testing.T) {
			b := newBank(t, true)
			f := startFleet(t, kind, url, 2, fmt.Sprintf(`
keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
chains: tool: [{use: "meter", budget: calls: 2, scope: "key", store: "shared"}]
`, sha("agent-key"), b.url))
			refund := func(s *served, order string, cancelled bool) *mcp.CallToolResult {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cs := connectProxy(t, s.url, "agent-key", nil)
				if !cancelled {
					res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": order, "amount": 10}})
					require.NoError(t, err)
					return res
				}
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": order, "amount": 10}})
				}()
				<-b.started
				cancel()
				<-done
				// The replica records the call's end after its client has gone.
				require.Eventually(t, func() bool {
					_, _, m := do(t, "GET", s.url+"/metrics", "", nil)
					return strings.Contains(m, `agentc_serve_tool_calls_total{outcome="`)
				}, 10*time.Second, 5*time.Millisecond)
				return nil
			}
			refund(f.replicas[0], "A1", true)
			refund(f.replicas[1], "A2", true)
			b.release() // a refund that reaches the bank now is made
			res := refund(f.replicas[0], "A3", false)
			assert.True(t, res.IsError, "a third refund under a budget of two calls: %s", text(t, res))
			assert.Contains(t, text(t, res), "budget")
			assert.Equal(t, int64(2), b.refunds.Load(), "the bank made the refunds the budget allows")
		})
	}
}

// TestARefundSentAgainOnAnotherReplicasSession: a client whose replica
// went away sends its refund again on a session of another replica. That
// session is another run, so an idempotent layer keyed on the run (no
// key_args) runs the refund again when the call names no key of its own;
// the policy is loaded with a warning naming the layer. key_args, the
// Idempotency-Key header or the X-Agentc-Run header keeps the call's key
// across sessions and replicas, and the refund runs once.
func TestARefundSentAgainOnAnotherReplicasSession(t *testing.T) {
	const byRun = `
keys: agent: {sha256: "%s", tenant: "shop"}
mcp: servers: pay: url: "%s"
tools: refund: side_effecting: true
chains: tool: [{use: "idempotent", name: "once", store: "shared"}]
`
	for kind, url := range sharedStoreURLs(t) {
		for _, tc := range []struct {
			name    string
			policy  string
			headers map[string]string
			refunds int64
		}{
			{"keyed on the session's run", byRun, nil, 2},
			{"Idempotency-Key", byRun, map[string]string{"Idempotency-Key": "refund-A1"}, 1},
			{"X-Agentc-Run", byRun, map[string]string{RunHeader: "order-A1"}, 1},
			{"key_args", refundPolicy, nil, 1},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				b := newBank(t, false)
				policy := fmt.Sprintf(tc.policy, sha("agent-key"), b.url)
				if tc.policy == refundPolicy {
					policy = fmt.Sprintf(tc.policy, sha("agent-key"), b.url, "5s")
				}
				f := startFleet(t, kind, url, 2, policy)
				for _, r := range f.replicas {
					res, err := connectProxy(t, r.url, "agent-key", tc.headers).CallTool(context.Background(), refundA1)
					require.NoError(t, err)
					require.False(t, res.IsError, text(t, res))
					assert.Equal(t, "refunded 10.00 on A1", text(t, res))
				}
				assert.Equal(t, tc.refunds, b.refunds.Load())
				logs := f.replicas[0].logs.String()
				if tc.policy == refundPolicy {
					assert.NotContains(t, logs, "idempotency keyed on the run")
					return
				}
				assert.Contains(t, logs, "idempotency keyed on the run")
				assert.Contains(t, logs, "layers=[once]")
			})
		}
	}
}
