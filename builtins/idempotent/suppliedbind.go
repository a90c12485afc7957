package idempotent

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
)

// bind holds the idempotency key c's caller supplied to c's key (key),
// under key_args. The call is claimed on those arguments, so that the
// same order refunded under two keys is refunded once, but the caller's
// key still names one call, as it does without key_args (suppliedKey): a
// call that reuses it with other key_args values is refused, never run
// under it. The key is held in a record of its own, claimed before the
// call is, its claim's note the key it is held for: the first call to
// present it holds it (a holder that stopped is taken over by a call with
// the same key_args), and a call with the same key_args meets its own key
// there and goes on to the claim, which compares the other arguments. The
// holder calls the returned func once the call has its outcome: the record
// is written then, kept for ttl from then as the claim's outcome is, so
// that the key is not free while that outcome is kept (nil when the call
// holds nothing).
func (m *Idempotent) bind(ctx context.Context, c *runtime.ToolCall, key string) (func(), error) {
	if len(m.KeyArgs) == 0 || !c.Meta.IdempotencyKeySupplied() {
		return nil, nil
	}
	// No argument in it: the same with a digest key or without.
	held := hashKey(runtime.Digester{}, "supplied", c.Name, c.Meta.Run.Tenant, c.Meta.IdempotencyKey)
	mine, _ := json.Marshal(key) // a string: cannot fail; notes and results are JSON
	g, err := m.leaser.AcquireAs(ctx, held, "", mine, m.LeaseTTL.D(), m.TTL.D(), true)
	if err != nil {
		if ctx.Err() != nil {
			return nil, runtime.NotRun(ctx.Err()) // the call was not started
		}
		return nil, m.storeErr("hold the idempotency key the caller supplied", err)
	}
	var theirs []byte
	switch g.Status {
	case runtime.LeaseAcquired:
		return func() {
			// Fenced out (false): a call with the same key_args took
			// the key over, and writes it after its own outcome.
			if _, err := m.leaser.Publish(context.WithoutCancel(ctx), held, g.Token, mine, m.TTL.D()); err != nil {
				// The claim, its note ours, still holds the key until it
				// expires.
				m.logger.WarnContext(ctx, "idempotent: cannot write the record of the idempotency key the caller supplied; its claim holds it until it expires",
					"tool", c.Name, "idempotency_key", c.IdempotencyKey(), "error", err)
			}
		}, nil
	case runtime.LeaseDone:
		theirs = g.Result
	case runtime.LeaseHeld:
		if len(g.Note) == 0 {
			// Taken over by a call with our values that met the abandoned
			// record at the same moment (a takeover keeps the taker's
			// note, and only one with that note takes over a record
			// that has one): one of this call, which the claim compares.
			return nil, nil
		}
		theirs = g.Note
	default:
		// Held by a call writing it now, or in doubt: its note is the
		// key it is held for (one in doubt with ours was taken over).
		theirs = g.Note
	}
	if bytes.Equal(theirs, mine) {
		return nil, nil
	}
	return nil, &runtime.BlockedError{Layer: m.name, Message: "the idempotency key the caller supplied was used earlier by a call with other values of key_args (" +
		strings.Join(m.KeyArgs, ", ") + "); a key names one call: this call did not run, and the earlier call's outcome is not returned"}
}
