// Package prove explores every fault path of a compiled policy and checks
// its invariants (`agentc prove`, docs/prove.md).
//
// Explore builds the plan's real pipeline (runtime.Build) over the scripted
// fakes of runtime/scenario, on a virtual clock, with a probe above every
// layer, and calls each declared model through the chat chain and each
// declared tool through the tool chain under every script of attempt
// outcomes up to a depth k: ok, transient, rate_limited (with a Retry-After),
// timeout, permanent, refused (a model provider's 401), a failure after one
// delta, a consumer stop after one delta, a slow response (where a hedge or an attempt timeout reacts to
// time), and a process crash while a tool runs, with one and two concurrent
// deliveries of each tool call; the two deliveries one after the other, and
// admitted together (the first waits at the tool until the second has
// passed the layers above it, then they run it one after the other), moving
// one at a time in a fixed order whatever the scheduler does (gate), so that
// an exploration comes out the same every time. Scripts are explored
// breadth first; a script
// whose run ends in a state already seen, or that did not reach its last
// outcome, is not extended, and a target that is the image of one already
// explored under renaming is skipped. Targets advance one depth at a time,
// so that a bound (Options.MaxStates, Options.Timeout) or an interrupt that
// stops the exploration leaves every target explored to Report.Proved.
// A tool is called with arguments its args schema and its egress and
// file_check layers accept (argGen), and with every string "a" when that
// differs; a model or tool that no run reached is listed in
// Report.Unexplored, and the exploration is then no proof.
//
// After every run the invariants are checked: the built-in ones
// (max_executions, audit_complete, budget_overshoot, no_effect_after_block,
// no_retry_after_output, no_phantom_effect, no_retry_after_refusal) unless the plan turns them off,
// and the plan's own CEL invariants over the run's trace. Each violation
// comes with the shortest script that shows it, as a scenario that
// `agentc run` replays, and the trace of the run.
package prove
