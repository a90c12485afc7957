package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/agentc-dev/agentc/internal/resultjson"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "guard"

func init() {
	runtime.Register(runtime.Module{
		ID:         ID,
		Builtin:    true,
		Stages:     []plan.Stage{plan.StageChat, plan.StageTool, plan.StageTurn},
		Traits:     []runtime.Trait{runtime.TraitGuards, runtime.TraitShortCircuits},
		Repeatable: true,
		Doc:        "blocks a call with a CEL predicate",
		New:        func() runtime.Middleware { return &Guard{Phase: "before", OnError: "closed"} },
	})
}

// Guard is the guard middleware; its exported fields are its config
// (schemas/guard.cue).
type Guard struct {
	Deny    string `json:"deny,omitempty"`
	Require string `json:"require,omitempty"`
	Phase   string `json:"phase"`
	Message string `json:"message,omitempty"`
	OnError string `json:"on_error"`

	name   string
	pred   *runtime.Predicate
	deny   bool
	logger *slog.Logger
	// results are the compiled result schemas of the tools an after-phase
	// guard of the tool stage applies to, by tool name.
	results map[string]*jsonschema.Schema
}

// Provision compiles the predicate.
func (g *Guard) Provision(b *runtime.BuildContext) error {
	g.name = b.Name()
	g.logger = b.Logger
	if (g.Deny == "") == (g.Require == "") {
		return errors.New("exactly one of deny and require must be set")
	}
	key, src := "require", g.Require
	if g.Deny != "" {
		key, src, g.deny = "deny", g.Deny, true
	}
	p, err := b.Predicate(key)
	if err != nil {
		return err
	}
	if p == nil {
		p, err = b.CompilePredicate(&plan.Predicate{Stage: b.Stage, Phase: g.Phase, Source: src, Tools: b.Layer.Tools})
		if err != nil {
			return fmt.Errorf("predicate %s: %w", key, err)
		}
	}
	g.pred = p
	if b.Stage == plan.StageTool && g.Phase == "after" {
		if g.results, err = resultSchemas(b); err != nil {
			return err
		}
	}
	if g.Message == "" {
		if g.deny {
			g.Message = "denied: " + src
		} else {
			g.Message = "requirement not met: " + src
		}
	}
	return nil
}

// resultSchemas compiles the result_schema of each declared tool the layer
// applies to (every declared tool when it is not scoped), so that `result`
// is the value the schema describes, as output_coerce checks it.
func resultSchemas(b *runtime.BuildContext) (map[string]*jsonschema.Schema, error) {
	names := b.Layer.Tools
	if len(names) == 0 {
		names = slices.Sorted(maps.Keys(b.Plan.Tools))
	}
	out := map[string]*jsonschema.Schema{}
	for _, name := range names {
		raw := b.Plan.Tools[name].ResultSchema
		if len(raw) == 0 {
			continue
		}
		s, err := resultjson.Compile(raw)
		if err != nil {
			return nil, fmt.Errorf("tools.%s.result_schema: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// Validate checks phase and on_error.
func (g *Guard) Validate() error {
	if g.Phase != "before" && g.Phase != "after" {
		return fmt.Errorf(`phase must be "before" or "after", got %q`, g.Phase)
	}
	if g.OnError != "closed" && g.OnError != "open" {
		return fmt.Errorf(`on_error must be "closed" or "open", got %q`, g.OnError)
	}
	return nil
}

// decide turns an evaluation into nil (pass) or a *runtime.BlockedError.
func (g *Guard) decide(ctx context.Context, v bool, err error) error {
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if g.OnError == "open" {
			g.logger.WarnContext(ctx, "guard predicate failed; failing open", "error", err)
			return nil
		}
		return &runtime.BlockedError{Layer: g.name, Message: g.Message, Err: err}
	}
	if v == g.deny {
		return &runtime.BlockedError{Layer: g.name, Message: g.Message}
	}
	return nil
}

// evalChat evaluates the predicate over c, reading the messages of each
// turn together too (runtime.Predicate.EvalChatTurns): a deny holds when it
// holds either way, a require only when it holds both ways, so a phrase cut
// across the messages of one turn (two user messages, a tool result and the
// user's text after it) is read whole, as the model reads it.
func (g *Guard) evalChat(ctx context.Context, c *runtime.ChatCall, resp *runtime.ChatResponse) (bool, error) {
	asSent, whole, err := g.pred.EvalChatTurns(ctx, c, resp)
	if g.deny {
		return asSent || whole, err
	}
	return asSent && whole, err
}

// WrapChat implements runtime.ChatWrapper.
func (g *Guard) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	if g.Phase == "before" {
		return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
			v, err := g.evalChat(ctx, c, nil)
			if err := g.decide(ctx, v, err); err != nil {
				return err
			}
			return next(ctx, c, yield)
		}
	}
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		buf, err := runtime.Buffer(ctx, c, next)
		if err != nil {
			return err
		}
		resp := &runtime.ChatResponse{Text: buf.Text, ToolCalls: buf.ToolCalls, FinishReason: c.FinishReason, Refusal: buf.Refusal,
			Model: c.Served, Usage: c.Usage, Attempts: c.Meta.Attempts}
		v, eerr := g.evalChat(ctx, c, resp)
		if err := g.decide(ctx, v, eerr); err != nil {
			return err
		}
		buf.Release(c, yield)
		return nil
	}
}

