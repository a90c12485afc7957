package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime"
)

// TestMCPCallCancelledBeforeItIsSentIsNotInDoubt: a call of a
// side-effecting tool waits while its upstream's tools are listed again
// (the server said they changed) and is cancelled there, never sent. It
// did not run: audit records it failed, not in doubt, and idempotent
// releases its claim, so the call sent again with its key runs (once) instead
// of failing in doubt for the claim's ttl.
func TestMCPCallCancelledBeforeItIsSentIsNotInDoubt(t *testing.T) {
	p := payDuringAHeldListing(t)
	refunds, audit, cs, lists := &p.refunds, p.audit, p.cs, p.lists
	args := map[string]any{"order_id": "A1"}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args})
	cancel()
	require.Error(t, err, "the call is cancelled while it waits")

	lists.free()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: args})
	require.NoError(t, err)
	assert.False(t, res.IsError, "the call sent again with its key runs: %s", text(t, res))
	assert.EqualValues(t, 1, refunds.Load())
	// The call cancelled while it waited is refused by its chain as not
	// run (before it, notSentOf; as it is sent, admit): either way no
	// record says it may have run.
	var outcomes []runtime.AuditDecision
	for _, r := range audit.Records() {
		if r.Phase == runtime.PhaseOutcome && r.Tool == "refund" {
			assert.NotEqual(t, runtime.DecisionInDoubt, r.Decision, "the call was never sent: %+v", r)
			outcomes = append(outcomes, r.Decision)
		}
	}
	assert.NotEmpty(t, outcomes, "the call sent again is audited")
}

// listHold holds an upstream's tools/list requests, once hold is called,
// until free is (or the request ends).
type listHold struct {
	held    atomic.Bool
	listing chan struct{} // a listing is held
	release chan struct{}
	once    sync.Once
}

// holdLists has srv's tools/list requests held as h says.
func holdLists(srv *mcp.Server) *listHold {
	h := &listHold{listing: make(chan struct{}, 1), release: make(chan struct{})}
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && h.held.Load() {
				select {
				case h.listing <- struct{}{}:
				default:
				}
				select {
				case <-h.release:
				case <-ctx.Done():
				}
			}
			return next(ctx, method, req)
		}
	})
	return h
}

func (h *listHold) hold() { h.held.Store(true) }

func (h *listHold) free() {
	h.held.Store(false)
	h.once.Do(func() { close(h.release) })
}

// waitHeld waits until a listing is held.
func (h *listHold) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-h.listing:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not list the upstream's tools again")
	}
}

// TestMCPCallCancelledBeforeItsChainIsAudited: a call whose client
// cancels it while it waits, before its tool chain runs, for its
// upstream's tools to be listed again was refused there and reached no
// layer: a policy with an audit layer had no record of the attempt, where
// a call a guard blocks has one. The chain now runs for it, the upstream
// tool refusing it at once, not sent: audit records it failed, canceled,
// not in doubt.
func TestMCPCallCancelledBeforeItsChainIsAudited(t *testing.T) {
	p := payDuringAHeldListing(t)
	s, cs, audit := p.s, p.cs, p.audit
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1"}})
		called <- err
	}()
	require.Eventually(t, func() bool { return listWaits(s, "pay") == 1 }, 10*time.Second, time.Millisecond, "the call waits for the listing")
	cancel()
	require.Error(t, <-called)

	outcome := func() *runtime.AuditRecord {
		for _, r := range audit.Records() {
			if r.Phase == runtime.PhaseOutcome && r.Tool == "refund" {
				return &r
			}
		}
		return nil
	}
	require.Eventually(t, func() bool { return outcome() != nil }, 10*time.Second, time.Millisecond, "the call cancelled before its chain ran is audited")
	r := outcome()
	assert.Equal(t, runtime.DecisionFailed, r.Decision, "%+v", r)
	assert.Equal(t, string(runtime.KindCanceled), r.ErrorType, "%+v", r)
	assert.Zero(t, p.refunds.Load(), "the call was not sent")
}

// heldPay is an upstream "pay" (a tool refund, counting its runs) served
// through s with an audit layer and idempotent, whose tools it says
// changed, their listing held: its calls wait.
type heldPay struct {
	refunds atomic.Int64
	audit   *runtime.MemoryAudit
	s       *served
	cs      *mcp.ClientSession
	lists   *listHold
}

func payDuringAHeldListing(t *testing.T) *heldPay {
	t.Helper()
	return payDuringAHeldListingWith(t, `{use: "audit", trail: "logical"}, {use: "idempotent"}`)
}

