package serve

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentc-dev/agentc/builtins/tracing"
	"github.com/agentc-dev/agentc/internal/envtmpl"
	"github.com/agentc-dev/agentc/internal/wire"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/schemas"
)

// Version is reported to MCP peers as the implementation's version.
var Version = "v0.1.0-dev"

// connectTimeout bounds connecting to one upstream MCP server and listing
// its tools.
const connectTimeout = 30 * time.Second

// upstreams are the sessions with a generation's upstream MCP servers and
// the tools they serve, by the name the proxy exposes.
type upstreams struct {
	servers map[string]*upstreamServer
	tools   map[string]*upstreamTool
	names   []string // sorted
	// maxResult bounds the size of a tool's result (resultSize).
	maxResult int64
	// closing holds, while close runs, the servers whose sessions it has
	// yet to close (stillClosing).
	closingMu sync.Mutex
	closing   []string
}

// upstreamServer is one upstream server: the session that lists its tools
// (main) and the sessions of its callers (scoped, mcp_upstreamsessions.go).
// Its tools are listed again whenever the server says its list changed,
// and on every caller's session as it is opened, before its first call
// (see mcp_refresh.go); a generation rebuilt for a new list shares the
// server with the one it replaces.
type upstreamServer struct {
	name string
	spec plan.MCPServer
	dir  string
	// lookupEnv reads the variables the server's headers or env name, at
	// each connection.
	lookupEnv func(string) (string, bool)
	// secrets are the credentials the headers or env read (commandEnv),
	// scrubbed from the messages of the server's sessions.
	secrets secrets
	log     *slog.Logger
	// onChange lists the server's tools again, scans them and serves the
	// new list (Server.refreshMCP); nil: the list is not followed.
	onChange func(*upstreamServer)
	// scope says whose calls share a session (sessionScope), maxSessions
	// bounds the scoped sessions open, idle closes a tenant's after that
	// long without a call; m counts them (nil: not counted).
	scope       string
	maxSessions int
	idle        time.Duration
	m           *metrics

	mu sync.Mutex
	// main is the session that lists the tools, and carries the calls
	// when the scope is "shared".
	main *upstreamConn
	// scoped holds the callers' sessions by their key (take);
	// tenantSessions counts them by tenant, each at most tenantMax (0: no
	// share, the keys name one tenant).
	scoped         map[string]*upstreamConn
	tenantSessions map[string]int
	tenantMax      int
	closed         bool
	// refs counts the generations sharing the server; the last to close
	// it closes the sessions.
	refs int
	// served holds, by the upstream's name, the definition of each tool
	// last scanned and served (not withheld): a call of a tool whose
	// definition is not the one served is refused.
	served map[string]*mcp.Tool
	// pending is open while the tools are being listed again: calls wait
	// for it. dirty asks the refresh under way for another round; running
	// is set while one is. stale is set when a listing failed: the
	// next call lists again.
	pending chan struct{}
	dirty   bool
	running bool
	stale   bool
	// via is the session the next listing for a change is taken on (nil:
	// main): a caller's session whose tools differ from those served, or
	// whose server said its list changed (upstreamConn.announced), which
	// a session opened meanwhile does not take the place of.
	via *upstreamConn
	// listings numbers the listings taken on the server's sessions
	// (upstreamConn.listed); listedAs numbers the one the served tools
	// were last built or checked from, and listedPrint is its fingerprint
	// (listingPrint), which a new session's listing is compared with.
	listings    uint64
	listedAs    uint64
	listedPrint string
	// replaced holds the fingerprints (listingPrint) of the lists served
	// and replaced since, oldest first: a listing has one served again
	// only when the session listed announced it (wasReplaced,
	// upstreamConn.announced).
	replaced []string
	// refreshed is when the last listing for a change started
	// (refreshLoop).
	refreshed time.Time
	// relisted is when a call of a tool not listed last had the tools
	// listed again (relist).
	relisted time.Time
	// progress holds, by the token the proxy gave an upstream call, the
	// relay of the call's progress to its client (mcp_progress.go).
	progress     sync.Map
	nextProgress atomic.Uint64
}

// dial is a connection being opened: done is closed once it is (or
// failed, err).
type dial struct {
	done chan struct{}
	err  error
}

// connect opens c's session with the server, following its tool list: a
// change the server announces on it is listed on it; a command's standard
// error is logged naming the session (c.label).
func (u *upstreamServer) connect(ctx context.Context, c *upstreamConn) (*mcp.ClientSession, error) {
	opts := &mcp.ClientOptions{ProgressNotificationHandler: u.relayProgress}
	if u.onChange != nil {
		// The handler runs on the session's reader: it does not wait for
		// mu there.
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			go func() {
				u.mu.Lock()
				defer u.mu.Unlock()
				// The announcement is the session's: a session let go
				// has no list to serve, and the listing taken on another
				// (the listing session's) is not the one announced.
				if !c.dropped {
					c.announced = true
					u.via = c
				}
				u.markChanged()
			}()
		}
	}
	log := u.log
	if log != nil {
		log = log.With("session", c.label)
	}
	return connect(ctx, u.name, u.spec, u.dir, u.lookupEnv, &u.secrets, opts, u.seenProgress, log)
}

// notSent reports whether err is a call the SDK refused before writing it
// because its connection was closing: its jsonrpc2 layer refuses a call
// initiated on a closing connection with "client is closing" (a call already
// written whose connection broke gets the read error instead), which the mcp
// layer reports as ErrConnectionClosed with that text, not wrapped
// (TestMCPStdioUpstreamExits holds this reading of the SDK).
func notSent(err error) bool {
	return err != nil && errors.Is(err, mcp.ErrConnectionClosed) && strings.Contains(err.Error(), "client is closing")
}

// close drops one generation's share of the server; the last closes its
// sessions, each once the cancellations of its calls are written (owe),
// all at once.
func (u *upstreamServer) close() {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return
	}
	if u.refs--; u.refs > 0 {
		u.mu.Unlock()
		return
	}
	u.closed = true
	if u.pending != nil {
		close(u.pending)
		u.pending = nil
	}
	conns := []*upstreamConn{u.main}
	for _, c := range u.scoped {
		u.forget(c)
		conns = append(conns, c)
	}
	u.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(c.close)
	}
	wg.Wait()
}

// upstreamTool is one tool of an upstream server.
type upstreamTool struct {
	server string
	name   string // the upstream's own name
	tool   *mcp.Tool
	up     *upstreamServer
	// maxResult bounds the size of a result (resultSize).
	maxResult int64
	// withheld is set, before the generation serves, when a security
	// layer blocked the tool's definition: the tool is not listed and a
	// call is refused.
	withheld *runtime.BlockedError
	// calls counts the calls sent upstream.
	calls atomic.Int64
}

// Upstream connects to one upstream MCP server of a plan: it starts the
// command (its relative program path resolved against dir) or connects to
// the URL. The caller closes the session.
func Upstream(ctx context.Context, name string, s plan.MCPServer, dir string) (*mcp.ClientSession, error) {
	var sec secrets
	return connect(ctx, name, s, dir, os.LookupEnv, &sec, nil, nil, nil)
}

// ListUpstream connects to one upstream MCP server of a plan as Upstream
// does, lists its tools (UpstreamTools) and closes the session. The
// values of the server's headers are scrubbed from its errors as a
// policy's credentials are, those written out as well (agentc mcp-tools
// -header takes them from its command line).
func ListUpstream(ctx context.Context, name string, s plan.MCPServer, dir string) ([]*mcp.Tool, error) {
	var sec secrets
	for _, v := range s.Headers {
		if lit, err := envtmpl.Expand(v, func(string) (string, bool) { return "", false }); err == nil {
			sec.add(lit)
			sec.add(lit[strings.LastIndexAny(lit, " \t")+1:])
		}
	}
	cs, err := connect(ctx, name, s, dir, os.LookupEnv, &sec, nil, nil, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cs.Close() }()
	tools, err := UpstreamTools(ctx, cs)
	if err != nil {
		return nil, fmt.Errorf("mcp server %q: list tools: %w", name, sec.err(err))
	}
	return tools, nil
}

