package serve

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentc-dev/agentc/internal/credential"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Source loads the plan to serve. Load is called at start and on every
// reload; it returns an error (with every diagnostic in its text) for a
// policy that does not load, vet or compile cleanly.
type Source interface {
	Load(ctx context.Context) (*Loaded, error)
}

// Loaded is a loaded plan with what the server needs around it.
type Loaded struct {
	Plan *plan.Plan
	// Dir resolves the plan's relative paths (runtime.Deps.Dir).
	Dir string
	// PosDir is the policy's directory as the log names files in ("pol"
	// where the policy's diagnostics say pol/policy.cue): the plan's
	// positions the log gives are joined to it (plan.PosIn). Empty leaves
	// them relative to the policy's directory, as the plan has them.
	PosDir string
	// Files are watched for changes: a change reloads the policy. Files in
	// WatchDirs are watched too, new ones included.
	Files     []string
	WatchDirs []string
}

// SourceFunc adapts a func to Source.
type SourceFunc func(ctx context.Context) (*Loaded, error)

// Load calls f.
func (f SourceFunc) Load(ctx context.Context) (*Loaded, error) { return f(ctx) }

// Options configure a Server. Only Source is required.
type Options struct {
	// Source loads the plan.
	Source Source
	// Logger receives the access log, reload diagnostics and the runtime's
	// warnings (nil: slog.Default()).
	Logger *slog.Logger
	// Models returns the model clients of a plan (nil: none; every chat
	// call then fails as unregistered). It is called on every load.
	Models func(ctx context.Context, p *plan.Plan) (map[string]runtime.ModelClient, error)
	// Tools are host tools, served beside the upstream MCP servers' tools.
	Tools map[string]runtime.ToolFunc
	// Deps are further dependencies of the pipeline (stores, tracer...);
	// Models, Tools, Logger and Dir are set by the server, and Memory
	// when unset (one for the server's lifetime, shared by every
	// generation of the policy).
	Deps runtime.Deps
	// LookupEnv reads the variables that virtual keys and MCP servers'
	// headers name (nil: os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Registry receives the server's metrics (nil: a new registry, served
	// on /metrics), and the Go and process collectors unless it serves
	// them already. It takes one server's metrics at a time: New fails
	// while another server's are registered there, and Close removes
	// them.
	Registry *prometheus.Registry
	// MetricsElsewhere leaves /metrics off the server's own handler (a
	// request for it is a 404 like any unknown route): the host serves
	// OpsHandler on another listener. The metrics name tenants and their
	// spend, which a caller holding a key has no business reading.
	MetricsElsewhere bool
	// CacheUsage says whether a model call's prompt-cache figures reach
	// its client (CacheUsageAuto, the default: withheld when the policy's
	// keys name more than one tenant). See withholdCacheUsage.
	CacheUsage CacheUsage

	// MaxBodyBytes bounds a request body (default 4 MiB; larger: 413).
	MaxBodyBytes int64
	// MaxMessages bounds the messages of a chat or token count request
	// (default DefaultMaxMessages; negative: no bound; more: 400).
	MaxMessages int
	// MaxParts bounds the content parts, blocks and tool calls of a chat
	// or token count request, over all its messages and its system prompt
	// (default DefaultMaxParts; negative: no bound; more: 400).
	MaxParts int
	// MaxToolCalls bounds the tool calls of one model answer relayed
	// (default runtime.DefaultAgentMaxToolCalls, RunAgent's MaxToolCalls
	// default; more: a 502, none of them relayed; negative: New fails).
	MaxToolCalls int
	// MaxInFlight bounds the requests served at once on the routes that
	// decode a body and call upstreams: the chat and token count routes
	// and MCP's POST /mcp (default DefaultMaxInFlight; negative: no
	// bound). A request past it is refused at once, a 503 with
	// Retry-After: it never waits.
	MaxInFlight int
	// MaxInFlightPerTenant bounds the requests of one tenant served at
	// once on the routes MaxInFlight bounds, where the policy's keys name
	// more than one tenant (default: half of MaxInFlight, none while
	// MaxInFlight is unbounded; negative: no bound of its own), so that one tenant holding calls open (slow
	// streams, a stalled upstream) leaves room for the others. A request
	// past it is refused at once, as one past MaxInFlight is.
	MaxInFlightPerTenant int
	// MaxInFlightBytes bounds the bytes of request bodies held at once on
	// the routes MaxInFlight bounds (default DefaultMaxInFlightBytes;
	// negative: no bound). A body is charged when its size is known: at
	// once for one with a Content-Length, as it is read for a chunked
	// one; it is returned when the request ends. A request past it is
	// refused at once, as one past MaxInFlight is. It must be at least
	// MaxBodyBytes (New fails otherwise), or a body at the limit is never
	// served.
	MaxInFlightBytes int64
	// MaxInFlightBytesPerTenant bounds the bytes of request bodies one
	// tenant holds at once on those routes, where the policy's keys name
	// more than one tenant (default: half of MaxInFlightBytes, at least
	// MaxBodyBytes, none while MaxInFlightBytes is unbounded; negative: no
	// bound of its own), so that one tenant's
	// bodies (trickled, each within BodyTimeout) leave room for the
	// others'. A request past it is refused as one past MaxInFlightBytes
	// is. It must be at least MaxBodyBytes (New fails otherwise).
	MaxInFlightBytesPerTenant int64
	// MaxToolResultBytes bounds the result of an upstream MCP tool call
	// (default 4 MiB): a larger result is an error result naming the
	// limit (see upstreamTool.call).
	MaxToolResultBytes int64
	// ReadHeaderTimeout bounds the reading of the request headers
	// (default 5s).
	ReadHeaderTimeout time.Duration
	// BodyTimeout bounds the reading of a request body (default 30s).
	BodyTimeout time.Duration
	// WriteTimeout bounds a whole response, streams included (default 10m;
	// negative: no bound); a chat or count call is cancelled when it is
	// reached.
	WriteTimeout time.Duration
	// IdleTimeout bounds an idle keep-alive connection (default 2m).
	IdleTimeout time.Duration
	// ShutdownTimeout bounds the wait for requests in flight at shutdown
	// (default 10s); streams still open then are cut.
	ShutdownTimeout time.Duration
	// DrainDelay is how long, at shutdown, /readyz answers 503 while the
	// listener still accepts and serves requests, before it closes (default
	// 0: it closes at once): a load balancer polling /readyz takes the
	// server out of rotation before connections are refused.
	DrainDelay time.Duration
	// RunIdle ends a named run after this long without a request of it
	// (default 15m).
	RunIdle time.Duration
	// MaxRuns bounds the named runs a tenant keeps (default 10000): past
	// it, the tenant's runs idle the longest are ended early.
	MaxRuns int
	// MaxSessions bounds the MCP sessions a key keeps open (default
	// 1000): past it, the key's sessions used the longest ago are closed.
	MaxSessions int
	// WatchInterval is how often the policy files are checked for
	// changes (default 1s; negative: never). A change is reloaded once the
	// files have stood still for one interval.
	WatchInterval time.Duration
	// AllowStateReset applies a reload whose change starts idempotency
	// records afresh (runtime.StateChanges: a side-effecting call made
	// before the change would run again if repeated). Without it such a
	// reload is refused (ErrStateReset), the previous policy serving on.
	// Every other state a change leaves behind is logged, not refused.
	AllowStateReset bool
	// AllowHosts are the host names, besides localhost and IP addresses,
	// a request's Host may name where it is checked: on a connection
	// that arrived at a loopback address, and on every connection while
	// the policy declares no keys. A request naming another host is
	// refused with a 421 (DNS rebinding: a web page whose name was
	// pointed at the gateway). A name is matched without its port and
	// regardless of case; /healthz and /readyz are served to any Host.
	AllowHosts []string
	// RequireKeys refuses a policy that declares no keys, at start (New
	// fails) and at a reload (the previous policy serving on): such a
	// policy admits every caller, on the operator's providers, which a
	// gateway listening on a network address must not do by accident.
	// agentc serve sets it unless -listen is a loopback address or
	// -keyless is given.
	RequireKeys bool
	// NoTraceContext turns W3C Trace Context off: a request's
	// traceparent and tracestate are not read (its spans start a trace of
	// their own) and the requests to the providers and to MCP servers
	// carry none. agentc serve sets it when OTEL_PROPAGATORS names no
	// tracecontext (none, say).
	NoTraceContext bool
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Registry == nil {
		o.Registry = prometheus.NewRegistry()
	}
	set := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 4 << 20
	}
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxInFlightPerTenant == 0 && o.MaxInFlight > 0 {
		o.MaxInFlightPerTenant = max(o.MaxInFlight/2, 1)
	}
	if o.MaxInFlightBytes == 0 {
		o.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	if o.MaxInFlightBytesPerTenant == 0 && o.MaxInFlightBytes > 0 {
		o.MaxInFlightBytesPerTenant = max(o.MaxInFlightBytes/2, o.MaxBodyBytes)
	}
	if o.MaxMessages == 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	if o.MaxParts == 0 {
		o.MaxParts = DefaultMaxParts
	}
	if o.MaxToolCalls == 0 {
		o.MaxToolCalls = runtime.DefaultAgentMaxToolCalls
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = 1000
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = 10000
	}
	if o.MaxToolResultBytes <= 0 {
		o.MaxToolResultBytes = 4 << 20
	}
	set(&o.ReadHeaderTimeout, 5*time.Second)
	set(&o.BodyTimeout, 30*time.Second)
	set(&o.WriteTimeout, 10*time.Minute)
	set(&o.IdleTimeout, 2*time.Minute)
	set(&o.ShutdownTimeout, 10*time.Second)
	set(&o.RunIdle, 15*time.Minute)
	set(&o.WatchInterval, time.Second)
}

