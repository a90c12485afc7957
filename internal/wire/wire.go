// Package wire holds what the provider clients share: the classification of
// a failed exchange into a *runtime.CallError (HTTP status, Retry-After,
// stream error events, connection failures), the scrubbing that keeps an
// API key out of every message, and the JSON append encoders that the
// clients write their request bodies with and the gateway (serve) its
// responses.
package wire

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentc-dev/agentc/internal/credential"
	"github.com/agentc-dev/agentc/runtime"
)

// Call names one model call for messages: "openai gpt-4.1-mini".
type Call struct {
	// Provider and Model name the client ("openai", "gpt-4.1-mini").
	Provider, Model string
	// Key is the API key, scrubbed from every message.
	Key string
}

// scrub replaces the key in s, and each tail of it a server may echo
// without its prefix (credential.KeyForms).
func (c Call) scrub(s string) string {
	if len(c.Key) < 4 {
		return s
	}
	for _, form := range credential.KeyForms(c.Key) {
		s = strings.ReplaceAll(s, form, "[redacted]")
	}
	return s
}

// Error is an error of the provider's SDK behind a message that names the
// call and holds no key; errors.As still finds the SDK's error through it.
type Error struct {
	msg    string
	err    error
	detail *Detail
}

// Body is what a provider's error body or stream error event says of a
// failure: OpenAI's error.type, error.code and error.param, Anthropic's
// error.type, and the message ("" when absent). Code is an HTTP status in
// digits where a server sends a number in its place (OpenRouter, vLLM).
type Body struct {
	Type, Code, Param, Message string
}

// class is what the failure is classified by: the code when there is one
// (it says more than OpenAI's type: context_length_exceeded), else the
// type.
func (b Body) class() string {
	if b.Code != "" {
		return b.Code
	}
	return b.Type
}

// Detail is a provider's own account of a failed call, as its error body
// or error event gave it, scrubbed of the key: what a client of the same
// API acts on (OpenAI's code, type and param; Anthropic's error type), and
// the well-known failures any client's API has a word for.
type Detail struct {
	// Provider is the client's provider: "openai" (the API, or a server
	// that speaks it) or "anthropic".
	Provider string
	// Type, Code and Param are the body's; Code is "" where the body's
	// is a number (an HTTP status, not a code).
	Type, Code, Param string
	// ContextLength reports an error that says the request is longer than
	// the model's context.
	ContextLength bool
	// Overloaded reports a provider that said it is overloaded
	// (Anthropic's overloaded_error, its 529; OpenAI's 503).
	Overloaded bool
}

// DetailOf returns the provider's account of the failed call err holds
// (its first, when err joins several), or nil when no provider client
// classified it from an error body or event.
func DetailOf(err error) *Detail {
	var e *Error
	if errors.As(err, &e) {
		return e.detail
	}
	return nil
}

// detail is b's Detail for a failure of the given status (0 for a stream's
// error event).
func (c Call) detail(status int, b Body) *Detail {
	d := &Detail{Provider: c.Provider, Type: c.scrub(b.Type), Param: c.scrub(b.Param),
		ContextLength: contextLength(b.class(), b.Message)}
	if n, err := strconv.Atoi(b.Code); err != nil {
		d.Code = c.scrub(b.Code)
	} else if status == 0 {
		status = n
	}
	d.Overloaded = status == 529 || status == http.StatusServiceUnavailable || strings.Contains(strings.ToLower(b.Type), "overloaded")
	return d
}

// Error returns the scrubbed message.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the SDK's error.
func (e *Error) Unwrap() error { return e.err }

func (c Call) wrap(err error, format string, args ...any) *Error {
	return &Error{msg: c.scrub(fmt.Sprintf(format, args...)), err: err}
}

