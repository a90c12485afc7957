package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// ModelClient calls one model. Stream sends the request and pushes each
// delta of the response to yield, stopping when yield returns false (the
// consumer stopped: return nil). It reports usage on a delta. It must return
// promptly once ctx is done. yield is valid only until Stream returns: a
// delta yielded later is dropped (and logged once per pipeline).
type ModelClient interface {
	Stream(ctx context.Context, req *ChatRequest, yield func(Delta) bool) error
}

// ModelFunc adapts a func to ModelClient.
type ModelFunc func(ctx context.Context, req *ChatRequest, yield func(Delta) bool) error

// Stream calls f.
func (f ModelFunc) Stream(ctx context.Context, req *ChatRequest, yield func(Delta) bool) error {
	return f(ctx, req, yield)
}

// Deps are what a pipeline calls out to. Every field is optional. A port
// (a field of an interface type, or an entry of a map of them) set to a
// typed nil (a nil *MemoryStore as KV, a nil *VirtualClock as Clock, a nil
// ModelFunc) fails Build, naming it: leave it nil for its default. A nil
// *net.Resolver is the system's resolver, as package net defines it.
type Deps struct {
	// Models are the model clients by name. The innermost chat handler calls
	// the one named by the request (which fallback and hedge rewrite). Build
	// adds a client for every model of the plan that declares a provider
	// and is not named here (see ProviderModels): an entry here wins. A
	// nil entry (or a typed nil: a nil ModelFunc) fails Build.
	Models map[string]ModelClient
	// Tools are the tools by name.
	Tools map[string]ToolFunc
	// ToolArgs declares, by name, tools the host serves that the policy
	// does not declare (an MCP proxy's upstream tools), with the JSON
	// Schema of their arguments: a call to one is not refused as
	// undeclared, and its arguments are checked against the schema on
	// entry to the tool chain. For a tool the policy declares with an args
	// schema, the policy's schema is the one checked. A schema that does
	// not compile fails Build.
	ToolArgs map[string]json.RawMessage
	// RequireServed fails Build when a tool the policy declares has no
	// function in Tools, or a model it declares has no client (in Models,
	// or made for its provider), naming every one: without it such a call
	// fails only when it is made. Set it when the host supplies every tool
	// and model the policy may call (a service that owns its clients).
	RequireServed bool
	// NoDeclaredTools stops offering the policy's declared tools to the
	// model: a chat request without Tools then offers none. Set it when the
	// caller manages the tools it offers itself (a gateway forwarding its
	// clients' requests). A single request opts out with an empty, non-nil
	// Tools.
	NoDeclaredTools bool
	// Audit is the default audit sink (nil: an in-memory sink per pipeline).
	Audit AuditSink
	// AuditSinks are audit sinks by store name (an audit layer's `sink`).
	AuditSinks map[string]AuditSink
	// KV is the default key-value store (nil: an in-memory store per
	// pipeline).
	KV KV
	// Stores are key-value stores by store name (a layer's `store`).
	Stores map[string]KV
	// Index is the default vector index (nil: the policy's "default" store,
	// else an in-memory index per pipeline).
	Index VectorIndex
	// Indexes are vector indexes by store name (a layer's `index`).
	Indexes map[string]VectorIndex
	// Embedder embeds text for vector indexes (nil: HashEmbedder).
	Embedder Embedder
	// Logger receives the log layers' lines and the runtime's warnings
	// (nil: slog.Default()).
	Logger *slog.Logger
	// TracerProvider creates the tracing layers' spans (nil: the global
	// provider, a no-op unless the host installs one).
	TracerProvider trace.TracerProvider
	// Clock is the time source of every layer that waits or reads the time
	// (nil: the real clock). A VirtualClock runs the pipeline without
	// sleeping.
	Clock Clock
	// Dir resolves the relative paths of the plan (file_check roots,
	// sqlite store files). Empty: the process's working directory. The
	// CLI sets it to the policy's directory.
	Dir string
	// Random is the source of backoff jitter (nil: the process's). A
	// seeded one (NewSeededRandom) makes runs on a VirtualClock repeatable.
	Random Random
	// Retriever finds the grounding items of a plan with a grounding
	// section (nil: chat calls retrieve and inject nothing; the host may
	// call Pipeline.Ground itself).
	Retriever Retriever
	// Checkpoints is the default checkpoint store (nil: the policy's
	// "default" store, else an in-memory store per pipeline).
	Checkpoints CheckpointStore
	// Backends are store backends by store name, used in place of opening
	// the store the policy declares under that name (a scenario's in-memory
	// stand-in for a redis or postgres store). The pipeline does not own
	// them beyond Close, which a MemoryStore survives with its data; a
	// MemoryStore among them follows Clock.
	Backends map[string]StoreBackend
	// Memory, when set, is the process's in-memory state in place of the
	// pipeline's own: the default store when the policy declares none
	// (idempotency records, caches, checkpoints, leases), and the budget
	// ledgers and rate limiters of the layers without a store (their keys
	// name the stage and the layer). A host that builds the pipeline again
	// for the same policy (a reload) passes the same one, so a reload
	// neither refunds a budget, nor resets a rate limit, nor forgets which
	// side-effecting calls ran. It follows the real clock, whatever Clock.
	Memory *MemoryStore
	// StorePool, when set, holds the declared stores open across the
	// pipelines built with it: a host that builds the pipeline again for a
	// new version of the policy (a reload) passes the same one, so a
	// declared memory store keeps its data (idempotency records, budgets,
	// rate limits, caches) and a networked store its connections, as long
	// as the store's name and declaration stay the same (a memory store:
	// its name; see StorePool).
	StorePool *StorePool
	// StateHold, when set, holds the state's background sinks: they deliver
	// nothing until it is closed (or DrainState is called), so that a test
	// fills the queue deterministically.
	StateHold <-chan struct{}
	// Resolver looks up the host names of the layers that check where a
	// call goes (egress's URL check and guarded client; nil: the system's
	// resolver). A test stubs it so that nothing reaches a real DNS server.
	Resolver Resolver
	// HTTPClient posts the events of the state's webhook sinks (nil: a
	// client with a 10 s timeout). A test gives one whose transport
	// answers without the network.
	HTTPClient *http.Client
}

