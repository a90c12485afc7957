package serve

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// An upstream session holds what a stateful server keeps for it (a working
// directory, a browser, a transaction, a memory), so whose calls share one
// is the policy's (plan.MCPServer.Session): "client", one per MCP client
// session (the default for a url server), closed when the client's ends;
// "tenant", one per tenant (the default for a command server, where a
// session is a process), closed after -idle without a call; "shared", the
// one session for every caller. The tools are listed on a session of their
// own (upstreamServer.main), which "shared" calls use too: no caller's
// state is in it otherwise. At most max_sessions scoped sessions are open
// with a server, and where the keys name more than one tenant at most half
// of them (at least one) are a tenant's, as a tenant's share of the calls
// in flight is (Options.MaxInFlightPerTenant): one tenant's client
// sessions cannot hold them all. Past either bound a call that needs
// another session is refused, not sent.

// The values of plan.MCPServer.Session.
const (
	scopeClient = "client"
	scopeTenant = "tenant"
	scopeShared = "shared"
)

// The bounds on the scoped sessions of a server when the policy gives
// none: a url server's cost the gateway a connection each, a command
// server's a process each.
const (
	defaultMaxURLSessions     = 256
	defaultMaxCommandSessions = 32
)

// sessionScope returns whose calls share a session with s.
func sessionScope(s plan.MCPServer) string {
	switch {
	case s.Session != "":
		return s.Session
	case len(s.Command) > 0:
		return scopeTenant
	default:
		return scopeClient
	}
}

// shareSessions bounds each tenant's scoped sessions with every server of
// u where the keys name tenants tenants: half of max_sessions, at least one,
// where they name more than one.
func (u *upstreams) shareSessions(tenants int) {
	if tenants < 2 {
		return
	}
	for _, up := range u.servers {
		up.mu.Lock()
		up.tenantMax = max(up.maxSessions/2, 1)
		up.mu.Unlock()
	}
}

// maxScopedSessions returns the bound on s's scoped sessions.
func maxScopedSessions(s plan.MCPServer) int {
	switch {
	case s.MaxSessions > 0:
		return s.MaxSessions
	case len(s.Command) > 0:
		return defaultMaxCommandSessions
	default:
		return defaultMaxURLSessions
	}
}

// upstreamConn is one session with an upstream server: its listing
// session, or a caller's. A session that ends (a stdio server's process
// exited, an HTTP server forgot it) is opened again for the next call. Its
// fields are guarded by its server's mu.
type upstreamConn struct {
	u *upstreamServer
	// key names the callers of a scoped session ("" for the listing
	// session), who the label says in messages; tenant is set for a
	// tenant's (closed after idle without a call), in scope "tenant" or
	// for calls made outside an MCP client session.
	key, label string
	tenant     bool
	// owner is the tenant of the callers, whose share of the server's
	// sessions it counts against (tenantMax).
	owner  string
	cs     *mcp.ClientSession // nil until first opened
	ended  chan struct{}      // closed when cs ends
	broken bool               // a call found cs closed before ended was
	// tools are the definitions cs last listed, by name, in the server's
	// listing numbered listing (upstreamServer.listings).
	tools   map[string]*mcp.Tool
	listing uint64
	// announced is set when the session's server said its tools changed
	// on it, or (the listing session) it was opened again after it ended,
	// since its last listing for a change: a list served and replaced
	// is served again only when listed on the session that announced it.
	announced bool
	// dialing is the connection being opened (session), stopDial ends it.
	dialing  *dial
	stopDial context.CancelFunc
	// cancels counts the cancellations of calls being sent (owe): the
	// session is closed once they are written.
	cancels sync.WaitGroup
	// dropped is set once no call may take the session any more; gone is
	// closed then. It is shut once the calls holding it are done.
	dropped bool
	gone    chan struct{}
	calls   int
	shut    bool
	// idle closes a tenant's session after the server's idle without a
	// call, counted from lastCall.
	idle     *time.Timer
	lastCall time.Time
}