// connect opens a session with server name. A command server gets the
// environment commandEnv gives it, and its standard error goes to log, a
// record a line (os.Stderr when log is nil). The values the headers read
// through lookupEnv, and those the env's credentials read, are recorded
// in sec. seen, when set, is told each message of a call's stream as the
// transport reads it, before the SDK reads the next.
func connect(ctx context.Context, name string, s plan.MCPServer, dir string, lookupEnv func(string) (string, bool), sec *secrets,
	opts *mcp.ClientOptions, seen func(jsonrpc.Message), log *slog.Logger) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "agentc-serve", Version: Version}, opts)
	client.AddSendingMiddleware(traceMeta)
	var t mcp.Transport
	switch {
	case len(s.Command) > 0 && len(s.Headers) > 0:
		return nil, fmt.Errorf("mcp server %q: headers apply to a url, not to a command", name)
	case len(s.Command) > 0:
		env, err := commandEnv(s.Env, lookupEnv, sec)
		if err != nil {
			return nil, fmt.Errorf("mcp server %q: %w", name, err)
		}
		cmd := exec.Command(s.Command[0], s.Command[1:]...)
		cmd.Dir = dir
		cmd.Env = env
		cmd.Stderr = os.Stderr
		if log != nil {
			w, err := stderrLog(log, name, sec)
			if err != nil {
				return nil, fmt.Errorf("mcp server %q: %w", name, err)
			}
			// The child holds its own end: the reader ends when it exits.
			defer w.Close()
			cmd.Stderr = w
		}
		t = noteCommand{&mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, seen}
	case s.URL != "":
		var rt http.RoundTripper = traceTransport{base: http.DefaultTransport}
		if len(s.Headers) > 0 {
			h, err := mcpHeaders(s.Headers, sec.lookup(lookupEnv))
			if err != nil {
				return nil, fmt.Errorf("mcp server %q: %w", name, err)
			}
			rt = headerTransport{header: h, base: rt}
		}
		t = &mcp.StreamableClientTransport{Endpoint: s.URL, MaxRetries: -1, HTTPClient: &http.Client{
			Transport: noteTransport{base: boundTransport{base: rt}, seen: seen}, CheckRedirect: wire.CheckRedirect}}
	default:
		return nil, fmt.Errorf("mcp server %q has neither command nor url", name)
	}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, &upstreamError{fmt.Errorf("mcp server %q: connect: %w", name, sec.err(err))}
	}
	return cs, nil
}

// maxStderrLine bounds a line of a command server's standard error in the
// log: the rest of a longer line is left out.
const maxStderrLine = 4 << 10

// stderrLog returns the writing end of a pipe whose lines are logged to log
// as records naming server name (a line the JSON log keeps whole, where the
// raw bytes would break it), each cut at maxStderrLine, with the values sec
// recorded (the credentials the server's env read, and each long line of
// one of several lines) scrubbed; a line cut ends before any start of such
// a value there (secrets.cut).
func stderrLog(log *slog.Logger, name string, sec *secrets) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		defer r.Close()
		br := bufio.NewReaderSize(r, maxStderrLine)
		skip := false // the rest of a line over the bound
		for {
			line, err := br.ReadSlice('\n')
			cut := errors.Is(err, bufio.ErrBufferFull)
			if text := strings.TrimRight(string(line), "\r\n"); !skip && text != "" {
				if cut {
					text = sec.cut(text)
				} else {
					text = sec.scrub(text)
				}
				log.Info("mcp server stderr", "server", name, "line", text)
			}
			skip = cut
			if err != nil && !skip {
				return
			}
		}
	}()
	return w, nil
}

// maxUpstreamMessageBytes bounds one message an upstream sends: the SDK
// bounds a stdio line and an event of an event stream so (its
// DefaultMaxLineLength and DefaultMaxEventSize), and reads a JSON body
// whole, which boundTransport bounds alike. A message over it ends the
// session, as one the SDK refuses does.
const maxUpstreamMessageBytes = mcp.DefaultMaxEventSize

// boundTransport bounds each response body of an HTTP upstream that is not
// an event stream (a JSON answer, an error's body) to
// maxUpstreamMessageBytes: the SDK reads it whole before any limit of the
// proxy applies, so an upstream answering a list with a gigabyte would
// hold it in memory.
type boundTransport struct{ base http.RoundTripper }

func (t boundTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body = &boundBody{ReadCloser: resp.Body, left: maxUpstreamMessageBytes + 1}
	}
	return resp, nil
}

// boundBody fails a read past maxUpstreamMessageBytes.
type boundBody struct {
	io.ReadCloser
	left int64
}

func (b *boundBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the server's message is over the limit of %d bytes", maxUpstreamMessageBytes)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// The bounds of an upstream's tool list. An upstream that pages without
// end (a cursor that never runs out, or comes back) or lists more than
// these would hold the load for connectTimeout while its list grew in
// memory: its list fails as one that cannot be taken. A definition larger
// than maxToolDefBytes is withheld (toolTooLarge).
const (
	maxUpstreamTools     = 10_000
	maxUpstreamToolBytes = 16 << 20
	maxUpstreamPages     = 1_000
	maxToolDefBytes      = 128 << 10
)

// UpstreamTools lists every tool of a session, following pagination, within
// the bounds above (maxUpstreamTools definitions, maxUpstreamToolBytes of
// their JSON, maxUpstreamPages pages, no cursor twice), each name once: a
// call names its tool by name, so of two definitions under one name (the
// one scanned, the one the server runs) neither can be trusted.
func UpstreamTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var out []*mcp.Tool
	var size int
	params := &mcp.ListToolsParams{}
	cursors := map[string]bool{}
	names := map[string]bool{}
	for page := 1; ; page++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, err
		}
		for _, t := range res.Tools {
			if len(out) == maxUpstreamTools {
				return nil, fmt.Errorf("the server lists more than %d tools, the limit", maxUpstreamTools)
			}
			b, err := json.Marshal(t)
			if err != nil {
				return nil, fmt.Errorf("tool %q: %w", t.Name, err)
			}
			if size += len(b); size > maxUpstreamToolBytes {
				return nil, fmt.Errorf("the server's tool definitions are over the limit of %d bytes", maxUpstreamToolBytes)
			}
			if names[t.Name] {
				return nil, fmt.Errorf("the server lists tool %.64q twice: a call names its tool by name, so which of the two definitions it would run cannot be told", t.Name)
			}
			names[t.Name] = true
			out = append(out, t)
		}
		switch {
		case res.NextCursor == "":
			return out, nil
		case cursors[res.NextCursor]:
			return nil, fmt.Errorf("the server's list gave cursor %.64q again on page %d: it never ends", res.NextCursor, page)
		case page == maxUpstreamPages:
			return nil, fmt.Errorf("the server's list goes on past %d pages, the limit", maxUpstreamPages)
		}
		if size += len(res.NextCursor); size > maxUpstreamToolBytes {
			return nil, fmt.Errorf("the server's tool definitions are over the limit of %d bytes", maxUpstreamToolBytes)
		}
		cursors[res.NextCursor] = true
		params.Cursor = res.NextCursor
	}
}

// connectUpstreams connects to every upstream server and lists its tools.
// Two or more servers exposing the same tool name fail (a prefix keeps
// them apart), once every server is listed, so that the error names each
// server that exposes it. On failure every session opened is closed.
// onChange is called (one call at a time per server) when a server's
// tools may have changed. A tenant's session closes after idle without a
// call; m counts the callers' sessions.
func connectUpstreams(ctx context.Context, servers map[string]plan.MCPServer, dir string, lookupEnv func(string) (string, bool),
	log *slog.Logger, maxResult int64, onChange func(*upstreamServer), idle time.Duration, m *metrics) (*upstreams, error) {
	u := &upstreams{servers: map[string]*upstreamServer{}, tools: map[string]*upstreamTool{}, maxResult: maxResult}
	names := make([]string, 0, len(servers))
	for name := range servers {
		names = append(names, name)
	}
	sort.Strings(names)
	listed := make([]serverTools, 0, len(names))
	for _, name := range names {
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		spec := servers[name]
		up := &upstreamServer{name: name, spec: spec, dir: dir, lookupEnv: lookupEnv, log: log, onChange: onChange, refs: 1,
			scope: sessionScope(spec), maxSessions: maxScopedSessions(spec), idle: idle, m: m, scoped: map[string]*upstreamConn{}}
		up.main = &upstreamConn{u: up, label: "listing"}
		cs, err := up.connect(cctx, up.main)
		if err != nil {
			cancel()
			u.close()
			return nil, err
		}
		up.main.watch(cs)
		u.servers[name] = up
		tools, err := UpstreamTools(cctx, cs)
		cancel()
		if err != nil {
			u.close()
			return nil, &upstreamError{fmt.Errorf("mcp server %q: list tools: %w", name, up.secrets.err(err))}
		}
		fp := listingPrint(byName(tools))
		up.mu.Lock()
		up.main.note(cs, tools)
		up.listedAs, up.listedPrint = up.main.listing, fp
		up.mu.Unlock()
		listed = append(listed, serverTools{up: up, tools: tools})
		log.Info("mcp upstream connected", "server", name, "tools", len(tools))
	}
	if err := u.add(listed...); err != nil {
		u.close()
		return nil, err
	}
	sort.Strings(u.names)
	return u, nil
}

// serverTools are the tools a server lists.
type serverTools struct {
	up    *upstreamServer
	tools []*mcp.Tool
}

// add serves the tools of each server of listed, given in the servers'
// order, beside those u serves. A name two or more servers expose (a
// prefix keeps them apart) fails: the error names each such name with
// every server that exposes it (clashes).
func (u *upstreams) add(listed ...serverTools) error {
	by := make(map[string][]*upstreamServer, len(u.tools))
	for name, t := range u.tools {
		by[name] = []*upstreamServer{t.up}
	}
	for _, l := range listed {
		for _, t := range l.tools {
			exposed := l.up.spec.Prefix + t.Name
			by[exposed] = append(by[exposed], l.up)
			if len(by[exposed]) == 1 {
				u.tools[exposed] = &upstreamTool{server: l.up.name, name: t.Name, tool: t, up: l.up, maxResult: u.maxResult}
				u.names = append(u.names, exposed)
			}
		}
	}
	return clashes(by)
}

