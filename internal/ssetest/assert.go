package ssetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// Collect streams req through c and returns the deltas and the error.
func Collect(t testing.TB, c runtime.ModelClient, req runtime.ChatRequest) ([]runtime.Delta, error) {
	t.Helper()
	var out []runtime.Delta
	err := c.Stream(context.Background(), &req, func(d runtime.Delta) bool {
		out = append(out, d)
		return true
	})
	return out, err
}

// Text concatenates the text of ds.
func Text(ds []runtime.Delta) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.Text)
	}
	return b.String()
}

// ToolCalls assembles the tool-call fragments of ds.
func ToolCalls(ds []runtime.Delta) []runtime.ToolUse {
	var b runtime.ToolCallBuilder
	for i := range ds {
		b.Add(&ds[i])
	}
	return b.ToolCalls()
}

// CallError asserts that err is a *runtime.CallError whose text does not
// hold key, and returns it.
func CallError(t testing.TB, err error, key string) *runtime.CallError {
	t.Helper()
	var ce *runtime.CallError
	require.True(t, errors.As(err, &ce), "want a *runtime.CallError, got %T: %v", err, err)
	assert.NotContains(t, err.Error(), key, "the key never appears in an error")
	return ce
}

// StatusCase is an error response and how the client must classify it.
type StatusCase struct {
	Name   string
	Status int
	Header map[string]string
	// Body is the response body, or the name of a testdata file (*.json).
	Body string
	// Kind, RetryAfter and Message are what the *runtime.CallError holds.
	Kind       runtime.ErrorKind
	RetryAfter time.Duration
	Message    string
	// ProviderRefused is whether the error is marked
	// runtime.ErrProviderRefused (a fallback falls over on it).
	ProviderRefused bool
	// Detail, when set, is the provider's account the error carries.
	Detail *wire.Detail
	// Hint is the provider's word on a retry of the same model the error
	// carries (x-should-retry).
	Hint runtime.RetryHint
}

// Refused returns the case with ProviderRefused set.
func (c StatusCase) Refused() StatusCase {
	c.ProviderRefused = true
	return c
}

// Hinted returns the case with Hint set.
func (c StatusCase) Hinted(h runtime.RetryHint) StatusCase {
	c.Hint = h
	return c
}

// Says sets the provider's account of the failure the error must carry
// (wire.DetailOf).
func (c StatusCase) Says(d wire.Detail) StatusCase {
	c.Detail = &d
	return c
}

// RunStatusCases serves each case to the client newClient makes and checks
// its classification, and that the client sent exactly one request (the
// SDK's own retries are off).
func RunStatusCases(t *testing.T, key string, newClient func(testing.TB, *Server) runtime.ModelClient, req runtime.ChatRequest, cases []StatusCase) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			body := tc.Body
			if strings.HasSuffix(body, ".json") {
				body = File(t, body)
			}
			s := New(t, Reply{Status: tc.Status, Header: tc.Header, Body: body})
			_, err := Collect(t, newClient(t, s), req)
			ce := CallError(t, err, key)
			assert.Equal(t, tc.Kind, ce.Kind)
			assert.Equal(t, tc.Status, ce.Status)
			assert.Equal(t, tc.RetryAfter, ce.RetryAfter)
			assert.Equal(t, tc.Hint, ce.Hint, "the provider's word on a retry")
			assert.Contains(t, err.Error(), tc.Message)
			assert.Equal(t, tc.ProviderRefused, errors.Is(err, runtime.ErrProviderRefused), "marked a refusal of the provider's own")
			if tc.Detail != nil {
				assert.Equal(t, tc.Detail, wire.DetailOf(err), "the provider's account of the failure")
			}
			assert.Equal(t, 1, s.Requests(), "the SDK's own retries are off")
		})
	}
}

// Case returns a StatusCase.
func Case(name string, status int, header map[string]string, body string, kind runtime.ErrorKind, retryAfter time.Duration, message string) StatusCase {
	return StatusCase{Name: name, Status: status, Header: header, Body: body, Kind: kind, RetryAfter: retryAfter, Message: message}
}