// watch makes cs the session, noting when it ends. Called with u.mu held
// (or before c is shared).
func (c *upstreamConn) watch(cs *mcp.ClientSession) {
	ended := make(chan struct{})
	c.cs, c.ended, c.broken = cs, ended, false
	go func() {
		_ = cs.Wait()
		close(ended)
	}()
}

// live reports whether c holds a session that has not ended. Called with
// its server's mu held.
func (c *upstreamConn) live() bool {
	if c.cs == nil || c.broken {
		return false
	}
	select {
	case <-c.ended:
		return false
	default:
		return true
	}
}

// session returns a live session, opening one if there is none yet or the
// last ended. One connection is opened at a time, without holding mu (the
// server's other users, admit and serves among them, do not wait for it):
// the callers that find the session ended wait for that connection, each
// as long as its own context lets it.
func (c *upstreamConn) session(ctx context.Context) (*mcp.ClientSession, error) {
	u := c.u
	for {
		u.mu.Lock()
		if u.closed || c.dropped {
			u.mu.Unlock()
			return nil, fmt.Errorf("mcp server %q: %w", u.name, mcp.ErrConnectionClosed)
		}
		if c.live() {
			cs := c.cs
			u.mu.Unlock()
			return cs, nil
		}
		d := c.dialing
		if d == nil {
			dctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
			d = &dial{done: make(chan struct{})}
			c.dialing, c.stopDial = d, cancel
			go c.reconnect(dctx, d)
		}
		u.mu.Unlock()
		select {
		case <-d.done:
			if d.err != nil {
				return nil, d.err
			}
		case <-ctx.Done():
			return nil, fmt.Errorf("mcp server %q: waiting for its session to be opened: %w", u.name, ctx.Err())
		}
	}
}

// reconnect opens a session, the first of c or in place of the one that
// ended, on ctx (connectTimeout, ended by close), whoever waits for it.
func (c *upstreamConn) reconnect(ctx context.Context, d *dial) {
	u := c.u
	u.mu.Lock()
	again := c.cs != nil
	u.mu.Unlock()
	if again {
		u.log.Warn("mcp upstream session ended; connecting again", "server", u.name, "session", c.label)
	}
	cs, err := u.connect(ctx, c)
	var tools []*mcp.Tool
	var fp string
	if err == nil && c != u.main {
		// A caller's session is listed before its first call: its server
		// may not be the one the served tools were listed on (it restarted
		// since without saying so, or it is another process of a command).
		if tools, err = UpstreamTools(ctx, cs); err != nil {
			_ = cs.Close()
			err = fmt.Errorf("mcp server %q: listing the tools of the new session (%s): %w", u.name, c.label, u.secrets.err(err))
		} else {
			// Without mu: a listing may be large.
			fp = listingPrint(byName(tools))
		}
	}
	u.mu.Lock()
	c.stopDial()
	c.dialing, c.stopDial = nil, nil
	var old *mcp.ClientSession
	switch {
	case err != nil:
		d.err = err
	case u.closed || c.dropped:
		old = cs
		d.err = fmt.Errorf("mcp server %q: %w", u.name, mcp.ErrConnectionClosed)
	default:
		old = c.cs
		c.watch(cs)
		switch {
		case c != u.main:
			// Tools the session lists otherwise than those served are
			// listed on it again, scanned and served (or withheld) before
			// its call reaches one (admit). The new session announced
			// nothing; a session that did is listed first.
			c.note(cs, tools)
			c.announced = false
			switch {
			case fp != "" && fp == u.listedPrint:
			case u.wasReplaced(fp):
				u.log.Warn(replacedListMsg, "server", u.name, "session", c.label)
			default:
				if u.via == nil || u.via.dropped || !u.via.announced {
					u.via = c
				}
				u.markChanged()
			}
		case again:
			// A server that restarted may serve other tools: they are
			// listed and scanned again before a call reaches one.
			c.announced = true
			u.markChanged()
		}
	}
	// A caller's session that failed to open after its callers left (their
	// contexts ended while it was opened) holds no place under maxSessions.
	orphan := err != nil && c != u.main && c.calls == 0 && !c.dropped && !c.live()
	if orphan {
		u.forget(c)
	}
	u.mu.Unlock()
	close(d.done)
	if old != nil {
		_ = old.Close()
	}
	if orphan {
		c.close()
	}
}

