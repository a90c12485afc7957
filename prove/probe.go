package prove

import (
	"context"
	"errors"
	"sync"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	"github.com/agentc-dev/agentc/runtime/scenario"
)

// probeID is the module the explorer inserts above every layer of a chain
// and above the model or tool, to see which layers a call reached and what
// they returned. A probe passes every call through unchanged.
const probeID = "agentc.prove_probe"

var registerProbe = sync.OnceFunc(func() {
	runtime.Register(runtime.Module{
		ID:     probeID,
		Stages: []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn},
		Doc:    "inserted by agentc prove above each layer to observe a call; passes everything through",
		ConfigSchema: `pos: int & >=0
stage: string`,
		New: func() runtime.Middleware { return &probe{} },
	})
})

// event kinds of the trace.
const (
	evEnter   = "enter"   // the call reached layer Pos
	evExit    = "exit"    // layer Pos (and what is inside it) returned Kind
	evDelta   = "delta"   // a delta reached the caller
	evExecute = "execute" // a model or a tool really ran
	evRecord  = "record"  // an audit record was written
	// A call entered and left the scope of a chat meter with `when` at Pos:
	// the meter applied to it (a scope probe, see probed).
	evScopeIn  = "scope_in"
	evScopeOut = "scope_out"
)

// event is one entry of a run's trace.
type event struct {
	Seq   int
	Step  string
	Kind  string
	Stage plan.Stage
	// Pos is the layer position (enter, exit): the index of the layer the
	// probe sits above; len(chain) is the model or tool itself.
	Pos int
	// Class is the runtime.Classify of an exit's error; ErrKind its KindOf.
	Class   runtime.Class
	ErrKind string
	// Name is the model or tool (execute) or the audit layer (record).
	Name string
	// Record is the audit record (record).
	Record runtime.AuditRecord
	// Cancelled reports an execution whose context had already ended (a
	// hedge racer that lost before it ran).
	Cancelled bool
	// Usage and Model are what arrived through a chat exit, and from which
	// model: what a meter just outside it charges.
	Usage runtime.Usage
	Model string
	// Refused names the model called of an exit whose error is its
	// provider's refusal to serve the call (runtime.ErrProviderRefused).
	Refused string
}

// recorder collects the events of one run; it travels in the run's context.
type recorder struct {
	mu     sync.Mutex
	events []event
	// billInput is the input the scripted provider bills a request
	// cancelled after it went out (see probe.WrapChat).
	billInput int64
	// gate, when set, orders the concurrent copies of a step (one after
	// the other, or admitted together).
	gate *gate
}

type recorderKey struct{}

func recorderOf(ctx context.Context) *recorder {
	r, _ := ctx.Value(recorderKey{}).(*recorder)
	return r
}

func (r *recorder) add(ctx context.Context, e event) {
	if r == nil {
		return
	}
	e.Step = scenario.StepPath(ctx)
	r.mu.Lock()
	if e.Kind == evExecute {
		// Read under the lock: an execution recorded after a delta sees
		// the cancellation that came before the delta (a hedge cancels
		// the racers that lost before it passes the winner's delta on).
		e.Cancelled = ctx.Err() != nil
	}
	e.Seq = len(r.events)
	r.events = append(r.events, e)
	r.mu.Unlock()
	r.gate.progress(e.Step)
}

func (r *recorder) snapshot() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]event(nil), r.events...)
}

type probe struct {
	Pos   int    `json:"pos"`
	Stage string `json:"stage"`
	// Last marks the probe just outside the model (or tool, or turn).
	Last bool `json:"last,omitempty"`
	// Scope marks the probe just inside a chat meter or a tool idempotent
	// layer with `when`, under the same `when`: it sees the calls the layer
	// applies to, as the runtime decides it.
	Scope bool `json:"scope,omitempty"`
}

func (p *probe) exit(ctx context.Context, err error) {
	recorderOf(ctx).add(ctx, event{Kind: evExit, Stage: p.Stage, Pos: p.Pos, Class: runtime.Classify(err), ErrKind: runtime.KindOf(err)})
}