// Server is the gateway. It serves one generation of the policy at a time;
// a reload builds the next generation and swaps it in atomically. It is
// safe for concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	cur     atomic.Pointer[generation]
	gens    atomic.Int64
	mux     *http.ServeMux
	metrics *metrics
	runs    *runTracker
	ready   atomic.Bool
	mcp     *mcpProxy
	// hosts checks a request's Host (Options.AllowHosts).
	hosts *hostRule
	// runEnds holds a token for each run's end under way after its
	// response (endAfter), at most maxRunEnds.
	runEnds chan struct{}
	// slots holds a token for each request in flight on a bounded route
	// (Options.MaxInFlight); nil: no bound.
	slots chan struct{}
	// tenantCalls counts the requests in flight of each tenant on a
	// bounded route (Options.MaxInFlightPerTenant), under tenantMu.
	tenantMu    sync.Mutex
	tenantCalls map[string]int
	// tenantBytes are the shares of the tenants whose requests hold bytes
	// of request bodies (Options.MaxInFlightBytesPerTenant): the map and
	// the shares' refs under tenantMu, their bytes atomic.
	tenantBytes map[string]*tenantBody
	// bodyBytes are the bytes of request bodies charged to
	// Options.MaxInFlightBytes.
	bodyBytes atomic.Int64
	// memory is the in-process state every generation shares (budgets,
	// rate limits, idempotency records, caches), so a reload keeps it.
	memory *runtime.MemoryStore
	// stores holds the declared stores open across generations: a reload
	// that leaves a store's declaration alone keeps its data (a memory
	// store) and its connections.
	stores *runtime.StorePool
	// settlements sums the settlement counts of the meters of every
	// pipeline built (agentc_serve_meter_settlements_*).
	settlements settlements

	// reloadMu serializes loads; it guards the watched files and
	// toolsServed.
	reloadMu  sync.Mutex
	watched   fingerprint
	watchDirs []string
	// toolsServed is set once a generation that runs tools (runsTools)
	// has served: until then the tool chain holds no state
	// (checkStateChanges).
	toolsServed bool
	// untraced are the tracing layers the last warning of warnUntraced
	// named (reloadMu).
	untraced []string
	// retry is the next attempt of a reload that failed for a reason that
	// may pass without a change of the files (transientReload), under
	// reloadMu; nil when none is due.
	retry *reloadRetry
	// revoked are the hashes of the keys of the serving policy that the
	// last reload failing for such a reason removes (revokeRemovedKeys):
	// refused until a reload applies. Nil when none.
	revoked atomic.Pointer[map[[sha256.Size]byte]bool]
	closed  atomic.Bool
	// closing is closed when Close starts, under reloadMu (closed set).
	closing chan struct{}

	// stopNow is cancelled by Abort: it cuts the drain and the grace of a
	// shutdown short.
	stopNow context.Context
	abort   context.CancelFunc
	// requests is the base of every request's context: it ends with
	// stopNow, or with errShutdownCut at the end of the grace.
	requests    context.Context
	cutRequests context.CancelCauseFunc
	// hangups are called when Serve closes the connections still open
	// after the shutdown cut (or at Abort): the MCP calls the cut
	// cancelled are answered until then (outlastCut).
	hangups hangups
	// replaced are the generations a newer one replaced, perhaps not yet
	// closed (a request still holds one, or its close is under way),
	// under replacedMu: the wait after the shutdown cut waits for them
	// too, and stillClosing names what they hold open.
	replacedMu sync.Mutex
	replaced   []*generation
}

