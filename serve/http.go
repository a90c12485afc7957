package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentc-dev/agentc/builtins/tracing"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
)

// api is the wire format a route answers in, errors included.
type api int

const (
	apiOpenAI api = iota
	apiAnthropic
	apiMCP
	// apiClient answers in the format of the client's API: Anthropic's
	// for a request that looks like an Anthropic client's (clientAPI),
	// else OpenAI's. It is resolved before authentication, so a 401 too
	// is in the client's format.
	apiClient
)

// errCode names a failure in an error body's code.
type errCode string

const (
	errBadRequest   errCode = "bad_request"
	errUnauthorized errCode = "unauthorized"
	errNotFound     errCode = "not_found"
	errUnknownModel errCode = "unknown_model"
	errTooLarge     errCode = "body_too_large"
	errBodyTimeout  errCode = "body_timeout"
	errUnavailable  errCode = "unavailable"
	errOverloaded   errCode = "overloaded"
	errStoreRefused errCode = "store_refused"
)

// exchange is one request in flight: the response writer, recording what
// the access log and the metrics report, and the generation it runs on.
type exchange struct {
	http.ResponseWriter
	r *http.Request
	s *Server
	g *generation
	// released lets go of g, once: when the request ends (release), or
	// earlier when the connections close after the shutdown cut
	// (outlastCut, letGo).
	released sync.Once
	api      api
	route    string
	model    string // the model (or tool) the request names, for metrics
	caller   caller
	run      string
	status   int
	bytes    int64
	// tenantSlot is set when the request holds one of its tenant's calls
	// in flight (Options.MaxInFlightPerTenant).
	tenantSlot bool
	// bodyBytes is what the request's body charged to MaxInFlightBytes,
	// and tenantBytes to its tenant's MaxInFlightBytesPerTenant, the share
	// tenantBody, which the request holds from its first charge to
	// leaveBody.
	bodyBytes, tenantBytes int64
	tenantBody             *tenantBody
	// tenantBytesOver is set when the body was refused for its tenant's
	// share rather than the gateway's bound.
	tenantBytesOver bool
	// rpc is set on a POST /mcp until the MCP server takes the message:
	// the gateway's own refusals are JSON-RPC error responses, to the
	// request's id (rpcID) when it could be read.
	rpc   bool
	rpcID json.RawMessage
	// err is the failure the response reported, for the access log.
	err error
	// spans notes the outermost tracing layer's span of the request's
	// call, for the access log (traced).
	spans tracing.SpanNote
	// joined is the trace an MCP tool call the request carried joined
	// (its _meta's), for the access log when the request's context has
	// none.
	joined trace.SpanContext
	// param, when set, maps the param of an upstream's error to the
	// route's own field (chatAPI.param).
	param func(upstream string) string
}

// WriteHeader records the status.
func (x *exchange) WriteHeader(code int) {
	if x.status == 0 {
		x.status = code
	}
	x.ResponseWriter.WriteHeader(code)
}

// Write records the bytes written.
func (x *exchange) Write(b []byte) (int, error) {
	if x.status == 0 {
		x.status = http.StatusOK
	}
	n, err := x.ResponseWriter.Write(b)
	x.bytes += int64(n)
	return n, err
}