// clashes returns the error of the tool names that two or more servers
// expose (by: the servers exposing each name), nil when there are none:
// one line for each set of servers sharing names, which names those
// tools and the servers (by name, with the positions where the policy
// declares them), in their order.
func clashes(by map[string][]*upstreamServer) error {
	type group struct {
		servers []*upstreamServer
		tools   []string
	}
	groups := map[string]*group{}
	for name, servers := range by {
		if len(servers) < 2 {
			continue
		}
		servers = slices.Clone(servers)
		slices.SortFunc(servers, func(a, b *upstreamServer) int { return strings.Compare(a.name, b.name) })
		key := make([]string, len(servers))
		for i, up := range servers {
			key[i] = up.name
		}
		k := strings.Join(key, "\x00")
		if groups[k] == nil {
			groups[k] = &group{servers: servers}
		}
		groups[k].tools = append(groups[k].tools, name)
	}
	if len(groups) == 0 {
		return nil
	}
	list := slices.Collect(maps.Values(groups))
	for _, g := range list {
		sort.Strings(g.tools)
	}
	slices.SortFunc(list, func(a, b *group) int { return strings.Compare(a.tools[0], b.tools[0]) })
	errs := make([]error, len(list))
	for i, g := range list {
		errs[i] = clashError(g.tools, g.servers)
	}
	return errors.Join(errs...)
}

// clashError says that the tools are served by each of servers (two or
// more), at the position of the last server's declaration when the
// policy gives each one's.
func clashError(tools []string, servers []*upstreamServer) error {
	what := fmt.Sprintf("tool %q is", tools[0])
	if len(tools) > 1 {
		what = fmt.Sprintf("tools %s are", quotedList(tools))
	}
	names := make([]string, len(servers))
	pos := make([]string, len(servers))
	for i, up := range servers {
		names[i], pos[i] = up.name, up.spec.Pos
	}
	by, fix := "both "+quotedList(names), "give one of them a prefix"
	if len(servers) > 2 {
		by, fix = quotedList(names), "give all but one of them a prefix"
	}
	if !slices.Contains(pos, "") {
		return fmt.Errorf("%s: mcp: %s served by %s (declared at %s); %s", pos[len(pos)-1], what, by, andList(pos), fix)
	}
	return fmt.Errorf("mcp: %s served by %s; %s", what, by, fix)
}

// quotedList writes names quoted, as andList does.
func quotedList(names []string) string {
	quoted := make([]string, len(names))
	for i, name := range names {
		quoted[i] = strconv.Quote(name)
	}
	return andList(quoted)
}

// andList writes items as "a", "a and b" or "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// toolScanner is a layer that checks a tool definition outside a chat
// call (the security builtin's ScanTool).
type toolScanner interface {
	ScanTool(ctx context.Context, td runtime.ToolDef) error
}

// scanConcurrency bounds the definitions scanned at once (a classifier is
// one request per definition).
const scanConcurrency = 8

// scan checks every upstream tool's definition with ScanTools and withholds
// from this generation each tool a layer blocks: not listed, its calls
// refused; the others are served, their definitions noted as the ones
// their servers serve (upstreamServer.served). The next reload, or a
// change of a server's list (refreshMCP), lists and scans the tools again.
func (u *upstreams) scan(ctx context.Context, pl *runtime.Pipeline, log *slog.Logger) {
	tools := make([]ListedTool, 0, len(u.names))
	for _, name := range u.names {
		tools = append(tools, ListedTool{Name: name, Server: u.tools[name].server, Tool: u.tools[name].tool})
	}
	for name, b := range ScanTools(ctx, pl, tools, log) {
		u.tools[name].withheld = b
	}
	for _, name := range u.names {
		if t := u.tools[name]; t.withheld == nil {
			if extra := undeclaredArgs(pl.Plan().Tools[name].Args, t.tool.InputSchema); len(extra) > 0 {
				log.Warn("mcp tool's input schema lists arguments its declaration in the policy does not", "tool", name, "server", t.server,
					"arguments", extra)
			}
			// A tool whose args the policy declares is checked against
			// them (toolArgs), not against its input schema.
			if b, err := json.Marshal(t.tool.InputSchema); err == nil && len(pl.Plan().Tools[name].Args) == 0 {
				if _, inert := closeUnevaluated(b); inert {
					log.Warn("mcp tool's input schema closes an object with unevaluatedProperties, which its draft does not have: the object is checked open, a call carrying other arguments passing; declare the tool's args in the policy, closed (additionalProperties: false)",
						"tool", name, "server", t.server)
				}
			}
		}
	}
	for _, up := range u.servers {
		up.setServed(u.served(up))
	}
	fx := make(map[string]runtime.ToolEffects, len(u.tools))
	for name, t := range u.tools {
		fx[name] = annotatedEffects(t.tool)
	}
	pl.DeclareToolEffects(fx)
}