// ErrAborted is returned by Serve when Abort cut the shutdown short.
var ErrAborted = errors.New("serve: stopped at once; the requests in flight were cut")

// OptionsError is New's error for Options that cannot serve whatever the
// policy. Its message names the field and the agentc serve flag that sets
// it.
type OptionsError struct{ msg string }

func (e *OptionsError) Error() string { return e.msg }

func optionsErrorf(format string, args ...any) error {
	return &OptionsError{msg: "serve: " + fmt.Sprintf(format, args...)}
}

// New loads the first generation of the policy and returns the server. A
// policy that does not load or build fails New, and so do options that
// cannot serve (MaxInFlightBytes below MaxBodyBytes, an *OptionsError).
func New(ctx context.Context, opts Options) (*Server, error) {
	if opts.Source == nil {
		return nil, errors.New("serve: Options.Source is required")
	}
	opts.defaults()
	if opts.MaxInFlightBytes > 0 && opts.MaxInFlightBytes < opts.MaxBodyBytes {
		return nil, optionsErrorf("-maxinflightbytes (Options.MaxInFlightBytes, %d) must be at least -maxbody (Options.MaxBodyBytes, %d), or a body at the limit is never served",
			opts.MaxInFlightBytes, opts.MaxBodyBytes)
	}
	if opts.MaxInFlightBytesPerTenant > 0 && opts.MaxInFlightBytesPerTenant < opts.MaxBodyBytes {
		return nil, optionsErrorf("-maxinflightbytestenant (Options.MaxInFlightBytesPerTenant, %d) must be at least -maxbody (Options.MaxBodyBytes, %d), or a body at the limit is never served",
			opts.MaxInFlightBytesPerTenant, opts.MaxBodyBytes)
	}
	if opts.MaxToolCalls < 1 {
		return nil, optionsErrorf("-maxtoolcalls (Options.MaxToolCalls, %d) must be at least 1: an answer of more calls fails with a 502, so none could make a call", opts.MaxToolCalls)
	}
	hosts, err := newHostRule(opts.AllowHosts)
	if err != nil {
		return nil, err
	}
	if err := opts.CacheUsage.check(); err != nil {
		return nil, err
	}
	// Every line the server writes, the pipeline's layers' included, goes
	// through the one scrubber of credentials (credential.LogHandler).
	s := &Server{opts: opts, log: slog.New(credential.LogHandler(opts.Logger.Handler())), memory: opts.Deps.Memory, hosts: hosts,
		tenantCalls: map[string]int{}, tenantBytes: map[string]*tenantBody{}, runEnds: make(chan struct{}, maxRunEnds)}
	if s.metrics, err = newMetrics(opts.Registry, s.bodyBytes.Load, &s.settlements); err != nil {
		return nil, err
	}
	if opts.MaxInFlight > 0 {
		s.slots = make(chan struct{}, opts.MaxInFlight)
	}
	s.stopNow, s.abort = context.WithCancel(context.Background())
	s.closing = make(chan struct{})
	s.requests, s.cutRequests = context.WithCancelCause(s.stopNow)
	if s.memory == nil {
		s.memory = runtime.NewMemoryStore()
	}
	if s.stores = opts.Deps.StorePool; s.stores == nil {
		s.stores = runtime.NewStorePool()
	}
	s.runs = newRunTracker(opts.RunIdle, opts.MaxRuns, s.endRuns)
	s.mcp = newMCPProxy(s)
	s.reloadMu.Lock()
	g, err := s.load(ctx)
	if err == nil {
		s.install(g)
	}
	s.reloadMu.Unlock()
	if err != nil {
		s.metrics.unregister()
		return nil, err
	}
	s.routes()
	s.ready.Store(true)
	return s, nil
}

// load builds a generation from the source and notes the files to watch:
// those the source names, or, when it fails, the same files as before (so
// that a failed reload is not retried until the files change again). The
// files are stamped as they were before the source read them: a write
// that lands while the source reads (the rest of a file caught half
// written) is a change, seen at the next check. reloadMu is held.
func (s *Server) load(ctx context.Context) (*generation, error) {
	first := s.watched.files == nil
	before := takeFingerprint(s.watched.paths(), s.watchDirs)
	ld, err := s.opts.Source.Load(ctx)
	if err != nil {
		s.watched = before
		if !first {
			s.log.Warn("the keys of policy files that do not load are not known: the keys the serving policy admits stay admitted, and those a failed reload refused stay refused, until the files load")
		}
		return nil, err
	}
	s.watched, s.watchDirs = takeFingerprint(ld.Files, ld.WatchDirs), ld.WatchDirs
	if !first {
		s.watched = s.watched.asBefore(before)
		if err := s.checkStateChanges(s.cur.Load().plan, ld.Plan, ld.PosDir); err != nil {
			s.revokeRemovedKeys(ld.Plan)
			return nil, err
		}
	}
	g, err := s.build(ctx, ld)
	if err == nil {
		s.warnUntraced(ld.Plan)
	} else if !first {
		s.revokeRemovedKeys(ld.Plan)
	}
	return g, err
}

// revokeRemovedKeys refuses, until a reload applies, the keys of the
// serving policy that next, a policy whose reload failed or was refused
// (a store or an MCP server out of reach, a variable unset, a change that
// starts idempotency records afresh), no longer has (removed, or given
// another secret): the previous policy serves on, but a key revoked is not
// left working while the reload waits. A next that declares no keys
// revokes nothing; a key of next that cannot be read (its variable unset)
// keeps the serving key of its name. reloadMu is held.
func (s *Server) revokeRemovedKeys(next *plan.Plan) {
	cur := s.cur.Load()
	if cur == nil || len(next.Keys) == 0 {
		return
	}
	// Each key is read alone: one whose variable is unset (which fails
	// the reload) keeps the serving key of its name, the others are read.
	kept := make(map[[sha256.Size]byte]bool, len(next.Keys))
	keptNames := map[string]bool{}
	for name, k := range next.Keys {
		kr, err := newKeyring(map[string]plan.Key{name: k}, s.opts.LookupEnv)
		if err != nil {
			keptNames[name] = true
			continue
		}
		kept[kr.keys[0].hash] = true
	}
	revoked := map[[sha256.Size]byte]bool{}
	var names []string
	for _, k := range cur.keys.keys {
		if !kept[k.hash] && !keptNames[k.name] {
			revoked[k.hash] = true
			names = append(names, k.name)
		}
	}
	if len(revoked) == 0 {
		s.revoked.Store(nil)
		return
	}
	s.revoked.Store(&revoked)
	s.log.Warn("keys the failed reload removes are refused until it applies", "keys", names)
	s.closeRevokedSessions(revoked)
}

