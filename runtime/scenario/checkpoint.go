package scenario

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// CheckpointStep saves the run now (runtime.Checkpointer.Save), or with
// Finish ("done", "failed", "cancelled") saves it in that terminal state.
// Store names the checkpoint store ("" is the default).
type CheckpointStep struct {
	Store  string `json:"store,omitempty"`
	Finish string `json:"finish,omitempty"`
}

func (c *CheckpointStep) check() error {
	if c.Finish != "" && !runtime.RunStatus(c.Finish).Terminal() {
		return fmt.Errorf("finish %q is not done, failed or cancelled", c.Finish)
	}
	return nil
}

// ResumeStep restores the run from its latest checkpoint in Store ("" is
// the default store): a run in a terminal state is refused (blocked by
// layer "checkpoint").
type ResumeStep struct {
	Store string `json:"store,omitempty"`
}

// CheckpointInfo describes a saved or resumed version: its number and
// status, and how many transcript messages, tool results and state fields
// it holds.
type CheckpointInfo struct {
	Version  int    `json:"version"`
	Status   string `json:"status"`
	Messages int    `json:"messages"`
	Tools    int    `json:"tools"`
	Fields   int    `json:"fields"`
}

// CheckpointSummary lists the run's versions after the steps, in the store
// of the policy's checkpoint layer (else the default store), and the latest
// one.
type CheckpointSummary struct {
	Versions []int           `json:"versions"`
	Latest   *CheckpointInfo `json:"latest,omitempty"`
}

func infoOf(cp runtime.Checkpoint) *CheckpointInfo {
	return &CheckpointInfo{Version: cp.Version, Status: string(cp.Status), Messages: len(cp.Transcript), Tools: len(cp.Tools),
		Fields: len(cp.Fields)}
}

// checkpoint runs a checkpoint step.
func (r *runner) checkpoint(ctx context.Context, i int, cs *CheckpointStep) StepResult {
	sr := StepResult{Index: i, Stage: "checkpoint"}
	c, err := r.pl.Checkpointer(cs.Store)
	if err == nil {
		var cp runtime.Checkpoint
		if cs.Finish != "" {
			cp, err = c.Finish(ctx, runtime.RunStatus(cs.Finish))
		} else {
			cp, err = c.Save(ctx)
		}
		if err == nil {
			sr.Checkpoint = infoOf(cp)
		}
	}
	setOutcome(&sr, err)
	return sr
}

// resume runs a resume step.
func (r *runner) resume(ctx context.Context, i int, rs *ResumeStep) StepResult {
	sr := StepResult{Index: i, Stage: "resume"}
	c, err := r.pl.Checkpointer(rs.Store)
	if err == nil {
		var cp runtime.Checkpoint
		cp, err = c.Resume(ctx, runtime.RunOf(ctx).ID)
		if cp.Version > 0 {
			sr.Checkpoint = infoOf(cp)
		}
		if err == nil {
			r.setTranscript(r.pl.Transcript(ctx))
		}
	}
	setOutcome(&sr, err)
	return sr
}

// crash closes the pipeline without ending the run, as a process that dies
// would leave it, and builds another over the same dependencies: the run's
// state, transcript and the layers' in-memory state are gone; the stores
// outside the process (the scenario's default checkpoint and audit stores,
// sqlite files) remain.
func (r *runner) crash(ctx context.Context, i int) StepResult {
	sr := StepResult{Index: i, Stage: "crash"}
	if !r.hold {
		// The process dies between two calls, once the background sinks
		// caught up: whether they had would otherwise be the scheduler's
		// choice, and two runs of the scenario would differ. Held, the
		// events are dropped, as deterministically.
		_ = r.pl.DrainState(ctx)
	}
	_ = r.pl.Close()
	r.setTranscript(nil)
	pl, err := r.rebuild(context.WithoutCancel(ctx))
	if err != nil {
		// Without a pipeline no step can run: end the scenario here.
		r.f.crashed.Store(true)
		setOutcome(&sr, err)
		return sr
	}
	r.pl = pl
	sr.Outcome = "ok"
	return sr
}

// checkpointSummary reads the run's versions from the checkpoint store
// named store.
func checkpointSummary(ctx context.Context, pl *runtime.Pipeline, store, runID string) (*CheckpointSummary, error) {
	c, err := pl.Checkpointer(store)
	if err != nil {
		return nil, err
	}
	vs, err := c.Versions(ctx, runID)
	if err != nil {
		return nil, err
	}
	out := &CheckpointSummary{Versions: vs}
	if out.Versions == nil {
		out.Versions = []int{}
	}
	if cp, ok, err := c.Latest(ctx, runID); err != nil {
		return nil, err
	} else if ok {
		out.Latest = infoOf(cp)
	}
	return out, nil
}

// checkpointStore returns the store whose versions the result lists, and
// whether the run uses checkpoints at all: the store of the plan's
// checkpoint layer, else the default store when a step saves, finishes or
// resumes a run.
func checkpointStore(p *plan.Plan, steps []Step) (string, bool) {
	for _, l := range p.Chains.Turn {
		if l.Use == "checkpoint" {
			var cfg struct {
				Store string `json:"store"`
			}
			_ = json.Unmarshal(l.Config, &cfg)
			return cfg.Store, true
		}
	}
	var walk func([]Step) bool
	walk = func(steps []Step) bool {
		for _, st := range steps {
			if st.Checkpoint != nil || st.Resume != nil || walk(st.Parallel) || st.Turn != nil && walk(st.Turn.Steps) {
				return true
			}
		}
		return false
	}
	return "", walk(steps)
}