// undeclaredArgs returns, sorted, the arguments an upstream tool's input
// schema lists (its properties) that the policy's declaration of the tool,
// declared, does not, when the declaration is open: the tool chain checks a
// call against the declaration, so such an argument passes it unchecked
// (by file_check, egress, a guard typed against the declaration). Nil when
// the policy declares no arguments for the tool, or closes them
// (additionalProperties: false refuses a call carrying another).
func undeclaredArgs(declared json.RawMessage, upstream any) []string {
	var decl struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	}
	if len(declared) == 0 || json.Unmarshal(declared, &decl) != nil || string(decl.AdditionalProperties) == "false" {
		return nil
	}
	b, err := json.Marshal(upstream)
	if err != nil {
		return nil
	}
	var up struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(b, &up) != nil {
		return nil
	}
	var extra []string
	for name := range up.Properties {
		if _, ok := decl.Properties[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	return extra
}

// annotatedEffects returns the effects t's annotations state, with the MCP
// specification's defaults for those it leaves out: a tool is
// side-effecting unless readOnlyHint is true, and retry_safe only when
// idempotentHint is true. A declaration of the tool in the policy wins
// (runtime.Pipeline.DeclareToolEffects).
func annotatedEffects(t *mcp.Tool) runtime.ToolEffects {
	a := t.Annotations
	if a == nil {
		return runtime.ToolEffects{SideEffecting: true}
	}
	return runtime.ToolEffects{SideEffecting: !a.ReadOnlyHint, RetrySafe: a.IdempotentHint}
}

// ListedTool is an upstream tool under the name it is served as.
type ListedTool struct {
	Name   string // the name it is served under (the server's prefix and the tool's name)
	Server string
	Tool   *mcp.Tool
}

// ScanTools checks the definitions of upstream tools, as the model of an
// MCP client will read them (the name each is served under, its title and
// description, its input schema), with every layer of pl's chat chain that
// checks tool definitions (security): the descriptions are third-party text
// that clients put in front of their model, and a poisoned one is an
// injection. It returns, by name, the block of each tool a layer blocked:
// serve withholds these. A definition a classifier could not decide is
// blocked with on_error "closed" (the layer's block says so) and passes,
// logged, with "open". A tool whose name is not a valid MCP tool name
// (badToolName), or whose definition is too large (toolTooLarge), is
// blocked whatever the layers, and so is one whose input schema is not a
// JSON Schema the tool chain compiles (badInputSchema), and one whose name
// differs only in case or form from the name of a tool pl's policy names
// or of another tool of tools (lookAlikes).
func ScanTools(ctx context.Context, pl *runtime.Pipeline, tools []ListedTool, log *slog.Logger) map[string]*runtime.BlockedError {
	blocked := map[string]*runtime.BlockedError{}
	names, rules := policyToolNames(pl.Plan())
	lookAlike := lookAlikes(tools, names, rules)
	for _, t := range tools {
		if b := badToolName(t.Name); b != nil {
			blocked[t.Name] = b
			log.Warn("mcp tool withheld: its name is not a valid MCP tool name, one a policy can write", "tool", t.Name, "server", t.Server, "reason", b.Message)
		} else if b := toolTooLarge(t.Tool); b != nil {
			blocked[t.Name] = b
			log.Warn("mcp tool withheld: its definition is too large", "tool", t.Name, "server", t.Server, "reason", b.Message)
		} else if b := badInputSchema(t.Tool); b != nil {
			blocked[t.Name] = b
			log.Warn("mcp tool withheld: its input schema is not a valid JSON Schema", "tool", t.Name, "server", t.Server, "reason", b.Message)
		}
	}
	for _, t := range tools {
		if b := lookAlike[t.Name]; b != nil && blocked[t.Name] == nil {
			blocked[t.Name] = b
			log.Warn("mcp tool withheld: its name differs from another tool's only in case or form", "tool", t.Name, "server", t.Server, "reason", b.Message)
		}
	}
	var layers []runtime.LayerInfo
	for _, l := range pl.Layers(plan.StageChat) {
		if _, ok := l.Middleware.(toolScanner); ok {
			layers = append(layers, l)
		}
	}
	if len(layers) == 0 || len(tools) == 0 {
		return blocked
	}
	var mu sync.Mutex
	sem := make(chan struct{}, scanConcurrency)
	var wg sync.WaitGroup
	for _, t := range tools {
		mu.Lock()
		named := blocked[t.Name] != nil // by its name or size, above
		mu.Unlock()
		if named {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			td := toolDef(t.Name, t.Tool)
			for _, l := range layers {
				err := l.Middleware.(toolScanner).ScanTool(ctx, td)
				var b *runtime.BlockedError
				switch {
				case errors.As(err, &b):
					if b.Layer == "" {
						b.Layer = l.Name
					}
					mu.Lock()
					blocked[t.Name] = b
					mu.Unlock()
					log.Warn("mcp tool withheld: a security layer blocked its definition", "tool", t.Name, "server", t.Server,
						"layer", b.Layer, "reason", b.Message)
					return
				case err != nil:
					log.Warn("mcp tool served unchecked: its definition could not be scanned", "tool", t.Name, "server", t.Server,
						"layer", l.Name, "error", err)
				}
			}
		}()
	}
	wg.Wait()
	return blocked
}

// badToolName returns the block of a tool served under a name that is not
// a valid MCP tool name (letters, digits and "_", "-", ".", with the ":"
// and "/" a policy's prefix may add) or not one the policy language
// writes (policyName: it starts with a letter or "_"), or nil. A name
// with other characters can look like another tool's: "rеfund" with a
// Cyrillic "е", or "refund" followed by a zero-width space, escapes every
// rule that names "refund" while the client's model reads it as that
// tool. A name such as "9x", "-del" or ".hidden" no rule can name at all:
// tool_policy could not deny it, tools: not declare it (nor its path
// argument, for file_check). It is checked as served, prefix included: a
// prefix "fs_" makes "9x" the name "fs_9x".
func badToolName(name string) *runtime.BlockedError {
	if name == "" {
		return &runtime.BlockedError{Layer: "mcp", Message: "the tool has no name"}
	}
	for _, r := range name {
		if !policyName.MatchString("_" + string(r)) {
			return &runtime.BlockedError{Layer: "mcp", Message: fmt.Sprintf(
				"tool name %q holds %q, which is not an ASCII letter, a digit or one of \"_-.:/\": a look-alike of another tool's name would escape the rules that name it", name, r)}
		}
	}
	if !policyName.MatchString(name) {
		return &runtime.BlockedError{Layer: "mcp", Message: fmt.Sprintf(
			"tool name %q starts with %q: a policy's names start with a letter or _, so no rule could name the tool (tool_policy deny it, tools: declare it and its path or url arguments); a server prefix such as \"x_\" makes it a name the policy writes", name, name[:1])}
	}
	return nil
}

// policyName matches a name the policy language writes (#Identifier).
var policyName = regexp.MustCompile(schemas.IdentifierPattern)

// toolTooLarge returns the block of a tool whose definition (its JSON) is
// over maxToolDefBytes, or nil. A client puts every definition listed in
// front of its model on every turn: a description of a megabyte floods its
// context (about a quarter of a million tokens) and drowns the other tools.
func toolTooLarge(t *mcp.Tool) *runtime.BlockedError {
	b, err := json.Marshal(t)
	if err != nil {
		return &runtime.BlockedError{Layer: "mcp", Message: "the tool's definition does not encode as JSON: " + err.Error()}
	}
	if len(b) > maxToolDefBytes {
		return &runtime.BlockedError{Layer: "mcp", Message: fmt.Sprintf(
			"the tool's definition is %d bytes, over the limit of %d: a client would put it in front of its model on every turn", len(b), maxToolDefBytes)}
	}
	return nil
}

// badInputSchema returns the block of a tool whose input schema is not a
// JSON Schema the tool chain compiles to check a call's arguments, or
// nil. Its arguments could not be checked: the tool is withheld, the
// server's other tools served (toolArgs gives the chain no schema for it).
func badInputSchema(t *mcp.Tool) *runtime.BlockedError {
	b, err := json.Marshal(t.InputSchema)
	if err == nil {
		err = runtime.CheckArgsSchema(b)
	}
	if err != nil {
		return &runtime.BlockedError{Layer: "mcp", Message: "the tool's input schema is not a valid JSON Schema: " + err.Error()}
	}
	return nil
}

// toolDef is the definition of an upstream tool as an MCP client's model
// reads it: the name it is served under, its titles and description, its
// input schema (Parameters), and the keys and strings of the rest the proxy
// lists (its output schema, icons and _meta), one a line after the
// description: a client may put any of them in front of its model.
func toolDef(name string, t *mcp.Tool) runtime.ToolDef {
	var desc []string
	if t.Title != "" {
		desc = append(desc, t.Title)
	}
	if t.Annotations != nil && t.Annotations.Title != "" && t.Annotations.Title != t.Title {
		desc = append(desc, t.Annotations.Title)
	}
	desc = append(desc, t.Description)
	rest := struct {
		OutputSchema any        `json:"outputSchema,omitempty"`
		Icons        []mcp.Icon `json:"icons,omitempty"`
		Meta         mcp.Meta   `json:"_meta,omitempty"`
	}{t.OutputSchema, t.Icons, t.Meta}
	if b, err := json.Marshal(rest); err == nil {
		var v any
		if json.Unmarshal(b, &v) == nil {
			desc = appendStrings(desc, v)
		}
	}
	td := runtime.ToolDef{Name: name, Description: strings.Join(desc, "\n")}
	if b, err := json.Marshal(t.InputSchema); err == nil {
		td.Parameters = b
	}
	return td
}

// appendStrings appends the keys and strings of v, a decoded JSON value, in
// the order of its keys.
func appendStrings(out []string, v any) []string {
	switch v := v.(type) {
	case string:
		out = append(out, v)
	case []any:
		for _, e := range v {
			out = appendStrings(out, e)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = appendStrings(append(out, k), v[k])
		}
	}
	return out
}

// close closes the sessions with the servers, one after the other.
func (u *upstreams) close() {
	if u == nil {
		return
	}
	names := slices.Sorted(maps.Keys(u.servers))
	for i, name := range names {
		u.closingMu.Lock()
		u.closing = names[i:]
		u.closingMu.Unlock()
		u.servers[name].close()
		delete(u.servers, name)
	}
	u.closingMu.Lock()
	u.closing = nil
	u.closingMu.Unlock()
}

// stillClosing returns the servers whose sessions close has yet to close
// (the one it waits for first).
func (u *upstreams) stillClosing() []string {
	if u == nil {
		return nil
	}
	u.closingMu.Lock()
	defer u.closingMu.Unlock()
	return slices.Clone(u.closing)
}

// toolFuncs returns a runtime tool per upstream tool: it calls the
// upstream and returns its result (see resultValue).
func (u *upstreams) toolFuncs() map[string]runtime.ToolFunc {
	out := map[string]runtime.ToolFunc{}
	for exposed, t := range u.tools {
		out[exposed] = t.call
	}
	return out
}

// toolArgs returns host, plus the input schema of every upstream tool by
// the name the proxy exposes (runtime.Deps.ToolArgs).
func (u *upstreams) toolArgs(host map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for exposed, t := range u.tools {
		b, err := json.Marshal(t.tool.InputSchema)
		if err == nil {
			b, _ = closeUnevaluated(b)
		}
		if err != nil || runtime.CheckArgsSchema(b) != nil {
			// A schema that cannot be compiled checks nothing: the tool
			// still counts as declared, and is withheld (badInputSchema).
			b = nil
		}
		out[exposed] = b
	}
	maps.Copy(out, host)
	return out
}

// call runs the upstream tool. A result the upstream marks as an error is a
// permanent failure carrying its text; a protocol error from the upstream is
// permanent, and marked runtime.NotRun when its code says the request was
// refused before the tool ran (refusedUnread). A call that could not be sent (no session, a connection
// refused) is transient and marked runtime.NotRun. A connection that broke
// after the call was sent is transient for a tool that is read-only or
// retry_safe, and marked runtime.MayHaveRun (in doubt) for any other: the
// upstream may have acted.
func (t *upstreamTool) call(ctx context.Context, c *runtime.ToolCall) (any, error) {
	if t.withheld != nil {
		b := *t.withheld
		b.Message = "the tool's definition was withheld: " + b.Message
		return nil, &b
	}
	if err := notSentOf(ctx); err != nil {
		return nil, err
	}
	args := c.Args
	if args == nil {
		args = map[string]any{}
	}
	conn, release, err := t.up.take(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	cs, err := conn.session(ctx)
	if err != nil {
		return nil, runtime.NotRun(&runtime.CallError{Kind: runtime.KindTransient, Err: err})
	}
	if err := t.up.admit(ctx, t, conn, cs); err != nil {
		return nil, err
	}
	nctx, note := noting(ctx)
	nctx, raw := withRawResult(nctx)
	defer raw.done()
	params := &mcp.CallToolParams{Name: t.name, Arguments: sentArgs(ctx, c, args)}
	withIdempotencyKey(params, c)
	defer t.up.following(ctx, params)()
	res, err := cs.CallTool(nctx, params)
	if notSent(err) {
		// The session was ending as the call started (the upstream's
		// process had just exited): the call was refused before it was
		// written, so it is sent once on a new session.
		if cs, err = conn.renew(ctx, cs); err != nil {
			return nil, runtime.NotRun(&runtime.CallError{Kind: runtime.KindTransient, Err: err})
		}
		if err := t.up.admit(ctx, t, conn, cs); err != nil {
			return nil, err
		}
		res, err = cs.CallTool(nctx, params)
	}
	if !notSent(err) {
		t.calls.Add(1)
	}
	if err != nil {
		if ctx.Err() != nil {
			if owesCancel(ctx, err) {
				conn.owe(cs, note)
			}
			return nil, ctx.Err()
		}
		// An HTTP request that failed (the SDK reports it "rejected by
		// transport", a JSON-RPC error, though a request that broke after
		// it was written reached the server) is a transport failure, not
		// the upstream's answer.
		var ue *url.Error
		var we *jsonrpc.Error
		if !errors.As(err, &ue) && errors.As(err, &we) {
			ce := &runtime.CallError{Kind: runtime.KindPermanent, Message: fmt.Sprintf("mcp server %q: %s", t.server, t.up.secrets.scrub(we.Message))}
			if refusedUnread(we.Code) {
				return nil, runtime.NotRun(ce)
			}
			return nil, ce
		}
		if ue == nil && (errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF)) {
			conn.lost(cs)
		}
		ce := &runtime.CallError{Kind: runtime.KindTransient, Message: fmt.Sprintf("mcp server %q", t.server), Err: t.up.secrets.err(err)}
		if runtime.DidNotRun(err) {
			return nil, runtime.NotRun(ce)
		}
		if c.Tool != nil && (!c.Tool.SideEffecting || c.Tool.RetrySafe) {
			return nil, ce
		}
		ce.Message += ": the connection failed after the call was sent, so the tool may have run"
		return nil, runtime.MayHaveRun(ce)
	}
	// The result served is the one bounded: its structured content and
	// _meta as read again from the upstream's text.
	exactResult(res, raw.done())
	if n, over := resultSize(res, t.maxResult); over {
		// The tool ran: its effect stands, so the error says so (an
		// idempotent layer stores it instead of letting a duplicate run
		// the tool again).
		return nil, runtime.Ran(&runtime.CallError{Kind: runtime.KindPermanent, Message: fmt.Sprintf(
			"mcp server %q: the tool ran, but its result is over the limit of %d bytes (%d bytes at least) and was dropped", t.server, t.maxResult, n)})
	}
	textBlobs(res)
	if res.IsError {
		return nil, &runtime.CallError{Kind: runtime.KindPermanent, Message: t.up.secrets.scrub(resultText(res))}
	}
	return t.up.secrets.value(resultValue(res)), nil
}

// refusedUnread reports whether a JSON-RPC error code says the upstream
// refused the request before running it: it could not parse it, the request
// or its method is unknown, or its parameters (the tool's name, its
// arguments) are invalid. Any other error may come from a tool that ran.
func refusedUnread(code int64) bool {
	switch code {
	case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
		return true
	}
	return false
}

// textBlobs turns each embedded resource whose blob is text (valid UTF-8
// without a NUL byte) into the same resource with that text: a client may
// decode the blob and hand it to its model, and as base64 it would pass
// the layers that read a result's text (redact, truncate) unread.
func textBlobs(res *mcp.CallToolResult) {
	for _, c := range res.Content {
		if e, ok := c.(*mcp.EmbeddedResource); ok && e.Resource != nil && len(e.Resource.Blob) > 0 && e.Resource.Text == "" &&
			utf8.Valid(e.Resource.Blob) && bytes.IndexByte(e.Resource.Blob, 0) < 0 {
			e.Resource.Text, e.Resource.Blob = string(e.Resource.Blob), nil
		}
	}
}

// resultSize adds up the bytes of a result, as far as max: the text of
// its contents, their data (images, audio, embedded resources), their
// URIs, names, media types, icons, annotations and _meta, and the keys
// and strings of its structured content and its _meta (a number its
// digits as written, 8 bytes another scalar): everything the client is
// relayed. It reports whether the sum is over max; the sum stops growing
// once it is.
func resultSize(res *mcp.CallToolResult, max int64) (int64, bool) {
	var n int64
	for _, c := range res.Content {
		var meta mcp.Meta
		var ann *mcp.Annotations
		switch c := c.(type) {
		case *mcp.TextContent:
			n += int64(len(c.Text))
			meta, ann = c.Meta, c.Annotations
		case *mcp.ImageContent:
			n += int64(len(c.Data) + len(c.MIMEType))
			meta, ann = c.Meta, c.Annotations
		case *mcp.AudioContent:
			n += int64(len(c.Data) + len(c.MIMEType))
			meta, ann = c.Meta, c.Annotations
		case *mcp.ResourceLink:
			n += int64(len(c.URI) + len(c.Name) + len(c.Title) + len(c.Description) + len(c.MIMEType))
			if len(c.Icons) > 0 {
				b, _ := json.Marshal(c.Icons)
				n += int64(len(b))
			}
			meta, ann = c.Meta, c.Annotations
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil {
				n += int64(len(r.URI) + len(r.Text) + len(r.Blob) + len(r.MIMEType))
				if n, _ = valueSize(map[string]any(r.Meta), n, max); n > max {
					return n, true
				}
			}
			meta, ann = c.Meta, c.Annotations
		default:
			n += 8
		}
		if ann != nil {
			n += int64(len(ann.LastModified)) + 8
			for _, r := range ann.Audience {
				n += int64(len(r)) + 1
			}
		}
		if n, _ = valueSize(map[string]any(meta), n, max); n > max {
			return n, true
		}
	}
	if n, over := valueSize(res.StructuredContent, n, max); over {
		return n, true
	}
	return valueSize(map[string]any(res.Meta), n, max)
}

// valueSize adds the size of a decoded JSON value to n, stopping once the
// sum is over max.
func valueSize(v any, n, max int64) (int64, bool) {
	switch v := v.(type) {
	case nil:
	case string:
		n += int64(len(v))
	case json.Number:
		n += int64(len(v)) // read as written: its text is what is relayed
	case json.RawMessage:
		n += int64(len(v))
	case []any:
		for _, e := range v {
			var over bool
			if n, over = valueSize(e, n+1, max); over {
				return n, true
			}
		}
	case map[string]any:
		for k, e := range v {
			var over bool
			if n, over = valueSize(e, n+int64(len(k))+1, max); over {
				return n, true
			}
		}
	default:
		n += 8
	}
	return n, n > max
}

// resultValue is how an upstream result passes the tool chain: a result of
// text contents only is its text (so truncate and redact work on it);
// any other result is its JSON object, numbers as runtime.DecodeArgs
// decodes them (an integer above 2^53 of its structured content an int64).
func resultValue(res *mcp.CallToolResult) any {
	if res.StructuredContent == nil {
		text, ok := onlyText(res)
		if ok {
			return text
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return resultText(res)
	}
	var m map[string]any
	if runtime.DecodeArgs(b, &m) != nil {
		return resultText(res)
	}
	return m
}

func onlyText(res *mcp.CallToolResult) (string, bool) {
	var parts []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			return "", false
		}
		parts = append(parts, tc.Text)
	}
	return strings.Join(parts, "\n"), true
}

