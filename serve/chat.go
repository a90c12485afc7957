package serve

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/builtins/fallback"
	"github.com/agentc-dev/agentc/builtins/hedge"
	"github.com/agentc-dev/agentc/builtins/meter"
	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/builtins/redact"
	"github.com/agentc-dev/agentc/internal/jsonwalk"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// chatParams is a chat request decoded from either wire format.
type chatParams struct {
	req runtime.ChatRequest
	// served notes what the model clients report of the request.
	served *servedSlot
	// stream asks for server-sent events.
	stream bool
	// includeUsage asks for OpenAI's trailing usage chunk.
	includeUsage bool
	// blocks is the order of a whole response's blocks, for a wire format
	// that lists them (chatAPI.ordered).
	blocks runtime.BlockOrder
	// documents names the messages that hold a document no layer reads
	// (a PDF: runtime.PartDocument), as the client's fields.
	documents []string
	// items are the messages and parts the body holds (countItems), which
	// size the decoding's slices; zero when not counted.
	items items
	// rs holds what the Responses route's answer repeats of the request.
	rs *rsParams
}

// chatAPI is one wire format of the chat routes.
type chatAPI struct {
	// decode turns a request body into p, or returns the problem.
	decode func(body []byte, p *chatParams) error
	// headers, when set, carries the request headers the route carries
	// into p, and refuses those it cannot carry.
	headers func(h http.Header, p *chatParams) error
	// requestIDHeader names the response header that returns the
	// upstream's request id.
	requestIDHeader string
	// complete answers a whole response.
	complete func(x *exchange, p *chatParams, resp *runtime.ChatResponse)
	// stream returns the writer of a streamed response.
	stream func(x *exchange, p *chatParams, served *servedSlot) chatStream
	// ordered asks for the order in which a whole response's thinking,
	// text and tool calls arrived (chatParams.blocks), for complete.
	ordered bool
	// wire names the provider whose API the route speaks ("openai",
	// "anthropic"): a model of another reads some requests otherwise
	// (servedModel.Stream).
	wire string
	// param, when set, maps the param of an upstream's error, a field of
	// the request the gateway sent, to the field of p it came from ("":
	// none, a null param); sent reports that the messages went upstream as
	// p holds them (no layer of the chat chain may have added, dropped or
	// rewritten one: rewritesMessages).
	param func(p *chatParams, sent bool, upstream string) string
}

// chatStream writes a streamed response. Nothing is sent until the first
// delta, so that a call refused before any output still gets a status and
// an error body.
type chatStream interface {
	// delta writes one delta; false when the client is gone.
	delta(d runtime.Delta) bool
	// started reports whether the response has begun (events were
	// written, or wait to be).
	started() bool
	// flushHeld sends the events that wait for the next delta, if any;
	// false when the client is gone.
	flushHeld() bool
	// free returns the stream's buffer; the stream is not used after.
	free()
	// end writes the closing events of a successful stream.
	end(resp *runtime.ChatResponse)
	// fail writes an error event: the call failed after the stream began.
	fail(err error)
}

// chat serves one chat call in the wire format a: it decodes the body,
// resolves the model, attaches the run, runs the chat chain and encodes the
// outcome.
func (s *Server) chat(x *exchange, a *chatAPI) {
	var p chatParams
	if !s.readChat(x, &p, a.decode, a.headers) || !s.admitRequest(x, &p) {
		return
	}
	if err := unpricedBetas(x.g.pl, &p.req); err != nil {
		x.err = err
		x.fail(http.StatusBadRequest, errBadRequest, err.Error())
		return
	}
	ctx, finish, err := s.withRun(x.r.Context(), x, x.r, x.g, x.caller)
	if err != nil {
		x.fail(http.StatusBadRequest, errBadRequest, err.Error())
		return
	}
	defer finish()
	rewrites := rewritesMessages(x.g.pl)
	if a.param != nil {
		sent := !rewrites
		x.param = func(upstream string) string { return a.param(&p, sent, upstream) }
	}
	x.run = runtime.RunOf(ctx).ID
	served := &servedSlot{idHeader: a.requestIDHeader}
	p.served = served
	ctx = runtime.WithUpstreamRequestID(ctx, served)
	ctx = context.WithValue(ctx, clientWireKey{}, a.wire)
	// The chat chain's layers that report the call (log) report one that
	// succeeded as the gateway answers it: refused when it refuses a call
	// the model proposed (admitProposals), after the chain returned.
	verdict := &runtime.AnswerVerdict{}
	ctx = runtime.WithAnswerVerdict(ctx, verdict)
	var answered error
	defer func() { verdict.Settle(answered) }()
	var made *madeCalls
	if rewrites {
		// A layer of the chat chain may rewrite the calls the model
		// makes: the gateway admits them as the model made them.
		made = &madeCalls{}
		ctx = context.WithValue(ctx, madeCallsKey{}, made)
	}
	if !p.stream {
		var resp runtime.ChatResponse
		if a.ordered {
			resp, err = completeOrdered(ctx, &p.blocks, x.g.pl, p.req)
		} else {
			resp, err = x.g.pl.Complete(ctx, p.req)
		}
		s.observeChat(x, &p, &resp, err)
		err = placed(x.g.pl, plan.StageChat, err)
		// The upstream's id comes back with an error as with an answer:
		// a refused request's is the one its support asks for.
		served.setHeader(x.Header())
		if err == nil {
			err = s.admitProposals(ctx, x.g.pl, &p.req, resp.ToolCalls, made)
		}
		if err != nil {
			answered = err
			x.failErr(err)
			return
		}
		resp.ToolCalls = runtime.OwnToolCallIDs(resp.ToolCalls)
		drop, err := s.repeatedCalls(x, resp.ToolCalls, orderOfBlocks(p.blocks.Blocks))
		if err != nil {
			answered = err
			x.failErr(err)
			return
		}
		dropCalls(&resp, &p.blocks, drop)
		if x.g.withholdCache {
			resp.Usage = withholdCacheUsage(resp.Usage)
		}
		a.complete(x, &p, &resp)
		return
	}
	w := &heldStream{chatStream: a.stream(x, &p, served), withholdCache: x.g.withholdCache}
	defer w.free()
	resp, err := x.g.pl.Stream(ctx, p.req, w.hold)
	s.observeChat(x, &p, &resp, err)
	err = placed(x.g.pl, plan.StageChat, err)
	if err == nil {
		calls := w.toolCalls()
		if err = s.admitProposals(ctx, x.g.pl, &p.req, calls, made); err == nil {
			calls = runtime.OwnToolCallIDs(calls)
			var drop []bool
			if drop, err = s.repeatedCalls(x, calls, orderOfDeltas(w.held)); err == nil {
				w.release(calls, drop)
			}
		}
	}
	if err != nil {
		err = x.shutdownCut(err)
	}
	answered = err
	switch {
	case x.cut():
	case err != nil && !w.started():
		served.setHeader(x.Header())
		x.failErr(err)
	case err != nil:
		x.err = err
		w.fail(err)
	default:
		if w.withholdCache {
			resp.Usage = withholdCacheUsage(resp.Usage)
		}
		w.end(&resp)
	}
}