// renew ends cs, a session that refused a call as closing, waits until it
// has ended (at most connectTimeout), and returns a live session.
func (c *upstreamConn) renew(ctx context.Context, cs *mcp.ClientSession) (*mcp.ClientSession, error) {
	c.u.mu.Lock()
	ended := c.ended
	current := c.cs == cs
	c.u.mu.Unlock()
	if current {
		_ = cs.Close()
		select {
		case <-ended:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(connectTimeout):
			return nil, fmt.Errorf("mcp server %q: the ended session did not close", c.u.name)
		}
	}
	return c.session(ctx)
}

// lost marks cs as ended: a call on it found the connection closed. The
// session's own end is noticed a moment later (watch), and a call in
// between would be sent on the dead session.
func (c *upstreamConn) lost(cs *mcp.ClientSession) {
	c.u.mu.Lock()
	defer c.u.mu.Unlock()
	if c.cs == cs {
		c.broken = true
	}
}

// close ends the session once the cancellations of its calls are written
// (owe); a second close does nothing.
func (c *upstreamConn) close() {
	c.u.mu.Lock()
	if c.shut {
		c.u.mu.Unlock()
		return
	}
	c.shut = true
	if c.stopDial != nil {
		c.stopDial()
	}
	if c.idle != nil {
		c.idle.Stop()
	}
	cs := c.cs
	c.u.mu.Unlock()
	c.cancels.Wait()
	if cs != nil {
		_ = cs.Close()
	}
}

// sessionGone reports whether err says a session ended under a request:
// its server forgot it (an HTTP server restarted) or its connection
// closed.
func sessionGone(err error) bool {
	return errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF)
}

// listTools lists the server's tools for a change: on the caller's
// session that found its tools differ from those served or was told of a
// change (via), else (or when that session has closed meanwhile) on the
// listing session. The listing is the one the served tools are then built
// from (listedAs, listedPrint), only while the session it was taken on
// is still its conn's and in use: a listing answered by a session that
// ended, was opened again or let go meanwhile describes a session no call
// is sent on, and the tools are listed on the listing session instead.
// Unless the session listed announced the change (announced: the
// announcement of another session, one let go among them, is not this
// session's list), a session that lists a list served and replaced since
// is of a version the server moved on from: the listing session is listed
// instead, and when it lists such a list too, the error is
// errListReplaced. A session's announcement stands until a listing is
// taken on it; one that ended or was let go has none.
func (u *upstreamServer) listTools(ctx context.Context) ([]*mcp.Tool, error) {
	u.mu.Lock()
	c := u.via
	u.via = nil
	if c == nil || c.dropped {
		c = u.main
	}
	u.mu.Unlock()
	for tries := 0; ; tries++ {
		tools, fp, announced, cs, err := c.listForChange(ctx)
		if err != nil && c != u.main && ctx.Err() == nil {
			c = u.main
			continue
		}
		if err != nil {
			return nil, err
		}
		u.mu.Lock()
		current := c.cs == cs && !c.dropped
		replaced := current && !announced && u.wasReplaced(fp)
		if current && !replaced {
			u.listedAs, u.listedPrint = c.listing, fp
		}
		u.mu.Unlock()
		switch {
		case current && !replaced:
			return tools, nil
		case replaced && c == u.main:
			return nil, fmt.Errorf("mcp server %q: %w", u.name, errListReplaced)
		case tries == 2:
			return nil, fmt.Errorf("mcp server %q: listing the tools: the session listed was replaced each time before its listing was answered", u.name)
		}
		c = u.main
	}
}