// HTTP classifies an error response: 429 is rate limited; 408, 409, 425,
// 5xx (Anthropic's 529 among them) are transient; other 4xx are permanent.
// The status decides the kind, and what the gateway answers its client;
// an x-should-retry header is the provider's word on trying the same
// provider again, carried as the error's Hint (runtime.RetriesSame):
// "false" stops a retry of the same model, "true" permits one of a
// permanent failure, and neither changes the kind, so a 429 stays rate
// limited and a 5xx falls over to another provider. Any error about the
// context length is permanent, whatever the header. A failure that may be
// retried carries the delay of retry-after-ms or retry-after. A refusal of
// the provider's own (401, 402, 403, 404, and a 429 or error of type
// insufficient_quota or billing_error: an account out of credit, which
// waiting does not cure) is permanent and marked runtime.ProviderRefused,
// so that a fallback tries its next model. b is what the body says; the
// error carries it as a Detail (DetailOf).
func (c Call) HTTP(err error, status int, h http.Header, b Body) *runtime.CallError {
	apiType, apiMessage := b.class(), b.Message
	ce := &runtime.CallError{Status: status, Kind: statusKind(status)}
	refused := providerRefusal(status, apiType)
	if refused {
		ce.Kind = runtime.KindPermanent
	}
	switch h.Get("X-Should-Retry") {
	case "true":
		ce.Hint = runtime.RetryYes
	case "false":
		ce.Hint = runtime.RetryNo
	}
	if contextLength(apiType, apiMessage) {
		ce.Kind, ce.Hint, refused = runtime.KindPermanent, runtime.RetryUnsaid, false
	}
	if ce.Kind != runtime.KindPermanent || ce.Hint == runtime.RetryYes {
		ce.RetryAfter = RetryAfter(h, time.Now())
	}
	text := strings.TrimSpace(strconv.Itoa(status) + " " + http.StatusText(status))
	if status == 529 {
		text = "529 Overloaded"
	}
	detail := apiMessage
	if apiType != "" {
		detail = strings.TrimSpace(apiType + ": " + apiMessage)
	}
	if detail != "" {
		text += ": " + detail
	}
	we := c.wrap(err, "%s %s: %s", c.Provider, c.Model, text)
	we.detail = c.detail(status, b)
	ce.Err = we
	if refused && ce.Kind == runtime.KindPermanent {
		ce.Err = runtime.ProviderRefused(ce.Err)
	}
	return ce
}

// providerRefusal reports a refusal of the provider's own, not of the
// request: the key, the account's permissions or credit, a model it does
// not serve.
func providerRefusal(status int, apiType string) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusPaymentRequired, http.StatusForbidden, http.StatusNotFound:
		return true
	}
	return refusalType(apiType)
}

// refusalType reports an error type (or code) that says the account cannot
// be served: OpenAI's insufficient_quota, Anthropic's billing_error.
func refusalType(apiType string) bool {
	t := strings.ToLower(apiType)
	return strings.Contains(t, "insufficient_quota") || strings.Contains(t, "billing_error")
}

func statusKind(status int) runtime.ErrorKind {
	switch {
	case status == http.StatusTooManyRequests:
		return runtime.KindRateLimited
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooEarly, status >= 500:
		return runtime.KindTransient
	case status >= 400:
		return runtime.KindPermanent
	}
	return runtime.KindTransient
}

func contextLength(apiType, msg string) bool {
	s := strings.ToLower(apiType + " " + msg)
	for _, p := range []string{"context_length_exceeded", "context length", "context window", "prompt is too long", "maximum context", "too many tokens", "exceed context limit"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// MaxRetryAfter is the longest delay RetryAfter returns: a response may ask
// for any (20 digits of seconds, a date thousands of years ahead), and a
// longer one is read as this one, never as no delay.
const MaxRetryAfter = 24 * time.Hour

// RetryAfter returns the delay an HTTP response asks for: retry-after-ms
// (milliseconds), else retry-after (seconds, or an HTTP date), at most
// MaxRetryAfter; 0 when neither holds a usable value.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := parseDelay(v); err == nil && ms > 0 {
			return capDelay(ms, time.Millisecond)
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := parseDelay(v); err == nil {
			if s > 0 {
				return capDelay(s, time.Second)
			}
			return 0
		}
		if t, err := http.ParseTime(v); err == nil && t.After(now) {
			return min(t.Sub(now), MaxRetryAfter)
		}
	}
	return 0
}

// parseDelay is the number v, +Inf for a number too large for a float64.
func parseDelay(v string) (float64, error) {
	n, err := strconv.ParseFloat(v, 64)
	if errors.Is(err, strconv.ErrRange) {
		return n, nil
	}
	return n, err
}