// unpricedBetas refuses the beta features of req that change the price the
// provider bills when pl's chat chain holds a meter and a model the
// request can reach (reachableModels) does not declare that price: the
// context-1m beta unless each such model declares a long-context tier
// (long_context) from meter.LongContextThreshold input tokens or below,
// which the meter prices a call above its threshold at
// (meter.UnpricedLongContext; a model the openai provider serves refuses
// any beta before the request is sent, behind a fallback the next model
// is tried, and need not). Otherwise the meter would count a part of the
// spend and let a budget be overspent. The meter refuses such a call too;
// refused here, the client learns it before any layer runs, with the
// declaration to write.
func unpricedBetas(pl *runtime.Pipeline, req *runtime.ChatRequest) error {
	beta := meter.LongContextBeta(req.Betas)
	if beta == "" {
		return nil
	}
	layers := pl.Layers(plan.StageChat)
	at := slices.IndexFunc(layers, func(l runtime.LayerInfo) bool { return l.Use == meter.ID })
	if at < 0 {
		return nil
	}
	models := pl.Plan().Models
	for _, name := range reachableModels(req.Model, layers) {
		if lacks := meter.UnpricedLongContext(models[name]); lacks != "" {
			return fmt.Errorf("anthropic-beta: %s bills a request over %d input tokens at a premium that the meter layer %s counts only for a model that declares it, and model %s, which the request can reach, %s, so a budget could be overspent; declare the model's tier in the policy (models: %s: long_context: {above_input_tokens: %d, usd_per_mtok_in: ..., usd_per_mtok_out: ...}, the provider's prices above the threshold, its base prices where it bills no premium) or remove the beta",
				beta, meter.LongContextThreshold, layers[at].Name, name, lacks, name, meter.LongContextThreshold)
		}
	}
	return nil
}

