// Package judge implements the judge builtin (stage chat): a second model
// classifies each response and a "block" verdict blocks it.
//
// The layer holds the response's deltas until the stream completes, then
// calls the judge model (`model`) with `prompt` as the system message and the
// response as the user message: its text, then one line per tool call it
// makes ("tool call: NAME ARGUMENTS"), so that a reply that acts through a
// tool (a transfer, a refund) is judged on the call, not as an empty text
// (Output). A reply without text or tool calls (or with whitespace only) is
// judged as EmptyReply, "(the reply is empty)": an empty message would be
// refused by Anthropic's API. The judge answers "allow" or "block" (the first
// word counts, case-insensitively: "Allow." allows, "I think block" is no
// verdict). On "allow" the held deltas are released unchanged; on
// "block" the response is discarded and the call fails with a
// *runtime.BlockedError naming the layer. Because of the hold, a caller
// behind a judge sees no delta before the whole response has been judged:
// streaming degrades to one burst at the end.
//
// A judge failure (an error, a timeout after `timeout`, an answer that is
// neither verdict) follows `on_error`: "closed" (the default, as for every
// checking layer) blocks, with the failure as the BlockedError's cause;
// "open" releases the response unjudged and logs a warning. An answer that is
// no verdict is described in the cause, never quoted ("judge answered neither
// allow nor block: a text answer of 212 bytes"): the judge read the response
// and may repeat it, and the cause reaches the client and the access log. A response that failed or was abandoned by the
// consumer is returned as is without judging.
//
// The judge's own model call goes through the chat chain below the judge's
// layer, as a call of its own in the same run (runtime.OwnCall): every layer
// inside the judge applies to it as to any call (but output_coerce, whose
// schema is the answer's: it passes the verdict as it is), and the judge
// never sees it. A meter inside the judge charges its tokens and cost and counts it as
// a call (and its budget can refuse it); a retry inside retries it, a
// fallback or hedge inside sends it to their models (vet warns,
// order/own-call-rerouted, when those leave out `model`), a tracing layer inside
// gives it a span of its own, a cache inside may serve it. Layers outside
// the judge do not see it: a meter outside charges only the response it
// judged (vet reports it, order/judge-before-meter: an error when the meter
// has a budget, which the verdicts escape, a warning otherwise). A
// rate_limit outside admits the verdict call without a token (vet warns, order/ratelimit-outside-judge). A failure after those layers (retries spent, a budget refusal)
// follows `on_error`. Its usage is not in the response's Usage nor Charges
// but in its OwnCharges, and the model it went to and its provider's
// request id are not the response's (runtime.IsOwnCall): agentc serve names
// the model that wrote the answer and returns that model's request id.
// Place the meter, retry and fallback meant for judging inside the judge;
// scope a layer with `when` (request.model) to keep it off the judge's calls.
// agentc explain lists the path under the chain's consequences.
package judge
