package runtime

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// What an agent turn does when a guard blocks one of the model's tool calls
// (AgentRequest.OnBlock).
const (
	// OnBlockTellModel answers the blocked call with a tool result telling
	// the model it was refused, and why, and goes on.
	OnBlockTellModel = "tell_model"
	// OnBlockEndTurn ends the turn with the *BlockedError.
	OnBlockEndTurn = "end_turn"
)

// The defaults of an AgentRequest.
const (
	DefaultAgentMaxSteps     = 8
	DefaultAgentMaxParallel  = 4
	DefaultAgentMaxToolCalls = 64
)

// Why an agent turn stopped (AgentResult.Stop).
const (
	// StopDone is a model answer without tool calls.
	StopDone = "done"
	// StopMaxSteps is the step bound reached while the model still called
	// tools.
	StopMaxSteps = "max_steps"
)

// AgentRequest is one agent turn for RunAgent.
type AgentRequest struct {
	// Model names the model (a key of Deps.Models).
	Model string
	// Messages is the transcript before the turn (system prompt, history).
	// It is not modified.
	Messages []Message
	// Input, when not empty, is appended as a user message; it is also the
	// turn's input for the turn chain (else the last user message's text).
	Input string
	// Session is the conversation (the turn chain's `session`).
	Session Session
	// Params is the template of every model call of the turn: Tools (nil:
	// the policy's declared tools), ToolChoice, sampling parameters,
	// MaxTokens, ResponseFormat, Metadata. Its Model and Messages are
	// ignored. A model's call to a tool the turn does not offer (not in a
	// non-nil Tools, any under ToolChoice "none", another than the one a
	// ToolChoice names) is answered with an error result and does not run.
	// ParallelToolCalls false has none of the calls of an answer of
	// several run (see RunAgent).
	Params ChatRequest
	// MaxSteps bounds the model answers of the turn (0:
	// DefaultAgentMaxSteps), over its attempts: an attempt after one whose
	// model call failed (a host's retry layer) makes the answers the
	// attempts before left, the failed call not counted, nor an answer
	// whose calls could not be recorded before they ran (it left the
	// transcript).
	MaxSteps int
	// MaxParallel bounds the tool calls of one step that run at once (0:
	// DefaultAgentMaxParallel).
	MaxParallel int
	// MaxToolCalls bounds the tool calls of one model answer (0:
	// DefaultAgentMaxToolCalls): none of the calls of an answer with more
	// runs, each is answered with an error result saying so, and the turn
	// goes on.
	MaxToolCalls int
	// OnBlock is OnBlockTellModel ("" is the same) or OnBlockEndTurn.
	OnBlock string
	// OnDelta, when set, sees every delta of every model call as it streams
	// (steps count the turn's model calls from 1, an attempt after the
	// first going on from the calls made). It runs on the caller's
	// goroutine.
	OnDelta func(step int, d Delta)
}

// AgentResult is the outcome of an agent turn.
type AgentResult struct {
	// Output is the text of the last model call as the turn chain let it
	// through: empty when the turn failed, or when a layer of the turn
	// chain (a content_filter, an after-phase guard) refused it or the
	// text of an earlier answer of the turn (TurnCall.Earlier); no answer
	// of the turn then keeps its text in Messages (an answer without tool
	// calls is left out). A turn that ended well and that a layer could
	// not record at its end (a checkpoint's save failed) keeps its output,
	// counts and Stop: the error says the output is returned but was not
	// recorded (Pipeline.Turn), and wraps ErrOutcomeUnrecorded when the
	// store failed; the run's saved versions lack the turn.
	Output string `json:"output"`
	// Messages is the transcript after the turn: the request's messages,
	// the input, and every assistant message and tool result of the turn.
	Messages []Message `json:"messages"`
	// Steps is the number of model calls made, a failed one included.
	Steps int `json:"steps"`
	// ToolCalls is the number of tool calls the model requested.
	ToolCalls int `json:"tool_calls"`
	// Blocked is the number of tool calls a guard refused.
	Blocked int `json:"blocked,omitempty"`
	// Usage sums the usage the model calls billed, attempts a layer of
	// the chat chain discarded (retry, fallback, hedge) and the calls a
	// layer made of its own (a judge's verdicts, summaries) included. Steps, ToolCalls, Blocked
	// and Usage count every attempt of the turn (a host's retry layer that
	// ran the turn chain's inner layers again): the model calls of an
	// attempt that failed were made, and are billed.
	Usage Usage `json:"usage"`
	// FinishReason is the last model call's.
	FinishReason string `json:"finish_reason,omitempty"`
	// Stop says why the turn ended: StopDone or StopMaxSteps ("" when it
	// failed).
	Stop string `json:"stop,omitempty"`
	// Attempts is the number of attempts of the turn chain that ran the
	// agent loop (TurnResult.Attempts): 1 for a turn run once, one more
	// for each time a layer of the chain ran the layers inside it again
	// (a host's retry), each attempt after the first continuing the
	// transcript the one before left.
	Attempts int `json:"attempts"`
}

