package serve

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// progressUpstream serves one tool, work, that reports the progress given
// in its steps argument (a step every three progressEvery, so that a late
// notification on a loaded machine is not taken for a flood, with a
// message) before it answers; tokens records the progress token of each
// call (nil: none).
func progressUpstream(t *testing.T) (string, func() []any) {
	t.Helper()
	var mu sync.Mutex
	var tokens []any
	srv := mcp.NewServer(&mcp.Implementation{Name: "slow", Version: "1"}, nil)
	type in struct {
		Steps []float64 `json:"steps"`
		Total *float64  `json:"total,omitempty"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "work", Description: "Works a while.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			mu.Lock()
			tokens = append(tokens, tok)
			mu.Unlock()
			total := 3.0
			if in.Total != nil {
				total = *in.Total
			}
			for _, p := range in.Steps {
				if tok != nil {
					require.NoError(t, req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: tok, Progress: p, Total: total, Message: fmt.Sprintf("reading customer 4111-1111-1111-%04.0f", p)}))
				}
				time.Sleep(3 * progressEvery)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL, func() []any {
		mu.Lock()
		defer mu.Unlock()
		return append([]any(nil), tokens...)
	}
}

// TestMCPProgressIsRelayed: an upstream's progress notifications during a
// call reach the client that asked for them (its progressToken), with the
// client's token; their messages, upstream text no layer of the tool chain
// read, are left out, and so are their numbers: the client gets the whole
// percent of the total reached, or without a total the count of the
// notifications relayed, so that an upstream cannot hand it a number no
// layer read (a card number as the progress); a progress that does not
// increase is dropped; a call without a token gives the upstream none.
func TestMCPProgressIsRelayed(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-test")
	url, tokens := progressUpstream(t)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(scanPolicy, sha("agent-key"), url, ""))), WatchInterval: -1})
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := connectProxyWith(t, s.url, "agent-key", nil, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, req.Params)
		}})
	ctx := context.Background()

	params := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"steps": []float64{1, 2, 1.5, 3}}}
	params.SetProgressToken("client-7")
	res, err := cs.CallTool(ctx, params)
	require.NoError(t, err)
	assert.Equal(t, "done", text(t, res))
	waitGot := func() {
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= 3
		}, 5*time.Second, 10*time.Millisecond)
	}
	waitGot()
	mu.Lock()
	var progress []float64
	for _, p := range got {
		progress = append(progress, p.Progress)
		assert.Equal(t, "client-7", p.ProgressToken)
		assert.Equal(t, 100.0, p.Total)
		assert.Empty(t, p.Message, "the upstream's message passed no layer of the tool chain")
	}
	got = nil
	mu.Unlock()
	assert.Equal(t, []float64{33, 66, 100}, progress)

	// Numbers of the upstream's own: a card number as the progress, a
	// total of 0 (none) or below the progress.
	for _, total := range []float64{0, 2} {
		params = &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"steps": []float64{4111111111111111, 4111111111111112, 4111111111111113}, "total": total}}
		params.SetProgressToken("client-8")
		res, err = cs.CallTool(ctx, params)
		require.NoError(t, err)
		waitGot()
		mu.Lock()
		progress = nil
		for _, p := range got {
			progress = append(progress, p.Progress)
			assert.Zero(t, p.Total, "total %v", total)
		}
		got = nil
		mu.Unlock()
		assert.Equal(t, []float64{1, 2, 3}, progress, "total %v", total)
	}
	up := tokens()
	require.Len(t, up, 3)
	assert.NotNil(t, up[0], "the upstream was given a token")
	assert.NotEqual(t, "client-7", up[0], "the upstream gets a token of the proxy's, not the client's")

	// Without a token, none is sent upstream and nothing is relayed.
	mu.Lock()
	got = nil
	mu.Unlock()
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"steps": []float64{1}}})
	require.NoError(t, err)
	assert.Equal(t, "done", text(t, res))
	up = tokens()
	require.Len(t, up, 4)
	assert.Nil(t, up[3])
	mu.Lock()
	assert.Empty(t, got)
	mu.Unlock()
}

// TestMCPProgressAfterAnswerLeaksNothing: 1,000 calls with progress, of
// an upstream that goes on reporting each call's progress after its
// answer, leave no goroutine or relay behind them.
func TestMCPProgressAfterAnswerLeaksNothing(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-test")
	var late sync.WaitGroup
	var lateSent atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "late", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "work", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, _ map[string]any) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			require.NoError(t, req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1}))
			late.Go(func() {
				// After the answer, on the session's own stream.
				time.Sleep(time.Millisecond)
				if req.Session.NotifyProgress(context.Background(), &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 99}) == nil {
					lateSent.Add(1)
				}
			})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(scanPolicy, sha("agent-key"), ts.URL, ""))), WatchInterval: -1})
	var mu sync.Mutex
	got := map[float64]int{}
	cs := connectProxyWith(t, s.url, "agent-key", nil, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			got[req.Params.Progress]++
		}})
	ctx := context.Background()
	call := func(i int) {
		params := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}}
		params.SetProgressToken(fmt.Sprintf("client-%d", i))
		res, err := cs.CallTool(ctx, params)
		require.NoError(t, err)
		require.Equal(t, "done", text(t, res))
	}
	settled := func() int {
		late.Wait()
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		return runtime.NumGoroutine()
	}
	call(0) // the sessions and their streams are open
	before := settled()
	const calls = 1000
	for i := 1; i <= calls; i++ {
		call(i)
	}
	// A leak of one goroutine a call would be a thousand; the slack is
	// the keep-alive connections between the client, the proxy and the
	// upstream (three goroutines each, as many as the calls' overlap
	// needed, within the transports' idle bounds).
	const slack = 9
	after := settled()
	for deadline := time.Now().Add(10 * time.Second); after > before+slack && time.Now().Before(deadline); {
		after = settled()
	}
	assert.LessOrEqual(t, after, before+slack, "goroutines: %d before %d calls, %d after", before, calls, after)
	t.Logf("goroutines: %d before %d calls, %d after; %d progress notifications sent after their answers", before, calls, after, lateSent.Load())

	g := s.srv.acquire()
	relays := 0
	g.mcp.servers["up"].progress.Range(func(any, any) bool { relays++; return true })
	g.release()
	assert.Zero(t, relays, "no call's relay outlives it")
	mu.Lock()
	defer mu.Unlock()
	// The SDK hands a notification to its handler in a goroutine of its
	// own and a response to the call at once, so a progress read just
	// before the answer, or one sent after it on another stream, may find
	// its relay gone or not yet gone: the counts are logged, not held.
	t.Logf("relayed: %d of %d progress notifications sent before their answers, %d of %d sent after",
		got[1], calls+1, got[99], lateSent.Load())
}

// pausingTransport is a client transport whose reads wait while paused is
// set: a client that stops reading its stream.
type pausingTransport struct {
	mcp.Transport
	paused  *atomic.Bool
	release chan struct{}
}

func (p pausingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := p.Transport.Connect(ctx)
	return pausingConn{c, p}, err
}

type pausingConn struct {
	mcp.Connection
	p pausingTransport
}

func (c pausingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if c.p.paused.Load() {
		<-c.p.release
	}
	return c.Connection.Read(ctx)
}

// TestMCPProgressToAClientThatDoesNotReadHoldsNothing: the upstream's
// progress is relayed from its session's reader, which reads the answers
// of every call on it. A client that stops reading its stream held the
// reader in the write of its progress, so no other call of the upstream,
// any tenant's, got its answer; the reader now hands the progress over and
// goes on.
func TestMCPProgressToAClientThatDoesNotReadHoldsNothing(t *testing.T) {
	ctx := context.Background()
	srv := mcp.NewServer(&mcp.Implementation{Name: "proxy", Version: "1"}, nil)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	var paused atomic.Bool
	release := make(chan struct{})
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "client", Version: "1"}, nil).Connect(ctx, pausingTransport{ct, &paused, release}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { close(release); _ = cs.Close(); _ = ss.Close() })
	paused.Store(true)

	u := &upstreamServer{}
	u.progress.Store("agentc-1", &progressRelay{ctx: ctx, session: ss, token: "client-1"})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 3; i++ {
			u.relayProgress(ctx, &mcp.ProgressNotificationClientRequest{Params: &mcp.ProgressNotificationParams{ProgressToken: "agentc-1", Progress: float64(i), Total: 3}})
			time.Sleep(progressEvery + 10*time.Millisecond)
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream's reader is held by a client that does not read")
	}
}

// TestMCPProgressBeforeTheAnswerArrivesBeforeIt: an upstream that reports
// its progress and answers at once had the progress lost, most calls: the
// SDK hands a notification to its handler in a goroutine of its own and
// the response to the call at once, so the call ended (dropping its relay)
// before the progress was read, and a relayed one was written in a
// goroutine racing the answer. Every progress the upstream sent before its
// answer now reaches the client before the answer: the first, and the last
// of a burst the flood bound held back.
func TestMCPProgressBeforeTheAnswerArrivesBeforeIt(t *testing.T) {
	t.Setenv("AGENTC_TEST_OPENAI_KEY", "sk-test")
	srv := mcp.NewServer(&mcp.Implementation{Name: "quick", Version: "1"}, nil)
	type in struct {
		Steps []float64 `json:"steps"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "work", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in in) (*mcp.CallToolResult, any, error) {
			for _, p := range in.Steps {
				require.NoError(t, req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: p, Total: 4}))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	s := startServer(t, Options{Source: cueSource(writePolicy(t, fmt.Sprintf(scanPolicy, sha("agent-key"), ts.URL, ""))), WatchInterval: -1})
	var mu sync.Mutex
	got := map[string][]float64{}
	cs := connectProxyWith(t, s.url, "agent-key", nil, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			tok := fmt.Sprint(req.Params.ProgressToken)
			got[tok] = append(got[tok], req.Params.Progress)
		}})
	call := func(tok string, want []float64, steps ...float64) {
		t.Helper()
		params := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{"steps": steps}}
		params.SetProgressToken(tok)
		res, err := cs.CallTool(context.Background(), params)
		require.NoError(t, err)
		require.Equal(t, "done", text(t, res))
		// The client's handler runs in a goroutine of its own too: what
		// was written before the answer is handled a moment after it.
		read := func() []float64 {
			mu.Lock()
			defer mu.Unlock()
			return append([]float64(nil), got[tok]...)
		}
		require.Eventually(t, func() bool { return len(read()) >= len(want) }, 2*time.Second, 5*time.Millisecond, "%s: got %v", tok, read())
		assert.Equal(t, want, read(), tok)
	}
	for i := range 20 {
		call(fmt.Sprintf("one-%d", i), []float64{25}, 1)
	}
	// The last progress of a burst is held back by the flood bound, not
	// dropped.
	call("burst", []float64{25, 100}, 1, 2, 3, 4)
}