// removedKeys returns the hashes of the keys of old that next does not
// have (removed, or given another secret).
func removedKeys(old, next *keyring) map[[sha256.Size]byte]bool {
	kept := make(map[[sha256.Size]byte]bool, len(next.keys))
	for _, k := range next.keys {
		kept[k.hash] = true
	}
	removed := map[[sha256.Size]byte]bool{}
	for _, k := range old.keys {
		if !kept[k.hash] {
			removed[k.hash] = true
		}
	}
	return removed
}

// matchKey returns the key of the generation g that presented is, unless
// a failed reload revoked it (revokeRemovedKeys).
func (s *Server) matchKey(g *generation, presented string) (*virtualKey, bool) {
	k, ok := g.keys.match(presented)
	if !ok {
		return nil, false
	}
	if r := s.revoked.Load(); r != nil && (*r)[k.hash] {
		return nil, false
	}
	return k, true
}

// ErrStateReset marks a reload refused because its change would start
// idempotency records afresh (Options.AllowStateReset).
var ErrStateReset = errors.New("serve: the change starts idempotency records afresh")

// checkStateChanges logs each layer whose state the change from old to
// next leaves behind (runtime.StateChanges), and each idempotent layer
// whose when may cover fewer calls (runtime.CoverageChanges: not refused,
// a narrowing not being told from a widening), and refuses the change when
// it leaves idempotency records behind (keyed differently, or no longer
// kept by any layer: an idempotent layer removed), unless AllowStateReset.
// The chains the gateway has never run hold no state, and are not
// compared: the turn chain, and the tool chain until a generation that
// runs tools has served. The layers' positions are joined to posDir.
func (s *Server) checkStateChanges(old, next *plan.Plan, posDir string) error {
	if s.runsTools(old) {
		s.toolsServed = true
	}
	ran := func(stage plan.Stage) bool {
		return stage == plan.StageChat || stage == plan.StageTool && s.toolsServed
	}
	var repeats []string
	for _, c := range runtime.StateChanges(old, next) {
		if !ran(c.Stage) {
			continue
		}
		s.log.Warn("the policy change leaves shared state behind", "stage", c.Stage, "layer", c.Layer, "pos", plan.PosIn(posDir, c.Pos),
			"fields", c.Fields, "tool", c.Tool, "detail", c.Message())
		switch {
		case c.Repeats && c.Removed && len(c.Fields) == 0:
			repeats = append(repeats, fmt.Sprintf("%s (%s removed)", c.Tool, c.Layer))
		case c.Repeats:
			repeats = append(repeats, fmt.Sprintf("%s (%s)", c.Tool, strings.Join(c.Fields, ", ")))
		}
	}
	for _, c := range runtime.CoverageChanges(old, next) {
		if !ran(c.Stage) {
			continue
		}
		s.log.Warn("the policy change may narrow what a layer deduplicates", "stage", c.Stage, "layer", c.Layer, "pos", plan.PosIn(posDir, c.Pos),
			"tools", c.Tools, "detail", c.Message())
	}
	if len(repeats) == 0 {
		return nil
	}
	if s.opts.AllowStateReset {
		s.log.Warn("applying a change that starts idempotency records afresh, as allowed (-allowreset): a call made before it runs again if repeated, and while replicas still serve the previous policy on the same store a call sent through one of each, even a new one, runs on both", "tools", repeats)
		return nil
	}
	return fmt.Errorf("%w for %s: calls made before it would run again if repeated; keep the keys as deployed, or apply it by restarting (or with -allowreset)",
		ErrStateReset, strings.Join(repeats, "; "))
}

// runsTools reports whether the gateway runs tool calls under p, through
// its tool chain: those of p's mcp servers and the host's (Options.Tools).
// Otherwise it only admits the calls a model proposes, which its clients
// run.
func (s *Server) runsTools(p *plan.Plan) bool {
	return len(p.MCPServers) > 0 || len(s.opts.Tools) > 0
}

// generation is one loaded policy: its plan, pipeline, keys and upstream
// MCP sessions. Requests hold it (acquire/release) while they run; a
// retired generation is closed once its last request has released it, on a
// goroutine of its own (release), and Close waits for it.
type generation struct {
	n      int64
	plan   *plan.Plan
	pl     *runtime.Pipeline
	keys   *keyring
	models []string
	// modelIDs maps provider model ids to the policy's names.
	modelIDs map[string]string
	mcp      *upstreams
	// withholdCache withholds the prompt-cache figures of the usage a
	// client is sent (withholdCacheUsage).
	withholdCache bool
	// tenants is the number of tenants the keys name.
	tenants int
	// deps are the pipeline's deps but its tools: a generation built for
	// an upstream's new tool list (refreshMCP) reuses them.
	deps runtime.Deps

	active  atomic.Int64
	retired atomic.Bool
	once    sync.Once
	// closing says what close is closing: closingPipeline, then
	// closingMCP; 0 before it starts and once it is done.
	closing atomic.Int32
	done    chan struct{}
	log     *slog.Logger
}

// The steps of a generation's close (generation.closing).
const (
	closingPipeline int32 = iota + 1
	closingMCP
)