// Resolver looks up the addresses of a host name; network is "ip", "ip4"
// or "ip6". *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Resolver returns the pipeline's resolver (Deps.Resolver; nil: the
// system's).
func (b *BuildContext) Resolver() Resolver {
	b.p.resolverAsked.Store(true)
	return b.p.deps.Resolver
}

// AsksResolver reports whether a layer asked for the resolver
// (BuildContext.Resolver) while the pipeline was built: without one, no
// lookup of the pipeline reaches Deps.Resolver.
func (pl *Pipeline) AsksResolver() bool { return pl.resolverAsked.Load() }

// BuildContext is what a middleware's Provision sees: the plan, its own layer
// and the pipeline's dependencies.
type BuildContext struct {
	// Context is Build's context; Provision must not keep it.
	Context context.Context
	// Plan is the plan being built. Read-only.
	Plan *plan.Plan
	// Stage is the chain the layer belongs to.
	Stage plan.Stage
	// Index is the layer's position in its chain (0 outermost).
	Index int
	// Layer is the layer being built. Read-only.
	Layer plan.Layer
	// Logger logs with the layer's name and stage attached.
	Logger *slog.Logger

	p *Pipeline
}

// Shared returns the value the pipeline holds under key, creating it with mk
// on first use: several layers of one pipeline (any stage) share it, and a
// pipeline built again starts afresh. Keys should start with the module id.
func (b *BuildContext) Shared(key string, mk func() any) any {
	if v, ok := b.p.shared[key]; ok {
		return v
	}
	if b.p.shared == nil {
		b.p.shared = map[string]any{}
	}
	v := mk()
	b.p.shared[key] = v
	return v
}

// Outer returns the layers of the layer's chain that sit outside it,
// outermost first (they are built before it). A layer that writes text of
// its own into the call (a summarizing compaction) has those that screen
// text (GroundingScreener) read it, since they read the call before it did.
func (b *BuildContext) Outer() []LayerInfo { return slices.Clone(b.p.layers[b.Stage]) }

// Digester returns the pipeline's Digester: keyed when the policy sets
// settings.digest_key_env, plain otherwise. A layer that stores a digest of
// a call's arguments or of an error's text makes it with this one.
func (b *BuildContext) Digester() Digester { return b.p.digester }

// Name returns the layer's name (its `use` when unnamed).
func (b *BuildContext) Name() string { return layerName(b.Layer) }

// Path resolves a path of the plan: a relative path is joined to
// Deps.Dir (left relative to the working directory when Dir is empty).
func (b *BuildContext) Path(path string) string { return b.p.resolvePath(path) }

func (pl *Pipeline) resolvePath(path string) string {
	if path == "" || filepath.IsAbs(path) || pl.deps.Dir == "" {
		return path
	}
	return filepath.Join(pl.deps.Dir, path)
}

// Models returns the model clients of the pipeline's deps.
func (b *BuildContext) Models() map[string]ModelClient { return b.p.models }

// Tool returns the declaration of the tool named name, and whether the
// policy (or Deps.ToolArgs) declares it.
func (b *BuildContext) Tool(name string) (ToolInfo, bool) {
	e := b.p.tools[name]
	if e == nil || !e.known {
		return ToolInfo{}, false
	}
	return e.info, true
}

// TracerProvider returns the deps' tracer provider (the global one when
// unset).
func (b *BuildContext) TracerProvider() trace.TracerProvider {
	if b.p.deps.TracerProvider != nil {
		return b.p.deps.TracerProvider
	}
	return otel.GetTracerProvider()
}

// Predicate compiles the layer's predicate under key ("deny", "require", ...)
// from Layer.Predicates. It returns nil and no error when the layer has none.
func (b *BuildContext) Predicate(key string) (*Predicate, error) {
	pr := b.Layer.Predicates[key]
	if pr == nil {
		return nil, nil
	}
	c, err := compilePredicate(b.Plan, pr, b.Stage)
	if err != nil {
		return nil, fmt.Errorf("predicate %s: %w", key, err)
	}
	return c, nil
}

