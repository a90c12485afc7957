package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "checkpoint"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageTurn},
		Doc:     "saves the run (transcript, tool results, state fields) as a numbered version after each turn",
		New:     func() runtime.Middleware { return &Checkpoint{Keep: runtime.DefaultCheckpointKeep} },
	})
}

// Checkpoint is the checkpoint middleware; its exported fields are its
// config (schemas/checkpoint.cue).
type Checkpoint struct {
	Store     string `json:"store"`
	AfterTool bool   `json:"after_tool"`
	// Keep is how many versions of a run the store keeps, the latest ones
	// (0: every version).
	Keep int `json:"keep"`

	cp   *runtime.Checkpointer
	name string
}

// Validate checks the bounds of the config.
func (c *Checkpoint) Validate() error {
	if c.Keep < 0 {
		return fmt.Errorf("keep must be 0 (every version) or more, got %d", c.Keep)
	}
	return nil
}

// Provision resolves the checkpoint store, declares how many versions of a
// run it keeps, checks before each turn that this process still holds the
// run and, with after_tool, hooks the saves before an agent turn's tool
// calls run and after each tool result.
func (c *Checkpoint) Provision(b *runtime.BuildContext) error {
	cp, err := b.Checkpoints(c.Store)
	if err != nil {
		return err
	}
	b.KeepCheckpoints(c.Store, c.Keep)
	c.cp = cp
	c.name = b.Name()
	// Before the turn's layers, its model call and its tools: a run that
	// another process ended, or saved since this one last did (a replica
	// that resumed it), is refused as its first save would be, with
	// nothing run (a *runtime.BlockedError), rather than once the model
	// was called and, without after_tool, its tools ran.
	b.OnTurnStart(func(ctx context.Context) error {
		// A turn cancelled already is checked too, as its end's save
		// is made: a run this process holds records the cancellation,
		// one it does not is refused as the save would be.
		err := cp.Check(context.WithoutCancel(ctx))
		var blocked *runtime.BlockedError
		if err == nil || errors.As(err, &blocked) {
			return err
		}
		return runtime.StoreRefusal(c.name, "the run's latest version could not be read; the turn did not run", err)
	})
	if c.AfterTool {
		// Before an agent turn's tool calls run, and after each returns:
		// a run resumed from either save knows which calls were made and
		// which came back.
		b.OnToolCalls(func(ctx context.Context) error {
			_, err := cp.Save(ctx)
			return c.unsaved(err, false)
		})
		b.OnToolResult(func(ctx context.Context) error {
			_, err := cp.Save(ctx)
			return c.unsaved(err, true)
		})
	}
	return nil
}

// unsaved returns the error of a save that failed, naming the layer. When
// what the save was to record has run (a tool call that returned, a turn
// that ended well), the error wraps runtime.ErrOutcomeUnrecorded: the call's
// effect stands, so it is in doubt (final) rather than a failure to deliver
// again, and an agent turn ends instead of telling the model the tool
// failed or was refused, which could have it make the call again. A
// refusal to save (a secret in clear, a run that another process saved
// since, a *runtime.CheckpointConflictError, or ended, a
// *runtime.TerminalRunError) is then passed on without its
// *runtime.BlockedError, which would tell that nothing ran. Before anything
// ran, a refusal is returned as it is (blocked), so that a turn ends before
// its tool calls, and any other failure is the store's
// (runtime.StoreUnavailable).
func (c *Checkpoint) unsaved(err error, ran bool) error {
	if err == nil {
		return err
	}
	var b *runtime.BlockedError
	blocked := errors.As(err, &b)
	if ran {
		if blocked && b.Err != nil {
			err = b.Err
		}
		return &runtime.CallError{Kind: runtime.KindPermanent, Layer: c.name, Message: "the run is not saved",
			Err: errors.Join(runtime.ErrOutcomeUnrecorded, err)}
	}
	if blocked {
		return err
	}
	return runtime.StoreRefusal(c.name, "the run is not saved", err)
}

// StateKeys implements runtime.StateKeyer: the sample run's versions, which
// a runtime.CheckpointStore keeps under the run's id alone (neither the
// layer's name nor its keep or after_tool), so that only the store decides
// where a run saved before is found.
func (c *Checkpoint) StateKeys(at runtime.StateSite) []runtime.StateKey {
	return []runtime.StateKey{{Store: runtime.StoreName(c.Store), Key: at.Run().ID, What: "saved runs",
		Then: "runs saved before the change are not found, so they cannot be resumed"}}
}

// Checkpointer returns the layer's checkpointer.
func (c *Checkpoint) Checkpointer() *runtime.Checkpointer { return c.cp }

// WrapTurn implements runtime.TurnWrapper. The save is made once the whole
// turn chain has returned (runtime.TurnCall.AtEnd), wherever the layer
// stands in it: its status is the turn's outcome as the outermost layer
// returned it, and its transcript what the turn let through, without an
// output that a layer outside this one refused (a content_filter, an
// after-phase guard) and that a resume would otherwise hand back.
func (c *Checkpoint) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, t *runtime.TurnCall) (string, error) {
		out, err := next(ctx, t)
		t.AtEnd(func(err error) error { return c.saveTurn(ctx, err) })
		return out, err
	}
}

// saveTurn saves the run after a turn that ended with err, as running or,
// when the turn ended final, as the terminal status it ended in.
func (c *Checkpoint) saveTurn(ctx context.Context, err error) error {
	var (
		ce *runtime.CheckpointConflictError
		te *runtime.TerminalRunError
	)
	if errors.As(err, &ce) || errors.As(err, &te) {
		// Another process holds the run, or ended it: what this one has
		// of it is stale, and it saves nothing more.
		return nil
	}
	status := runtime.RunRunning
	switch {
	case err == nil:
	case runtime.Classify(err) == runtime.ClassInDoubt:
		// A call in doubt: the run stays open for a person to answer
		// the call and resume it, even when the turn was cancelled
		// too.
	case errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), runtime.ErrShutdown):
		// The process stops, the run does not: another worker
		// resumes it.
	case errors.Is(err, context.Canceled):
		status = runtime.RunCancelled
	case runtime.Classify(err) == runtime.ClassBlocked, runtime.Classify(err) == runtime.ClassBudget:
		status = runtime.RunFailed
	}
	// The save outlives a cancelled turn: it records the cancellation.
	sctx := context.WithoutCancel(ctx)
	var serr error
	if status.Terminal() {
		_, serr = c.cp.Finish(sctx, status)
	} else {
		_, serr = c.cp.Save(sctx)
	}
	// A turn that ended well or in doubt has run calls: a save of it
	// refused or failed leaves their outcome unrecorded.
	return c.unsaved(serr, err == nil || runtime.Classify(err) == runtime.ClassInDoubt)
}
