package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// model returns the client named name. A linear scan beats hashing for the
// few models of a pipeline.
func (pl *Pipeline) model(name string) ModelClient {
	if pl.modelList != nil {
		for i := range pl.modelList {
			if pl.modelList[i].name == name {
				return pl.modelList[i].client
			}
		}
		return nil
	}
	return pl.models[name]
}

// unknownModel says that no client serves the model name: for a model the
// plan declares, where its client is given; else the nearest name of those
// that have one and the list of them.
func (pl *Pipeline) unknownModel(name string) string {
	if _, declared := pl.plan.Models[name]; declared {
		return fmt.Sprintf("model %q is not registered: the plan declares it, but no client serves it (give its client in runtime.Deps.Models, or declare its provider in the policy)", name)
	}
	names := slices.Sorted(maps.Keys(pl.models))
	msg := fmt.Sprintf("model %q is not registered", name)
	if best := textdist.Closest(name, names); best != "" {
		msg += fmt.Sprintf("; did you mean %q?", best)
	}
	if len(names) > 0 {
		msg += " (the models: " + strings.Join(names, ", ") + ")"
	}
	return msg
}

// toolEntry returns the entry of the tool named name, scanning a short list
// when the pipeline has few tools.
func (pl *Pipeline) toolEntry(name string) *toolEntry {
	if pl.toolList != nil {
		for _, e := range pl.toolList {
			if e.info.Name == name {
				return e
			}
		}
		return nil
	}
	return pl.tools[name]
}

// chatTerminal calls the model named by the request, counting what
// arrives. When the request offers tools, the model's calls are held until
// its stream ends (HoldToolCalls) and go up the chain whole, each one
// fragment, once every call's arguments are complete (wholeCalls): a call
// the upstream cut fails the model call before any of it is delivered, so
// that a retry or a fallback above can still try again.
func (pl *Pipeline) chatTerminal(ctx context.Context, c *ChatCall, yield func(Delta) bool) error {
	if len(c.Request.Tools) == 0 {
		return pl.callModel(ctx, c, yield)
	}
	return HoldToolCalls(ctx, c, pl.callModel, yield, c.wholeCalls)
}

// wholeCalls returns calls, the calls of c's answer, unless one was cut:
// its arguments end inside a JSON value (a prefix of JSON that the end of
// the text leaves unfinished, see CutJSON), or they are not JSON and the
// answer ended without a finish reason (its stream or its body ended
// early). A cut by the upstream is its transient failure, which a retry
// tries again and a fallback moves on from; a cut at the model's token
// limit (finish reason length) cuts it again on any model asked with it:
// a permanent failure of the request (status 400), which names the limit
// to raise. Other arguments that are not JSON (single quotes, a brace too
// many, two objects run together) are the model's mistake, not a cut: the
// calls go up the chain, where the tool chain refuses the call and an
// agent's model, told so, repairs it; so do arguments that are JSON but not
// an object. A custom tool's text is whole as it came.
func (c *ChatCall) wholeCalls(calls []ToolUse) ([]ToolUse, error) {
	for _, call := range calls {
		if call.Custom || json.Valid(call.Arguments) || (!CutJSON(call.Arguments) && c.FinishReason != "") {
			continue
		}
		if c.FinishReason == FinishLength {
			return nil, &CallError{Kind: KindPermanent, Status: http.StatusBadRequest, Message: fmt.Sprintf(
				"model %s: the model reached its output limit (finish reason length) inside the arguments of its call of %s, which are not complete JSON: raise max_tokens (%s)",
				c.Request.Model, call.Name, c.boundSent())}
		}
		return nil, &CallError{Kind: KindTransient, Message: fmt.Sprintf(
			"model %s: the upstream's answer is broken: the model's call of %s holds arguments that are not complete JSON (the answer was cut inside them)",
			c.Request.Model, call.Name)}
	}
	return calls, nil
}

// boundSent says which output bound the model reached: the request's
// max_tokens (and what the client asked, when the policy capped it), or,
// for a request that sets none, the bound the model's client sent in its
// place (OutputBounder: a Claude model's 4096), else the provider's own.
func (c *ChatCall) boundSent() string {
	switch {
	case c.Request.MaxTokens > 0 && c.askedMaxTokens <= 0:
		return fmt.Sprintf("the request sets none, and the policy sets %d", c.Request.MaxTokens)
	case c.Request.MaxTokens > 0 && c.askedMaxTokens != c.Request.MaxTokens:
		return fmt.Sprintf("the request asks for %d, which the policy caps to %d", c.askedMaxTokens, c.Request.MaxTokens)
	case c.Request.MaxTokens > 0:
		return fmt.Sprintf("the request asks for %d", c.Request.MaxTokens)
	}
	if c.tok != nil {
		if pl := c.tok.pl.Load(); pl != nil {
			if b, ok := pl.model(c.Request.Model).(OutputBounder); ok && b.DefaultMaxTokens() > 0 {
				return fmt.Sprintf("the request sets none, and the model's client sent its default, %d", b.DefaultMaxTokens())
			}
		}
	}
	return "the request sets none: the provider's default bounds the answer"
}