func (s *Server) build(ctx context.Context, ld *Loaded) (*generation, error) {
	p := ld.Plan
	kr, keysErr := newKeyring(p.Keys, s.opts.LookupEnv)
	if keysErr != nil && s.opts.Models != nil {
		return nil, keysErr
	}
	if keysErr == nil && s.opts.RequireKeys && kr.open() {
		return nil, errNoKeys
	}
	deps := s.opts.Deps
	deps.Logger = s.log
	deps.Dir = ld.Dir
	deps.Memory = s.memory
	deps.StorePool = s.stores
	models := map[string]runtime.ModelClient{}
	if s.opts.Models != nil {
		host, err := s.opts.Models(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("model clients: %w", err)
		}
		maps.Copy(models, host)
	}
	// The provider clients are built here rather than by runtime.Build so
	// that every client, the host's too, notes the model serving a stream.
	provided, err := runtime.ProviderModels(ctx, p, models)
	// The models' unset variables are named with the keys', the MCP
	// servers' and those Build reads (the stores' it opens, the webhook
	// sinks', the digest key's), so that a first start names every
	// variable it lacks at once, before any MCP server is reached.
	unset := append(unsetVariables(p, s.opts.LookupEnv), runtime.UnsetVariables(withoutTurns(p), &deps)...)
	if keysErr != nil || err != nil || len(unset) > 0 {
		for _, c := range provided {
			if cl, ok := c.(io.Closer); ok {
				_ = cl.Close()
			}
		}
		return nil, errors.Join(append([]error{keysErr, err}, unset...)...)
	}
	maps.Copy(models, provided)
	deps.Models = make(map[string]runtime.ModelClient, len(models))
	for name, c := range models {
		sm := &servedModel{name: name, client: c, bound: p.Models[name].MaxTokens}
		if _, ok := provided[name]; ok {
			sm.wire = p.Models[name].Provider
		}
		deps.Models[name] = sm
	}
	// A server's position names the policy's directory, as the log does:
	// a tool name two servers serve is reported at their declarations.
	servers := make(map[string]plan.MCPServer, len(p.MCPServers))
	for name, sp := range p.MCPServers {
		sp.Pos = plan.PosIn(ld.PosDir, sp.Pos)
		servers[name] = sp
	}
	ups, err := connectUpstreams(ctx, servers, ld.Dir, s.opts.LookupEnv, s.log, s.opts.MaxToolResultBytes, s.refreshMCP, s.opts.RunIdle, s.metrics)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(checkScopedLayers(p, ups), checkUnscopedLayers(p, ups)); err != nil {
		ups.close()
		return nil, err
	}
	ups.shareSessions(kr.tenants())
	if n := kr.tenants(); n > 1 {
		for _, name := range slices.Sorted(maps.Keys(p.MCPServers)) {
			if sessionScope(p.MCPServers[name]) == scopeShared {
				s.log.Warn("mcp upstream session shared by every tenant: what the server keeps for a session (a working directory, a browser, a transaction, a memory) one tenant's calls leave, another's read; give it session \"client\" or \"tenant\"",
					"server", name, "tenants", n)
			}
		}
	}
	errs, warns := unknownToolNames(p, ups, hostTools(s.opts.Tools))
	if len(errs) > 0 {
		ups.close()
		return nil, errors.Join(errs...)
	}
	for _, w := range warns {
		s.log.Warn("a rule names a tool no mcp server serves and the policy does not declare; it applies to no tool served now", "rule", w)
	}
	return s.assemble(ctx, p, kr, deps, ups)
}

// withoutTurns returns p without its turn chain, which the gateway never
// runs (it runs no agent turn): built into its pipeline, a turn-chain layer
// would still act on the calls the gateway serves, a checkpoint with
// after_tool saving the run after each /mcp tool call, which a new
// generation or another replica, never having resumed the run, could then
// no longer save. The warning at load names the chain's layers.
func withoutTurns(p *plan.Plan) *plan.Plan {
	if len(p.Chains.Turn) == 0 {
		return p
	}
	q := *p
	q.Chains.Turn = nil
	return &q
}

// assemble builds the pipeline of p serving the host's tools and ups's,
// scans ups's definitions and returns the generation. On failure ups is
// closed.
func (s *Server) assemble(ctx context.Context, p *plan.Plan, kr *keyring, deps runtime.Deps, ups *upstreams) (*generation, error) {
	base := deps
	deps.Tools = map[string]runtime.ToolFunc{}
	host := hostTools(s.opts.Tools)
	maps.Copy(deps.Tools, s.opts.Tools)
	if err := checkToolNames(p, ups, host); err != nil {
		ups.close()
		return nil, err
	}
	for name, fn := range ups.toolFuncs() {
		if _, dup := deps.Tools[name]; dup {
			ups.close()
			return nil, fmt.Errorf("mcp: tool %q is served by a host tool and an upstream server", name)
		}
		deps.Tools[name] = fn
	}
	// A tool a declared mcp server lists counts as declared: its arguments
	// are checked against the upstream's input schema.
	deps.ToolArgs = ups.toolArgs(deps.ToolArgs)
	pl, err := runtime.Build(ctx, withoutTurns(p), deps)
	if err != nil {
		ups.close()
		return nil, err
	}
	s.settlements.add(pl)
	ups.scan(ctx, pl, s.log)
	g := &generation{plan: p, pl: pl, keys: kr, mcp: ups, deps: base, modelIDs: modelIDs(p), done: make(chan struct{}), log: s.log,
		withholdCache: s.opts.CacheUsage.withholds(kr), tenants: kr.tenants()}
	for name := range p.Models {
		g.models = append(g.models, name)
	}
	sort.Strings(g.models)
	return g, nil
}

// hostTools returns the names of the host's tools.
func hostTools(tools map[string]runtime.ToolFunc) map[string]bool {
	host := make(map[string]bool, len(tools))
	for name := range tools {
		host[name] = true
	}
	return host
}

// acquire returns the current generation, held until release. Once the
// server is closed no generation replaces the last one, which it returns
// (retired, perhaps closed): the caller refuses the request.
func (s *Server) acquire() *generation {
	for {
		g := s.cur.Load()
		g.active.Add(1)
		if !g.retired.Load() || s.closed.Load() {
			return g
		}
		g.release()
	}
}

// release lets go of g. A retired generation its last holder lets go of
// closes on a goroutine of its own (its pipeline, its MCP upstream
// sessions, each of which may wait for its server): the holder is a
// request, whose response must not wait for it, or the shutdown's hang-up,
// which must not wait for it before it closes the connections. Close waits
// for it (Server.Close).
func (g *generation) release() {
	if g.active.Add(-1) == 0 && g.retired.Load() {
		go g.close()
	}
}

// retire marks g as replaced: it closes, on a goroutine of its own, once no
// request holds it. Neither a reload nor an MCP upstream's new tool list,
// which calls of that upstream wait for, waits for its close.
func (g *generation) retire() {
	g.retired.Store(true)
	if g.active.Load() == 0 {
		go g.close()
	}
}

func (g *generation) close() {
	g.once.Do(func() {
		g.closing.Store(closingPipeline)
		if err := g.pl.Close(); err != nil {
			g.log.Error("close pipeline", "generation", g.n, "error", err)
		}
		g.closing.Store(closingMCP)
		g.mcp.close()
		g.closing.Store(0)
		close(g.done)
	})
}

