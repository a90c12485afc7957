package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentc-dev/agentc/internal/fieldpath"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// Options tune Run.
type Options struct {
	// Trace records the tracing layers' spans into Result.Trace.
	Trace bool
	// TracerProvider, when set, is the provider the tracing layers' spans
	// go to (an exporter's: agentc run installs the one the OTEL_*
	// variables configure). With Trace, the spans it samples are recorded
	// too. The caller shuts it down.
	TracerProvider *sdktrace.TracerProvider
	// Logger receives the log layers' lines (nil: discarded).
	Logger *slog.Logger
	// Dir resolves the plan's relative paths (runtime.Deps.Dir); the CLI
	// passes the policy's directory.
	Dir string
	// Clock is the pipeline's clock and the fakes' (nil: a virtual clock
	// starting at Epoch, so that no wait of the run sleeps).
	Clock runtime.Clock
	// Wrap, when set, may adjust the pipeline's dependencies before Build
	// (wrap the fakes or the audit sink to observe them).
	Wrap func(*runtime.Deps)
	// Inspect, when set, sees the pipeline after the last step, before the
	// run ends.
	Inspect func(*runtime.Pipeline)
	// OnExecute, when set, is told each time a fake really runs (takes a
	// script item; a call past the end of its script does not count): stage
	// "chat" or "tool", the model or tool name, and the call's context
	// (StepPath tells which step made it).
	OnExecute func(ctx context.Context, stage plan.Stage, name string)
}

// Epoch is the time at which the default virtual clock of a run starts.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type stepKey struct{}

// StepPath returns the path of the step a call belongs to, such as "2" or
// "1/0" (nested steps of a turn or parallel step), or "" outside a run.
func StepPath(ctx context.Context) string {
	p, _ := ctx.Value(stepKey{}).(string)
	return p
}

// Result is the outcome of a scenario; it marshals to the JSON of
// `agentc run -json`.
type Result struct {
	Steps      []StepResult `json:"steps"`
	Executions Executions   `json:"executions"`
	// Calls counts the calls each fake received, those that ran and those
	// that found no script item left (or no script).
	Calls Calls        `json:"calls"`
	Audit []AuditEntry `json:"audit"`
	Meter Meter        `json:"meter"`
	// Trace holds the recorded spans with Options.Trace.
	Trace []Span `json:"trace,omitempty"`
	// Crashed reports that a tool item with crash ended the run.
	Crashed bool `json:"crashed,omitempty"`
	// State is the run's state, when the policy declares state fields.
	State *StateSummary `json:"state,omitempty"`
	// Checkpoints lists the run's versions in the checkpoint layer's store
	// (else the default store), when the policy has a checkpoint layer or
	// a step saved or resumed one.
	Checkpoints *CheckpointSummary `json:"checkpoints,omitempty"`
	// Unused lists the scripts some of whose items no call took, unless
	// a tool crashed the run (the steps after it did not run).
	Unused []Unused `json:"unused,omitempty"`
}

// Unused is a script ("models.primary", "tools.refund", "retrieval") of
// whose Items the run took only the first Taken.
type Unused struct {
	Script string `json:"script"`
	Taken  int    `json:"taken"`
	Items  int    `json:"items"`
}