// RunAgent runs one function-calling agent turn inside the turn chain: a
// model call through the chat chain; when the model asks for tools, each
// call runs through the tool chain (up to MaxParallel at once) and its
// result is appended as a tool message; then the model is called again,
// until it answers without tool calls or MaxSteps model calls were made.
// Each answer is appended as one assistant message, as the model streamed
// it: with thinking, its thinking blocks (signatures intact) and its text
// are parts and each tool call sits in its place among them (ToolUse.
// PartsAfter), which an Anthropic model requires to go on with a tool-use
// turn; without, its text is Content.
// An answer with more than MaxToolCalls tool calls has none of them run:
// each is answered with an error result saying so, and the turn goes on; a
// transcript whose last assistant message has more calls without a result
// than that is refused before anything runs (ErrUnansweredToolCall). So
// has an answer of more than one call when Params.ParallelToolCalls is
// false (the provider is asked for one call at most, and a model may
// still propose several, which a host that counted on one call at a time
// would not have run together; agentc serve refuses such an answer): the
// model is told the turn allows one call per answer, and goes on with one.
// The calls without a result of a transcript's last assistant message are
// settled as they are, however many: some of them may have run.
// A panic of a tool call (run on a goroutine of its own) is raised again
// on the caller's goroutine once the step's other calls have returned.
//
// A tool call that a guard blocks is answered with a tool result telling the
// model it was refused (OnBlockTellModel), or ends the turn with the
// *BlockedError (OnBlockEndTurn). A call in doubt (an *InDoubtError: it
// may have run) and a call whose outcome a layer could not record
// (ErrOutcomeUnrecorded) end the turn with that error, the call left
// unanswered in the transcript for a person to settle. A tool that fails,
// arguments that are not a JSON object and a tool that is not registered are reported to the model
// the same way, as an error result, and the turn goes on; so does a call to
// a tool the turn does not offer (AgentRequest.Params). A budget error, a
// failed or blocked model call, and the end of ctx end the turn with their
// error; the result still holds the transcript so far, and no Output.
// A turn that fails after a call of it that would repeat an effect if
// made again ran (side-effecting and not retry_safe, or undeclared) ends
// with a *RanCallsError around that error, naming the calls, which is
// not DidNotRun: run in a turn's body (a host's turn, a tool's), the
// outermost turn's error says so instead. A
// turn chain layer that refuses the output (a content_filter, an
// after-phase guard, which read the text of the turn's earlier answers
// too: TurnCall.Earlier) ends the turn with its *BlockedError, and the
// text of every answer of the turn is left out of the result, of the run's
// recorded transcript and of the version a checkpoint layer saves after
// the turn (AgentResult.Output); those layers read the text of every
// answer of a turn that failed other than final (blocked, over budget, in
// doubt) too, and their refusal replaces its error so.
// RunAgent is safe for concurrent use; while the run is recorded (a
// checkpoint), a turn of a run with another turn under way is refused
// before anything runs (ErrRunBusy), as Pipeline.Turn refuses it, as is a
// turn of a run that another process ended or saved since this one last
// did (a checkpoint layer's check, Pipeline.Turn: a *BlockedError, the
// model not called), and so
// is an agent turn run in a host's turn body of the run, or in a turn
// nested in it, while another runs there (one after the other, each
// continues the transcript). A turn run by a tool call of an agent turn
// of the same run (a tool that runs an agent of its own; two such calls
// of one answer run at once) is part of that turn: it records neither
// the run's transcript nor its calls' intent (a checkpoint's versions
// hold the outer turn's), its tool results are
// recorded under names of their own (ToolRecord.Call), and its text
// reaches the outer turn only as the tool's result. Before a call of such
// a turn (at any depth, of this pipeline or another) that would repeat
// an effect if made again starts (side-effecting and not retry_safe, or
// undeclared), the outer turn's call it runs under is recorded as having
// it under way (CallIntent.Delegated) and the OnToolCalls hooks run (a
// checkpoint layer with after_tool saves); when that fails, the call does
// not start: it is answered with an error result and the nested turn
// ends with the hook's error. A layer of the turn
// chain that runs the layers inside it again (a host's retry of a turn
// whose model call failed) has the loop go on from the transcript the
// attempt before left, as a resumed run does, so no tool call runs twice
// (a read-only or retry_safe call answered "cancelled" because that
// attempt's context ended runs again, the cancellation being the
// attempt's; one whose tool's agent turn had started a call that would
// repeat an effect is in doubt instead), the messages after a resumed
// transcript's calls and Input added once, after their results, when that attempt did not get to add
// them; an attempt after one whose body returned returns what it returned. The
// counts of the result (Steps, ToolCalls, Blocked, Usage) are those of every
// attempt, and MaxSteps bounds the answers of them all.
//
// When the run is checkpointed, the transcript holding the model's tool
// calls is recorded before any of them runs (a checkpoint layer with
// after_tool saves it), and each tool result is recorded with the call it
// answers. Tool calls of the last assistant message of Messages that lack a
// result (a resumed turn that was cut short) are settled first: a call with
// a recorded result (one recorded after the call was, CallIntent.Records: an
// earlier call of the same place, id and arguments, as a shortened history
// can make, never answers it) is answered from it without running, a side-effecting
// tool that is not retry_safe without one, or a tool the policy does not
// declare (allowed by settings.allow_undeclared_tools, or no longer
// declared), or one whose tool ran an agent turn that started a call
// that would repeat an effect (CallIntent.Delegated: run again, its
// model could make that call again), ends the turn with an *InDoubtError
// and nothing runs, unless a
// layer whose shared store knows whether it started answers for it
// (ClaimVoucher: it then runs through the tool chain, and reaches the tool
// only when it never started), and the others run through the tool chain
// as in a live turn. Their results go
// right after the results already there; the messages that follow those (a
// user's message added to a resumed transcript) come after them, then
// Input, when set. A tool call of an earlier assistant message that no
// result answers before the next assistant message ends the turn before
// anything runs, with an error wrapping ErrUnansweredToolCall; so does a
// last assistant message whose calls share an id and are answered in part
// (which call a result answers is not known), the error then also holding
// an *InDoubtError for each of those calls that may have run.
//
// Each tool call the turn records has an id of its own: a call the model
// gave no id, or the id of an earlier call of the same answer, gets another
// (OwnToolCallIDs), so that each result answers one call. A call to a side-effecting
// tool with the name and arguments of an earlier call of the same answer
// does not run: it is answered that it repeats that call, which runs once
// (RepeatedCalls); a read-only call repeated runs each time.
func (pl *Pipeline) RunAgent(ctx context.Context, req AgentRequest) (_ AgentResult, err error) {
	if req.OnBlock != "" && req.OnBlock != OnBlockTellModel && req.OnBlock != OnBlockEndTurn {
		return AgentResult{}, fmt.Errorf("agent: on_block %q is not %q or %q", req.OnBlock, OnBlockTellModel, OnBlockEndTurn)
	}
	maxSteps := req.MaxSteps
	if maxSteps <= 0 {
		maxSteps = DefaultAgentMaxSteps
	}
	parallel := req.MaxParallel
	if parallel <= 0 {
		parallel = DefaultAgentMaxParallel
	}
	maxCalls := req.MaxToolCalls
	if maxCalls <= 0 {
		maxCalls = DefaultAgentMaxToolCalls
	}
	// Room for the steps a turn usually makes, not for its bound: a host's
	// bound it never means to reach (math.MaxInt) reserves nothing more.
	msgs := make([]Message, len(req.Messages), len(req.Messages)+1+2*min(maxSteps, DefaultAgentMaxSteps))
	copy(msgs, req.Messages)
	// Tool calls of the transcript's last assistant message without a
	// result are a turn cut short (a resumed run): they are settled before
	// the messages that follow their results (a resumed transcript the
	// caller added to) and the input are appended and the model is called
	// again.
	// A turn a tool call of an agent turn of the same run runs is part of
	// that turn (inAgentCall): the run's transcript is the outer turn's.
	call, plainCall := pl.inAgentCall(ctx)
	at, pending, ins, err := pendingCalls(msgs)
	if err != nil {
		// Calls sharing an id, not all answered: any of them may be the
		// one without a result, so each that may have run is in doubt,
		// as the run recorded it.
		t := agentTurn{pl: pl, call: call, plainCall: plainCall, msgs: msgs}
		records := pl.callRecords(ctx)
		for _, k := range pending {
			err = errors.Join(err, t.unansweredDoubt(ctx, at, msgs[at].ToolCalls[k], records))
		}
		return AgentResult{Messages: msgs}, err
	}
	if err := unansweredBefore(msgs); err != nil {
		return AgentResult{Messages: msgs}, err
	}
	if len(pending) > maxCalls {
		// No turn of this bound left such an answer (tooMany answers
		// one): a host's transcript, or a turn of a higher bound. Some
		// of the calls may have run, so they are not answered "not run".
		return AgentResult{Messages: msgs}, fmt.Errorf("agent: message %d (assistant) has %d tool calls without a result, more than the %d a step may make (MaxToolCalls): %w; "+
			"answer them (or remove them), or run the turn with a MaxToolCalls of at least %d", at, len(pending), maxCalls, ErrUnansweredToolCall, len(pending))
	}
	var tail []Message
	if len(pending) > 0 {
		tail = slices.Clone(msgs[ins:])
		msgs = msgs[:ins]
	}
	input := req.Input
	if input != "" {
		if len(pending) == 0 {
			msgs = append(msgs, Message{Role: "user", Content: input})
		}
	} else {
		input = lastUserText(append(msgs, tail...))
	}
	var res AgentResult
	// The transcript's indexes of the first and the last answers whose
	// text the body handed the turn chain (-1: none): every answer of a
	// turn that returned, every answer of one that failed other than
	// final. The output is what the turn chain let through: a
	// content_filter or an after-phase guard that refused it, or the text
	// of one of those answers (TurnCall.Earlier), leaves none, and no
	// answer of the turn keeps its text in the transcript either
	// (onRefused). It is withheld before the turn's end is recorded (a
	// checkpoint's save, wherever the layer stands in the chain), so no
	// version holds the refused text.
	first, last := -1, -1
	if call == "" {
		release, err := pl.holdAgent(ctx)
		if err != nil {
			return AgentResult{Messages: msgs}, err
		}
		defer release()
	}
	record := func(ctx context.Context, msgs []Message) {
		if call == "" {
			pl.RecordTranscript(ctx, msgs)
		}
	}
	// handOver hands the turn chain the text of the answers of the turn
	// ended with err (TurnCall.Earlier), and has it withheld on refusal.
	handOver := func(ctx context.Context, turn *agentTurn, err error) {
		first, last = -1, -1
		switch {
		case err == nil:
			first, last = turn.first, turn.answer
			AddEarlier(ctx, turn.earlier())
		case !Classify(err).Final():
			// The text of a turn that failed is no output, but its
			// answers' text is in the transcript the host gets: unless
			// the turn ended final (blocked, over budget, in doubt: the
			// layers keep that first reason), the turn chain reads it.
			if first, last = turn.answers(); first >= 0 {
				AddEarlier(ctx, turn.texts(first, last+1))
			}
		}
		if first >= 0 {
			onRefused(ctx, func() {
				res.Messages = withholdTexts(res.Messages, first, last)
				record(ctx, res.Messages)
			})
		}
	}
	// An attempt after the first (a layer of the turn chain ran the layers
	// inside it again) continues the transcript the attempt before left,
	// as a resumed run does, rather than start the turn again: no tool call
	// of the turn runs twice, and its counts add to theirs: their model
	// calls were made (and are billed), their answers count towards
	// MaxSteps. The attempt after a body that returned returns what it
	// returned.
	var prev *agentTurn
	var prevErr error
	// Run in a turn's body (a host's turn, a tool of an agent turn), the
	// calls are the outermost turn's to report, when it ends: the layers
	// of the turns between see the error as it is.
	ran := ranEffectsOf(ctx)
	if ran == nil {
		ran = &ranEffects{}
		ctx = context.WithValue(ctx, ranEffectsKey{}, ran)
		defer func() { err = ran.wrap(err) }()
	}
	tr, err := pl.runTurn(ctx, TurnRequest{Input: input, Session: req.Session}, func(ctx context.Context) (string, error) {
		first, last = -1, -1
		if prev != nil && prevErr == nil {
			handOver(ctx, prev, nil)
			return res.Output, nil
		}
		// The messages after the settled calls' results, and the input
		// when those calls were pending, go in once they are settled.
		base, at, pending, tail, addInput := msgs, at, pending, tail, req.Input != "" && len(pending) > 0
		turn := agentTurn{pl: pl, req: &req, parallel: parallel, maxCalls: maxCalls, res: &res, first: -1, answer: -1, offered: OfferedTools(req.Params), call: call, plainCall: plainCall, ran: ran}
		output, finish := "", res.FinishReason
		if prev != nil {
			// What the attempt before left: its transcript (less the
			// results its end cancelled), its answers (an answer it
			// dropped is not one), and the tail and input unless it
			// added them (it got past settle).
			turn.made, turn.retried = prev.made, true
			base, turn.rerun = prev.uncancelled(ctx)
			turn.first, turn.answer = prev.answers()
			if turn.answer >= 0 {
				output = base[turn.answer].Text()
			}
			var ins int
			var err error
			if at, pending, ins, err = pendingCalls(base); err != nil {
				return "", err
			}
			if prev.settled {
				tail, addInput = nil, false
				if len(pending) > 0 {
					tail, base = slices.Clone(base[ins:]), base[:ins]
				}
			}
		}
		res = AgentResult{Steps: res.Steps, ToolCalls: res.ToolCalls, Blocked: res.Blocked, Usage: res.Usage, Output: output, FinishReason: finish}
		turn.msgs = base
		var err error
		if len(pending) > 0 {
			err = turn.settle(ctx, at, pending)
		}
		if err == nil {
			turn.msgs = append(turn.msgs, tail...)
			if addInput {
				turn.msgs = append(turn.msgs, Message{Role: "user", Content: req.Input})
			}
			turn.settled = true
			err = turn.run(ctx, maxSteps)
		}
		prev, prevErr = &turn, err
		res.Messages = turn.msgs
		record(ctx, turn.msgs)
		handOver(ctx, &turn, err)
		if err != nil {
			return "", err
		}
		return res.Output, nil
	}, true)
	res.Attempts = tr.Attempts
	res.Output = tr.Output
	if res.Messages == nil {
		res.Messages = msgs
	}
	if outer := pl.enclosingTurn(ctx); outer != nil && call == "" && first >= 0 && !tr.Withheld {
		pl.nestIn(ctx, outer, res.Messages, first, last)
	}
	return res, err
}

