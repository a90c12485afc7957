package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that gives a tools/call a progressToken is sent the progress
// the upstream reports for the call. The upstream is given a token of the
// proxy's own (one per call: the client's token means nothing to it, and
// two clients may use the same), and each notifications/progress it sends
// with that token is relayed to the client with the client's token. The
// upstream's message and numbers are data no layer of the tool chain read
// (redact, for one, reads the result only: a card number passes as a
// progress of 4111111111111111), so neither is relayed: the client gets
// the whole percent of the total reached (a total of 100), or, from an
// upstream that gives no total or a progress beyond it, the count of the
// notifications relayed for the call (no total). A progress that does not
// increase is dropped (the specification says it must); one that comes
// within progressEvery of the last relayed is held back, the latest
// replacing the one before, and relayed with the next outside that bound
// or before the call's answer: an upstream cannot flood the client's
// stream. Every progress the upstream sends before its answer reaches the
// client before the answer: it is read as it comes in on the call's stream
// (seenProgress), not when the SDK's handler gets to it, and the call's
// end writes what is relayed and held (flush) before the answer goes out.

// progressEvery is the least time between two progress notifications
// relayed for a call.
const progressEvery = 100 * time.Millisecond

// progressFlushWait bounds the wait of a call's answer for its progress to
// be written to a client that does not read its stream.
const progressFlushWait = 5 * time.Second

// progressRelay sends a client's call its progress.
type progressRelay struct {
	// ctx is the client's call: the SDK sends a notification on it to the
	// call's stream.
	ctx     context.Context
	session *mcp.ServerSession
	token   any

	mu sync.Mutex
	// up is the upstream's last progress, last the last relayed.
	up, last float64
	at       time.Time
	// sending is set while a notification is being written to the client
	// (deliver); next is the latest one to write after it, and idle is
	// closed when the writing stops (flush waits for it).
	sending bool
	next    *mcp.ProgressNotificationParams
	idle    chan struct{}
	// held is the latest progress that came too soon after the last
	// relayed.
	held *mcp.ProgressNotificationParams
}

type progressKey struct{}

// progressTokenErr returns the JSON-RPC error (invalid params) of a call
// whose progressToken is neither a string nor an integer, the two MCP
// allows, or nil: an object or a list would be echoed to the client in
// every notification of the call.
func progressTokenErr(req *mcp.CallToolRequest) error {
	if req.Params == nil {
		return nil
	}
	var kind string
	switch tok := req.Params.GetProgressToken().(type) {
	case nil, string, int, int32, int64:
		return nil
	case float64:
		if tok == math.Trunc(tok) && !math.IsInf(tok, 0) {
			return nil
		}
		kind = "a number with a fraction"
	case json.Number:
		if _, err := tok.Int64(); err == nil {
			return nil
		}
		kind = "a number with a fraction"
	case map[string]any:
		kind = "an object"
	case []any:
		kind = "a list"
	case bool:
		kind = "a boolean"
	default:
		kind = fmt.Sprintf("a %T", tok)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "_meta.progressToken must be a string or an integer, not " + kind}
}

// withProgress returns ctx carrying the relay of req's progress, if its
// client asked for it.
func withProgress(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	if req.Params == nil || req.Session == nil {
		return ctx
	}
	tok := req.Params.GetProgressToken()
	if tok == nil {
		return ctx
	}
	return context.WithValue(ctx, progressKey{}, &progressRelay{ctx: ctx, session: req.Session, token: tok})
}

// send relays the progress of p, unless it does not increase; one that
// comes too soon after the last relayed is held back.
func (r *progressRelay) send(p *mcp.ProgressNotificationParams) {
	if math.IsNaN(p.Progress) || math.IsInf(p.Progress, 0) || math.IsNaN(p.Total) || math.IsInf(p.Total, 0) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.at.IsZero() && p.Progress <= r.up {
		return
	}
	out := &mcp.ProgressNotificationParams{ProgressToken: r.token, Progress: r.last + 1}
	if p.Total > 0 && p.Progress >= 0 && p.Progress <= p.Total {
		out.Progress, out.Total = math.Floor(p.Progress/p.Total*100), 100
	}
	if !r.at.IsZero() && out.Progress <= r.last {
		return
	}
	r.up = p.Progress
	if !r.at.IsZero() && now.Sub(r.at) < progressEvery {
		r.held = out
		return
	}
	r.relay(out, now)
}

// relay hands out to the writer, as the latest progress relayed. Called
// with mu held.
func (r *progressRelay) relay(out *mcp.ProgressNotificationParams, now time.Time) {
	r.last, r.at, r.held = out.Progress, now, nil
	if r.sending {
		r.next = out
		return
	}
	r.sending, r.idle = true, make(chan struct{})
	go r.deliver(out, r.idle)
}

// deliver writes out to the client, then the latest progress that came
// meanwhile, if any, and closes idle. The write waits for the client's
// stream: send, on the upstream session's reader, which reads every call's
// answer, hands the progress over and goes on, so a client that stops
// reading holds no one else's call.
func (r *progressRelay) deliver(out *mcp.ProgressNotificationParams, idle chan struct{}) {
	for out != nil {
		_ = r.session.NotifyProgress(r.ctx, out)
		r.mu.Lock()
		out, r.next = r.next, nil
		r.sending = out != nil
		r.mu.Unlock()
	}
	close(idle)
}

// flush relays the progress held back, and waits until every progress
// relayed has been written to the client (progressFlushWait at most, as
// long as the client's call lasts): the call's answer then follows it.
func (r *progressRelay) flush() {
	r.mu.Lock()
	if r.held != nil {
		r.relay(r.held, time.Now())
	}
	idle, sending := r.idle, r.sending
	r.mu.Unlock()
	if !sending {
		return
	}
	t := time.NewTimer(progressFlushWait)
	defer t.Stop()
	select {
	case <-idle:
	case <-r.ctx.Done():
	case <-t.C:
	}
}

// following gives params a progress token of u's when ctx carries a
// relay, and returns the func that stops relaying the call's progress,
// once what was relayed is written (flush).
func (u *upstreamServer) following(ctx context.Context, params *mcp.CallToolParams) func() {
	r, ok := ctx.Value(progressKey{}).(*progressRelay)
	if !ok {
		return func() {}
	}
	token := fmt.Sprintf("agentc-%d", u.nextProgress.Add(1))
	u.progress.Store(token, r)
	params.SetProgressToken(token)
	return func() {
		u.progress.Delete(token)
		r.flush()
	}
}

// relayProgress is the session's handler of the upstream's progress
// notifications: one with the token of a call in flight is relayed to its
// client (without waiting for the client's stream), any other dropped. The
// SDK runs it in a goroutine of its own, which may come after the call's
// answer: the progress a call's own stream carries was relayed as it was
// read (seenProgress), and comes here again, not increasing, dropped.
func (u *upstreamServer) relayProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	u.progressOf(req.Params)
}

// progressOf relays p to the call whose token it gives, if one is in
// flight.
func (u *upstreamServer) progressOf(p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	if r, ok := u.progress.Load(token); ok {
		r.(*progressRelay).send(p)
	}
}

// methodProgress is the method of a progress notification.
const methodProgress = "notifications/progress"

// seenProgress relays a progress notification as the transport reads it
// from a call's stream (its POST's event stream, the stdio connection),
// before the SDK reads the message after it, the call's answer perhaps.
func (u *upstreamServer) seenProgress(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() || req.Method != methodProgress {
		return
	}
	var p mcp.ProgressNotificationParams
	if json.Unmarshal(req.Params, &p) == nil {
		u.progressOf(&p)
	}
}