// reachableModels lists the models a request for model can be served by
// through the chat chain layers: model itself, and those a fallback or a
// hedge layer calls in its place (a layer's when decides on each call, so
// every one counts), each once, in the chain's order.
func reachableModels(model string, layers []runtime.LayerInfo) []string {
	out := []string{model}
	for _, l := range layers {
		var more []string
		switch mw := l.Middleware.(type) {
		case *fallback.Fallback:
			more = mw.Models
		case *hedge.Hedge:
			more = mw.Models
		}
		for _, m := range more {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out
}

// admitProposals decides the tool calls a model proposed before they are
// relayed to the client, which runs them: each must pass the tool chain's
// checks that need no execution (admitCall). calls are the calls the chat
// chain released; made, when set, holds those the model made (madeCalls).
// A call a layer of the chat chain rewrote (pii with action redact, or
// redact, mask the model's output; a host's middleware may give a call
// another id or name) is read by the tool chain as the model made it, then refused by the layer that rewrote it (maskingLayer): the
// client would run the tool on the masked values, and relaying the call
// as the model made it would hand the client what the layer masks. While
// such a layer is in the chat chain, a call no layer rewrote whose
// arguments hold a mask's placeholder is refused too (placeholderCall).
// So are the calls of an answer that proposes more than one when req
// allows one (serialCalls). The first refusal is returned and counted.
// An answer of more calls than Options.MaxToolCalls (tooManyCalls) fails
// before any is checked. The calls admitted are checked as the chat chain
// released them, ids included (madeCalls compares them): the caller gives
// them ids of their own (runtime.OwnToolCallIDs) once they are admitted.
func (s *Server) admitProposals(ctx context.Context, pl *runtime.Pipeline, req *runtime.ChatRequest, calls []runtime.ToolUse, made *madeCalls) error {
	if err := tooManyCalls(calls, s.opts.MaxToolCalls); err != nil {
		return err
	}
	var masking []string
	if len(calls) > 0 {
		masking = maskingLayers(pl)
	}
	offered, allowed := req.Tools, runtime.OfferedTools(*req)
	for _, call := range calls {
		orig := made.rewritten(call, calls)
		if orig == nil && len(masking) > 0 && bytes.Contains(call.Arguments, []byte(maskPlaceholder)) {
			stage, err := placeholderCall(call, masking)
			return s.refused(pl, stage, err)
		}
		if orig == nil {
			if err := s.admitCall(ctx, pl, offered, allowed, req.ToolChoice, call); err != nil {
				return err
			}
			continue
		}
		for _, o := range orig {
			if err := s.admitCall(ctx, pl, offered, allowed, req.ToolChoice, o); err != nil {
				return err
			}
		}
		msg := fmt.Sprintf("the model proposed a call of %s whose arguments this layer masks in the model's output: the client runs the calls relayed, and would run this one on the masked values", call.Name)
		if !slices.ContainsFunc(orig, func(o runtime.ToolUse) bool { return o.ID == call.ID && o.Name == call.Name }) {
			msg = fmt.Sprintf("this layer gave a call the model proposed another id or name (%s %q): the tool chain checks the calls as the model made them, and the client would run one it did not check", call.Name, call.ID)
		}
		err := &runtime.BlockedError{Layer: maskingLayer(ctx, pl, orig), Message: msg}
		return s.refused(pl, plan.StageChat, err)
	}
	if err := serialCalls(req, calls); err != nil {
		return s.refused(pl, plan.StageTool, err)
	}
	return nil
}

// tooManyCalls fails an answer of more tool calls than bound, the
// gateway's Options.MaxToolCalls (by default runtime.DefaultAgentMaxToolCalls,
// as many as an agent run, RunAgent, runs of one answer): a model in a
// loop, or following an injected instruction, would have the client run
// them all. The answer is the upstream's, unusable as it is: a failure of
// the upstream (502), not a refusal of the policy, which a client may
// retry.
func tooManyCalls(calls []runtime.ToolUse, bound int) error {
	if len(calls) <= bound {
		return nil
	}
	return &runtime.CallError{Kind: runtime.KindTransient, Message: fmt.Sprintf(
		"the upstream's answer is unusable: the model proposed %d tool calls in one answer, more than the %d an answer may make (an agent run runs none of them); ask again, or for fewer calls at once",
		len(calls), bound)}
}

// serialCalls refuses the calls of one answer when they are more than
// one and req allows one (parallel_tool_calls false, Anthropic's
// disable_parallel_tool_use true). The provider is asked for one call at
// most, but a model may still propose several; relaying the first alone
// would hand the client another answer than the model's, and relaying
// all would have a client that counted on one call at a time run them
// all (the same refund twice).
func serialCalls(req *runtime.ChatRequest, calls []runtime.ToolUse) error {
	if len(calls) < 2 || req.ParallelToolCalls == nil || *req.ParallelToolCalls {
		return nil
	}
	return &runtime.BlockedError{Layer: runtime.LayerTools, Message: fmt.Sprintf(
		"the model proposed %d tool calls in one answer, and the request allows one (parallel_tool_calls false, or disable_parallel_tool_use true)", len(calls))}
}

// admitCall decides one call a model proposed: it must pass the tool
// chain's checks that need no execution (runtime.Pipeline.AdmitTool); a
// refusal is counted. Arguments that are not JSON at all (cut) are the
// upstream's failure, not a refusal; other arguments that are not a JSON object are refused,
// and so are arguments that give a key twice (see repeatedKey), a custom
// tool's call whose arguments hold no text (see customFormat), a call of a
// tool the request offers whose kind (custom or function) is not the
// tool's (see callKind), and, once the chain admitted it, a call of a tool
// the request does not offer, or that its tool choice rules out: allowed
// names the tools a call may be of (runtime.OfferedTools of the request,
// whose tool choice is choice), none under tool_choice none, the one a
// tool choice forces.
func (s *Server) admitCall(ctx context.Context, pl *runtime.Pipeline, offered []runtime.ToolDef, allowed map[string]bool, choice string, call runtime.ToolUse) error {
	if err := callKind(offered, &call); err != nil {
		return s.refused(pl, plan.StageTool, err)
	}
	if err := repeatedKeyError(call.Arguments, "the model proposed a call of "+call.Name+" whose arguments", "the client's parser"); err != nil {
		return s.refused(pl, plan.StageTool, err)
	}
	req, err := call.Request()
	if _, cerr := call.CustomInput(); call.Custom && cerr != nil {
		// A layer rewrote a custom call's arguments into an object
		// that holds no text: the client would run other text than
		// the chain checked, or none.
		err = &runtime.BlockedError{Layer: runtime.LayerTools, Message: fmt.Sprintf("the call of the custom tool %s holds no text (its arguments are not {\"input\": TEXT})", call.Name)}
		return s.refused(pl, plan.StageTool, err)
	}
	if err != nil && !json.Valid(call.Arguments) {
		// Not the policy's refusal but a broken answer of the upstream
		// (its stream cut inside the arguments): a 502, as any failure
		// of the upstream, which a client may retry. The runtime fails
		// a model's cut call below the chat chain's layers, so that a
		// retry or a fallback tries again (Pipeline's chat terminal);
		// this is for what escapes it (a layer's rewrite).
		what := "not complete JSON"
		if !runtime.CutJSON(call.Arguments) {
			what = "not JSON" // a syntax error, not a cut
		}
		return &runtime.CallError{Kind: runtime.KindTransient, Message: fmt.Sprintf(
			"the upstream's answer is broken: the model's call of %s holds arguments that are %s", call.Name, what)}
	}
	if err == nil {
		err = pl.AdmitTool(ctx, req)
	} else {
		err = &runtime.BlockedError{Layer: runtime.LayerTools, Message: fmt.Sprintf("the model proposed a call of %s whose arguments are not a JSON object", call.Name)}
	}
	if err == nil && !slices.ContainsFunc(offered, func(t runtime.ToolDef) bool { return t.Name == call.Name }) {
		// A tool the policy lets run, for another client: this one
		// may run what it is handed by name, though it never
		// offered it.
		err = &runtime.BlockedError{Layer: runtime.LayerTools, Message: fmt.Sprintf("the model proposed a call of %s, which the request does not offer", call.Name)}
	} else if err == nil && allowed != nil && !allowed[call.Name] {
		msg := fmt.Sprintf("the model proposed a call of %s, and the request's tool_choice forces %s", call.Name, choice)
		if choice == "none" {
			msg = fmt.Sprintf("the model proposed a call of %s, and the request's tool_choice none allows no tool call", call.Name)
		}
		err = &runtime.BlockedError{Layer: runtime.LayerTools, Message: msg}
	}
	if err != nil {
		return s.refused(pl, plan.StageTool, err)
	}
	return nil
}

// refused counts err, a refusal by a layer of stage's chain of pl, and
// returns it placed (placed).
func (s *Server) refused(pl *runtime.Pipeline, stage plan.Stage, err error) error {
	s.observeRefusal(stage, err)
	return placed(pl, stage, err)
}

// placed returns err, when it is a refusal by a layer of stage's chain of
// pl whose name another layer of the policy has too (a pii layer in the
// chat chain and one in the tool chain), with the layer's place:
// "blocked by pii (chains.tool[0]): ...". The chain alone is named when it
// holds several layers of that name. Otherwise it returns err. The
// layer's position in the policy's files is not given: the message is the
// client's, and the place names the layer in the policy all the same.
func placed(pl *runtime.Pipeline, stage plan.Stage, err error) error {
	b, ok := err.(*runtime.BlockedError)
	if !ok || b.At != "" || pl == nil || pl.Plan() == nil {
		return err
	}
	p := pl.Plan()
	named, inStage, at := 0, 0, ""
	for _, st := range plan.Stages {
		for i, l := range p.Chains.Of(st) {
			if layerRef(l) != b.Layer {
				continue
			}
			named++
			if st == stage {
				inStage++
				at = fmt.Sprintf("chains.%s[%d]", st, i)
			}
		}
	}
	switch {
	case named < 2 || inStage == 0:
		return err
	case inStage > 1:
		at = "chains." + stage
	}
	cp := *b
	cp.At = at
	return &cp
}

// madeCallsKey is the context key of a chat call's madeCalls.
type madeCallsKey struct{}

// madeCalls records the tool calls the model clients of one chat call
// answered with (servedModel.Stream), as the model made them, before any
// layer of the chat chain read them. A hedge's racers record at once.
type madeCalls struct {
	mu    sync.Mutex
	calls []runtime.ToolUse
}

// add records the calls of an answer.
func (m *madeCalls) add(calls []runtime.ToolUse) {
	m.mu.Lock()
	m.calls = append(m.calls, calls...)
	m.mu.Unlock()
}

// maskPlaceholder begins the text that the builtins masking the model's
// output (pii, redact) put in the place of what they mask.
const maskPlaceholder = "[REDACTED:"

// rewritten returns the calls the model made that a layer of the chat
// chain rewrote into call, one of the calls released: those with call's
// id and name when none has call's arguments (nil when one has them).
// When none has call's id and name, a layer gave it another (the calls
// the model made that no call released has the id and name of), or a
// cache answered (the model made no call: nil). Nil when m is nil: no
// layer of the chat chain rewrites anything.
func (m *madeCalls) rewritten(call runtime.ToolUse, released []runtime.ToolUse) []runtime.ToolUse {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	same := func(a, b runtime.ToolUse) bool { return a.ID == b.ID && a.Name == b.Name }
	var orig []runtime.ToolUse
	for _, c := range m.calls {
		if !same(c, call) {
			continue
		}
		if c.Custom == call.Custom && bytes.Equal(c.Arguments, call.Arguments) {
			return nil
		}
		orig = append(orig, c)
	}
	if orig != nil {
		return orig
	}
	for _, c := range m.calls {
		if !slices.ContainsFunc(released, func(r runtime.ToolUse) bool { return same(r, c) }) {
			orig = append(orig, c)
		}
	}
	return orig
}

// maskingLayers names the layers of pl's chat chain that mask what passes
// through them, the messages and the model's output, with a placeholder
// (maskPlaceholder): pii with action redact, and redact.
func maskingLayers(pl *runtime.Pipeline) []string {
	var out []string
	for _, l := range pl.Layers(plan.StageChat) {
		switch mw := l.Middleware.(type) {
		case *pii.Middleware:
			if mw.Action == pii.ActionRedact {
				out = append(out, l.Name)
			}
		case *redact.Middleware:
			out = append(out, l.Name)
		}
	}
	return out
}

// placeholderCall returns the stage counted and the refusal of call,
// which no layer rewrote and whose arguments hold a mask's placeholder,
// while the masking layers are in the chat chain: the model wrote the
// placeholder (it read what a layer masked) or a cache replayed a call a
// layer masked, and either way the client would run the tool on a masked
// value. The layer named is the masking layer when the chain has one,
// else tools: which of several wrote the placeholder cannot be told.
func placeholderCall(call runtime.ToolUse, masking []string) (plan.Stage, error) {
	layer, stage := runtime.LayerTools, plan.StageTool
	if len(masking) == 1 {
		layer, stage = masking[0], plan.StageChat
	}
	return stage, &runtime.BlockedError{Layer: layer, Message: fmt.Sprintf(
		"the call of %s holds a mask's placeholder (%s...) in its arguments (the model or a cache wrote it): the client would run it on a masked value", call.Name, maskPlaceholder)}
}

// maskingLayer names the layer of pl's chat chain that rewrote the
// arguments of calls, calls the model made: the innermost builtin layer
// that rewrites messages whose handler, run alone on an answer of calls,
// releases other calls (pii with action redact, redact: such a layer
// transforms what passes through it and acts on nothing else); else the
// innermost custom middleware, which is not run outside the chain, or the
// innermost builtin layer that rewrites messages.
func maskingLayer(ctx context.Context, pl *runtime.Pipeline, calls []runtime.ToolUse) string {
	layers := pl.Layers(plan.StageChat)
	custom, builtin := "", ""
	for i := len(layers) - 1; i >= 0; i-- {
		l := layers[i]
		m, ok := runtime.LookupModule(l.Use)
		switch {
		case !ok || !m.Builtin:
			if custom == "" {
				custom = l.Name
			}
		case m.HasTrait(runtime.TraitRewritesMessages):
			if builtin == "" {
				builtin = l.Name
			}
			if w, chat := l.Middleware.(runtime.ChatWrapper); chat && rewritesCalls(ctx, w, calls) {
				return l.Name
			}
		}
	}
	if custom != "" {
		return custom
	}
	return builtin
}

// rewritesCalls reports whether w's handler, given an answer of calls
// alone, releases other calls.
func rewritesCalls(ctx context.Context, w runtime.ChatWrapper, calls []runtime.ToolUse) bool {
	h := w.WrapChat(func(_ context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		d := runtime.Delta{FinishReason: runtime.FinishToolCalls}
		for i, tc := range calls {
			f := runtime.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)}
			if in, err := tc.CustomInput(); tc.Custom && err == nil {
				f.Arguments, f.Custom = in, true
			}
			d.ToolCalls = append(d.ToolCalls, f)
		}
		c.Emit(yield, d)
		return nil
	})
	var out runtime.ToolCallBuilder
	if err := h(ctx, &runtime.ChatCall{}, func(d runtime.Delta) bool { out.Add(&d); return true }); err != nil {
		return false
	}
	return !slices.EqualFunc(out.ToolCalls(), calls, func(a, b runtime.ToolUse) bool {
		return a.ID == b.ID && a.Name == b.Name && bytes.Equal(a.Arguments, b.Arguments)
	})
}