// ranEffectsKey is the context key of the ranEffects of the outermost
// turn.
type ranEffectsKey struct{}

// ranEffectsOf returns the ranEffects of the outermost turn ctx is run in,
// nil outside a turn.
func ranEffectsOf(ctx context.Context) *ranEffects {
	r, _ := ctx.Value(ranEffectsKey{}).(*ranEffects)
	return r
}

// ranEffects collects the calls of an agent turn, over its attempts, that
// ran and would repeat an effect if made again: the turn's error says so
// (RanCallsError).
type ranEffects struct {
	mu    sync.Mutex
	calls []ToolUse
}

// add notes that call ran.
func (r *ranEffects) add(call ToolUse) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, call)
}

// wrap returns err, the turn's error, in a *RanCallsError when calls that
// would repeat an effect ran.
func (r *ranEffects) wrap(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil || len(r.calls) == 0 {
		return err
	}
	return &RanCallsError{Err: err, Calls: slices.Clone(r.calls)}
}

// reached reports whether a call made with ctx that ended with err (nil:
// it succeeded) reached its tool, or may have: its failure does not prove
// it did not run (DidNotRun), nor is it a guard's or a budget's refusal
// before it ran, nor the end of ctx before the tool ran (the runtime marks
// ErrMayHaveRun the end of a call whose tool was running).
func reached(ctx context.Context, err error) bool {
	if err == nil {
		return true
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) && !errors.Is(err, ErrMayHaveRun) {
		return false
	}
	if c := Classify(err); (c == ClassBlocked || c == ClassBudget) && !errors.Is(err, ErrRan) {
		return false
	}
	if refusedInDoubt(err) {
		return false
	}
	return !DidNotRun(err)
}

// refusedInDoubt reports whether err refused a call in doubt (an
// *InDoubtError: an earlier execution may have acted) with nothing run
// now: neither marked as having run (ErrRan, as an agent turn's
// *RanCallsError is) nor as having perhaps run now (ErrMayHaveRun). The
// call is not one the turn ran, whichever layer found it in doubt.
func refusedInDoubt(err error) bool {
	var d *InDoubtError
	return errors.As(err, &d) && !errors.Is(err, ErrRan) && !errors.Is(err, ErrMayHaveRun)
}

// inAgentCall returns the record key of the tool call of an agent turn
// that ctx runs in, when that turn is of ctx's run and of pl (a tool that runs an
// agent turn of its own, as two calls of one answer may at once), or "".
// Such a turn is part of the outer one: it records neither the run's
// transcript nor the calls it makes (the outer turn's, which a version
// saved meanwhile holds and a resume continues), its calls' records are
// named apart from the outer turn's (agentTurn.key), and its text reaches
// the outer turn's host only as the tool's result, which the outer model
// reads: it is not handed to the outer turn chain (nestIn).
//
// plain is the call's record key with the arguments' digests plain
// (agentTurn.plainKey), "" without a digest key.
func (pl *Pipeline) inAgentCall(ctx context.Context) (key, plain string) {
	c := pl.agentCallOf(ctx)
	if c == nil || c.key == "" || pl.enclosingTurn(ctx) == nil {
		return "", ""
	}
	return c.key, c.plain
}

// holdAgent holds, while runs are recorded, the turn whose body ctx is
// (enclosingTurn: a host's turn running agent turns), or the outermost
// turn it is nested in, for an agent turn, which records its transcript
// as the run's: a second one while another runs in the same turn, or in
// a turn nested in it, is refused (ErrRunBusy), as a second turn of the
// run is (holdTurn); one after the other, each continues the transcript.
// It returns what releases the turn.
func (pl *Pipeline) holdAgent(ctx context.Context) (func(), error) {
	c := pl.enclosingTurn(ctx)
	if c == nil {
		return func() {}, nil
	}
	release, ok := pl.hold(c.outermost)
	if !ok {
		return nil, NotRun(fmt.Errorf("agent: run %q: %w (one agent turn of a run at a time while its transcript is recorded, in a turn's body too)", c.Meta.Run.ID, ErrRunBusy))
	}
	return release, nil
}

// nestIn hands an agent turn run in the body of an outer turn of the same
// run and pipeline (enclosingTurn: a scenario's turn step around an agent
// step) to it: the outer chain's layers read the text of each of its
// answers (TurnCall.Earlier), and a refusal of the outer turn withholds
// them from the run's recorded transcript, as the agent's own chain's
// refusal does, when that transcript still holds them where the agent
// left them. When outer is nested in turn, and its chain lets it through,
// it hands them on (TurnCall.handOver).
func (pl *Pipeline) nestIn(ctx context.Context, outer *TurnCall, msgs []Message, first, last int) {
	if first < 0 || last < first || last >= len(msgs) {
		return
	}
	outer.mu.Lock()
	defer outer.mu.Unlock()
	for _, m := range msgs[first : last+1] {
		if text := m.Text(); m.Role == "assistant" && text != "" {
			outer.earlier = append(outer.earlier, text)
		}
	}
	outer.withhold = append(outer.withhold, func() {
		cur := pl.Transcript(ctx)
		if len(cur) <= last {
			return
		}
		for i := first; i <= last; i++ {
			if cur[i].Role != msgs[i].Role || cur[i].Text() != msgs[i].Text() || len(cur[i].ToolCalls) != len(msgs[i].ToolCalls) {
				return
			}
		}
		pl.RecordTranscript(ctx, withholdTexts(cur, first, last))
	})
}

// withholdTexts returns msgs without the text of the assistant messages
// from index first to index last (the answers of a turn whose output was
// refused): their tool calls and thinking stay, with the tool results
// after them; an answer without tool calls goes whole.
func withholdTexts(msgs []Message, first, last int) []Message {
	out := slices.Clone(msgs)
	for at := last; at >= first; at-- {
		if out[at].Role != "assistant" {
			continue
		}
		if len(out[at].ToolCalls) == 0 {
			out = slices.Delete(out, at, at+1)
			continue
		}
		out[at] = out[at].DeleteParts(func(p ContentPart) bool { return p.Type == PartText })
		out[at].Content = ""
	}
	return out
}

// WithholdAnswerTexts returns msgs without the text of the assistant
// messages from index from on, as RunAgent withholds the text of a turn
// whose output a layer refused: an answer with tool calls keeps them, its
// thinking and their results; one without goes whole. A host that runs an
// agent turn inside a turn of its own (Pipeline.Turn) withholds so, from
// the transcript it keeps, the answers of the agent turn (from the length
// of its AgentRequest.Messages) when its own turn is refused.
func WithholdAnswerTexts(msgs []Message, from int) []Message {
	if from < 0 {
		from = 0
	}
	if from >= len(msgs) {
		return slices.Clone(msgs)
	}
	return withholdTexts(msgs, from, len(msgs)-1)
}

