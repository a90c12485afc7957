// Package retry implements the retry builtin (stages chat and tool): it
// re-invokes the inner layers when an attempt fails before anything was
// delivered and the failure is transient. It is not offered on the turn
// chain (schema/stage): running a turn again would run its tool calls
// again, a refund included; a retry on the tool chain retries one tool call,
// and agentc vet holds it to retry_safe tools (order/retry-side-effect).
//
// Classification follows runtime.IsTransient: rate limited, timeouts, 5xx and
// connection errors are transient, and so is anything unclassified; permanent
// errors (4xx, validation), blocked, budget and in-doubt errors and open
// breakers fail fast. A provider's word on trying the same call again
// (x-should-retry, runtime.CallError.Hint) decides over the kind
// (runtime.RetriesSame): false is not retried, true is retried even when
// the status is permanent; the breaker counts by the kind. A model's tool
// call cut inside its arguments (they end inside a JSON value, or they are
// not JSON and the answer ended without a finish reason) fails the model
// call, transient, before any of the calls went up the
// chain (the runtime holds the calls of a request that offers tools until
// the answer ends), so it is retried; one cut because the model reached its
// token limit (finish reason length) is permanent: asked again, it is cut
// again. Arguments the model wrote wrong (not JSON, with a syntax error
// before their end) are no cut: the call goes up the chain, where the tool
// chain refuses it, and is neither retried nor counted by the breaker. The caller's own cancellation is never retried; an attempt that ran
// out of attempt_timeout is. In the chat stage the attempt timeout bounds the
// time to the first delta the model sends, and once a delta has been
// delivered past the layer the stream is committed: a later failure is
// returned as is. idle_timeout bounds the wait for each delta after the
// first: a stream that stalls (sends nothing, or keep-alives only) ends with
// a timeout (KindTimeout), retried as an attempt_timeout is while no delta
// got past the layer (a layer inside it that holds deltas, such as
// content_filter holding tool calls, may have passed none yet). Any delta
// counts, whatever it carries: text, a tool-call fragment, a finish reason
// or usage alone. Both bounds time the deltas where they leave the model
// client (runtime.StreamWatcher), not where they reach the layer: a layer
// inside that holds them is no stall, and the time a delta spends in the
// layers above and the consumer (a slow reader behind agentc serve) pauses
// the idle bound. Deltas a layer inside makes itself, with no model call,
// are timed where they reach the layer.
//
// On the tool chain a retry never runs again a call that may have acted
// when the tool is side-effecting and not retry_safe: as declared (a plan
// that was not vetted: vet refuses such a retry, order/retry-side-effect),
// or because nothing declares its effects (an undeclared tool that
// settings.allow_undeclared_tools lets run, an MCP tool the policy does not
// declare and its server does not annotate readOnlyHint or idempotentHint,
// a host's tool: the runtime takes each as side-effecting and not
// retry_safe), and whatever its tool declares, when the tool of the call (an
// agent turn's, or one the host or a tool makes) ran an agent turn that
// started such a call, or made such a call of its own (Pipeline.Tool from
// inside the tool) that reached its tool
// (runtime.ToolCall.Delegated: run again, it would run that turn, or make that call, anew). Its transient failure is returned as it is, with the reason
// it was not retried appended to its message, and logged. An
// attempt_timeout that fired while such a tool ran (it returned after its
// attempt's context ended) is returned marked runtime.MayHaveRun
// (runtime.ToolCall.Interrupted), as a call its caller cancels while it
// runs: in doubt and final, so that an audit outside records it in_doubt, a
// meter or an idempotent layer outside takes it as having acted, and an
// agent turn ends rather than tell the model it failed. A failure that proves the tool did
// not act is still retried (runtime.DidNotRun: refused by an inner layer,
// such as a rate_limit in reject mode, a meter's budget held by the calls
// in flight or an egress check that could not resolve a host; a store a layer needed being unavailable; a connection
// refused before the request was sent). A failure marked runtime.MayHaveRun
// (in doubt) is never retried, nor is such a refusal a tool returns after
// it, or an agent turn it ran, made a call that would repeat an effect
// which reached its tool (a delegating tool's later turn refused for its
// run busy or its pipeline closed): the runtime marks it
// runtime.MayHaveRun.
//
// Backoff is exponential with full jitter: before attempt n+1 the layer waits
// a uniform random delay in [0, min(max_delay, initial_delay *
// multiplier^(n-1))]. A Retry-After the callee asks for (runtime.RetryAfterOf)
// replaces the jittered delay when it is within max_delay; a longer one is
// not waited out in part, since the attempt after max_delay would come
// before the callee said one could succeed (a rate_limit in reject mode
// inside the retry refuses it again, a provider's 429 most likely too): the
// failure is returned at once, its Retry-After kept, so a fallback outside
// moves on without the wait, and agentc serve answers the 429 with that
// Retry-After, as a client that honours the header expects. Waits end at
// once when the caller's context is done.
//
// A failure that carries retry feedback (runtime.RetryFeedbacker, such as
// output_coerce's coercion error) is re-asked: the next chat attempt sees the
// original transcript plus the feedback as one user message (only the latest
// failure's feedback; the caller's transcript is never modified, and the
// call's transcript is restored when the layer returns).
//
// In the chat stage what an attempt run again billed (the usage its
// provider reported before it failed, or the estimate of the input of one
// that ran out of attempt_timeout after its request went out) is not the
// response's usage: it is added to the call's Discarded usage
// (ChatCall.DiscardAttempt), so a meter outside the retry charges every
// attempt while the response reports the usage of the attempt that served
// it.
//
// Before each attempt the layer stamps the attempt number on the call's meta
// (Meta.Attempts): for a chat call, the number of the model call to come,
// counting every model call the logical call has made (those of a fallback's
// other models and of other retry layers included, a hedge's losing racers
// excepted), so that after the call it holds every model call made; for a
// tool call, the attempt number of the innermost retry. With `breaker`, each model (chat) or tool (tool) has a
// circuit breaker: after `failures` consecutive transient failures it opens
// and refuses calls with *runtime.BreakerOpenError (which fallback falls over
// on) until `cooldown` has passed; then one trial call is let through, whose
// success closes the breaker and whose transient failure opens it again. A
// trial that ends otherwise (a permanent error, the caller's cancellation, a
// panic of the inner layers or of the consumer) says nothing of the callee's
// health: the next call is let through as the trial. Only the trial's own
// outcome decides: a call let through before the breaker opened that ends
// during the trial (a slow call finishing late, with any outcome) neither
// closes nor reopens the breaker nor frees the trial, so at most one trial
// is in flight at a time.
//
// The breakers live in the pipeline's memory: each process (each replica of
// agentc serve, each runtime.Pipeline) has its own, opens it on its own
// failures and sends its own trial.
package retry
