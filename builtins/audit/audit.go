package audit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/agentc-dev/agentc/builtins/internal/errtext"
	"github.com/agentc-dev/agentc/builtins/internal/outerpii"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "audit"

func init() {
	runtime.Register(runtime.Module{
		ID:         ID,
		Builtin:    true,
		Stages:     []plan.Stage{plan.StageTool, plan.StageTurn},
		Traits:     []runtime.Trait{runtime.TraitRecords},
		Repeatable: true,
		Doc:        "one durable record per invocation of this layer, failures included, with a record of intent first",
		New:        New,
	})
}

// New returns an audit layer with the schema's defaults (trail logical, no
// raw arguments).
func New() runtime.Middleware { return &Audit{Trail: "logical"} }

// Audit is the audit middleware; its exported fields are its config
// (schemas/audit.cue).
type Audit struct {
	Trail       string `json:"trail"`
	Sink        string `json:"sink,omitempty"`
	IncludeArgs bool   `json:"include_args"`
	// IncludeErrors stores a failed call's error text in clear; without
	// it the record holds what errorText keeps.
	IncludeErrors bool `json:"include_errors"`

	name string
	sink runtime.AuditSink
	now  func() time.Time
	// digester digests a turn's input and a withheld error's text, as
	// the pipeline digests a tool call's arguments (settings.digest_key_env).
	digester runtime.Digester
	// maskPII masks a failed tool call's error text as the pii layers
	// outside the layer mask it for the caller (nil without one).
	maskPII func(string) string
}

// Provision resolves the sink.
func (a *Audit) Provision(b *runtime.BuildContext) error {
	a.name = b.Name()
	a.now = b.Clock().Now
	a.digester = b.Digester()
	mask, err := outerpii.Masker(b)
	if err != nil {
		return err
	}
	a.maskPII = mask
	s, err := b.AuditSink(a.Sink)
	if err != nil {
		return err
	}
	if setting := runtime.Evicts(s, true); setting != "" {
		return fmt.Errorf("store %q evicts keys under memory pressure, those without an expiry too (%s): the trail is one such key, and it would be lost; set maxmemory-policy noeviction or a volatile-* policy on the server, or keep the trail in another store",
			runtime.StoreName(a.Sink), setting)
	}
	a.sink = s
	return nil
}

// Validate checks the trail.
func (a *Audit) Validate() error {
	if a.Trail != "logical" && a.Trail != "attempts" {
		return fmt.Errorf(`trail must be "logical" or "attempts", got %q`, a.Trail)
	}
	return nil
}

// Decision returns the outcome decision of a call that returned err with
// meta.
func Decision(err error, meta *runtime.Meta) runtime.AuditDecision {
	c := runtime.Classify(err)
	if c != runtime.ClassOK && c != runtime.ClassInDoubt && errors.Is(err, runtime.ErrRan) {
		// The call ran and its result was refused or dropped: the effect
		// stands, which "failed" or "denied" would deny.
		if meta.Deduped {
			return runtime.DecisionDeduped
		}
		return runtime.DecisionRan
	}
	switch c {
	case runtime.ClassOK:
		if meta.Deduped {
			return runtime.DecisionDeduped
		}
		return runtime.DecisionOK
	case runtime.ClassBlocked, runtime.ClassBudget:
		return runtime.DecisionDenied
	case runtime.ClassInDoubt:
		return runtime.DecisionInDoubt
	}
	return runtime.DecisionFailed
}

// invoke writes the intent, runs call and writes the outcome. effect is set
// for a call that may make an effect a repetition would make again (a
// side-effecting tool not declared retry_safe): when such a call panics, or
// fails while its context is cancelled (with an error that does not prove
// it never ran, runtime.DidNotRun), it may have made its effect before
// it stopped, so its outcome is recorded in doubt (decision in_doubt,
// error_type in_doubt, the cause in the message), as idempotent treats it,
// rather than failed, which a person settling the trail would read as "did
// not happen".
func invoke[T any](ctx context.Context, a *Audit, rec runtime.AuditRecord, meta *runtime.Meta, effect bool, call func() (T, error)) (v T, err error) {
	rec.Time = a.now()
	rec.Phase = runtime.PhaseIntent
	rec.Attempts = meta.Attempts
	if werr := a.sink.Append(ctx, rec); werr != nil {
		var zero T
		err := runtime.StoreRefusal(a.name, "audit intent not written; the call did not run", werr)
		a.notRun(ctx, rec, meta, err)
		return zero, err
	}
	start := rec.Time
	completed := false
	defer func() {
		if completed {
			return
		}
		p := recover()
		cause, what := errors.New("the call did not return (goroutine exited)"), "the call did not return (goroutine exited)"
		if p != nil {
			cause, what = fmt.Errorf("panic: %v", p), "panic"
		}
		out := a.outcome(rec, meta, start, cause, what)
		if effect {
			markInDoubt(&out)
		}
		_ = a.sink.Append(context.WithoutCancel(ctx), out)
		if p != nil {
			panic(p)
		}
	}()
	v, err = call()
	completed = true
	out := a.outcome(rec, meta, start, err, "")
	if effect && err != nil && ctx.Err() != nil && !runtime.DidNotRun(err) && out.Decision == runtime.DecisionFailed {
		markInDoubt(&out)
	}
	if werr := a.sink.Append(context.WithoutCancel(ctx), out); werr != nil {
		oerr := &runtime.CallError{Kind: runtime.KindPermanent, Layer: a.name, Message: "audit outcome not written",
			Err: errors.Join(runtime.ErrOutcomeUnrecorded, runtime.StoreFailed(werr))}
		if err == nil {
			return v, oerr
		}
		return v, errors.Join(err, oerr)
	}
	return v, err
}