// rewritesMessages reports whether a layer of pl's chat chain may change
// the messages of a call (compaction may drop some, redact rewrite them):
// a builtin that rewrites messages, or a custom middleware.
func rewritesMessages(pl *runtime.Pipeline) bool {
	for _, l := range pl.Layers(plan.StageChat) {
		if m, ok := runtime.LookupModule(l.Use); !ok || !m.Builtin || m.HasTrait(runtime.TraitRewritesMessages) {
			return true
		}
	}
	return false
}

// repeatedKeyError returns the refusal, by layer tools, of arguments that
// give a key twice (repeatedKey), nil when they do not: what names the
// arguments, reader what runs the call on them.
func repeatedKeyError(args json.RawMessage, what, reader string) error {
	key, ok := jsonwalk.RepeatedKey(args)
	if !ok {
		return nil
	}
	return &runtime.BlockedError{Layer: runtime.LayerTools, Message: fmt.Sprintf(
		"%s give the key %s twice: the tool chain reads the last, and %s may run the call on the first", what, key, reader)}
}

// heldStream passes a stream's deltas to its writer until the first
// tool-call fragment; from then on it holds them (text included, to keep
// their order) until release, so that no fragment of a call reaches the
// client before the whole call is admitted. The fragments are held as
// they came, and nothing else: the chat chain's terminal holds a call's
// fragments until the model's answer ends and hands up each call whole,
// in one fragment (runtime.HoldToolCalls), which is held here as it is,
// not copied again; the calls are assembled once the stream ended
// (toolCalls).
type heldStream struct {
	chatStream
	held []runtime.Delta
	// withholdCache withholds the prompt-cache figures of the usage the
	// deltas carry (withholdCacheUsage).
	withholdCache bool
}