// install makes g the current generation and retires the previous one.
func (s *Server) install(g *generation) {
	g.n = s.gens.Add(1)
	s.metrics.generation.Set(float64(g.n))
	s.metrics.withheld.Reset()
	for _, t := range g.mcp.tools {
		if t.withheld != nil {
			s.metrics.withheld.WithLabelValues(t.server, t.withheld.Layer).Inc()
		}
	}
	if names := memoryTrails(g.plan, g.deps, s.runsTools(g.plan)); len(names) > 0 {
		s.log.Warn("audit trail in process memory: not durable (lost when the process ends), and only the last records are kept; declare a sqlite, redis or postgres store as its sink",
			"layers", names, "kept", runtime.DefaultMemoryAuditMax)
	}
	if turn := g.plan.Chains.Turn; len(turn) > 0 {
		names := make([]string, len(turn))
		for i, l := range turn {
			names[i] = cmp.Or(l.Name, l.Use)
		}
		s.log.Warn("turn chain not run by the gateway: it serves model calls through the chat chain and tool calls through the tool chain, never an agent turn, so these layers act only where a host runs turns (runtime.Pipeline.RunAgent, Turn); move a check meant for the gateway's callers to the chat chain",
			"layers", names)
	}
	if names := runScopedLimits(g.plan, s.runsTools(g.plan)); len(names) > 0 {
		s.log.Warn("rate limit of scope run: a request without "+RunHeader+", and each MCP session, is a run of its own with a fresh bucket, so these hold back no caller that omits the header or opens another session; give a caller's limit scope key (or global)",
			"layers", names)
	}
	if names := runScopedBudgets(g.plan, s.runsTools(g.plan)); len(names) > 0 {
		s.log.Warn("budget of scope run only: a request without "+RunHeader+", and each MCP session, is a run of its own with a whole budget, so these hold no caller that omits the header to a budget; give a caller's budget scope key (or global), beside them in the chain",
			"layers", names)
	}
	if names := runKeyedIdempotency(g.plan, s.runsTools(g.plan)); len(names) > 0 {
		s.log.Warn("idempotency keyed on the run: a tool call without Idempotency-Key is keyed on its run, and each MCP session without "+RunHeader+" is a run of its own, so a call sent again on another session (its replica gone, its session expired or closed) runs again; give these layers key_args naming the arguments that identify the effect (an order id), or have clients send Idempotency-Key or "+RunHeader,
			"layers", names)
	}
	if names := runOnlyToolLayers(g.plan, s.runsTools(g.plan)); len(names) > 0 {
		s.log.Warn("tool-chain layers that act only on a call that runs: the gateway runs no tool without mcp servers (the client runs the calls the model proposes, which the tool chain only admits), so these never act; clean results in the chat chain, which reads them when the client sends them back",
			"layers", names)
	}
	old := s.cur.Swap(g)
	// The tools are listed on /mcp once g serves their calls: a client
	// that calls a tool as soon as it is listed reaches g, not the
	// generation before, which may have withheld or not known it.
	s.mcp.sync(g)
	if old != nil {
		s.replacedMu.Lock()
		s.replaced = append(slices.DeleteFunc(s.replaced, (*generation).closed), old)
		s.replacedMu.Unlock()
		old.retire()
	}
}

// closed reports whether g's close is done.
func (g *generation) closed() bool {
	select {
	case <-g.done:
		return true
	default:
		return false
	}
}

// generations returns the current generation and those it replaced that
// are not yet closed.
func (s *Server) generations() []*generation {
	s.replacedMu.Lock()
	defer s.replacedMu.Unlock()
	gens := []*generation{s.cur.Load()}
	for _, g := range s.replaced {
		if !g.closed() {
			gens = append(gens, g)
		}
	}
	return gens
}

// Reload loads, vets and builds the policy again and swaps the new
// pipeline in when that succeeds. Requests in flight finish on the old
// pipeline, which is closed after the last of them, apart: neither Reload
// nor that request waits for the close, Close does. On failure the old
// pipeline stays and the error (with the diagnostics) is logged and
// returned; a failure that may pass without a change of the files (a
// store or MCP upstream out of reach: transientReload) is tried again
// after a wait that grows (retryLater). Each layer whose state the change
// leaves behind is logged; a change that starts idempotency records
// afresh is refused (ErrStateReset) unless Options.AllowStateReset.
func (s *Server) Reload(ctx context.Context) error { return s.reload(ctx, nil) }

// reload is Reload, or with r the retry r of a failed reload (retryLater),
// which does nothing when another reload ran since r was scheduled.
func (s *Server) reload(ctx context.Context, r *reloadRetry) error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.closed.Load() {
		return errors.New("serve: server is closed")
	}
	if r != nil {
		if s.retry != r {
			return nil
		}
		s.log.Info("trying the failed reload again", "attempt", r.attempt, "after", r.wait)
	}
	g, err := s.load(ctx)
	wait := s.retryLater(err, r)
	if errors.Is(err, ErrStateReset) {
		s.metrics.reloads.WithLabelValues("refused").Inc()
		s.log.Error("reload refused; still serving the previous policy", "generation", s.cur.Load().n, "error", err)
		return err
	}
	if err != nil {
		s.metrics.reloads.WithLabelValues("failed").Inc()
		// The files name what failed: a plan's build errors do not.
		files := s.watched.paths()
		slices.Sort(files)
		attrs := []any{"generation", s.cur.Load().n, "files", files, "error", err}
		if wait > 0 {
			attrs = append(attrs, "retry_in", wait)
		}
		s.log.Error("reload failed; still serving the previous policy", attrs...)
		return err
	}
	old := s.cur.Load()
	s.install(g)
	s.revoked.Store(nil)
	if !g.keys.open() {
		// Under a policy without keys every session serves anyone.
		s.closeRevokedSessions(removedKeys(old.keys, g.keys))
	}
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.log.Info("reloaded", "policy", g.plan.Policy, "generation", g.n)
	return nil
}

// Close retires the current generation and waits until it is closed (its
// requests have finished), and so is every generation a reload replaced,
// then removes the server's metrics from Options.Registry. Serve calls it
// at shutdown. A request that arrives after it is a 503.
func (s *Server) Close() error {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	close(s.closing)
	s.ready.Store(false)
	s.retryLater(nil, nil)
	s.cur.Load().retire()
	// No generation is installed once closed is set under reloadMu: these
	// are all there are.
	for _, g := range s.generations() {
		<-g.done
	}
	s.metrics.unregister()
	return nil
}