// CutJSON reports whether args, which are not valid JSON, are a prefix of
// JSON cut inside its value: read as a stream, they end before the value
// does, with no syntax error before the end.
func CutJSON(args []byte) bool {
	var v json.RawMessage
	err := json.NewDecoder(bytes.NewReader(args)).Decode(&v)
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// callModel calls the model named by the request, counting what arrives.
func (pl *Pipeline) callModel(ctx context.Context, c *ChatCall, yield func(Delta) bool) error {
	client := pl.model(c.Request.Model)
	if client == nil {
		return NotRun(&CallError{Kind: KindPermanent, Message: pl.unknownModel(c.Request.Model)})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c.Meta.modelCall()
	c.down = yield
	// The finish reason is this model call's: one an earlier attempt held
	// (with a call it cut) is not this answer's.
	c.FinishReason, c.StopSequence = "", ""
	before := c.Deltas
	beforeUsage := c.Usage
	beforeQuarters := c.quarters
	if c.tok == nil {
		c.tok = &emitToken{}
	}
	if c.own {
		ctx = ownCallContext(ctx)
	}
	err := client.Stream(ctx, &c.Request, c.tok.yield(pl, c, streamWatchersOf(ctx)))
	c.tok.release()
	c.down = nil
	if c.tok.fault != nil {
		// The client's stream was refused (emitToken.admit): it returned
		// once its yield said stop, which is the refusal, not the caller.
		err = c.tok.fault
	}
	if c.Deltas > before || (err == nil && !c.Stopped) {
		c.Served = c.Request.Model
	}
	if err == nil && ctx.Err() != nil && !c.Stopped {
		// The client stopped early because the context ended.
		err = ctx.Err()
	}
	if err != nil {
		c.Usage.Add(billedUsage(err))
	}
	// A stream that ended without a usage report is charged for what
	// arrived: the transcript (EstimateInput: written to the prompt cache
	// when a breakpoint marks one) plus the text received. A stream cut short
	// (stopped, failed) is estimated on each side it did not report: one
	// that reports input on its first event and output on its last,
	// abandoned in between, reported only input. A complete stream's report
	// is trusted as it is.
	if c.quarters > beforeQuarters && (c.Usage == beforeUsage || err != nil || c.Stopped) {
		if c.Usage.InputTokens == beforeUsage.InputTokens {
			c.Usage.Add(EstimateInput(&c.Request))
		}
		if c.Usage.OutputTokens == beforeUsage.OutputTokens {
			c.Usage.OutputTokens += (c.quarters - beforeQuarters + 3) / 4
		}
	} else if c.Usage == beforeUsage && (err == nil || ctx.Err() != nil) {
		// Answered without text and without a usage report (an empty
		// answer, one that only stopped), or cancelled after the request
		// went out (a hedge's losing racer, an attempt that timed out, a
		// caller that gave up) before anything arrived: the provider has
		// read, and bills, the prompt. A failure before the stream (a
		// refusal of the request) is not charged.
		c.Usage.Add(EstimateInput(&c.Request))
	}
	if u := c.Usage.Sub(beforeUsage); u != (Usage{}) {
		c.Charges = append(c.Charges, Charge{Model: c.Request.Model, Usage: u})
		if c.own && c.owned != nil {
			c.owned.add(Charge{Model: c.Request.Model, Usage: u})
		}
	}
	return err
}

// billedUsage returns what a failed model call was billed and no delta
// carried (CallError.Usage). Apart, so that its error lookup allocates on
// failures only.
func billedUsage(err error) Usage {
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Usage
	}
	return Usage{}
}

// emitToken guards the yield a model client receives for one invocation of
// the chat terminal. The yield carries the generation it was issued for;
// release bumps the generation and waits for a yield in progress, so a client
// that calls yield after its Stream returned (a reader goroutine it did not
// stop) finds a stale generation and is dropped instead of writing into a
// recycled call that now belongs to another request. A token belongs to one
// pooled ChatCall and survives its recycling; the generation, not the token,
// identifies an invocation. The happy path is lock-free: three atomic
// operations per delta.
type emitToken struct {
	gen  atomic.Uint64
	busy atomic.Int32
	// c is the current invocation's call; it is read only by a yield whose
	// generation is current, and written before the next yield is issued.
	c  *ChatCall
	pl atomic.Pointer[Pipeline]
	// thinking is the number of thinking blocks the invocation's stream
	// numbered, answered the bytes of text, thinking and tool calls it
	// carried (at most maxAnswer), and fault its refusal of the stream
	// (admit), nil if none. watch are the watchers the invocation's context
	// carries (WithStreamWatcher), nil if none.
	watch    *streamWatchers
	thinking int
	// callIndex, callID and callName are the index of the last tool-call
	// fragment and the id and name its call was counted with.
	callIndex        int
	callID, callName string
	answered         int64
	maxAnswer        int64
	fault            error
}

// yield returns the model-facing yield for one invocation that pushes into c
// while the token's generation is unchanged.
//
// The closure captures only the token and the generation, to stay in the
// smallest allocation class; the call and the pipeline are read from the
// token, which holds them for the current invocation only.
func (t *emitToken) yield(pl *Pipeline, c *ChatCall, watch *streamWatchers) func(Delta) bool {
	gen := t.gen.Load()
	t.c, t.watch = c, watch
	t.thinking, t.answered, t.maxAnswer, t.fault = 0, 0, pl.maxAnswer, nil
	t.callIndex, t.callID, t.callName = -1, "", ""
	if t.maxAnswer <= 0 {
		t.maxAnswer = plan.DefaultMaxAnswerBytes
	}
	if t.pl.Load() != pl {
		t.pl.Store(pl)
	}
	return func(d Delta) bool {
		t.busy.Add(1)
		if t.gen.Load() != gen {
			t.busy.Add(-1)
			t.late()
			return false
		}
		if t.watch == nil {
			ok := t.admit(&d) && t.c.emit(d)
			t.busy.Add(-1)
			return ok
		}
		t.watch.arrived()
		ok := t.admit(&d) && t.c.emit(d)
		t.watch.delivered()
		t.busy.Add(-1)
		return ok
	}
}

// admit reports whether the model client's delta d may enter the chat
// chain. A thinking fragment numbered more than MaxThinkingIndexSkip blocks
// past the blocks the stream numbered is refused, and so is every delta
// after it: the upstream's failure (KindTransient, which a fallback moves
// on from before the first delta and a breaker counts), not the caller's
// stop that a consumer refusing it would read as. Checked once here, it
// holds for every consumer (ThinkingBuilder.Add refuses the same of a
// layer's own deltas). A delta that takes the answer past t.maxAnswer bytes
// (settings.max_answer_bytes: text, thinking, tool-call names and
// arguments) is refused too, as the upstream's permanent failure: the
// layers that hold an answer whole (Complete, HoldToolCalls, agentc
// serve's assembly) hold at most that much of it.
func (t *emitToken) admit(d *Delta) bool {
	if t.fault != nil {
		return false
	}
	if t.answered += t.answerBytes(d); t.answered > t.maxAnswer {
		// Refused, the delta still arrived and is billed: charged as
		// the text of a stream cut short.
		t.c.quarters += deltaQuarters(d)
		t.fault = &CallError{Kind: KindPermanent, Message: fmt.Sprintf(
			"model %s: the model's answer is larger than the %d-byte limit (settings.max_answer_bytes)",
			t.c.Request.Model, t.maxAnswer)}
		return false
	}
	f := d.Thinking
	if f == nil || f.Index < t.thinking {
		return true
	}
	if f.Index-t.thinking > MaxThinkingIndexSkip {
		t.fault = &CallError{Kind: KindTransient, Message: fmt.Sprintf(
			"model %s: the model's stream sent thinking fragment index %d with %d blocks seen: a fragment may skip at most %d blocks",
			t.c.Request.Model, f.Index, t.thinking, MaxThinkingIndexSkip)}
		return false
	}
	t.thinking = f.Index + 1
	return true
}

// answerBytes is what d adds to an answer: its text, its thinking and its
// tool calls' arguments, ids and names. An id or a name is counted when it
// changes: some OpenAI-compatible servers repeat them on each fragment of a
// call, and the answer holds them once.
func (t *emitToken) answerBytes(d *Delta) int64 {
	n := len(d.Text)
	if f := d.Thinking; f != nil {
		n += len(f.Text) + len(f.Signature)
	}
	for i := range d.ToolCalls {
		c := &d.ToolCalls[i]
		n += len(c.Arguments)
		if c.Index != t.callIndex {
			t.callIndex, t.callID, t.callName = c.Index, "", ""
		}
		if c.ID != "" && c.ID != t.callID {
			n += len(c.ID)
			t.callID = c.ID
		}
		if c.Name != "" && c.Name != t.callName {
			n += len(c.Name)
			t.callName = c.Name
		}
	}
	return int64(n)
}

// late logs, once per pipeline, that a model client yielded after its
// Stream returned. The pipeline is the token's latest, which is the late
// invocation's own unless the recycled call has moved to another pipeline.
func (t *emitToken) late() {
	if pl := t.pl.Load(); pl != nil {
		pl.lateYield.Do(func() {
			pl.logger.Warn("model client yielded after its Stream returned; delta dropped (a stream must not yield once it has returned)")
		})
	}
}

// release ends the invocation: later yields of it are dropped. It waits for
// a yield in progress to finish.
func (t *emitToken) release() {
	t.gen.Add(1)
	for t.busy.Load() != 0 {
		goruntime.Gosched()
	}
}

// ownRun gives a call without a run id a run of its own: it returns ctx
// with a fresh run (the run ctx carries, if any, with a new id "call-..."),
// that run, and its id, which the caller ends (EndRun) once the call has
// returned. For a call that has a run id it returns ctx, its run and "".
// A turn's fresh run is the run of every call made inside the turn. So
// calls made without a run never share per-run state (a meter's run
// ledger, a rate limit's run bucket, the run part of idempotency keys),
// and that state does not accumulate. A run id a store could not key its
// state on is refused (checkRunID, as WithRun found it).
func ownRun(ctx context.Context) (context.Context, *Run, string, error) {
	r, ok := ctx.Value(runKey{}).(*runValue)
	if ok && r.ID != "" {
		if r.idOK {
			return ctx, &r.Run, "", nil
		}
		return ctx, &r.Run, "", checkRunID(r.ID)
	}
	var run Run
	if ok {
		run = r.Run
	}
	run.ID = "call-" + rand.Text()
	run.own, run.Ephemeral = true, true
	fresh := &runValue{Run: run, idOK: true} // the id is checkRunID's by construction
	return context.WithValue(ctx, runKey{}, fresh), &fresh.Run, run.ID, nil
}

// MaxRunIDBytes is the longest run id a call may carry. Stores key state on
// it (PostgreSQL indexes at most 2704 bytes of a key), and a run id is an
// identifier, not data.
const MaxRunIDBytes = 1024

// checkRunID refuses, before anything runs, a run id over MaxRunIDBytes or
// that is not UTF-8 text without NUL bytes, which a store could not key its
// state on: the call would fail in the store (and a retry outside try
// again) instead of saying what is wrong.
func checkRunID(id string) error {
	var why string
	switch {
	case len(id) > MaxRunIDBytes:
		why = fmt.Sprintf("is %d bytes long; at most %d", len(id), MaxRunIDBytes)
	case !utf8.ValidString(id):
		why = "is not UTF-8 text"
	case strings.IndexByte(id, 0) >= 0:
		why = "holds a NUL byte"
	default:
		return nil
	}
	// The caller's request is at fault, not the gateway: status 400, as
	// an upstream's refusal of the request itself (agentc serve and
	// examples/service answer 400, not 502).
	return NotRun(&CallError{Kind: KindPermanent, Status: http.StatusBadRequest, Message: "the run id " + why})
}

// runID returns the id of the run ctx carries.
func runID(ctx context.Context) string {
	if r := runIn(ctx); r != nil {
		return r.ID
	}
	return ""
}

// Calls are pooled: a call pointer is valid only until the handler it was
// passed to returns (ChatCall, ToolCall), so the entry points recycle them.
// The model-facing yield is issued per invocation (emitToken), so a late
// yield cannot reach a recycled call.
var (
	chatCalls = sync.Pool{New: func() any { return &ChatCall{} }}
	toolCalls = sync.Pool{New: func() any { return &ToolCall{} }}
)

func newChatCall(run *Run, req *ChatRequest, d Digester) *ChatCall {
	c := chatCalls.Get().(*ChatCall)
	c.Request, c.digester = *req, d
	c.askedMaxTokens = req.MaxTokens
	c.Meta.Run = *run
	c.Meta.Attempts = 1
	return c
}

func releaseChatCall(c *ChatCall) {
	*c = ChatCall{tok: c.tok, Charges: c.Charges[:0]}
	chatCalls.Put(c)
}

// Stream runs one chat call through the chat chain, pushing each delta to
// yield until it returns false. It returns the response (Text is left empty:
// the caller saw the deltas) and the stream's error. A consumer stop is not an
// error; a cancelled ctx returns ctx's error. A nil yield is an error, and
// nothing runs.
func (pl *Pipeline) Stream(ctx context.Context, req ChatRequest, yield func(Delta) bool) (ChatResponse, error) {
	if yield == nil {
		return ChatResponse{}, errors.New("stream: nil yield func (Complete collects the response)")
	}
	if pl.closed.Load() {
		return ChatResponse{}, errClosedCall
	}
	if err := pl.unreadDocuments(&req); err != nil {
		return ChatResponse{}, err
	}
	ctx, run, fresh, err := ownRun(ctx)
	if err != nil {
		return ChatResponse{}, err
	}
	if fresh != "" {
		defer pl.EndRun(fresh)
	} else if pl.runs != nil {
		defer pl.runs.end(pl.runs.begin(run.ID))
	}
	c := newChatCall(run, &req, pl.digester)
	if c.Request.Tools == nil {
		c.Request.Tools = pl.offered
	}
	if pl.groundsCalls() {
		if err := pl.groundCall(ctx, c); err != nil {
			releaseChatCall(c)
			return ChatResponse{}, err
		}
	}
	err = pl.chat(ctx, c, yield)
	resp := ChatResponse{Model: c.Served, Usage: c.Usage, FinishReason: c.FinishReason, StopSequence: c.StopSequence, Attempts: c.Meta.Attempts,
		Deltas: c.Deltas, Cached: c.Meta.Cached, Annotations: c.Annotations}
	if len(c.Charges) > 1 || (len(c.Charges) == 1 && (c.Charges[0].Model != c.Served || c.Charges[0].Usage != c.Usage || c.Charges[0].Metered)) {
		resp.Charges = slices.Clone(c.Charges)
	}
	resp.OwnCharges = c.owned.list()
	releaseChatCall(c)
	return resp, err
}

// unreadDocuments refuses a request holding content no layer reads (a PDF,
// PartDocument, or data an image part carries that is not text:
// ContentPart.Unread) when the chat chain has a layer that reads what the
// model is sent (ContentLayers): that layer would pass what it never read.
// The refusal is a *BlockedError of the first such layer, and nothing runs.
func (pl *Pipeline) unreadDocuments(req *ChatRequest) error {
	for i := range req.Messages {
		for j := range req.Messages[i].Parts {
			p := &req.Messages[i].Parts[j]
			if !p.Unread() {
				continue
			}
			layers := pl.ContentLayers(plan.StageChat)
			if len(layers) == 0 {
				return nil
			}
			what, instead := "a PDF document, whose content no layer reads", "the document's text"
			if p.Type != PartDocument {
				what, instead = "an image part holding data that is neither an image nor UTF-8 text, which no layer reads", "its text as UTF-8"
			}
			return &BlockedError{Layer: layers[0], Message: fmt.Sprintf(
				"messages[%d].parts[%d] is %s, and layers %s read what the model is sent: send %s instead",
				i, j, what, strings.Join(layers, ", "), instead)}
		}
	}
	return nil
}

// Complete runs one chat call and collects the streamed text and tool calls
// into the response.
func (pl *Pipeline) Complete(ctx context.Context, req ChatRequest) (ChatResponse, error) {
	// One struct, so the closure captures one heap variable.
	var acc struct {
		text     strings.Builder
		calls    ToolCallBuilder
		thinking ThinkingBuilder
		refusal  bool
		err      error // a thinking fragment refused
	}
	resp, err := pl.Stream(ctx, req, func(d Delta) bool {
		if acc.err = acc.thinking.Add(&d); acc.err != nil {
			return false
		}
		acc.text.WriteString(d.Text)
		acc.refusal = acc.refusal || d.Refusal && d.Text != ""
		acc.calls.Add(&d)
		return true
	})
	if err == nil {
		err = acc.err
	}
	resp.Text, resp.Refusal = acc.text.String(), acc.refusal
	resp.Thinking = acc.thinking.Blocks()
	resp.ToolCalls = acc.calls.ToolCalls()
	return resp, err
}

// ChatStream is one chat call consumed as an iterator.
type ChatStream struct {
	pl    *Pipeline
	ctx   context.Context
	req   ChatRequest
	text  strings.Builder
	calls ToolCallBuilder
	think ThinkingBuilder
	// refusal is set when text of a Refusal delta arrived.
	refusal bool
	// refused is a thinking fragment ThinkingBuilder.Add refused.
	refused error
	resp    ChatResponse
	err     error
	used    bool
}

// Chat returns the chat call req as a stream. The call runs when the stream is
// iterated; breaking out of the loop abandons it (the model call is stopped
// and charged for what arrived).
func (pl *Pipeline) Chat(ctx context.Context, req ChatRequest) *ChatStream {
	return &ChatStream{pl: pl, ctx: ctx, req: req}
}

var (
	errStreamUsed = errors.New("chat stream already consumed")
	errStreamZero = errors.New("chat stream not made by Pipeline.Chat")
)

// All yields each delta with a nil error; a failed call ends with one
// (Delta{}, err) pair. A stream can be iterated once; a second iteration
// yields an error.
func (s *ChatStream) All() iter.Seq2[Delta, error] {
	return func(yield func(Delta, error) bool) {
		if s.pl == nil {
			s.err = errStreamZero
			yield(Delta{}, s.err)
			return
		}
		if s.used {
			yield(Delta{}, errStreamUsed)
			return
		}
		s.used = true
		stopped := false
		s.resp, s.err = s.pl.Stream(s.ctx, s.req, func(d Delta) bool {
			if s.refused = s.think.Add(&d); s.refused != nil {
				return false
			}
			s.text.WriteString(d.Text)
			s.refusal = s.refusal || d.Refusal && d.Text != ""
			s.calls.Add(&d)
			if !yield(d, nil) {
				stopped = true
				return false
			}
			return true
		})
		if s.err == nil {
			s.err = s.refused
		}
		s.resp.Text, s.resp.Refusal = s.text.String(), s.refusal
		s.resp.ToolCalls = s.calls.ToolCalls()
		s.resp.Thinking = s.think.Blocks()
		if s.err != nil && !stopped {
			yield(Delta{}, s.err)
		}
	}
}

// Response returns the outcome once the stream has been iterated: the text
// and tool calls that were delivered, the model served, the finish reason,
// usage and attempts.
func (s *ChatStream) Response() ChatResponse { return s.resp }

// Err returns the stream's error once it has been iterated.
func (s *ChatStream) Err() error { return s.err }

// toolTerminal calls the tool of the call's entry. It is a plain func, not a
// method value, to save an indirection on every call.
func toolTerminal(ctx context.Context, c *ToolCall) (any, error) {
	fn := c.entry.fn
	if fn == nil {
		return nil, NotRun(&CallError{Kind: KindPermanent, Message: fmt.Sprintf("tool %q is not registered (give its function in runtime.Deps.Tools)", c.Name)})
	}
	// A tool may have effects: never start it for a call whose context has
	// already ended (like the chat and turn terminals).
	if err := ctx.Err(); err != nil {
		atomic.StoreInt32(&c.interrupted, 0)
		return nil, err
	}
	// A resumed call that may have started before runs only when a layer
	// answered for it (ClaimVoucher).
	if err := resumedGate(ctx, c); err != nil {
		atomic.StoreInt32(&c.interrupted, 0)
		return nil, err
	}
	// A resumed call recorded before the digest key was set: the tool gets
	// the key its first execution got.
	givePlainKey(ctx, c)
	// A call the tool makes through the tool chain is its own, not the
	// agent turn's call: it is recorded apart (agentRecordOf).
	tctx, ac := inToolOf(ctx)
	v, err := fn(tctx, c)
	ac.takeMarks(c)
	if err != nil && refusedInDoubt(err) {
		// Another call's doubt (one the tool made): this call ran.
		err = MayHaveRun(err)
	}
	err = c.ranUnder(err)
	if err != nil && ctx.Err() != nil {
		atomic.StoreInt32(&c.interrupted, 1)
	} else {
		atomic.StoreInt32(&c.interrupted, 0)
		if err != nil && c.Tool != nil && KindOf(err) == string(KindTimeout) {
			// Its own deadline, an upstream's 504: it may have acted.
			err = c.mayHaveActed(err, "failed with a timeout")
		}
	}
	if c.entry.taint != nil && err == nil {
		c.entry.taint(c.Meta.Run.ID, v)
		c.tainted = true
	}
	return v, err
}

// Tool runs one tool call through the tool chain. On entry, before any
// layer, the call is checked against the policy's tool declarations: a tool
// the policy does not declare (nor Deps.ToolArgs) is refused unless the
// policy's settings.allow_undeclared_tools is true, and arguments that do
// not match the tool's args schema are refused, naming each field (a member
// whose name differs only in case from a property the schema declares for
// its object too: caseFaults); both
// refusals are a *BlockedError of layer LayerTools, and the tool does not
// run. A declared tool that is not registered still passes the chain
// (guards and audits see it) and fails permanently at the end.
func (pl *Pipeline) Tool(ctx context.Context, req ToolRequest) (ToolResult, error) {
	if pl.closed.Load() {
		return ToolResult{}, errClosedCall
	}
	ctx, run, fresh, err := ownRun(ctx)
	if err != nil {
		return ToolResult{}, err
	}
	if fresh != "" {
		defer pl.EndRun(fresh)
	} else if pl.runs != nil {
		defer pl.runs.end(pl.runs.begin(run.ID))
	}
	e, err := pl.enterTool(&req)
	if err != nil {
		// The refusal is recorded like any outcome: a resumed agent turn
		// answers the call from it instead of taking it for a call that
		// may have run (unless it is such a call, resumed: in doubt).
		if resumesInFlight.Load() != 0 {
			c := ToolCall{Name: req.Name, Args: req.Args, Meta: Meta{Run: RunOf(ctx), IdempotencyKey: req.IdempotencyKey}, digester: pl.digester}
			err = resumedUnanswered(ctx, req.Name, c.IdempotencyKey(), err)
		}
		return ToolResult{}, pl.recordOutcome(ctx, req.Name, nil, err)
	}
	c := toolCalls.Get().(*ToolCall)
	c.Name, c.Args, c.Tool, c.entry, c.digester = req.Name, req.Args, &e.info, e, pl.digester
	c.Meta.IdempotencyKey, c.Meta.Attempts, c.Meta.Run = req.IdempotencyKey, 1, *run
	if req.IdempotencyKey == "" && len(pl.keyers) > 0 {
		pl.keyCall(ctx, c)
	}
	v, err := pl.tool(ctx, c)
	if (!e.known || e.info.SideEffecting && !e.info.RetrySafe) && reached(ctx, err) {
		// A call that would repeat an effect (repeatsEffect) reached its
		// tool: a tool that made it of its own no longer says, by a
		// refusal, that its call did not run (ranUnder).
		ranInTool(ctx)
	}
	if err != nil && ctx.Err() != nil && atomic.LoadInt32(&c.interrupted) != 0 {
		err = c.mayHaveActed(err, "was running when its call was cancelled")
	}
	if err != nil && ctx.Err() != nil && pl.recordRuns.Load() {
		err = pl.delegatedActed(ctx, req.Name, err)
	}
	if err != nil && resumesInFlight.Load() != 0 {
		err = resumedUnanswered(ctx, req.Name, c.IdempotencyKey(), err)
	}
	if e.taint != nil && err == nil && !c.tainted {
		// The terminal taints the raw result; a result a layer served
		// without running the tool (a cache hit, an idempotent replay,
		// a deduplicated call) is tainted here.
		e.taint(c.Meta.Run.ID, v)
	}
	res := ToolResult{Value: v, Attempts: c.Meta.Attempts, Deduped: c.Meta.Deduped, Cached: c.Meta.Cached}
	*c = ToolCall{}
	toolCalls.Put(c)
	if herr := pl.recordOutcome(ctx, req.Name, v, err); err == nil && herr != nil {
		return ToolResult{}, herr
	}
	return res, err
}

// mayHaveActed returns the error of a call whose tool t may have acted
// before it failed, as what says: it was running when its context ended
// and returned an error after that, or it failed with a timeout (its own
// deadline, an upstream's 504 or 408). A tool whose effect a repetition
// would make again (side-effecting, not retry_safe) may have made it
// before it stopped, as audit, idempotent and meter take it: such a
// failure is marked MayHaveRun (in doubt, final), so that neither the
// caller nor an agent turn, which would tell the model "cancelled" or
// "failed", runs it again, and the run's record of it is in doubt. A
// failure that says whether the tool acted (Ran, NotRun) or that a layer
// classified is left as it is.
func mayHaveActed(t *ToolInfo, err error, what string) error {
	if !t.SideEffecting || t.RetrySafe || Classify(err) != ClassFailure || errors.Is(err, ErrRan) || DidNotRun(err) {
		return err
	}
	return MayHaveRun(fmt.Errorf("tool %s %s, and may have made its effect: %w", t.Name, what, err))
}

// Interrupted returns err, the failure of c, marked MayHaveRun when the
// tool was running when the context it last ran under ended and failed
// after that, and a repetition would make its effect again (side-effecting,
// not retry_safe): as the pipeline marks such a failure when the call's own
// context ends. A layer that ends the context of the inner layers itself (a
// retry's attempt_timeout) calls it, so that the layers outside, the caller
// and an agent turn read the failure as in doubt, not as one that did not
// happen. A failure that says whether the tool acted (Ran, NotRun) or that a
// layer classified is returned as it is, as is err when the tool did not
// run, or returned before its context ended.
func (c *ToolCall) Interrupted(err error) error {
	if err == nil || c.Tool == nil || atomic.LoadInt32(&c.interrupted) == 0 {
		return err
	}
	return c.mayHaveActed(err, "was running when its call was cancelled")
}

// mayHaveActed is mayHaveActed of c's tool, which is taken as
// side-effecting and not retry_safe when it started a call that would
// repeat an effect, through an agent turn or of its own (Delegated).
func (c *ToolCall) mayHaveActed(err error, what string) error {
	if !c.Delegated() {
		return mayHaveActed(c.Tool, err, what)
	}
	t := *c.Tool
	t.SideEffecting, t.RetrySafe = true, false
	if atomic.LoadInt32(&c.delegated) == 0 {
		return mayHaveActed(&t, err, what+" after a call of its own that would repeat an effect had reached its tool")
	}
	return mayHaveActed(&t, err, what+" after the agent turn it ran had started a call that would repeat an effect")
}

// recordOutcome records the outcome of a call of tool for its run, when
// runs are recorded, and runs the OnToolResult hooks. It returns err, or
// the first hook's error when the call succeeded.
func (pl *Pipeline) recordOutcome(ctx context.Context, tool string, v any, err error) error {
	if pl.recordRuns.Load() {
		pl.recordTool(runID(ctx), tool, pl.agentRecordOf(ctx), v, err)
		for _, hook := range pl.toolHooks {
			if herr := hook(ctx); herr != nil && err == nil {
				return herr
			}
		}
	}
	return err
}

// enterTool returns the entry of req's tool after the checks made on entry
// to the tool chain: the tool is declared (or undeclared tools are
// allowed), its arguments hold no number that cannot be checked exactly
// (checkNumbers) and they match its args schema.
func (pl *Pipeline) enterTool(req *ToolRequest) (*toolEntry, error) {
	e := pl.toolEntry(req.Name)
	declared := e != nil && e.known
	if !declared && !pl.allowUndeclared {
		return nil, undeclared(req.Name)
	}
	if err := checkNumbers(req.Name, req.Args); err != nil {
		return nil, err
	}
	if declared && e.args != nil {
		if err := checkArgs(req.Name, e.args, req.Args); err != nil {
			return nil, err
		}
	}
	if e == nil {
		e = &toolEntry{info: ToolInfo{Name: req.Name}}
		e.pinfo = toolActivationInfo(&e.info)
	}
	return e, nil
}

// settleEffects makes a tool whose effects nothing declares (neither the
// policy nor the host: DeclareToolEffects) side-effecting and not
// retry_safe: a retry does not run it again after a failure that may have
// come after its effect, an idempotent layer claims its calls, an audit
// layer records a call that stopped midway in doubt, a resumed turn does
// not run it again, and `tool.side_effecting` is true for it.
func (t *ToolInfo) settleEffects() {
	if !t.Declared && !t.hostEffects {
		t.SideEffecting, t.RetrySafe = true, false
	}
}

// ToolEffects are the effects a host declares for a tool it serves that
// the policy does not declare (an MCP upstream's tool, from its
// annotations).
type ToolEffects struct {
	// SideEffecting reports that a call may change something (MCP: the
	// tool is not readOnlyHint).
	SideEffecting bool
	// RetrySafe reports that running a call again is safe (MCP:
	// idempotentHint).
	RetrySafe bool
}

// DeclareToolEffects declares the effects of tools the pipeline serves
// (Deps.Tools) that the policy does not declare; a declaration in the
// policy wins, and a name the pipeline does not serve is ignored. A tool
// whose effects nobody declares is side-effecting and not retry_safe. Call
// it after Build, before the pipeline serves any call.
func (pl *Pipeline) DeclareToolEffects(effects map[string]ToolEffects) {
	for name, fx := range effects {
		e := pl.tools[name]
		if e == nil || e.info.Declared {
			continue
		}
		e.info.SideEffecting, e.info.RetrySafe, e.info.hostEffects = fx.SideEffecting, fx.RetrySafe, true
		e.pinfo = toolActivationInfo(&e.info)
	}
}

// CheckToolDeclared returns nil when a call to the tool name may enter the
// tool chain: the policy declares it (or Deps.ToolArgs does), or its
// settings.allow_undeclared_tools is true. Otherwise it returns the
// refusal Tool would make, a *BlockedError of layer LayerTools.
func (pl *Pipeline) CheckToolDeclared(name string) error {
	if e := pl.toolEntry(name); (e != nil && e.known) || pl.allowUndeclared {
		return nil
	}
	return undeclared(name)
}

// undeclared is the refusal of a call to the tool name, which the policy
// does not declare (CheckToolDeclared).
func undeclared(name string) error {
	return &BlockedError{Layer: LayerTools, Message: fmt.Sprintf("tool %q is not declared in the policy's tools (settings.allow_undeclared_tools is not set)", name)}
}

// AdmitTool decides a tool call that is proposed but not run here (a model's
// tool call a gateway relays to the client that executes it) by the checks
// of the tool chain that need no execution: the checks on entry (Tool), then
// each tool layer that implements ToolAdmitter and whose `tools` and `when`
// apply, outermost first; the first refusal is returned. Every such check
// applies, wherever its layer sits in the chain: a cache or an idempotency
// record that would answer the call before an inner guard ran does not
// answer a proposal. A layer that resolves the call's arguments for the
// layers inside it (file_check's real paths) hands the admitters after it
// the resolved copy, as it does when the call runs; req.Args, which the
// caller relays, are not modified. No layer runs: nothing is charged,
// counted, recorded or retried.
func (pl *Pipeline) AdmitTool(ctx context.Context, req ToolRequest) error {
	if pl.closed.Load() {
		return errClosedCall
	}
	e, err := pl.enterTool(&req)
	if err != nil {
		return err
	}
	c := &ToolCall{Name: req.Name, Args: req.Args, Tool: &e.info, entry: e, digester: pl.digester}
	c.Meta.IdempotencyKey, c.Meta.Attempts = req.IdempotencyKey, 1
	if r := runIn(ctx); r != nil {
		c.Meta.Run = *r
	}
	for _, a := range pl.admitters {
		if a.scope != nil && !a.scope.appliesTool(ctx, c) {
			continue
		}
		if err := a.admit.AdmitTool(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

func turnTerminal(ctx context.Context, c *TurnCall) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	c.mu.Lock()
	c.earlier, c.withhold = nil, nil // another attempt's
	c.mu.Unlock()
	c.runs++
	out, err := c.fn(context.WithValue(ctx, turnCallKey{}, c))
	c.body, c.bodyErr, c.ran = out, err, true
	return out, err
}

// refused reports whether the turn chain, which returned out and err,
// refused what the turn's body returned, so that the text of the answers
// the body handed the host is withheld (TurnResult.Withheld): a body that
// returned without error whose output a layer replaced or refused, or a
// body that failed other than final (its answers' text read by the
// layers: TurnCall.Earlier) that a layer then refused. A body that ended
// final (blocked, over budget, in doubt) was not read, and keeps its text.
func (c *TurnCall) refused(out string, err error) bool {
	switch {
	case err == nil || !c.ran:
		return false
	case c.bodyErr == nil:
		return out != c.body || Classify(err) == ClassBlocked
	default:
		return !Classify(c.bodyErr).Final() && Classify(err) == ClassBlocked
	}
}

// onRefused has withhold run when the turn whose body ctx is (Pipeline.
// Turn) ends refused (TurnCall.refused), before its ends (AtEnd): the
// functions run the last added first (an agent turn's answers come after
// those of one run earlier in the body, in a transcript it continued).
// Outside a turn's body it does nothing.
func onRefused(ctx context.Context, withhold func()) {
	if c, ok := ctx.Value(turnCallKey{}).(*TurnCall); ok {
		c.mu.Lock()
		c.withhold = append(c.withhold, withhold)
		c.mu.Unlock()
	}
}

// Turn runs one agent turn through the turn chain: fn is the turn's body and
// its return value the turn's output. What the layers asked to do at the
// turn's end (TurnCall.AtEnd: a checkpoint's save) is done once the whole
// chain has returned, and its error joined to the turn's. A turn that ended
// well keeps its output when such an end fails (its effects and its output
// were made, only not recorded): the error says so, and wraps the end's (a
// save the store failed: ErrOutcomeUnrecorded). Before the chain, once the
// turn holds its run, the OnTurnStart hooks run (a checkpoint layer's
// Checkpointer.Check): a run that another process ended or saved since this
// one last did is refused there, with a *BlockedError, and nothing of the
// turn runs (neither a layer nor fn, nor a model call). The error of a
// turn, not nested in another, whose agent turns (RunAgent in fn) ran
// calls that would repeat an effect is a *RanCallsError naming them.
func (pl *Pipeline) Turn(ctx context.Context, req TurnRequest, fn TurnFunc) (TurnResult, error) {
	return pl.runTurn(ctx, req, fn, false)
}

// runTurn is Turn; agent marks RunAgent's own turn, whose answers reach a
// turn it is nested in through nestIn, not as a host's nested turn hands
// over those of its body (TurnCall.handOver).
func (pl *Pipeline) runTurn(ctx context.Context, req TurnRequest, fn TurnFunc, agent bool) (_ TurnResult, err error) {
	if fn == nil {
		return TurnResult{}, errors.New("turn: nil TurnFunc")
	}
	if pl.closed.Load() {
		return TurnResult{}, errClosedCall
	}
	ctx, run, fresh, err := ownRun(ctx)
	if err != nil {
		return TurnResult{}, err
	}
	// A turn run in the body of a turn of the same run and pipeline (a
	// scenario's turn step around an agent step, a tool that runs an
	// agent turn), or in a turn nested in it, of any pipeline or run, is
	// part of it: it does not hold the run the outer turn holds, and what
	// its layers ask to do at its end is left to the outermost turn's end
	// (a checkpoint saves the run once, as that turn ends, and a refused
	// delegate does not finish the run the outer turn goes on with). A
	// fresh run has no outer turn.
	parent, _ := ctx.Value(turnCallKey{}).(*TurnCall)
	enclosing := pl.enclosingTurn(ctx)
	nested := enclosing != nil
	if fresh != "" {
		defer pl.EndRun(fresh)
	} else {
		release, err := pl.holdTurn(run.ID, nested)
		if err != nil {
			return TurnResult{}, err
		}
		defer release()
		if pl.runs != nil {
			defer pl.runs.end(pl.runs.begin(run.ID))
		}
		if !nested {
			// Before any layer: a run this process no longer holds (a
			// checkpoint's Check) has nothing of the turn run.
			for _, hook := range pl.turnHooks {
				if err := hook(ctx); err != nil {
					pl.logger.WarnContext(ctx, "turn refused at its start, before any layer ran", "run", run.ID, "reason", err.Error())
					return TurnResult{}, err
				}
			}
		}
	}
	ctx = pl.withTurnGrounding(ctx, req.Input)
	// The outermost turn collects the calls that would repeat an effect
	// that agent turns run in it make: its error says they ran
	// (RanCallsError), where no layer of a turn sees it.
	ran := ranEffectsOf(ctx)
	if ran == nil && !agent {
		ran = &ranEffects{}
		ctx = context.WithValue(ctx, ranEffectsKey{}, ran)
		defer func() { err = ran.wrap(err) }()
	}
	c := &TurnCall{Input: req.Input, Session: req.Session, fn: fn, pl: pl, parent: parent, agent: agent}
	c.outermost = c
	if nested {
		c.outermost = enclosing.outermost
	}
	c.Meta.Run = *run
	c.Meta.Attempts = 1
	out, err := pl.turn(ctx, c)
	withheld := c.refused(out, err)
	if withheld {
		for i := len(c.withhold) - 1; i >= 0; i-- {
			c.withhold[i]()
		}
	} else if nested {
		c.handOver(enclosing)
	}
	var endErr error
	for _, end := range c.ends {
		if nested {
			break
		}
		if eerr := end.fn(err); eerr != nil {
			endErr = errors.Join(endErr, eerr)
		}
	}
	switch {
	case endErr == nil:
	case err == nil:
		// The output was made and is returned; only its record failed.
		err = fmt.Errorf("turn: the turn ended well and its output is returned, but it was not recorded at the turn's end: %w", endErr)
	default:
		err = errors.Join(err, endErr)
	}
	return TurnResult{Output: out, Attempts: max(c.Meta.Attempts, c.runs), Withheld: withheld}, err
}

// handOver hands the turn outer that c, a nested turn its chain did not
// refuse, is part of (enclosingTurn) what c's body handed c: the text of
// the agent turns run there and of the host's AddEarlier (TurnCall.
// Earlier), which outer's chain reads too, and what withholds that text
// from the run's recorded transcript, which outer's refusal runs. A
// refusal of the outermost turn so withholds what turns nested in it at
// any depth let through, as a refusal of the turn they ran in does. An
// agent turn hands its own (nestIn), and a turn run by the tool of an
// agent turn reaches that turn only as the tool's result.
func (c *TurnCall) handOver(outer *TurnCall) {
	if c.agent || outer.agent {
		return
	}
	c.mu.Lock()
	earlier, withhold := c.earlier, c.withhold
	c.mu.Unlock()
	if len(earlier) == 0 && len(withhold) == 0 {
		return
	}
	outer.mu.Lock()
	outer.earlier = append(outer.earlier, earlier...)
	outer.withhold = append(outer.withhold, withhold...)
	outer.mu.Unlock()
}

// enclosingTurn returns the nearest turn of pl and of ctx's run whose body
// ctx is (Pipeline.Turn), or a turn nested there, of any pipeline or run,
// is run in; nil if none: a turn, an agent turn or a tool call run there is
// part of that turn.
func (pl *Pipeline) enclosingTurn(ctx context.Context) *TurnCall {
	c, _ := ctx.Value(turnCallKey{}).(*TurnCall)
	if c == nil {
		return nil
	}
	id := RunOf(ctx).ID
	for ; c != nil; c = c.parent {
		if c.pl == pl && c.Meta.Run.ID == id {
			return c
		}
	}
	return nil
}

// hold holds key in pl.busy while runs are recorded, and returns what
// releases it; false when key is held already. The keys are the ids of
// the runs a turn holds (holdTurn) and the outermost turns whose body, or
// a nested turn's, runs an agent turn (holdAgent): one turn of a run, and
// one agent turn in a turn's body and the turns nested in it, at a time,
// as each records its transcript as the run's.
func (pl *Pipeline) hold(key any) (func(), bool) {
	if !pl.recordRuns.Load() {
		return func() {}, true
	}
	if _, busy := pl.busy.LoadOrStore(key, struct{}{}); busy {
		return nil, false
	}
	return func() { pl.busy.Delete(key) }, true
}

// holdTurn holds the named run for a turn, and returns what releases it:
// a turn of a run that another turn holds is refused (ErrRunBusy), unless
// it is nested in that turn's body (enclosingTurn), which it is part of.
func (pl *Pipeline) holdTurn(runID string, nested bool) (func(), error) {
	if nested {
		return func() {}, nil
	}
	release, ok := pl.hold(runID)
	if !ok {
		return nil, NotRun(fmt.Errorf("turn: run %q: %w (one turn of a run at a time while its transcript is recorded)", runID, ErrRunBusy))
	}
	return release, nil
}

// Admit returns the items the plan's admission predicate admits, in order. A
// plan without one admits every item. An item whose evaluation fails is not
// admitted (fail closed); the joined evaluation errors are returned with the
// admitted items.
func (pl *Pipeline) Admit(ctx context.Context, items []Item) ([]Item, error) {
	if pl.closed.Load() {
		return nil, errClosedCall
	}
	if pl.admit == nil {
		return items, nil
	}
	out := make([]Item, 0, len(items))
	err := pl.admission(ctx, items, func(i int, ok bool, _ error) {
		if ok {
			out = append(out, items[i])
		}
	})
	return out, err
}

// admission evaluates the admission predicate over each item in order and
// reports the verdict to each (true for all without a predicate). An item
// whose evaluation fails is refused (each gets the error), and the joined
// evaluation errors are returned; the end of ctx stops it with ctx's error.
func (pl *Pipeline) admission(ctx context.Context, items []Item, each func(i int, admitted bool, err error)) error {
	var errs []error
	for i := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		ok := true
		var err error
		if pl.admit != nil {
			if ok, err = pl.admit.EvalItem(ctx, &items[i]); err != nil {
				errs = append(errs, fmt.Errorf("item %d: %w", i, err))
				ok = false
			}
		}
		each(i, ok, err)
	}
	return errors.Join(errs...)
}