// CompilePredicate compiles a predicate that the plan does not carry in
// Layer.Predicates (for example one built from the layer's config by a
// hand-written plan). The predicate must be of the layer's stage.
func (b *BuildContext) CompilePredicate(pr *plan.Predicate) (*Predicate, error) {
	return compilePredicate(b.Plan, pr, b.Stage)
}

// Pipeline is a built plan: the folded handler of each stage. It is safe for
// concurrent use. Close releases the layers' resources.
type Pipeline struct {
	plan   *plan.Plan
	deps   Deps
	logger *slog.Logger
	models map[string]ModelClient
	// builtModels are the clients Build made for the models that declare
	// a provider: Close closes them (a host's Deps.Models are its own).
	builtModels []ModelClient
	// modelList holds the models when there are few (nil otherwise).
	modelList []namedModel
	tools     map[string]*toolEntry
	// toolList holds the tools when there are few (nil otherwise).
	toolList []*toolEntry
	// allowUndeclared lets calls to undeclared tools run
	// (settings.allow_undeclared_tools).
	allowUndeclared bool
	// maxAnswer bounds one model call's answer (settings.max_answer_bytes).
	maxAnswer int64
	// digester makes the digests the layers store of arguments and error
	// text: keyed with settings.digest_key_env, else plain.
	digester Digester
	// offered are the declared tools a request without Tools offers.
	offered []ToolDef

	chat  ChatHandler
	tool  ToolHandler
	turn  TurnHandler
	admit *Predicate
	// admitters are the tool layers that decide a call from the call
	// alone, outermost first (AdmitTool).
	admitters []toolAdmitter
	// keyers are the tool layers that pass a key of their own downstream,
	// outermost first (ToolKeyer).
	keyers []toolKeyer
	// grounding is the built grounding section (nil: none).
	grounding *groundingPlan

	layers map[plan.Stage][]LayerInfo
	insts  []Middleware

	// stores are the state backends opened for the layers (stores.go).
	stores storeSet
	// runs ends named runs idle for settings.run_idle (nil: none tracked).
	runs      *runActivity
	closeOnce sync.Once
	closeErr  error
	// closed is set by Close: calls started afterwards fail with
	// ErrClosed.
	closed atomic.Bool
	// lateYield logs the first delta a model client yielded after its
	// Stream returned.
	lateYield sync.Once
	// shared holds the values layers share within the pipeline
	// (BuildContext.Shared).
	shared map[string]any
	// state is the compiled state section (nil: none) and states the run
	// states by run id (state.go).
	state  *stateEngine
	states runStates
	// recordRuns is set once a checkpointer exists: runs' transcripts and
	// tool results are recorded for it (checkpoint.go). toolHooks run
	// after each tool call (BuildContext.OnToolResult), callHooks when an
	// agent turn recorded the model's tool calls, before any runs
	// (BuildContext.OnToolCalls), turnHooks before a turn's layers run
	// (BuildContext.OnTurnStart).
	recordRuns atomic.Bool
	// busy holds, while runs are recorded, the ids of the runs with a
	// turn under way and the turns whose body runs an agent turn (hold).
	busy      sync.Map
	toolHooks []func(ctx context.Context) error
	callHooks []func(ctx context.Context) error
	turnHooks []func(ctx context.Context) error
	// checkpointKeep is how many versions of a run the saves in each
	// checkpoint store leave, by store name (BuildContext.KeepCheckpoints).
	checkpointKeep map[string]int
	// resolverAsked is set once a layer asked for the resolver
	// (BuildContext.Resolver).
	resolverAsked atomic.Bool
}

// LayerInfo describes one built layer.
type LayerInfo struct {
	// Stage is the chain.
	Stage plan.Stage
	// Index is the position in the chain (0 outermost).
	Index int
	// Name and Use are the layer's name and module id.
	Name, Use string
	// Middleware is the provisioned instance.
	Middleware Middleware
}

type namedModel struct {
	name   string
	client ModelClient
}

type toolEntry struct {
	info  ToolInfo
	fn    ToolFunc
	pinfo *predicate.ToolInfo
	// known is set for a tool the policy or Deps.ToolArgs declares.
	known bool
	// args checks the arguments on entry (nil: any arguments).
	args *jsonschema.Schema
	// taint, for a secret_result tool, records each raw result as secret
	// for the call's run.
	taint func(runID string, v any)
}