// hold is the stream's yield.
func (h *heldStream) hold(d runtime.Delta) bool {
	if h.withholdCache {
		d.Usage = withholdCacheUsage(d.Usage)
	}
	if len(h.held) == 0 && len(d.ToolCalls) == 0 {
		return h.delta(d)
	}
	// What the writer holds for this delta would wait for the release.
	if len(h.held) == 0 && !h.flushHeld() {
		return false
	}
	d.ToolCalls = slices.Clone(d.ToolCalls)
	h.held = append(h.held, d)
	return true
}

// toolCalls returns the calls of the fragments held, ordered by index
// (runtime.ToolCallBuilder.ToolCalls).
func (h *heldStream) toolCalls() []runtime.ToolUse {
	var b runtime.ToolCallBuilder
	for i := range h.held {
		b.Add(&h.held[i])
	}
	return b.ToolCalls()
}

// release writes the deltas held, each tool call whole, as it was
// admitted, in the place of its first fragment (its later fragments are
// left out), indexed by its place among the calls relayed; calls are the
// calls of the fragments held (toolCalls), and a call drop marks is left
// out (repeatedCalls). The fragments as they came are not relayed: a
// client assembles them by its own rules (OpenAI's SDKs join the
// fragments of a name, an Anthropic client takes the first; an OpenAI
// client makes empty calls of the indexes an upstream skipped), which
// could make calls other than the ones admitted. A call that came in one
// fragment holding its id, its name and its arguments is that fragment,
// relayed as it came but for its index.
func (h *heldStream) release(calls []runtime.ToolUse, drop []bool) {
	wholeCalls(h.held, calls, drop)
	for _, d := range h.held {
		if d.Text == "" && d.ToolCalls == nil && d.Thinking == nil {
			continue
		}
		if !h.delta(d) {
			break
		}
	}
	h.held = nil
}

// wholeCalls rewrites held, deltas whose tool-call fragments were held
// back, so that each call of calls goes whole (one fragment) in the delta
// of its first fragment, indexed by its place among the calls drop does
// not mark, its later fragments left out; a call drop marks is left out.
// calls[k] is the call of the k-th smallest index among the fragments
// (runtime.ToolCallBuilder.ToolCalls). A call whose index has one fragment
// that holds its id, its name and arguments (not a custom call's text,
// nor blank ones, which the builder makes {}) keeps that fragment, its
// arguments not copied. Each delta keeps its slice, rewritten in place.
func wholeCalls(held []runtime.Delta, calls []runtime.ToolUse, drop []bool) {
	var indexes []int
	for _, d := range held {
		for _, f := range d.ToolCalls {
			indexes = append(indexes, f.Index)
		}
	}
	slices.Sort(indexes)
	// once[k] reports that the k-th index has one fragment; at[k] is the
	// place of its call among those relayed.
	var once []bool
	for i := 0; i < len(indexes); {
		n := 1
		for i+n < len(indexes) && indexes[i+n] == indexes[i] {
			n++
		}
		once = append(once, n == 1)
		i += n
	}
	indexes = slices.Compact(indexes)
	at := make([]int, len(indexes))
	for k, n := 0, 0; k < len(indexes); k++ {
		at[k] = n
		if k < len(calls) && (drop == nil || !drop[k]) {
			n++
		}
	}
	placed := make([]bool, len(indexes))
	for i := range held {
		fragments := held[i].ToolCalls
		if fragments == nil {
			continue
		}
		whole := fragments[:0]
		for _, f := range fragments {
			k, _ := slices.BinarySearch(indexes, f.Index)
			if placed[k] {
				continue
			}
			placed[k] = true
			if k >= len(calls) || drop != nil && drop[k] {
				continue
			}
			c := &calls[k]
			if !once[k] || f.Custom || c.Custom || f.ID != c.ID || f.Name != c.Name || f.Arguments != string(c.Arguments) {
				f = runtime.ToolCallDeltas(calls[k : k+1])[0]
			}
			f.Index = at[k]
			whole = append(whole, f)
		}
		if len(whole) == 0 {
			whole = nil
		}
		held[i].ToolCalls = whole
	}
}

