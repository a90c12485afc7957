package serve

import (
	"context"
	"errors"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// notSentKey is the context key of the refusal of a call that is not to
// be sent (withNotSent).
type notSentKey struct{}

// withNotSent returns ctx carrying err, the refusal of a call whose tool
// chain runs only to record it: the upstream tool returns err at once,
// sending nothing (notSentOf).
func withNotSent(ctx context.Context, err error) context.Context {
	return context.WithValue(ctx, notSentKey{}, err)
}

// notSentOf returns the refusal ctx carries (withNotSent), nil if none.
func notSentOf(ctx context.Context) error {
	err, _ := ctx.Value(notSentKey{}).(error)
	return err
}

// cancelledBeforeChain is the refusal of a call whose context, ctx, ended
// before its tool chain ran: not sent, canceled (never retried), wrapping
// the context's error (a shutdown cut's message reads it).
func cancelledBeforeChain(ctx context.Context) error {
	return runtime.NotRun(&runtime.CallError{Kind: runtime.KindCanceled,
		Message: "the call was cancelled before its tool chain ran (its client cancelled it or went away, or the shutdown cut it): it was not sent",
		Err:     ctx.Err()})
}

// recordOnlyFor bounds the chain of a call run only to be recorded
// (recordOnly): a layer that would wait (idempotent for a duplicate in
// flight, a rate_limit, a meter for its store) is cut by then, so that
// calls cancelled one after the other hold no request beyond it.
var recordOnlyFor = 2 * time.Second

// recordOnly returns the context of the tool chain of a call of an
// upstream tool that is not to be sent, run only for its layers to record
// it: ctx's values on a context that ends recordOnlyFor from now, not
// before even when ctx has ended, carrying the refusal the upstream tool
// returns at once (notSentOf): waitErr, the refusal of the wait for a
// listing, or, when ctx ended, cancelledBeforeChain's. The chain of a call
// whose ctx ended is cut as cancelled (the refusal its cause), not as
// timed out: a layer cut at the bound reports the call its client
// cancelled, and audit records it canceled.
func recordOnly(ctx context.Context, waitErr error) (context.Context, context.CancelFunc) {
	if ctx.Err() == nil {
		bounded, stop := context.WithTimeout(context.WithoutCancel(ctx), recordOnlyFor)
		return withNotSent(bounded, triedOnce(waitErr)), stop
	}
	refusal := cancelledBeforeChain(ctx)
	bounded, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	cut := time.AfterFunc(recordOnlyFor, func() { cancel(refusal) })
	return withNotSent(bounded, refusal), func() { cut.Stop(); cancel(nil) }
}

// triedOnce returns the refusal err of a call whose chain runs only to
// record it marked not to be tried again on the same callee
// (runtime.RetryNo): the upstream tool refuses each try at once with it,
// whatever a retry waits, its cause (the time to wait for a listing
// spent) spent for every try. Its class stays as it was.
func triedOnce(err error) error {
	var ce *runtime.CallError
	if !errors.As(err, &ce) {
		return err
	}
	once := *ce
	once.Hint = runtime.RetryNo
	if runtime.DidNotRun(err) {
		return runtime.NotRun(&once)
	}
	return &once
}
