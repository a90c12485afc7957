package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// CallIntent records an agent turn's tool calls as it recorded them, before
// any of them ran: when (Time, this process's clock), which (Calls, each
// call's record key, ToolRecord.Call) and in which store each would be
// claimed (Stores). A checkpoint saves it with the transcript, so that a
// resumed turn knows since when, and where, a call without a result could
// have been claimed (ClaimVoucher).
type CallIntent struct {
	Time  time.Time `json:"time"`
	Calls []string  `json:"calls"`
	// Stores maps the record key of a call of Calls to the identity
	// (SharedLeaser.StoreID) of the store the outermost layer covering its
	// tool claims it in (ClaimVoucher), read when the calls were recorded.
	// A resumed call is answered only by a store of that identity: one
	// flushed, dropped and created again, or another one the layer was
	// pointed at since, never saw its claim. A call without one (no layer
	// covered it, the store could not be read, or an earlier version
	// recorded the calls) is in doubt.
	Stores map[string]string `json:"stores,omitempty"`
	// Keys maps the record key of a call of Calls to the key the same
	// layer claims it under (ClaimVoucher.ClaimKey). A resumed call is
	// answered only under that key: a layer whose key_args, or whose
	// tenant, changed since would look for another claim and find none.
	Keys map[string]string `json:"keys,omitempty"`
	// StoreTimes maps the identity of a store of Stores to its server's
	// time when the identity was read (StoreClock), before any of the calls
	// could be claimed in it: a resumed call's age is then read on that
	// clock alone, whatever the clocks of the processes that recorded and
	// resume the turn. A store without one is judged by Time.
	StoreTimes map[string]time.Time `json:"store_times,omitempty"`
	// Records is how many tool results the run had recorded when the calls
	// were (Checkpoint.Tools): a call of the turn is answered only from a
	// record after those (callRecords). A key names a call by its place,
	// id and arguments, which a call made before can share (a model that
	// gives its calls no id, a host that shortened the transcript): its
	// record never answers the later call.
	Records int `json:"records,omitempty"`
	// Delegated maps the record key of a call of Calls whose tool runs
	// an agent turn of the run (a tool that delegates, to an agent of
	// this pipeline or of another, at any depth) to the calls of that
	// turn, and of the turns nested in it, that running again could
	// repeat (side-effecting and not retry_safe, or undeclared): each is
	// recorded, and saved (after_tool), before it starts. A resumed turn
	// never runs such a call again without its result: its tool would run
	// the agent turn anew, whose model could make those calls again. It is
	// in doubt.
	Delegated map[string][]DelegatedCall `json:"delegated,omitempty"`
}

// DelegatedCall is a call of an agent turn run by a tool of a recorded
// turn's call (CallIntent.Delegated).
type DelegatedCall struct {
	// Tool is the tool called.
	Tool string `json:"tool"`
	// Call is the call's record key (ToolRecord.Call) in the run of the
	// pipeline whose agent turn made it: for the pipeline of the outer
	// call, the outer call's key, a "/" and the key of the call in its
	// turn.
	Call string `json:"call"`
}

// ResumeClockSkew is how far apart the clocks of the process that recorded
// a turn's tool calls, the process that resumes it and a shared store may
// be, for a store that does not tell its time (StoreClock): a resumed call
// is taken to have never started when its store holds no claim of it only
// while the claim, had one been made, would certainly still be kept (the
// layer's ttl after the calls were recorded, less this).
const ResumeClockSkew = time.Minute

// StoreClockMargin is what a resumed call's age read on its store's clock
// (StoreClock) is kept under the layer's ttl by: the rounding of the
// server's expiries.
const StoreClockMargin = time.Second

// StoreClock is a SharedLeaser that tells its server's time, the clock its
// claims expire by (Redis TIME, PostgreSQL clock_timestamp()): a resumed
// call's age is read on it (CallIntent.StoreTimes), so processes whose
// clocks disagree neither run a call whose claim may have expired nor
// hold one in doubt that could be answered.
type StoreClock interface {
	SharedLeaser
	// StoreIDAt returns the store's identity (StoreID) and the server's
	// time, in one round trip.
	StoreIDAt(ctx context.Context) (id string, now time.Time, err error)
}