// repeatedCalls marks the calls of an answer that repeat an earlier call
// of it to a side-effecting tool, the same tool with the same arguments
// (runtime.Pipeline.RepeatedCalls), nil when none does: they are left out
// of the answer relayed, as RunAgent does not run them, and each is logged
// and counted (the tool's name, or "undeclared" for a tool the policy does
// not declare under settings.allow_undeclared_tools, which any request may
// name).
//
// A repeat that a thinking block of the answer follows cannot be left out:
// the block's signature covers the blocks before it, so the provider
// would refuse the turn the client sends back without the repeat, and
// relayed the client would run it twice. The answer, order its blocks in
// their order (orderOfBlocks, orderOfDeltas), then fails as the
// upstream's unusable answer, a 502 the client may retry, and no repeat
// is counted.
func (s *Server) repeatedCalls(x *exchange, calls []runtime.ToolUse, order []int) ([]bool, error) {
	rep := x.g.pl.RepeatedCalls(calls)
	if rep == nil {
		return nil, nil
	}
	drop := make([]bool, len(calls))
	for i, j := range rep {
		drop[i] = j >= 0
	}
	if k := thinkingAfter(order, drop); k >= 0 {
		return nil, &runtime.CallError{Kind: runtime.KindTransient, Message: fmt.Sprintf(
			"the upstream's answer is unusable: the model repeated its call of %s (%s repeats %s) before a thinking block, whose signature covers the calls before it: left out of the answer, the provider would refuse the turn sent back; relayed, the client would run the call twice; ask again",
			calls[k].Name, calls[k].ID, calls[rep[k]].ID)}
	}
	p := x.g.pl.Plan()
	for i, j := range rep {
		if j < 0 {
			continue
		}
		tool := calls[i].Name
		if _, declared := p.Tools[tool]; !declared && p.Settings.AllowUndeclaredTools {
			tool = "undeclared"
		}
		s.metrics.repeated.WithLabelValues(tool).Inc()
		s.log.Warn("repeated tool call left out of the answer relayed: it repeats an earlier call of the answer to a side-effecting tool, the same tool and arguments, which the client runs once",
			"tool", calls[i].Name, "call", calls[i].ID, "repeats", calls[j].ID, "tenant", x.caller.tenant, "run", x.run)
	}
	return drop, nil
}

// orderOfBlocks is the order of a whole answer's blocks as thinkingAfter
// reads it: -1 for a thinking block, a tool call's index for its block,
// text left out.
func orderOfBlocks(blocks []runtime.OrderedBlock) []int {
	var order []int
	for _, b := range blocks {
		switch b.Kind {
		case runtime.BlockThinking:
			order = append(order, -1)
		case runtime.BlockToolCall:
			order = append(order, b.Index)
		}
	}
	return order
}

// orderOfDeltas is the order of the deltas of a stream held back as
// thinkingAfter reads it: -1 for a thinking fragment, a tool call's index
// for each of its fragments.
func orderOfDeltas(held []runtime.Delta) []int {
	var order []int
	for _, d := range held {
		if d.Thinking != nil {
			order = append(order, -1)
		}
		for _, f := range d.ToolCalls {
			order = append(order, f.Index)
		}
	}
	return order
}

// thinkingAfter returns the place among the calls (the k-th smallest
// index of order) of the first call drop marks that a thinking block
// follows in order, or -1.
func thinkingAfter(order []int, drop []bool) int {
	var indexes []int
	for _, i := range order {
		if i >= 0 {
			indexes = append(indexes, i)
		}
	}
	slices.Sort(indexes)
	indexes = slices.Compact(indexes)
	first := -1
	for _, i := range order {
		if i < 0 {
			if first >= 0 {
				return first
			}
			continue
		}
		if k, _ := slices.BinarySearch(indexes, i); first < 0 && k < len(drop) && drop[k] {
			first = k
		}
	}
	return -1
}

// dropCalls leaves the calls drop marks out of resp's, and their blocks out
// of o, the order of resp's blocks (blocksOf reads the k-th smallest index
// of a tool call's block as the k-th call).
func dropCalls(resp *runtime.ChatResponse, o *runtime.BlockOrder, drop []bool) {
	if drop == nil {
		return
	}
	var indexes []int
	for _, b := range o.Blocks {
		if b.Kind == runtime.BlockToolCall {
			indexes = append(indexes, b.Index)
		}
	}
	slices.Sort(indexes)
	indexes = slices.Compact(indexes)
	o.Blocks = slices.DeleteFunc(o.Blocks, func(b runtime.OrderedBlock) bool {
		k, _ := slices.BinarySearch(indexes, b.Index)
		return b.Kind == runtime.BlockToolCall && k < len(drop) && drop[k]
	})
	kept := make([]runtime.ToolUse, 0, len(resp.ToolCalls))
	for k, c := range resp.ToolCalls {
		if k >= len(drop) || !drop[k] {
			kept = append(kept, c)
		}
	}
	resp.ToolCalls = kept
}

// observeChat counts a chat call's retries, fallback, refusal, tokens and
// spend.
func (s *Server) observeChat(x *exchange, p *chatParams, resp *runtime.ChatResponse, err error) {
	m := s.metrics
	if resp.Attempts > 1 {
		m.retries.WithLabelValues(plan.StageChat).Add(float64(resp.Attempts - 1))
	}
	if resp.Model != "" && resp.Model != p.req.Model {
		m.fallbacks.WithLabelValues(p.req.Model, resp.Model).Inc()
	}
	if err != nil {
		s.observeRefusal(plan.StageChat, err)
	}
	tenant := x.caller.tenant
	// The spend is what each model call made for the request billed, at
	// its own model's prices: a fallback's failed attempts and a hedge's
	// cancelled racers cost money too, and not at the served model's, and
	// so do the calls layers made of their own (a judge's verdicts, a
	// summary), which a meter charges, a cached answer's included. A call
	// whose usage a meter found absurd counts what the meter charged
	// (runtime.Charge.Metered), as its tokens do; absurd usage no meter
	// settled counts as on_error "open" charges it (meter.Capped), not
	// raw: 2^63-1 tokens would add trillions of dollars to a counter that
	// never comes down.
	spend := func(charges []runtime.Charge) {
		for _, ch := range charges {
			usd := ch.USD
			if !ch.Metered {
				usd = meter.Cost(x.g.plan.Models[ch.Model], meter.Capped(ch.Usage))
			}
			if usd > 0 {
				m.spendUSD.WithLabelValues(tenant, ch.Model).Add(usd)
			}
		}
	}
	spend(resp.OwnCharges)
	if resp.Cached {
		return
	}
	model := resp.Model
	if model == "" {
		model = p.req.Model
	}
	charges := resp.Charges
	if charges == nil {
		charges = []runtime.Charge{{Model: model, Usage: resp.Usage}}
	}
	spend(charges)
	// The tokens are those of the response served: a call that failed or
	// was given up before its first delta (an attempt timed out, a client
	// gone) served none, whatever its prompt cost.
	if resp.Usage.IsZero() || err != nil && resp.Deltas == 0 {
		return
	}
	served := meter.Capped(resp.Usage)
	m.tokens.WithLabelValues(tenant, model, "input").Add(float64(served.InputTokens))
	m.tokens.WithLabelValues(tenant, model, "output").Add(float64(served.OutputTokens))
}

