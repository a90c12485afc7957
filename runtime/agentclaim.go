package runtime

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// CallIntent records an agent turn's tool calls as it recorded them, before
// any of them ran: when (Time, this process's clock) and which (Calls, each
// call's record key, ToolRecord.Call). A checkpoint saves it with the
// transcript, so that a resumed turn knows since when a call without a
// result could have been claimed in a store (ClaimVoucher).
type CallIntent struct {
	Time  time.Time `json:"time"`
	Calls []string  `json:"calls"`
}

// ResumeClockSkew is how far apart the clocks of the process that recorded
// a turn's tool calls, the process that resumes it and a shared store may
// be: a resumed call is taken to have never started when its store holds no
// claim of it only while the claim, had one been made, would certainly
// still be kept (the layer's ttl after the calls were recorded, less this).
const ResumeClockSkew = time.Minute

// SharedLeaser is a Leaser whose claims outlive the process that made them
// and are seen by every process that may resume its runs (a redis or
// postgres store): a claim absent from it was never made, or has expired.
// A memory store's claims die with their process, and a sqlite file is not
// shared across hosts: neither can say a call never started.
type SharedLeaser interface {
	Leaser
	// SharesClaims marks the port; it does nothing.
	SharesClaims()
}

// ClaimVoucher is a tool layer that claims the calls it covers in a
// SharedLeaser before they run (idempotent). A resumed agent turn runs a
// side-effecting call the run has no result for through the tool chain,
// instead of ending in doubt, only when such a layer covers its tool: the
// layer then answers for the call (VouchNeverStarted) when its store holds
// no claim of it, replays its outcome when the store holds one
// (VouchReplayed), and fails in doubt otherwise. A call that reaches the
// tool without a layer having answered for it does not run (in doubt), and
// one that a layer outside refuses or fails before the layer answered is in
// doubt too (resumedUnanswered): it may have run before, so its refusal
// now is not what happened then.
type ClaimVoucher interface {
	// VouchesFor reports whether the layer claims calls of tool in a
	// SharedLeaser.
	VouchesFor(tool *ToolInfo) bool
}

// resumedCall marks the context of a call a resumed turn runs although it
// may have started before: only a ClaimVoucher's answer lets it reach the
// tool.
type resumedCall struct {
	tool     string
	since    time.Time
	vouched  atomic.Bool // it never started, and runs now
	replayed atomic.Bool // its outcome was replayed from the store
}

type resumedCallKey struct{}

// resumesInFlight counts the resumed calls running, so that the tool
// terminal looks for the mark only while there are some.
var resumesInFlight atomic.Int64

// ResumedCall reports whether the call of ctx is a resumed call that may
// have started before, and since when it could have been claimed: the time
// its turn recorded it, before it could start.
func ResumedCall(ctx context.Context) (since time.Time, ok bool) {
	if r, ok := ctx.Value(resumedCallKey{}).(*resumedCall); ok {
		return r.since, true
	}
	return time.Time{}, false
}

// VouchNeverStarted is called by a ClaimVoucher that found no claim of the
// resumed call of ctx in its store, within its ttl of ResumedCall's time,
// and has now claimed it: the call never started, and runs.
func VouchNeverStarted(ctx context.Context) {
	if r, ok := ctx.Value(resumedCallKey{}).(*resumedCall); ok {
		r.vouched.Store(true)
	}
}

// VouchReplayed is called by a ClaimVoucher that answers the resumed call
// of ctx with the outcome its store holds (a result or an error): the call
// ran before, and that outcome is its answer.
func VouchReplayed(ctx context.Context) {
	if r, ok := ctx.Value(resumedCallKey{}).(*resumedCall); ok {
		r.replayed.Store(true)
	}
}