// Build creates the middleware graph of p: for every layer of every chain it
// creates the registered module's instance, decodes the layer's config into it
// (unknown fields are an error), provisions and validates it, then folds each
// chain into one handler. On error, every instance created so far is cleaned
// up, and the error names the layer; a panic in a layer's lifecycle cleans up
// the same way and is re-raised. Build checks ctx before each layer and
// returns its error once it ended. Build does not retain ctx.
func Build(ctx context.Context, p *plan.Plan, deps Deps) (*Pipeline, error) {
	if p == nil {
		return nil, errors.New("build: nil plan")
	}
	if p.Version != plan.Version {
		return nil, fmt.Errorf("build: plan version %d, want %d", p.Version, plan.Version)
	}
	if err := checkDeps(&deps); err != nil {
		return nil, err
	}
	pl := &Pipeline{
		plan:   p,
		deps:   deps,
		logger: deps.Logger,
		models: maps.Clone(deps.Models),
		tools:  map[string]*toolEntry{},
		layers: map[plan.Stage][]LayerInfo{},
	}
	if pl.logger == nil {
		pl.logger = slog.Default()
	}
	if pl.models == nil {
		pl.models = map[string]ModelClient{}
	}
	if err := checkStoreKinds(p.Stores, &deps); err != nil {
		return nil, err
	}
	provided, err := ProviderModels(ctx, p, pl.models)
	if unset := UnsetVariables(p, &deps); err != nil || len(unset) > 0 {
		// One error names every variable the build lacks, the models'
		// with the rest, so that a deploy sets them all in one go.
		closeModels(provided)
		if err != nil {
			unset = append([]error{fmt.Errorf("build models: %w", err)}, unset...)
		}
		return nil, errors.Join(unset...)
	}
	maps.Copy(pl.models, provided)
	if deps.RequireServed {
		if err := unserved(p, pl.models, deps.Tools); err != nil {
			closeModels(provided)
			return nil, err
		}
	}
	for _, name := range slices.Sorted(maps.Keys(provided)) {
		pl.builtModels = append(pl.builtModels, provided[name])
	}
	// A failed or panicking build cleans up what it provisioned (opened
	// stores and the clients it made included); a panic is then re-raised.
	done := false
	defer func() {
		if done {
			return
		}
		r := recover()
		_ = pl.cleanup()
		if r != nil {
			panic(r)
		}
	}()
	if len(pl.models) <= 8 {
		pl.modelList = make([]namedModel, 0, len(pl.models))
		for name, m := range pl.models {
			pl.modelList = append(pl.modelList, namedModel{name, m})
		}
	}
	pl.allowUndeclared = p.Settings.AllowUndeclaredTools
	if p.Settings.DigestKeyEnv != "" {
		// Fail closed: a policy that asks for keyed digests never stores
		// plain ones. The error names the variable, never its value.
		if pl.digester, err = digestKeyFromEnv(p.Settings.DigestKeyEnv); err != nil {
			return nil, fmt.Errorf("build: %w", err)
		}
	}
	pl.maxAnswer = p.Settings.MaxAnswerBytes
	if pl.maxAnswer <= 0 {
		pl.maxAnswer = plan.DefaultMaxAnswerBytes
	}
	idle := p.Settings.RunIdle
	if idle == "" {
		idle = plan.DefaultRunIdle
	}
	runIdle, err := time.ParseDuration(idle)
	if err != nil || runIdle < 0 {
		return nil, fmt.Errorf("build: settings.run_idle %q: want a duration such as 24h", p.Settings.RunIdle)
	}
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		t := p.Tools[name]
		args, err := compileArgs(t.Args)
		if err != nil {
			return nil, fmt.Errorf("build tools.%s.args: %w", name, err)
		}
		pl.tools[name] = &toolEntry{info: ToolInfo{Name: name, SideEffecting: t.SideEffecting, RetrySafe: t.RetrySafe,
			URLArg: t.URLArg, PathArg: t.PathArg, URLArgs: t.URLArgs, PathArgs: t.PathArgs, SecretResult: t.SecretResult, Declared: true}, known: true, args: args}
		if t.SecretResult {
			pl.tools[name].taint = pl.taintResult
		}
	}
	for _, name := range slices.Sorted(maps.Keys(deps.ToolArgs)) {
		e := pl.tools[name]
		if e != nil && e.args != nil {
			continue
		}
		args, err := compileArgs(deps.ToolArgs[name])
		if err != nil {
			return nil, fmt.Errorf("build: Deps.ToolArgs[%q]: %w", name, err)
		}
		if e == nil {
			e = &toolEntry{info: ToolInfo{Name: name}}
			pl.tools[name] = e
		}
		e.known, e.args = true, args
	}
	if !deps.NoDeclaredTools {
		pl.offered = DeclaredTools(p)
	}
	for name, fn := range deps.Tools {
		e := pl.tools[name]
		if e == nil {
			e = &toolEntry{info: ToolInfo{Name: name}}
			pl.tools[name] = e
		}
		e.fn = fn
	}
	for _, e := range pl.tools {
		e.pinfo = toolActivationInfo(&e.info)
	}
	if len(pl.tools) <= 8 {
		pl.toolList = make([]*toolEntry, 0, len(pl.tools))
		for _, e := range pl.tools {
			pl.toolList = append(pl.toolList, e)
		}
	}
	if err := pl.build(ctx); err != nil {
		return nil, err
	}
	if err := pl.buildState(ctx); err != nil {
		return nil, err
	}
	pl.runs = newRunActivity(pl, runIdle)
	done = true
	return pl, nil
}

