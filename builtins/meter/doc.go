// Package meter implements the meter builtin (stages chat and tool): it
// records usage and cost in a ledger and enforces the budget's ceilings.
//
// Chat: a call is charged its usage (reported by the model, or estimated by
// the runtime when the stream ended without a report), each model call made
// for it at its own model's rates (plan.Models; ChatCall.Charges): a retried
// or fallen-back attempt, a hedge's racer and the model that served are
// priced each at theirs; a model call whose input tokens (cache reads and
// writes included) are above the threshold of its model's long-context
// tier (plan.Model.LongContext) is priced wholly at the tier's rates, its
// estimate before the call as well. A call that asks for Anthropic's
// context-1m beta (Betas, a name opening with context-1m- in any case) is
// refused, a permanent *runtime.CallError, before it is reserved, while a
// model it can reach from the meter (the one it names, a model of a
// fallback or hedge layer inside) declares no tier from 200,000 input
// tokens or below and is not served by the openai provider (which refuses
// the beta unbilled): the meter would price it below the bill. It counts
// as one call. With a usd ceiling, a call that can reach from the meter a
// model the plan does not declare (a client the host gave in
// runtime.Deps.Models: the model it names, unless a fallback or hedge
// without a when inside replaces it, and those layers' models) is refused
// the same way, naming the model: the meter has no price for it and would
// count its spend as nothing (a meter without a when logs, when it is
// built, each model the host gives a client for that it would refuse so).
// A name no client serves (a typo) reaches no model: the terminal refuses
// it, naming the nearest model.
// A stream that
// was abandoned by the consumer, cancelled or failed mid-stream is charged for
// what arrived. A call cancelled after its request went out but before
// anything arrived (an attempt that timed out, a hedge's losing racer, a
// caller that gave up) is charged the estimate of its input
// (runtime.EstimateInput: its messages, tools and response format, as
// written to the prompt cache when a breakpoint marks one), which its
// provider bills. A failure that carries the usage its provider
// reported before it failed (runtime.CallError.Usage: an Anthropic stream
// that failed after message_start announced its input) is charged that
// usage. Any other failure before anything arrived (a refusal, a rate
// limit, an unreachable server) is not charged. A call served from a cache
// (Meta.Cached) is not charged, but for the model calls made for it
// before a cache inside the meter served it (a hedge's racer that lost to
// the cached answer, a retry's attempt that timed out before the hit),
// which their providers bill.
//
// Tool: the ledger counts the tool calls that ran or may have made their
// effect, and were not served from a cache or a stored outcome: a call that
// returned without error, one that ran and whose result could not be used
// (runtime.ErrRan), one whose outcome is unknown (runtime.ErrMayHaveRun,
// runtime.ErrOutcomeUnrecorded), and a call of a side-effecting tool that
// was cancelled, timed out or panicked while it ran, retry_safe or not (so a
// client that cancels each call once the tool has it does not make effects
// past the ceiling: retry_safe makes a retry of the same call safe, not a
// new call free). A retry_safe call is charged once, however many times a
// layer outside the meter (retry) runs it again: the tool dedupes its
// attempts by their idempotency key, and an attempt after the charge is
// neither charged nor refused by the ceiling the first one reached.
// Otherwise the ledger counts executions, not idempotency keys: a new call
// that runs again under a key (a retry_safe tool's, taking over a claim in
// doubt) is charged again, and one answered from a stored outcome is not. A call that failed
// otherwise, was proved not to have run (runtime.DidNotRun), had its context
// ended before it began, or is a duplicate in doubt (*runtime.InDoubtError)
// is not charged. Only the `calls` ceiling applies.
//
// Ceilings: before a call runs, it is refused with a *runtime.BudgetError if
// the ledger has reached any ceiling (tokens: input plus output; usd; calls).
// The check and the admission are one atomic step of the ledger store
// (runtime.Budgeter: a lock in process, a Lua script in redis, one
// function call in postgres): an admitted call is reserved until it ends,
// then either charged or, when it is not charged (a pre-stream failure, a
// cached hit, a failed tool call, a panic), released; its reservation is
// replaced by its charge in one step. The calls ceiling counts reserved
// calls with the charged ones, so concurrent calls of one ledger never run
// more calls than the ceiling allows. With on_cross "allow" the tokens and
// usd ceilings compare what has been charged: a call's usage is unknown
// until it ends, so calls admitted concurrently before the ledger reaches
// the ceiling all run, and each one that crosses it is charged in full.
//
// With on_cross "refuse" a model call is reserved with its estimate
// (Estimate: the request's max_tokens as output, or for a request without
// one the max_tokens its model's client sends then
// (runtime.OutputBounder: the plan's models.<name>.max_tokens, a Claude
// model's 4096 when it declares none; the largest of the models the call
// can reach), runtime.EstimateRequest
// of the whole request as input, its messages, tool definitions and
// response format schema, or, for a request without one, the schema an
// output_coerce inside the meter sets as its format (set_response_format;
// not on a layer's own call, a judge's verdict or a summary, which it
// leaves without one), priced at the rates of the dearest of the
// requested model and the models a fallback or hedge layer inside the
// meter may call in its place, times the most model calls the layers
// inside the meter make for one call: the product of the max_attempts of
// each retry and of the models of each fallback and hedge there,
// plan.ModelCalls, as agentc explain counts them, each layer counted
// whatever its when decides; an attempt that timed out after its request
// went out and a hedge's losing racer are charged, so one call may charge
// that many model calls), and it is refused before it runs, with a
// *runtime.BudgetError whose Estimate (and Pending, what the calls in
// flight have reserved) is set, when the
// charged ledger plus the estimates reserved by the calls in flight plus
// its own estimate would exceed the tokens or usd ceiling. When a call ends
// its estimate is replaced by what it charged, in full even when that is
// more. So the ceiling holds under any concurrency, in one process or
// across replicas sharing a store: the ledger never exceeds the ceiling by
// more than the sum, over the calls admitted, of what each charged beyond
// its estimate (a request without max_tokens to a model whose client
// sends none estimates no output, so all of
// its output is such excess; a cancelled call charged its input estimate
// adds none; a retry re-asking with feedback, such as output_coerce's,
// sends more input than the estimate counted). A call whose reservation
// lapsed before it ended (below)
// counts in that sum with what it charged beyond its estimate.
//
// Each reservation has a lease: the call's deadline (its context's) and 30
// seconds after it, else the meter's lease (runtime.DefaultReservationLease,
// 10 minutes, unless set). A reservation never settled, because its process
// died between reserving and settling or every settlement of it failed,
// lapses when its lease ends: it is charged as spent at its hold (one
// call, and its estimate's tokens and cost with on_cross "refuse"), never
// refunded, so a lost settlement never gives a ceiling a call back; a call
// that settles after its lease is charged what it exceeds its hold by.
// While the call runs its reservation is renewed every third of its lease
// (of 30 s once a call with a deadline has overrun it), so a call that
// runs longer than its lease keeps its place; only one whose store stays
// out of reach for a whole lease lapses (logged). One timer per meter
// serves the renewals of all its calls. A ledger in process memory has no
// lease: its reservations hold until their calls settle (only a crash
// could leave one unsettled, and a crash takes the memory with it).
//
// With on_cross "allow", across replicas sharing a store the same holds for
// every process: calls never exceed their ceiling, and tokens and cost
// exceed theirs by at most what the calls in flight when the ceiling was
// reached charge. A store failure before a call fails closed (the call
// does not run), and the reservation the store may have made is released
// in the background. A settlement the store does not acknowledge is sent
// again in the background, with a backoff from 100 ms doubling to 10 s,
// for 30 minutes (half of runtime.SettleMemory: an outage of the store
// shorter than that loses no charge while the process runs); the store settles a reservation once however many times
// its settlement arrives (runtime.SettleMemory), so a settlement whose
// answer was lost is not charged twice. If every attempt fails, the
// reservation lapses at the end of its lease and is charged its hold.
// At most 10,000 settlements wait per store, and at most 32 of them are
// sent at once: past the 10,000 a settlement is given up at once, logged
// with its charge and counted (Meter.LostSettlements), and a meter with a
// budget on the store refuses calls before they run, as when the store
// fails, until fewer wait.
// The settlements waiting are shared by the meters of the process on the
// same store: after a reload that keeps the store (same name and
// declaration) they go on being sent again for the rest of the 30 minutes,
// so a reload loses no charge. The close of the last pipeline using the
// store (a shutdown, or a reload that changes the store's declaration)
// sends those still waiting once more, 32 at a time, within 2 seconds all
// together (the stores of the pipeline's meters at once, not one after the
// other),
// before the store closes, and logs each that fails, or whose turn to be
// sent comes only after the 2 seconds, with its charge
// (Meter.LostSettlements); one still being sent at the deadline may yet reach
// the store: it is logged with its charge as unconfirmed
// (Meter.UnconfirmedSettlements), and counted lost only if its send then fails. A
// crash sends none. A lost settlement's reservation lapses and is charged
// its hold: one call, and with on_cross "refuse" its estimate; with
// on_cross "allow" the call's tokens and cost are lost.
//
// Scope "run" keeps one ledger per run id (runtime.WithRun); "key" one per
// tenant (runtime.Run.Tenant, the caller's key under agentc serve);
// "global" one for the layer. Without `store` ledgers live in memory for
// the pipeline's lifetime, and Forget (Pipeline.EndRun, settings.run_idle)
// drops a finished run's ledger. In a shared store a run's ledger expires a
// day after its last call and is never dropped before: a replica that sees
// the run end or go idle cannot tell that no other replica serves it. Only
// the ledger of a run that cannot continue (runtime.Run.Ephemeral: the run
// agentc serve gives a request without a run id, the run of its own a call
// without one gets) is dropped when the run ends, in a shared store too.
// With a window, dropping a run's ledger drops that of every window the
// run was charged in, not only the window of the moment (of those still
// kept: the process notes a run's windows until two hours after each
// ends, so a run that goes on for long holds a bounded few).
//
// Windows: without `window` a tenant's and the process's ledgers are kept
// for good. With one, the budget starts afresh at the start of each window,
// in UTC: a duration (whole seconds, from 1s to 366 days) cuts time into
// fixed spans counted from the Unix epoch, so "24h" starts a ledger at
// 00:00 UTC each day, "1h" on each hour and "168h" each Thursday at 00:00
// UTC (the epoch was a Thursday); "month" starts one at 00:00 UTC
// on the first of each calendar month. Each window is a ledger of its own,
// its key holding the window's length and start
// (agentc/meter/<stage>/<name>/window/86400s/<start, Unix seconds>/key/<tenant>).
// A call is charged to the window it was admitted in, read when it is
// reserved on the clock of the ledger store's server when the store tells
// it (runtime.StoreClock: a redis or postgres store; read each minute, the
// time elapsed since on the pipeline's clock, monotonic with the real
// clock, added in between; read again after a step of the wall clock),
// else on the
// pipeline's clock (runtime.Clock): its renewals and
// its settlement, and the settlement's resends, address that window's
// ledger even when the call ends after the window did, so a call that
// straddles a boundary takes nothing from the next window. A refusal's
// *runtime.BudgetError names the scope, the window and when it resets. A
// window's ledger expires an hour (runtime.SettleMemory) after its window
// ends, in a shared store as in process memory; with scope "run" at most
// a day after the run's last call. With scope "run" each run has a budget
// per window. Replicas whose clocks disagree charge a call to the same
// window, the server's; a store whose time cannot be read before any was
// read fails the call closed (store_unavailable).
//
// Two meters of one chain (each with its own `name`) keep separate
// ledgers, their keys holding their names: a tenant's daily budget beside a
// run's budget is two budgets, each refusing with its own error. Vet
// reports two meters alike in scope, window and store as duplicates
// (order/duplicate) unless their whens keep them apart (one per model, or
// one per tenant: run.meta.?tenant.orValue("") == "alpha"), not others.
package meter
