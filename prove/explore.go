package prove

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// Options tune Explore.
type Options struct {
	// Depth is k, the longest script of attempt outcomes explored per
	// target (default 3).
	Depth int
	// Copies is the largest number of concurrent duplicate deliveries of a
	// tool call explored (1 or 2; default 2).
	Copies int
	// Dir resolves the plan's relative paths (file_check roots).
	Dir string
	// PosDir is joined to the positions of the policy's invariants in
	// messages (plan.PosIn): the policy's directory as the messages name
	// its files (from the working directory, as vet names them); empty:
	// Dir.
	PosDir string
	// MaxStates stops the exploration once this many states (runs) were
	// run, over every target (0: no bound): at each depth the targets take
	// what is left in their order, so that the same states are run every
	// time.
	MaxStates int
	// Timeout stops the exploration once this much wall time has passed
	// (0: no bound).
	Timeout time.Duration
	// Progress, when set, is called after a state once ProgressEvery has
	// passed since the previous call (after every state when it is 0),
	// from the goroutine that ran it, never concurrently.
	Progress      func(Progress)
	ProgressEvery time.Duration
}

// Progress is how far an exploration has come.
type Progress struct {
	// States run so far, over every target; Done the targets explored to
	// the end, of Targets; Depth the length of the scripts being run.
	States, Done, Targets, Depth int
	Elapsed                      time.Duration
}

// The bounds that can stop an exploration before it is complete.
const (
	BoundMaxStates   = "max_states"
	BoundTimeout     = "timeout"
	BoundInterrupted = "interrupted"
)

// Report is the result of an exploration.
type Report struct {
	// Depth and Copies are the bounds explored.
	Depth, Copies int
	// Targets is the number of (stage, model or tool, argument set, copies
	// and their order) combinations explored; Symmetric those skipped as
	// the image of one already explored.
	Targets, Symmetric int
	// States is the number of fault scripts run through the pipeline;
	// Pruned the scripts not extended because their run reached a state
	// already seen (or did not reach the script's last outcome).
	States, Pruned int
	// Elapsed is the wall time of the exploration.
	Elapsed time.Duration
	// Violations holds one minimal counterexample per violated invariant
	// and target, shortest scripts first.
	Violations []*Counterexample

	// Bound names what stopped the exploration before every script up to
	// Depth was run (BoundMaxStates, BoundTimeout, BoundInterrupted), ""
	// when it is complete. An incomplete exploration proves nothing; the
	// violations it found are real.
	Bound string
	// Done is the number of targets explored to the end; Proved the depth
	// up to which every script of every target was run (Depth when the
	// exploration is complete).
	Done, Proved int

	// Unexplored lists the models and tools no run of which reached the
	// model or tool: every generated call was refused before any layer
	// (its arguments) or blocked by a layer. What the exploration says of
	// them holds of no call that runs: the report is no proof.
	Unexplored []Unexplored
}

// NotExplored is the id a test (want_prove, a conformance case's
// want/prove) gives, among the invariants it expects violated, to expect a
// model or tool that no explored call reaches (Report.Unexplored): without
// it, the exploration proves nothing of that model or tool, and the case
// fails.
const NotExplored = "not_explored"

// Unexplored is a model or tool no explored call of which ran.
type Unexplored struct {
	// Target names it ("tool refund", "chat primary"); Reason says why
	// no call ran, with the refusal of the first.
	Target, Reason string
}

// Complete reports whether every script up to Depth was run.
func (r *Report) Complete() bool { return r.Bound == "" }

// StatesPerSecond returns the exploration's throughput.
func (r *Report) StatesPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.States) / r.Elapsed.Seconds()
}

// Counterexample is a run that violates an invariant.
type Counterexample struct {
	// Invariant is the id of the violated invariant, Message says how.
	Invariant, Message string
	// Target names what was called ("tool refund", "chat primary").
	Target string
	// Script lists the attempt outcomes, in the order the fakes served them.
	Script []string
	// Copies is the number of concurrent deliveries of each call.
	Copies int
	// Scenario replays the run with agentc run.
	Scenario *scenario.Scenario
	// Trace is the run's trace, one line per event.
	Trace []string

	// Interleaving is set when the scenario run with its concurrent copies
	// in the other order explored (one after the other, admitted
	// together) does not violate the invariant: the copies must
	// interleave as they did in the run found.
	Interleaving bool

	// of is the stage and name of the target (the stage of a chat target:
	// every model serves the same script).
	of string
}