// earlier returns the text of each answer of the turn before its last one
// that wrote any (TurnCall.Earlier).
func (t *agentTurn) earlier() []string {
	if t.first < 0 || t.answer < t.first {
		return nil
	}
	return t.texts(t.first, t.answer)
}

// texts returns the text of each assistant message of t.msgs[from:to]
// that has any.
func (t *agentTurn) texts(from, to int) []string {
	var texts []string
	for _, m := range t.msgs[from:to] {
		if m.Role == "assistant" {
			if text := m.Text(); text != "" {
				texts = append(texts, text)
			}
		}
	}
	return texts
}

// answers returns the indexes of the first and the last answers of the
// turn in t.msgs (-1, -1: none; an answer left out of it, as run leaves
// one whose calls' intent could not be recorded, is not counted).
func (t *agentTurn) answers() (first, last int) {
	if t.first < 0 || t.first >= len(t.msgs) {
		return -1, -1
	}
	for i := len(t.msgs) - 1; i >= t.first; i-- {
		if t.msgs[i].Role == "assistant" {
			return t.first, i
		}
	}
	return -1, -1
}

// agentTurn is the state of one attempt of an agent turn.
type agentTurn struct {
	pl       *Pipeline
	req      *AgentRequest
	parallel int
	// maxCalls bounds the tool calls of one answer (tooMany).
	maxCalls int
	msgs     []Message
	res      *AgentResult
	// first and answer are the indexes of the first and the last model
	// answers appended (-1: none); made counts the model answers of the
	// turn, those of the attempts before included (MaxSteps bounds them).
	first, answer int
	made          int
	// retried is set for an attempt after the first: the calls it settles
	// are an earlier attempt's, counted in ToolCalls by it.
	retried bool
	// settled is set once the attempt settled the calls left without a
	// result and added the messages after them and the input: an attempt
	// after one that did not adds them itself.
	settled bool
	// cancelled names (by id) the calls of the last step answered
	// "cancelled" because the attempt's context ended: an attempt after
	// runs those that may run again (uncancelled).
	cancelled []string
	// rerun holds the record keys of the calls of an attempt before that
	// its end cancelled, which settle runs again rather than answer from
	// their records (the cancellation).
	rerun map[string]bool
	// offered names the tools the turn offers the model (OfferedTools);
	// nil: whatever the tool chain admits.
	offered map[string]bool
	// call is the record key of the outer agent turn's tool call that
	// runs this one, "" for a turn of its own (inAgentCall); plainCall
	// that key with plain digests, with a digest key (plainKey).
	call, plainCall string
	// ran collects the calls of the turn's attempts that ran and would
	// repeat an effect if made again.
	ran *ranEffects
	// resumed holds the calls settle runs although they may have started
	// before (by record key), with what their turn recorded of them: a
	// layer's shared store says whether they did (ClaimVoucher).
	resumed map[string]ResumedIntent
	// plainFirst holds the calls settle runs (by record key) that their
	// turn recorded with plain digests, before the digest key was set
	// (firstForm): their tools get the idempotency key derived from the
	// plain digest of their arguments, the one their first execution got.
	plainFirst map[string]bool
}

// billed is the usage resp's model calls billed: each charge when more
// than the call that served it billed (a retried attempt, a fallback, a
// hedge's racer, whose usage the response's Usage leaves out), else its
// Usage, and the charges of the layers' own calls (a judge's verdict, a
// summary).
func billed(resp *ChatResponse) Usage {
	u := resp.Usage
	if resp.Charges != nil {
		u = Usage{}
		for _, c := range resp.Charges {
			u.Add(c.Usage)
		}
	}
	for _, c := range resp.OwnCharges {
		u.Add(c.Usage)
	}
	return u
}

// run makes the turn's model calls until an answer without tool calls, or
// until the turn has maxSteps answers (an earlier attempt's included). The
// steps OnDelta sees go on from the model calls the turn made.
func (t *agentTurn) run(ctx context.Context, maxSteps int) error {
	for t.made < maxSteps {
		t.res.Steps++
		resp, msg, err := t.chat(ctx, t.res.Steps)
		t.res.Usage.Add(billed(&resp))
		t.res.FinishReason = resp.FinishReason
		t.res.Output = resp.Text
		if err != nil {
			return err
		}
		calls := OwnToolCallIDs(msg.ToolCalls)
		msg.ToolCalls = calls
		t.msgs = append(t.msgs, msg)
		t.answer = len(t.msgs) - 1
		t.made++
		if t.first < 0 {
			t.first = t.answer
		}
		if len(calls) == 0 {
			t.res.Stop = StopDone
			return nil
		}
		t.res.ToolCalls += len(calls)
		if len(calls) > t.maxCalls {
			// None of them runs, so none is recorded as made: a run
			// resumed from a save before these answers asks the model
			// again.
			t.msgs = appendAnswers(t.msgs, t.tooMany(calls))
			continue
		}
		if len(calls) > 1 && serial(&t.req.Params) {
			// As above: the turn allows one call an answer.
			t.msgs = appendAnswers(t.msgs, notSerial(calls))
			continue
		}
		at := len(t.msgs) - 1
		if err := t.intent(ctx, at, calls); err != nil {
			// None of the calls ran: the answer that asked for them
			// leaves the transcript, so that a run resumed from the
			// turn's end asks the model again rather than take them
			// for calls that may have run (in doubt).
			// Nor does it count: not towards MaxSteps, nor as the
			// turn's first answer (an attempt after goes on from what
			// is left).
			t.msgs, t.made = t.msgs[:at], t.made-1
			if t.first == at {
				t.first = -1
			}
			t.first, t.answer = t.answers()
			return err
		}
		results, err := t.tools(ctx, at, calls, t.pl.RepeatedCalls(calls))
		t.msgs = appendAnswers(t.msgs, results)
		if err != nil {
			return err
		}
	}
	t.res.Stop = StopMaxSteps
	return nil
}

// intent records the transcript holding the model's tool calls, before any
// of them runs, and runs the pipeline's OnToolCalls hooks (a checkpoint
// layer's save): a run resumed from that save knows the calls were made.
// A hook's error ends the turn before any call runs (run leaves the answer
// out of the transcript).
func (t *agentTurn) intent(ctx context.Context, at int, calls []ToolUse) error {
	if !t.pl.recordRuns.Load() || t.call != "" {
		return nil
	}
	t.pl.RecordTranscript(ctx, t.msgs)
	t.pl.recordIntent(ctx, at, calls)
	for _, hook := range t.pl.callHooks {
		if err := hook(ctx); err != nil {
			return err
		}
	}
	return nil
}

// settle answers the calls of the assistant message at index at of the
// transcript that have no result in it (a turn cut short, resumed): a call
// whose result the run recorded is answered from that record and not run
// again; a call to a tool that is side-effecting and not retry_safe, or
// that the policy does not declare, or whose tool ran an agent turn that
// started such a call (CallIntent.Delegated), without a record may or may
// not have run (had its effect), so the turn ends with an *InDoubtError
// and no call runs (unless a
// ClaimVoucher may answer for it: resumable); the others (read-only tools, retry_safe
// tools, which get the same idempotency key, and calls that never reach a
// tool) run now. pending are the calls' indices in the message. A call
// that repeats an earlier side-effecting call of the message (RepeatedCalls) is
// answered so, as the live turn answered it, and does not run.
func (t *agentTurn) settle(ctx context.Context, at int, pending []int) error {
	all := t.msgs[at].ToolCalls
	rep := t.pl.RepeatedCalls(all)
	calls := make([]ToolUse, len(pending))
	for i, k := range pending {
		calls[i] = all[k]
	}
	records := t.pl.callRecords(ctx)
	out := make([]*Message, len(calls))
	var doubt []error
	var run []int
	var blockErr error
	for i, call := range calls {
		if j := repeatOf(rep, pending[i]); j >= 0 {
			m := repeatAnswer(call, all[j].ID)
			out[i] = &m
			continue
		}
		key, plain := t.key(at, call), t.plainKey(at, call)
		switch form, name := t.firstForm(ctx, at, call, key, plain, records); form {
		case formPlain:
			if t.plainFirst == nil {
				t.plainFirst = map[string]bool{}
			}
			t.plainFirst[key] = true
		case formKeyed:
			if err := t.keyedFirst(ctx, call, name, records); err != nil {
				doubt = append(doubt, err)
				continue
			}
		}
		if r, ok := lastRecord(records, call.Name, key, plain); ok && !r.InDoubt && !t.rerun[key] {
			m := recordAnswer(call, r)
			out[i] = &m
			if r.Class == ClassBlocked.String() && t.req.OnBlock == OnBlockEndTurn && blockErr == nil {
				// The live turn ended on this refusal; so does this one.
				blockErr = &BlockedError{Layer: r.Layer, Message: r.Reason}
			}
			continue
		}
		delegated, recorded, err := t.recordedDoubt(ctx, call, key, plain, t.plainFirst[key], records)
		if err != nil {
			if intent, ok := t.pl.resumable(ctx, call, recorded, key, plain); ok {
				// A layer's shared store knows whether it ever started.
				if t.resumed == nil {
					t.resumed = map[string]ResumedIntent{}
				}
				t.resumed[key] = intent
				run = append(run, i)
				continue
			}
			doubt = append(doubt, delegatedDoubt(err, call, delegated))
			continue
		}
		run = append(run, i)
	}
	if len(doubt) > 0 {
		return errors.Join(doubt...)
	}
	if len(run) > 0 {
		sub := make([]ToolUse, len(run))
		for j, i := range run {
			sub[j] = calls[i]
		}
		if !t.retried {
			t.res.ToolCalls += len(sub)
		}
		results, err := t.tools(ctx, at, sub, nil)
		for j, i := range run {
			out[i] = &results[j]
		}
		if err != nil {
			t.appendOut(out)
			return errors.Join(blockErr, err)
		}
	}
	t.appendOut(out)
	// The live turn ran the step's other calls and ended on the refusal
	// (on_block end_turn); so does this one.
	return blockErr
}