// listForChange lists c's tools for a change (list) and returns them,
// their fingerprint, and whether c had announced the change; an
// announcement made while the listing is taken stands for the next, and
// so does c's when the listing fails.
func (c *upstreamConn) listForChange(ctx context.Context) ([]*mcp.Tool, string, bool, *mcp.ClientSession, error) {
	u := c.u
	u.mu.Lock()
	announced := c.announced
	c.announced = false
	u.mu.Unlock()
	tools, cs, err := c.list(ctx)
	if err != nil {
		if announced {
			u.mu.Lock()
			c.announced = true
			u.mu.Unlock()
		}
		return nil, "", announced, cs, err
	}
	return tools, listingPrint(byName(tools)), announced, cs, nil // fingerprint without mu: a listing may be large
}

// errListReplaced is a listing of a list served and replaced since.
var errListReplaced = errors.New("the tools are listed as a list served before and replaced")

// replacedListMsg logs a session that lists a list served and replaced
// since.
const replacedListMsg = "mcp upstream session lists the tools as a list served before and replaced; the list served stays, and the tools the session describes otherwise are refused on it"

// maxReplaced bounds the lists a server remembers as replaced.
const maxReplaced = 64

// listingPrint returns the fingerprint of a listing, by name: two
// listings are the same (sameTools) when their fingerprints are, and not
// "" (a listing that cannot be encoded).
func listingPrint(tools map[string]*mcp.Tool) string {
	b, err := json.Marshal(tools)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return string(sum[:])
}

// wasReplaced reports whether the listing whose fingerprint is p
// (listingPrint) is a list the server served and replaced since: unless
// the server announced it, the session listing it is of a version the
// server moved on from (one still running in a rollout, another version
// of a command), and serving its list again would flip the list served
// with each session opened on either version. Called with mu held (the
// fingerprint taken without it: a listing may be large).
func (u *upstreamServer) wasReplaced(p string) bool {
	return p != "" && slices.Contains(u.replaced, p)
}

// replace notes that the list served, whose fingerprint is p
// (listingPrint), is replaced. Called with mu held.
func (u *upstreamServer) replace(p string) {
	if p == "" || slices.Contains(u.replaced, p) {
		return
	}
	u.replaced = append(u.replaced, p)
	if len(u.replaced) > maxReplaced {
		u.replaced = slices.Delete(u.replaced, 0, 1)
	}
}

// list lists the tools on c's session and notes them; a session found gone
// (the server restarted) is opened again and listed once more. It returns
// the session listed.
func (c *upstreamConn) list(ctx context.Context) ([]*mcp.Tool, *mcp.ClientSession, error) {
	cs, err := c.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	tools, err := c.listOn(ctx, cs)
	if err != nil && ctx.Err() == nil && sessionGone(err) {
		c.lost(cs)
		if cs, err = c.session(ctx); err == nil {
			tools, err = c.listOn(ctx, cs)
		}
	}
	return tools, cs, err
}

// listOn lists the tools on cs, c's session, and notes them.
func (c *upstreamConn) listOn(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	tools, err := UpstreamTools(ctx, cs)
	if err == nil {
		c.u.mu.Lock()
		c.note(cs, tools)
		c.u.mu.Unlock()
	}
	return tools, err
}

// note makes tools, listed on cs, c's listing while cs is its session.
// Called with its server's mu held.
func (c *upstreamConn) note(cs *mcp.ClientSession, tools []*mcp.Tool) {
	if c.cs != cs {
		return
	}
	c.u.listings++
	c.tools, c.listing = byName(tools), c.u.listings
}

// byName returns a listing by name (of a name listed twice, the last).
func byName(tools []*mcp.Tool) map[string]*mcp.Tool {
	out := make(map[string]*mcp.Tool, len(tools))
	for _, t := range tools {
		out[t.Name] = t
	}
	return out
}