// resolveModel returns the policy's name of the model a request names: a
// model of the policy by its name, or by its provider's model id when one
// model alone has it.
func (g *generation) resolveModel(name string) (string, bool) {
	if _, ok := g.plan.Models[name]; ok {
		return name, true
	}
	if n, ok := g.modelIDs[name]; ok && n != "" {
		return n, true
	}
	return "", false
}

// modelIDs maps the provider model ids of a plan's models to their names
// ("" for an id two models share).
func modelIDs(p *plan.Plan) map[string]string {
	ids := map[string]string{}
	for name, m := range p.Models {
		if m.ID == "" {
			continue
		}
		if _, dup := ids[m.ID]; dup {
			ids[m.ID] = ""
			continue
		}
		ids[m.ID] = name
	}
	return ids
}

// servedSlot holds the name of the model last called for a request, so a
// stream can name the model that produces its deltas (a fallback switches
// it before the first delta, since retry and fallback never switch after;
// a hedge reports only its winner's: runtime.HeldNotes). The model
// clients report to it through runtime.ReportServedModel.
type servedSlot struct {
	name atomic.Pointer[string]
	// id is the upstream's id of the request last sent, returned to the
	// client in the header idHeader.
	id       atomic.Pointer[string]
	idHeader string
	// fingerprint is the system fingerprint of the answer of the model
	// last called, when its provider gave one (systemFingerprint).
	fingerprint atomic.Pointer[string]
}

// NoteUpstreamRequestID implements runtime.UpstreamRequestIDs. An id that
// is not of a provider's form (requestIDForm) is not relayed, nor is the
// id an earlier upstream of the request gave.
func (s *servedSlot) NoteUpstreamRequestID(id string) {
	if !requestIDForm(id) {
		id = ""
	}
	s.id.Store(&id)
}

// maxRequestID is the longest upstream request id the gateway relays: a
// provider's is a few dozen bytes (req_011CSHoEeqs5C35K2UUqR7Fy), and an
// upstream's response headers are read up to 10 MiB.
const maxRequestID = 128

// requestIDForm reports whether id is of a provider's request id's form:
// at most maxRequestID bytes of visible ASCII.
func requestIDForm(id string) bool {
	return len(id) <= maxRequestID && invisibleByte(id) < 0
}

// invisibleByte returns the index of the first byte of s that is not
// visible ASCII ('!' to '~': a space, a control or a byte of a character
// outside ASCII), or -1: the form of an id a header carries (a request id,
// a run id).
func invisibleByte(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return i
		}
	}
	return -1
}

// NoteServedModel implements runtime.ServedModels.
func (s *servedSlot) NoteServedModel(name string) {
	s.name.Store(&name)
	s.fingerprint.Store(nil) // an earlier model's is not this one's
}

// setHeader sets the request id header of a response, when the upstream
// gave an id.
func (s *servedSlot) setHeader(h http.Header) {
	if id := s.id.Load(); id != nil && *id != "" && s.idHeader != "" {
		h[s.idHeader] = []string{*id}
	}
}

// get returns the model last called, or def.
func (s *servedSlot) get(def string) string {
	if n := s.name.Load(); n != nil {
		return *n
	}
	return def
}

// servedModel is a model client that notes its name in the request's
// servedSlot before it streams.
type servedModel struct {
	name   string
	client runtime.ModelClient
	// wire is the provider of a client built from the model's provider
	// ("openai", "anthropic"); "" for a client the host passed.
	wire string
	// bound is the max_tokens the plan declares for the model (0: none).
	bound int
}

// DefaultMaxTokens implements runtime.OutputBounder: the bound the client
// sends with a request that sets none (a Claude model's 4096), else the
// plan's, which Stream sends in its place (sendBound). Without it the
// wrapped client's bound was hidden: a cut at the output limit was said
// to be the provider's default, and a meter refusing crossings estimated
// no output for such a request.
func (m *servedModel) DefaultMaxTokens() int {
	if b, ok := m.client.(runtime.OutputBounder); ok {
		return b.DefaultMaxTokens()
	}
	return m.bound
}

// sendBound returns req, or for a request that sets no max_tokens to a
// client that bounds no output of its own (one the host passed, not a
// runtime.OutputBounder) a copy of it with the plan's bound: the bound
// DefaultMaxTokens reports, which a cut at the output limit names and a
// meter estimates, is the one the model is asked with.
func (m *servedModel) sendBound(req *runtime.ChatRequest) *runtime.ChatRequest {
	if req.MaxTokens > 0 || m.bound <= 0 {
		return req
	}
	if _, ok := m.client.(runtime.OutputBounder); ok {
		return req
	}
	bounded := *req
	bounded.MaxTokens = m.bound
	return &bounded
}

// clientWireKey is the context key of the API a chat route's client speaks
// (chatAPI.wire).
type clientWireKey struct{}