// unused lists the scripts of f with items left, in the order of their
// paths.
func (f *fakes) unused() []Unused {
	var out []Unused
	add := func(script string, next, items int) {
		if next < items {
			out = append(out, Unused{Script: script, Taken: next, Items: items})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(f.modelScript)) {
		add(fieldpath.Join("models", name), f.modelScript[name].ran(), len(f.modelScript[name].items))
	}
	add("retrieval", f.retrievals.ran(), len(f.retrievals.items))
	for _, name := range slices.Sorted(maps.Keys(f.toolScript)) {
		add(fieldpath.Join("tools", name), f.toolScript[name].ran(), len(f.toolScript[name].items))
	}
	return out
}

// UnusedWarnings places each script of res.Unused in s at its first item
// no call took, or returns nil when every item was taken. They are
// warnings, not refusals: a case may script a tool to show that the
// policy refuses the call.
func UnusedWarnings(s *Scenario, res *Result) *Error {
	if len(res.Unused) == 0 {
		return nil
	}
	errs := make([]error, len(res.Unused))
	for i, u := range res.Unused {
		errs[i] = errors.New(u.String())
	}
	return problems(s.src, errs)
}

// String names the first item no call took, and how many the run took.
func (u Unused) String() string {
	return fmt.Sprintf("%s[%d]: no call took this item: the run took %d of the script's %d items", u.Script, u.Taken, u.Taken, u.Items)
}

// StepResult is the outcome of one step.
type StepResult struct {
	Index int    `json:"index"`
	Stage string `json:"stage"`
	// Outcome is "ok", "blocked", "budget", "in_doubt", "error" or "crash"
	// (admit: set only on error).
	Outcome string `json:"outcome,omitempty"`
	// Text and Model are a chat step's delivered text and served model;
	// ToolCalls and FinishReason the tool calls it delivered (assembled
	// from their fragments) and why the model stopped.
	Text         *string           `json:"text,omitempty"`
	Model        string            `json:"model,omitempty"`
	ToolCalls    []runtime.ToolUse `json:"tool_calls,omitempty"`
	FinishReason string            `json:"finish_reason,omitempty"`
	// Refusal reports that the delivered text was marked the model's
	// refusal (runtime.Delta.Refusal), not an answer.
	Refusal bool `json:"refusal,omitempty"`
	// Result and Deduped are a tool step's.
	Result  any   `json:"result,omitempty"`
	Deduped *bool `json:"deduped,omitempty"`
	// Attempts is the attempt count of a chat or tool step.
	Attempts int `json:"attempts,omitempty"`
	// Admitted lists an admit step's admitted items; Grounding is its
	// grounding, with a grounding section.
	Admitted  *[]runtime.Item   `json:"admitted,omitempty"`
	Grounding *runtime.Grounded `json:"grounding,omitempty"`
	// Output is a turn or agent step's output; Steps a turn step's nested
	// steps.
	Output *string      `json:"output,omitempty"`
	Nested []StepResult `json:"steps,omitempty"`
	// Agent summarises an agent step.
	Agent *AgentSummary `json:"agent,omitempty"`
	// Checkpoint is the version a checkpoint step saved or a resume step
	// restored.
	Checkpoint *CheckpointInfo `json:"checkpoint,omitempty"`
	Error      *ErrorSummary   `json:"error,omitempty"`
	// Requests are the requests the fake models received during the step
	// (nested steps keep their own), in order of arrival: what each model
	// was actually sent after the chat chain's layers, with Model naming
	// the fake that received it.
	Requests []runtime.ChatRequest `json:"requests,omitempty"`

	// from is the index in Agent.Messages of an agent step's first
	// message of its turn (what its request held before is history).
	from int
}

// AgentSummary is the outcome of an agent step (runtime.AgentResult).
type AgentSummary struct {
	// Steps is the number of model calls, ToolCalls the tool calls the
	// model requested and Blocked those a guard refused.
	Steps     int `json:"steps"`
	ToolCalls int `json:"tool_calls"`
	Blocked   int `json:"blocked"`
	// Stop is "done" or "max_steps" ("" when the turn failed).
	Stop         string        `json:"stop,omitempty"`
	FinishReason string        `json:"finish_reason,omitempty"`
	Usage        runtime.Usage `json:"usage"`
	// Messages is the transcript after the turn.
	Messages []runtime.Message `json:"messages"`
}

// ErrorSummary describes a failed step.
type ErrorSummary struct {
	// Kind is runtime.KindOf: "blocked", "budget", "in_doubt", "transient",
	// "rate_limited", "timeout", "permanent", "breaker_open",
	// "store_unavailable", "canceled" or
	// "failure".
	Kind string `json:"kind"`
	// Layer names the layer that raised the error, when one did.
	Layer   string `json:"layer"`
	Message string `json:"message"`
}

// Executions counts how often each fake really ran: the script items calls
// took. A call that finds its script exhausted (or no script) fails
// without running and is not counted.
type Executions struct {
	Models map[string]int `json:"models"`
	Tools  map[string]int `json:"tools"`
	// Retrievals counts the retrievals that took an item; it is there, 0 when
	// nothing was retrieved, when the policy has a grounding section.
	Retrievals *int `json:"retrievals,omitempty"`
}

// Calls counts the calls each fake received, by model and tool name.
type Calls struct {
	Models map[string]int `json:"models"`
	Tools  map[string]int `json:"tools"`
}

// AuditEntry is an outcome record of the audit sink.
type AuditEntry struct {
	Tool         string `json:"tool,omitempty"`
	Stage        string `json:"stage,omitempty"`
	Layer        string `json:"layer,omitempty"`
	Decision     string `json:"decision"`
	Attempts     int    `json:"attempts"`
	ErrorType    string `json:"error_type,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	// Grounding is a grounding record's content (runtime.LayerGrounding):
	// the query, the block's token estimate and budget, and each item's
	// index, id, source, score and outcome.
	Grounding map[string]any `json:"grounding,omitempty"`
}

// Meter is the run's ledger of model calls (the outermost chat meter's).
type Meter struct {
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	USD          float64 `json:"usd"`
	Calls        int64   `json:"calls"`
}

// Span is a recorded span.
type Span struct {
	Name       string         `json:"name"`
	Depth      int            `json:"depth"`
	Status     string         `json:"status,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

// scenarioGrace is the most real time a scenario's virtual clock grants the
// goroutines a timer woke before it moves the time on (runtime.VirtualClock's
// Grace). It ends early as soon as one of them acts on the clock or the
// sleeper is cancelled, so a race that resolves (a hedge's backup winning
// and cancelling the primary) costs nothing; it is long so that a loaded
// machine does not let the time run past a goroutine it has not scheduled
// yet, and a scenario's result does not depend on the machine's load.
const scenarioGrace = 250 * time.Millisecond

// Run runs s against p. It returns an error only when the pipeline cannot be
// built or ctx ends; a failing step is reported in its StepResult.
func Run(ctx context.Context, p *plan.Plan, s *Scenario, opts Options) (*Result, error) {
	if err := checkScripts(p, s); err != nil {
		return nil, err
	}
	p, cleanup, err := privateFiles(p)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	p, standIns := hermetic(p)
	clock := opts.Clock
	if clock == nil {
		v := runtime.NewVirtualClock(Epoch)
		v.Grace = scenarioGrace
		clock = v
	}
	rctx, crash := context.WithCancel(ctx)
	defer crash()
	f := newFakes(s, p, clock, opts.OnExecute, crash)
	audit := &runtime.MemoryAudit{}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// Every declared model is a fake under a scenario (newFakes gave each
	// one a script, empty when the scenario has none): a provider's client
	// is never built.
	models := f.models()
	// A seeded source of jitter: the run replays exactly.
	deps := runtime.Deps{Models: models, Tools: f.tools(), Audit: audit, Logger: logger, Dir: opts.Dir, Clock: clock,
		Random: runtime.NewSeededRandom(1), Backends: standIns, AuditSinks: map[string]runtime.AuditSink{}}
	// Every store's trail is the run's own sink too, so that the result
	// lists each record an audit layer, a grounding or a state sink wrote,
	// whichever store it names, in the order they were written.
	for name := range p.Stores {
		deps.AuditSinks[name] = audit
	}
	if len(s.Retrieval) > 0 {
		deps.Retriever = f.retriever()
	}
	// Host names resolve from the scenario's dns, never from the network.
	deps.Resolver = newStubResolver(s.DNS)
	// Webhook sinks post to a stub that accepts every event.
	deps.HTTPClient = &http.Client{Transport: acceptAll{}}
	if s.HoldBackground {
		hold := make(chan struct{})
		defer close(hold)
		deps.StateHold = hold
	}
	if opts.Wrap != nil {
		opts.Wrap(&deps)
	}
	// After a crash nothing more is written durably.
	deps.Audit = crashSink{deps.Audit, f}
	for name, sink := range deps.AuditSinks {
		deps.AuditSinks[name] = crashSink{sink, f}
	}
	var rec *tracetest.SpanRecorder
	var tp *sdktrace.TracerProvider // the run's own, shut down at its end
	if opts.TracerProvider != nil {
		deps.TracerProvider = opts.TracerProvider
	}
	if opts.Trace {
		rec = tracetest.NewSpanRecorder()
		if opts.TracerProvider != nil {
			opts.TracerProvider.RegisterSpanProcessor(rec)
			defer opts.TracerProvider.UnregisterSpanProcessor(rec)
		} else {
			tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			deps.TracerProvider = tp
		}
	}
	if _, declared := p.Stores[runtime.DefaultStore]; !declared {
		// The default checkpoint store stands for a database outside the
		// process: it survives a crash step.
		deps.Checkpoints = runtime.NewMemoryCheckpoints()
	}
	rebuild := func(ctx context.Context) (*runtime.Pipeline, error) { return runtime.Build(ctx, p, deps) }
	pl, err := rebuild(ctx)
	if err != nil {
		return nil, err
	}
	if len(s.DNS) > 0 && !pl.AsksResolver() {
		// No layer looks a host name up: the stub would stand for
		// nothing, and a case relying on it would test nothing.
		_ = pl.Close()
		return nil, problems(s.src, []error{errors.New("dns: no layer of the policy looks host names up (egress does), so the stub is never consulted")})
	}

	runID := s.RunID
	if runID == "" {
		runID = "run-1"
	}
	rctx = runtime.WithRun(rctx, runtime.Run{ID: runID})
	r := &runner{pl: pl, f: f, grounding: p.Grounding != nil, rebuild: rebuild, hold: s.HoldBackground}
	// A crash step replaces the pipeline: close the last one.
	defer func() { _ = r.pl.Close() }()
	res := &Result{Steps: r.steps(rctx, "", s.Steps)}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pl = r.pl
	if store, ok := checkpointStore(p, s.Steps); ok {
		cs, err := checkpointSummary(ctx, pl, store, runID)
		if err != nil {
			return nil, err
		}
		res.Checkpoints = cs
	}
	res.Crashed = f.crashed.Load()
	if !res.Crashed {
		res.Unused = f.unused()
	}
	if opts.Inspect != nil {
		opts.Inspect(pl)
	}
	if p.State != nil {
		// The background sinks finish before the audit trail is read.
		if err := pl.DrainState(ctx); err != nil {
			return nil, err
		}
		res.State = &StateSummary{Fields: pl.StateFields(rctx), Background: pl.StateStats()}
	}
	res.Executions, res.Calls = f.executions(), f.calls()
	if p.Grounding != nil {
		n := f.retrievals.ran()
		res.Executions.Retrievals = &n
	}
	res.Audit = auditEntries(audit.Records())
	res.Meter = meterOf(pl, runID)
	pl.EndRun(runID)
	if tp != nil {
		_ = tp.Shutdown(context.WithoutCancel(ctx))
	}
	if rec != nil {
		res.Trace = spans(rec.Ended())
	}
	return res, nil
}

// privateFiles returns a copy of p whose sqlite stores are files in a
// directory of the run's own, removed when the run is done: a scenario
// starts from empty stores and leaves nothing behind, so that a test passes
// or fails alike every time it runs. The files outlive a crash step, as a
// database would.
func privateFiles(p *plan.Plan) (*plan.Plan, func(), error) {
	var sqlite []string
	for name, st := range p.Stores {
		if st.Kind == "sqlite" {
			sqlite = append(sqlite, name)
		}
	}
	if len(sqlite) == 0 {
		return p, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "agentc-scenario-")
	if err != nil {
		return nil, nil, fmt.Errorf("scenario: %w", err)
	}
	q := *p
	q.Stores = maps.Clone(p.Stores)
	for i, name := range slices.Sorted(slices.Values(sqlite)) {
		st := q.Stores[name]
		st.Path = filepath.Join(dir, fmt.Sprintf("store-%d.db", i))
		q.Stores[name] = st
	}
	return &q, func() { _ = os.RemoveAll(dir) }, nil
}

// hermetic returns a copy of p that a scenario runs without the network or
// the environment, with the stand-ins of its networked stores: every store
// of a kind other than memory and sqlite (redis, postgres, a host's) is an
// in-memory store of the run's own, which outlives a crash step as a server
// would, and a webhook sink that reads its URL from a variable posts to a
// placeholder URL instead (every webhook posts to a stub that accepts it).
// A scenario thus starts from empty stores, leaves nothing on a shared
// server and needs no variable set.
func hermetic(p *plan.Plan) (*plan.Plan, map[string]runtime.StoreBackend) {
	q := *p
	standIns := map[string]runtime.StoreBackend{}
	for name, st := range p.Stores {
		if st.Kind != "memory" && st.Kind != "sqlite" {
			standIns[name] = runtime.NewMemoryStore()
		}
	}
	if p.State != nil {
		st := *p.State
		st.Fields = maps.Clone(p.State.Fields)
		for name, fld := range st.Fields {
			sinks := slices.Clone(fld.Background)
			for i, sk := range sinks {
				if sk.Sink == "webhook" && sk.URL == "" {
					sinks[i].URL, sinks[i].URLEnv = "http://webhook.invalid/"+url.PathEscape(sk.URLEnv), ""
				}
			}
			fld.Background = sinks
			st.Fields[name] = fld
		}
		q.State = &st
	}
	return &q, standIns
}

// acceptAll answers every request 204 No Content without the network.
type acceptAll struct{}

// RoundTrip implements http.RoundTripper.
func (acceptAll) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusNoContent, Status: "204 No Content", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Body: http.NoBody, Request: req}, nil
}