// WrapChat implements runtime.ChatWrapper; the outermost probe also records
// the deltas that reach the caller.
func (p *probe) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		rec := recorderOf(ctx)
		if p.Scope {
			rec.add(ctx, event{Kind: evScopeIn, Stage: p.Stage, Pos: p.Pos})
			err := next(ctx, c, yield)
			rec.add(ctx, event{Kind: evScopeOut, Stage: p.Stage, Pos: p.Pos})
			return err
		}
		rec.add(ctx, event{Kind: evEnter, Stage: p.Stage, Pos: p.Pos})
		y := yield
		if p.Pos == 0 {
			y = func(d runtime.Delta) bool {
				rec.add(ctx, event{Kind: evDelta, Stage: p.Stage})
				return yield(d)
			}
		}
		u0, d0, n0 := c.Usage, c.Discarded, c.Deltas
		err := next(ctx, c, y)
		model := c.Served
		if model == "" {
			model = c.Request.Model
		}
		if p.Last && rec != nil && runtime.KindOf(err) == "canceled" && c.Deltas == n0 {
			// The scripted provider bills a request cancelled after it went
			// out the scripted input, which the runtime's estimate of the
			// input stands for: the layers are checked on what they do
			// with the estimate, at the script's scale.
			c.Usage.InputTokens = u0.InputTokens + rec.billInput
		}
		u := c.Usage.Sub(u0)
		u.Add(c.Discarded.Sub(d0))
		refused := ""
		if errors.Is(err, runtime.ErrProviderRefused) {
			refused = c.Request.Model
		}
		rec.add(ctx, event{Kind: evExit, Stage: p.Stage, Pos: p.Pos, Class: runtime.Classify(err), ErrKind: runtime.KindOf(err),
			Usage: u, Model: model, Refused: refused})
		return err
	}
}

// WrapTool implements runtime.ToolWrapper.
func (p *probe) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		rec := recorderOf(ctx)
		if p.Scope {
			rec.add(ctx, event{Kind: evScopeIn, Stage: p.Stage, Pos: p.Pos})
			v, err := next(ctx, c)
			rec.add(ctx, event{Kind: evScopeOut, Stage: p.Stage, Pos: p.Pos})
			return v, err
		}
		if p.Pos == 0 && rec != nil {
			rec.gate.enter(ctx, scenario.StepPath(ctx))
		}
		rec.add(ctx, event{Kind: evEnter, Stage: p.Stage, Pos: p.Pos})
		if p.Last && rec != nil {
			rec.gate.arrive(ctx, scenario.StepPath(ctx))
		}
		v, err := next(ctx, c)
		p.exit(ctx, err)
		if p.Pos == 0 && rec != nil {
			rec.gate.end(scenario.StepPath(ctx))
		}
		return v, err
	}
}

// WrapTurn implements runtime.TurnWrapper.
func (p *probe) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		recorderOf(ctx).add(ctx, event{Kind: evEnter, Stage: p.Stage, Pos: p.Pos})
		out, err := next(ctx, c)
		p.exit(ctx, err)
		return out, err
	}
}

// recordingSink notes every audit record in the run's trace.
type recordingSink struct{ runtime.AuditSink }

// Append implements runtime.AuditSink.
func (s recordingSink) Append(ctx context.Context, r runtime.AuditRecord) error {
	err := s.AuditSink.Append(ctx, r)
	if err == nil {
		recorderOf(ctx).add(ctx, event{Kind: evRecord, Name: r.Layer, Record: r})
	}
	return err
}

// probed returns a copy of chain with a probe above every layer and one
// above the model or tool (position len(chain)); a chat meter or a tool
// idempotent layer with `when` gets a scope probe just inside it, under the
// same `when`, which sees the calls the layer applies to.
func probed(stage plan.Stage, chain []plan.Layer) []plan.Layer {
	if len(chain) == 0 {
		return nil
	}
	out := make([]plan.Layer, 0, 2*len(chain)+1)
	for i := 0; i <= len(chain); i++ {
		last := ""
		if i == len(chain) {
			last = `,"last":true`
		}
		out = append(out, plan.Layer{Use: probeID, Name: probeName(i),
			Config: []byte(`{"pos":` + itoa(i) + `,"stage":"` + stage + `"` + last + `}`)})
		if i == len(chain) {
			break
		}
		l := chain[i]
		out = append(out, l)
		if l.When != nil && (stage == plan.StageChat && l.Use == "meter" || stage == plan.StageTool && l.Use == "idempotent") {
			when := *l.When
			out = append(out, plan.Layer{Use: probeID, Name: "prove_scope_" + itoa(i), When: &when,
				Config: []byte(`{"pos":` + itoa(i) + `,"stage":"` + stage + `","scope":true}`)})
		}
	}
	return out
}

func probeName(i int) string { return "prove_probe_" + itoa(i) }