// payDuringAHeldListingWith is payDuringAHeldListing with the layers of
// chain as the tool chain.
func payDuringAHeldListingWith(t *testing.T, chain string) *heldPay {
	t.Helper()
	p := &heldPay{audit: &runtime.MemoryAudit{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "refund", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			p.refunds.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
		})
	p.lists = holdLists(srv)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	p.s = startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: pay: url: %q
chains: tool: [%s]
`, sha("agent-key"), ts.URL, chain))), Deps: runtime.Deps{Audit: p.audit}, WatchInterval: -1})
	p.cs = connectProxy(t, p.s.url, "agent-key", map[string]string{"Idempotency-Key": "refund-A1"})
	t.Cleanup(p.lists.free) // before the servers close (cleanups run last first)

	// The upstream says its tools changed, and its list hangs: the
	// proxy's calls of its tools wait.
	p.lists.hold()
	srv.AddTool(&mcp.Tool{Name: "stock", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	p.lists.waitHeld(t)
	return p
}

// TestMCPCallsCancelledBeforeTheirChainHoldNothing: a call cancelled
// before its chain ran had its chain run on a context that never ended,
// to be audited: a layer that waits (here idempotent, for a duplicate in
// flight) held the request until the duplicate ended, so a client that
// sent calls and cancelled each held requests beyond -maxinflight. Such a
// chain is bounded (recordOnlyFor): each is audited and ends while the
// duplicate still runs, and the duplicate runs once.
func TestMCPCallsCancelledBeforeTheirChainHoldNothing(t *testing.T) {
	defer func(d time.Duration) { recordOnlyFor = d }(recordOnlyFor)
	recordOnlyFor = 100 * time.Millisecond
	var refunds atomic.Int64
	started, release := make(chan struct{}, 1), make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "refund", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			refunds.Add(1)
			started <- struct{}{}
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
		})
	lists := holdLists(srv)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	audit := &runtime.MemoryAudit{}
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(`package gw

keys: agent: {sha256: %q}
mcp: servers: pay: url: %q
tools: refund: side_effecting: true
chains: tool: [{use: "audit", trail: "logical"}, {use: "idempotent"}]
`, sha("agent-key"), ts.URL))), Deps: runtime.Deps{Audit: audit}, WatchInterval: -1})
	cs := connectProxy(t, s.url, "agent-key", map[string]string{"Idempotency-Key": "refund-A1"})
	t.Cleanup(lists.free)
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	t.Cleanup(free) // before the servers close, should the test fail
	args := map[string]any{"order_id": "A1"}
	first := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: args})
		first <- err
	}()
	<-started // the duplicate runs, its claim held

	lists.hold()
	srv.AddTool(&mcp.Tool{Name: "stock", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	lists.waitHeld(t)
	const n = 3
	ctx, cancel := context.WithCancel(context.Background())
	for range n {
		go func() { _, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refund", Arguments: args}) }()
	}
	require.Eventually(t, func() bool { return listWaits(s, "pay") == n }, 10*time.Second, time.Millisecond, "the calls wait for the listing")
	cancel()

	outcomes := func() (n int) {
		for _, r := range audit.Records() {
			if r.Phase == runtime.PhaseOutcome && r.Tool == "refund" {
				assert.NotEqual(t, runtime.DecisionInDoubt, r.Decision, "%+v", r)
				// Cut at the bound, the call is still the one its client
				// cancelled: not a timeout.
				assert.Equal(t, string(runtime.KindCanceled), r.ErrorType, "%+v", r)
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return outcomes() == n }, 10*time.Second, time.Millisecond,
		"the cancelled calls are audited and end while the duplicate runs")
	lists.free()
	free()
	require.NoError(t, <-first)
	assert.EqualValues(t, 1, refunds.Load())
}

// TestMCPCallWhoseListingWaitIsSpentIsAudited: a call refused, not sent,
// because it waited its whole time for its upstream's tools to be listed
// again was refused before its chain ran and was not in the audit trail.
// Its chain runs to record it: audit records it failed, not in doubt.
func TestMCPCallWhoseListingWaitIsSpentIsAudited(t *testing.T) {
	callWithSpentListingWait(t, `{use: "audit", trail: "logical"}, {use: "idempotent"}`)
}

// TestMCPCallWhoseListingWaitIsSpentIsNotRetried: a call refused before its
// chain because its time to wait for a listing is spent has its chain run
// only to record it, the upstream tool refusing it at once with that
// refusal, which no try within the chain changes: a retry in the chain
// tried it again up to max_attempts, each try refused so. It is tried once.
func TestMCPCallWhoseListingWaitIsSpentIsNotRetried(t *testing.T) {
	r := callWithSpentListingWait(t, `{use: "audit", trail: "logical"}, {use: "retry", max_attempts: 3, initial_delay: "1ms", max_delay: "5ms"}`)
	assert.Equal(t, 1, r.Attempts, "the refusal is not tried again: %+v", r)
}

// callWithSpentListingWait calls refund through chain while its upstream's
// listing is held past the call's wait, checks the call is refused, not
// sent and audited once as failed, and returns its outcome record.
func callWithSpentListingWait(t *testing.T, chain string) runtime.AuditRecord {
	t.Helper()
	defer func(d time.Duration) { listWaitFor = d }(listWaitFor)
	listWaitFor = 50 * time.Millisecond
	p := payDuringAHeldListingWith(t, chain)
	res, err := p.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "refund", Arguments: map[string]any{"order_id": "A1"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	assert.Contains(t, text(t, res), "its tools were still being listed again after the call waited")
	var outcomes []runtime.AuditRecord
	for _, r := range p.audit.Records() {
		if r.Phase == runtime.PhaseOutcome && r.Tool == "refund" {
			outcomes = append(outcomes, r)
		}
	}
	require.Len(t, outcomes, 1, "the call is audited")
	assert.Equal(t, runtime.DecisionFailed, outcomes[0].Decision, "%+v", outcomes[0])
	assert.Zero(t, p.refunds.Load(), "the call was not sent")
	return outcomes[0]
}
