// Package runtime builds the typed middleware graph of a compiled plan and runs
// calls through it.
//
// A plan (package runtime/plan) lists the layers of each stage, outermost first.
// Build looks every layer up in the module registry, creates it (Module.New),
// decodes its config from the plan into the middleware's typed struct (unknown
// fields are an error), provisions and validates it, and folds each chain once
// into nested handler funcs. Nothing is looked up per call: a pass-through layer
// costs one indirect call and no allocation.
//
// The stages and their handler types:
//
//   - chat (ChatHandler) streams one model call. Handlers are push-style: the
//     innermost handler calls the model client named by ChatCall.Request.Model
//     and pushes each delta through the yield func that every layer passes down
//     unchanged. Layers read the stream's state (deltas delivered, usage,
//     served model) from the ChatCall once next returns. The public API offers
//     Pipeline.Stream (push), Pipeline.Chat (an iter.Seq2 facade) and
//     Pipeline.Complete (the collected response).
//   - tool (ToolHandler) is request/response around one tool registered by
//     name in Deps.Tools.
//   - turn (TurnHandler) wraps one whole agent turn: a func that runs the turn.
//   - admit filters retrieved grounding items with the plan's admission
//     predicate. With the plan's grounding section and a Deps.Retriever, the
//     first model call of a run (or of each turn, with reground_every_turn)
//     retrieves items, admits them, renders them into a block within a token
//     budget (runtime/grounding) and records them; every call of the run or
//     turn then carries the block, injected before the chat chain's first
//     layer. Pipeline.Ground does the same for items the host brings.
//
// Every call carries Meta: the run (from WithRun), the attempt number that retry
// layers stamp, a stable idempotency key per logical call, and the marks that
// caches set (Cached, Deduped) so that meters and audits can tell.
//
// Runs: layers that keep state per run id (a meter's ledger, a rate_limit
// bucket with scope "run") implement RunEnder. The host calls
// Pipeline.EndRun(runID) once a run has finished, and every such layer drops
// the run's state; without it, a long-lived pipeline keeps one entry per run
// id it has seen. runtime/scenario ends its run when the scenario is done.
// A call made without a run id (no WithRun, or a Run whose ID is empty) gets
// a fresh run of its own, "call-" and a random id, keeping the other fields
// of the context's run, and the runtime ends it when the call returns: such
// calls never share a run's budget, rate-limit bucket or idempotency keys
// with one another. A turn's fresh run is the run of every call made with
// the turn's context. Give calls that belong together (an agent's run, a
// redelivered job) a run id with WithRun.
//
// Errors: a guard trip returns *BlockedError, a budget ceiling *BudgetError,
// anything else is a failure. Classify tells a host worker which: blocked and
// budget are final (but a budget held only by other calls in flight,
// BudgetError.InFlight), a failure may be redelivered. *CallError classifies model
// and tool failures (transient, rate limited, timeout, permanent) for retry,
// fallback and hedge.
//
// Builtins register from init() in their own packages (builtins/<id>); import
// github.com/agentc-dev/agentc/builtins/all to link them all. Custom middlewares
// register the same way with Register. This package never imports CUE, the DSL
// or the compiler: a service links only the runtime and a compiled plan.json.
package runtime
