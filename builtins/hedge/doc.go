// Package hedge implements the hedge builtin (stage chat): it races the
// configured models. The first starts at once; each next one starts after
// `delay`, or at once when a started model fails. With win "first_delta"
// (the default) the first model to deliver
// a delta (any delta: text, a tool-call fragment, a finish reason or usage
// alone) or to finish successfully without one wins; a delta counts as its
// model client yields it (runtime.StreamWatcher), so a model streaming a
// tool call, whose fragments the runtime holds below the layers until the
// answer ends (the calls of a request that offers tools go up whole), wins
// with its first fragment: the others are
// cancelled, and the hedge layer waits for them to return before it returns,
// so no goroutine outlives the call. The winner's deltas are forwarded in
// order on the caller's goroutine.
//
// A model that fails before delivering a delta, with a transient or
// permanent failure, does not end the race: its error is recorded and the
// models still running keep racing. A model listed more than once (raced
// against itself) whose provider refused the call
// (runtime.ErrProviderRefused: its key, its account, a model it does not
// know) is not started again in that call, as it would be refused again:
// the next model listed is started instead. A refusal by the policy is different: a
// racer whose inner layers block the call (*runtime.BlockedError), refuse it
// on a budget (*runtime.BudgetError) or find it in doubt
// (*runtime.InDoubtError) ends the race before a winner, as it stops
// fallback: the other racers are cancelled, no further model is started, and
// the call fails with that error, so another model's answer never bypasses a
// guard's block nor spends past a budget. The call fails only when every model started has
// failed and no more are due (all models have been started, or the caller's
// context is done); it then returns the error of the model that failed last
// (the caller's context error when that is done). Once a winner has delivered
// a delta, the stream is committed: its error, if any, is the call's; so is
// the error of a winner whose deltas the layers below still held (a tool
// call its upstream then cut: a retry inside the hedge may try again).
//
// A panic in a racer (a model client or an inner layer) does not crash the
// process from the racer's goroutine: it ends the race, the other racers are
// cancelled and awaited, and the panic is raised again, with the same value,
// on the caller's goroutine. When the consumer's yield panics, the racers are
// likewise cancelled and awaited before the panic leaves the layer.
//
// With win "first_success" a racer wins only by finishing without an error:
// each racer's deltas are held in memory (acknowledged, so it keeps
// streaming) until one finishes successfully; that one wins, the others are
// cancelled and their held deltas dropped, and the winner's deltas are then
// forwarded in order. A racer that fails after delivering deltas is dropped
// like one that failed before any, so a mid-stream failure of one model is
// covered by another; the consumer sees nothing until a model has finished.
//
// Each racer runs the inner layers on its own copy of the call
// (ChatCall.Clone); the winner's served model, usage and attempts are copied
// back. What every other racer billed (what arrived from it, or the input of
// a request cancelled after it went out) is added to the call's Discarded
// usage (ChatCall.Discard), so a meter outside the hedge charges what the
// providers bill for the whole race while the response reports the winner's
// usage. Model clients must return promptly when their context is cancelled.
package hedge
