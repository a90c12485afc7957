package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// Default bounds of what one chat request may hold (Options.MaxMessages,
// Options.MaxParts).
const (
	// DefaultMaxMessages is Anthropic's documented limit of the messages
	// of one request (OpenAI's API refuses more than 2,048): no provider
	// serves a longer conversation.
	DefaultMaxMessages = 100_000
	// DefaultMaxParts bounds the content parts, blocks and tool calls of
	// one request, as many as the messages: a conversation that long
	// passes every model's context window.
	DefaultMaxParts = 100_000
)

// DefaultMaxInFlight is the default of Options.MaxInFlight. In flight
// are the arrival rate times the time a request takes (a streamed answer
// lasts seconds): 1,024 serve 100 calls a second of 10 s each with room to
// spare. Each may hold what its body decodes to (about ten times the
// body: 42 MB for a body of 4 MiB at the limit of messages): what they
// hold together is bounded by MaxInFlightBytes.
const DefaultMaxInFlight = 1024

// DefaultMaxInFlightBytes is the default of Options.MaxInFlightBytes: 64
// bodies at the default MaxBodyBytes, which hold some 0.8 GB while their
// calls run (about three times the body) and some 2.7 GB at worst while
// they are decoded (about ten times).
const DefaultMaxInFlightBytes = 256 << 20

// bounded reports whether a request of route counts against MaxInFlight
// and MaxInFlightBytes: the routes that decode a body and call upstreams.
// An MCP session's event stream (GET /mcp), open for the session's life,
// and its end (DELETE) do not; nor do the models routes and the probes.
func bounded(route string, r *http.Request) bool {
	switch route {
	case "chat_completions", "messages", "count_tokens", "responses", "responses_compact":
		return true
	case "mcp":
		return r.Method == http.MethodPost
	}
	return false
}

// takeSlot admits a request under MaxInFlight, or answers a 503 with
// Retry-After in the route's format and returns false: a request is never
// queued, so a burst cannot hold more than the bound.
func (s *Server) takeSlot(x *exchange) bool {
	if s.slots == nil {
		return true
	}
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	x.overloaded(fmt.Errorf("over the limit of %d requests in flight (MaxInFlight)", cap(s.slots)),
		fmt.Sprintf("the gateway is serving its limit of %d requests at once", cap(s.slots)))
	return false
}

// takeTenantSlot admits a request under its tenant's share of the calls
// in flight (Options.MaxInFlightPerTenant) where the generation's keys
// name more than one tenant, or answers as takeSlot does and returns
// false.
func (s *Server) takeTenantSlot(x *exchange) bool {
	limit := s.opts.MaxInFlightPerTenant
	if limit <= 0 || x.g.tenants < 2 {
		return true
	}
	tenant := x.caller.tenant
	s.tenantMu.Lock()
	n := s.tenantCalls[tenant]
	if n < limit {
		s.tenantCalls[tenant] = n + 1
	}
	s.tenantMu.Unlock()
	if n >= limit {
		x.overloaded(fmt.Errorf("tenant %q is over its limit of %d requests in flight (MaxInFlightPerTenant)", tenant, limit),
			fmt.Sprintf("tenant %q is served its limit of %d requests at once", tenant, limit))
		return false
	}
	x.tenantSlot = true
	return true
}

// leaveTenantSlot ends a request admitted by takeTenantSlot.
func (s *Server) leaveTenantSlot(x *exchange) {
	if !x.tenantSlot {
		return
	}
	tenant := x.caller.tenant
	s.tenantMu.Lock()
	if s.tenantCalls[tenant]--; s.tenantCalls[tenant] <= 0 {
		delete(s.tenantCalls, tenant)
	}
	s.tenantMu.Unlock()
}

// leaveSlot ends a request admitted by takeSlot.
func (s *Server) leaveSlot() {
	if s.slots != nil {
		<-s.slots
	}
}

// overloaded answers a request refused by a bound of the gateway's own
// load: a 503 with Retry-After, in the route's format.
func (x *exchange) overloaded(err error, msg string) {
	x.err = err
	SetRetryAfter(x.Header(), time.Second)
	x.fail(http.StatusServiceUnavailable, errOverloaded, msg+"; retry the request")
}

// errBodyBudget is the error of a body read past MaxInFlightBytes.
var errBodyBudget = errors.New("over the limit of request body bytes in flight (MaxInFlightBytes)")

