package runtime

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// keyForm is how a run recorded a call of its latest agent turn, as a
// resumed turn reads it (agentTurn.firstForm).
type keyForm int8

const (
	// formSame: under its name as the pipeline names it now, or not at
	// all (a checkpoint of an earlier version): its idempotency key is the
	// one the pipeline derives now.
	formSame keyForm = iota
	// formPlain: under its name with plain digests while the pipeline has
	// a digest key (the run was saved before the key was set): its first
	// execution got the idempotency key derived from its plain digest.
	formPlain
	// formKeyed: under a name with keyed digests that the pipeline does
	// not derive now: with none (the run was saved with a digest key,
	// removed since), or with another key (changed since): the key its
	// first execution got cannot be derived again.
	formKeyed
)

// firstForm returns how the run of ctx recorded the call of the assistant
// message at, whose record key is key (plain with plain digests, "" without
// a digest key), when its turn made it: by the name its turn recorded it
// under (CallIntent.Calls), else by the name of its record (records), the
// names holding KeyedDigestPrefix with a digest key and not without. With
// formKeyed it returns that name too. A call of a turn a tool runs
// (t.call) is never recorded so, and is formSame.
func (t *agentTurn) firstForm(ctx context.Context, at int, call ToolUse, key, plain string, records []ToolRecord) (keyForm, string) {
	if t.call != "" {
		return formSame, ""
	}
	// keyed starts a name at the call's place, of its id, whose digest is
	// keyed: with a digest key, one that is not key was made under
	// another.
	keyed := strconv.Itoa(at) + ":" + call.ID + ":" + KeyedDigestPrefix
	other := func(name string) bool { return name != key && strings.HasPrefix(name, keyed) }
	if plain != "" {
		if r, ok := lastRecord(records, call.Name, key, plain); ok {
			if r.Call == plain {
				return formPlain, ""
			}
			return formSame, ""
		}
	}
	type first struct {
		form keyForm
		name string
		ok   bool
	}
	f, _ := readRunState(t.pl, RunOf(ctx).ID, func(s *RunState) first {
		switch {
		case s.intent == nil:
			return first{}
		case slices.Contains(s.intent.Calls, key):
			return first{form: formSame, ok: true}
		case plain != "" && slices.Contains(s.intent.Calls, plain):
			return first{form: formPlain, ok: true}
		}
		if i := slices.IndexFunc(s.intent.Calls, other); i >= 0 {
			return first{form: formKeyed, name: s.intent.Calls[i], ok: true}
		}
		return first{}
	})
	if !f.ok {
		for _, r := range records {
			if r.Tool == call.Name && other(r.Call) {
				f = first{form: formKeyed, name: r.Call, ok: true}
				break
			}
		}
	}
	if f.form == formKeyed && plain != "" && t.sameDigestKey(ctx, at, records) {
		// Named under the pipeline's digest key, with other arguments:
		// the call as the transcript has it (edited since) is not one
		// the run recorded.
		return formSame, ""
	}
	return f.form, f.name
}

// sameDigestKey reports whether the run of ctx recorded a call of the
// assistant message at under the name the pipeline gives it now, with
// its digest key (CallIntent.Calls, records): the run was saved with that
// key, and a keyed name of a call's place and id that is not its name now
// was made with other arguments (the transcript edited since), not under
// another key.
func (t *agentTurn) sameDigestKey(ctx context.Context, at int, records []ToolRecord) bool {
	if at < 0 || at >= len(t.msgs) {
		return false
	}
	names := make(map[string]bool, len(t.msgs[at].ToolCalls))
	for _, c := range t.msgs[at].ToolCalls {
		names[t.key(at, c)] = true
	}
	for _, r := range records {
		if names[r.Call] {
			return true
		}
	}
	named, _ := readRunState(t.pl, RunOf(ctx).ID, func(s *RunState) bool {
		return s.intent != nil && slices.ContainsFunc(s.intent.Calls, func(n string) bool { return names[n] })
	})
	return named
}