// stubResolver answers lookups from a scenario's dns.
type stubResolver map[string][]netip.Addr

func newStubResolver(dns map[string][]string) stubResolver {
	r := stubResolver{}
	for host, addrs := range dns {
		name := strings.TrimSuffix(strings.ToLower(host), ".")
		for _, a := range addrs {
			if addr, err := netip.ParseAddr(a); err == nil { // checked by Parse
				r[name] = append(r[name], addr)
			}
		}
	}
	return r
}

// LookupNetIP implements runtime.Resolver: a name the scenario's dns does
// not list is not found.
func (r stubResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range r[strings.TrimSuffix(strings.ToLower(host), ".")] {
		if network == "ip" || (network == "ip4") == a.Unmap().Is4() {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host (the scenario's dns does not list it)", Name: host, IsNotFound: true}
	}
	return out, nil
}

// checkScripts refuses a scenario with a call or a script that names what
// does not exist. A script for a model or tool that the policy does not
// declare and that no step or scripted tool call of the scenario names:
// no call would ever take its items (a misspelt `refnd` leaves the
// declared refund unscripted and the test exercising nothing). A script
// for an undeclared name the scenario calls stands for a host that
// registers it. A step calling a model that is neither declared nor
// scripted, under a policy without a fallback or hedge layer to serve it
// with another (one whose when is false for calls of that model does
// not), or a tool, where the policy lets undeclared tools run,
// could only fail as not registered.
func checkScripts(p *plan.Plan, s *Scenario) error {
	var calls []call
	callsIn("steps", s.Steps, &calls)
	models, tools := map[string]bool{}, map[string]bool{}
	for _, c := range calls {
		if c.model {
			models[c.name] = true
		} else {
			tools[c.name] = true
		}
	}
	for _, items := range s.Models {
		for _, it := range items {
			for _, c := range it.ToolCalls {
				tools[c.Name] = true
			}
		}
	}
	// An agent step settles the tool calls its transcript left without a
	// result.
	eachStep("steps", s.Steps, func(_ string, st Step) {
		if st.Agent != nil {
			for _, m := range st.Agent.Messages {
				for _, c := range m.ToolCalls {
					tools[c.Name] = true
				}
			}
		}
	})
	declaredModels, declaredTools := slices.Sorted(maps.Keys(p.Models)), slices.Sorted(maps.Keys(p.Tools))
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(s.Models)) {
		if _, ok := p.Models[name]; !ok && !models[name] {
			errs = append(errs, uncalled("models", "model", name, declaredModels))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Tools)) {
		_, declared := p.Tools[name]
		switch {
		case !declared && !tools[name]:
			errs = append(errs, uncalled("tools", "tool", name, declaredTools))
		case !tools[name] && len(s.Tools[name]) > 0:
			// Only a step or a scripted model's tool call calls a
			// tool: no layer does.
			errs = append(errs, fmt.Errorf("%s: no step calls tool %q and no scripted model item asks for it, so the script is never used", fieldpath.Join("tools", name), name))
		}
	}
	// Only a grounding section retrieves: without one the items scripted
	// would never reach a request.
	if len(s.Retrieval) > 0 && p.Grounding == nil {
		errs = append(errs, errors.New("retrieval: the policy has no grounding section, so nothing retrieves and the script is never used"))
	}
	// A fallback or hedge layer calls the models it lists, whatever the
	// call names, unless its when is false for calls of that name: the
	// layer is skipped, and the call fails as not registered.
	routed := func(model string) bool {
		return slices.ContainsFunc(p.Chains.Chat, func(l plan.Layer) bool {
			if l.Use != "fallback" && l.Use != "hedge" {
				return false
			}
			if l.When == nil {
				return true
			}
			holds, known := predicate.ModelWhen(l.When.Source, model)
			return holds || !known
		})
	}
	for _, c := range calls {
		_, isModel := p.Models[c.name]
		_, isTool := p.Tools[c.name]
		_, modelScript := s.Models[c.name]
		_, toolScript := s.Tools[c.name]
		switch {
		case c.model && !isModel && !modelScript && !routed(c.name):
			errs = append(errs, unknownCall(c, "model", declaredModels))
		case !c.model && p.Settings.AllowUndeclaredTools && !isTool && !toolScript:
			// Without allow_undeclared_tools the policy refuses the
			// call, which a case may assert.
			errs = append(errs, unknownCall(c, "tool", declaredTools))
		}
	}
	errs = append(errs, checkNames(p, s)...)
	if len(errs) > 0 {
		sortErrors(errs)
		return problems(s.src, errs)
	}
	return nil
}

// call is a step's call of a model or tool by name, at path.
type call struct {
	path, name string
	model      bool
}

// callsIn collects the models and tools the steps call by name.
func callsIn(path string, steps []Step, out *[]call) {
	eachStep(path, steps, func(p string, st Step) {
		switch {
		case st.Chat != nil:
			*out = append(*out, call{p + ".chat.model", st.Chat.Model, true})
		case st.Agent != nil:
			*out = append(*out, call{p + ".agent.model", st.Agent.Model, true})
		case st.Tool != nil:
			*out = append(*out, call{p + ".tool.name", st.Tool.Name, false})
		}
	})
}

// eachStep calls fn with each of steps, and each step nested in a turn or
// a parallel step, and its path.
func eachStep(path string, steps []Step, fn func(p string, st Step)) {
	for i, st := range steps {
		p := fmt.Sprintf("%s[%d]", path, i)
		fn(p, st)
		switch {
		case st.Turn != nil:
			eachStep(p+".turn.steps", st.Turn.Steps, fn)
		case st.Parallel != nil:
			eachStep(p+".parallel", st.Parallel, fn)
		}
	}
}

// checkNames returns the problems of the steps and settings that name what
// the policy does not have, or that act on what it lacks: a tool choice
// that is neither a mode nor a tool the call offers (a provider would be
// told to call a tool that does not exist), a checkpoint store it does not
// declare, an agent step continuing a transcript no step left, an admit
// step's query where nothing grounds, a state field it does not declare,
// background sinks to hold where it has none.
func checkNames(p *plan.Plan, s *Scenario) []error {
	var errs []error
	declaredTools := slices.Sorted(maps.Keys(p.Tools))
	stores := slices.Sorted(maps.Keys(p.Stores))
	if !slices.Contains(stores, runtime.DefaultStore) {
		stores = append([]string{runtime.DefaultStore}, stores...)
	}
	var fields []string
	if p.State != nil {
		fields = slices.Sorted(maps.Keys(p.State.Fields))
	}
	// Whether a transcript is there for an agent step to continue: what
	// an agent step before it left or a resume restored, until a crash.
	transcript := false
	eachStep("steps", s.Steps, func(path string, st Step) {
		switch {
		case st.Agent != nil && st.Agent.Continue && !transcript:
			errs = append(errs, fmt.Errorf("%s.agent.continue: no agent or resume step before it left a transcript (a crash loses it), so the turn would start from nothing", path))
		case st.Crash != nil:
			transcript = false
		}
		if st.Agent != nil || st.Resume != nil {
			transcript = true
		}
		switch {
		case st.Chat != nil:
			errs = append(errs, checkToolChoice(path+".chat", st.Chat, declaredTools)...)
		case st.Agent != nil && st.Agent.Params != nil:
			errs = append(errs, checkToolChoice(path+".agent.params", st.Agent.Params, declaredTools)...)
		case st.Checkpoint != nil:
			errs = append(errs, checkStore(path+".checkpoint", st.Checkpoint.Store, stores)...)
		case st.Resume != nil:
			errs = append(errs, checkStore(path+".resume", st.Resume.Store, stores)...)
		case st.Admit != nil && p.Grounding == nil && st.Admit.Query != "":
			errs = append(errs, fmt.Errorf("%s.admit.query: the policy has no grounding section, so nothing is grounded and the query is never used", path))
		case st.State != nil:
			errs = append(errs, checkStateField(path+".state", st.State, fields)...)
		}
	})
	if s.HoldBackground && !hasBackground(p) {
		errs = append(errs, errors.New("hold_background: the policy's state has no background sinks, so nothing is held"))
	}
	return errs
}

// The tool choice modes (runtime.ChatRequest.ToolChoice); any other value
// names the tool the model must call.
var toolChoiceModes = []string{"auto", "none", "required"}

// checkToolChoice refuses a tool choice that is neither a mode nor a tool
// the request offers: its tools, else the policy's declared tools.
func checkToolChoice(path string, cs *ChatStep, declared []string) []error {
	choice := cs.ToolChoice
	if choice == "" || slices.Contains(toolChoiceModes, choice) {
		return nil
	}
	offered, whose := declared, "the policy declares"
	if cs.Tools != nil {
		offered, whose = nil, "the step offers"
		for _, t := range cs.Tools {
			offered = append(offered, t.Name)
		}
	}
	if slices.Contains(offered, choice) {
		return nil
	}
	msg := fmt.Sprintf("%s.tool_choice: %q is neither auto, none nor required, nor a tool %s", path, choice, whose)
	switch best := textdist.Closest(choice, append(slices.Clone(toolChoiceModes), offered...)); {
	case choice == "any":
		// Anthropic's name of the mode.
		msg += `; did you mean "required"?`
	case best != "":
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	if len(offered) == 0 {
		return []error{fmt.Errorf("%s (%s no tools)", msg, whose)}
	}
	return []error{fmt.Errorf("%s (%s %s)", msg, whose, strings.Join(offered, ", "))}
}

// checkStore refuses a checkpoint store the policy does not declare (the
// default store always exists): the step could only fail.
func checkStore(path, store string, stores []string) []error {
	if store == "" || slices.Contains(stores, store) {
		return nil
	}
	msg := fmt.Sprintf("%s.store: the policy declares no store %q, so the step can only fail", path, store)
	if best := textdist.Closest(store, stores); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	return []error{fmt.Errorf("%s (the stores are %s)", msg, strings.Join(stores, ", "))}
}

// checkStateField refuses a state step naming a field the policy does not
// declare: the step could only fail, and a misspelt read would look like a
// field not yet set.
func checkStateField(path string, st *StateStep, fields []string) []error {
	op, field := "set", st.Set
	switch {
	case st.Append != "":
		op, field = "append", st.Append
	case st.Get != "":
		op, field = "get", st.Get
	}
	if slices.Contains(fields, field) {
		return nil
	}
	return []error{fmt.Errorf("%s.%s: the policy declares no state field %q, so the step can only fail%s", path, op, field, suggestDeclared(field, "state field", fields))}
}

// hasBackground reports whether a state field of p has a background sink.
func hasBackground(p *plan.Plan) bool {
	if p.State == nil {
		return false
	}
	for _, f := range p.State.Fields {
		if len(f.Background) > 0 {
			return true
		}
	}
	return false
}

func uncalled(field, kind, name string, declared []string) error {
	return fmt.Errorf("%s: the policy declares no %s %q and no step calls it, so the script is never used%s", fieldpath.Join(field, name), kind, name, suggestDeclared(name, kind, declared))
}

func unknownCall(c call, kind string, declared []string) error {
	return fmt.Errorf("%s: the policy declares no %s %q and the scenario scripts none, so the call can only fail%s", c.path, kind, c.name, suggestDeclared(c.name, kind, declared))
}

// suggestDeclared names the declared name closest to name, and those
// declared.
func suggestDeclared(name, kind string, declared []string) string {
	if len(declared) == 0 {
		return fmt.Sprintf(" (the policy declares no %ss)", kind)
	}
	msg := ""
	if best := textdist.Closest(name, declared); best != "" {
		msg = fmt.Sprintf("; did you mean %q?", best)
	}
	return fmt.Sprintf("%s (it declares %s)", msg, strings.Join(declared, ", "))
}

type runner struct {
	pl *runtime.Pipeline
	f  *fakes
	// grounding is set when the plan has a grounding section.
	grounding bool
	// rebuild builds the pipeline again after a crash step.
	rebuild func(context.Context) (*runtime.Pipeline, error)
	// hold is set when the background sinks deliver nothing until the
	// steps are done (hold_background).
	hold bool

	// transcript is the run's transcript an agent step with continue
	// starts from: what the last agent step left, or what a resume
	// restored; a crash loses it.
	mu         sync.Mutex
	transcript []runtime.Message
}

// setTranscript records msgs as the run's transcript.
func (r *runner) setTranscript(msgs []runtime.Message) {
	r.mu.Lock()
	r.transcript = slices.Clone(msgs)
	r.mu.Unlock()
}

// lastTranscript returns a copy of the run's transcript.
func (r *runner) lastTranscript() []runtime.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.transcript)
}