// AssertOneConnection streams transcript n times in a row through the
// client newClient makes for one server, and asserts that every stream
// completed over a single connection: a client that closes a finished
// response before its end makes net/http discard the connection.
func AssertOneConnection(t *testing.T, newClient func(testing.TB, *Server) runtime.ModelClient, transcript string, req runtime.ChatRequest, n int) {
	t.Helper()
	replies := make([]Reply, n)
	for i := range replies {
		replies[i] = Reply{Body: transcript}
	}
	s := New(t, replies...)
	c := newClient(t, s)
	for range n {
		ds, err := Collect(t, c, req)
		require.NoError(t, err)
		require.NotEmpty(t, Text(ds))
	}
	assert.Equal(t, 1, s.Conns(), "%d sequential streams over one connection", n)
}

// AssertSameBody asserts that the request body a client encoded, got, is
// member for member the SDK's encoding of the same request, sdk, with the
// members set, which the SDK's options add (NewStreaming's "stream").
func AssertSameBody(t *testing.T, got []byte, sdk any, set map[string]any) {
	t.Helper()
	require.True(t, json.Valid(got), "%s", got)
	want, err := json.Marshal(sdk)
	require.NoError(t, err)
	var g, w map[string]any
	require.NoError(t, json.Unmarshal(got, &g))
	require.NoError(t, json.Unmarshal(want, &w))
	for k, v := range set {
		w[k] = v
	}
	assert.Equal(t, w, g, "sent %s\nSDK  %s", got, want)
}

// EndlessErrorServer is a server that answers every request with status
// and a body that does not end before 64 MiB; written counts the bytes it
// got out before the client stopped reading.
func EndlessErrorServer(t testing.TB, status int) (srv *httptest.Server, written *atomic.Int64) {
	return EndlessServer(t, status, "", "", bytes.Repeat([]byte{'x'}, 64<<10))
}

// EndlessEventServer is a server that answers every request with a stream
// of server-sent events: first, then one event whose data lines do not end
// before EndlessBody; written counts the bytes it got out before the
// client stopped reading.
func EndlessEventServer(t testing.TB, first string) (srv *httptest.Server, written *atomic.Int64) {
	line := append([]byte("data: "), bytes.Repeat([]byte{'x'}, 64<<10)...)
	return EndlessServer(t, http.StatusOK, "text/event-stream", first, append(line, '\n'))
}