// StoreIdentity returns l's identity (StoreID) and, when l tells it
// (StoreClock), its server's time in the same round trip; else the zero
// time.
func StoreIdentity(ctx context.Context, l SharedLeaser) (string, time.Time, error) {
	if sc, ok := l.(StoreClock); ok {
		return sc.StoreIDAt(ctx)
	}
	id, err := l.StoreID(ctx)
	return id, time.Time{}, err
}

// SharedLeaser is a Leaser whose claims outlive the process that made them
// and are seen by every process that may resume its runs (a redis or
// postgres store): a claim absent from it was never made, or has expired,
// as long as it is the store the claim would have been made in
// (StoreID). A memory store's claims die with their process, and a sqlite
// file is not shared across hosts: neither can say a call never started.
type SharedLeaser interface {
	Leaser
	// StoreID returns the store's identity: a random id written into the
	// store itself the first time it is asked for (atomically: every
	// process gets the same one), and read from it each time after. A
	// store that lost it (a Redis flushed, a PostgreSQL schema dropped and
	// created again) gets a new one, as does another database, prefix,
	// schema or server: the identity changes whenever the claims may have
	// been lost with it.
	StoreID(ctx context.Context) (string, error)
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
	// ClaimStore returns the SharedLeaser the layer claims calls in (nil
	// when its store is not one): a turn records its identity with its
	// calls (CallIntent.Stores), and the layer answers a resumed call only
	// when its store still has that identity (ResumedIntent.Store).
	ClaimStore() SharedLeaser
	// ClaimKey returns the key the layer claims c under in its store
	// (recorded as CallIntent.Keys), or an error when it would refuse c.
	ClaimKey(c *ToolCall) (string, error)
}

// ResumedIntent is what the turn of a resumed call recorded of it before
// it could start (CallIntent).
type ResumedIntent struct {
	// Since is when the call was recorded: it could have been claimed
	// from then on.
	Since time.Time
	// Store is the identity of the store it would have been claimed in
	// (SharedLeaser.StoreID): a layer whose store has another identity
	// now cannot say it never started.
	Store string
	// Key is the key it would have been claimed under
	// (ClaimVoucher.ClaimKey): a layer that claims it under another key now
	// cannot say it never started.
	Key string
	// StoreSince is when the call was recorded by the clock of the store it
	// would have been claimed in (CallIntent.StoreTimes; zero: not known,
	// Since is to be read instead).
	StoreSince time.Time
}

// resumedCall marks the context of a call a resumed turn runs although it
// may have started before: only a ClaimVoucher's answer lets it reach the
// tool.
type resumedCall struct {
	tool     string
	intent   ResumedIntent
	vouched  atomic.Bool // it never started, and runs now
	replayed atomic.Bool // its outcome was replayed from the store
}

type resumedCallKey struct{}

// resumesInFlight counts the resumed calls running, so that the tool
// terminal looks for the mark only while there are some.
var resumesInFlight atomic.Int64

// resumedOf returns the mark of ctx's resumed call, or nil: none, or the
// context is the tool's of such a call (inToolOf), whose own calls are not
// the resumed one.
func resumedOf(ctx context.Context) *resumedCall {
	r, _ := ctx.Value(resumedCallKey{}).(*resumedCall)
	return r
}

// ResumedCall reports whether the call of ctx is a resumed call that may
// have started before, and what its turn recorded of it: since when it
// could have been claimed, and in which store.
func ResumedCall(ctx context.Context) (ResumedIntent, bool) {
	if r := resumedOf(ctx); r != nil {
		return r.intent, true
	}
	return ResumedIntent{}, false
}

// VouchNeverStarted is called by a ClaimVoucher that found no claim of the
// resumed call of ctx in its store, within its ttl of ResumedCall's time,
// its store having the identity the turn recorded, and has now claimed it:
// the call never started, and runs.
func VouchNeverStarted(ctx context.Context) {
	if r := resumedOf(ctx); r != nil {
		r.vouched.Store(true)
	}
}

