// Package meter implements the meter builtin (stages chat and tool): it
// records usage and cost in a ledger and enforces the budget's ceilings.
//
// Chat: a call is charged its usage (reported by the model, or estimated by
// the runtime when the stream ended without a report), each model call made
// for it at its own model's rates (plan.Models; ChatCall.Charges): a retried
// or fallen-back attempt, a hedge's racer and the model that served are
// priced each at theirs. It counts as one call. A stream that
// was abandoned by the consumer, cancelled or failed mid-stream is charged for
// what arrived. A call cancelled after its request went out but before
// anything arrived (an attempt that timed out, a hedge's losing racer, a
// caller that gave up) is charged the estimate of its input
// (runtime.EstimateMessages), which its provider bills. Any other failure
// before anything arrived (a refusal, a rate limit, an unreachable server) is
// not charged. A call served from a cache (Meta.Cached) is not charged.
//
// Tool: the ledger counts the tool calls that returned without error and were
// not served from a cache; only the `calls` ceiling applies.
//
// Ceilings: before a call runs, it is refused with a *runtime.BudgetError if
// the ledger has reached any ceiling (tokens: input plus output; usd; calls).
// The check and the admission are one atomic step of the ledger store
// (runtime.Budgeter: a lock in process, a Lua script in redis, one
// statement in postgres): an
// admitted call is counted as pending until it ends, then either charged or,
// when it is not charged (a pre-stream failure, a cached hit, a failed tool
// call, a panic), released. The calls ceiling counts pending calls with the
// charged ones, so concurrent calls of one ledger never run more calls than
// the ceiling allows. The tokens and usd ceilings compare what has been
// charged: a call's usage is unknown until it ends, so calls admitted
// concurrently before the ledger reaches the ceiling all run, and each one
// that crosses it is charged in full.
//
// With on_cross "refuse" a model call that would cross the tokens or usd
// ceiling is refused before it runs: its estimate (Estimate: the request's
// max_tokens as output, runtime.EstimateMessages of its messages as input,
// priced at the requested model's rates) added to the charged ledger must
// stay within every ceiling, else the call fails with a *runtime.BudgetError
// whose Estimate is set. A request without max_tokens estimates no output.
// The check is part of the reservation (one atomic step, one round trip to
// a shared store), but it compares the charged ledger: calls admitted
// concurrently have not charged yet and may still cross together; the
// ceiling then stops the ones after.
//
// Across replicas sharing a store the same holds for every process: calls
// never exceed their ceiling, and tokens and cost exceed theirs by at most
// what the calls in flight when the ceiling was reached charge. A store
// failure before a call fails closed (the call does not run); one after it
// is logged and the charge lost.
//
// Scope "run" keeps one ledger per run id (runtime.WithRun); "global" one for
// the layer. Without `store` ledgers live in memory for the pipeline's
// lifetime, and Forget (Pipeline.EndRun, settings.run_idle) drops a
// finished run's ledger. In a shared store a run's ledger expires a day
// after its last call and is never dropped before: a replica that sees the
// run end or go idle cannot tell that no other replica serves it.
package meter
