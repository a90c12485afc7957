// Package ratelimit implements the rate_limit builtin (stages chat, tool and
// turn): the generic cell rate algorithm (GCRA), equivalent to a token
// bucket that holds up to `burst` tokens and gains `rate` tokens every
// `per`. Each call takes one slot before it runs, evaluated atomically by
// the limiter (runtime.RateLimiter) of the layer's `store`: in this process
// when unset, or in a redis store (a Lua script) or a postgres store (one
// statement) shared by every replica, so over any window t the replicas
// together admit at most rate·t/per + burst calls.
//
// With mode "wait" a call without a free slot reserves the next one and
// waits for it; a wait that would outlast the context's deadline (the time
// left to it read on the wall clock, as the context counts it, whatever
// Deps.Clock) is refused at once (a rate limited error wrapping
// context.DeadlineExceeded), and a
// call whose context ends while it waits fails with the context's error
// (its reserved slot is not given back). With mode "reject" it fails at once
// with a rate limited *runtime.CallError whose RetryAfter says when a slot
// will be free (a failure, not final: a retry layer outside honours it, a
// host may redeliver). With mode "block" it is refused at once with a
// *runtime.BlockedError naming the layer: a final refusal that a retry
// layer outside does not repeat. A store failure fails closed: the call
// does not run.
//
// A bucket keeps, with its state, the interval (per/rate) it counts in. A
// layer whose rate or per changed (a policy reloaded, a replica started
// with the new policy beside the old ones) finds its bucket under the old
// interval and rescales it: the calls it took and the slots reserved in it
// count at the new interval from that call on. A raised limit thus takes
// effect at once instead of keeping callers waiting up to burst times the
// old interval, and a lowered one lets no burst at the old rate through. A
// changed burst takes effect at once as it is: it is read at each call.
//
// Scope "global" shares one limit; "run" keeps one per run id (dropped at
// Pipeline.EndRun when it is in process memory; in a shared store it
// expires once it has refilled); "key" keeps one per tenant (runtime.Run.Tenant, set by
// the gateway from the caller's API key).
//
// A `limiter` name shares one bucket among every rate_limit layer of the
// pipeline, in any stage, that gives the same name: a tool call and a model
// call through two such layers take from the same tokens. The layers must
// agree on rate, per, burst, scope and store (Build fails naming the first
// layer that disagrees); each keeps its own mode.
package ratelimit