func (r *runner) steps(ctx context.Context, path string, steps []Step) []StepResult {
	out := make([]StepResult, 0, len(steps))
	for i, st := range steps {
		if r.f.crashed.Load() {
			break
		}
		out = append(out, r.step(ctx, path, i, st))
	}
	return out
}

func (r *runner) step(ctx context.Context, path string, i int, st Step) StepResult {
	if path != "" {
		path += "/"
	}
	path += strconv.Itoa(i)
	ctx = context.WithValue(ctx, stepKey{}, path)
	sr := r.run(ctx, path, i, st)
	if r.f.crashedIn(path) {
		sr.Outcome, sr.Error = "crash", nil
	}
	sr.Requests = r.f.requestsOf(path)
	return sr
}

func (r *runner) run(ctx context.Context, path string, i int, st Step) StepResult {
	switch {
	case st.Parallel != nil:
		nested := make([]StepResult, len(st.Parallel))
		var wg sync.WaitGroup
		for j, ps := range st.Parallel {
			wg.Go(func() { nested[j] = r.step(ctx, path, j, ps) })
		}
		wg.Wait()
		sr := StepResult{Index: i, Stage: "parallel", Outcome: "ok", Nested: nested}
		for _, n := range nested {
			if n.Outcome != "ok" {
				sr.Outcome, sr.Error = n.Outcome, n.Error
				break
			}
		}
		return sr
	case st.Chat != nil:
		return r.chat(ctx, i, st.Chat)
	case st.Tool != nil:
		res, err := r.pl.Tool(ctx, runtime.ToolRequest{Name: st.Tool.Name, Args: st.Tool.Args})
		sr := StepResult{Index: i, Stage: plan.StageTool, Attempts: res.Attempts, Deduped: &res.Deduped}
		if err == nil {
			sr.Result = res.Value
		}
		setOutcome(&sr, err)
		return sr
	case st.Admit != nil:
		items, err := r.pl.Admit(ctx, st.Admit.Items)
		if items == nil {
			items = []runtime.Item{}
		}
		sr := StepResult{Index: i, Stage: plan.StageAdmit, Admitted: &items}
		if err != nil {
			setOutcome(&sr, err)
		}
		if r.grounding {
			// Admission errors were reported by Admit; a render or record
			// failure is the step's, and so is the block of a layer that
			// screens the items (security, pii, content_filter), which is
			// what a model call of the run would meet.
			g, gerr := r.pl.Ground(ctx, st.Admit.Query, st.Admit.Items)
			switch {
			case runtime.LayerOf(gerr) == runtime.LayerGrounding:
				setOutcome(&sr, gerr)
			case gerr != nil && err == nil:
				sr.Grounding = &g
				setOutcome(&sr, gerr)
			default:
				sr.Grounding = &g
			}
		}
		return sr
	case st.Turn != nil:
		return r.turn(ctx, i, st.Turn)
	case st.Agent != nil:
		return r.agent(ctx, i, st.Agent)
	case st.State != nil:
		return r.state(ctx, i, st.State)
	case st.Checkpoint != nil:
		return r.checkpoint(ctx, i, st.Checkpoint)
	case st.Crash != nil:
		return r.crash(ctx, i)
	case st.Resume != nil:
		return r.resume(ctx, i, st.Resume)
	}
	return StepResult{Index: i}
}