// The attempt outcomes.
const (
	outOK          = "ok"
	outTransient   = "transient"
	outRateLimited = "rate_limited"
	outTimeout     = "timeout"
	outPermanent   = "permanent"
	outRefused     = "refused"
	outFailAfter   = "fail_after_1"
	outStop        = "stop_after_1"
	outSlow        = "slow"
	outCrash       = "crash"
)

// slowMS is how long a slow outcome takes (virtual time): longer than any
// hedge delay or attempt timeout the schema allows.
const slowMS = 10 * 60 * 1000

// target is one thing to call.
type target struct {
	stage plan.Stage
	name  string
	args  map[string]any
	// dns stubs the host names of the URLs in args (scenario.Scenario.DNS).
	dns    map[string][]string
	copies int
	// together: the copies are admitted together, else they run one after
	// the other (gate); free: as the scheduler runs them, as agentc run
	// does (Replay).
	together, free bool
	label          string
}

// explorer holds the state of one Explore.
type explorer struct {
	p        *plan.Plan // probed, in-memory stores
	orig     *plan.Plan
	opts     Options
	inv      *invariants
	usage    runtime.Usage
	chatAlph []string
	toolAlph []string
	report   *Report
	logger   *slog.Logger
	// clocked reports layers whose behaviour depends on the time between
	// calls (rate limits, breakers, TTLs).
	clocked bool
	// prompt is the user message of a chat step (promptFor).
	prompt string

	// start, states, done and stopped track the exploration over every
	// target, for its progress and its bounds (Options.Timeout; the state
	// bound is shared among the targets by quotas).
	start   time.Time
	states  atomic.Int64
	done    atomic.Int64
	depth   atomic.Int64
	targetN int
	stopped atomic.Value // string: the bound that stopped it
	// progressMu serializes Options.Progress; lastProgress is when it was
	// last called.
	progressMu   sync.Mutex
	lastProgress time.Time
}

// admit counts the next state, or returns the bound that stops the
// exploration: an interrupt, the timeout, or the target's share of
// Options.MaxStates at this depth (quota) used up after ran states.
func (e *explorer) admit(ctx context.Context, ran, quota int) string {
	// A target that used its share of the state bound does not stop the
	// others before they used theirs.
	if b, _ := e.stopped.Load().(string); b != "" && b != BoundMaxStates {
		return b
	}
	b := ""
	switch {
	case ctx.Err() != nil:
		b = BoundInterrupted
	case e.opts.Timeout > 0 && time.Since(e.start) >= e.opts.Timeout:
		b = BoundTimeout
	case ran >= quota:
		b = BoundMaxStates
	default:
		e.states.Add(1)
		return ""
	}
	// The first bound reached is the one reported.
	e.stopped.CompareAndSwap(nil, b)
	b, _ = e.stopped.Load().(string)
	return b
}

// quotas shares what is left of Options.MaxStates among the targets for
// the scripts of the next depth, in the order of the targets: each takes
// what its level needs while some is left. So a bound stops the
// exploration at the same scripts whichever target's goroutine runs first.
func (e *explorer) quotas(states []*targetState) []int {
	left := math.MaxInt
	if e.opts.MaxStates > 0 {
		left = e.opts.MaxStates
		for _, ts := range states {
			left -= ts.rep.States
		}
	}
	out := make([]int, len(states))
	for i, ts := range states {
		if ts.done {
			continue
		}
		out[i] = min(len(ts.frontier)*len(ts.alph), left)
		left -= out[i]
	}
	return out
}

// progress calls Options.Progress when it is due.
func (e *explorer) progress() {
	if e.opts.Progress == nil {
		return
	}
	e.progressMu.Lock()
	defer e.progressMu.Unlock()
	now := time.Now()
	if now.Sub(e.lastProgress) < e.opts.ProgressEvery {
		return
	}
	e.lastProgress = now
	e.opts.Progress(Progress{States: int(e.states.Load()), Done: int(e.done.Load()), Targets: e.targetN,
		Depth: int(e.depth.Load()), Elapsed: now.Sub(e.start)})
}

// maxPromptTokens bounds the prompt promptFor writes.
const maxPromptTokens = 16384

