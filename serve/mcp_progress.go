package serve

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

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
// increase is dropped (the specification says it must), and so is one
// that comes within progressEvery of the last relayed: an upstream cannot
// flood the client's stream.

// progressEvery is the least time between two progress notifications
// relayed for a call.
const progressEvery = 100 * time.Millisecond

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
	// (deliver); next is the latest one to write after it.
	sending bool
	next    *mcp.ProgressNotificationParams
}

type progressKey struct{}

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

// send relays the progress of p, unless it does not increase or comes too
// soon after the last.
func (r *progressRelay) send(p *mcp.ProgressNotificationParams) {
	if math.IsNaN(p.Progress) || math.IsInf(p.Progress, 0) || math.IsNaN(p.Total) || math.IsInf(p.Total, 0) {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !r.at.IsZero() && (p.Progress <= r.up || now.Sub(r.at) < progressEvery) {
		return
	}
	out := &mcp.ProgressNotificationParams{ProgressToken: r.token, Progress: r.last + 1}
	if p.Total > 0 && p.Progress >= 0 && p.Progress <= p.Total {
		out.Progress, out.Total = math.Floor(p.Progress/p.Total*100), 100
	}
	if !r.at.IsZero() && out.Progress <= r.last {
		return
	}
	r.up, r.last, r.at = p.Progress, out.Progress, now
	if r.sending {
		r.next = out
		return
	}
	r.sending = true
	go r.deliver(out)
}

// deliver writes out to the client, then the latest progress that came
// meanwhile, if any. The write waits for the client's stream: send, on the
// upstream session's reader, which reads every call's answer, hands the
// progress over and goes on, so a client that stops reading holds no one
// else's call.
func (r *progressRelay) deliver(out *mcp.ProgressNotificationParams) {
	for out != nil {
		_ = r.session.NotifyProgress(r.ctx, out)
		r.mu.Lock()
		out, r.next = r.next, nil
		r.sending = out != nil
		r.mu.Unlock()
	}
}

// following gives params a progress token of u's when ctx carries a
// relay, and returns the func that stops relaying the call's progress.
func (u *upstreamServer) following(ctx context.Context, params *mcp.CallToolParams) func() {
	r, ok := ctx.Value(progressKey{}).(*progressRelay)
	if !ok {
		return func() {}
	}
	token := fmt.Sprintf("agentc-%d", u.nextProgress.Add(1))
	u.progress.Store(token, r)
	params.SetProgressToken(token)
	return func() { u.progress.Delete(token) }
}

// relayProgress is the session's handler of the upstream's progress
// notifications, run on its reader: one with the token of a call in flight
// is relayed to its client (without waiting for the client's stream), any
// other dropped.
func (u *upstreamServer) relayProgress(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
	if req.Params == nil {
		return
	}
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	if r, ok := u.progress.Load(token); ok {
		r.(*progressRelay).send(req.Params)
	}
}