// UnsetVariables names, sorted, the environment variables other than the
// models' keys (ProviderModels names those) that Build reads and finds
// unset or empty: settings.digest_key_env, the url_env of every store Build
// opens that the host does not provide in deps (openedStores), and the
// url_env of the state's webhook sinks. A host that reads variables of its
// own before Build (agentc serve: the callers' keys, the MCP servers'
// headers) names these with its own, so that a start names every variable
// it lacks at once.
func UnsetVariables(p *plan.Plan, deps *Deps) []error {
	var errs []error
	unset := func(env string) bool { return env != "" && os.Getenv(env) == "" }
	if unset(p.Settings.DigestKeyEnv) {
		errs = append(errs, fmt.Errorf("build settings.digest_key_env: environment variable %s is not set", p.Settings.DigestKeyEnv))
	}
	if p.State != nil {
		for _, name := range slices.Sorted(maps.Keys(p.State.Fields)) {
			for i, b := range p.State.Fields[name].Background {
				if b.Sink == "webhook" && b.URL == "" && unset(b.URLEnv) {
					errs = append(errs, fmt.Errorf("build state.fields.%s.background[%d]: environment variable %s (its url_env) is not set", name, i, b.URLEnv))
				}
			}
		}
	}
	opened := openedStores(p)
	for _, name := range slices.Sorted(maps.Keys(p.Stores)) {
		s := p.Stores[name]
		if s.URL != "" || !unset(s.URLEnv) || hostStore(deps, name) || !opened[name] {
			continue
		}
		errs = append(errs, fmt.Errorf("build stores.%s: environment variable %s (its url_env) is not set", name, s.URLEnv))
	}
	return errs
}

// openedStores returns the names of the stores a pipeline of p opens: those
// a layer of any chain names in its config's store, sink or index (the
// fields a policy names stores in), a state field's audit sink names, and
// the grounding record's sink; the default store, when p declares one,
// which a layer naming none uses. A store no one names is never opened, and
// its url_env never read.
func openedStores(p *plan.Plan) map[string]bool {
	opened := map[string]bool{DefaultStore: true}
	for _, chain := range [][]plan.Layer{p.Chains.Chat, p.Chains.Tool, p.Chains.Turn} {
		for _, l := range chain {
			var refs struct{ Store, Sink, Index string }
			_ = json.Unmarshal(l.Config, &refs) // a config that does not decode fails the layer's build
			opened[refs.Store], opened[refs.Sink], opened[refs.Index] = true, true, true
		}
	}
	if p.State != nil {
		for _, f := range p.State.Fields {
			for _, b := range f.Background {
				if b.Sink == "audit" {
					opened[b.Store] = true
				}
			}
		}
	}
	if p.Grounding != nil && p.Grounding.Record {
		opened[p.Grounding.Sink] = true
	}
	return opened
}