// describes reports whether cs, c's session, lists t as it is served. A
// session whose listing is older than the one the served tools were last
// built or checked from (a change listed on another session) is listed
// again first: an upstream that changed its tools serves them so on every
// session, and a session that still lists them otherwise reaches another
// server (one that did not restart, another version of a command). A
// listing that fails is the error.
func (c *upstreamConn) describes(ctx context.Context, cs *mcp.ClientSession, t *upstreamTool) (bool, error) {
	u := c.u
	u.mu.Lock()
	def, older := c.tools[t.name], c.listing < u.listedAs
	u.mu.Unlock()
	if sameTool(def, t.tool) || !older {
		return sameTool(def, t.tool), nil
	}
	tools, err := c.listOn(ctx, cs)
	if err != nil {
		return false, fmt.Errorf("mcp server %q: listing the tools of the session (%s) again: %w", u.name, c.label, u.secrets.err(err))
	}
	for _, d := range tools {
		if d.Name == t.name {
			return sameTool(d, t.tool), nil
		}
	}
	return false, nil
}

// sameTools reports whether two listings, by name, are the same.
func sameTools(a, b map[string]*mcp.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for name, t := range a {
		if !sameTool(t, b[name]) {
			return false
		}
	}
	return true
}

// upstreamCaller is who makes a tool call, as the choice of its upstream
// session reads it: its MCP client session and its tenant.
type upstreamCaller struct {
	session string
	tenant  string
	// ended returns a channel closed when the client session ends.
	ended func() <-chan struct{}
}

type upstreamCallerKey struct{}

// withUpstreamCaller returns ctx carrying c.
func withUpstreamCaller(ctx context.Context, c upstreamCaller) context.Context {
	return context.WithValue(ctx, upstreamCallerKey{}, c)
}

// take returns the session a call on ctx uses, held until the func
// returned is called: the listing session for "shared", else the caller's
// (opened on its first call). A call that would need a session past
// maxSessions is refused, not sent.
func (u *upstreamServer) take(ctx context.Context) (*upstreamConn, func(), error) {
	if u.scope == scopeShared {
		return u.main, func() {}, nil
	}
	caller, ok := ctx.Value(upstreamCallerKey{}).(upstreamCaller)
	if !ok {
		// Not a call of /mcp (a program running the pipeline's tool
		// chain itself): the run's tenant's session.
		caller.tenant = runtime.RunOf(ctx).Tenant
	}
	key, label, tenant := "tenant\x00"+caller.tenant, fmt.Sprintf("tenant %q", caller.tenant), true
	if u.scope == scopeClient && caller.session != "" {
		key, label, tenant = "client\x00"+caller.session, "client session", false
	}
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil, nil, runtime.NotRun(&runtime.CallError{Kind: runtime.KindTransient, Err: fmt.Errorf("mcp server %q: %w", u.name, mcp.ErrConnectionClosed)})
	}
	c := u.scoped[key]
	if c == nil {
		if n := u.tenantSessions[caller.tenant]; u.tenantMax > 0 && n >= u.tenantMax {
			u.mu.Unlock()
			return nil, nil, u.refuseSession("mcp upstream session refused: the tenant's sessions are at its share of the server's max_sessions",
				fmt.Sprintf("mcp server %q: tenant %q has %d upstream %s open, its share of the server's max_sessions (%d of %d): no other can be opened for it until one closes (a client's when its MCP session ends, a tenant's after -idle without a call)",
					u.name, caller.tenant, n, plural(n, "session", "sessions"), u.tenantMax, u.maxSessions), "tenant", caller.tenant, "share", u.tenantMax)
		}
		if n := len(u.scoped); n >= u.maxSessions {
			u.mu.Unlock()
			return nil, nil, u.refuseSession("mcp upstream session refused: the server's sessions are at its max_sessions", fmt.Sprintf(
				"mcp server %q: %d upstream %s open, its max_sessions: no other can be opened for this %s until one closes (a client's when its MCP session ends, a tenant's after -idle without a call)",
				u.name, n, plural(n, "session", "sessions"), u.scope))
		}
		c = &upstreamConn{u: u, key: key, label: label, tenant: tenant, owner: caller.tenant, gone: make(chan struct{})}
		u.scoped[key] = c
		if u.tenantSessions == nil {
			u.tenantSessions = map[string]int{}
		}
		u.tenantSessions[c.owner]++
		if u.m != nil {
			u.m.upstreamSessions.WithLabelValues(u.name).Inc()
		}
		if u.scope == scopeClient && caller.ended != nil {
			ended := caller.ended()
			go func() {
				select {
				case <-ended:
					u.drop(c)
				case <-c.gone:
				}
			}()
		}
	}
	c.calls++
	u.mu.Unlock()
	return c, func() { u.release(c) }, nil
}