// Flush sends what was written so far (a stream's events).
func (x *exchange) Flush() {
	if f, ok := x.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (x *exchange) Unwrap() http.ResponseWriter { return x.ResponseWriter }

// handle registers fn under pattern: it authenticates the caller (routes
// other than the unknown route), holds a generation for the request, and
// records the access log line and the metrics when fn returns. The
// request's spans join the trace its traceparent names (wire.JoinTrace),
// unless Options.NoTraceContext turns trace context off.
func (s *Server) handle(pattern, route string, a api, fn func(x *exchange)) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The request's context is built once (trace, deadline, span
		// note) and set with one WithContext: each copies the request.
		x := &exchange{ResponseWriter: w, s: s, api: a, route: route, rpc: a == apiMCP && r.Method == http.MethodPost}
		ctx := r.Context()
		if s.opts.NoTraceContext {
			ctx = wire.WithoutTrace(ctx)
		} else {
			ctx = wire.JoinTrace(ctx, r.Header)
		}
		if a != apiMCP && s.opts.WriteTimeout > 0 {
			// The write deadline below cuts a response only at its next
			// write: an upstream that stalls would hold the request (its
			// upstream call, its goroutine, its connection) for as long
			// as its client waits. The call is cancelled before the
			// deadline, by answerMargin, so that its 504 or its stream's
			// error event can still be written.
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadlineCause(ctx,
				start.Add(s.opts.WriteTimeout-answerMargin(s.opts.WriteTimeout)), errResponseDeadline)
			defer cancel()
		}
		r = r.WithContext(tracing.WithSpanNote(ctx, &x.spans))
		x.r = r
		if a == apiClient {
			x.api = clientAPI(r)
		}
		s.metrics.inflight.Inc()
		rc := http.NewResponseController(w)
		if s.opts.WriteTimeout > 0 {
			_ = rc.SetWriteDeadline(start.Add(s.opts.WriteTimeout))
		}
		if r.Body != nil && r.Body != http.NoBody {
			// The body must arrive within BodyTimeout (a client trickling
			// it must not pin the connection); the deadline is lifted
			// once the body is read, so a long response is not cut.
			_ = rc.SetReadDeadline(start.Add(s.opts.BodyTimeout))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		x.g = s.acquire()
		defer func() {
			x.release()
			// Recorded before agentc_serve_requests_in_flight falls, so a
			// scrape that finds no request in flight finds every finished
			// one counted (calls_in_flight and the slots fall earlier, as
			// soon as the handler returns).
			s.record(x, start)
			s.metrics.inflight.Dec()
		}()
		if s.closed.Load() {
			x.failErr(errClosed)
			return
		}
		if err := s.foreignHost(r, x.g.keys.open()); err != nil {
			x.err = err
			x.fail(http.StatusMisdirectedRequest, errForeignHost, err.Error())
			return
		}
		if route != "unknown" && !s.authenticate(x) {
			return
		}
		if bounded(route, r) {
			if !s.takeTenantSlot(x) {
				return
			}
			defer s.leaveTenantSlot(x)
			if !s.takeSlot(x) {
				return
			}
			defer s.leaveSlot()
			s.metrics.calls.Inc()
			defer s.metrics.calls.Dec()
			defer s.leaveBody(x)
			if !s.takeBody(x) {
				return
			}
		}
		fn(x)
	})
}

// authenticate admits the request by its virtual key, or answers 401.
func (s *Server) authenticate(x *exchange) bool {
	if x.g.keys.open() {
		return true
	}
	if param := keyInURL(x.r.URL.RawQuery); param != "" {
		x.err = errKeyInURL(param)
		x.Header().Set("WWW-Authenticate", `Bearer realm="agentc", error="invalid_request"`)
		x.fail(http.StatusUnauthorized, errUnauthorized, x.err.Error())
		return false
	}
	presented, err := presentedKey(x.r.Header)
	if err != nil {
		x.Header().Set("WWW-Authenticate", `Bearer realm="agentc", error="invalid_request"`)
		x.fail(http.StatusUnauthorized, errUnauthorized, err.Error())
		return false
	}
	if presented == "" {
		x.Header().Set("WWW-Authenticate", `Bearer realm="agentc"`)
		x.fail(http.StatusUnauthorized, errUnauthorized, "missing API key: send Authorization: Bearer KEY, x-api-key: KEY or api-key: KEY")
		return false
	}
	k, ok := x.s.matchKey(x.g, presented)
	if !ok {
		x.Header().Set("WWW-Authenticate", `Bearer realm="agentc", error="invalid_token"`)
		x.fail(http.StatusUnauthorized, errUnauthorized, "unknown API key")
		return false
	}
	x.caller = caller{key: k.name, tenant: k.tenant}
	return true
}

// record writes the access log line and the request metrics.
func (s *Server) record(x *exchange, start time.Time) {
	d := time.Since(start)
	code := x.status
	if code == 0 {
		code = http.StatusOK
	}
	if ended := x.ended(); ended != 0 && code == http.StatusOK && x.bytes == 0 {
		code = ended
	}
	model := x.model
	if model == "" {
		model = "-"
	}
	s.metrics.observeRequest(x.route, model, code, d.Seconds())
	attrs := []slog.Attr{
		slog.String("method", x.r.Method), slog.String("path", x.r.URL.Path), slog.String("route", x.route),
		slog.Int("status", code), slog.Duration("duration", d), slog.Int64("bytes", x.bytes),
		slog.String("tenant", x.caller.tenant), slog.String("run", x.run), slog.String("model", x.model),
		slog.String("remote", x.r.RemoteAddr),
	}
	if sc := x.traced(); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	if x.err != nil {
		attrs = append(attrs, slog.String("error", x.err.Error()))
		if layer := runtime.LayerOf(x.err); layer != "" {
			attrs = append(attrs, slog.String("layer", layer))
		}
	}
	s.log.LogAttrs(x.r.Context(), slog.LevelInfo, "request", attrs...)
}