func (r *runner) chat(ctx context.Context, i int, cs *ChatStep) StepResult {
	var text strings.Builder
	var calls runtime.ToolCallBuilder
	n := 0
	refusal := false
	resp, err := r.pl.Stream(ctx, cs.request(), func(d runtime.Delta) bool {
		if cs.Consume != nil && n >= *cs.Consume {
			return false
		}
		n++
		text.WriteString(d.Text)
		refusal = refusal || d.Refusal && d.Text != ""
		calls.Add(&d)
		return cs.Consume == nil || n < *cs.Consume
	})
	t := text.String()
	sr := StepResult{Index: i, Stage: plan.StageChat, Text: &t, Model: resp.Model, Attempts: resp.Attempts,
		ToolCalls: copyCalls(calls.ToolCalls()), FinishReason: resp.FinishReason, Refusal: refusal}
	setOutcome(&sr, err)
	return sr
}

func (r *runner) agent(ctx context.Context, i int, as *AgentStep) StepResult {
	msgs := as.Messages
	if as.Continue {
		// RunAgent settles the tool calls the transcript left without a
		// result before the step's messages and input.
		msgs = append(r.lastTranscript(), as.Messages...)
	}
	var input string
	if as.Input != nil {
		input = *as.Input
	}
	req := runtime.AgentRequest{Model: as.Model, Messages: msgs, Input: input, Session: as.Session,
		MaxSteps: deref(as.MaxSteps), MaxParallel: deref(as.MaxParallel), MaxToolCalls: deref(as.MaxToolCalls), OnBlock: as.OnBlock}
	if as.Params != nil {
		req.Params = as.Params.request()
	}
	res, err := r.pl.RunAgent(ctx, req)
	if res.Messages != nil {
		r.setTranscript(res.Messages)
	}
	sr := StepResult{Index: i, Stage: "agent", Attempts: res.Attempts, from: len(msgs), Agent: &AgentSummary{
		Steps: res.Steps, ToolCalls: res.ToolCalls, Blocked: res.Blocked, Stop: res.Stop, FinishReason: res.FinishReason,
		Usage: res.Usage, Messages: copyRequest(&runtime.ChatRequest{Messages: res.Messages}).Messages}}
	if err == nil {
		sr.Output = &res.Output
	}
	setOutcome(&sr, err)
	return sr
}

