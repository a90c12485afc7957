// Package fallback implements the fallback builtin (stage chat): it calls the
// configured models in order, rewriting the call's model, and falls over to
// the next one when the current one fails before the first delta with a
// transient error (runtime.IsTransient), an open circuit breaker
// (*runtime.BreakerOpenError) or the provider's refusal to serve the call
// (runtime.ErrProviderRefused: a rejected key, an account without credit or
// permission, a model the provider does not know, a request it cannot honour;
// the provider clients mark 401, 402, 403, 404 and insufficient_quota so, and
// the requests they refuse before sending for asking what their provider
// lacks, such as extended thinking of an OpenAI model). Any other permanent error, the caller's cancellation
// and any failure after the first delta end the call: once a delta flows the
// stream is committed to that model. Any delta counts, a tool-call fragment
// or a finish-only delta too (see runtime.Delta); a tool call is one only
// once the answer ends whole, so a call the upstream cut (its arguments
// ending inside a JSON value: transient) moves on, and one cut at the model's token
// limit (finish reason length: permanent) does not. The model that served the call is
// reported in ChatCall.Served (and ChatResponse.Model). When every model
// fails, the last error is returned that is not a provider's refusal (a
// model down, then another that cannot honour the request, is the outage,
// which a retry may get past, not a request at fault), else the last
// refusal.
//
// What a model it moved on from billed (an Anthropic stream that reported
// its input, then failed with overloaded_error; a request cancelled after
// it went out) is not the response's usage: it is added to the call's
// Discarded usage (ChatCall.DiscardAttempt), so a meter outside the
// fallback charges it, at that model's rates, while the response reports
// the usage of the model that served it.
package fallback
