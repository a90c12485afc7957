package runtime

// RunEnder is implemented by a middleware that keeps state per run id (a
// meter's per-run ledger, a rate_limit's per-run bucket): EndRun drops the
// state of a run that has finished. A layer must tolerate EndRun for a run
// it never saw, and a call of the run made afterwards starts from fresh
// state. State kept in a store other processes may share (not InProcess)
// is left to the store's expiry instead: a replica that sees a run end or
// go idle cannot tell whether another replica still serves it; a layer may
// drop it still for a run that cannot continue (Run.Ephemeral), which it
// saw the calls of.
type RunEnder interface {
	EndRun(runID string)
}

// EndRun tells every layer of the pipeline that implements RunEnder that the
// run runID has finished, so that per-run state does not accumulate over a
// long-lived pipeline. The host calls it once a run's last call has returned;
// calls of the run still in flight finish against the state they hold. It is
// safe for concurrent use.
func (pl *Pipeline) EndRun(runID string) {
	if pl.runs != nil {
		pl.runs.forget(runID)
	}
	pl.endRun(runID)
}

// endRun tells the layers that the run has ended, and forgets its run
// state.
func (pl *Pipeline) endRun(runID string) {
	pl.forgetGrounding(runID)
	pl.dropRunState(runID)
	for _, inst := range pl.insts {
		if e, ok := inst.(RunEnder); ok {
			e.EndRun(runID)
		}
	}
}