// EndlessServer is a server that answers every request with status, the
// content type (unless ""), and a body of first and then chunk repeated
// until EndlessBody; written counts the bytes of chunk it got out before
// the client stopped reading.
func EndlessServer(t testing.TB, status int, contentType, first string, chunk []byte) (srv *httptest.Server, written *atomic.Int64) {
	t.Helper()
	written = new(atomic.Int64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		if _, err := io.WriteString(w, first); err != nil {
			return
		}
		for written.Load() < EndlessBody {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, written
}

// KeepAliveServer is a server that answers every request with a stream of
// server-sent events that sends only comments (": ping") every 10 ms, and
// never an event, until the client leaves; gone is closed then.
func KeepAliveServer(t testing.TB) (srv *httptest.Server, gone <-chan struct{}) {
	t.Helper()
	left := make(chan struct{})
	var once sync.Once
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer once.Do(func() { close(left) })
		w.Header().Set("Content-Type", "text/event-stream")
		for {
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, left
}

// AssertEndlessEventCut asserts that a client of the server at a URL
// (newClient), streaming req from an upstream that sends first and then one
// event of endless data lines, fails with a permanent error naming the
// event bound, having stopped reading near the bound.
func AssertEndlessEventCut(t *testing.T, key string, newClient func(url string) runtime.ModelClient, req runtime.ChatRequest, first string) {
	t.Helper()
	srv, written := EndlessEventServer(t, first)
	err := newClient(srv.URL).Stream(context.Background(), &req, func(runtime.Delta) bool { return true })
	ce := CallError(t, err, key)
	assert.Equal(t, runtime.KindPermanent, ce.Kind, "the same upstream sends the same event again")
	assert.ErrorIs(t, err, wire.ErrEventTooLarge)
	assert.Contains(t, err.Error(), "16 MiB")
	srv.CloseClientConnections()
	assert.Less(t, written.Load(), int64(EndlessBody/2), "the event was not read to its end (what the server wrote includes the sockets' buffers)")
}

// AssertHeldByKeepAlives asserts that a client of the server at a URL
// (newClient), streaming req from an upstream that sends only keep-alives,
// is held until the caller's context ends (the client sets no deadline of
// its own), then returns the context's error at once and closes the
// connection.
func AssertHeldByKeepAlives(t *testing.T, newClient func(url string) runtime.ModelClient, req runtime.ChatRequest) {
	t.Helper()
	srv, gone := KeepAliveServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := newClient(srv.URL).Stream(ctx, &req, func(runtime.Delta) bool { return true })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 2*time.Second)
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not closed")
	}
}

// EndlessBody is the size of EndlessErrorServer's body.
const EndlessBody = 64 << 20

// AssertLeftPromptly asserts that a call begun at start against s, whose
// reply holds its response open after its last event (Reply.HoldOpen),
// returned within 2 s, not waiting for a response that never ends, and
// that its connection is closed within 5 s.
func AssertLeftPromptly(t testing.TB, s *Server, start time.Time) {
	t.Helper()
	assert.Less(t, time.Since(start), 2*time.Second, "the client does not wait for a response that never ends")
	select {
	case <-s.Gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the held response's connection was not closed")
	}
}

// AssertNoRedirectElsewhere asserts that a client of the server at a URL
// (newClient), streaming req, follows a redirect within the server's
// origin and no redirect to another origin: whichever the status (301,
// 302, 303, 307, 308), nothing reaches the other origin (neither the body
// nor a Referer naming the upstream), and the call fails with a permanent
// error marked runtime.ErrProviderRefused (a fallback tries its next
// model) that holds wire.ErrOtherOrigin and no key.
func AssertNoRedirectElsewhere(t *testing.T, key string, newClient func(url string) runtime.ModelClient, req runtime.ChatRequest) {
	t.Helper()
	var elsewhere, moved atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(other.Close)
	var status atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/moved"):
			moved.Add(1)
			http.Error(w, `{"error":{"type":"api_error","message":"moved"}}`, http.StatusInternalServerError)
		case strings.HasPrefix(r.URL.Path, "/same/"):
			http.Redirect(w, r, "/moved"+r.URL.Path, http.StatusTemporaryRedirect)
		default:
			http.Redirect(w, r, other.URL+"/steal", int(status.Load()))
		}
	}))
	t.Cleanup(srv.Close)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		status.Store(int32(code))
		err := newClient(srv.URL+"/v1").Stream(context.Background(), &req, func(runtime.Delta) bool { return true })
		ce := CallError(t, err, key)
		assert.Equal(t, runtime.KindPermanent, ce.Kind, "%d: the upstream redirects elsewhere again", code)
		assert.ErrorIs(t, err, runtime.ErrProviderRefused, "%d: a fallback tries its next model", code)
		assert.ErrorIs(t, err, wire.ErrOtherOrigin, "%d", code)
		assert.Contains(t, err.Error(), other.URL, "%d: the error names where the redirect pointed", code)
	}
	assert.Zero(t, elsewhere.Load(), "nothing reached the other origin")

	err := newClient(srv.URL+"/same/v1").Stream(context.Background(), &req, func(runtime.Delta) bool { return true })
	ce := CallError(t, err, key)
	assert.Equal(t, int32(1), moved.Load(), "a redirect within the origin is followed")
	assert.Equal(t, http.StatusInternalServerError, ce.Status, "the redirected request's answer is the call's")
}

// AssertSentLikeSDK sends each of cases once with the client that
// newClient makes and once with the SDK (sdk), each given the base URL of a
// loopback server that answers with transcript, and asserts that the
// server received request bodies of the same JSON: what goes on the wire,
// after the SDK's own options (it sets "stream" in the body the client
// hands it), not only what the client encodes.
func AssertSentLikeSDK(t *testing.T, transcript string, cases map[string]runtime.ChatRequest,
	newClient func(url string) (runtime.ModelClient, error), sdk func(url string, req *runtime.ChatRequest) error) {
	t.Helper()
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			s := New(t, Reply{Body: transcript}, Reply{Body: transcript})
			c, err := newClient(s.URL)
			require.NoError(t, err)
			require.NoError(t, c.Stream(context.Background(), &req, func(runtime.Delta) bool { return true }))
			require.NoError(t, sdk(s.URL, &req))
			bodies := s.Bodies()
			require.Len(t, bodies, 2)
			assert.JSONEq(t, string(bodies[1]), string(bodies[0]))
		})
	}
}