// promptFor returns the user message of a chat step. When the chat chain
// reacts to time (a hedge, an attempt timeout), a model call can be
// cancelled after it went out, and the runtime charges it the estimate of
// its input (runtime.EstimateMessages): the message is then sized so that
// the estimate is the scripted input, which is what the probe bills, so that
// agentc run replaying a counterexample charges what the exploration did.
func promptFor(p *plan.Plan, u runtime.Usage) string {
	n := u.InputTokens - runtime.EstimateMessages([]runtime.Message{{Role: "user"}})
	if !timed(p.Chains.Chat) || n < 2 || n > maxPromptTokens {
		return "hello"
	}
	return strings.Repeat("word", int(n))
}

// Explore runs the plan's pipeline under every script of attempt outcomes up
// to opts.Depth for each declared model (chat chain) and tool (tool chain),
// with one and two concurrent deliveries of each tool call, on a virtual
// clock, and checks the plan's invariants after every run. It returns an
// error when the pipeline cannot be built or an invariant does not compile;
// violations are in the report. When ctx is done before the exploration is,
// it returns ctx's error together with the report of what was explored
// (Bound BoundInterrupted): a caller that stops at the error never takes the
// part for a proof.
func Explore(ctx context.Context, p *plan.Plan, opts Options) (*Report, error) {
	if opts.Depth <= 0 {
		opts.Depth = 3
	}
	if opts.Copies <= 0 {
		opts.Copies = 2
	}
	if opts.Copies > 2 {
		return nil, fmt.Errorf("prove: copies %d: at most 2 concurrent deliveries are explored", opts.Copies)
	}
	registerProbe()
	inv, err := compileInvariants(p, cmp.Or(opts.PosDir, opts.Dir))
	if err != nil {
		return nil, err
	}
	e := &explorer{orig: p, opts: opts, inv: inv, report: &Report{Depth: opts.Depth, Copies: opts.Copies},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	e.p, err = instrument(p)
	if err != nil {
		return nil, err
	}
	e.usage = usageFor(p)
	e.prompt = promptFor(p, e.usage)
	e.chatAlph, e.toolAlph = alphabets(p)
	e.clocked = clocked(p)
	start := time.Now()
	e.start, e.lastProgress = start, start
	defer func() { e.report.Elapsed = time.Since(start) }()
	seen := map[string]bool{}
	var todo []target
	for _, t := range e.targets() {
		sig := e.signature(t)
		if seen[sig] {
			e.report.Symmetric++
			continue
		}
		seen[sig] = true
		todo = append(todo, t)
	}
	e.report.Targets = len(todo)
	e.targetN = len(todo)
	// A pipeline that does not build fails every run alike: said once,
	// before the targets are explored in parallel, it names no target and
	// reads the same in every exploration.
	if _, err := e.runScenario(ctx, target{}, nil, &scenario.Scenario{}); err != nil && ctx.Err() == nil {
		return nil, err
	}
	// Targets are independent: explore them on every core, one depth at a
	// time, so that a bound that stops the exploration leaves every target
	// explored to the same depth.
	states := make([]*targetState, len(todo))
	for i, t := range todo {
		states[i] = e.newTargetState(t)
	}
	for depth := 1; depth <= e.opts.Depth; depth++ {
		e.depth.Store(int64(depth))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(goruntime.GOMAXPROCS(0))
		quota := e.quotas(states)
		for i, ts := range states {
			g.Go(func() error { return e.level(gctx, ts, depth, quota[i]) })
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		if e.report.Bound, _ = e.stopped.Load().(string); e.report.Bound != "" {
			break
		}
		e.report.Proved = depth
	}
	for _, ts := range states {
		r := ts.rep
		e.report.States += r.States
		e.report.Pruned += r.Pruned
		e.report.Violations = append(e.report.Violations, r.Violations...)
		if ts.done {
			e.report.Done++
		}
	}
	e.report.Elapsed = time.Since(start)
	sort.SliceStable(e.report.Violations, func(i, j int) bool {
		a, b := e.report.Violations[i], e.report.Violations[j]
		if a.Interleaving != b.Interleaving {
			return !a.Interleaving // one that replays every time first
		}
		if len(a.Script) != len(b.Script) {
			return len(a.Script) < len(b.Script)
		}
		return a.Copies < b.Copies
	})
	// One counterexample per invariant and model or tool: the shortest, with
	// the fewest concurrent copies (another argument set or a duplicate
	// delivery that breaks the same invariant says nothing new).
	kept := map[string]bool{}
	var out []*Counterexample
	for _, v := range e.report.Violations {
		key := v.Invariant + "\x00" + v.of
		if kept[key] {
			continue
		}
		kept[key] = true
		out = append(out, v)
	}
	e.report.Violations = out
	e.report.Unexplored = unexplored(states)
	if e.report.Bound == BoundInterrupted {
		err := ctx.Err()
		if err == nil {
			err = context.Canceled
		}
		return e.report, fmt.Errorf("prove: exploration interrupted: %w", err)
	}
	return e.report, nil
}

// instrument returns a copy of p with probes in every chain and every store
// in memory (each run starts from empty state).
func instrument(p *plan.Plan) (*plan.Plan, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("prove: %w", err)
	}
	var q plan.Plan
	if err := json.Unmarshal(b, &q); err != nil {
		return nil, fmt.Errorf("prove: %w", err)
	}
	for name := range q.Stores {
		q.Stores[name] = plan.Store{Kind: "memory"}
	}
	q.Chains.Chat = probed(plan.StageChat, q.Chains.Chat)
	q.Chains.Tool = probed(plan.StageTool, q.Chains.Tool)
	q.Chains.Turn = probed(plan.StageTurn, q.Chains.Turn)
	return &q, nil
}

// alphabets returns the outcomes explored for models and tools; slow ones
// only where a layer of the chain reacts to time (hedge, attempt timeouts).
func alphabets(p *plan.Plan) (chat, tool []string) {
	chat = []string{outOK, outTransient, outRateLimited, outTimeout, outPermanent, outRefused, outFailAfter, outStop}
	tool = []string{outOK, outTransient, outRateLimited, outTimeout, outPermanent, outCrash}
	if timed(p.Chains.Chat) {
		chat = append(chat, outSlow)
	}
	if timed(p.Chains.Tool) {
		tool = append(tool, outSlow)
	}
	return chat, tool
}

// clocked reports whether a layer keeps state that the passing of time
// changes: rate limits, breakers, entries with a TTL.
func clocked(p *plan.Plan) bool {
	for _, chain := range [][]plan.Layer{p.Chains.Chat, p.Chains.Tool, p.Chains.Turn} {
		for _, l := range chain {
			switch {
			case l.Use == "rate_limit", l.Use == "idempotent", l.Use == "memoize", l.Use == "semantic_memoize",
				l.Use == "retry" && strings.Contains(string(l.Config), `"breaker"`):
				return true
			}
		}
	}
	return false
}

func timed(chain []plan.Layer) bool {
	for _, l := range chain {
		if l.Use == "hedge" || l.Use == "retry" && strings.Contains(string(l.Config), `"attempt_timeout"`) {
			return true
		}
	}
	return false
}

// targets lists what to call: each declared model through the chat chain,
// each declared tool (with a small and a large argument set) through the
// tool chain, once and as concurrent duplicates.
func (e *explorer) targets() []target {
	var out []target
	// An empty chain is explored too: the call reaches the model or tool
	// directly, and the invariants hold of that run or not.
	for _, m := range sortedKeys(e.orig.Models) {
		out = append(out, target{stage: plan.StageChat, name: m, copies: 1, label: "chat " + m})
	}
	for _, name := range sortedKeys(e.orig.Tools) {
		variants, dns := e.argVariants(name)
		for vi, args := range variants {
			for c := 1; c <= e.opts.Copies; c++ {
				label := "tool " + name
				if len(variants) > 1 {
					label += fmt.Sprintf(" (args %d)", vi+1)
				}
				if c == 1 {
					out = append(out, target{stage: plan.StageTool, name: name, args: args, dns: dns, copies: c, label: label})
					continue
				}
				// Concurrent copies one after the other, and admitted
				// together.
				label += fmt.Sprintf(" x%d concurrent", c)
				out = append(out, target{stage: plan.StageTool, name: name, args: args, dns: dns, copies: c, label: label + ", one after the other"},
					target{stage: plan.StageTool, name: name, args: args, dns: dns, copies: c, together: true, label: label + ", admitted together"})
			}
		}
	}
	return out
}

// signature identifies a target up to renaming: two tools with the same
// declaration that the same layers apply to behave alike, and so do two
// models with the same rates that no layer names.
func (e *explorer) signature(t target) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%d|%v|", t.stage, t.copies, t.together)
	args, _ := json.Marshal(t.args)
	b.Write(args)
	switch t.stage {
	case plan.StageTool:
		decl := e.orig.Tools[t.name]
		d, _ := json.Marshal(plan.Tool{SideEffecting: decl.SideEffecting, RetrySafe: decl.RetrySafe, URLArg: decl.URLArg, PathArg: decl.PathArg, URLArgs: decl.URLArgs, PathArgs: decl.PathArgs, Args: decl.Args})
		b.Write(d)
		for i, l := range e.orig.Chains.Tool {
			if len(l.Tools) == 0 || slices.Contains(l.Tools, t.name) {
				fmt.Fprintf(&b, "|%d", i)
			}
			if l.When != nil && strings.Contains(l.When.Source, "tool") || strings.Contains(string(l.Config), strconv.Quote(t.name)) {
				fmt.Fprintf(&b, "|named:%d", i) // the layer may tell this tool apart
				b.WriteString(t.name)
			}
		}
	case plan.StageChat:
		m, _ := json.Marshal(e.orig.Models[t.name])
		b.Write(m)
		for i, l := range e.orig.Chains.Chat {
			if strings.Contains(string(l.Config), strconv.Quote(t.name)) || l.When != nil {
				fmt.Fprintf(&b, "|named:%d:%s", i, t.name)
			}
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// targetState is the exploration of one target so far.
type targetState struct {
	t    target
	alph []string
	rep  *Report
	// found holds the invariants already violated; seen the fingerprints
	// of the states reached; frontier the scripts to extend at the next
	// depth.
	found, seen map[string]bool
	frontier    [][]string
	// done is set once every script up to the depth was run.
	done bool
	// admitted is set once a run's call entered a layer (or the model or
	// tool) past the admission checks, ran once one ran the model or
	// tool; refusal is the error of the first run's first call.
	admitted, ran bool
	refusal       *scenario.ErrorSummary
}

func (e *explorer) newTargetState(t target) *targetState {
	alph := e.chatAlph
	if t.stage == plan.StageTool {
		alph = e.toolAlph
	}
	return &targetState{t: t, alph: alph, rep: &Report{}, found: map[string]bool{}, seen: map[string]bool{}, frontier: [][]string{nil}}
}

// level runs every script of length depth that extends the frontier of ts,
// at most quota of them, and keeps the first (shortest) counterexample of
// each invariant. When a bound of the exploration is reached it returns,
// leaving the level unfinished.
func (e *explorer) level(ctx context.Context, ts *targetState, depth, quota int) error {
	if ts.done {
		return nil
	}
	t, rep := ts.t, ts.rep
	var next [][]string
	ran := 0
	for _, prefix := range ts.frontier {
		for _, o := range ts.alph {
			if e.admit(ctx, ran, quota) != "" {
				return nil
			}
			ran++
			script := append(slices.Clone(prefix), o)
			r, err := e.run(ctx, t, script)
			if err != nil {
				if ctx.Err() != nil {
					// The run was cut short: it counts for nothing.
					e.stopped.CompareAndSwap(nil, BoundInterrupted)
					return nil
				}
				return err
			}
			rep.States++
			ts.observe(r)
			e.progress()
			for _, v := range e.inv.check(e, t, r) {
				if ts.found[v.id] {
					continue
				}
				ts.found[v.id] = true
				rep.Violations = append(rep.Violations, e.counterexample(ctx, t, script, r, v))
			}
			fp := r.fingerprint()
			if r.consumed < len(script) || ts.seen[fp] {
				rep.Pruned++
				continue
			}
			ts.seen[fp] = true
			next = append(next, script)
		}
	}
	ts.frontier = next
	if depth == e.opts.Depth || len(next) == 0 {
		ts.done = true
		e.done.Add(1)
	}
	return nil
}

// outcome of one run.
type outcome struct {
	sc       *scenario.Scenario
	res      *scenario.Result
	events   []event
	ledgers  []ledgerOf
	consumed int
	elapsed  time.Duration
	// timed reports a plan whose layers read the clock between calls.
	timed bool
}

// ledgerOf is a budgeted meter's ledger after a run.
type ledgerOf struct {
	stage  plan.Stage
	layer  string
	pos    int
	budget budget
	ledger runtime.Ledger
}

type budget struct {
	Tokens *int64   `json:"tokens"`
	USD    *float64 `json:"usd"`
	Calls  *int64   `json:"calls"`
}

// scenarioFor writes the scenario of a script: one step per outcome (each
// delivered copies times at once), the script served in order by whichever
// model or tool the chain calls.
func (e *explorer) scenarioFor(t target, script []string, consume map[string]bool) *scenario.Scenario {
	sc := &scenario.Scenario{RunID: "run-1", DNS: t.dns}
	switch t.stage {
	case plan.StageChat:
		items := make([]scenario.ModelItem, len(script))
		for i, o := range script {
			items[i] = e.modelItem(o)
		}
		// Every model serves the same script: the chain's calls take the
		// next outcome whichever model they reach.
		sc.Models = map[string][]scenario.ModelItem{}
		for m := range e.orig.Models {
			sc.Models[m] = items
		}
	case plan.StageTool:
		items := make([]scenario.ToolItem, len(script))
		for i, o := range script {
			items[i] = toolItem(o)
		}
		sc.Tools = map[string][]scenario.ToolItem{t.name: items}
	}
	for i := range script {
		path := strconv.Itoa(i)
		st := e.step(t, consume[path])
		if t.copies > 1 {
			par := make([]scenario.Step, t.copies)
			for j := range par {
				par[j] = e.step(t, consume[path+"/"+strconv.Itoa(j)])
			}
			st = scenario.Step{Parallel: par}
		}
		sc.Steps = append(sc.Steps, st)
	}
	return sc
}

func (e *explorer) step(t target, stop bool) scenario.Step {
	if t.stage == plan.StageTool {
		return scenario.Step{Tool: &scenario.ToolStep{Name: t.name, Args: t.args}}
	}
	cs := &scenario.ChatStep{Model: t.name, Messages: []runtime.Message{{Role: "user", Content: e.prompt}}}
	if stop {
		one := 1
		cs.Consume = &one
	}
	return scenario.Step{Chat: cs}
}

func (e *explorer) modelItem(o string) scenario.ModelItem {
	u := e.usage
	text := "ok"
	switch o {
	case outOK:
		return scenario.ModelItem{Text: &text, Usage: &u}
	case outSlow:
		return scenario.ModelItem{Text: &text, Usage: &u, DelayMS: slowMS}
	case outStop:
		return scenario.ModelItem{Deltas: []string{"o", "k"}, Usage: &u}
	case outFailAfter:
		one := 1
		return scenario.ModelItem{Deltas: []string{"o", "k"}, FailAfter: &one, Error: scenario.ErrTransient}
	case outRateLimited:
		return scenario.ModelItem{Error: scenario.ErrRateLimited, RetryAfterMS: 1000}
	case outRefused:
		return scenario.ModelItem{Error: scenario.ErrRefused}
	}
	return scenario.ModelItem{Error: o}
}

func toolItem(o string) scenario.ToolItem {
	switch o {
	case outOK:
		return scenario.ToolItem{Result: map[string]any{"ok": true}}
	case outSlow:
		return scenario.ToolItem{Result: map[string]any{"ok": true}, DelayMS: slowMS}
	case outCrash:
		return scenario.ToolItem{Crash: true}
	case outRateLimited:
		return scenario.ToolItem{Error: scenario.ErrRateLimited, RetryAfterMS: 1000}
	}
	return scenario.ToolItem{Error: o}
}

// run runs one script. A script with consumer stops runs twice: once to see
// which step each outcome is served to, then with those steps stopping.
func (e *explorer) run(ctx context.Context, t target, script []string) (*outcome, error) {
	o, err := e.runScenario(ctx, t, script, e.scenarioFor(t, script, nil))
	if err != nil || !slices.Contains(script, outStop) {
		return o, err
	}
	consume := map[string]bool{}
	served := 0
	for _, ev := range o.events {
		if ev.Kind != evExecute {
			continue
		}
		if served < len(script) && script[served] == outStop {
			consume[ev.Step] = true
		}
		served++
	}
	return e.runScenario(ctx, t, script, e.scenarioFor(t, script, consume))
}

func (e *explorer) runScenario(ctx context.Context, t target, script []string, sc *scenario.Scenario) (*outcome, error) {
	rec := &recorder{billInput: e.usage.InputTokens}
	if t.copies > 1 && !t.free {
		rec.gate = newGate(t.copies, t.together)
	}
	clock := runtime.NewVirtualClock(scenario.Epoch)
	o := &outcome{sc: sc, timed: e.clocked}
	res, err := scenario.Run(context.WithValue(ctx, recorderKey{}, rec), e.p, sc, scenario.Options{
		Dir:    e.opts.Dir,
		Clock:  clock,
		Logger: e.logger,
		Wrap: func(d *runtime.Deps) {
			d.Audit = recordingSink{d.Audit}
			// An audit layer (or the state's or grounding's records) naming
			// a store writes there: every store's trail is recorded too.
			d.AuditSinks = map[string]runtime.AuditSink{}
			for name := range e.p.Stores {
				d.AuditSinks[name] = d.Audit
			}
		},
		OnExecute: func(ctx context.Context, stage plan.Stage, name string) {
			recorderOf(ctx).add(ctx, event{Kind: evExecute, Stage: stage, Name: name})
		},
		Inspect: func(pl *runtime.Pipeline) { o.ledgers = ledgers(pl, e.orig, sc.RunID) },
	})
	if le := (*runtime.LayerError)(nil); errors.As(err, &le) {
		// The plan's, whatever the target.
		e.placeLayer(le)
		return nil, fmt.Errorf("prove: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("prove: %s: %w", t.label, err)
	}
	o.res = res
	o.events = rec.snapshot()
	o.elapsed = clock.Now().Sub(scenario.Epoch)
	for _, ev := range o.events {
		if ev.Kind == evExecute {
			o.consumed++
		}
	}
	return o, nil
}

// placeLayer gives the layer that did not build its index in the policy's
// chain: the pipeline's chains hold probes between the layers.
func (e *explorer) placeLayer(le *runtime.LayerError) {
	chain := chainOf(e.p, le.Stage)
	if le.Index >= len(chain) || chain[le.Index].Use == probeID {
		return
	}
	n := 0
	for _, l := range chain[:le.Index] {
		if l.Use != probeID {
			n++
		}
	}
	le.Index = n
}

// ledgers reads the ledger of every meter layer with a budget; orig is the
// plan without probes, where a layer's position is read.
func ledgers(pl *runtime.Pipeline, orig *plan.Plan, runID string) []ledgerOf {
	var out []ledgerOf
	for _, st := range []plan.Stage{plan.StageChat, plan.StageTool} {
		for _, l := range pl.Layers(st) {
			lr, ok := l.Middleware.(runtime.LedgerReader)
			if !ok {
				continue
			}
			raw, _ := json.Marshal(l.Middleware)
			var cfg struct {
				Budget *budget `json:"budget"`
			}
			if json.Unmarshal(raw, &cfg) != nil || cfg.Budget == nil {
				continue
			}
			// The pipeline's chains hold probes between the layers: the
			// layer's own position is that of its name in the plan.
			pos := slices.IndexFunc(chainOf(orig, st), func(o plan.Layer) bool { return layerName(o) == l.Name })
			out = append(out, ledgerOf{stage: st, layer: l.Name, pos: pos, budget: *cfg.Budget, ledger: lr.Ledger(runID)})
		}
	}
	return out
}

// fingerprint is the observable state a run ends in: the steps' outcomes,
// the executions, audit records and refusals of each call, the ledgers and
// the virtual time. Two scripts that end in the same state are extended only
// once. The concurrent copies of a step are interchangeable: each copy's
// part is written on its own and the parts sorted, so that a run and its
// image with the copies swapped have one fingerprint.
func (o *outcome) fingerprint() string {
	var b strings.Builder
	var step func(s scenario.StepResult) string
	step = func(s scenario.StepResult) string {
		var b strings.Builder
		if s.Stage == "parallel" {
			// A concurrent step's outcome is that of its first copy that
			// failed: its copies, sorted below, say it but for their order.
			b.WriteString(s.Stage)
		} else {
			fmt.Fprintf(&b, "%s:%s:%d", s.Stage, s.Outcome, s.Attempts)
			if s.Deduped != nil && *s.Deduped {
				b.WriteString(":d")
			}
			if s.Error != nil {
				b.WriteString(":" + s.Error.Kind + ":" + s.Error.Layer)
			}
		}
		if s.Text != nil {
			b.WriteString(":" + *s.Text)
		}
		b.WriteString("[")
		var nested []string
		for _, n := range s.Nested {
			nested = append(nested, step(n))
		}
		if s.Stage == "parallel" {
			sort.Strings(nested)
		}
		b.WriteString(strings.Join(nested, ","))
		b.WriteString("]")
		return b.String()
	}
	// The events of each call, by its path.
	perCall := map[string]*strings.Builder{}
	for _, ev := range o.events {
		var s string
		switch ev.Kind {
		case evExecute:
			s = "|x"
		case evRecord:
			s = fmt.Sprintf("|r%s:%s:%d", ev.Record.Phase, ev.Record.Decision, ev.Record.Attempts)
		case evExit:
			// A refusal ends the call as a permanent failure does, but
			// what a layer does next differs (a fallback falls over, a
			// retry must not retry).
			if ev.Refused == "" {
				continue
			}
			s = "|R"
		default:
			continue
		}
		w := perCall[ev.Step]
		if w == nil {
			w = &strings.Builder{}
			perCall[ev.Step] = w
		}
		w.WriteString(s)
	}
	for i, s := range o.res.Steps {
		b.WriteString(step(s))
		path := strconv.Itoa(i)
		if s.Stage != "parallel" {
			if w := perCall[path]; w != nil {
				b.WriteString(w.String())
			}
			b.WriteString(";")
			continue
		}
		var copies []string
		for j := range s.Nested {
			if w := perCall[path+"/"+strconv.Itoa(j)]; w != nil {
				copies = append(copies, w.String())
			} else {
				copies = append(copies, "")
			}
		}
		sort.Strings(copies)
		b.WriteString("{" + strings.Join(copies, "/") + "};")
	}
	for _, l := range o.ledgers {
		fmt.Fprintf(&b, "|l%v", l.ledger)
	}
	// The elapsed time matters only to layers that read the clock.
	if o.timed {
		fmt.Fprintf(&b, "|t%d", o.elapsed/time.Second)
	}
	fmt.Fprintf(&b, "|c%v", o.res.Crashed)
	return b.String()
}

// observe notes whether the run r of the target got past the admission
// checks and ran the model or tool.
func (ts *targetState) observe(r *outcome) {
	for _, ev := range r.events {
		switch ev.Kind {
		case evEnter:
			ts.admitted = true
		case evExecute:
			ts.admitted, ts.ran = true, true
		}
	}
	if ts.refusal == nil && len(r.res.Steps) > 0 {
		st := r.res.Steps[0]
		if len(st.Nested) > 0 {
			st = st.Nested[0]
		}
		if st.Error != nil {
			ts.refusal = st.Error
		}
	}
}

// unexplored lists the models and tools none of whose targets' runs ran
// them, in the order of the targets; one no run of which was run (a bound
// stopped the exploration first) is not listed.
func unexplored(states []*targetState) []Unexplored {
	type acc struct {
		target              string
		runs, admitted, ran bool
		refusal             *scenario.ErrorSummary
	}
	var order []string
	by := map[string]*acc{}
	for _, ts := range states {
		key := string(ts.t.stage) + " " + ts.t.name
		a := by[key]
		if a == nil {
			a = &acc{target: key}
			by[key] = a
			order = append(order, key)
		}
		a.runs = a.runs || ts.rep.States > 0
		a.admitted, a.ran = a.admitted || ts.admitted, a.ran || ts.ran
		if a.refusal == nil {
			a.refusal = ts.refusal
		}
	}
	var out []Unexplored
	for _, key := range order {
		a := by[key]
		if !a.runs || a.ran {
			continue
		}
		what := "model"
		if strings.HasPrefix(key, string(plan.StageTool)) {
			what = "tool"
		}
		reason := fmt.Sprintf("no generated call reached the %s", what)
		if !a.admitted {
			reason = "every generated call was refused before any layer"
		}
		if f := a.refusal; f != nil {
			switch {
			case !a.admitted || f.Layer == "":
				reason += " (" + f.Message + ")"
			default:
				reason += fmt.Sprintf(": layer %s blocked it (%s)", f.Layer, f.Message)
			}
		}
		out = append(out, Unexplored{Target: a.target, Reason: reason})
	}
	return out
}