// keyedFirst returns the error of a resumed call that its run recorded as
// name with a digest key the pipeline no longer has (formKeyed), when it
// would run again: a side-effecting call's tool, retry_safe or not, tells
// a retry apart by the idempotency key its first execution got, which was
// derived from the keyed digest of its arguments and cannot be derived
// again (nor its record, if any, be matched with its arguments); run
// under another key, the tool would take it for another call. It is in
// doubt (layer checkpoint, InDoubtKeyFormChanged) and does not run. A
// read-only call runs again (nil), unless the run recorded it, under
// name, in doubt (InDoubtRecorded) or as a call whose tool ran an agent
// turn that started calls that would repeat an effect (InDoubtDelegated):
// run again, the tool would run that turn anew. Those calls are named.
func (t *agentTurn) keyedFirst(ctx context.Context, call ToolUse, name string, records []ToolRecord) error {
	r, recorded := lastRecord(records, call.Name, name, "")
	delegated := t.pl.delegatedOf(ctx, name, "")
	d := &InDoubtError{Layer: LayerCheckpoint, Tool: call.Name, Reason: InDoubtKeyFormChanged, Call: name}
	e := t.pl.toolEntry(call.Name)
	switch {
	case e == nil || !e.known || e.info.SideEffecting:
		// With a digest key, the name may have been made under it, with
		// arguments edited since, when nothing shows the key the same
		// (sameDigestKey): the error says either may have changed.
		d.orEdited = t.pl.digester.Keyed()
	case recorded && r.InDoubt:
		d.Reason = InDoubtRecorded
	case len(delegated) > 0:
		d.Reason = InDoubtDelegated
	default:
		return nil
	}
	return delegatedDoubt(d, call, delegated)
}

// unansweredDoubt returns the error of a resumed call of the assistant
// message at that may have run and is not settled (its id shared by calls
// answered in part), as the run recorded it (firstForm, recordedDoubt):
// in doubt under the idempotency key its tool got first, whatever its
// tool when recorded in doubt or when its tool ran an agent turn that
// started calls that would repeat an effect, or for a key form changed
// since (keyedFirst); nil for a call that may run again.
func (t *agentTurn) unansweredDoubt(ctx context.Context, at int, call ToolUse, records []ToolRecord) error {
	key, plain := t.key(at, call), t.plainKey(at, call)
	form, name := t.firstForm(ctx, at, call, key, plain, records)
	if form == formKeyed {
		return t.keyedFirst(ctx, call, name, records)
	}
	delegated, _, err := t.recordedDoubt(ctx, call, key, plain, form == formPlain, records)
	if err == nil {
		return nil
	}
	return delegatedDoubt(err, call, delegated)
}

// plainFirstInFlight counts the resumed calls running whose first
// execution got the idempotency key derived from their plain digests
// (agentCall.plainFirst), so that the tool terminal looks for the mark only
// while there are some.
var plainFirstInFlight atomic.Int64

// givePlainKey gives c, when it is a resumed call of an agent turn of ctx
// that its turn recorded with plain digests (agentCall.plainFirst) and its
// idempotency key is the one derived from its keyed digest, the key derived
// from its plain digest: the one its first execution got, by which its
// tool tells the retry apart. The layers outside the tool keep the keyed
// key (their records of the call are under it); a key given by a layer
// (key_args, one the call had before the switch) or by the caller is kept.
func givePlainKey(ctx context.Context, c *ToolCall) {
	if plainFirstInFlight.Load() == 0 || !c.digester.Keyed() || c.Meta.IdempotencyKey != "" && !c.Meta.keyDerived {
		return
	}
	ac, _ := ctx.Value(agentCallCtxKey{}).(*agentCall)
	if ac == nil || ac.inTool || ac.plainFirst != c.Name || ac.run != c.Meta.Run.ID {
		return
	}
	plainDerivedKey(c)
}

// plainDerivedKey gives c, whose digests are keyed, the idempotency key
// derived from its plain digest when its key is the one derived from its
// keyed digest (or none yet); a key given by a layer (key_args) or by the
// caller is kept.
func plainDerivedKey(c *ToolCall) {
	if !c.digester.Keyed() || c.Meta.IdempotencyKey != "" && !c.Meta.keyDerived {
		return
	}
	d, err := c.ArgsDigestErr()
	if err != nil || c.Meta.IdempotencyKey != "" && c.Meta.IdempotencyKey != digest("tool", c.Meta.Run.ID, []byte(c.Name+"\x00"+d)) {
		return
	}
	c.Meta.IdempotencyKey, c.Meta.keyDerived = c.PlainForm().IdempotencyKey(), true
}
