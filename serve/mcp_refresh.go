package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// An upstream's tool list is followed: when the server says it changed
// (notifications/tools/list_changed, listed on the session that said so),
// when its listing session is opened again after it ended, and when a
// caller's session, listed as it is opened, lists other tools than those
// served (a restarted server, or another process of a command, may serve
// other tools; listed on that session), its tools are listed again and,
// when they differ from those served, a generation is built for the new
// list (the same policy and sessions; every definition scanned as at
// load) and installed, which tells the MCP clients the list changed.
// Meanwhile the server's calls wait; a call of a tool whose definition is
// not the one scanned and served, or that the session the call would be
// sent on describes otherwise, is refused.

// LayerMCP names the refusal of a call of an upstream tool that is no
// longer served as it was listed.
const LayerMCP = "mcp"

// markChanged notes that the server's tools may have changed: calls wait
// until they are listed again. Called with mu held.
func (u *upstreamServer) markChanged() {
	if u.closed || u.onChange == nil {
		return
	}
	u.dirty = true
	if u.pending == nil {
		u.pending = make(chan struct{})
	}
	if !u.running {
		u.running = true
		go u.refreshLoop()
	}
}

// refreshEvery is the least time between the starts of two listings of
// an upstream's tools for its changes: an upstream announcing a change
// every few milliseconds would otherwise have a generation built, its
// definitions scanned (a classifier's request each) and every MCP client
// told to list the tools again, as often.
var refreshEvery = time.Second

// refreshLoop runs onChange until no change is noted any more, at most once
// a refreshEvery (the changes noted meanwhile are listed at once), then
// lets the waiting calls go.
func (u *upstreamServer) refreshLoop() {
	for {
		u.mu.Lock()
		if !u.dirty || u.closed {
			u.running = false
			if u.pending != nil {
				close(u.pending)
				u.pending = nil
			}
			u.mu.Unlock()
			return
		}
		if wait := refreshEvery - time.Since(u.refreshed); wait > 0 {
			u.mu.Unlock()
			time.Sleep(wait)
			continue
		}
		u.dirty, u.refreshed = false, time.Now()
		u.mu.Unlock()
		u.onChange(u)
	}
}

// admit waits until the server's tools are not being listed again
// (awaitListing), then refuses a call of t unless t's definition is the
// one served and cs, c's session that the call is sent on, lists it so
// (describes).
func (u *upstreamServer) admit(ctx context.Context, t *upstreamTool, c *upstreamConn, cs *mcp.ClientSession) error {
	if err := u.awaitListing(ctx); err != nil {
		return err
	}
	if !u.serves(t) {
		return u.notServed(t)
	}
	same, err := c.describes(ctx, cs, t)
	switch {
	case ctx.Err() != nil:
		return runtime.NotRun(ctx.Err())
	case err != nil:
		return runtime.NotRun(&runtime.CallError{Kind: runtime.KindTransient, Err: err})
	case same:
		return nil
	}
	// The session's server is not the one served (another version of a
	// command, running still): it would refuse this call for as long as it
	// is held, and a tenant's calls, refused, keep it from idling out.
	// It is let go (closed with its last call): the caller's next call
	// opens another, listed as it is opened. The listing session, which
	// carries the calls of "shared", is listed again instead.
	if c == u.main {
		u.mu.Lock()
		u.markChanged()
		u.mu.Unlock()
	} else {
		u.drop(c)
	}
	return &runtime.BlockedError{Layer: LayerMCP, Message: fmt.Sprintf(
		"tool %q of mcp server %q is not served on this upstream session: the session's server describes it otherwise than the definition scanned and served (a server that restarted, or another version of its command)",
		t.name, u.name)}
}

// listingUnderWay returns the channel closed once the tools being listed
// again are served, nil when they are not being listed: the listing a
// call starts when the last one failed (stale) among them.
func (u *upstreamServer) listingUnderWay() <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.stale && !u.running {
		u.stale = false
		u.markChanged()
	}
	return u.pending
}