// traced returns the span the access log line of a traced request names:
// the outermost tracing layer's span of its call when it is sampled, or
// else the one the request joined (its caller's traceparent, a host's
// span, an MCP tool call's _meta); invalid for a request not traced.
func (x *exchange) traced() trace.SpanContext {
	if sc := x.spans.SpanContext(); sc.IsSampled() {
		return sc
	}
	if sc := trace.SpanContextFromContext(x.r.Context()); sc.IsValid() {
		return sc
	}
	return x.joined
}

// deadlineBody lifts the connection's read deadline once the body has been
// read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// errResponseDeadline is the cause of the end of a request's context
// shortly before WriteTimeout (answerMargin): the call is cancelled and the
// client answered 504, or its stream ends with an error event.
var errResponseDeadline error = &runtime.CallError{Kind: runtime.KindTimeout,
	Message: "the response reached its time limit (WriteTimeout) and was cut"}

// answerMargin is how long before WriteTimeout a request's context ends,
// so that the gateway can still write why: a tenth of it, at most 5 s.
func answerMargin(writeTimeout time.Duration) time.Duration {
	return min(writeTimeout/10, 5*time.Second)
}

// ended returns the status to log for a request whose context has ended
// before its answer: StatusClientClosedRequest when the client went away,
// 504 when the response reached its time limit, 503 when the shutdown's
// grace period ended; 0 while it runs.
func (x *exchange) ended() int {
	ctx := x.r.Context()
	switch {
	case ctx.Err() == nil:
		return 0
	case context.Cause(ctx) == errResponseDeadline:
		return http.StatusGatewayTimeout
	case context.Cause(ctx) == errShutdownCut:
		return http.StatusServiceUnavailable
	}
	return StatusClientClosedRequest
}

// cut records the status of a request whose client went away before its
// answer (ended), for the access log; false while the request runs, and
// for a request cut by its time limit or the shutdown, which is still
// answered (shutdownCut).
func (x *exchange) cut() bool {
	if x.ended() != StatusClientClosedRequest {
		return false
	}
	x.status = StatusClientClosedRequest
	return true
}

// readBody reads the request body within BodyTimeout and MaxBodyBytes. On
// failure it has answered (400, 408 or 413) and returns false.
func (x *exchange) readBody() ([]byte, bool) {
	// A compressed body is not decompressed (nor bounded by its
	// uncompressed size): it is refused for what it is, rather than as
	// JSON that is malformed at its first byte.
	for _, e := range x.r.Header.Values("Content-Encoding") {
		if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "identity") {
			x.fail(http.StatusBadRequest, errBadRequest, fmt.Sprintf("Content-Encoding %q: the request body must be sent uncompressed", e))
			return nil, false
		}
	}
	limit := x.s.opts.MaxBodyBytes
	if x.r.ContentLength > limit {
		x.fail(http.StatusRequestEntityTooLarge, errTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", limit))
		return nil, false
	}
	b, err := readAll(http.MaxBytesReader(x.ResponseWriter, x.r.Body, limit), x.r.ContentLength)
	if err != nil {
		if x.rpc {
			x.rpcID = requestID(bytes.NewReader(b))
		}
		var tooLarge *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.Is(err, errBodyBudget):
			x.s.refuseBody(x)
		case errors.As(err, &tooLarge):
			x.fail(http.StatusRequestEntityTooLarge, errTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", limit))
		case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
			x.fail(http.StatusRequestTimeout, errBodyTimeout, "request body not received in time")
		default:
			x.fail(http.StatusBadRequest, errBadRequest, "reading the request body: "+err.Error())
		}
		return nil, false
	}
	return b, true
}

// decodeJSON decodes the body into v, answering 400 with the position of a
// syntax error.
func (x *exchange) decodeJSON(b []byte, v any) bool {
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		msg := err.Error()
		switch {
		case errors.As(err, &se):
			msg = fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)
		case errors.As(err, &te):
			msg = fmt.Sprintf("field %s: expected %s, got JSON %s (at byte %d)", te.Field, te.Type, te.Value, te.Offset)
		}
		x.fail(http.StatusBadRequest, errBadRequest, msg)
		return false
	}
	return true
}

// writeJSON answers status with v as JSON.
func (x *exchange) writeJSON(status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		x.fail(http.StatusInternalServerError, "internal", "encoding the response: "+err.Error())
		return
	}
	x.Header().Set("Content-Type", "application/json")
	x.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	x.WriteHeader(status)
	_, _ = x.Write(append(b, '\n'))
}