// takeBody charges the request's body to MaxInFlightBytes: a body of known
// size (Content-Length) at once, refused with a 503 as takeSlot does; one
// of unknown size (chunked) as it is read, its read failing with
// errBodyBudget past the bound. What was charged is returned by leaveBody,
// which the caller defers. Without a bound the bytes are still counted,
// for the metric of the bytes in flight.
func (s *Server) takeBody(x *exchange) bool {
	r := x.r
	switch {
	case r.ContentLength > s.opts.MaxBodyBytes:
		// Refused with a 413 unread.
	case r.ContentLength > 0:
		if !s.chargeBody(x, r.ContentLength) {
			s.refuseBody(x)
			return false
		}
	case r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody:
		r.Body = &budgetBody{ReadCloser: r.Body, x: x}
	}
	return true
}

// chargeBody adds n bytes to the bodies in flight, and to those of the
// caller's tenant where the keys name more than one, or nothing and
// returns false when that would pass MaxInFlightBytes or
// MaxInFlightBytesPerTenant. It takes no lock but at a request's first
// charge (tenantShare): a chunked body is charged at every read, and the
// reads of every tenant's requests would wait for one another.
func (s *Server) chargeBody(x *exchange, n int64) bool {
	if !chargeWithin(&s.bodyBytes, n, s.opts.MaxInFlightBytes) {
		return false
	}
	if limit := s.opts.MaxInFlightBytesPerTenant; limit > 0 && x.g.tenants > 1 {
		if !chargeWithin(&s.tenantShare(x).bytes, n, limit) {
			s.bodyBytes.Add(-n)
			x.tenantBytesOver = true
			return false
		}
		x.tenantBytes += n
	}
	x.bodyBytes += n
	return true
}

// chargeWithin adds n to c unless that would take it past limit (no
// bound: limit 0 or negative), and reports whether it did. A charge
// refused is never added, even for a moment: another request's charge
// is refused only when the bytes held leave it no room.
func chargeWithin(c *atomic.Int64, n, limit int64) bool {
	if limit <= 0 {
		c.Add(n)
		return true
	}
	for {
		v := c.Load()
		if v+n > limit {
			return false
		}
		if c.CompareAndSwap(v, v+n) {
			return true
		}
	}
}

// tenantBody is a tenant's share of the bytes of request bodies in flight
// (MaxInFlightBytesPerTenant).
type tenantBody struct {
	bytes atomic.Int64
	// refs counts the requests holding the share, under Server.tenantMu:
	// the last to leave drops it.
	refs int
}

// tenantShare returns the share of x's tenant, taking it for x at its
// first charge; leaveBody returns it.
func (s *Server) tenantShare(x *exchange) *tenantBody {
	if x.tenantBody == nil {
		s.tenantMu.Lock()
		t := s.tenantBytes[x.caller.tenant]
		if t == nil {
			t = &tenantBody{}
			s.tenantBytes[x.caller.tenant] = t
		}
		t.refs++
		s.tenantMu.Unlock()
		x.tenantBody = t
	}
	return x.tenantBody
}

// refuseBody answers a request whose body would pass MaxInFlightBytes, or
// its tenant's MaxInFlightBytesPerTenant.
func (s *Server) refuseBody(x *exchange) {
	if x.tenantBytesOver {
		limit := s.opts.MaxInFlightBytesPerTenant
		x.overloaded(fmt.Errorf("tenant %q is over its limit of %d bytes of request bodies in flight (MaxInFlightBytesPerTenant)", x.caller.tenant, limit),
			fmt.Sprintf("tenant %q is holding its limit of %d bytes of request bodies at once", x.caller.tenant, limit))
		return
	}
	limit := s.opts.MaxInFlightBytes
	x.overloaded(fmt.Errorf("over the limit of %d bytes of request bodies in flight (MaxInFlightBytes)", limit),
		fmt.Sprintf("the gateway is holding its limit of %d bytes of request bodies at once", limit))
}

// leaveBody returns what takeBody charged.
func (s *Server) leaveBody(x *exchange) {
	if x.bodyBytes != 0 {
		s.bodyBytes.Add(-x.bodyBytes)
		x.bodyBytes = 0
	}
	if t := x.tenantBody; t != nil {
		t.bytes.Add(-x.tenantBytes)
		s.tenantMu.Lock()
		if t.refs--; t.refs == 0 {
			delete(s.tenantBytes, x.caller.tenant)
		}
		s.tenantMu.Unlock()
		x.tenantBody, x.tenantBytes = nil, 0
	}
}

// budgetBody charges a body of unknown size to MaxInFlightBytes as it is
// read.
type budgetBody struct {
	io.ReadCloser
	x *exchange
}

func (b *budgetBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 && !b.x.s.chargeBody(b.x, int64(n)) {
		return 0, errBodyBudget
	}
	return n, err
}

// items are the messages and parts of a request body (countItems).
type items struct {
	messages, parts int
}