// recordedDoubt returns the *InDoubtError of a call without a record
// answering it, whose record key is key (plain its key of before a digest
// key), or nil (callInDoubtAs, plainFirst as there), and whether the run
// recorded it so that it is in doubt whatever its tool (recorded): a
// record in doubt (InDoubtRecorded), or a tool that ran an agent turn
// that started calls that would repeat an effect (delegated, those
// calls; InDoubtDelegated), which no layer can say never started.
func (t *agentTurn) recordedDoubt(ctx context.Context, call ToolUse, key, plain string, plainFirst bool, records []ToolRecord) (delegated []DelegatedCall, recorded bool, err error) {
	r, ok := lastRecord(records, call.Name, key, plain)
	delegated = t.pl.delegatedOf(ctx, key, plain)
	recorded = ok && r.InDoubt || len(delegated) > 0
	err = t.pl.callInDoubtAs(ctx, call, recorded, plainFirst)
	if d, isDoubt := err.(*InDoubtError); isDoubt {
		switch {
		case ok && r.InDoubt:
			d.Reason = InDoubtRecorded
		case len(delegated) > 0:
			d.Reason = InDoubtDelegated
		}
	}
	return delegated, recorded, err
}

// callInDoubt returns the *InDoubtError (layer checkpoint) of a call
// without a result that may have run and that running again could repeat,
// or nil: a call recorded in doubt, or one to a tool that is side-effecting
// and not retry_safe, or that the policy does not declare (now: settings.
// allow_undeclared_tools let it run, or a reload dropped its declaration),
// which has no declaration to say it is free of effect (it is never run
// again nor answered with the refusal the tool chain would make now). A
// call whose arguments are not a JSON object never reached a tool.
func (pl *Pipeline) callInDoubt(ctx context.Context, call ToolUse, recorded bool) error {
	return pl.callInDoubtAs(ctx, call, recorded, false)
}

// callInDoubtAs is callInDoubt for a call that its turn recorded with
// plain digests, before the digest key was set, when plainFirst
// (agentTurn.plainFirst): the error names the key its tool got then,
// derived from the plain digest (plainDerivedKey), as a retry of it gets.
func (pl *Pipeline) callInDoubtAs(ctx context.Context, call ToolUse, recorded, plainFirst bool) error {
	treq, err := call.Request()
	e := pl.toolEntry(call.Name)
	undeclared := e == nil || !e.known
	if !recorded && (err != nil || !undeclared && !(e.info.SideEffecting && !e.info.RetrySafe)) {
		return nil
	}
	c := &ToolCall{Name: treq.Name, Args: treq.Args, Meta: Meta{Run: RunOf(ctx)}, digester: pl.digester}
	if e != nil && len(pl.keyers) > 0 {
		// The key the tool would have got: the one to settle the call by.
		c.Tool = &e.info
		pl.keyCall(ctx, c)
	}
	if plainFirst {
		plainDerivedKey(c)
	}
	d := &InDoubtError{Layer: LayerCheckpoint, Tool: call.Name, IdempotencyKey: c.IdempotencyKey()}
	if undeclared {
		d.Reason = InDoubtUndeclared
	}
	return d
}

func (t *agentTurn) appendOut(out []*Message) {
	for _, m := range out {
		if m != nil && m.Role != "" {
			t.msgs = append(t.msgs, *m)
		}
	}
}

// appendAnswers appends the tool messages of results, leaving out the
// calls left unanswered (in doubt: no message).
func appendAnswers(msgs, results []Message) []Message {
	for _, m := range results {
		if m.Role != "" {
			msgs = append(msgs, m)
		}
	}
	return msgs
}

// pendingCalls returns the index of the transcript's last assistant
// message, the indices of its tool calls that no message after it answers,
// and the index where their answers go: after the results that follow it
// (tool messages, and user messages of tool_result parts alone, with the
// images of those results), before any
// other message a caller added after them (a resumed transcript followed
// by new messages). Calls that share an id of which some but not all are
// answered are an error wrapping ErrUnansweredToolCall, returned with the
// indices of those calls: which of them a result answers is not known.
func pendingCalls(msgs []Message) (at int, pending []int, ins int, err error) {
	at = -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			at = i
			break
		}
	}
	if at < 0 || len(msgs[at].ToolCalls) == 0 {
		return -1, nil, len(msgs), nil
	}
	// answers counts the results naming each call id: only a tool message
	// and a tool_result part answer a call (a user's message, whose
	// ToolCallID is empty, does not answer a call without an id), and each
	// result answers one call.
	answers := map[string]int{}
	ins = at + 1
	for i, m := range msgs[at+1:] {
		countAnswers(answers, m)
		results := m.Role == "tool"
		if !results && m.Role == "user" && len(m.Parts) > 0 && m.Content == "" {
			// The images a tool returned are parts of its result.
			results = !slices.ContainsFunc(m.Parts, func(p ContentPart) bool {
				return p.Type != PartToolResult && (p.Type != PartImage || p.ToolCallID == "")
			})
		}
		if results && ins == at+1+i {
			ins++
		}
	}
	calls := msgs[at].ToolCalls
	for k, c := range calls {
		if n := answers[c.ID]; n > 0 {
			if shared := callsOf(calls, c.ID); len(shared) > n {
				return at, shared, ins, fmt.Errorf("agent: message %d (assistant) has %d tool calls of id %q and results for %d of them: which of them a result answers is not known: %w; "+
					"give each call an id of its own (and its result that id) before running the turn", at, len(shared), c.ID, n, ErrUnansweredToolCall)
			}
			answers[c.ID]--
			continue
		}
		pending = append(pending, k)
	}
	return at, pending, ins, nil
}

// callsOf returns the indices of the calls of id.
func callsOf(calls []ToolUse, id string) []int {
	var out []int
	for i, c := range calls {
		if c.ID == id {
			out = append(out, i)
		}
	}
	return out
}

// OwnToolCallIDs returns calls, each with an id of its own: a call whose id is
// empty or that an earlier call of calls has gets <id>_<n> (call_<n> for
// an empty one), n its position from 1, lengthened with _<n> while another
// call has that id. A model that gives two calls one id (or none) would
// otherwise have their results told apart by their order alone, and a
// provider may refuse the transcript. calls is not modified. RunAgent
// records each answer's calls so; agentc serve relays them so.
func OwnToolCallIDs(calls []ToolUse) []ToolUse {
	if distinctIDs(calls) {
		return calls // the usual answer: nothing to rename, no maps built
	}
	out := slices.Clone(calls)
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		seen[c.ID] = true
	}
	first := make(map[string]bool, len(calls))
	for i, c := range calls {
		if c.ID != "" && !first[c.ID] {
			first[c.ID] = true
			continue
		}
		base, n := c.ID, "_"+strconv.Itoa(i+1)
		if base == "" {
			base = "call"
		}
		id := base + n
		for seen[id] {
			id += n
		}
		seen[id] = true
		out[i].ID = id
	}
	return out
}