func resultText(res *mcp.CallToolResult) string {
	if text, ok := onlyText(res); ok && text != "" {
		return text
	}
	b, _ := json.Marshal(res.Content)
	return string(b)
}

// toolResult turns the value the tool chain returned back into an MCP
// result: a string is one text content, an upstream result's JSON is decoded
// again (its structured content and _meta kept as the chain holds them, not
// read again as float64; each of its contents in its place, mcpContent),
// any other value is its JSON text.
func toolResult(v any) *mcp.CallToolResult {
	switch v := v.(type) {
	case string:
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: v}}}
	case map[string]any:
		if items, ok := v["content"].([]any); ok {
			rest := maps.Clone(v)
			delete(rest, "content")
			delete(rest, "structuredContent")
			delete(rest, "_meta")
			b, err := json.Marshal(rest)
			var res mcp.CallToolResult
			if err == nil && json.Unmarshal(b, &res) == nil {
				res.Content = make([]mcp.Content, 0, len(items))
				for _, item := range items {
					res.Content = append(res.Content, mcpContent(item))
				}
				if sc, ok := v["structuredContent"]; ok && sc != nil {
					res.StructuredContent = sc
				}
				if meta, ok := v["_meta"].(map[string]any); ok {
					res.Meta = meta
				}
				return &res
			}
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprint(v))
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: v}
}

// mcpContent decodes one content of an upstream result as the tool chain
// returned it. A content a layer changed so that it is no longer valid MCP
// content is not relayed as it is: an image, audio or embedded resource
// whose data a layer masked (no longer base64), or that lost its type, its
// media type or its URI to a mask, is a text saying what it was and that
// its data was masked; a text content that lost its type is its text; and
// anything else that is not a content of a tool result (an unknown type)
// is its JSON text. No content goes out with an empty type.
func mcpContent(item any) mcp.Content {
	m, _ := item.(map[string]any)
	if m == nil {
		return jsonText(item)
	}
	if b, err := json.Marshal(map[string]any{"content": []any{m}}); err == nil {
		var one mcp.CallToolResult
		if json.Unmarshal(b, &one) == nil && len(one.Content) == 1 && validContent(one.Content[0]) {
			return one.Content[0]
		}
	}
	typ, _ := m["type"].(string)
	what := typ
	switch {
	case typ == "resource" || (typ == "" && m["resource"] != nil):
		what = "resource"
		if r, ok := m["resource"].(map[string]any); ok {
			if uri, ok := r["uri"].(string); ok && uri != "" {
				what = fmt.Sprintf("resource %q", uri)
			}
		}
	case typ == "image" || typ == "audio":
		if mt, ok := m["mimeType"].(string); ok && mt != "" {
			what = mt + " " + typ
		}
	case typ == "" && m["data"] != nil:
		what = "image or audio"
	case typ == "":
		if text, ok := m["text"].(string); ok {
			return &mcp.TextContent{Text: text}
		}
		return jsonText(item)
	default:
		return jsonText(item)
	}
	return &mcp.TextContent{Text: "[" + what + " content not relayed: a layer of the tool chain masked its data, and it is no longer valid MCP content]"}
}