// ServeHTTP implements http.Handler. It refuses, 403 in the client's
// format, a browser's request made for another site (a page posting a
// form or text to the gateway: its Sec-Fetch-Site or Origin says so),
// which a policy without keys would serve on the operator's providers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := crossOrigin.Check(r); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(errorBody(clientAPI(r), http.StatusForbidden, string(errForeignOrigin), "",
			fmt.Sprintf("a browser's request from another site is refused (%v)", err)))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// errForeignOrigin is the code of a request crossOrigin refuses.
const errForeignOrigin errCode = "cross_origin"

// crossOrigin detects a browser's cross-origin request of a method that is
// not safe. Clients other than browsers send neither Sec-Fetch-Site nor
// Origin, and pass.
var crossOrigin = http.NewCrossOriginProtection()

// Serve serves on ln until ctx ends, reloading the policy when its files
// change, and ending idle runs. Then it turns unready (/readyz answers 503),
// goes on serving for DrainDelay, stops accepting connections, lets
// the requests in flight finish within ShutdownTimeout (cutting the rest),
// and closes the pipeline. It returns the listener's error, if any, or
// ErrAborted when Abort cut the shutdown short.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := s.HTTPServer()
	bg, stopBG := context.WithCancel(ctx)
	defer context.AfterFunc(s.stopNow, stopBG)()
	var wg sync.WaitGroup
	wg.Go(func() { s.watch(bg) })
	wg.Go(func() { s.sweepRuns(bg) })
	shutdownDone := make(chan error, 1)
	// cutAt is when the requests cut at the shutdown deadline must have
	// ended; it is set before shutdownDone is sent.
	var cutAt time.Time
	go func() {
		<-bg.Done()
		s.ready.Store(false)
		if d := s.opts.DrainDelay; d > 0 && s.stopNow.Err() == nil {
			s.log.Info("draining: unready, still serving", "for", d)
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-s.stopNow.Done():
				t.Stop()
			}
		}
		sctx, cancel := context.WithTimeout(s.stopNow, s.opts.ShutdownTimeout)
		defer cancel()
		err := hs.Shutdown(sctx)
		if err != nil {
			cutAt = time.Now().Add(cutWait)
		}
		if err != nil && s.stopNow.Err() == nil {
			// The grace is over: cancel the requests still open, so that
			// each ends as a failure does (a stream with an error event,
			// a call with a 503) rather than with its connection cut, and
			// let them write that end until cutAt.
			s.cutRequests(errShutdownCut)
			wctx, wcancel := context.WithDeadline(s.stopNow, cutAt)
			_ = hs.Shutdown(wctx)
			wcancel()
		}
		if err != nil {
			// The deadline passed, or Abort: cut the streams still open.
			s.hangups.hangUp()
			_ = hs.Close()
		}
		shutdownDone <- err
	}()
	s.log.Info("serving", "addr", ln.Addr().String(), "policy", s.cur.Load().plan.Policy)
	if s.metricsLoopbackOnly(ln.Addr()) {
		s.log.Warn("the keys name more than one tenant: /metrics, which names every tenant and its spend, is served on this address to loopback connections only; serve it on an internal address with -metrics ADDR",
			"addr", ln.Addr().String(), "tenants", s.cur.Load().tenants)
	}
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	stopBG()
	serr := <-shutdownDone
	aborted := s.stopNow.Err() != nil
	switch {
	case aborted:
		s.log.Warn("stopping at once: open requests were cut")
	case serr != nil:
		s.log.Warn("shutdown deadline passed; open requests were cut", "timeout", s.opts.ShutdownTimeout)
	}
	wg.Wait()
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	var cut <-chan time.Time
	if serr != nil || aborted {
		// The requests cut end as their contexts are cancelled; one
		// that ignores it (a host tool, a store without a timeout) must
		// not keep the process past its deadline.
		if cutAt.IsZero() {
			cutAt = time.Now().Add(cutWait)
		}
		cut = time.After(time.Until(cutAt))
	}
	select {
	case cerr := <-closed:
		if cerr != nil && err == nil {
			err = cerr
		}
	case <-cut:
		if beforeStillClosing != nil {
			beforeStillClosing()
		}
		s.stillClosing(aborted, time.Since(cutAt.Add(-cutWait)))
	}
	if aborted && err == nil {
		err = ErrAborted
	}
	return err
}

// stillClosing logs what kept the server from closing by the end of the
// wait after the shutdown cut, sinceCut ago: requests still running (a host
// tool or a store call that ignores its cancellation), which hold the
// pipeline open, else the pipeline closing (its stores), else the sessions
// with MCP upstream servers closing (each waits for the cancellations of
// its calls to be written, and for its server to let go: a process to
// exit, a DELETE to be answered), of the last generation or of one a
// reload replaced. The grace the requests had is 0 at Abort.
func (s *Server) stillClosing(aborted bool, sinceCut time.Duration) {
	grace := s.opts.ShutdownTimeout
	if aborted {
		grace = 0
	}
	since := sinceCut.Round(time.Millisecond)
	var running int64
	var mcpClosing bool
	var servers []string
	for _, g := range s.generations() {
		running += g.active.Load()
		if g.closing.Load() == closingMCP {
			mcpClosing = true
			servers = append(servers, g.mcp.stillClosing()...)
		}
	}
	slices.Sort(servers)
	servers = slices.Compact(servers)
	switch {
	case running > 0:
		s.log.Error("requests still running after the shutdown cut; returning without closing the pipeline",
			"running", running, "grace", grace, "since_cut", since)
	case mcpClosing:
		s.log.Error("mcp upstream sessions still closing after the shutdown cut; returning without waiting for them",
			"servers", servers, "grace", grace, "since_cut", since)
	default:
		s.log.Error("pipeline still closing after the shutdown cut; returning without waiting for it",
			"grace", grace, "since_cut", since)
	}
}

// Abort stops Serve at once: the drain and the grace of a shutdown under
// way end (or a shutdown starts without them), every request in flight
// has its context cancelled and its connection closed, and Serve returns
// ErrAborted. It is the second SIGTERM of agentc serve.
func (s *Server) Abort() { s.abort() }

// beforeStillClosing, when set (by a test), is called as the wait after
// the shutdown cut ends, before stillClosing names what is still closing:
// what a generation released at the hang-up is closing by then depends on
// how far its own goroutine got.
var beforeStillClosing func()

