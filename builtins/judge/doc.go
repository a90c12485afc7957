// Package judge implements the judge builtin (stage chat): a second model
// classifies each response and a "block" verdict blocks it.
//
// The layer holds the response's deltas until the stream completes, then
// calls the judge model (`model`, through the pipeline's model clients
// directly: the judge call is not metered, retried or traced by the chat
// chain) with `prompt` as the system message and the response text as the
// user message. The judge answers "allow" or "block" (the first word counts,
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
package judge