// jsonText is a text content holding v's JSON.
func jsonText(v any) *mcp.TextContent {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprint(v))
	}
	return &mcp.TextContent{Text: string(b)}
}

// validContent reports whether c is a content a tool result may carry,
// whole: an image or audio has a media type, an embedded resource its
// URI and contents, a resource link its URI and name.
func validContent(c mcp.Content) bool {
	switch c := c.(type) {
	case *mcp.TextContent:
		return true
	case *mcp.ImageContent:
		return c.MIMEType != ""
	case *mcp.AudioContent:
		return c.MIMEType != ""
	case *mcp.EmbeddedResource:
		return c.Resource != nil && c.Resource.URI != ""
	case *mcp.ResourceLink:
		return c.URI != "" && c.Name != ""
	}
	return false
}

// mcpProxy is the server side of the proxy: one MCP server for the
// server's lifetime, whose tool list follows the current generation.
type mcpProxy struct {
	s       *Server
	server  *mcp.Server
	handler http.Handler
	// keyed is handler behind the binding of sessions to keys: the SDK
	// refuses (403) a request on a session opened by another user.
	keyed  http.Handler
	mu     sync.Mutex
	listed map[string]bool
	// requests holds every POST in flight on the endpoint (an
	// *mcpPost), by the token mcpHandler puts in its requestHeader.
	requests sync.Map
	nextReq  atomic.Uint64
	// live tracks each session's standalone event stream and the POSTs in
	// flight on it, so the shutdown can end the streams (see liveSessions).
	live liveSessions
	// sessions bounds the sessions each key keeps open.
	sessions sessionCap
	// clients holds, by client session id, a channel closed when the
	// session ends, for its upstream sessions to close (clientEnded).
	clientsMu sync.Mutex
	clients   map[string]chan struct{}
	// sessionRuns holds the runs of the sessions open (beginRun).
	sessionRuns sync.Map
}

// requestHeader carries, from mcpHandler to callTool, the token of the
// HTTP request a message came in: the SDK runs a call on a context of its
// own, which the request's end does not cancel. A client's own value is
// dropped.
const requestHeader = "X-Agentc-Mcp-Request"

// errRequestGone cancels a call whose HTTP request ended before its answer:
// the client went away (or the shutdown cut it), and with no event store
// the answer could never reach it.
var errRequestGone = errors.New("the MCP request ended before the call's answer (the client went away or the server is shutting down)")

// mcpPost is a POST in flight on the MCP endpoint.
type mcpPost struct {
	ctx context.Context
	// run is the run of the tool call the POST carried, set by callTool
	// for the request's access-log line.
	run atomic.Pointer[string]
	// spans notes the call's outermost tracing span, for that line too,
	// and joined the trace the call joined (its _meta's, say).
	spans  *tracing.SpanNote
	joined atomic.Pointer[trace.SpanContext]
}

// noteRun records run as the run of the tool call the POST of h carried.
func (p *mcpProxy) noteRun(h http.Header, run string) {
	if v, ok := p.requests.Load(h.Get(requestHeader)); ok {
		v.(*mcpPost).run.Store(&run)
	}
}

// boundTo returns ctx, cancelled when the HTTP request that carried the
// call ends: with errShutdownCut as its cause when the shutdown cut the
// request, else errRequestGone. A token with no request in flight is a
// request already over.
func (p *mcpProxy) boundTo(ctx context.Context, h http.Header) (context.Context, context.CancelFunc) {
	token := h.Get(requestHeader)
	if token == "" {
		return context.WithCancel(ctx)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	v, ok := p.requests.Load(token)
	if !ok {
		cancel(errRequestGone)
		return cctx, func() {}
	}
	req := v.(*mcpPost).ctx
	stop := context.AfterFunc(req, func() {
		if context.Cause(req) == errShutdownCut {
			cancel(errShutdownCut)
			return
		}
		cancel(errRequestGone)
	})
	return cctx, func() { stop(); cancel(nil) }
}

func newMCPProxy(s *Server) *mcpProxy {
	p := &mcpProxy{s: s, listed: map[string]bool{}, sessions: sessionCap{max: s.opts.MaxSessions}}
	p.server = mcp.NewServer(&mcp.Implementation{Name: "agentc", Version: Version}, &mcp.ServerOptions{Logger: slog.New(sdkLog{s.log.Handler()})})
	p.server.AddReceivingMiddleware(p.listsUnknown)
	p.server.AddSendingMiddleware(p.quietNoStream)
	p.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return p.server },
		// The gateway checks the Host of every route itself (hostRule), the
		// names the operator allowed included, which the handler's own
		// check of loopback connections would refuse.
		&mcp.StreamableHTTPOptions{Logger: s.log, MaxRequestBodyBytes: s.opts.MaxBodyBytes, SessionTimeout: s.opts.RunIdle,
			DisableLocalhostProtection: true})
	// The key was checked by the time a request gets here (authenticate);
	// the user is the key's name, so a session is bound to the key that
	// opened it.
	p.keyed = auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		k, _ := ctx.Value(sessionUserKey{}).(string)
		if k == "" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: k}, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(p.handler)
	return p
}

// quietNoStream logs at debug level, rather than the SDK's warning, a
// notifications/tools/list_changed the transport could not deliver because
// the session has no event stream (a client that never opened GET /mcp,
// or whose stream ended): such a session cannot be told, which is normal,
// and it lists the tools again when it wants them. Other failures are the
// SDK's to log as warnings.
func (p *mcpProxy) quietNoStream(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		var wire *jsonrpc.Error
		if err != nil && method == "notifications/tools/list_changed" && errors.As(err, &wire) && wire.Code == codeRejected &&
			strings.Contains(err.Error(), "stream not connected") {
			p.s.log.Debug("mcp client not told the tools changed: its session has no event stream", "session", req.GetSession().ID())
			return res, nil
		}
		return res, err
	}
}

// codeRejected is the code of the SDK's error for a message its transport
// would not send (jsonrpc2.ErrRejected, which it does not export).
const codeRejected = -32005

// sync makes the MCP server list g's tools: the upstream tools and the
// host tools. Sessions are told the list changed.
func (p *mcpProxy) sync(g *generation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	want := map[string]*mcp.Tool{}
	for name, t := range g.mcp.tools {
		if t.withheld != nil {
			continue // logged and counted when scanned
		}
		if !t.up.serves(t) {
			continue // changed upstream since it was scanned (refreshMCP logged it)
		}
		tool := *t.tool
		tool.Name = name
		if !objectSchema(tool.InputSchema) {
			p.s.log.Warn("mcp tool skipped: its input schema is not of type object", "tool", name, "server", t.server)
			continue
		}
		want[name] = &tool
	}
	for name := range p.s.opts.Tools {
		// A host tool is described by the policy's declaration of it: its
		// description and argument schema (any object when it has none).
		decl := g.plan.Tools[name]
		tool := &mcp.Tool{Name: name, Description: decl.Description, InputSchema: json.RawMessage(`{"type":"object"}`)}
		if len(decl.Args) > 0 {
			tool.InputSchema = decl.Args
		}
		if !objectSchema(tool.InputSchema) {
			p.s.log.Warn("mcp tool skipped: its input schema is not of type object", "tool", name)
			continue
		}
		want[name] = tool
	}
	var gone []string
	for name := range p.listed {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(p.listed, name)
		}
	}
	if len(gone) > 0 {
		p.server.RemoveTools(gone...)
	}
	for name, tool := range want {
		if !p.listed[name] && strings.ContainsAny(name, ":/") {
			p.s.log.Info("mcp tool served under a name with \":\" or \"/\", which MCP's recommended tool name characters omit (a server's prefix may add them); a client may refuse it",
				"tool", name)
		}
		p.server.AddTool(tool, p.callTool)
		p.listed[name] = true
	}
}

// sdkLog is the handler of the SDK server's log: h, less the error the SDK
// logs on every listing of a tool whose name holds a character outside
// MCP's recommended ones (AddTool: invalid tool name), which the proxy
// withholds or serves itself, noting a ":" or "/" of a prefix once (sync).
type sdkLog struct{ slog.Handler }

func (l sdkLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "AddTool: invalid tool name") {
		return nil
	}
	return l.Handler.Handle(ctx, r)
}

func (l sdkLog) WithAttrs(as []slog.Attr) slog.Handler { return sdkLog{l.Handler.WithAttrs(as)} }
func (l sdkLog) WithGroup(name string) slog.Handler    { return sdkLog{l.Handler.WithGroup(name)} }