// VouchReplayed is called by a ClaimVoucher that answers the resumed call
// of ctx with the outcome its store holds (a result or an error): the call
// ran before, and that outcome is its answer.
func VouchReplayed(ctx context.Context) {
	if r := resumedOf(ctx); r != nil {
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
	r := resumedOf(ctx)
	if r == nil || r.tool != tool || r.vouched.Load() || r.replayed.Load() || Classify(err) == ClassInDoubt {
		return err
	}
	return errors.Join(&InDoubtError{Layer: LayerCheckpoint, Tool: tool, IdempotencyKey: key}, err)
}

// resumedGate refuses, without running it, a resumed call of the tool that
// no layer answered for: it may have run before. The refusal is in doubt
// (never DidNotRun: the call may have acted before); nothing ran now, so
// an agent turn does not count it among the calls it ran (reached).
func resumedGate(ctx context.Context, c *ToolCall) error {
	if resumesInFlight.Load() == 0 {
		return nil
	}
	r := resumedOf(ctx)
	if r == nil || r.tool != c.Name || r.vouched.Load() {
		return nil
	}
	return &InDoubtError{Layer: LayerCheckpoint, Tool: c.Name, IdempotencyKey: c.IdempotencyKey()}
}

// withResumedCall marks ctx for a resumed call of tool its turn recorded
// so; done unmarks the count once the call returned.
func withResumedCall(ctx context.Context, tool string, intent ResumedIntent) (context.Context, func()) {
	resumesInFlight.Add(1)
	return context.WithValue(ctx, resumedCallKey{}, &resumedCall{tool: tool, intent: intent}), func() { resumesInFlight.Add(-1) }
}

// recordIntent records, for the run of ctx, that its turn's tool calls of
// the assistant message at were recorded now, and the identity of the
// store each would be claimed in (claimStores).
func (pl *Pipeline) recordIntent(ctx context.Context, at int, calls []ToolUse) {
	id := RunOf(ctx).ID
	if id == "" {
		return
	}
	keys := make([]string, len(calls))
	for i, c := range calls {
		keys[i] = agentCallKey(pl.digester, at, c)
	}
	intent := &CallIntent{Time: pl.now(), Calls: keys}
	intent.Stores, intent.Keys, intent.StoreTimes = pl.claimStores(ctx, keys, calls)
	s := pl.runState(id)
	s.mu.Lock()
	intent.Records = len(s.tools)
	s.intent = intent
	s.mu.Unlock()
}

// callRecords returns the tool records of the run of ctx that may answer a
// call of its latest agent turn: those made after the turn recorded its
// calls (CallIntent.Records), every one when no turn recorded calls (a
// checkpoint of an earlier version).
func (pl *Pipeline) callRecords(ctx context.Context) []ToolRecord {
	r, _ := readRunState(pl, RunOf(ctx).ID, func(s *RunState) []ToolRecord {
		from := 0
		if s.intent != nil {
			from = min(max(s.intent.Records, 0), len(s.tools))
		}
		return slices.Clone(s.tools[from:])
	})
	return r
}

// claimStores returns, by record key, the identity of the store each call
// of calls would be claimed in by the outermost layer covering its tool
// (claimLayer), each store asked once, and the key the layer would claim
// it under; and, by identity, the time of each store that tells it
// (StoreClock), read with its identity. A store that cannot be read is
// logged and its calls left out, as is a call the layer would refuse:
// resumed, they are in doubt.
func (pl *Pipeline) claimStores(ctx context.Context, keys []string, calls []ToolUse) (stores, claims map[string]string, times map[string]time.Time) {
	var out map[string]string
	var ids map[SharedLeaser]string
	for i, c := range calls {
		e := pl.toolEntry(c.Name)
		if e == nil || !e.known {
			continue
		}
		v := pl.claimLayer(e)
		if v == nil {
			continue
		}
		l := v.ClaimStore()
		if l == nil {
			continue
		}
		req, err := c.Request()
		if err != nil {
			continue
		}
		claim, err := v.ClaimKey(&ToolCall{Name: req.Name, Args: req.Args, Tool: &e.info, Meta: Meta{Run: RunOf(ctx)}, digester: pl.digester})
		if err != nil {
			continue
		}
		sid, ok := ids[l]
		if !ok {
			var (
				at  time.Time
				err error
			)
			if sid, at, err = StoreIdentity(ctx, l); err == nil && !at.IsZero() {
				if times == nil {
					times = map[string]time.Time{}
				}
				times[sid] = at
			}
			if err != nil {
				pl.logger.WarnContext(ctx, "checkpoint: the identity of the idempotency store could not be read; a resumed turn finds the calls it would claim in doubt",
					"tool", c.Name, "error", err)
			}
			if ids == nil {
				ids = map[SharedLeaser]string{}
			}
			ids[l] = sid
		}
		if sid == "" {
			continue
		}
		if out == nil {
			out, claims = map[string]string{}, map[string]string{}
		}
		out[keys[i]], claims[keys[i]] = sid, claim
	}
	return out, claims, times
}

// intentOf returns what the run of ctx recorded of the call of key, if it
// recorded the call (under key, or under plain, its key of before a digest
// key, when not "").
func (pl *Pipeline) intentOf(ctx context.Context, key, plain string) (ResumedIntent, bool) {
	type found struct {
		in ResumedIntent
		ok bool
	}
	f, _ := readRunState(pl, RunOf(ctx).ID, func(s *RunState) found {
		if s.intent == nil || s.intent.Time.IsZero() {
			return found{}
		}
		if !slices.Contains(s.intent.Calls, key) {
			if plain == "" || !slices.Contains(s.intent.Calls, plain) {
				return found{}
			}
			key = plain
		}
		store := s.intent.Stores[key]
		return found{ResumedIntent{Since: s.intent.Time, Store: store, Key: s.intent.Keys[key], StoreSince: s.intent.StoreTimes[store]}, true}
	})
	return f.in, f.ok
}

// claimLayer returns the outermost layer of the tool chain that may answer
// for a resumed call of the declared tool e (ClaimVoucher): one that covers
// the tool (its tools list names it or is empty), or nil. A layer skipped
// by its when predicate never answers: the call then stops at the tool, in
// doubt, or reaches a layer inside whose store is not the one recorded.
func (pl *Pipeline) claimLayer(e *toolEntry) ClaimVoucher {
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
		return v
	}
	return nil
}