// WrapTool implements runtime.ToolWrapper.
func (g *Guard) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	if g.Phase == "before" {
		return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
			v, err := g.pred.EvalTool(ctx, c, nil, false)
			if err := g.decide(ctx, v, err); err != nil {
				return nil, err
			}
			return next(ctx, c)
		}
	}
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		res, err := next(ctx, c)
		if err != nil {
			return g.failedTool(ctx, c, res, err)
		}
		// The value read is a view of res; res is what is returned.
		v, eerr := g.pred.EvalTool(ctx, c, resultjson.Value(g.results[c.Name], res), true)
		if err := g.decide(ctx, v, eerr); err != nil {
			var b *runtime.BlockedError
			if errors.As(err, &b) {
				// The tool ran: the block is of its result, not of the
				// call, whose effect stands.
				return nil, runtime.Ran(err)
			}
			return nil, err
		}
		return res, nil
	}
}

// failedTool decides a tool call that failed with err. A permanent failure
// is the tool's answer, whose text the model reads as it reads a result (an
// MCP upstream's error result, a tool's own error): the guard reads that
// text as result, so that an answer marked an error does not pass what it
// holds on a tool's answers. A block keeps what err says of whether the
// call ran. Any other failure (transient, blocked, over budget, in doubt,
// cancelled) is returned as is. A permanent failure a layer inside raised
// in its own words (output_coerce refusing the result) is read so too, but
// it is the layer's word, not a result: when the predicate cannot be
// evaluated on its text (a field read of it), the failure is returned as
// it is, which fails the call as a block would and says what the layer
// found. A layer's failure that carries another error's text (an
// idempotent layer replaying the tool's stored failure) is the tool's
// answer still, and fails closed as the tool's own failure does.
func (g *Guard) failedTool(ctx context.Context, c *runtime.ToolCall, res any, err error) (any, error) {
	if ctx.Err() != nil || runtime.Classify(err) != runtime.ClassFailure || runtime.IsTransient(err) {
		return res, err
	}
	v, eerr := g.pred.EvalTool(ctx, c, resultjson.Value(g.results[c.Name], err.Error()), true)
	if eerr != nil && ctx.Err() == nil && layersOwn(err) {
		return res, err
	}
	berr := g.decide(ctx, v, eerr)
	if berr == nil {
		return res, err
	}
	var b *runtime.BlockedError
	switch {
	case !errors.As(berr, &b):
		return nil, berr
	case runtime.DidNotRun(err):
		return nil, runtime.NotRun(berr)
	}
	return nil, runtime.Ran(berr)
}

// layersOwn reports whether err is a failure a layer raised in its own
// words: its *runtime.CallError names the layer, wraps no other error, and
// its text is all of err's. A layer's error that wraps another (the tool's
// failure an idempotent layer replays, an audit failure joined to the
// tool's) carries text the layer did not write, which the guard holds as
// it holds the tool's own.
func layersOwn(err error) bool {
	var ce *runtime.CallError
	return errors.As(err, &ce) && ce.Layer != "" && ce.Err == nil && ce.Error() == err.Error()
}

// AdmitTool implements runtime.ToolAdmitter: a guard of phase "before"
// decides the call as WrapTool does; one of phase "after" reads the result
// and admits every call.
func (g *Guard) AdmitTool(ctx context.Context, c *runtime.ToolCall) error {
	if g.Phase != "before" {
		return nil
	}
	v, err := g.pred.EvalTool(ctx, c, nil, false)
	return g.decide(ctx, v, err)
}

var _ runtime.ToolAdmitter = (*Guard)(nil)

// WrapTurn implements runtime.TurnWrapper. An after-phase guard evaluates
// its predicate over the turn's output, then over the text of each of the
// turn's earlier answers (runtime.TurnCall.Earlier) as the output, with
// output.final false: any refusal blocks.
func (g *Guard) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	if g.Phase == "before" {
		return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
			v, err := g.pred.EvalTurn(ctx, c, "", nil, false)
			if err := g.decide(ctx, v, err); err != nil {
				return "", err
			}
			return next(ctx, c)
		}
	}
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		out, err := next(ctx, c)
		if runtime.Classify(err).Final() {
			return out, err // blocked, over budget or in doubt: keep the first reason
		}
		v, eerr := g.pred.EvalTurn(ctx, c, out, err, true)
		if berr := g.decide(ctx, v, eerr); berr != nil {
			return "", berr
		}
		// The text the turn's earlier answers wrote beside their tool
		// calls reaches the host in the transcript as the output does:
		// each is judged as an output of the turn.
		for _, text := range c.Earlier() {
			v, eerr := g.pred.EvalTurnEarlier(ctx, c, text, err)
			if berr := g.decide(ctx, v, eerr); berr != nil {
				return "", berr
			}
		}
		return out, err
	}
}
