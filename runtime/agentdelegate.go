package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
)

// repeatsEffect reports whether a call of the tool name that the tool
// chain admits would repeat its effect if it ran again: a declared tool
// that is side-effecting and not retry_safe, or an undeclared one that
// settings.allow_undeclared_tools lets run (callInDoubt).
func (pl *Pipeline) repeatsEffect(name string) bool {
	e := pl.toolEntry(name)
	if e == nil || !e.known {
		return pl.allowUndeclared
	}
	return e.info.SideEffecting && !e.info.RetrySafe
}

// delegate records, before the call of tool that ac names starts, that
// the call of each recorded turn it runs under (a tool of that turn's call
// running an agent turn of the run, at any depth, of that turn's pipeline
// or another) has it under way (CallIntent.Delegated), and runs the
// OnToolCalls hooks of that turn's pipeline (a checkpoint layer with
// after_tool saves there): a run resumed from that save finds the outer
// call in doubt rather than run its tool, and the agent turn, again. A
// hook's error is returned with the records taken back: the call does not
// start.
func (pl *Pipeline) delegate(ctx context.Context, ac *agentCall, tool string) error {
	if ac.run == "" {
		return nil
	}
	// The outermost call of each pipeline above ac: the call of the turn
	// of that pipeline that records the run's calls.
	var outer []*agentCall
	for c := ac.up; c != nil; c = c.up {
		if c.pl == nil || c.run != ac.run || !c.pl.recordRuns.Load() {
			continue
		}
		if i := slices.IndexFunc(outer, func(o *agentCall) bool { return o.pl == c.pl }); i >= 0 {
			outer[i] = c
			continue
		}
		outer = append(outer, c)
	}
	d := DelegatedCall{Tool: tool, Call: ac.key}
	for i, o := range outer {
		o.pl.recordDelegated(ac.run, o.key, d, true)
		for _, hook := range o.pl.callHooks {
			if err := hook(ctx); err != nil {
				for _, o := range outer[:i+1] {
					o.pl.recordDelegated(ac.run, o.key, d, false)
				}
				return err
			}
		}
	}
	return nil
}

// recordDelegated adds d to the calls the call of key of the run has
// under way (CallIntent.Delegated), or takes it back.
func (pl *Pipeline) recordDelegated(run, key string, d DelegatedCall, add bool) {
	s := pl.runState(run)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.intent == nil {
		if !add {
			return
		}
		// A turn resumed from a version without calls recorded.
		s.intent = &CallIntent{}
	}
	in := s.intent
	if add {
		if in.Delegated == nil {
			in.Delegated = map[string][]DelegatedCall{}
		}
		in.Delegated[key] = append(in.Delegated[key], d)
		return
	}
	calls := in.Delegated[key]
	if i := slices.Index(calls, d); i >= 0 {
		calls = slices.Delete(slices.Clone(calls), i, i+1)
	}
	if len(calls) == 0 {
		delete(in.Delegated, key)
	} else {
		in.Delegated[key] = calls
	}
}

// delegatedOf returns the calls of the agent turns run under the call of
// key of the run of ctx that may repeat an effect and started
// (CallIntent.Delegated), and those recorded under plain, its key of
// before a digest key, when not "".
func (pl *Pipeline) delegatedOf(ctx context.Context, key, plain string) []DelegatedCall {
	d, _ := readRunState(pl, RunOf(ctx).ID, func(s *RunState) []DelegatedCall {
		if s.intent == nil {
			return nil
		}
		d := slices.Clone(s.intent.Delegated[key])
		if plain != "" {
			d = append(d, s.intent.Delegated[plain]...)
		}
		return d
	})
	return d
}

// delegatedActed returns err, the failure of a call of tool of ctx whose
// context ended, marked MayHaveRun when the call's tool ran an agent turn
// that started a call that would repeat an effect (CallIntent.Delegated):
// answered "cancelled", the call would be made again (by the model, or by
// an attempt after, which runs a read-only call cancelled so again), and
// that turn's calls with it. A failure that says whether the tool acted
// (NotRun, MayHaveRun) is returned as it is.
func (pl *Pipeline) delegatedActed(ctx context.Context, tool string, err error) error {
	if Classify(err) == ClassInDoubt || DidNotRun(err) || errors.Is(err, ErrRan) {
		return err
	}
	key := pl.agentRecordOf(ctx)
	if key == "" {
		return err
	}
	d := pl.delegatedOf(ctx, key, "")
	if len(d) == 0 {
		return err
	}
	return MayHaveRun(fmt.Errorf("tool %s was running when its call was cancelled, and the agent turn it ran had started %s: %w", tool, delegatedCalls(d), err))
}

// delegatedDoubt returns err, the *InDoubtError of call, joined to what
// says why, when its tool ran an agent turn that started the calls d.
func delegatedDoubt(err error, call ToolUse, d []DelegatedCall) error {
	if len(d) == 0 {
		return err
	}
	return errors.Join(err, fmt.Errorf("checkpoint: the tool of call %s (%s) ran an agent turn of the run that started %s, which would repeat an effect if made again: "+
		"run again, the tool would run that turn anew, whose model could make them again; the run's tool records under those keys hold the outcomes that came back", call.ID, call.Name, delegatedCalls(d)))
}

// delegatedCalls names the calls d: each one's tool and record key.
func delegatedCalls(d []DelegatedCall) string {
	calls := make([]string, len(d))
	for i, c := range d {
		calls[i] = c.Tool + " (" + c.Call + ")"
	}
	return strings.Join(calls, ", ")
}

// ranUnder returns err, the error c's tool returned, marked MayHaveRun
// when it says the call did not run (DidNotRun: a later turn of the tool's
// refused for its run busy, its pipeline closed, a later call of its own
// or a turn's model call refused by a budget held by calls in flight or an
// open breaker, or a refusal of the tool's own) while the tool, or an
// agent turn it ran, at any depth, had run a call that would repeat an
// effect (delegatedRan: markRan): the call acted, and run again, the tool
// would make that call, or run that turn, anew. A tool that ran no such
// call keeps its refusal: a retry runs its call again.
func (c *ToolCall) ranUnder(err error) error {
	if err == nil || atomic.LoadInt32(&c.delegatedRan) == 0 || !DidNotRun(err) {
		return err
	}
	return MayHaveRun(fmt.Errorf("tool %s ran a call that would repeat an effect (of its own or of an agent turn it ran), then failed as if it had not run: %w", c.Name, err))
}