// distinctIDs reports whether every call has an id and no two share one
// (a few calls an answer: compared pairwise; more, an answer over the
// turn's bound included, through a set).
func distinctIDs(calls []ToolUse) bool {
	if len(calls) > 16 {
		seen := make(map[string]bool, len(calls))
		for _, c := range calls {
			if c.ID == "" || seen[c.ID] {
				return false
			}
			seen[c.ID] = true
		}
		return true
	}
	for i, c := range calls {
		if c.ID == "" {
			return false
		}
		for _, d := range calls[:i] {
			if d.ID == c.ID {
				return false
			}
		}
	}
	return true
}

// RepeatedCalls returns, for each call of one assistant message, the
// index of the first earlier call it repeats (-1: none), or nil when none
// repeats one: a call to a side-effecting tool (declared so, retry_safe or
// not, or whose effects nothing declares) with the same name and the same
// arguments (as JSON values) as an earlier call. RunAgent does not run a
// repeat: a model that asks twice for one refund in one answer gets one;
// agentc serve leaves it out of the answer it relays.
func (pl *Pipeline) RepeatedCalls(calls []ToolUse) []int {
	if len(calls) < 2 {
		return nil
	}
	var rep []int
	first := map[string]int{}
	for i, call := range calls {
		if e := pl.toolEntry(call.Name); e != nil && !e.info.SideEffecting {
			continue
		}
		treq, err := call.Request()
		if err != nil {
			continue
		}
		var key string
		if lossyJSON(call.Arguments) {
			// Decoded, they would read as other arguments than a
			// client's parser reads: compared as written.
			key = call.Name + "\x00\x00" + string(call.Arguments)
		} else {
			c := ToolCall{Name: treq.Name, Args: treq.Args}
			d, err := c.ArgsDigestErr()
			if err != nil {
				continue
			}
			key = call.Name + "\x00" + d
		}
		j, ok := first[key]
		if !ok {
			first[key] = i
			continue
		}
		if rep == nil {
			rep = make([]int, len(calls))
			for k := range rep {
				rep[k] = -1
			}
		}
		rep[i] = j
	}
	return rep
}

// lossyJSON reports whether Go's decoder reads the JSON text b as another
// text than it holds: it reads bytes that are not UTF-8, and an escaped
// surrogate that is not half of a pair, as U+FFFD, where a client's parser
// (Python's, JavaScript's) keeps the surrogate, so two arguments it tells
// apart would decode alike.
func lossyJSON(b []byte) bool {
	if !bytes.Contains(b, []byte(`\u`)) {
		return !utf8.Valid(b)
	}
	surrogate := func(at int) (rune, bool) {
		if at+6 > len(b) || b[at] != '\\' || b[at+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[at+2:at+6]), 16, 16)
		return rune(n), err == nil && n >= 0xD800 && n <= 0xDFFF
	}
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		r, ok := surrogate(i)
		if !ok {
			i++ // an escape of another character: its second byte
			continue
		}
		if r >= 0xDC00 {
			return true // the second half, alone
		}
		if low, ok := surrogate(i + 6); !ok || low < 0xDC00 {
			return true // the first half, alone
		}
		i += 11
	}
	return !utf8.Valid(b)
}

// repeatOf returns the call that call i repeats (RepeatedCalls), or -1.
func repeatOf(rep []int, i int) int {
	if rep == nil {
		return -1
	}
	return rep[i]
}

// repeatAnswer is the tool message of a call that repeats the call of id
// first and does not run.
func repeatAnswer(call ToolUse, first string) Message {
	text := "error: not run: this call repeats call " + first + " of the same step (the same tool and arguments), which runs once; " +
		"call the tool again in a later step if a second call is meant"
	return toolAnswer(call, text, true)
}

// ErrUnansweredToolCall is in the error RunAgent returns for a transcript
// in which an assistant message before the last has a tool call that no
// result answers before the next assistant message: model providers refuse
// such a history (OpenAI wants a tool message for every tool_call_id,
// Anthropic a tool_result for every tool_use, right after it), and whether
// the call ran is not known, so the turn does not start.
var ErrUnansweredToolCall = errors.New("a tool call has no result")

// unansweredBefore returns an error naming the first tool call of an
// assistant message before the transcript's last one (whose calls RunAgent
// settles) that no message between it and the next assistant message
// answers.
func unansweredBefore(msgs []Message) error {
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			last = i
			break
		}
	}
	for i := 0; i < last; i++ {
		if msgs[i].Role != "assistant" || len(msgs[i].ToolCalls) == 0 {
			continue
		}
		next := i + 1
		for next < len(msgs) && msgs[next].Role != "assistant" {
			next++
		}
		answers := map[string]int{}
		for _, m := range msgs[i+1 : next] {
			countAnswers(answers, m)
		}
		for _, c := range msgs[i].ToolCalls {
			if answers[c.ID] > 0 {
				answers[c.ID]--
				continue
			}
			return fmt.Errorf("agent: message %d (assistant) has tool call %q (%s) without a result before message %d (the next assistant message): %w; "+
				"append its tool result after it (or remove the call) before running the turn", i, c.ID, c.Name, next, ErrUnansweredToolCall)
		}
	}
	return nil
}

// countAnswers counts the results m holds, by the call id they name: a
// tool message answers its ToolCallID, and each tool_result part its own
// (a tool message's part naming its message's id is the same result).
func countAnswers(answers map[string]int, m Message) {
	results := m.Role == "tool"
	if results {
		answers[m.ToolCallID]++
	}
	for _, p := range m.Parts {
		if p.Type == PartToolResult && !(results && p.ToolCallID == m.ToolCallID) {
			answers[p.ToolCallID]++
		}
	}
}

// agentCallKey names a tool call of an agent turn in its run's records
// (ToolRecord.Call): the index of its assistant message, its id and the
// first 16 hex digits of the digest d makes of its arguments' JSON text
// (the SHA-256, or with a digest key KeyedDigestPrefix and the HMAC-SHA256,
// settings.digest_key_env), so that a record of another call that took
// the same place and id (a turn tried again) never answers it, and a
// reader of a checkpoint without the key cannot test guessed arguments
// against it. The text is the arguments as a checkpoint writes them
// (compact, HTML characters escaped), so that the call of a resumed
// transcript has the key its live call had; arguments that are not JSON
// are taken as they are.
func agentCallKey(d Digester, at int, call ToolUse) string {
	args := []byte(call.Arguments)
	if b, err := json.Marshal(call.Arguments); err == nil {
		args = b
	}
	h := d.New()
	h.Write(args)
	var sum [sha256.Size]byte
	prefix := ""
	if d.Keyed() {
		prefix = KeyedDigestPrefix
	}
	return strconv.Itoa(at) + ":" + call.ID + ":" + prefix + hex.EncodeToString(h.Sum(sum[:0])[:8])
}

// key names a tool call of the turn in its run's records: agentCallKey,
// after the key of the outer turn's call that runs the turn and a "/"
// (inAgentCall), so that no record of one is taken for the other's.
func (t *agentTurn) key(at int, call ToolUse) string {
	if t.call != "" {
		return t.call + "/" + agentCallKey(t.pl.digester, at, call)
	}
	return agentCallKey(t.pl.digester, at, call)
}

// plainKey is, with a digest key, the key the call had in the records of
// a run saved before the key was set (its digests plain), which a resumed
// turn still reads (settle); "" without a digest key. No record is written
// under it.
func (t *agentTurn) plainKey(at int, call ToolUse) string {
	if !t.pl.digester.Keyed() {
		return ""
	}
	if t.call != "" {
		return t.plainCall + "/" + agentCallKey(Digester{}, at, call)
	}
	return agentCallKey(Digester{}, at, call)
}

type agentCallCtxKey struct{}

// agentCall is what the context of an agent turn's tool call carries: the
// call's record key, the pipeline and the run of its turn, whether its
// tool runs (the context is the tool's, and a call of the tool chain made
// with it is the tool's own, not the agent's call), and the call of an
// agent turn that its turn runs in, if any (a tool of one pipeline's
// agent turn running another pipeline's). The tool of a call made outside
// an agent turn's call (the host's, a tool's own) runs with a node of no
// turn (pl nil, key ""), which no lookup of a turn's call finds: it only
// takes the marks of the agent turns and own calls the tool runs, for the
// call.
type agentCall struct {
	key string
	// plain is key with plain digests, with a digest key
	// (agentTurn.plainKey).
	plain  string
	inTool bool
	// marks holds what the agent turns and own calls of the tool, while
	// it runs for the call of the tool chain that the node is of (inTool),
	// started or ran (markDelegated, markRan), which that call takes when
	// the tool returns (takeMarks). A mark is made on the node, never on
	// the call, which is recycled once it returns: a goroutine the tool
	// left running may mark the node after that, which then marks nothing.
	marks atomic.Uint32
	pl    *Pipeline
	run   string
	up    *agentCall
	// plainFirst names the call's tool when the call is one a resumed turn
	// runs that its turn recorded with plain digests (agentTurn.plainFirst):
	// its tool gets the idempotency key derived from them (givePlainKey).
	plainFirst string
}