// fail answers an error in the route's own error format.
func (x *exchange) fail(status int, code errCode, msg string) {
	x.failWith(ownError(status, string(code), "", msg))
}

// failErr answers the error of a call: the status StatusOf maps it to,
// Retry-After when known, and the layer that raised it. A client that went
// away gets nothing (499 is logged).
func (x *exchange) failErr(err error) {
	if x.cut() {
		return
	}
	err = x.shutdownCut(err)
	x.err = err
	status, retryAfter := StatusOf(err)
	SetRetryAfter(x.Header(), retryAfter)
	if storeRefused(err) || runtime.KindOf(err) == string(runtime.KindPermanent) || runtime.Classify(err) == runtime.ClassInDoubt {
		// A failure that asking again repeats (a store that refuses, an
		// upstream that refused the gateway's key or model id): a 5xx the
		// OpenAI and Anthropic SDKs would send again. And a call in doubt
		// (409), which may have made its effect and is not to be sent
		// again before checking: the SDKs retry a 409 too.
		x.Header().Set("x-should-retry", "false")
	}
	e := callError(x.api, status, err)
	if x.param != nil && e.param != "" {
		e.param = x.param(e.param)
	}
	var u *wire.Unhonoured
	if x.param != nil && errors.As(err, &u) {
		// A field the model cannot honour, named as the route spells it
		// (reasoning.effort on the Responses API), without a remedy: the
		// remedy names a field of the Messages API (thinking), which an
		// OpenAI route has none for.
		f := x.param(u.Field)
		if f == "" {
			f = u.Field
		}
		e.msg = strings.Replace(e.msg, u.Error(), u.Named(f, false), 1)
		e.param = f
	}
	x.failWith(e)
}

// shutdownCut returns errShutdownCut for the error of a call the end of
// the shutdown's grace period cancelled, errResponseDeadline for one its
// time limit cancelled (its connection is still open, so the client is
// told why), else err.
func (x *exchange) shutdownCut(err error) error {
	switch x.ended() {
	case http.StatusServiceUnavailable:
		return errShutdownCut
	case http.StatusGatewayTimeout:
		return errResponseDeadline
	}
	return err
}

// outlastCut returns the context of x's request for a handler that
// answers the request cut by the shutdown itself, after the request's own
// context has ended: it ends with it, except at the shutdown cut
// (errShutdownCut), when it ends only once the connections still open
// close (a second later at most), so that the handler writes the answers
// of the calls the cut cancelled. The MCP server's handler of a POST ends
// with its request's context, and would otherwise leave a cut call's event
// stream without its answer. When the connections close, the request also
// lets go of its generation: what still holds it then is a call running
// on (Server.stillClosing), not a handler about to return. The last
// holder of a generation a reload retired leaves it to close (its
// pipeline, its MCP upstream sessions, each waiting for its server to let
// go) on a goroutine of its own (generation.release): the close must not
// hold the shutdown before it closes the connections.
func (x *exchange) outlastCut() (context.Context, func()) {
	ctx := x.r.Context()
	held, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stopCut := context.AfterFunc(ctx, func() {
		if cause := context.Cause(ctx); cause != errShutdownCut {
			cancel(cause)
		}
	})
	stopHangup := x.s.hangups.add(func() {
		cancel(errShutdownCut)
		x.release()
	})
	return held, func() {
		stopCut()
		stopHangup()
		cancel(nil)
	}
}

// release lets go of x's generation, unless x let go of it already.
func (x *exchange) release() { x.released.Do(x.g.release) }

// hangups are the funcs to call when the connections still open after the
// shutdown cut close.
type hangups struct {
	mu   sync.Mutex
	next uint64
	fns  map[uint64]func()
	done bool
}

// add registers f, called at once when the connections have closed, and
// returns the func that removes it.
func (h *hangups) add(f func()) func() {
	h.mu.Lock()
	if h.done {
		h.mu.Unlock()
		f()
		return func() {}
	}
	if h.fns == nil {
		h.fns = map[uint64]func(){}
	}
	id := h.next
	h.next++
	h.fns[id] = f
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		delete(h.fns, id)
	}
}