// refuseSession counts and logs (logMsg, with attrs) the refusal of a
// call that needs an upstream session past a bound, and returns its
// error, msg: not sent, transient.
func (u *upstreamServer) refuseSession(logMsg, msg string, attrs ...any) error {
	if u.m != nil {
		u.m.upstreamRefused.WithLabelValues(u.name).Inc()
	}
	u.log.Warn(logMsg, append([]any{"server", u.name, "scope", u.scope, "max_sessions", u.maxSessions}, attrs...)...)
	return runtime.NotRun(&runtime.CallError{Kind: runtime.KindTransient, Message: msg})
}

// plural returns one for n == 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// release lets go of c, held by a call: a session dropped meanwhile is
// closed with its last call, and so is one that could not be opened or
// has ended (it holds no place under maxSessions; the next call opens
// another, listed before that call reaches a tool); a tenant's is closed
// after idle without one.
func (u *upstreamServer) release(c *upstreamConn) {
	u.mu.Lock()
	c.calls--
	if c.calls > 0 {
		u.mu.Unlock()
		return
	}
	if !c.dropped && c.dialing == nil && !c.live() {
		// The session the next call opens afresh is listed before that
		// call reaches a tool (reconnect): the server may have restarted
		// with other tools.
		u.forget(c)
	}
	if c.dropped {
		u.mu.Unlock()
		c.close()
		return
	}
	if c.tenant && u.idle > 0 {
		c.lastCall = time.Now()
		if c.idle == nil {
			c.idle = time.AfterFunc(u.idle, func() { u.idled(c) })
		} else {
			c.idle.Reset(u.idle)
		}
	}
	u.mu.Unlock()
}

// idled drops c when it has had no call for idle. The session the
// tenant's next call opens afresh may reach a server restarted meanwhile
// with other tools, which need not announce them: it is listed before that
// call reaches a tool (reconnect).
func (u *upstreamServer) idled(c *upstreamConn) {
	u.mu.Lock()
	quiet := c.calls == 0 && time.Since(c.lastCall) >= u.idle
	u.mu.Unlock()
	if quiet {
		u.drop(c)
	}
}

// drop takes c out of the server's sessions: it is closed now, or with
// the last call holding it.
func (u *upstreamServer) drop(c *upstreamConn) {
	u.mu.Lock()
	if c.dropped {
		u.mu.Unlock()
		return
	}
	u.forget(c)
	calls := c.calls
	u.mu.Unlock()
	if calls == 0 {
		c.close()
	}
}

// forget marks c dropped and takes it out of the server's sessions. Called
// with u.mu held.
func (u *upstreamServer) forget(c *upstreamConn) {
	c.dropped = true
	close(c.gone)
	if u.scoped[c.key] == c {
		delete(u.scoped, c.key)
		if u.tenantSessions[c.owner]--; u.tenantSessions[c.owner] <= 0 {
			delete(u.tenantSessions, c.owner)
		}
		if u.m != nil {
			u.m.upstreamSessions.WithLabelValues(u.name).Dec()
		}
	}
}

// clientEnded returns a channel closed when the client session ss ends,
// one per session however many upstream sessions it has.
func (p *mcpProxy) clientEnded(ss *mcp.ServerSession) <-chan struct{} {
	p.clientsMu.Lock()
	defer p.clientsMu.Unlock()
	id := ss.ID()
	if ch, ok := p.clients[id]; ok {
		return ch
	}
	if p.clients == nil {
		p.clients = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	p.clients[id] = ch
	go func() {
		_ = ss.Wait()
		p.clientsMu.Lock()
		delete(p.clients, id)
		p.clientsMu.Unlock()
		close(ch)
	}()
	return ch
}