// notServed is the refusal of a call of t, whose definition is not the
// one served.
func (u *upstreamServer) notServed(t *upstreamTool) error {
	return &runtime.BlockedError{Layer: LayerMCP, Message: fmt.Sprintf(
		"tool %q of mcp server %q is not served: the server's tool list changed (the tool was removed, changed or withheld) or could not be listed again",
		t.name, u.name)}
}

// serves reports whether t's definition is the one served.
func (u *upstreamServer) serves(t *upstreamTool) bool {
	u.mu.Lock()
	cur, ok := u.served[t.name]
	u.mu.Unlock()
	return ok && sameTool(cur, t.tool)
}

// setServed makes tools, by the upstream's name, the definitions served,
// and reports whether they differ from those served before.
func (u *upstreamServer) setServed(tools map[string]*mcp.Tool) bool {
	u.mu.Lock()
	old := u.served
	u.served, u.stale = tools, false
	u.mu.Unlock()
	// Compared without mu: the definitions may be large, and neither map
	// is written once served.
	return !sameTools(old, tools)
}

// served returns the definitions of up's tools that u serves (not
// withheld), by the upstream's name.
func (u *upstreams) served(up *upstreamServer) map[string]*mcp.Tool {
	out := map[string]*mcp.Tool{}
	for _, t := range u.tools {
		if t.up == up && t.withheld == nil {
			out[t.name] = t.tool
		}
	}
	return out
}

// sameTool reports whether two definitions are the same.
func sameTool(a, b *mcp.Tool) bool {
	if a == b {
		return true
	}
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && bytes.Equal(ja, jb)
}

// listed returns the definitions of up's tools u was built from, withheld
// or not, by the upstream's name.
func (u *upstreams) listed(up *upstreamServer) map[string]*mcp.Tool {
	out := map[string]*mcp.Tool{}
	for _, t := range u.tools {
		if t.up == up {
			out[t.name] = t.tool
		}
	}
	return out
}

// toolChanges compares tools, up's new list, with those u lists for it:
// the upstream names added, removed and changed.
func (u *upstreams) toolChanges(up *upstreamServer, tools []*mcp.Tool) (added, removed, changed []string) {
	old := u.listed(up)
	for _, t := range tools {
		prev, ok := old[t.Name]
		switch {
		case !ok:
			added = append(added, t.Name)
		case !sameTool(prev, t):
			changed = append(changed, t.Name)
		}
		delete(old, t.Name)
	}
	for name := range old {
		removed = append(removed, name)
	}
	sort.Strings(added)
	sort.Strings(removed)
	sort.Strings(changed)
	return added, removed, changed
}

// successor returns the upstreams of a generation built for up's new
// list: the same sessions (each shared: closing both closes them), up's
// tools replaced by tools, the others' as they are (not yet scanned).
func (u *upstreams) successor(up *upstreamServer, tools []*mcp.Tool) (*upstreams, error) {
	next := &upstreams{servers: map[string]*upstreamServer{}, tools: map[string]*upstreamTool{}, maxResult: u.maxResult}
	for name, s := range u.servers {
		s.mu.Lock()
		s.refs++
		s.mu.Unlock()
		next.servers[name] = s
	}
	for _, name := range u.names {
		if t := u.tools[name]; t.up != up {
			next.tools[name] = &upstreamTool{server: t.server, name: t.name, tool: t.tool, up: t.up, maxResult: t.maxResult}
			next.names = append(next.names, name)
		}
	}
	if err := next.add(serverTools{up: up, tools: tools}); err != nil {
		next.close()
		return nil, err
	}
	sort.Strings(next.names)
	return next, nil
}