// resumedUnanswered returns, for a resumed call of tool that may have
// started before and that failed (err) before a ClaimVoucher answered for
// it, the error it ends with: in doubt, nothing having run now. A guard, a
// rate limit or a budget outside the layer that refuses it now (a policy
// reloaded since, a limit the first execution used up), a store that could
// not be asked: telling the model so would say a call did not happen that
// may have. Any other error is returned as it is.
func resumedUnanswered(ctx context.Context, tool, key string, err error) error {
	if err == nil || resumesInFlight.Load() == 0 {
		return err
	}
	r, ok := ctx.Value(resumedCallKey{}).(*resumedCall)
	if !ok || r.tool != tool || r.vouched.Load() || r.replayed.Load() || Classify(err) == ClassInDoubt {
		return err
	}
	return NotRun(errors.Join(&InDoubtError{Layer: LayerCheckpoint, Tool: tool, IdempotencyKey: key}, err))
}

// resumedGate refuses, without running it, a resumed call of the tool that
// no layer answered for: it may have run before. The refusal is in doubt
// and marked NotRun (nothing ran now).
func resumedGate(ctx context.Context, c *ToolCall) error {
	if resumesInFlight.Load() == 0 {
		return nil
	}
	r, ok := ctx.Value(resumedCallKey{}).(*resumedCall)
	if !ok || r.tool != c.Name || r.vouched.Load() {
		return nil
	}
	return NotRun(&InDoubtError{Layer: LayerCheckpoint, Tool: c.Name, IdempotencyKey: c.IdempotencyKey()})
}

// withResumedCall marks ctx for a resumed call of tool recorded at since;
// done unmarks the count once the call returned.
func withResumedCall(ctx context.Context, tool string, since time.Time) (context.Context, func()) {
	resumesInFlight.Add(1)
	return context.WithValue(ctx, resumedCallKey{}, &resumedCall{tool: tool, since: since}), func() { resumesInFlight.Add(-1) }
}

// recordIntent records, for the run of ctx, that its turn's tool calls of
// the assistant message at were recorded now.
func (pl *Pipeline) recordIntent(ctx context.Context, at int, calls []ToolUse) {
	id := RunOf(ctx).ID
	if id == "" {
		return
	}
	keys := make([]string, len(calls))
	for i, c := range calls {
		keys[i] = agentCallKey(at, c)
	}
	s := pl.runState(id)
	s.mu.Lock()
	s.intent = &CallIntent{Time: pl.now(), Calls: keys}
	s.mu.Unlock()
}

// intentOf returns when the run of ctx recorded the call of key, if it did.
func (pl *Pipeline) intentOf(ctx context.Context, key string) (time.Time, bool) {
	id := RunOf(ctx).ID
	if id == "" {
		return time.Time{}, false
	}
	s := pl.lookupRunState(id)
	if s == nil {
		return time.Time{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.intent == nil || s.intent.Time.IsZero() || !slices.Contains(s.intent.Calls, key) {
		return time.Time{}, false
	}
	return s.intent.Time, true
}

// vouchable reports whether a layer of the tool chain may answer for a
// resumed call of the declared tool e (ClaimVoucher): one that covers the
// tool (its tools list names it or is empty). A layer skipped by its when
// predicate never answers: the call then stops at the tool, in doubt.
func (pl *Pipeline) vouchable(e *toolEntry) bool {
	layers := pl.plan.Chains.Tool
	for _, li := range pl.layers[plan.StageTool] {
		v, ok := li.Middleware.(ClaimVoucher)
		if !ok || !v.VouchesFor(&e.info) {
			continue
		}
		if li.Index < len(layers) {
			if tools := layers[li.Index].Tools; len(tools) > 0 && !slices.Contains(tools, e.info.Name) {
				continue
			}
		}
		return true
	}
	return false
}

// resumable reports whether a resumed call without a result that may have
// run (callInDoubt) runs through the tool chain instead of ending in doubt,
// and since when it could have been claimed: a call of a declared tool, not
// recorded in doubt, that the run's latest turn recorded (CallIntent) and
// that a layer of the tool chain may answer for (vouchable).
func (pl *Pipeline) resumable(ctx context.Context, call ToolUse, key string, recorded bool) (time.Time, bool) {
	e := pl.toolEntry(call.Name)
	if recorded || e == nil || !e.known {
		return time.Time{}, false
	}
	if _, err := call.Request(); err != nil {
		return time.Time{}, false
	}
	since, ok := pl.intentOf(ctx, key)
	if !ok || !pl.vouchable(e) {
		return time.Time{}, false
	}
	return since, true
}