func (r *runner) turn(ctx context.Context, i int, ts *TurnStep) StepResult {
	var nested []StepResult
	path := StepPath(ctx)
	res, err := r.pl.Turn(ctx, runtime.TurnRequest{Input: ts.Input, Session: ts.Session}, func(ctx context.Context) (string, error) {
		var output string
		for j, st := range ts.Steps {
			if r.f.crashed.Load() {
				break
			}
			sr := r.step(ctx, path, j, st)
			nested = append(nested, sr)
			if st.Chat != nil && sr.Text != nil {
				output = *sr.Text
			}
			if st.Agent != nil && sr.Output != nil {
				output = *sr.Output
			}
			if sr.Outcome != "" && sr.Outcome != "ok" {
				return output, stepErr{sr}
			}
		}
		return output, nil
	})
	sr := StepResult{Index: i, Stage: plan.StageTurn, Nested: nested}
	if err == nil {
		sr.Output = &res.Output
	}
	if res.Withheld {
		r.withholdNested(nested)
	}
	var se stepErr
	if errors.As(err, &se) {
		// The turn ended on a nested step: report its outcome.
		sr.Outcome, sr.Error = se.sr.Outcome, se.sr.Error
		return sr
	}
	setOutcome(&sr, err)
	return sr
}

// withholdNested withholds, when the turn chain refused what a turn
// step's body returned (runtime.TurnResult.Withheld), the text of its
// agent steps' answers, and of those of the steps nested in its steps (a
// turn step's, whose output goes too, or a parallel step's), from their results and from the
// transcript a later step continues, as the run's recorded transcript
// withholds it (runtime.WithholdAnswerTexts): the host would show it.
func (r *runner) withholdNested(nested []StepResult) {
	last := r.lastTranscript()
	for i := range nested {
		sr := &nested[i]
		r.withholdNested(sr.Nested)
		if sr.Stage == plan.StageTurn {
			sr.Output = nil
		}
		if sr.Agent == nil {
			continue
		}
		withheld := runtime.WithholdAnswerTexts(sr.Agent.Messages, sr.from)
		if reflect.DeepEqual(last, sr.Agent.Messages) {
			r.setTranscript(withheld)
		}
		sr.Agent.Messages, sr.Output = withheld, nil
	}
}

// stepErr ends a turn on a nested step that did not end ok. It unwraps to
// nothing: the nested step's own result says what happened.
type stepErr struct{ sr StepResult }

// Error names the nested step that ended the turn.
func (e stepErr) Error() string {
	if e.sr.Error != nil {
		return fmt.Sprintf("step %d (%s): %s", e.sr.Index, e.sr.Stage, e.sr.Error.Message)
	}
	return fmt.Sprintf("step %d (%s) ended %s", e.sr.Index, e.sr.Stage, e.sr.Outcome)
}

// Unwrap rebuilds a typed error so that layers outside the turn (guards,
// audits) classify the turn like its failing step.
func (e stepErr) Unwrap() error {
	if e.sr.Error == nil {
		return nil
	}
	switch e.sr.Outcome {
	case "blocked":
		return &runtime.BlockedError{Layer: e.sr.Error.Layer, Message: e.sr.Error.Message}
	case "budget":
		return &runtime.BudgetError{Layer: e.sr.Error.Layer, Resource: e.sr.Error.Message}
	case "in_doubt":
		return &runtime.InDoubtError{Layer: e.sr.Error.Layer}
	}
	return nil
}

func setOutcome(sr *StepResult, err error) {
	switch runtime.Classify(err) {
	case runtime.ClassOK:
		sr.Outcome = "ok"
		return
	case runtime.ClassBlocked:
		sr.Outcome = "blocked"
	case runtime.ClassBudget:
		sr.Outcome = "budget"
	case runtime.ClassInDoubt:
		sr.Outcome = "in_doubt"
	default:
		sr.Outcome = "error"
	}
	sr.Error = &ErrorSummary{Kind: runtime.KindOf(err), Layer: runtime.LayerOf(err), Message: errorMessage(err)}
}

// errorMessage returns the error text without the layer prefix for errors
// that name their layer separately.
func errorMessage(err error) string {
	var d *runtime.InDoubtError
	if errors.As(err, &d) && d.Layer != "" {
		return strings.TrimPrefix(err.Error(), d.Layer+": ")
	}
	var b *runtime.BlockedError
	if errors.As(err, &b) {
		if b.Err != nil {
			return b.Message + ": " + b.Err.Error()
		}
		return b.Message
	}
	var g *runtime.BudgetError
	if errors.As(err, &g) {
		return g.Message()
	}
	var ce *runtime.CallError
	if errors.As(err, &ce) && ce.Layer != "" {
		return strings.TrimPrefix(ce.Error(), ce.Layer+": ")
	}
	return err.Error()
}

func auditEntries(recs []runtime.AuditRecord) []AuditEntry {
	out := []AuditEntry{}
	for _, r := range recs {
		if r.Phase != runtime.PhaseOutcome {
			continue
		}
		e := AuditEntry{Tool: r.Tool, Stage: r.Stage, Layer: r.Layer, Decision: string(r.Decision),
			Attempts: r.Attempts, ErrorType: r.ErrorType, ErrorMessage: r.ErrorMessage}
		if r.Layer == runtime.LayerGrounding && r.Stage == plan.StageAdmit {
			e.Grounding = r.Args
		}
		out = append(out, e)
	}
	return out
}

// meterOf reads the run's ledger from the outermost chat layer that keeps
// one.
func meterOf(pl *runtime.Pipeline, runID string) Meter {
	for _, l := range pl.Layers(plan.StageChat) {
		if lr, ok := l.Middleware.(runtime.LedgerReader); ok {
			g := lr.Ledger(runID)
			return Meter{InputTokens: g.InputTokens, OutputTokens: g.OutputTokens,
				USD: math.Round(g.USD*1e12) / 1e12, Calls: g.Calls}
		}
	}
	return Meter{}
}

// fakes are the scripted models and tools.
type fakes struct {
	mu          sync.Mutex
	modelScript map[string]*script[ModelItem]
	toolScript  map[string]*script[ToolItem]
	clock       runtime.Clock
	onExecute   func(context.Context, plan.Stage, string)
	// crash ends the run's context; crashed is set from then on, and
	// crashPath names the step whose tool crashed.
	crash     func()
	crashed   atomic.Bool
	crashPath string
	// requests are the requests the fake models received, by step path.
	requests map[string][]runtime.ChatRequest
	// retrievals is the retrieval script.
	retrievals script[RetrievalItem]
}

