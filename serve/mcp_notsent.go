package serve

import (
	"context"

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