// capDelay is n units, at most MaxRetryAfter (n > 0; +Inf is the most).
func capDelay(n float64, unit time.Duration) time.Duration {
	if n >= float64(MaxRetryAfter/unit) {
		return MaxRetryAfter
	}
	return time.Duration(n * float64(unit))
}

// Event classifies an error event of the stream (OpenAI's `{"error": ...}`
// chunk, Anthropic's `event: error`), by the provider's error type, or by
// an HTTP status in its place (OpenRouter's and vLLM's numeric error code:
// "429", "502"). After deltas is the number of deltas already delivered: a
// failure after the first is a mid-stream failure, which the runtime never
// retries (the first-delta commit rule); the message says so. The error
// carries b as a Detail (DetailOf).
func (c Call) Event(err error, b Body, afterDeltas int) *runtime.CallError {
	apiType, apiMessage := b.class(), b.Message
	kind := eventKind(apiType)
	if contextLength(apiType, apiMessage) {
		kind = runtime.KindPermanent
	}
	detail := strings.TrimSpace(apiMessage)
	if apiType != "" {
		detail = strings.TrimSpace(strings.TrimSuffix(apiType+": "+apiMessage, ": "))
	}
	where := "stream error before any output"
	if afterDeltas > 0 {
		where = fmt.Sprintf("stream failed mid-stream after %d deltas", afterDeltas)
	}
	we := c.wrap(err, "%s %s: %s: %s", c.Provider, c.Model, where, detail)
	we.detail = c.detail(0, b)
	ce := &runtime.CallError{Kind: kind, Err: we}
	if eventRefusal(apiType) && !contextLength(apiType, apiMessage) {
		ce.Kind = runtime.KindPermanent
		ce.Err = runtime.ProviderRefused(ce.Err)
	}
	return ce
}

// eventRefusal reports an error event of the provider's own refusal (see
// providerRefusal): by its type, or by an HTTP status in its place.
func eventRefusal(apiType string) bool {
	if status, err := strconv.Atoi(apiType); err == nil {
		return providerRefusal(status, "")
	}
	t := strings.ToLower(apiType)
	return refusalType(t) || strings.Contains(t, "authentication") || strings.Contains(t, "permission") || strings.Contains(t, "not_found")
}

func eventKind(apiType string) runtime.ErrorKind {
	if status, err := strconv.Atoi(apiType); err == nil && status >= 400 && status < 600 {
		return statusKind(status)
	}
	t := strings.ToLower(apiType)
	switch {
	case strings.Contains(t, "rate_limit"):
		return runtime.KindRateLimited
	case strings.Contains(t, "invalid_request"), strings.Contains(t, "authentication"), strings.Contains(t, "permission"),
		strings.Contains(t, "not_found"), strings.Contains(t, "request_too_large"), strings.Contains(t, "context_length"):
		return runtime.KindPermanent
	}
	return runtime.KindTransient
}

// Transport classifies a failure without an HTTP response: the caller's
// context ending returns ctx's error as it is (the retry layer tells the
// caller's cancellation from its own attempt timeout); a timeout is
// KindTimeout; an event over MaxEventBytes, a response over
// MaxResponseBytes is permanent; a redirect to another origin
// (ErrOtherOrigin) is permanent and marked runtime.ProviderRefused; a reset, refused
// or dropped connection, and anything else, is transient.
func (c Call) Transport(ctx context.Context, err error, afterDeltas int) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	kind := runtime.KindTransient
	// The same upstream sends the same answer again: a retry would only
	// read as much again.
	if errors.Is(err, ErrEventTooLarge) {
		return &runtime.CallError{Kind: runtime.KindPermanent, Err: c.wrap(err, "%s %s: stream refused after %d deltas: %v", c.Provider, c.Model, afterDeltas, err)}
	}
	if errors.Is(err, ErrResponseTooLarge) {
		return &runtime.CallError{Kind: runtime.KindPermanent, Err: c.wrap(err, "%s %s: response refused: %v", c.Provider, c.Model, err)}
	}
	// An upstream that redirects elsewhere does so again: the next model
	// of a fallback is tried, as after the provider's own refusal.
	if errors.Is(err, ErrOtherOrigin) {
		return &runtime.CallError{Kind: runtime.KindPermanent, Err: runtime.ProviderRefused(c.wrap(err, "%s %s: request refused: %v", c.Provider, c.Model, err))}
	}
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		kind = runtime.KindTimeout
	}
	what := "request failed"
	switch {
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		what = "connection reset"
	case errors.Is(err, syscall.ECONNREFUSED):
		what = "connection refused"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		what = "connection dropped"
	case kind == runtime.KindTimeout:
		what = "timed out"
	}
	if afterDeltas > 0 {
		what += fmt.Sprintf(" mid-stream after %d deltas", afterDeltas)
	}
	return &runtime.CallError{Kind: kind, Err: c.wrap(err, "%s %s: %s: %v", c.Provider, c.Model, what, err)}
}