// countItems counts the messages of the well-formed request body, and
// their parts: the elements of each message's content and tool_calls,
// those of a content block's content (a tool result's blocks), and the
// system prompt's blocks; the items of a Responses request's input, and
// their content and output parts. It allocates nothing.
func countItems(body []byte) items {
	var n items
	c := fieldCheck{b: body}
	i := c.ws(0)
	if i >= len(body) || body[i] != '{' {
		return n
	}
	for k, val := c.member(c.ws(i + 1)); val >= 0; k, val = c.member(c.after(val)) {
		if body[val] != '[' {
			continue
		}
		switch string(unescaped(k)) {
		case "messages":
			c.elements(val, func(m int) {
				n.messages++
				n.parts += c.nested(m, func(k []byte) bool { return string(k) == "content" || string(k) == "tool_calls" }, 1)
			})
		case "system":
			n.parts += c.count(val)
		case "input":
			// The Responses API's items: a message's content, a function
			// call's output.
			c.elements(val, func(m int) {
				n.messages++
				n.parts += c.nested(m, func(k []byte) bool { return string(k) == "content" || string(k) == "output" }, 0)
			})
		}
	}
	return n
}

// arrayLen returns the number of elements of the well-formed JSON array
// raw (0 for another value).
func arrayLen(raw []byte) int {
	c := fieldCheck{b: raw}
	i := c.ws(0)
	if i >= len(raw) || raw[i] != '[' {
		return 0
	}
	return c.count(i)
}

// elements calls f with the offset of each object of the array at b[i].
func (c *fieldCheck) elements(i int, f func(int)) {
	for i = c.ws(i + 1); i < len(c.b) && c.b[i] != ']'; i = c.after(i) {
		if c.b[i] == '{' {
			f(i)
		}
	}
}

// count returns the number of elements of the array at b[i].
func (c *fieldCheck) count(i int) int {
	n := 0
	for i = c.ws(i + 1); i < len(c.b) && c.b[i] != ']'; i = c.after(i) {
		n++
	}
	return n
}

// nested returns the number of elements of the arrays that are members of
// the object at b[i] under a key match accepts, and, depth levels down, of
// their objects' content arrays.
func (c *fieldCheck) nested(i int, match func(key []byte) bool, depth int) int {
	n := 0
	for k, val := c.member(c.ws(i + 1)); val >= 0; k, val = c.member(c.after(val)) {
		if c.b[val] != '[' || !match(unescaped(k)) {
			continue
		}
		n += c.count(val)
		if depth > 0 {
			c.elements(val, func(e int) {
				n += c.nested(e, func(k []byte) bool { return string(k) == "content" }, depth-1)
			})
		}
	}
	return n
}

// readChat reads and decodes the body of a chat (or token count) request
// with decode and headers: the body within MaxBodyBytes, its messages and
// parts within MaxMessages and MaxParts, checked before it is decoded. On
// failure it has answered (400, 408, 413) and returns false.
func (s *Server) readChat(x *exchange, p *chatParams, decode func([]byte, *chatParams) error, headers func(http.Header, *chatParams) error) bool {
	body, ok := x.readBody()
	if !ok {
		return false
	}
	var err error
	// A malformed body is reported by the decoding, at its position.
	if json.Valid(body) {
		p.items = countItems(body)
		err = s.checkItems(p.items)
	}
	if err == nil {
		err = decode(body, p)
	}
	if err == nil && headers != nil {
		err = headers(x.r.Header, p)
	}
	if err != nil {
		x.fail(http.StatusBadRequest, errBadRequest, err.Error())
		return false
	}
	return true
}

// checkItems refuses a request over MaxMessages or MaxParts.
func (s *Server) checkItems(n items) error {
	if limit := s.opts.MaxMessages; limit > 0 && n.messages > limit {
		return fmt.Errorf("messages: %d messages, over the limit of %d per request", n.messages, limit)
	}
	if limit := s.opts.MaxParts; limit > 0 && n.parts > limit {
		return fmt.Errorf("messages: %d content parts, blocks and tool calls, over the limit of %d per request", n.parts, limit)
	}
	return nil
}

// jsonString decodes the JSON string raw (well-formed, quotes included):
// a string without escapes, control characters or invalid UTF-8 (most
// texts) is its inside, any other is decoded as json.Unmarshal does.
func jsonString(raw []byte) (string, error) {
	in := raw[1 : len(raw)-1]
	plain := utf8.Valid(in)
	for i := 0; plain && i < len(in); i++ {
		plain = in[i] >= 0x20 && in[i] != '\\' && in[i] != '"'
	}
	if plain {
		return string(in), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}