// AssertAcceptedThenFailedIsCharged asserts that a client of the server at
// a URL (newClient), streaming req, charges the prompt of a call the
// upstream accepted (200) and that failed before any delta: a stream cut
// before its first event is a transient failure carrying
// runtime.EstimateInput(req) as its usage (runtime.CallError.Usage); a
// whole JSON answer in place of the stream is a permanent failure that says
// so, carrying the usage the answer reports (whole, reported), or the
// estimate when it reports none.
func AssertAcceptedThenFailedIsCharged(t *testing.T, key string, newClient func(url string) runtime.ModelClient, req runtime.ChatRequest, whole string, reported runtime.Usage) {
	t.Helper()
	estimate := runtime.EstimateInput(&req)
	require.Positive(t, estimate.InputTokens)
	s := New(t, Reply{Body: ""})
	_, err := Collect(t, newClient(s.URL), req)
	ce := CallError(t, err, key)
	assert.Equal(t, runtime.KindTransient, ce.Kind)
	assert.Contains(t, err.Error(), "the stream ended before the response was complete (after 0 deltas)")
	assert.Equal(t, estimate, ce.Usage, "the prompt the upstream read is charged")

	asJSON := map[string]string{"Content-Type": "application/json"}
	s = New(t, Reply{Header: asJSON, Body: whole}, Reply{Header: asJSON, Body: `{"id":"x"}`})
	for _, want := range []runtime.Usage{reported, estimate} {
		_, err = Collect(t, newClient(s.URL), req)
		ce = CallError(t, err, key)
		assert.Equal(t, runtime.KindPermanent, ce.Kind, "the upstream answers the same way again")
		assert.Contains(t, err.Error(), `answered the streaming request with "application/json", not a stream of server-sent events (text/event-stream)`)
		assert.Equal(t, want, ce.Usage)
	}
}

// requestIDs notes the upstream request ids reported to it.
type requestIDs struct{ ids []string }

func (r *requestIDs) NoteUpstreamRequestID(id string) { r.ids = append(r.ids, id) }

// AssertRequestIDOnError asserts that a client of the server at a URL
// (newClient), streaming req, reports the upstream's id of a request it
// refused (header: x-request-id, request-id) as it reports that of an
// answered one.
func AssertRequestIDOnError(t *testing.T, newClient func(url string) runtime.ModelClient, req runtime.ChatRequest, header string) {
	t.Helper()
	for _, status := range []int{http.StatusBadRequest, http.StatusTooManyRequests, http.StatusInternalServerError} {
		s := New(t, Reply{Status: status, Header: map[string]string{header: "req_err_789"}, Body: `{"error":{"type":"invalid_request_error","message":"no"}}`})
		var ids requestIDs
		ctx := runtime.WithUpstreamRequestID(context.Background(), &ids)
		err := newClient(s.URL).Stream(ctx, &req, func(runtime.Delta) bool { return true })
		require.Error(t, err)
		assert.Equal(t, []string{"req_err_789"}, ids.ids, "status %d", status)
	}
}

// AssertStreamContentTypes asserts that a client of the server at a URL
// (newClient), streaming req, reads as the stream it asked for a stream of
// the package's testdata/text.sse answered with a Content-Type of another
// spelling (a charset, capitals) or text/plain, the type Go's server
// sniffs for a stream whose handler set none: only a JSON body is no
// stream (NotAStream).
func AssertStreamContentTypes(t *testing.T, newClient func(url string) runtime.ModelClient, req runtime.ChatRequest) {
	t.Helper()
	for _, ct := range []string{"text/event-stream; charset=utf-8", "Text/Event-Stream", "text/plain; charset=utf-8", "application/octet-stream"} {
		s := New(t, Reply{Header: map[string]string{"Content-Type": ct}, Body: Transcript(t, "text.sse")})
		ds, err := Collect(t, newClient(s.URL), req)
		require.NoError(t, err, ct)
		assert.NotEmpty(t, Text(ds), ct)
	}
}