// notRunMessage is the error message of the outcome record that follows an
// intent reported not written.
const notRunMessage = "audit intent reported not written (the store failed; it may have written it all the same); the call did not run"

// notRun follows the intent rec, whose write failed with err, with an
// outcome saying the call did not run (decision failed): a store may have
// written the intent though its answer was lost (the connection cut after
// the commit), and an intent without an outcome reads as a call that
// crashed while it ran. A store that fails again loses this record too;
// one that never wrote the intent holds an outcome without one.
func (a *Audit) notRun(ctx context.Context, rec runtime.AuditRecord, meta *runtime.Meta, err error) {
	out := a.outcome(rec, meta, rec.Time, err, "")
	out.ErrorMessage = notRunMessage
	_ = a.sink.Append(context.WithoutCancel(ctx), out)
}

// markInDoubt records an outcome as in doubt: the call may have made its
// effect before it stopped.
// The kind the failure had (canceled, failure...) is kept in the message.
func markInDoubt(rec *runtime.AuditRecord) {
	rec.Decision = runtime.DecisionInDoubt
	rec.ErrorMessage = "the call may have made its effect before it stopped (" + rec.ErrorType + "): " + rec.ErrorMessage
	rec.ErrorType = "in_doubt"
}

// errorText returns what an outcome record says of err. With
// include_errors, its text. Without it, the text is withheld, since a tool's
// error may quote its arguments (a card number, an email address): what
// (a note of the audit layer's own, such as "panic"), the layer the error
// names (runtime.LayerOf) and the hex SHA-256 of the text, with which an
// auditor holding the text (the caller's, a log's) can match it to the
// record, as the arguments' digest matches the arguments. In the tool
// chain, the personal data the pii layers outside the layer mask in the
// error for the caller is masked first (outerpii): the record holds, or
// digests, the text the caller reads.
func (a *Audit) errorText(err error, what string) string {
	text := err.Error()
	if a.maskPII != nil {
		text = a.maskPII(text)
	}
	if a.IncludeErrors {
		return text
	}
	return errtext.Withheld(a.digester, err, text, what)
}

// outcome returns the outcome record of a call that returned err; what is
// the audit layer's own note on a call that did not return (errorText).
func (a *Audit) outcome(rec runtime.AuditRecord, meta *runtime.Meta, start time.Time, err error, what string) runtime.AuditRecord {
	rec.Time = a.now()
	rec.Phase = runtime.PhaseOutcome
	rec.Decision = Decision(err, meta)
	rec.Attempts = meta.Attempts
	rec.Duration = rec.Time.Sub(start)
	// The outcome's error fields describe the call's failure only (an
	// intent record may carry a note on the arguments).
	rec.ErrorType, rec.ErrorMessage = "", ""
	if err != nil {
		rec.ErrorType = runtime.KindOf(err)
		rec.ErrorMessage = a.errorText(err, what)
	}
	return rec
}

// WrapTool implements runtime.ToolWrapper.
func (a *Audit) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		rec := runtime.AuditRecord{Layer: a.name, Stage: plan.StageTool, Tool: c.Name, RunID: c.Meta.Run.ID,
			IdempotencyKey: c.IdempotencyKey()}
		digest, derr := c.ArgsDigestErr()
		rec.ArgsDigest = digest
		if derr != nil {
			// No digest: the intent record notes why.
			rec.ErrorMessage = "arguments cannot be canonicalised: " + derr.Error()
		}
		if a.IncludeArgs {
			// The sink masks a secret the run holds (a secret_result
			// tool's result the model passed on), in these arguments as in
			// an error message (runtime.BuildContext.AuditSink).
			rec.Args = maps.Clone(c.Args)
		}
		effect := c.Tool != nil && c.Tool.SideEffecting && !c.Tool.RetrySafe
		return invoke(ctx, a, rec, &c.Meta, effect, func() (any, error) { return next(ctx, c) })
	}
}

// WrapTurn implements runtime.TurnWrapper.
func (a *Audit) WrapTurn(next runtime.TurnHandler) runtime.TurnHandler {
	return func(ctx context.Context, c *runtime.TurnCall) (string, error) {
		rec := runtime.AuditRecord{Layer: a.name, Stage: plan.StageTurn, RunID: c.Meta.Run.ID,
			IdempotencyKey: c.IdempotencyKey(), ArgsDigest: a.digester.Text(c.Input)}
		if a.IncludeArgs {
			rec.Args = map[string]any{"input": c.Input}
			if c.Session.ID != "" {
				rec.Args["session"] = c.Session.ID
			}
		}
		return invoke(ctx, a, rec, &c.Meta, false, func() (string, error) { return next(ctx, c) })
	}
}

var (
	_ runtime.ToolWrapper = (*Audit)(nil)
	_ runtime.TurnWrapper = (*Audit)(nil)
)
