// Package checkpoint implements the checkpoint builtin (stage turn): after
// each turn it saves the run, its transcript (as the agent loop left it, or
// as the host recorded it with runtime.Pipeline.RecordTranscript), its tool
// results and its state fields, as the run's next numbered version in the
// checkpoint store of `store` (runtime.Checkpointer). With after_tool it
// also saves after each tool result, once the result has returned through
// the tool chain. The store keeps the run's latest `keep` versions (default
// 10; 0: every version): each save deletes the older ones with the version
// it stores, and the version numbers go on increasing. The save after a
// turn is made once the whole turn chain has returned, wherever the layer
// stands in it (runtime.TurnCall.AtEnd), so that it records the turn's
// outcome as every layer decided it and no output a layer outside it
// refused.
//
// The version records where the run stands: "running" after a turn that
// ended well, with an error that may be redelivered, or in doubt (a call
// that may have run, for a person to answer before the run is resumed,
// even when the turn was cancelled too), "cancelled" when the turn's
// context was cancelled, "failed" when the turn ended blocked or over
// budget. A host finishes a run with Checkpointer.Finish
// ("done"); Checkpointer.Resume restores a run from its latest version and
// refuses one in a terminal state.
//
// A secret value is never persisted in clear: a state field marked secret
// that none of its redact handlers cleaned, or any string or number of a
// result of a tool declared secret_result that is still present (as a
// string, a number or an object key; a redact layer removes it), refuses
// the save with a *runtime.BlockedError of layer
// "checkpoint" wrapping a *runtime.SecretError naming the path
// ("fields.api_token", "transcript[3].content"); nothing is written, and
// the turn returns that error, unless what the save was to record has run
// (below). A store that fails fails the turn too, with
// a *runtime.CallError naming the layer: a run that cannot be checkpointed
// does not go on silently. When what the save was to record has run (a turn
// that ended well or in doubt, a tool call that returned, with after_tool)
// the error
// wraps runtime.ErrOutcomeUnrecorded, so runtime.Classify reports it in
// doubt (final: a worker does not deliver the turn again, which would repeat
// its refund), and an agent turn ends there instead of telling the model the
// tool failed, which could have it make the call again; a turn that failed
// of its own keeps its class, and a save before an agent turn's tool calls
// run fails as the store's failure (runtime.ErrStoreUnavailable). A save
// refused (a secret in clear, a run another process saved or ended) after
// something ran (a tool result, a turn that ended well or in doubt) is in
// doubt so too, without the *runtime.BlockedError, which would tell that
// nothing ran.
//
// Each save is the version after the one the process last saved or
// resumed. Before each turn (runtime.Pipeline.RunAgent, Turn) enters the
// turn chain, the layer reads where the run stands in the store (one round
// trip, runtime.Checkpointer.Check): a run another process ended, or saved
// since this one last did (two workers resumed it), is refused there, as
// that save would be, blocked (a *runtime.BlockedError wrapping the
// *runtime.TerminalRunError or *runtime.CheckpointConflictError): the
// model is not called, no tool runs and nothing is saved. A store that
// cannot be read then fails the turn before anything runs
// (runtime.ErrStoreUnavailable). When another process saves the run while
// the turn runs, the store refuses the turn's next save with the
// *runtime.CheckpointConflictError and the turn ends with it, saving
// nothing more; with after_tool that is before the model's tool calls run,
// blocked (*runtime.BlockedError): none ran.
// The save after a tool result refused so (another process took the run
// over while the call ran) ends the turn in doubt
// (runtime.ErrOutcomeUnrecorded, never blocked): the call ran. So does one
// refused because another process ended the run meanwhile (a
// *runtime.TerminalRunError): the model is not called again, and the
// turn's end saves nothing more of the run. The process
// no longer holds the run: its later turns of it are refused the same way
// until it resumes it (runtime.Checkpointer.Resume), from the latest
// version, which lacks the result it could not save. A process that
// restarts resumes its runs before it runs their turns, or their turns are
// refused so before they run.
//
// The layer acts where a host runs turns (runtime.Pipeline.RunAgent,
// Turn): `agentc serve` runs none, and builds its pipeline without the
// turn chain, so it saves no run of the calls it serves.
package checkpoint