// crashedIn reports whether the crash happened in the step at path or one
// nested in it.
func (f *fakes) crashedIn(path string) bool {
	if !f.crashed.Load() {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.crashPath == path || strings.HasPrefix(f.crashPath, path+"/")
}

// crashSink drops every record once the run crashed.
type crashSink struct {
	runtime.AuditSink
	f *fakes
}

// Append implements runtime.AuditSink.
func (c crashSink) Append(ctx context.Context, r runtime.AuditRecord) error {
	if c.f.crashed.Load() {
		return nil
	}
	return c.AuditSink.Append(ctx, r)
}

type script[T any] struct {
	items []T
	// next counts the calls received, whether they took an item or found
	// the script exhausted (they number the calls in errors).
	next int
	// unscripted: the scenario gives no script for this declared name.
	unscripted bool
}

// ran returns how many of the script's items calls took: the executions.
// A call past the end of the script fails without running.
func (sc *script[T]) ran() int { return min(sc.next, len(sc.items)) }

// newFakes scripts the fakes of s. Every model and tool p declares has a
// fake, with an empty script when s has none: a call of it has its request
// recorded like any other, then fails permanently without running (it is
// no execution, but a call received), so that a want of no calls or of no
// requests fails when the call happened.
func newFakes(s *Scenario, p *plan.Plan, clock runtime.Clock, onExecute func(context.Context, plan.Stage, string), crash func()) *fakes {
	f := &fakes{modelScript: map[string]*script[ModelItem]{}, toolScript: map[string]*script[ToolItem]{},
		clock: clock, onExecute: onExecute, crash: crash, requests: map[string][]runtime.ChatRequest{}}
	for name, items := range s.Models {
		f.modelScript[name] = &script[ModelItem]{items: items}
	}
	for name, items := range s.Tools {
		f.toolScript[name] = &script[ToolItem]{items: items}
	}
	for name := range p.Models {
		if f.modelScript[name] == nil {
			f.modelScript[name] = &script[ModelItem]{unscripted: true}
		}
	}
	for name := range p.Tools {
		if f.toolScript[name] == nil {
			f.toolScript[name] = &script[ToolItem]{unscripted: true}
		}
	}
	f.retrievals.items = s.Retrieval
	return f
}

// retriever follows the retrieval script.
func (f *fakes) retriever() runtime.Retriever {
	return runtime.RetrieverFunc(func(ctx context.Context, q runtime.RetrievalQuery) ([]runtime.Item, error) {
		f.mu.Lock()
		n := f.retrievals.next
		f.retrievals.next++
		f.mu.Unlock()
		what := fmt.Sprintf("retrieval %d", n+1)
		if n >= len(f.retrievals.items) {
			return nil, &runtime.CallError{Kind: runtime.KindPermanent, Message: what + ": script exhausted"}
		}
		it := f.retrievals.items[n]
		if it.Error != "" {
			return nil, fakeError(it.Error, it.RetryAfterMS, what)
		}
		return it.Items, nil
	})
}

// take returns the next item of a script and counts the call (n is its
// index; ok is false when the script is exhausted, and nothing runs).
// After a crash nothing runs any more (n is -1).
func take[T any](ctx context.Context, f *fakes, sc *script[T], stage plan.Stage, name string) (T, int, bool) {
	if f.crashed.Load() {
		var zero T
		return zero, -1, false
	}
	f.mu.Lock()
	n := sc.next
	sc.next++
	if n >= len(sc.items) {
		f.mu.Unlock()
		var zero T
		return zero, n, false
	}
	f.mu.Unlock()
	if f.onExecute != nil {
		f.onExecute(ctx, stage, name)
	}
	return sc.items[n], n, true
}

func (f *fakes) executions() Executions {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := Executions{Models: map[string]int{}, Tools: map[string]int{}}
	for name, sc := range f.modelScript {
		e.Models[name] = sc.ran()
	}
	for name, sc := range f.toolScript {
		e.Tools[name] = sc.ran()
	}
	return e
}

func (f *fakes) calls() Calls {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := Calls{Models: map[string]int{}, Tools: map[string]int{}}
	for name, sc := range f.modelScript {
		c.Models[name] = sc.next
	}
	for name, sc := range f.toolScript {
		c.Tools[name] = sc.next
	}
	return c
}

func fakeError(kind string, retryAfterMS int, what string) error {
	e := &runtime.CallError{Kind: runtime.ErrorKind(kind), Message: fmt.Sprintf("%s: scripted %s error", what, kind)}
	switch kind {
	case ErrRateLimited:
		e.Status = 429
		e.RetryAfter = time.Duration(retryAfterMS) * time.Millisecond
	case ErrTransient:
		e.Status = 503
	case ErrTimeout:
		e.Status = 504
	case ErrPermanent:
		e.Status = 400
	case ErrRefused:
		e.Kind, e.Status = runtime.KindPermanent, 401
		e.Err = runtime.ProviderRefused(errors.New("the provider refused the key"))
	}
	return e
}

func (f *fakes) sleep(ctx context.Context, ms int) error {
	if ms <= 0 {
		return nil
	}
	return f.clock.Sleep(ctx, time.Duration(ms)*time.Millisecond)
}

func (f *fakes) models() map[string]runtime.ModelClient {
	out := map[string]runtime.ModelClient{}
	for name, sc := range f.modelScript {
		out[name] = runtime.ModelFunc(func(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
			it, n, ok := take(ctx, f, sc, plan.StageChat, name)
			what := fmt.Sprintf("model %s call %d", name, n+1)
			if n < 0 {
				return context.Canceled
			}
			f.record(ctx, name, req)
			if !ok && sc.unscripted {
				return &runtime.CallError{Kind: runtime.KindPermanent, Message: fmt.Sprintf("model %s is not scripted in the scenario", name)}
			}
			if !ok {
				return &runtime.CallError{Kind: runtime.KindPermanent, Message: fmt.Sprintf("%s: script exhausted", what)}
			}
			if err := f.sleep(ctx, it.DelayMS); err != nil {
				return err
			}
			if it.Error != "" && it.FailAfter == nil {
				return fakeError(it.Error, it.RetryAfterMS, what)
			}
			deltas := itemDeltas(it, name, n+1)
			for k, delta := range deltas {
				if it.FailAfter != nil && k == *it.FailAfter {
					break
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				if k == len(deltas)-1 && it.FailAfter == nil {
					delta.FinishReason = finishReason(it)
					if it.Usage != nil {
						delta.Usage = *it.Usage
					}
				}
				if !yield(delta) {
					return nil
				}
			}
			if it.FailAfter != nil {
				kind := it.Error
				if kind == "" {
					kind = ErrTransient
				}
				return fakeError(kind, it.RetryAfterMS, what+" mid-stream")
			}
			if len(deltas) == 0 && (it.Usage != nil || it.FinishReason != "") {
				d := runtime.Delta{FinishReason: it.FinishReason}
				if it.Usage != nil {
					d.Usage = *it.Usage
				}
				yield(d)
			}
			return nil
		})
	}
	return out
}

// finishReason is the finish reason an item reports on its last delta.
func finishReason(it ModelItem) string {
	switch {
	case it.FinishReason != "":
		return it.FinishReason
	case len(it.ToolCalls) > 0:
		return runtime.FinishToolCalls
	case it.Refusal != "":
		return runtime.FinishContentFilter
	}
	return ""
}

// itemDeltas returns the deltas an item streams (without usage and finish
// reason): its refusal as one delta marked so, or its text deltas, then two
// fragments per tool call, the first
// with the call's id, name and the first half of its arguments, the second
// with the rest. call is the model's call number (from 1), for default ids.
func itemDeltas(it ModelItem, model string, call int) []runtime.Delta {
	texts := it.Deltas
	if it.Text != nil {
		texts = []string{*it.Text}
	}
	out := make([]runtime.Delta, 0, len(texts)+2*len(it.ToolCalls))
	if it.Refusal != "" {
		out = append(out, runtime.Delta{Text: it.Refusal, Refusal: true})
	}
	for _, t := range texts {
		out = append(out, runtime.Delta{Text: t})
	}
	for i, c := range it.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%s_%d_%d", model, call, i)
		}
		args := "{}"
		if c.Args != nil {
			b, _ := json.Marshal(c.Args) // checked by Parse
			args = string(b)
		}
		half := len(args) / 2
		for half > 0 && !utf8.RuneStart(args[half]) {
			half--
		}
		out = append(out,
			runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: i, ID: id, Name: c.Name, Arguments: args[:half]}}},
			runtime.Delta{ToolCalls: []runtime.ToolCallDelta{{Index: i, Arguments: args[half:]}}})
	}
	return out
}

