// Package ratelimit implements the rate_limit builtin (stages chat, tool and
// turn): a token bucket that holds up to `burst` tokens and gains `rate`
// tokens every `per`. Each call takes one token before it runs. With mode
// "wait" a call without a token reserves the next one and waits for it; if
// the caller's context ends first the reservation is returned and the call
// fails with the context's error. With mode "reject" it fails at once with a
// rate limited *runtime.CallError whose RetryAfter says when a token will be
// free (a failure, not final: a retry layer outside honours it, a host may
// redeliver). Scope "global" shares one bucket; "run" keeps one per run id.
package ratelimit