// Truncated is a stream that ended without the provider's terminal event:
// the connection closed cleanly before the response was complete.
func (c Call) Truncated(afterDeltas int) error {
	return &runtime.CallError{Kind: runtime.KindTransient, Err: c.wrap(nil,
		"%s %s: the stream ended before the response was complete (after %d deltas)", c.Provider, c.Model, afterDeltas)}
}

// Accepted returns err, the failure of a call the upstream accepted (it
// answered 2xx) and that then failed before any delta: a stream cut before
// its first event, one whose event cannot be read, a body that is no
// stream (NotAStream). The provider has read, and bills, the prompt: a
// *runtime.CallError whose Usage reports no input is given
// runtime.EstimateInput(req) as its input, which the chat terminal
// charges. A failure after a delta is estimated by the chat terminal from
// what arrived; an error event of the stream is the upstream's own account
// of the failure, and the usage it announced is what it bills.
func Accepted(err error, req *runtime.ChatRequest, afterDeltas int) error {
	var ce *runtime.CallError
	if afterDeltas == 0 && errors.As(err, &ce) && ce.Usage.InputTokens == 0 {
		ce.Usage.Add(runtime.EstimateInput(req))
	}
	return err
}

// EventStream reports whether h, the header of a 2xx answer to a streaming
// request, may be read as the stream of server-sent events asked for: its
// Content-Type is not JSON (application/json, or a type ending +json),
// which a compatible server that ignores "stream": true answers with
// (NotAStream). Any other type is read as the stream: text/event-stream
// in any spelling, none, or another a server names by mistake (Go's
// server sniffs text/plain for a handler that sets none), whose body,
// when it holds no events, ends as a stream cut before its first.
func EventStream(h http.Header) bool {
	mt, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt != "application/json" && !strings.HasSuffix(mt, "+json")
}

// maxContentType is the most of a Content-Type a message quotes.
const maxContentType = 100

// MaxWholeBody is the most of a body that is no stream (NotAStream) read
// for the usage it reports; the rest is not read.
const MaxWholeBody = 1 << 20

// ReadWhole decodes into v the JSON of body, a whole answer in place of a
// stream (NotAStream), read up to MaxWholeBody, and closes body. What does
// not decode leaves v as it is.
func ReadWhole(body io.ReadCloser, v any) {
	defer body.Close()
	b, _ := io.ReadAll(io.LimitReader(body, MaxWholeBody))
	_ = json.Unmarshal(b, v)
}

// NotAStream is the failure of a streaming request the upstream answered
// 2xx with a body of contentType, JSON, that is no stream of server-sent
// events (a compatible server that ignores "stream": true answers the
// whole response as JSON: EventStream). It is permanent: the upstream
// answers the same way again. usage is what the body reports the call
// billed; none reported, the input is estimated (Accepted).
func (c Call) NotAStream(contentType string, usage runtime.Usage) *runtime.CallError {
	if len(contentType) > maxContentType {
		contentType = strings.ToValidUTF8(contentType[:maxContentType], "") + "…"
	}
	return &runtime.CallError{Kind: runtime.KindPermanent, Usage: usage, Err: c.wrap(nil,
		"%s %s: the upstream answered the streaming request with %q, not a stream of server-sent events (text/event-stream)", c.Provider, c.Model, contentType)}
}

// Unhonoured is a field of a request a model's provider cannot honour,
// refused before the request is sent: Field as the runtime's request
// names it (OpenAI's Chat Completions name: reasoning_effort), its Value,
// Why it cannot be honoured, and Remedy, what the request may ask instead
// ("" none). A route of another API names the field its own way (Named).
type Unhonoured struct {
	Field, Value, Why, Remedy string
}