// cutWait bounds the wait, after the shutdown deadline cut the requests
// still open, for them to write their end (an error event, a 503) and to
// end, and for the pipeline to close.
var cutWait = time.Second

// shuttingDown refuses a request, or ends one, because the server is
// shutting down: a 503 with Retry-After (a stream under way ends with an
// error event).
type shuttingDown struct{ detail string }

func (e *shuttingDown) Error() string {
	return e.what() + "; retry the request"
}

// what says what happened, without what the client should do.
func (e *shuttingDown) what() string {
	return "the server is shutting down" + e.detail
}

var (
	// errShutdownCut is the cause of the end of a request's context when
	// the shutdown's grace period is over.
	errShutdownCut error = &shuttingDown{" and the grace period for requests in flight is over"}
	// errClosed refuses a request that arrives once the server is closed.
	errClosed error = &shuttingDown{}
)

// MaxHeaderBytes bounds a request's head, its request line and headers
// together: a longer one is refused with a 431.
const MaxHeaderBytes = 64 << 10

// headerSlack is what net/http reads of a request's head past its
// http.Server.MaxHeaderBytes.
const headerSlack = 4096

// HTTPServer returns an http.Server for s with the configured timeouts.
// The body deadline and the response deadline are set per request.
func (s *Server) HTTPServer() *http.Server {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		// net/http reads up to MaxHeaderBytes and 4 KiB more (room for
		// its buffer) before it refuses a request's head: without them,
		// the bound is MaxHeaderBytes to the byte.
		MaxHeaderBytes: MaxHeaderBytes - headerSlack,
		ErrorLog:       slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// Abort, and the end of the grace, cancel every request.
		BaseContext: func(net.Listener) context.Context { return s.requests },
	}
	// An MCP session's standalone event stream carries no call: it ends
	// when the shutdown starts, or it would hold it for the whole grace.
	hs.RegisterOnShutdown(s.mcp.live.end)
	return hs
}

// OpsHTTPServer returns an http.Server for the operations listener
// (OpsHandler: /metrics, /healthz, /readyz), with the request heads and
// timeouts of HTTPServer's.
func (s *Server) OpsHTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.OpsHandler(),
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes - headerSlack,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// sweepRuns ends the runs idle for longer than RunIdle on the current
// generation.
func (s *Server) sweepRuns(ctx context.Context) {
	t := time.NewTicker(max(s.opts.RunIdle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.runs.sweep(now)
		}
	}
}

// endRuns ends runs on the current generation's layers (the tracker's
// endRuns). Once the server is closed there is no generation left to
// hold their state.
func (s *Server) endRuns(ids []string) {
	for {
		g := s.cur.Load()
		g.active.Add(1)
		if !g.retired.Load() {
			for _, id := range ids {
				g.pl.EndRun(id)
			}
			g.release()
			return
		}
		g.release()
		if s.closed.Load() {
			return
		}
	}
}

// healthz answers that the process is up.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// readyz answers whether the server takes requests, and the generation of
// the policy it serves.
func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !s.ready.Load() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("shutting down\n"))
		return
	}
	g := s.cur.Load()
	fmt.Fprintf(w, "ready: policy %s, generation %d\n", g.plan.Policy, g.n)
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{})
}

// guardTenants serves h (the metrics on the callers' listener) to every
// connection while the policy's keys name at most one tenant, and to
// loopback connections only (a scraper beside the gateway) while they name
// more: the metrics name every tenant and its spend, which neither another
// tenant nor a caller without a key has any business reading.
func (s *Server) guardTenants(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cur.Load().tenants > 1 && !onUnixSocket(r) && !LoopbackAddr(r.RemoteAddr) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(errTenantsMetrics + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// metricsLoopbackOnly reports whether a scraper on another host than the
// gateway's, reaching it at addr, is refused /metrics (guardTenants).
func (s *Server) metricsLoopbackOnly(addr net.Addr) bool {
	if s.opts.MetricsElsewhere || s.cur.Load().tenants < 2 || addr.Network() == "unix" {
		return false
	}
	return !LoopbackAddr(addr.String())
}

// onUnixSocket reports whether r came on a Unix socket listener (an
// embedder's): its connections are local, and their remote address names
// no host.
func onUnixSocket(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return ok && local != nil && (local.Network() == "unix" || local.Network() == "unixpacket")
}

// errTenantsMetrics refuses /metrics on the callers' listener to a
// connection from another host.
const errTenantsMetrics = "the metrics name every tenant and its spend: with keys of more than one tenant they are served on this address to loopback connections only; serve them on an internal address with -metrics ADDR (Options.MetricsElsewhere and OpsHandler)"

// OpsHandler serves GET /metrics, /healthz and /readyz, for a listener of
// its own: an internal address the scraper and the orchestrator reach and
// callers do not (see Options.MetricsElsewhere). Any other path is 404.
func (s *Server) OpsHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.guardHost(s.metricsHandler()))
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	return mux
}

// routes registers the handlers.
func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if !s.opts.MetricsElsewhere {
		s.mux.Handle("GET /metrics", s.guardHost(s.guardTenants(s.metricsHandler())))
	}
	s.handle("GET /v1/models", "models", apiClient, s.listModels)
	s.handle("GET /v1/models/{model...}", "model", apiClient, s.getModel)
	s.handle("POST /v1/chat/completions", "chat_completions", apiOpenAI, func(x *exchange) { s.chat(x, &openAIChat) })
	s.handle("POST /v1/responses", "responses", apiOpenAI, func(x *exchange) { s.chat(x, &responsesChat) })
	s.handle("POST /v1/responses/compact", "responses_compact", apiOpenAI, func(x *exchange) { s.chat(x, &responsesCompact) })
	for _, p := range storedResponseRoutes {
		s.handle(p, "responses_stored", apiOpenAI, storedResponse)
	}
	s.handle("POST /v1/messages", "messages", apiAnthropic, func(x *exchange) { s.chat(x, &anthropicChat) })
	s.handle("POST /v1/messages/count_tokens", "count_tokens", apiAnthropic, s.countTokens)
	s.handle("/mcp", "mcp", apiMCP, s.mcpHandler)
	s.handle("/", "unknown", apiOpenAI, func(x *exchange) {
		x.fail(http.StatusNotFound, errNotFound, fmt.Sprintf("no route for %s %s", x.r.Method, x.r.URL.Path))
	})
}
