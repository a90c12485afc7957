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
	// formKeyed: under a name with keyed digests while the pipeline has
	// none (the run was saved with a digest key, removed or changed
	// since): the key its first execution got cannot be derived again.
	formKeyed
)

// firstForm returns how the run of ctx recorded the call of the assistant
// message at, whose record key is key (plain with plain digests, "" without
// a digest key), when its turn made it: by the name its turn recorded it
// under (CallIntent.Calls), else by the name of its record (records), the
// names holding KeyedDigestPrefix with a digest key and not without. A call
// of a turn a tool runs (t.call) is never recorded so, and is formSame.
func (t *agentTurn) firstForm(ctx context.Context, at int, call ToolUse, key, plain string, records []ToolRecord) keyForm {
	if t.call != "" {
		return formSame
	}
	if plain != "" {
		if r, ok := lastRecord(records, call.Name, key, plain); ok {
			if r.Call == plain {
				return formPlain
			}
			return formSame
		}
		named, _ := readRunState(t.pl, RunOf(ctx).ID, func(s *RunState) bool {
			return s.intent != nil && !slices.Contains(s.intent.Calls, key) && slices.Contains(s.intent.Calls, plain)
		})
		if named {
			return formPlain
		}
		return formSame
	}
	// Without a digest key: a name at the call's place, of its id, whose
	// digest is keyed.
	keyed := strconv.Itoa(at) + ":" + call.ID + ":" + KeyedDigestPrefix
	for _, r := range records {
		if r.Tool == call.Name && strings.HasPrefix(r.Call, keyed) {
			return formKeyed
		}
	}
	named, _ := readRunState(t.pl, RunOf(ctx).ID, func(s *RunState) bool {
		return s.intent != nil && slices.ContainsFunc(s.intent.Calls, func(c string) bool { return strings.HasPrefix(c, keyed) })
	})
	if named {
		return formKeyed
	}
	return formSame
}

// keyedFirst returns the error of a resumed call that its run recorded with
// a digest key the pipeline no longer has (formKeyed), when it would run
// again: a side-effecting call's tool (retry_safe: callInDoubt lets the
// others of them end in doubt already) tells a retry apart by the
// idempotency key its first execution got, which was derived from the
// keyed digest of its arguments and cannot be derived again; run under
// another key, the tool would take it for another call. It is in doubt
// (layer checkpoint) and does not run. A read-only call runs again (nil).
func (pl *Pipeline) keyedFirst(ctx context.Context, call ToolUse) error {
	e := pl.toolEntry(call.Name)
	if e != nil && e.known && !e.info.SideEffecting {
		return nil
	}
	return pl.callInDoubtAs(ctx, call, true, false)
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