func (u *Unhonoured) Error() string { return u.Named(u.Field, true) }

// Named is u's message with the field named field, and its remedy when
// remedy is set (a route that names the field its own way may have no
// field for the remedy).
func (u *Unhonoured) Named(field string, remedy bool) string {
	s := fmt.Sprintf("the request sets %s %q, which %s", field, u.Value, u.Why)
	if remedy && u.Remedy != "" {
		s += " (" + u.Remedy + ")"
	}
	return s
}

// Base64 returns the standard base64 encoding of b.
func Base64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// ToolCallSlab hands out the ToolCalls slices of a stream's deltas from
// shared backing arrays, so that a stream of tool-call fragments allocates
// once per slabSize fragments instead of once per delta. Each slice is
// capped at its length: a consumer that keeps or appends to one never
// touches another's elements. The zero value is ready to use; it is not
// safe for concurrent use (one per stream).
type ToolCallSlab struct{ free []runtime.ToolCallDelta }

const slabSize = 16

// Take returns a slice of n zeroed elements.
func (s *ToolCallSlab) Take(n int) []runtime.ToolCallDelta {
	if len(s.free) < n {
		s.free = make([]runtime.ToolCallDelta, max(n, slabSize))
	}
	out := s.free[:n:n]
	s.free = s.free[n:]
	return out
}

// Drain limits: a finished response's rest is read for at most drainWait
// (100 ms) and drainLimit bytes; Release waits for it at most drainGrace
// (2 ms). The two waits are the defaults unless a test set them
// (SetDrainWait, SetDrainGrace).
const (
	drainLimit        = 64 << 10
	defaultDrainWait  = 100 * time.Millisecond
	defaultDrainGrace = 2 * time.Millisecond
)

var drainWait, drainGrace atomic.Int64

func orDefault(v *atomic.Int64, def time.Duration) time.Duration {
	if d := v.Load(); d > 0 {
		return time.Duration(d)
	}
	return def
}

// SetDrainGrace sets how long Release waits for the drain and returns a
// function that restores the previous grace. A test that counts
// connections sets a grace far above any scheduling delay, so that a
// complete response's connection is back in the pool before its next call
// even on a loaded machine.
func SetDrainGrace(d time.Duration) (restore func()) {
	prev := drainGrace.Swap(int64(d))
	return func() { drainGrace.Store(prev) }
}

// SetDrainWait sets how long Drain reads the rest of a response and returns
// a function that restores the previous wait. Tests set a wait far above
// any scheduling delay, so that whether a caller waited for the drain is
// told apart by a margin no loaded machine reaches.
func SetDrainWait(d time.Duration) (restore func()) {
	prev := drainWait.Swap(int64(d))
	return func() { drainWait.Store(prev) }
}

// Drain reads what is left of a response whose stream has ended (at
// OpenAI's [DONE] that is normally the end of the chunked encoding, already
// on its way) and closes it, so that its connection goes back to the pool:
// net/http discards a connection whose response body is closed before its
// end, and the next call pays a new connection. A server that does not end
// the response within drainWait or drainLimit bytes, or ctx ending first,
// has its connection closed.
func Drain(ctx context.Context, body io.ReadCloser) {
	t := time.AfterFunc(orDefault(&drainWait, defaultDrainWait), func() { _ = body.Close() })
	stop := context.AfterFunc(ctx, func() { _ = body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(body, drainLimit))
	t.Stop()
	stop()
	_ = body.Close()
}

// Release hands a finished response's body to a goroutine that drains and
// closes it (Drain) and waits for that at most drainGrace, so that the
// caller returns right after its last delta even when the server holds the
// response open: the rest of a normal response is already read, and its
// connection is back in the pool before the next call, while a held one is
// left to the goroutine. The body is the goroutine's from then on: the
// caller must not close it. When ctx is done the body is closed at once.
func Release(ctx context.Context, body io.ReadCloser) {
	if ctx.Err() != nil {
		_ = body.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Drain(ctx, body)
	}()
	t := time.NewTimer(orDefault(&drainGrace, defaultDrainGrace))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}