// hangUp calls the funcs registered, before it returns.
func (h *hangups) hangUp() {
	h.mu.Lock()
	h.done = true
	fns := h.fns
	h.fns = nil
	h.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// clientMessage is the text of a call's error for the client. A failure
// to reach an upstream names what failed (the provider and model, refused,
// reset, timed out) but not the transport's own text, which holds the
// upstream's URL, its address and the gateway's DNS resolver: where the
// gateway's network leads is not the client's to learn. Nor does an
// upstream's refusal of the gateway itself (its key, its account's credit,
// its project's permissions: 401, 402, 403, 407) pass on the upstream's
// text, which describes the gateway's credentials (a provider echoes a
// hint of the key it was sent); the client learns the status. Nor does a
// store's failure a layer passes on (*runtime.StoreError) pass on its text,
// a driver's words that name the store's address, user and database, or
// say how its connection broke: the client learns that the layer's store
// is unavailable. The access log keeps the whole error. An error whose
// text a layer masked (pii or redact outside the failing layer, a DNS
// server's address masked as an IP) has its wrapped error's message
// withheld so, then masked as its text was.
func clientMessage(err error) string {
	msg := err.Error()
	var causes, withheld []string
	var walk func(error)
	walk = func(e error) {
		switch e := e.(type) {
		case nil:
			return
		case *url.Error, *net.OpError, *net.DNSError:
			causes, withheld = append(causes, e.Error()), append(withheld, transportWithheld)
			return
		case *runtime.StoreError:
			w := storeWithheld
			if e.NotRun && runtime.PermanentStoreError(e.Err) {
				w = storeRefusedWithheld
			}
			causes, withheld = append(causes, e.Error()), append(withheld, w)
			return
		case maskedText:
			if inner := errors.Unwrap(e); inner != nil {
				if said := clientMessage(inner); said != inner.Error() {
					causes, withheld = append(causes, e.Error()), append(withheld, e.MaskText(said))
				}
				return
			}
		case *runtime.CallError:
			if e.Layer == "" && e.Err != nil && refusesTheGateway(e.Status) {
				causes = append(causes, e.Err.Error())
				withheld = append(withheld, fmt.Sprintf("the upstream refused the gateway's credentials (%d %s) %s",
					e.Status, http.StatusText(e.Status), transportWithheld))
				return
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	for i, cause := range causes {
		at := strings.Index(msg, cause)
		if at < 0 {
			// The text is not where it was expected: fail closed.
			return "the upstream could not be reached: " + transportWithheld
		}
		w := withheld[i]
		if w == storeWithheld && strings.Contains(msg[:at], "store unavailable") {
			// The layer said so already ("rate limit store unavailable;
			// the call did not run: ...").
			w = transportWithheld
		}
		msg = msg[:at] + w + msg[at+len(cause):]
	}
	return msg
}

// maskedText is an error whose text a layer masked (pii, redact): MaskText
// masks another text so.
type maskedText interface {
	error
	MaskText(string) string
}

// refusesTheGateway reports whether an upstream's status refuses the
// gateway's own credentials or account rather than the request.
func refusesTheGateway(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusPaymentRequired, http.StatusForbidden, http.StatusProxyAuthRequired:
		return true
	}
	return false
}

// transportWithheld stands for the transport's text in a client message.
const transportWithheld = "(the cause is in the gateway's log)"

// storeWithheld stands for a store's text in a client message.
const storeWithheld = "store unavailable " + transportWithheld

// storeRefusedWithheld stands for the text of a store's refusal that
// asking again would meet as well (storeRefused) in a client message.
const storeRefusedWithheld = "the store refused the gateway's request and will refuse it again until the store is mended; do not retry " + transportWithheld

// failWith answers e in the route's own error format.
func (x *exchange) failWith(e errDoc) {
	if x.rpc {
		x.writeJSON(e.status, rpcErrorBody(x.rpcID, e.status, e.kind, e.layer, e.msg))
		return
	}
	x.writeJSON(e.status, e.body(x.api))
}

// errorBody is the error document of API a for an error of the gateway's
// own (see errDoc.body).
func errorBody(a api, status int, code, layer, msg string) any {
	return ownError(status, code, layer, msg).body(a)
}

func openAIErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusRequestTimeout, http.StatusMisdirectedRequest,
		http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusUnsupportedMediaType:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "insufficient_quota"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	return "server_error"
}

func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestTimeout, http.StatusMisdirectedRequest,
		http.StatusMethodNotAllowed, http.StatusNotAcceptable, http.StatusUnsupportedMediaType:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	return "api_error"
}

// readAll reads r to its end, sized for a body of n bytes when n is known.
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n <= 0 || n > 64<<20 {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, n+1)
	for {
		m, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}