func objectSchema(s any) bool {
	b, err := json.Marshal(s)
	if err != nil {
		return false
	}
	var m map[string]any
	return json.Unmarshal(b, &m) == nil && m["type"] == "object"
}

// callTool runs one tools/call through the current generation's tool
// chain; after Close, a JSON-RPC error saying the server is shutting
// down. A call the chain refuses (blocked, budget) or that fails is an
// error result, so the model sees why; a refused call does not reach the
// tool. A call in doubt (it may have run, or ran with its outcome not
// recorded) is an error result that says so ("in_doubt by LAYER: ...").
func (p *mcpProxy) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	s := p.s
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	// The SDK runs the call on the session's context, which holds the
	// trace of the POST that opened the session: the call's spans join
	// the trace of the POST that carried it here, or else the one its
	// _meta names, or start one of their own.
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	if s.opts.NoTraceContext {
		ctx = wire.WithoutTrace(ctx)
	} else {
		ctx = wire.JoinTraceMeta(wire.JoinTrace(ctx, h), req.Params.Meta)
	}
	if v, ok := p.requests.Load(h.Get(requestHeader)); ok {
		post := v.(*mcpPost)
		ctx = tracing.WithSpanNote(ctx, post.spans)
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			post.joined.Store(&sc)
		}
	}
	ctx, cancel := p.boundTo(withProgress(withListWait(ctx), req), h)
	defer cancel()
	// A call of a tool whose upstream's tools are being listed again
	// takes the generation serving the new list; it waits on the call's
	// context, which its client's going away and the shutdown cut end.
	waitErr := s.awaitList(ctx, req.Params.Name)
	g := s.acquire()
	defer g.release()
	if s.closed.Load() {
		// g is the last generation, retired and perhaps closed: the call
		// is refused as a request reaching the server after Close is.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: errClosed.Error()}
	}
	if err := progressTokenErr(req); err != nil {
		return nil, err
	}
	c := caller{}
	if !g.keys.open() {
		presented, err := presentedKey(h)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
		}
		k, ok := s.matchKey(g, presented)
		if !ok {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "unknown API key"}
		}
		c = caller{key: k.name, tenant: k.tenant}
	}
	name := req.Params.Name
	var args map[string]any
	if len(req.Params.Arguments) > 0 && string(req.Params.Arguments) != "null" {
		// Numbers as written (runtime.DecodeArgs): the chain decides on
		// the number the client sent, and the upstream is sent it.
		if err := runtime.DecodeArgs(req.Params.Arguments, &args); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "arguments must be a JSON object: " + err.Error()}
		}
	}
	run := runtime.Run{Agent: "serve", Tenant: c.tenant}
	if c.tenant != "" {
		run.Meta = map[string]any{"tenant": c.tenant, "key": c.key}
	}
	id, err := runHeader(h)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
	}
	if id == "" {
		id = mcpRunPrefix + req.Session.ID()
	} else if err := validRunID(id); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error()}
	}
	run.ID = runID(c, id)
	p.noteRun(h, run.ID)
	caller := upstreamCaller{tenant: c.tenant}
	if ss := req.Session; ss != nil {
		caller.session, caller.ended = ss.ID(), func() <-chan struct{} { return p.clientEnded(ss) }
	}
	ctx = withRawArgs(withUpstreamCaller(ctx, caller), name, req.Params.Arguments, args)
	defer p.beginRun(&run, c.tenant, id, req.Session)()
	// Arguments that give a key twice are refused before the tool chain,
	// which would check the last, and the upstream, which may run the
	// first (as a proposed call's are on the chat routes).
	var res runtime.ToolResult
	err = repeatedKeyError(req.Params.Arguments, "the arguments of "+name, "the MCP server")
	tctx := ctx
	if err == nil && (ctx.Err() != nil || waitErr != nil) && g.mcp != nil && g.mcp.tools[name] != nil {
		// Its client cancelled the call of an upstream tool, went away or
		// the shutdown cut it before its chain ran (while it waited for a
		// listing, or before that), or its time to wait for a listing is
		// spent: the chain runs all the same, so that its layers see the
		// attempt (audit records it failed; it was not sent), and the
		// upstream tool refuses it at once (notSentOf). A host tool, which
		// would not, runs its chain on the context ended, as before.
		var stop context.CancelFunc
		tctx, stop = recordOnly(ctx, waitErr)
		defer stop()
	} else if err == nil {
		err = waitErr
	}
	if err == nil {
		res, err = g.pl.Tool(runtime.WithRun(tctx, run), runtime.ToolRequest{Name: name, Args: args, IdempotencyKey: h.Get("Idempotency-Key")})
	}
	s.observeTool(name, res, err)
	if err != nil {
		// Without the ids of the gateway's accounts and bounded, as a
		// chat route's upstream error (relayed).
		msg := relayed(clientMessage(err), maxRelayedMessage)
		if msg != err.Error() {
			s.log.Warn("mcp tool call failed", "tool", name, "run", run.ID, "error", err.Error())
		}
		// A final refusal names its class and layer once (a BlockedError
		// already says "blocked by LAYER").
		if layer := runtime.LayerOf(err); layer != "" && runtime.Classify(err).Final() {
			if prefix := fmt.Sprintf("%s by %s", runtime.Classify(err), layer); !strings.HasPrefix(msg, prefix) {
				msg = prefix + ": " + msg
			}
		}
		if context.Cause(ctx) == errShutdownCut {
			msg = cutToolMessage(err, msg)
		}
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}, nil
	}
	return toolResult(res.Value), nil
}

// cutToolMessage is the message of a tool call the shutdown cut, which
// failed with err (its message msg): one that may have run says so and why,
// and that it is not to be sent again before someone has checked; one that
// failed of the cut alone (cancelled, and safe to send again) is the
// shutdown's retryable refusal, as a chat call cut is (shutdownCut); any
// other failure or refusal stays as it is.
func cutToolMessage(err error, msg string) string {
	switch runtime.Classify(err) {
	case runtime.ClassInDoubt:
		return msg + "; " + errShutdownCut.(*shuttingDown).what() +
			": the call is in doubt, do not send it again before checking whether it made its effect"
	case runtime.ClassFailure:
		if errors.Is(err, context.Canceled) {
			return errShutdownCut.Error()
		}
	}
	return msg
}

// observeTool counts a tool call's outcome, retries, blocks and refusals.
// A result a layer answered without the upstream running the call now is
// counted apart from "ok": "replayed" (idempotent's stored result, or the
// outcome of the duplicate it waited for) and "cached" (a cache layer's).
func (s *Server) observeTool(name string, res runtime.ToolResult, err error) {
	outcome := "ok"
	switch {
	case err == nil && res.Deduped:
		outcome = "replayed"
	case err == nil && res.Cached:
		outcome = "cached"
	}
	if err != nil {
		outcome = runtime.Classify(err).String()
		if outcome == "failure" {
			outcome = "error"
		}
	}
	s.metrics.toolCalls.WithLabelValues(name, outcome).Inc()
	if res.Attempts > 1 {
		s.metrics.retries.WithLabelValues(plan.StageTool).Add(float64(res.Attempts - 1))
	}
	s.observeRefusal(plan.StageTool, err)
}

// observeRefusal counts a block or a budget refusal by its layer, and a
// store's failure.
func (s *Server) observeRefusal(stage string, err error) {
	s.observeStoreError(stage, err)
	switch runtime.Classify(err) {
	case runtime.ClassBlocked:
		s.metrics.blocks.WithLabelValues(stage, runtime.LayerOf(err)).Inc()
	case runtime.ClassBudget:
		s.metrics.refusals.WithLabelValues(stage, runtime.LayerOf(err)).Inc()
	}
}