// Stream implements runtime.ModelClient. A conversation ending with an
// assistant message, which the client's API and the model's read
// otherwise, fails as a permanent 400 (behind fallback, the next model is
// tried): an Anthropic model continues the message (a prefill, the answer
// being the rest of it), an OpenAI model answers it with a message of its
// own.
func (m *servedModel) Stream(ctx context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	runtime.ReportServedModel(ctx, m.name)
	if wire, _ := ctx.Value(clientWireKey{}).(string); wire != "" && m.wire != "" && wire != m.wire && endsWithAssistantText(req.Messages) {
		read := "the client's API answers with a message of its own and an Anthropic model would continue (a prefill)"
		if wire == "anthropic" {
			read = "the client's API continues (a prefill) and an OpenAI model would answer with a message of its own"
		}
		return &runtime.CallError{Kind: runtime.KindPermanent, Status: http.StatusBadRequest, Message: "model " + m.name,
			Err: runtime.ProviderRefused(fmt.Errorf("the conversation ends with an assistant message, which %s; end it with a user message, or call a model of the client's API", read))}
	}
	req = m.sendBound(req)
	made, _ := ctx.Value(madeCallsKey{}).(*madeCalls)
	if made == nil {
		return m.client.Stream(ctx, req, yield)
	}
	var calls runtime.ToolCallBuilder
	err := m.client.Stream(ctx, req, func(d runtime.Delta) bool {
		calls.Add(&d)
		return yield(d)
	})
	if err == nil {
		made.add(calls.ToolCalls())
	}
	return err
}

// endsWithAssistantText reports whether the last message of msgs, system
// messages aside (a provider may move them), is an assistant message
// without tool calls.
func endsWithAssistantText(msgs []runtime.Message) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		switch msgs[i].Role {
		case "system", "developer":
			continue
		case "assistant":
			return len(msgs[i].ToolCalls) == 0
		}
		return false
	}
	return false
}

// responseID returns a fresh response id with prefix.
func responseID(prefix string) string { return prefix + rand.Text() }

// sse writes server-sent events. The events of a delta the upstream's next
// one follows at once (runtime.Delta.More) wait in the buffer for it, up to
// heldLimit bytes; the others are written and flushed at once, so a burst
// of events the upstream sent together goes out in one write and a delta
// that came alone is not kept waiting. The headers go out with the first
// event.
type sse struct {
	x      *exchange
	buf    []byte
	begun  bool
	gone   bool
	served *servedSlot
}

// flushError is what net/http's response writer implements to report a
// failed flush.
type flushError interface{ FlushError() error }

// begin sends the status and the event-stream headers.
func (e *sse) begin() {
	if e.begun {
		return
	}
	e.begun = true
	h := e.x.Header()
	// The values are shared by the streams: net/http only reads them, and
	// Set and Add replace or copy them.
	h["Content-Type"], h["Cache-Control"], h["X-Accel-Buffering"] = sseContentType, sseNoCache, sseNoBuffering
	if e.served != nil {
		e.served.setHeader(h)
	}
	e.x.WriteHeader(http.StatusOK)
}

// The event-stream headers' values.
var (
	sseContentType = []string{"text/event-stream"}
	sseNoCache     = []string{"no-cache"}
	sseNoBuffering = []string{"no"}
)

// heldLimit is the most bytes of events sse holds for the next delta.
const heldLimit = 16 << 10

// sseBuffers recycles the buffers of the streams' events, which grow to
// hold the events of the deltas a burst brings.
var sseBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// newSSE returns the writer of x's events.
func newSSE(x *exchange, served *servedSlot) sse {
	return sse{x: x, buf: (*sseBuffers.Get().(*[]byte))[:0], served: served}
}

// free returns the buffer to sseBuffers, unless it grew past heldLimit's
// reach (a single event that large).
func (e *sse) free() {
	if b := e.buf[:0]; cap(b) <= 2*heldLimit {
		sseBuffers.Put(&b)
	}
	e.buf = nil
}

// send ends a delta's events: it flushes them, unless more follows at once
// and the buffer is under heldLimit. False when the client is gone.
func (e *sse) send(more bool) bool {
	if more && len(e.buf) < heldLimit {
		return !e.gone
	}
	return e.flush()
}

// flush writes and flushes the buffered events; false when the client is
// gone.
func (e *sse) flush() bool {
	if e.gone {
		e.buf = e.buf[:0]
		return false
	}
	e.begin()
	_, err := e.x.Write(e.buf)
	e.buf = e.buf[:0]
	if err == nil {
		if f, ok := e.x.ResponseWriter.(flushError); ok {
			err = f.FlushError()
		} else {
			err = http.NewResponseController(e.x.ResponseWriter).Flush()
		}
	}
	if err != nil {
		e.gone = true
		return false
	}
	return true
}

func (e *sse) started() bool { return e.begun || len(e.buf) > 0 }

func (e *sse) flushHeld() bool {
	if len(e.buf) == 0 {
		return !e.gone
	}
	return e.flush()
}

// appendInt appends n in decimal.
func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// unixNow is the created time of a response.
func unixNow() int64 { return time.Now().Unix() }

// PoolUpstreamConnections makes http.DefaultTransport keep up to n idle
// connections per host (net/http keeps 2). The provider clients clone
// http.DefaultTransport when they are built, so a gateway that calls this
// before New reuses its connections to a provider under concurrent load
// instead of opening (and handshaking) a new one for most calls. It
// changes a process-wide default: `agentc serve` calls it at start.
func PoolUpstreamConnections(n int) {
	if t, ok := http.DefaultTransport.(*http.Transport); ok && n > t.MaxIdleConnsPerHost {
		t.MaxIdleConnsPerHost = n
		t.MaxIdleConns = max(t.MaxIdleConns, 4*n)
	}
}

// noteDocuments records field when m holds a document no layer reads.
func (p *chatParams) noteDocuments(m *runtime.Message, field string) {
	for i := range m.Parts {
		if m.Parts[i].Type == runtime.PartDocument {
			p.documents = append(p.documents, field)
			return
		}
	}
}

// unreadDocuments refuses a request holding a document no layer reads (a
// PDF) when the chat chain has a layer that reads what the model is sent
// (countChecks: security, pii, redact, content_filter, guard...): the
// layer would pass what it never read.
func unreadDocuments(pl *runtime.Pipeline, p *chatParams) error {
	if len(p.documents) == 0 {
		return nil
	}
	layers := countChecks(pl)
	if len(layers) == 0 {
		return nil
	}
	return fmt.Errorf("%s: a PDF document is not served by this policy: its chat layers %s read the text of what the model is sent, and cannot read a PDF's (send the document's text as a text document, or a text part)",
		p.documents[0], strings.Join(layers, ", "))
}