// resumable reports whether a resumed call without a result that may have
// run (callInDoubt) runs through the tool chain instead of ending in doubt,
// and what its turn recorded of it: a call of a declared tool, not recorded
// in doubt, that the run's latest turn recorded (CallIntent) with the
// identity of the store it would be claimed in, and that a layer of the
// tool chain may answer for (claimLayer).
func (pl *Pipeline) resumable(ctx context.Context, call ToolUse, recorded bool, key, plain string) (ResumedIntent, bool) {
	e := pl.toolEntry(call.Name)
	if recorded || e == nil || !e.known {
		return ResumedIntent{}, false
	}
	if _, err := call.Request(); err != nil {
		return ResumedIntent{}, false
	}
	intent, ok := pl.intentOf(ctx, key, plain)
	if !ok || intent.Store == "" || pl.claimLayer(e) == nil {
		return ResumedIntent{}, false
	}
	return intent, true
}

// clone returns a copy of c that shares no memory with it.
func (c *CallIntent) clone() *CallIntent {
	return &CallIntent{Time: c.Time, Calls: slices.Clone(c.Calls), Stores: maps.Clone(c.Stores), Keys: maps.Clone(c.Keys),
		StoreTimes: maps.Clone(c.StoreTimes), Records: c.Records, Delegated: cloneDelegated(c.Delegated)}
}

// cloneDelegated returns a copy of d that shares no memory with it.
func cloneDelegated(d map[string][]DelegatedCall) map[string][]DelegatedCall {
	if d == nil {
		return nil
	}
	out := make(map[string][]DelegatedCall, len(d))
	for k, v := range d {
		out[k] = slices.Clone(v)
	}
	return out
}

// NewStoreID returns a new random store identity (SharedLeaser.StoreID):
// 128 bits, hex.
func NewStoreID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