// The marks of an agentCall.
const (
	// markStarted: an agent turn the tool ran started a call that would
	// repeat an effect (ToolCall.delegated).
	markStarted uint32 = 1 << iota
	// markReached: such a call, or one of the tool's own, reached its
	// tool, or may have (ToolCall.delegatedRan).
	markReached
)

// takeMarks gives c, the call of the tool chain whose tool ran with ac
// (inToolOf) and has returned, what ac was marked with while it ran.
func (ac *agentCall) takeMarks(c *ToolCall) {
	m := ac.marks.Load()
	if m&markStarted != 0 {
		atomic.StoreInt32(&c.delegated, 1)
	}
	if m&markReached != 0 {
		atomic.StoreInt32(&c.delegatedRan, 1)
	}
}

// withAgentCall returns ctx for the tool call of pl's agent turn whose
// record key is key (plain with plain digests), and what it carries of
// the call.
func (pl *Pipeline) withAgentCall(ctx context.Context, key, plain string) (context.Context, *agentCall) {
	up, _ := ctx.Value(agentCallCtxKey{}).(*agentCall)
	c := &agentCall{key: key, plain: plain, pl: pl, run: runID(ctx), up: up}
	return context.WithValue(ctx, agentCallCtxKey{}, c), c
}

// agentCallOf returns the nearest tool call of an agent turn of pl and of
// ctx's run that ctx is of (the call's, or its tool's: inAgentCall), nil
// if none.
func (pl *Pipeline) agentCallOf(ctx context.Context) *agentCall {
	id := runID(ctx)
	for c, _ := ctx.Value(agentCallCtxKey{}).(*agentCall); c != nil; c = c.up {
		if c.pl == pl && c.run == id {
			return c
		}
	}
	return nil
}

// agentRecordOf returns the record key the outcome of pl's tool call of
// ctx is recorded under (ToolRecord.Call): the agent turn's call's, ""
// for a call that the tool of an agent turn's call made, which answers no
// call of the turn, and for one that is no call of pl's agent turn.
func (pl *Pipeline) agentRecordOf(ctx context.Context) string {
	c, _ := ctx.Value(agentCallCtxKey{}).(*agentCall)
	if c == nil || c.inTool || c.pl != pl {
		return ""
	}
	return c.key
}

// inToolOf returns ctx for the tool of a call to run with. For an agent
// turn's call, the calls the tool makes through the tool chain are its own,
// recorded under no call of the turn (agentRecordOf), and none is the
// resumed call its own is (ResumedCall), which a layer would judge by what
// the turn recorded of the resumed one. Any other call (the host's, or the
// own call of an agent turn's tool) gets a node of no turn (pl nil), so that
// an agent turn its tool runs flags it too (markDelegated).
//
// The *agentCall returned is marked while the tool runs; the caller
// gives the call its marks when the tool returns (takeMarks).
func inToolOf(ctx context.Context) (context.Context, *agentCall) {
	c, ok := ctx.Value(agentCallCtxKey{}).(*agentCall)
	if !ok || c.inTool {
		// One allocation: the node and the context that carries it.
		hc := &callCtx{Context: ctx}
		hc.ac = agentCall{inTool: true, run: runID(ctx), up: c}
		return hc, &hc.ac
	}
	tool := &agentCall{key: c.key, plain: c.plain, inTool: true, pl: c.pl, run: c.run, up: c.up}
	ctx = context.WithValue(ctx, agentCallCtxKey{}, tool)
	if resumedOf(ctx) != nil {
		ctx = context.WithValue(ctx, resumedCallKey{}, (*resumedCall)(nil))
	}
	return ctx, tool
}

// callCtx is the context of the tool of a call made outside an agent
// turn's call (inToolOf): it carries the call's node.
type callCtx struct {
	context.Context
	ac agentCall
}

// Value implements context.Context.
func (c *callCtx) Value(key any) any {
	if key == (agentCallCtxKey{}) {
		return &c.ac
	}
	return c.Context.Value(key)
}

// markDelegated flags the calls of the tool chain whose tools run the
// agent turn of ac, at any depth, as having started a call that would
// repeat an effect (ToolCall.Delegated): run again, each would run that
// turn anew, whose model could make the call again.
func markDelegated(ac *agentCall) {
	for c := ac.up; c != nil; c = c.up {
		if c.inTool {
			c.marks.Or(markStarted)
		}
	}
}

// markRan flags the call of the tool chain that ac carries (its tool
// running), if any, and those whose tools run it, at any depth, as having
// run a call that would repeat an effect: one that reached its tool, or
// may have (reached), made by an agent turn the tool ran (ac.up: the
// turn's call) or by the tool itself (ac: its own call). A refusal such a
// tool returns after that, which says it did not run, does not hold for
// its call (ranUnder).
func markRan(ac *agentCall) {
	for c := ac; c != nil; c = c.up {
		if c.inTool {
			c.marks.Or(markReached)
		}
	}
}

// ranInTool is markRan for a call that the tool of another call made of
// its own (ctx is that tool's: inToolOf), none for any other call (an
// agent turn's call, flagged by its turn, or the host's).
func ranInTool(ctx context.Context) {
	if ac, ok := ctx.Value(agentCallCtxKey{}).(*agentCall); ok && ac.inTool {
		markRan(ac)
	}
}

// lastRecord returns the last record of the run answering the call of
// tool under key, or under plain, its key of before a digest key
// (agentTurn.plainKey), when not "".
func lastRecord(records []ToolRecord, tool, key, plain string) (ToolRecord, bool) {
	for i := len(records) - 1; i >= 0; i-- {
		if r := records[i]; (r.Call == key || plain != "" && r.Call == plain) && r.Tool == tool {
			return r, true
		}
	}
	return ToolRecord{}, false
}

// recordAnswer is the tool message of a call answered from its record,
// worded as the live turn worded it (tool).
func recordAnswer(call ToolUse, r ToolRecord) Message {
	text, isErr := "", false
	if r.Error != "" {
		isErr = true
		switch r.Class {
		case ClassBlocked.String():
			text = refusalText(r.Layer, r.Reason)
		case ClassBudget.String():
			text = budgetText
		default:
			text = "error: the tool failed: " + r.Error
		}
	} else if s, err := resultText(r.Result); err == nil {
		text = s
	} else {
		text, isErr = "error: the tool's result could not be encoded: "+err.Error(), true
	}
	return toolAnswer(call, text, isErr)
}

// chat makes the model call of one step and returns its response and the
// assistant message that carries the answer back to the model: its
// thinking blocks, text and tool calls in the order they began
// (BlockOrder.message).
func (t *agentTurn) chat(ctx context.Context, step int) (ChatResponse, Message, error) {
	creq := t.req.Params
	creq.Model, creq.Messages = t.req.Model, t.msgs
	var acc struct {
		text     strings.Builder
		calls    ToolCallBuilder
		thinking ThinkingBuilder
		order    BlockOrder
		err      error // a thinking fragment refused
	}
	onDelta := t.req.OnDelta
	resp, err := t.pl.Stream(ctx, creq, func(d Delta) bool {
		if acc.err = acc.thinking.Add(&d); acc.err != nil {
			return false
		}
		acc.text.WriteString(d.Text)
		acc.calls.Add(&d)
		acc.order.Add(&d)
		if onDelta != nil {
			onDelta(step, d)
		}
		return true
	})
	if err == nil {
		err = acc.err
	}
	resp.Text = acc.text.String()
	resp.Thinking = acc.thinking.Blocks()
	resp.ToolCalls = acc.calls.ToolCalls()
	msg := acc.order.message(resp.Text, resp.Thinking, slices.Clone(resp.ToolCalls))
	return resp, msg, err
}