// unserved names, sorted, the tools p declares that have no function in
// tools and the models it declares that have no client in models
// (Deps.RequireServed).
func unserved(p *plan.Plan, models map[string]ModelClient, tools map[string]ToolFunc) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(p.Models)) {
		if models[name] == nil {
			errs = append(errs, fmt.Errorf("build models.%s: no client serves the model (give it in Deps.Models, or declare its provider); Deps.RequireServed is set", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		if tools[name] == nil {
			errs = append(errs, fmt.Errorf("build tools.%s: no function serves the tool (give it in Deps.Tools); Deps.RequireServed is set", name))
		}
	}
	return errors.Join(errs...)
}

// checkDeps refuses the host's dependencies that are set but hold nothing:
// a nil entry in Models, and a port (a field of Deps of an interface type,
// or an entry of a map of them) holding a typed nil (a nil *MemoryStore as
// KV, a nil *VirtualClock as Clock, a nil ModelFunc, a nil RetrieverFunc).
// Each would panic in the first call it serves, or fail every one, instead
// of failing Build. Nil is the default a port's documentation names.
func checkDeps(deps *Deps) error {
	for _, name := range slices.Sorted(maps.Keys(deps.Models)) {
		if m := deps.Models[name]; m == nil || typedNil(m) {
			return fmt.Errorf("build: Deps.Models[%q] is nil: give the model's client, or leave the name out to use the client of its provider", name)
		}
	}
	return checkPorts(reflect.ValueOf(deps).Elem(), "Deps")
}

// checkPorts is checkDeps' walk of the fields of the struct v, named what
// in its errors. An unexported field is not one the host sets, and reflect
// refuses to read it: it is skipped.
func checkPorts(v reflect.Value, what string) error {
	for i := range v.NumField() {
		f, field := v.Field(i), v.Type().Field(i).Name
		name := what + "." + field
		switch {
		case !f.CanInterface():
		case f.Kind() == reflect.Interface && !f.IsNil() && typedNil(f.Interface()):
			return fmt.Errorf("build: %s is a nil %T: give one, or leave %s nil for its default", name, f.Interface(), field)
		case f.Kind() == reflect.Map && f.Type().Elem().Kind() == reflect.Interface && f.Type().Key().Kind() == reflect.String:
			keys := f.MapKeys()
			slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
			for _, k := range keys {
				if e := f.MapIndex(k); !e.IsNil() && typedNil(e.Interface()) {
					return fmt.Errorf("build: %s[%q] is a nil %T: give one, or leave the name out", name, k.String(), e.Interface())
				}
			}
		}
	}
	return nil
}

// nilResolver is the type of a nil *net.Resolver, which package net
// defines as the zero Resolver: the system's.
var nilResolver = reflect.TypeFor[*net.Resolver]()

// typedNil reports whether x, a non-nil interface value, holds a nil
// pointer, func or channel, which no method can serve a call with (but a
// nil *net.Resolver).
func typedNil(x any) bool {
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return v.IsNil() && v.Type() != nilResolver
	}
	return false
}

func (pl *Pipeline) build(ctx context.Context) error {
	var chat []built[ChatHandler]
	var tool []built[ToolHandler]
	var turn []built[TurnHandler]
	for _, stage := range plan.Stages {
		for i, l := range pl.plan.Chains.Of(stage) {
			if err := ctx.Err(); err != nil {
				return &LayerError{Stage: stage, Index: i, Name: layerName(l), Pos: l.Pos, Err: err}
			}
			inst, sc, err := pl.buildLayer(ctx, stage, i, l)
			if err != nil {
				return &LayerError{Stage: stage, Index: i, Name: layerName(l), Pos: l.Pos, Err: err}
			}
			pl.layers[stage] = append(pl.layers[stage], LayerInfo{Stage: stage, Index: i, Name: layerName(l), Use: l.Use, Middleware: inst})
			switch stage {
			case plan.StageChat:
				chat = append(chat, built[ChatHandler]{inst.(ChatWrapper).WrapChat, sc})
			case plan.StageTool:
				tool = append(tool, built[ToolHandler]{inst.(ToolWrapper).WrapTool, sc})
				if a, ok := inst.(ToolAdmitter); ok {
					pl.admitters = append(pl.admitters, toolAdmitter{a, sc})
				}
				if k, ok := inst.(ToolKeyer); ok {
					pl.keyers = append(pl.keyers, toolKeyer{k, sc})
				}
			case plan.StageTurn:
				turn = append(turn, built[TurnHandler]{attemptAt(len(turn)+1, inst.(TurnWrapper).WrapTurn), sc})
			}
		}
	}
	if pl.plan.Admit != nil {
		c, err := compilePredicate(pl.plan, pl.plan.Admit, plan.StageAdmit)
		if err != nil {
			return fmt.Errorf("build admit: %w", err)
		}
		pl.admit = c
	}
	if err := pl.buildGrounding(ctx); err != nil {
		return err
	}
	pl.chat = fold(chat, pl.chatTerminal, scopeChat)
	pl.tool = fold(tool, toolTerminal, scopeTool)
	pl.turn = fold(turn, turnTerminal, scopeTurn)
	return nil
}

// LayerError is a layer of the plan that did not build: Build returns it
// for a layer whose config, provisioning or scope fails.
type LayerError struct {
	// Stage and Index place the layer in the plan's chains; Name is its
	// name (its use when unnamed).
	Stage plan.Stage
	Index int
	Name  string
	// Pos is the layer's position in the policy (plan.Layer.Pos; empty
	// when the plan has none).
	Pos string
	// Err is why the layer did not build.
	Err error
}

// Error names the layer by its chain and place, then why it did not build.
func (e *LayerError) Error() string {
	return fmt.Sprintf("build chains.%s[%d] %q: %v", e.Stage, e.Index, e.Name, e.Err)
}

// Unwrap returns Err.
func (e *LayerError) Unwrap() error { return e.Err }

// scope holds the generic conditions of a layer: `when` and `tools`.
type scope struct {
	when  *Predicate
	tools []string
	// log carries the layer's name and stage.
	log *slog.Logger
	// warned logs the first failed evaluation of when.
	warned sync.Once
}

type built[H any] struct {
	wrap  func(H) H
	scope *scope
}

// fold nests the layers around terminal, innermost first, so that index 0
// is outermost. A scoped layer gets a handler that skips it when its scope
// does not apply.
func fold[H any](layers []built[H], terminal H, scoped func(s *scope, layer, next H) H) H {
	h := terminal
	for i := len(layers) - 1; i >= 0; i-- {
		next := h
		h = layers[i].wrap(next)
		if s := layers[i].scope; s != nil {
			h = scoped(s, h, next)
		}
	}
	return h
}

// scopeChat skips layer for a call its when does not hold for, read as a
// chat guard reads a call (Predicate.EvalChatTurns): the layer applies when
// the when holds either as the messages were sent or with a turn's texts
// run together, so a phrase it looks for cut across the messages of one
// turn does not skip the layer the model's reading of it calls for.
func scopeChat(s *scope, layer, next ChatHandler) ChatHandler {
	return func(ctx context.Context, c *ChatCall, yield func(Delta) bool) error {
		if s.when != nil && !s.applies(s.whenChat(ctx, c)) {
			return next(ctx, c, yield)
		}
		return layer(ctx, c, yield)
	}
}

func scopeTool(s *scope, layer, next ToolHandler) ToolHandler {
	return func(ctx context.Context, c *ToolCall) (any, error) {
		if !s.appliesTool(ctx, c) {
			return next(ctx, c)
		}
		return layer(ctx, c)
	}
}

// appliesTool decides a tool layer's `tools` and `when` for c.
func (s *scope) appliesTool(ctx context.Context, c *ToolCall) bool {
	if s.tools != nil && !slices.Contains(s.tools, c.Name) {
		return false
	}
	return s.when == nil || s.applies(s.when.EvalTool(ctx, c, nil, false))
}

// toolAdmitter is a tool layer that implements ToolAdmitter, with its
// scope (nil: every call).
type toolAdmitter struct {
	admit ToolAdmitter
	scope *scope
}

// toolKeyer is a tool layer that implements ToolKeyer, with its scope
// (nil: every call).
type toolKeyer struct {
	keyer ToolKeyer
	scope *scope
}

// keyCall gives c, whose caller supplied no idempotency key, the key the
// outermost ToolKeyer that applies to it passes downstream, if it has one,
// so that every layer reads the key the tool gets.
func (pl *Pipeline) keyCall(ctx context.Context, c *ToolCall) {
	for i, k := range pl.keyers {
		if k.scope != nil && k.scope.tools != nil && !slices.Contains(k.scope.tools, c.Name) {
			continue
		}
		key, ok := k.keyer.ToolKey(c)
		if !ok && i == len(pl.keyers)-1 {
			return // no layer further in: its when need not be decided
		}
		if k.scope != nil && k.scope.when != nil && !k.scope.appliesTool(ctx, c) {
			continue
		}
		if ok {
			c.Meta.IdempotencyKey, c.Meta.keyDerived = key, true
		}
		return
	}
}

// attemptAt returns wrap, whose handler, entered at the given depth of the
// turn chain (1: outermost), drops on entry what a previous attempt of it
// asked to do at the turn's end (TurnCall.AtEnd: a layer outside it that
// runs it again abandoned that attempt), and adds what its layer asks at
// that depth.
func attemptAt(depth int, wrap func(TurnHandler) TurnHandler) func(TurnHandler) TurnHandler {
	return func(next TurnHandler) TurnHandler {
		h := wrap(next)
		return func(ctx context.Context, c *TurnCall) (string, error) {
			c.ends = slices.DeleteFunc(c.ends, func(e turnEnd) bool { return e.depth >= depth })
			outer := c.depth
			c.depth = depth
			defer func() { c.depth = outer }()
			return h(ctx, c)
		}
	}
}

func scopeTurn(s *scope, layer, next TurnHandler) TurnHandler {
	return func(ctx context.Context, c *TurnCall) (string, error) {
		if s.when != nil && !s.applies(s.when.EvalTurn(ctx, c, "", nil, false)) {
			return next(ctx, c)
		}
		return layer(ctx, c)
	}
}

// applies decides a `when`: an evaluation error applies the layer (the safe
// side for guards) and is logged, once per layer (a predicate that fails
// usually fails on every call).
// whenChat evaluates s.when over c: true when it holds either reading.
func (s *scope) whenChat(ctx context.Context, c *ChatCall) (bool, error) {
	asSent, whole, err := s.when.EvalChatTurns(ctx, c, nil)
	return asSent || whole, err
}

func (s *scope) applies(ok bool, err error) bool {
	if err != nil {
		s.warned.Do(func() {
			s.log.Warn("when predicate failed; applying the layer (logged once per layer)", "error", err)
		})
		return true
	}
	return ok
}

func (pl *Pipeline) buildLayer(ctx context.Context, stage plan.Stage, i int, l plan.Layer) (Middleware, *scope, error) {
	m, ok := LookupModule(l.Use)
	if !ok {
		near := ""
		if id := textdist.Closest(l.Use, moduleIDs()); id != "" {
			near = fmt.Sprintf(": did you mean %q?", id)
		}
		return nil, nil, fmt.Errorf("unknown middleware %q%s (not registered: import github.com/agentc-dev/agentc/builtins/all for agentc's own, or the package of yours that registers it; for a plan of another agentc, build the plan again with the agentc that loads it)", l.Use, near)
	}
	if !m.Supports(stage) {
		return nil, nil, fmt.Errorf("middleware %q does not support the %s stage", l.Use, stage)
	}
	inst := m.New()
	pl.insts = append(pl.insts, inst)
	if err := decodeConfig(inst, l.Config); err != nil {
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	b := &BuildContext{
		Context: ctx, Plan: pl.plan, Stage: stage, Index: i, Layer: l, p: pl,
		Logger: pl.logger.With("layer", layerName(l), "stage", stage),
	}
	if pv, ok := inst.(Provisioner); ok {
		if err := pv.Provision(b); err != nil {
			return nil, nil, fmt.Errorf("provision: %w", err)
		}
	}
	if v, ok := inst.(Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, nil, fmt.Errorf("validate: %w", err)
		}
	}
	var sc *scope
	if l.When != nil || (stage == plan.StageTool && len(l.Tools) > 0) {
		sc = &scope{log: b.Logger}
		if l.When != nil {
			if l.When.Phase == "after" {
				return nil, nil, errors.New(`when: phase "after": a layer's condition is decided before the call`)
			}
			w, err := compilePredicate(pl.plan, l.When, stage)
			if err != nil {
				return nil, nil, fmt.Errorf("when: %w", err)
			}
			sc.when = w
		}
		if stage == plan.StageTool && len(l.Tools) > 0 {
			sc.tools = slices.Clone(l.Tools)
		}
	}
	return inst, sc, nil
}

func layerName(l plan.Layer) string {
	if l.Name != "" {
		return l.Name
	}
	return l.Use
}

// Plan returns the plan the pipeline was built from. Read-only.
func (pl *Pipeline) Plan() *plan.Plan { return pl.plan }

// Layers returns the built layers of a stage, outermost first.
func (pl *Pipeline) Layers(stage plan.Stage) []LayerInfo {
	return slices.Clone(pl.layers[stage])
}

// ContentLayers returns the names of the layers of a stage's chain that
// could refuse or rewrite a call on what it carries before it reaches the
// model or tool: those of a builtin that guards or rewrites messages
// (security, pii, guard, redact, judge, content_filter, compaction...), and
// those of a module not marked Builtin (a custom middleware), whatever its
// traits, which say how vet orders it, not all it does. A layer is listed
// whatever its when: that is decided on a call as it reaches the layer.
func (pl *Pipeline) ContentLayers(stage plan.Stage) []string {
	var names []string
	for _, l := range pl.layers[stage] {
		m, ok := LookupModule(l.Use)
		if !ok || !m.Builtin || m.HasTrait(TraitGuards) || m.HasTrait(TraitRewritesMessages) {
			names = append(names, l.Name)
		}
	}
	return names
}

// ErrClosed is in the error of a call (Stream, Complete, Chat, Tool, Turn,
// RunAgent, AdmitTool, Admit, Ground, SetState, AppendState) started after
// Close: nothing runs, and DidNotRun holds.
var ErrClosed = errors.New("the pipeline is closed")

var errClosedCall = NotRun(ErrClosed)

// Close cleans up every layer (those that wait for writes sent again to
// their stores, ConcurrentCleaner, all at once, then the others innermost
// last built first), then closes the
// stores the layers opened and the model clients Build made (those that
// implement io.Closer; the providers' close their idle connections), not
// the host's Deps.Models. It returns the joined cleanup errors; calling it
// again returns the same result. A call started after Close fails with
// ErrClosed. Close does not wait for the calls in flight: one still running
// may find its stores closed (an outcome its audit or idempotent layer can no
// longer record leaves the call in doubt), so a host lets its calls return
// before it closes the pipeline (agentc serve closes a replaced pipeline
// once its last request has returned).
func (pl *Pipeline) Close() error {
	pl.closed.Store(true)
	pl.closeOnce.Do(func() { pl.closeErr = pl.cleanup() })
	return pl.closeErr
}

func (pl *Pipeline) cleanup() error {
	if pl.runs != nil {
		pl.runs.close()
	}
	if pl.state != nil && pl.state.queue != nil {
		pl.state.queue.close()
	}
	// The layers that wait for their stores (ConcurrentCleaner) first, all
	// at once, then the others, innermost first; the errors in that order.
	cerrs := make([]error, len(pl.insts))
	var wg sync.WaitGroup
	for i, inst := range pl.insts {
		if c, ok := inst.(ConcurrentCleaner); ok {
			wg.Go(func() { cerrs[i] = c.Cleanup() })
		}
	}
	wg.Wait()
	var errs []error
	for i := len(pl.insts) - 1; i >= 0; i-- {
		if _, ok := pl.insts[i].(ConcurrentCleaner); ok {
			errs = append(errs, cerrs[i])
		} else if c, ok := pl.insts[i].(CleanerUpper); ok {
			errs = append(errs, c.Cleanup())
		}
	}
	if err := pl.closeStores(); err != nil {
		errs = append(errs, err)
	}
	for _, m := range pl.builtModels {
		if c, ok := m.(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// anyObject is the parameters schema of a declared tool without args.
var anyObject = json.RawMessage(`{"type":"object"}`)

// DeclaredTools returns the tools the plan declares as model tool
// definitions, sorted by name: each tool's name, description and args schema
// in compact JSON (an object of any properties when it declares none), so
// that a plan loaded from the indented file agentc build writes offers, and
// is estimated and billed for, the same bytes as the compiled policy. A chat
// request without Tools offers these (see Deps.NoDeclaredTools).
func DeclaredTools(p *plan.Plan) []ToolDef {
	if len(p.Tools) == 0 {
		return nil
	}
	defs := make([]ToolDef, 0, len(p.Tools))
	for _, name := range slices.Sorted(maps.Keys(p.Tools)) {
		t := p.Tools[name]
		params := json.RawMessage(t.Args)
		if len(params) == 0 || string(params) == "true" {
			params = anyObject
		} else {
			var b bytes.Buffer
			if json.Compact(&b, params) == nil {
				params = b.Bytes()
			}
		}
		defs = append(defs, ToolDef{Name: name, Description: t.Description, Parameters: params})
	}
	return defs
}

// DeclaredTools returns the tool definitions a chat request without Tools
// offers: the plan's declared tools, or nil when Deps.NoDeclaredTools is
// set. The slice is shared: callers must not modify it.
func (pl *Pipeline) DeclaredTools() []ToolDef { return pl.offered }