// refreshMCP lists up's tools again and, when they changed, builds and
// installs a generation serving the new list, its definitions scanned as
// at load. A list that cannot be taken leaves up's calls refused until the
// next call lists it again; a generation that cannot be built leaves the
// current one serving up's unchanged tools only. Either is logged.
func (s *Server) refreshMCP(up *upstreamServer) {
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	// The tools are listed before the lock that builds generations is
	// taken: a server whose listing hangs (connectTimeout at most) holds
	// neither the other servers' changes nor a reload.
	tools, err := up.listTools(ctx)
	if !s.lockReloadUnlessClosing() {
		up.setServed(nil)
		return
	}
	defer s.reloadMu.Unlock()
	g := s.cur.Load()
	if s.closed.Load() || g == nil || g.mcp.servers[up.name] != up {
		return // closed, or a reload connected again
	}
	if errors.Is(err, errListReplaced) {
		if up.setServed(g.mcp.served(up)) {
			s.mcp.sync(g)
		}
		s.log.Warn(replacedListMsg, "server", up.name, "session", "listing")
		return
	}
	if err != nil {
		up.setServed(nil)
		up.mu.Lock()
		up.stale = true
		up.mu.Unlock()
		s.log.Error("mcp upstream tools could not be listed again; its calls are refused until they are", "server", up.name, "error", up.secrets.err(err))
		return
	}
	added, removed, changed := g.mcp.toolChanges(up, tools)
	if len(added)+len(removed)+len(changed) == 0 {
		// The list is the one the generation serves: tools a failed
		// listing or a change that could not be served took from the
		// clients are theirs again.
		if up.setServed(g.mcp.served(up)) {
			s.mcp.sync(g)
		}
		return
	}
	next, err := g.mcp.successor(up, tools)
	if err == nil {
		// A list that leaves an unscoped file_check (egress) checking
		// none of the tools served, which the load refuses, cannot be
		// served either: its new tools' calls would pass the layer
		// unchecked.
		if err = checkUnscopedLayers(g.plan, next); err != nil {
			next.close()
		}
	}
	var ng *generation
	if err == nil {
		ng, err = s.assemble(ctx, g.plan, g.keys, g.deps, next)
	}
	if err != nil {
		// The tools that did not change stay served; the others are
		// refused and no longer listed.
		keep := g.mcp.served(up)
		for _, name := range append(removed, changed...) {
			delete(keep, name)
		}
		up.setServed(keep)
		s.mcp.sync(g)
		s.log.Error("mcp upstream tools changed but could not be served; serving its unchanged tools only", "server", up.name,
			"added", added, "removed", removed, "changed", changed, "error", err)
		return
	}
	if err := checkScopedLayers(g.plan, next); err != nil {
		// Not refused as at a load: the layer refuses these calls itself.
		s.log.Warn("mcp upstream tools changed: a layer is scoped to a tool it cannot check, whose calls it refuses", "server", up.name, "error", err)
	}
	if errs, _ := unknownToolNames(g.plan, next, hostTools(s.opts.Tools)); len(errs) > 0 {
		// Refused at a load; here the change is served, the rules as written.
		s.log.Warn("mcp upstream tools changed: a rule names a tool no mcp server serves, close to one served", "server", up.name, "error", errors.Join(errs...))
	}
	withheld := 0
	for _, t := range next.tools {
		if t.up == up && t.withheld != nil {
			withheld++
		}
	}
	replaced := listingPrint(g.mcp.listed(up)) // without mu: a listing may be large
	up.mu.Lock()
	up.replace(replaced)
	up.mu.Unlock()
	s.install(ng)
	s.log.Info("mcp upstream tools changed; listed and scanned again", "server", up.name, "generation", ng.n,
		"added", added, "removed", removed, "changed", changed, "tools", len(tools), "withheld", withheld)
	if undeclared := undeclaredAdded(g.plan, next, up, added); len(undeclared) > 0 {
		// The policy's semantics stay: such a tool runs as any tool the
		// policy does not declare. The operator is told what that leaves
		// unchecked.
		s.log.Warn("mcp upstream tools changed: tools added that the policy does not declare; the layers that read a declaration see none for them "+
			"(file_check's path_arg, egress's url_arg, a guard typed by args, side_effecting): declare them (agentc mcp-tools prints the declarations)",
			"server", up.name, "tools", undeclared)
	}
}

