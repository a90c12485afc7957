// Package judge implements the judge builtin (stage chat): a second model
// classifies each response and a "block" verdict blocks it.
//
// The layer holds the response's deltas until the stream completes, then
// calls the judge model (`model`) with `prompt` as the system message and the
// response text as the user message. The judge answers "allow" or "block" (the first word counts,
// case-insensitively). On "allow" the held deltas are released unchanged; on
// "block" the response is discarded and the call fails with a
// *runtime.BlockedError naming the layer. Because of the hold, a caller
// behind a judge sees no delta before the whole response has been judged:
// streaming degrades to one burst at the end.
//
// A judge failure (an error, a timeout after `timeout`, an answer that is
// neither verdict) follows `on_error`: "open" (the default) releases the
// response and logs a warning; "closed" blocks, with the failure as the
// BlockedError's cause. A response that failed or was abandoned by the
// consumer is returned as is without judging.
//
// The judge's own model call goes directly to the model client
// (Deps.Models[model]), not through the chat chain: no layer of the chain
// applies to it, whether outside or inside the judge. In particular it is
// not metered (a meter neither charges its tokens or cost nor counts it as
// a call, and budget ceilings do not refuse it), not retried and not failed
// over (one attempt; a failure follows `on_error`), not cached, and not
// traced by a span of its own (the model client sees the caller's context,
// with the chat span of a tracing layer outside the judge). Its usage is not
// reported on the call's response either. A budget meant to cover judging
// must allow for it; a judge model client that needs retries or accounting
// must provide them itself.
package judge