// tools runs the calls of one step through the tool chain, at most
// t.parallel at once, and returns their results in the order of the calls.
// A call that repeats another (rep, see RepeatedCalls) is answered so and does
// not run. The error ends the turn: a budget error, a call in doubt, a
// block under end_turn, or ctx's end.
func (t *agentTurn) tools(ctx context.Context, at int, calls []ToolUse, rep []int) ([]Message, error) {
	out := make([]Message, len(calls))
	errs := make([]error, len(calls))
	blocked := make([]bool, len(calls))
	sem := make(chan struct{}, t.parallel)
	var wg sync.WaitGroup
	// A panic of a tool (or of a layer) would end the process from this
	// goroutine, out of the host's reach: the first one is kept, the
	// step's other calls finish, and it is raised again, with its value,
	// on the caller's goroutine, as a call made there would raise it.
	var panicOnce sync.Once
	var panicked bool
	var panicValue any
	for i := range calls {
		if j := repeatOf(rep, i); j >= 0 {
			out[i] = repeatAnswer(calls[i], calls[j].ID)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() {
				if p := recover(); p != nil {
					panicOnce.Do(func() { panicked, panicValue = true, p })
				}
				<-sem
				wg.Done()
			}()
			key := t.key(at, calls[i])
			cctx, ac := t.pl.withAgentCall(ctx, key, t.plainKey(at, calls[i]))
			if t.plainFirst[key] {
				ac.plainFirst = calls[i].Name
				plainFirstInFlight.Add(1)
				defer plainFirstInFlight.Add(-1)
			}
			if intent, ok := t.resumed[key]; ok {
				var done func()
				cctx, done = withResumedCall(cctx, calls[i].Name, intent)
				defer done()
			}
			out[i], blocked[i], errs[i] = t.tool(cctx, calls[i], ac)
		}()
	}
	wg.Wait()
	if panicked {
		panic(panicValue)
	}
	t.cancelled = nil
	for i := range calls {
		if blocked[i] {
			t.res.Blocked++
		}
		if errs[i] != nil && out[i].Role != "" && errs[i] == ctx.Err() {
			t.cancelled = append(t.cancelled, calls[i].ID)
		}
	}
	return out, errors.Join(errs...)
}

// uncancelled returns the transcript the attempt left without the results
// of its last step's calls that its end cancelled (cancelled) and that
// may run again (callInDoubt: read-only, retry_safe): they are the
// attempt's outcome, not the calls', and an attempt after settles them
// again. It returns their record keys too (agentTurn.rerun). A call whose
// id another call of the step shares is left answered.
func (t *agentTurn) uncancelled(ctx context.Context) ([]Message, map[string]bool) {
	at, _, _, err := pendingCalls(t.msgs)
	if len(t.cancelled) == 0 || at < 0 || err != nil {
		return t.msgs, nil
	}
	calls := t.msgs[at].ToolCalls
	rerun := map[string]bool{}
	ids := map[string]bool{}
	for _, id := range t.cancelled {
		if k := callsOf(calls, id); len(k) == 1 && t.pl.callInDoubt(ctx, calls[k[0]], false) == nil {
			ids[id] = true
			rerun[t.key(at, calls[k[0]])] = true
		}
	}
	if len(ids) == 0 {
		return t.msgs, nil
	}
	msgs := slices.Clone(t.msgs[:at+1])
	for _, m := range t.msgs[at+1:] {
		if m.Role != "tool" || !ids[m.ToolCallID] {
			msgs = append(msgs, m)
		}
	}
	return msgs, rerun
}

// tool runs one call, which ac names, and returns its tool message,
// whether a guard blocked it, and an error that ends the turn.
func (t *agentTurn) tool(ctx context.Context, call ToolUse, ac *agentCall) (Message, bool, error) {
	answer := func(text string, isErr bool) Message { return toolAnswer(call, text, isErr) }
	if t.offered != nil && !t.offered[call.Name] {
		if _, ok := ResumedCall(ctx); ok {
			// A resumed call that may have run, when its turn offered the
			// tool: told it did not run, the model would be misled. In
			// doubt, unanswered, as a refusal before a layer answered for
			// it is (resumedUnanswered).
			return Message{}, false, t.pl.callInDoubtAs(ctx, call, true, ac.plainFirst == call.Name)
		}
		return answer(notOfferedText, true), false, nil
	}
	treq, err := call.Request()
	if err != nil {
		return answer("error: the arguments are not a JSON object; call the tool again with a JSON object of its parameters", true), false, nil
	}
	if ac.up != nil && t.pl.repeatsEffect(call.Name) {
		// A call of a turn that a tool of a turn's call runs: the outer
		// calls are flagged, and those of recorded turns recorded, as
		// having it under way before it starts.
		markDelegated(ac)
		if err := t.pl.delegate(ctx, ac, call.Name); err != nil {
			return answer("error: not run: the run could not be saved before the call", true), false, err
		}
	}
	res, err := t.pl.Tool(ctx, treq)
	if reached(ctx, err) && (t.pl.repeatsEffect(call.Name) || ranCalls(err)) {
		t.ran.add(call)
		if ac.up != nil {
			markRan(ac.up)
		}
	}
	if err == nil {
		text, err := resultText(res.Value)
		if err != nil {
			return answer("error: the tool's result could not be encoded: "+err.Error(), true), false, nil
		}
		return answer(text, false), false, nil
	}
	if errors.Is(err, ErrOutcomeUnrecorded) || Classify(err) == ClassInDoubt {
		// The call may have had its effect (in doubt), or ran but the
		// trail lacks its outcome: told it failed, the model could make
		// it again. It is left unanswered in the transcript, so that a
		// turn resumed from it ends in doubt too, until a person answers
		// it (Message{} is not appended); a cancellation meanwhile does
		// not settle it.
		return Message{}, false, err
	}
	if ctx.Err() != nil {
		return answer("error: cancelled", true), false, ctx.Err()
	}
	switch Classify(err) {
	case ClassBudget:
		return answer(budgetText, true), false, err
	case ClassBlocked:
		if t.req.OnBlock == OnBlockEndTurn {
			return answer(refusal(err), true), true, err
		}
		return answer(refusal(err), true), true, nil
	}
	if errors.Is(err, ErrRan) {
		return answer(ranText(err.Error()), true), false, nil
	}
	return answer("error: the tool failed: "+err.Error(), true), false, nil
}

// ranText tells the model that a call ran, its effects standing, but that
// its result (whose error is msg) could not be used (ErrRan): told that it
// failed, the model could make it again.
func ranText(msg string) string {
	return "error: the tool ran (its effects happened) but its result could not be used: " + strings.TrimSuffix(msg, ".") +
		". Do not call it again to retry: that would repeat its effects."
}

// toolAnswer is the tool message answering call with text.
func toolAnswer(call ToolUse, text string, isErr bool) Message {
	return Message{Role: "tool", ToolCallID: call.ID, Name: call.Name,
		Parts: []ContentPart{{Type: PartToolResult, ToolCallID: call.ID, Text: text, IsError: isErr}}}
}

// serial reports whether p, a turn's Params, allows one tool call per
// answer (ParallelToolCalls false).
func serial(p *ChatRequest) bool { return p.ParallelToolCalls != nil && !*p.ParallelToolCalls }

// notSerial answers each call of an answer of several when the turn allows
// one (serial): none of them runs.
func notSerial(calls []ToolUse) []Message {
	return notRun(calls, "error: not run: this answer has "+strconv.Itoa(len(calls))+
		" tool calls, and the turn allows one tool call per answer (parallel_tool_calls false); call one tool at a time")
}

// notRun answers each of calls, none of which runs, with the error text.
func notRun(calls []ToolUse, text string) []Message {
	out := make([]Message, len(calls))
	for i, call := range calls {
		out[i] = toolAnswer(call, text, true)
	}
	return out
}

// tooMany answers each call of an answer that has more than the turn's
// bound: none of them runs.
func (t *agentTurn) tooMany(calls []ToolUse) []Message {
	return notRun(calls, "error: not run: this answer has "+strconv.Itoa(len(calls))+" tool calls, more than the "+
		strconv.Itoa(t.maxCalls)+" a step may make; call fewer tools at once")
}

// notOfferedText tells the model that it called a tool the turn did not
// offer it.
const notOfferedText = "error: not run: this tool is not offered in this turn; call only the tools offered"

// budgetText tells the model that a budget refused a call.
const budgetText = "error: the budget is exhausted"

// refusal tells the model that policy refused a call.
func refusal(err error) string {
	var b *BlockedError
	if errors.As(err, &b) {
		return refusalText(b.Layer, b.Message)
	}
	return refusalText("", "")
}

// refusalText tells the model that the layer refused a call, with its
// message.
func refusalText(layer, message string) string {
	if layer == "" && message == "" {
		return "refused: the call was blocked by policy. Do not repeat it unchanged."
	}
	return fmt.Sprintf("refused: the call was blocked by policy (%s): %s. Do not repeat it unchanged.", layer, message)
}

// resultText renders a tool result for the model: a string as it is,
// anything else as JSON.
func resultText(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case json.RawMessage:
		return string(v), nil
	case nil:
		return "null", nil
	}
	// Without HTML escaping: the model reads "<" as it is, and truncate
	// measures a result the same way (not as \u003c).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// lastUserText returns the text of the last user message that has text: a
// user message carrying only tool results (Anthropic's shape) is not what
// the user asked.
func lastUserText(msgs []Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "user" {
			continue
		}
		if msgs[i].Content != "" {
			return msgs[i].Content
		}
		for _, p := range msgs[i].Parts {
			if p.Type == PartText && p.Text != "" {
				return p.Text
			}
		}
	}
	return ""
}