// lockReloadUnlessClosing takes reloadMu and reports true, or gives up,
// reporting false, once Close has started: Close holds reloadMu while the
// calls in flight finish, and those may be waiting for the refresh that
// asks for it (refreshMCP). A lock taken after giving up is let go at once.
func (s *Server) lockReloadUnlessClosing() bool {
	if s.reloadMu.TryLock() {
		return true
	}
	got, gaveUp := make(chan struct{}), make(chan struct{})
	go func() {
		s.reloadMu.Lock()
		select {
		case got <- struct{}{}:
		case <-gaveUp:
			s.reloadMu.Unlock()
		}
	}()
	select {
	case <-got:
		return true
	case <-s.closing:
		close(gaveUp)
		return false
	}
}

// undeclaredAdded returns, as served (prefix included), the tools of added
// (up's names) that next serves, not withheld, and p does not declare.
func undeclaredAdded(p *plan.Plan, next *upstreams, up *upstreamServer, added []string) []string {
	var names []string
	for _, name := range added {
		served := up.spec.Prefix + name
		if t := next.tools[served]; t == nil || t.withheld != nil {
			continue
		}
		if _, ok := p.Tools[served]; !ok {
			names = append(names, served)
		}
	}
	return names
}

// awaitList waits, before a call of the tool name takes a generation,
// until the tools of the upstream serving it are no longer being listed
// again (awaitListing; the listing the call starts after one failed
// among them): the call then runs on the new list, or is refused by it,
// where taking the generation that list replaces would have it refused
// for holding a list no longer served (admit). A call that cannot wait
// longer (ctx ended, or its time to wait spent) is refused, not run: its
// error is the refusal (callTool runs the chain of one whose ctx ended
// only to record it, notSentOf).
func (s *Server) awaitList(ctx context.Context, name string) error {
	g := s.acquire()
	var up *upstreamServer
	if g.mcp != nil {
		if t := g.mcp.tools[name]; t != nil {
			up = t.up
		}
	}
	g.release()
	if up == nil {
		return nil
	}
	return up.awaitListing(ctx)
}

// listWaitFor is the time a call waits for its upstream's listings in all
// (listWait).
var listWaitFor = connectTimeout

// listWaitKey is the context key of a call's listWait.
type listWaitKey struct{}

// listWait is the time a call has left to wait for its upstream's tools
// to be listed again, shared by its waits (before its tool chain runs,
// and as it is sent): listWaitFor in all.
type listWait struct{ left atomic.Int64 }

// withListWait returns ctx carrying the time its call has left to wait
// for listings: listWaitFor, unless ctx carries one already.
func withListWait(ctx context.Context) context.Context {
	if _, ok := ctx.Value(listWaitKey{}).(*listWait); ok {
		return ctx
	}
	w := &listWait{}
	w.left.Store(int64(listWaitFor))
	return context.WithValue(ctx, listWaitKey{}, w)
}

// awaitListing waits until u's tools are not being listed again (nil at
// once when they are not), at most the time the call on ctx has left to
// wait for listings (withListWait; listWaitFor for a call that carries
// none). A call whose ctx ends, or whose time is spent, while it waits
// was never sent: its error is marked runtime.NotRun, so that idempotent
// releases its claim and audit records it failed, not in doubt.
func (u *upstreamServer) awaitListing(ctx context.Context) error {
	pending := u.listingUnderWay()
	if pending == nil {
		return nil
	}
	w, _ := withListWait(ctx).Value(listWaitKey{}).(*listWait)
	if u.m != nil {
		waits := u.m.listWaits.WithLabelValues(u.name)
		waits.Inc()
		defer waits.Dec()
	}
	start := time.Now()
	defer func() { w.left.Add(-int64(time.Since(start))) }()
	timer := time.NewTimer(max(time.Duration(w.left.Load()), 0))
	defer timer.Stop()
	select {
	case <-pending:
		return nil
	case <-ctx.Done():
		return runtime.NotRun(ctx.Err())
	case <-timer.C:
		select {
		case <-pending:
			return nil
		default:
		}
		return runtime.NotRun(&runtime.CallError{Kind: runtime.KindTransient, Message: fmt.Sprintf(
			"mcp server %q: its tools were still being listed again after the call waited %s for them: the call was not sent", u.name, listWaitFor)})
	}
}