// record keeps a copy of the request a fake model received, under the step
// that made the call.
func (f *fakes) record(ctx context.Context, model string, req *runtime.ChatRequest) {
	r := copyRequest(req)
	r.Model = model
	path := StepPath(ctx)
	f.mu.Lock()
	f.requests[path] = append(f.requests[path], r)
	f.mu.Unlock()
}

// requestsOf returns the requests received under the step at path.
func (f *fakes) requestsOf(path string) []runtime.ChatRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[path]
}

// copyRequest deep-copies a request, so that what the layers do with
// theirs afterwards does not change the record. Tool-call arguments that
// are not valid JSON (a stream cut short) are kept as a JSON string.
func copyRequest(req *runtime.ChatRequest) runtime.ChatRequest {
	r := *req
	r.Messages = make([]runtime.Message, len(req.Messages))
	for i, m := range req.Messages {
		m.Parts = slices.Clone(m.Parts)
		for j := range m.Parts {
			m.Parts[j].Data = slices.Clone(m.Parts[j].Data)
		}
		m.ToolCalls = copyCalls(m.ToolCalls)
		r.Messages[i] = m
	}
	if req.Tools != nil {
		r.Tools = make([]runtime.ToolDef, len(req.Tools))
		for i, t := range req.Tools {
			t.Parameters = slices.Clone(t.Parameters)
			r.Tools[i] = t
		}
	}
	r.Stop = slices.Clone(req.Stop)
	r.Metadata = maps.Clone(req.Metadata)
	r.Temperature, r.TopP, r.Seed = clonePtr(req.Temperature), clonePtr(req.TopP), clonePtr(req.Seed)
	r.FrequencyPenalty, r.PresencePenalty = clonePtr(req.FrequencyPenalty), clonePtr(req.PresencePenalty)
	r.TopK = clonePtr(req.TopK)
	r.LogitBias = maps.Clone(req.LogitBias)
	r.Betas = slices.Clone(req.Betas)
	if req.ContextEdits != nil {
		r.ContextEdits = make([]runtime.ContextEdit, len(req.ContextEdits))
		for i, e := range req.ContextEdits {
			e.Params = slices.Clone(e.Params)
			r.ContextEdits[i] = e
		}
	}
	if req.ResponseFormat != nil {
		rf := *req.ResponseFormat
		rf.Schema = slices.Clone(rf.Schema)
		r.ResponseFormat = &rf
	}
	return r
}

// deref is *p, or the zero value when p is nil.
func deref[T any](p *T) T {
	var v T
	if p != nil {
		v = *p
	}
	return v
}

// clonePtr returns a pointer to a copy of *p, or nil.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// copyCalls copies tool calls; arguments that are not valid JSON become a
// JSON string of their text, so that the result still marshals.
func copyCalls(calls []runtime.ToolUse) []runtime.ToolUse {
	if calls == nil {
		return nil
	}
	out := make([]runtime.ToolUse, len(calls))
	for i, c := range calls {
		args := slices.Clone(c.Arguments)
		if !json.Valid(args) {
			args, _ = json.Marshal(string(c.Arguments))
		}
		out[i] = runtime.ToolUse{ID: c.ID, Name: c.Name, Arguments: args, PartsAfter: c.PartsAfter, CacheControl: c.CacheControl, Custom: c.Custom}
	}
	return out
}

func (f *fakes) tools() map[string]runtime.ToolFunc {
	out := map[string]runtime.ToolFunc{}
	for name, sc := range f.toolScript {
		out[name] = func(ctx context.Context, call *runtime.ToolCall) (any, error) {
			it, n, ok := take(ctx, f, sc, plan.StageTool, name)
			what := fmt.Sprintf("tool %s call %d", name, n+1)
			if n < 0 {
				return nil, context.Canceled
			}
			if !ok && sc.unscripted {
				return nil, &runtime.CallError{Kind: runtime.KindPermanent, Message: fmt.Sprintf("tool %s is not scripted in the scenario", name)}
			}
			if !ok {
				return nil, &runtime.CallError{Kind: runtime.KindPermanent, Message: fmt.Sprintf("%s: script exhausted", what)}
			}
			if err := f.sleep(ctx, it.DelayMS); err != nil {
				return nil, err
			}
			if it.Crash {
				f.mu.Lock()
				if !f.crashed.Load() {
					f.crashPath = StepPath(ctx)
					f.crashed.Store(true)
				}
				f.mu.Unlock()
				f.crash()
				return nil, context.Canceled
			}
			if it.Error != "" {
				return nil, fakeError(it.Error, it.RetryAfterMS, what)
			}
			return it.Result, nil
		}
	}
	return out
}

// spans orders the ended spans by start time and computes their depth.
func spans(ended []sdktrace.ReadOnlySpan) []Span {
	sort.SliceStable(ended, func(i, j int) bool { return ended[i].StartTime().Before(ended[j].StartTime()) })
	depth := map[string]int{}
	out := make([]Span, 0, len(ended))
	for _, s := range ended {
		d := 0
		if p := s.Parent(); p.IsValid() {
			if pd, ok := depth[p.SpanID().String()]; ok {
				d = pd + 1
			}
		}
		depth[s.SpanContext().SpanID().String()] = d
		sp := Span{Name: s.Name(), Depth: d}
		if st := s.Status(); st.Code.String() == "Error" {
			sp.Status = "error: " + st.Description
		}
		if attrs := s.Attributes(); len(attrs) > 0 {
			sp.Attributes = map[string]any{}
			for _, kv := range attrs {
				sp.Attributes[string(kv.Key)] = kv.Value.AsInterface()
			}
		}
		out = append(out, sp)
	}
	return out
}

// WriteTrace prints the recorded spans as an indented tree, one per line:
// name, status and attributes. No duration: a span's times are the wall
// clock's, not the run's, and would make two runs of a scenario differ.
func (r *Result) WriteTrace(w io.Writer) error {
	for _, s := range r.Trace {
		keys := make([]string, 0, len(s.Attributes))
		for k := range s.Attributes {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var b strings.Builder
		fmt.Fprintf(&b, "%s%s", strings.Repeat("  ", s.Depth), s.Name)
		if s.Status != "" {
			fmt.Fprintf(&b, " [%s]", s.Status)
		}
		for _, k := range keys {
			fmt.Fprintf(&b, " %s=%v", k, s.Attributes[k])
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}