// mcpHandler serves the MCP endpoint (streamable HTTP).
func (s *Server) mcpHandler(x *exchange) {
	r := x.r
	if r.ContentLength > s.opts.MaxBodyBytes {
		if x.rpc {
			x.rpcID = requestID(io.LimitReader(r.Body, maxIDPrefix))
		}
		x.fail(http.StatusRequestEntityTooLarge, errTooLarge, fmt.Sprintf("request body is over the limit of %d bytes", s.opts.MaxBodyBytes))
		return
	}
	if r.Method == http.MethodPost && r.ContentLength < 0 {
		// A chunked body is read here, so that one past MaxInFlightBytes
		// is refused as one with a Content-Length is.
		body, ok := x.readBody()
		if !ok {
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	// The MCP server answers from here: its JSON-RPC errors are its own,
	// and its HTTP-level refusals are turned into the JSON error format of
	// the other routes (mcpWriter).
	x.rpc = false
	r.Header.Del(requestHeader)
	if r.Method == http.MethodPost {
		token := fmt.Sprint(s.mcp.nextReq.Add(1))
		req := &mcpPost{ctx: r.Context(), spans: &x.spans}
		s.mcp.requests.Store(token, req)
		defer s.mcp.requests.Delete(token)
		// The access log names the run of the tool call the POST carried,
		// as the call's spans and audit records do.
		defer func() {
			if run := req.run.Load(); run != nil {
				x.run = *run
			}
			if sc := req.joined.Load(); sc != nil {
				x.joined = *sc
			}
		}()
		r.Header.Set(requestHeader, token)
	}
	// The calls end with their request (boundTo), but the MCP server's
	// handling of a request outlasts the shutdown cut: a POST's, to write
	// the answers of the calls the cut cancelled, and its session's event
	// stream, which the client reads while it waits for them and which
	// ends once they are answered (liveSessions).
	ctx, release := x.outlastCut()
	defer release()
	r = r.WithContext(ctx)
	if r.Method == http.MethodGet {
		// A session's event stream, open for the session's life, carries
		// no call: it does not hold the policy generation it was opened
		// under, whose upstream sessions a reload closes once its calls
		// are done.
		x.release()
	}
	var done func()
	r, done = s.mcp.live.begin(r)
	defer done()
	w := &mcpWriter{exchange: x}
	if r.Method == http.MethodPost && r.Body != nil {
		// The MCP server reads the body whole; at its end it is read as
		// strictly as the chat routes read theirs (checkRPCBody), and a
		// refusal reaches the server as a failed read, answered in finish.
		w.body = &prefixReader{r: &checkedBody{r: r.Body, refused: &w.refused}}
		r.Body = struct {
			io.Reader
			io.Closer
		}{w.body, r.Body}
	}
	defer w.finish()
	if id := r.Header.Get("Mcp-Session-Id"); id != "" {
		s.mcp.sessions.used(x.caller.key, id, time.Now())
	} else {
		defer func() {
			// A session opened (an initialize answered with its id).
			if id := w.Header().Get("Mcp-Session-Id"); id != "" {
				presented, _ := presentedKey(r.Header)
				closeSessions(s.mcp.server, s.mcp.sessions.opened(x.caller.key, sha256.Sum256([]byte(presented)), id, time.Now(),
					func() map[string]bool { return liveSessionIDs(s.mcp.server) }))
				// A reload that revoked the key while the session opened
				// closed the key's sessions noted before this one.
				if g := s.cur.Load(); x.caller.key != "" && !g.keys.open() {
					if _, ok := s.matchKey(g, presented); !ok {
						closeSessions(s.mcp.server, []string{id})
					}
				}
			}
		}()
	}
	if x.caller.key == "" {
		// A policy without keys: anyone may use any session.
		s.mcp.handler.ServeHTTP(w, r)
		return
	}
	// The binding reads the key as a bearer token, as clients of the
	// Anthropic kind send it in x-api-key.
	key, _ := presentedKey(r.Header) // authenticate refused a conflict
	r.Header.Set("Authorization", "Bearer "+key)
	r = r.WithContext(context.WithValue(r.Context(), sessionUserKey{}, x.caller.key))
	s.mcp.keyed.ServeHTTP(w, r)
}

// maxIDPrefix bounds what is read of a body refused unread (over
// MaxBodyBytes) to find its JSON-RPC id.
const maxIDPrefix = 64 << 10

// requestID returns the id of the JSON-RPC request r holds (a string or a
// number, as JSON), found before r ends or its JSON does; nil when there is
// none.
func requestID(r io.Reader) json.RawMessage {
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil
		}
		if k != "id" {
			if dec.Decode(new(json.RawMessage)) != nil {
				return nil
			}
			continue
		}
		var id json.RawMessage
		if dec.Decode(&id) != nil || (id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
			return nil
		}
		return id
	}
	return nil
}

// rpcErrorBody is the JSON-RPC error response of a POST /mcp the gateway
// refuses before the MCP server reads it (over a limit, unauthenticated):
// to the request's id when it was read, else to null. Its data holds the
// code and layer of the other routes' errors and the HTTP status.
func rpcErrorBody(id json.RawMessage, status int, code, layer, msg string) any {
	if id == nil {
		id = json.RawMessage("null")
	}
	rc := int64(jsonrpc.CodeInvalidRequest)
	if status >= 500 {
		rc = codeServerError
	}
	type data struct {
		Status int    `json:"status"`
		Code   string `json:"code"`
		Layer  string `json:"layer,omitempty"`
	}
	type rpcError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    data   `json:"data"`
	}
	return struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{rc, msg, data{status, code, layer}}}
}

// codeServerError is JSON-RPC's implementation-defined server error, for a
// request refused by the server's load or state.
const codeServerError = -32000

// mcpWriter answers the SDK's HTTP-level refusals (plain text: a session
// opened with another key, a session not found, a bad Accept header) in the
// JSON error format of the other routes. Everything else, JSON-RPC answers
// and event streams, passes as written.
type mcpWriter struct {
	*exchange
	// plain is set once the SDK started a plain-text error, whose status
	// and text are held in status and text.
	plain  bool
	status int
	text   []byte
	// body keeps the start of a POST's body, where the request's id is.
	body *prefixReader
	// refused is checkRPCBody's refusal of the body, once read.
	refused error
}

// prefixReader reads r and keeps its first maxIDPrefix bytes.
type prefixReader struct {
	r      io.Reader
	prefix []byte
}

func (p *prefixReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if keep := min(n, maxIDPrefix-len(p.prefix)); keep > 0 {
		p.prefix = append(p.prefix, b[:keep]...)
	}
	return n, err
}

// notHandled starts the SDK's refusal of a method it does not know
// (jsonrpc2.ErrNotHandled).
const notHandled = "JSON RPC not handled: "

// maxPlainError bounds the text of an SDK error kept.
const maxPlainError = 1024

func (w *mcpWriter) WriteHeader(code int) {
	if code >= 400 && w.exchange.status == 0 && !w.plain &&
		strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.plain, w.status = true, code
		return
	}
	w.exchange.WriteHeader(code)
}

func (w *mcpWriter) Write(b []byte) (int, error) {
	if w.plain {
		w.text = append(w.text, b[:min(len(b), maxPlainError-len(w.text))]...)
		return len(b), nil
	}
	return w.exchange.Write(b)
}

// finish writes the JSON error of a plain-text refusal held back.
func (w *mcpWriter) finish() {
	if !w.plain {
		return
	}
	msg := strings.TrimSpace(string(w.text))
	if w.refused != nil {
		// A body checkRPCBody refused, which the server read as failed:
		// JSON-RPC's invalid request, to the id the body gave first.
		w.exchange.err = w.refused
		w.Header().Del("X-Content-Type-Options")
		w.exchange.writeJSON(http.StatusBadRequest, rpcErrorBody(requestID(bytes.NewReader(w.body.prefix)), http.StatusBadRequest, string(errBadRequest), "", w.refused.Error()))
		return
	}
	if w.status == http.StatusBadRequest && strings.HasPrefix(msg, notHandled) && w.body != nil {
		// A request of a method the server does not know: JSON-RPC's
		// "method not found" to its id, which a client reads as the
		// call's error. A refusal that is not JSON-RPC has the go-sdk
		// client close its connection, failing every call after.
		if id := requestID(bytes.NewReader(w.body.prefix)); id != nil {
			method := strings.TrimSuffix(strings.TrimPrefix(msg, notHandled), " unsupported")
			w.exchange.writeJSON(http.StatusOK, struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   jsonrpc.Error   `json:"error"`
			}{"2.0", id, jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found: " + method}})
			return
		}
	}
	code := errCode("mcp_" + strings.ToLower(strings.ReplaceAll(http.StatusText(w.status), " ", "_")))
	switch {
	case w.status == http.StatusForbidden && msg == "session user mismatch":
		code, msg = errSessionKey, "the MCP session was opened with another API key; a key uses the sessions it opened"
	case w.status == http.StatusNotFound:
		code = errNotFound
	case w.status == http.StatusBadRequest:
		code = errBadRequest
	}
	w.Header().Del("X-Content-Type-Options")
	w.exchange.fail(w.status, code, msg)
}

// errSessionKey is the code of a request on a session another key opened.
const errSessionKey errCode = "session_key_mismatch"

// sessionUserKey carries the caller's key name to the session binding.
type sessionUserKey struct{}

// mcpHeaders expands an MCP server's headers from the environment
// (expandRefs). An error names the header and the variable, never a value.
func mcpHeaders(headers map[string]string, lookupEnv func(string) (string, bool)) (http.Header, error) {
	values, err := expandRefs("header", headers, lookupEnv)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	for name, v := range values {
		if strings.ContainsAny(v, "\r\n") {
			return nil, fmt.Errorf("header %s: its value holds a line break", name)
		}
		h.Set(name, v)
	}
	return h, nil
}

// traceTransport has each request to an MCP server carry the trace of the
// call it is sent for (wire.CarryTrace).
type traceTransport struct{ base http.RoundTripper }

func (t traceTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	// A shallow copy: r is the caller's, and its header is left as it is.
	r = r.WithContext(r.Context())
	r.Header = wire.CarryTrace(r.Context(), r.Header)
	return t.base.RoundTrip(r)
}

// traceMeta has each request to an MCP server carry the trace of the call
// it is sent for in its _meta (wire.CarryTraceMeta), the MCP convention,
// over stdio as over HTTP (where traceTransport sends the headers too).
func traceMeta(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p := req.GetParams(); p != nil {
			p.SetMeta(wire.CarryTraceMeta(ctx, p.GetMeta()))
		}
		return next(ctx, method, req)
	}
}

// headerTransport adds an MCP server's headers to every request the
// transport sends it.
type headerTransport struct {
	header http.Header
	base   http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.header {
		r.Header[k] = v
	}
	return t.base.RoundTrip(r)
}
