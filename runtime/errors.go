package runtime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
)

var (
	errNegativeDuration = errors.New("negative duration")
	durationType        = reflect.TypeFor[Duration]()
)

// BlockedError is a policy violation: a guard tripped. It is final: a host
// acknowledges the job and does not redeliver it.
type BlockedError struct {
	// Layer is the name of the layer that blocked the call.
	Layer string
	// Message explains the block to the caller.
	Message string
	// Err is the guard's own error when a fail-closed guard could not decide
	// (a CEL evaluation error); nil for a plain policy violation.
	Err error
	// At places the layer when its name does not tell it from another's
	// ("chains.tool[0] at policy.cue:9:3"); "" otherwise.
	At string
}

// Error returns "blocked by <layer>: <message>", or "blocked by <layer>
// (<at>): <message>".
func (e *BlockedError) Error() string {
	layer := e.Layer
	if e.At != "" {
		layer += " (" + e.At + ")"
	}
	if e.Err != nil {
		return fmt.Sprintf("blocked by %s: %s: %v", layer, e.Message, e.Err)
	}
	return fmt.Sprintf("blocked by %s: %s", layer, e.Message)
}

// Unwrap returns the guard's own error, if any.
func (e *BlockedError) Unwrap() error { return e.Err }

// BudgetError is a budget ceiling reached. It is final, unless the places
// that refuse the call are held by other calls in flight (InFlight).
type BudgetError struct {
	// Layer is the name of the meter layer that refused the call.
	Layer string
	// Resource is the ceiling reached: "tokens", "usd" or "calls".
	Resource string
	// Spent is the ledger's value of Resource; Limit the ceiling.
	Spent, Limit float64
	// Estimate is the refused call's estimated charge in Resource when it
	// was refused because it would cross the ceiling (a meter with
	// on_cross "refuse"); zero when the ceiling was already reached.
	Estimate float64
	// Pending is what the calls in flight have reserved in Resource (their
	// estimates' tokens or cost, or their number for calls): counted
	// against the ceiling with Spent until they settle.
	Pending float64
	// Held is the part of Pending the calls the refused call runs within
	// reserved (a tool call that makes the refused call, under the same
	// ledger): they cannot end while it waits, so it is no place to wait
	// for (InFlight).
	Held float64
	// Scope is the scope of the refusing meter's ledger ("run", "key",
	// "global"; "" when unknown), and Window its window ("24h", "month";
	// "" for a ledger kept for good), which ends, its budget starting
	// afresh, at Resets. They tell apart the budgets of two meters of one
	// chain.
	Scope, Window string
	Resets        time.Time
	// Lease is the refusing meter's lease on a shared ledger: a
	// reservation of a process that stopped holds its place until it
	// lapses, at the end of its lease (this one for a call without a
	// deadline). 0 for a ledger in process memory, which a process that
	// stops takes with it.
	Lease time.Duration
}

// Error names the layer, the resource, the ceiling and the spend.
func (e *BudgetError) Error() string {
	if e.InFlight() && e.Lease > 0 {
		return fmt.Sprintf("budget held by calls in flight at %s: %s; try again once they end, or once those of a process that stopped lapse (lease %s)", e.Layer, e.Message(), e.Lease)
	}
	if e.InFlight() {
		return fmt.Sprintf("budget held by calls in flight at %s: %s; try again once they end", e.Layer, e.Message())
	}
	return fmt.Sprintf("budget exhausted at %s: %s", e.Layer, e.Message())
}

// InFlight reports whether the call was refused only for what the calls in
// flight have reserved: without their reservations it fits under the
// ceiling (the charged ledger, with the call's estimate when it has one,
// is within it). Those calls may still end uncharged (refused by a layer
// inside the meter, such as a rate_limit, or failed before anything was
// billed) and give their places back, so the refusal is not final:
// Classify takes it for a failure, KindOf names it "rate_limited" and
// RetryAfter is InFlightRetryAfter. What the calls the refused call runs
// within hold (Held) counts as charged: they end after it.
func (e *BudgetError) InFlight() bool {
	if e.Pending-e.Held <= 0 {
		return false
	}
	if e.Estimate > 0 {
		return e.Spent+e.Held+e.Estimate <= e.Limit
	}
	return e.Spent+e.Held < e.Limit
}

// InFlightRetryAfter is the delay after which a call refused for the calls
// in flight (BudgetError.InFlight) is worth sending again.
const InFlightRetryAfter = time.Second

// RetryAfter is InFlightRetryAfter for a refusal InFlight, else 0 (final).
func (e *BudgetError) RetryAfter() time.Duration {
	if e.InFlight() {
		return InFlightRetryAfter
	}
	return 0
}

// Message returns the error text without the layer, for reports that name the
// layer separately.
func (e *BudgetError) Message() string {
	var pending string
	if e.Pending > 0 {
		pending = ", " + e.figure(e.Pending) + " reserved by calls in flight"
	}
	if e.Estimate > 0 {
		return fmt.Sprintf("%s ceiling %s would be crossed (spent %s%s, the call is estimated at %s)%s", e.Resource,
			e.figure(e.Limit), e.figure(e.Spent), pending, e.figure(e.Estimate), e.budget())
	}
	return fmt.Sprintf("%s ceiling %s reached (spent %s%s)%s", e.Resource,
		e.figure(e.Limit), e.figure(e.Spent), pending, e.budget())
}

// figure prints v, an amount of e's resource, without an exponent:
// dollars to the millionth (a sum of prices carries float noise), or to
// six significant digits below a dollar, so that a spend of a few
// ten-millionths (one cheap call) does not read as 0; counts whole.
func (e *BudgetError) figure(v float64) string {
	if e.Resource == "usd" {
		if math.Abs(v) < 1 {
			v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
		} else {
			v = math.Round(v*1e6) / 1e6
		}
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// budget names the budget refused: "; per-key budget of the 24h window
// that resets at 2026-01-02T00:00:00Z" ("" when Scope is unknown).
func (e *BudgetError) budget() string {
	if e.Scope == "" {
		return ""
	}
	s := "; per-" + e.Scope + " budget"
	if e.Scope == "global" {
		s = "; global budget"
	}
	if e.Window != "" {
		s += " of the " + e.Window + " window that resets at " + e.Resets.UTC().Format(time.RFC3339)
	}
	return s
}

// InDoubtError reports a side-effecting call whose earlier execution may or
// may not have happened: the process that held its idempotency lease
// stopped (crashed, lost its store) after claiming the call and before
// publishing an outcome, and the tool is not retry_safe, so the call is not
// run again; or another reason (Reason) keeps it from running again.
// Classify reports ClassInDoubt, which is final: a person or a
// reconciliation job must find out whether the effect happened, using the
// idempotency key.
type InDoubtError struct {
	// Layer names the idempotent layer.
	Layer string
	// Tool is the tool called.
	Tool string
	// IdempotencyKey is the key the earlier execution was given; empty
	// when it cannot be told (InDoubtKeyFormChanged).
	IdempotencyKey string
	// Unreadable, when set, is why the call's idempotency record does not
	// decode (damaged in the store, or written by another build): whether
	// an earlier execution ran, or how it ended, cannot be read.
	Unreadable error
	// Reason is why the call is in doubt: InDoubtStopped (the zero value),
	// or another InDoubtReason.
	Reason InDoubtReason
	// Call, when set, names the call as its run recorded it
	// (ToolRecord.Call, CallIntent.Calls): an agent turn's resumed call
	// whose idempotency key cannot be told, its run saved under a digest
	// key the pipeline no longer has (InDoubtKeyFormChanged; for a
	// read-only tool's call, InDoubtRecorded or InDoubtDelegated).
	Call string
	// orEdited: with InDoubtKeyFormChanged, the pipeline has a digest key,
	// and the run's name of the call may have been made under it with the
	// call's arguments edited since, which cannot be told apart.
	orEdited bool
}

// InDoubtReason says why a call is in doubt (InDoubtError.Reason).
type InDoubtReason string

const (
	// InDoubtStopped: an earlier execution stopped before its outcome
	// was recorded, and the tool is not retry_safe.
	InDoubtStopped InDoubtReason = ""
	// InDoubtKeyFormChanged: the call's run recorded it under a digest
	// key (settings.digest_key_env) the pipeline no longer has, removed
	// or changed since its first execution. The idempotency key that
	// execution got was derived from the keyed digest of its arguments
	// and cannot be derived again, nor its record matched with its
	// arguments: run under another key, its tool would take it for a new
	// call, retry_safe or not. Resumed with the digest key it was saved
	// with, the run settles the call as it was recorded. With a digest key
	// now, the run's name of the call may also have been made under it
	// with arguments edited since (the error says so) when no other call
	// of its message shows the key the same; when one does, the edited
	// call is one the run did not record, and is not in doubt for this.
	InDoubtKeyFormChanged InDoubtReason = "key_form_changed"
	// InDoubtNoteUnreadable: an earlier execution stopped before its
	// outcome was recorded, and the tool is retry_safe, but the claim's
	// note, the digests of the arguments of the call that made it
	// (key_args, a supplied key), does not decode (Unreadable says why):
	// whether the call's arguments are that call's cannot be told, and a
	// claim is taken over only for the same arguments.
	InDoubtNoteUnreadable InDoubtReason = "claim_note_unreadable"
	// InDoubtRecorded: the call's run recorded it in doubt
	// (ToolRecord.InDoubt: its outcome unknown, or not recorded), whatever
	// its tool.
	InDoubtRecorded InDoubtReason = "recorded_in_doubt"
	// InDoubtDelegated: the call's tool, whatever it is, ran an agent turn
	// of the run that started calls that would repeat an effect if made
	// again (CallIntent.Delegated): run again, the tool would run that
	// turn anew.
	InDoubtDelegated InDoubtReason = "delegated"
	// InDoubtUndeclared: the policy does not declare the call's tool (now),
	// so nothing says it is free of effect.
	InDoubtUndeclared InDoubtReason = "undeclared"
)

// Error names the layer, the tool, the key and why the call is in doubt.
func (e *InDoubtError) Error() string {
	switch e.Reason {
	case InDoubtKeyFormChanged:
		edited := ""
		if e.orEdited {
			edited = " (or its arguments were edited since the run recorded it under the same key: which of the two cannot be told)"
		}
		return fmt.Sprintf("%s: call of %s is in doubt: its idempotency key form changed since the first execution: the run recorded the call as %s under a digest key (settings.digest_key_env) the pipeline no longer has%s, "+
			"so the idempotency key that execution got, derived from the keyed digest of its arguments, cannot be derived again, nor its record matched with its arguments; run under another key, the tool would take it for a new call, so it is not run. "+
			"Resumed with the digest key it was saved with, the run settles the call as it was recorded",
			e.Layer, e.Tool, e.Call, edited)
	case InDoubtNoteUnreadable:
		return fmt.Sprintf("%s: call of %s is in doubt: an earlier execution (idempotency key %s) stopped before recording its outcome, and the note of its claim, the digests of the arguments it was made with, is unreadable (%v): "+
			"the tool is retry_safe, but its claim is taken over only by a call of the same arguments, which cannot be told, so it is not run again",
			e.Layer, e.Tool, e.IdempotencyKey, e.Unreadable)
	case InDoubtRecorded:
		return fmt.Sprintf("%s: call of %s is in doubt: its run recorded it in doubt (its outcome unknown, or not recorded), so whether an earlier execution (%s) had its effect cannot be told, and it is not run again",
			e.Layer, e.Tool, e.earlier())
	case InDoubtDelegated:
		return fmt.Sprintf("%s: call of %s is in doubt: its tool ran an agent turn of the run that started calls that would repeat an effect if made again, and an earlier execution (%s) has no recorded result, so it is not run again",
			e.Layer, e.Tool, e.earlier())
	case InDoubtUndeclared:
		return fmt.Sprintf("%s: call of %s is in doubt: an earlier execution (idempotency key %s) has no recorded result, and the policy does not declare the tool, so nothing says it is free of effect: it is not run again",
			e.Layer, e.Tool, e.IdempotencyKey)
	}
	if e.Unreadable != nil {
		return fmt.Sprintf("%s: call of %s is in doubt: its idempotency record is unreadable (%v), so whether an earlier execution (idempotency key %s) ran cannot be told, and the tool is not retry_safe, so it is not run",
			e.Layer, e.Tool, e.Unreadable, e.IdempotencyKey)
	}
	return fmt.Sprintf("%s: call of %s is in doubt: an earlier execution (idempotency key %s) stopped before recording its outcome, and the tool is not retry_safe, so it is not run again",
		e.Layer, e.Tool, e.IdempotencyKey)
}

// earlier names the earlier execution of e's call: by its idempotency
// key, or, when that cannot be told, as its run recorded the call (Call).
func (e *InDoubtError) earlier() string {
	if e.IdempotencyKey == "" && e.Call != "" {
		return "recorded as " + e.Call + " under a digest key (settings.digest_key_env) the pipeline no longer has, so its idempotency key cannot be derived again"
	}
	return "idempotency key " + e.IdempotencyKey
}

// ErrOutcomeUnrecorded is in the error of a call that ran to its end but
// whose outcome a layer could not record (an audit layer's outcome record
// not written): the call's effect may stand, so the error is not a failure
// to try again. RunAgent ends the turn with it instead of telling the
// model the tool failed.
var ErrOutcomeUnrecorded = errors.New("the call ran but its outcome was not recorded")

// ErrRan is in the error of a call that ran (its effect, if it has one,
// happened) but whose result cannot be used: a result too large to relay,
// one a guard after the call blocked, one that cannot be stored. A layer
// marks such an error with Ran. The error is never transient (a retry would
// repeat the effect), an idempotent layer outside stores it as the call's
// outcome so that a duplicate gets it without running the tool again, and
// an audit layer outside records the decision "ran" (DecisionRan).
var ErrRan = errors.New("the call ran but its result cannot be used")

// Ran marks err as the error of a call that ran (ErrRan). Its message and
// chain are err's: errors.As still finds a *BlockedError or *CallError in
// it, and Classify classifies it by them. Ran(nil) is nil.
func Ran(err error) error {
	if err == nil || errors.Is(err, ErrRan) {
		return err
	}
	return &ranError{err: err}
}

// ErrMayHaveRun is in the error of a call that may have acted before it
// failed: the request reached the tool and no outcome came back (an MCP
// upstream whose connection dropped after the call was sent). A layer or
// tool marks such an error with MayHaveRun. Classify reports ClassInDoubt
// (final: running the call again could repeat its effect), so it is never
// transient; an idempotent layer outside keeps its claim of a tool that is
// not retry_safe, so a duplicate finds the call in doubt, and an audit layer
// records the decision "in_doubt".
var ErrMayHaveRun = errors.New("the call may have run: its outcome is unknown")

// MayHaveRun marks err as the error of a call that may have acted
// (ErrMayHaveRun). Its message and chain are err's. MayHaveRun(nil) is nil.
func MayHaveRun(err error) error {
	if err == nil || errors.Is(err, ErrMayHaveRun) {
		return err
	}
	return &markedError{err: err, mark: ErrMayHaveRun}
}

// ErrShutdown is the cause a host gives when it cancels calls because its
// process is stopping (a drain, a deploy, a worker scaled in), not because
// their caller gave up: context.WithCancelCause, then cancel(ErrShutdown). A
// checkpointed turn cancelled so keeps its run running, for another worker
// to resume, where a turn cancelled for any other cause ends it cancelled.
var ErrShutdown = errors.New("the process is shutting down")

// ErrProviderRefused is in the error of a model call its provider refused to
// serve for reasons of its own: the key (401), the account's permissions or
// billing (402, 403, OpenAI's insufficient_quota), a model it does not know
// (404), or a feature of the request that provider's client cannot send and
// another provider's can (thinking or a prefilled answer for an OpenAI
// model, reasoning_effort for a Claude one). The error stays permanent (a
// retry would meet the same refusal), but another provider may serve the
// call: a fallback falls over to its next model. A layer or provider client marks
// such an error with ProviderRefused.
var ErrProviderRefused = errors.New("the provider refused to serve the call")

// ProviderRefused marks err as a provider's refusal to serve the call
// (ErrProviderRefused). Its message and chain are err's.
// ProviderRefused(nil) is nil.
func ProviderRefused(err error) error {
	if err == nil || errors.Is(err, ErrProviderRefused) {
		return err
	}
	return &markedError{err: err, mark: ErrProviderRefused}
}

// ErrNotRun is in the error of a call refused before the tool was reached
// (a rate limit or a check of an inner layer that refused it, a connection
// refused before the request was sent): the failure proves the call did not
// act. A layer or tool marks such an error with NotRun. A retry runs again
// a side-effecting tool that is not retry_safe only after such a failure
// (DidNotRun).
var ErrNotRun = errors.New("the call did not run")

// NotRun marks err as the error of a call that did not reach the tool
// (ErrNotRun). Its message and chain are err's. NotRun(nil) is nil.
func NotRun(err error) error {
	if err == nil || errors.Is(err, ErrNotRun) {
		return err
	}
	return &markedError{err: err, mark: ErrNotRun}
}

// DidNotRun reports whether err proves that the failed call did not act:
// it is marked NotRun, or a layer refused the call because its store was
// unavailable (ErrStoreUnavailable), or an open breaker refused it, or a
// budget refused it for the calls in flight (BudgetError.InFlight: a
// failure, where a budget's final refusal is a class of its own), or the
// connection was refused before the request was sent (a dial error), and
// nothing in it says the call ran (ErrRan, or ErrOutcomeUnrecorded unless
// the call failed of its own: outcomeUnrecorded) or may have
// (ErrMayHaveRun, or an *InDoubtError: an earlier execution of the call
// may have acted, even when nothing ran now).
func DidNotRun(err error) bool {
	if err == nil || errors.Is(err, ErrRan) || errors.Is(err, ErrMayHaveRun) || outcomeUnrecorded(err) {
		return false
	}
	var d *InDoubtError
	if errors.As(err, &d) {
		return false
	}
	if errors.Is(err, ErrNotRun) || errors.Is(err, ErrStoreUnavailable) {
		return true
	}
	var bo *BreakerOpenError
	if errors.As(err, &bo) {
		return true
	}
	var g *BudgetError
	if errors.As(err, &g) && g.InFlight() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

// markedError is an error marked by MayHaveRun or NotRun.
type markedError struct{ err, mark error }

func (e *markedError) Error() string   { return e.err.Error() }
func (e *markedError) Unwrap() []error { return []error{e.err, e.mark} }

// ErrStoreUnavailable is in the error of a call a layer refused before it
// ran because the store its state lives in (a shared redis or postgres
// store) failed or did not answer within the store's `timeout`: the
// gateway's own state failed, not the model or the tool. KindOf names it
// "store_unavailable"; agentc serve answers 503.
var ErrStoreUnavailable = errors.New("store unavailable")

// StoreUnavailable marks err, a store's failure that kept a layer from
// running the call, with ErrStoreUnavailable, in a *StoreError. Its message
// and chain are err's. A cancellation by the caller is not the store's
// failure and is not marked with ErrStoreUnavailable (its text is still
// the store's: a *StoreError that says nothing of whether the call ran),
// nor is an error marked already; nil is returned as it is.
func StoreUnavailable(err error) error {
	if err == nil || errors.Is(err, ErrStoreUnavailable) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return StoreFailed(err)
	}
	return &StoreError{Err: err, NotRun: true}
}

// StoreFailed returns err, a store's failure a layer passes on, as a
// *StoreError that says nothing of whether the call ran: the error around
// it says that (an outcome not recorded, ErrOutcomeUnrecorded: the call
// ran). Its message and chain are err's, without ErrStoreUnavailable when
// err is a *StoreError marked so. StoreFailed(nil) is nil.
func StoreFailed(err error) error {
	var se *StoreError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se) && se == err && se.NotRun:
		// Marked as what kept the call from running (StoreUnavailable:
		// a host's sink marks its failures so): after the call ran,
		// that no longer holds.
		return &StoreError{Err: se.Err}
	case se == err:
		return err
	}
	return &StoreError{Err: err}
}

// StoreError is a store's own failure as a layer passes it on
// (StoreUnavailable, StoreFailed). Its text is the store's: a driver's
// words, which may name the store's address, its user and its database. A
// gateway keeps that text from its clients (agentc serve answers "store
// unavailable" and logs the cause).
type StoreError struct {
	// Err is the store's error.
	Err error
	// NotRun marks the failure as what kept the call from running
	// (ErrStoreUnavailable, DidNotRun).
	NotRun bool
}

// Error returns Err's text.
func (e *StoreError) Error() string { return e.Err.Error() }

// Unwrap returns Err, and ErrStoreUnavailable when NotRun.
func (e *StoreError) Unwrap() []error {
	if e.NotRun {
		return []error{e.Err, ErrStoreUnavailable}
	}
	return []error{e.Err}
}

// RanCallsError is the error of an agent turn (Pipeline.RunAgent) that
// failed after calls of it that would repeat an effect if made again ran
// (side-effecting and not retry_safe, or undeclared; a call whose tool ran
// an agent turn that failed so): running the turn again from its start
// would make them again. Err is the turn's own error (a model call's
// connection refused, a store unavailable, a block, a budget,
// cancellation), which errors.Is and errors.As reach; the error wraps
// ErrRan, so DidNotRun is false and it is never transient. Classify
// reports it as Err is (blocked, budget, in doubt), else ClassInDoubt:
// final, the job is not run again from its start. The turn's result holds
// the transcript with the calls' results: a turn run with those messages
// goes on from there without making them again.
type RanCallsError struct {
	// Err is the turn's error.
	Err error
	// Calls are the calls that ran (or may have, when their outcome is
	// unknown), in the order they returned.
	Calls []ToolUse
}

// Error returns Err's text and names the calls that ran.
func (e *RanCallsError) Error() string {
	names := make([]string, len(e.Calls))
	for i, c := range e.Calls {
		names[i] = c.Name + " (call " + strconv.Quote(c.ID) + ")"
	}
	return fmt.Sprintf("%v; the turn had run %s, which would act again if the turn were run again", e.Err, strings.Join(names, ", "))
}

// Unwrap returns Err and ErrRan.
func (e *RanCallsError) Unwrap() []error { return []error{e.Err, ErrRan} }

// ranError is an error marked by Ran.
type ranError struct{ err error }

func (e *ranError) Error() string   { return e.err.Error() }
func (e *ranError) Unwrap() []error { return []error{e.err, ErrRan} }

// ErrorKind classifies a model or tool failure for retry, fallback and hedge.
type ErrorKind string

// The kinds of failure.
const (
	// KindTransient is a failure that may succeed when tried again (5xx,
	// connection errors).
	KindTransient ErrorKind = "transient"
	// KindRateLimited is a refusal for load; RetryAfter says when to return.
	KindRateLimited ErrorKind = "rate_limited"
	// KindTimeout is an attempt that ran out of time.
	KindTimeout ErrorKind = "timeout"
	// KindPermanent is a failure that will fail again (4xx, validation).
	KindPermanent ErrorKind = "permanent"
	// KindStoreUnavailable is a call a layer refused because its store
	// failed (ErrStoreUnavailable): as KindOf names it.
	KindStoreUnavailable ErrorKind = "store_unavailable"
	// KindCanceled is a call stopped by its caller's cancellation: as
	// KindOf names it. It is never transient.
	KindCanceled ErrorKind = "canceled"
)

// StoreRefusal returns the error of a call the layer named layer refused
// before it ran because its store failed with err: a *CallError around
// StoreUnavailable(err), which DidNotRun reports, whose Kind is the one
// KindOf names, KindStoreUnavailable; or, when the caller's cancellation
// stopped the store, KindCanceled, the store's error marked NotRun (the
// call did not run either).
func StoreRefusal(layer, message string, err error) *CallError {
	err = StoreUnavailable(err)
	kind := KindStoreUnavailable
	if !errors.Is(err, ErrStoreUnavailable) {
		kind, err = KindCanceled, NotRun(err)
	}
	return &CallError{Kind: kind, Layer: layer, Message: message, Err: err}
}

// CallError is a classified model or tool failure. Model clients and tools
// return it (or any error implementing Retryable, RetryAfter or StatusCode) so
// that retry layers can tell transient from permanent failures.
type CallError struct {
	// Kind classifies the failure.
	Kind ErrorKind
	// Status is the HTTP status, when there is one.
	Status int
	// RetryAfter is the delay the callee asked for (rate limited).
	RetryAfter time.Duration
	// Layer names the layer that raised the error, when a layer did (a
	// rate_limit in reject mode).
	Layer string
	// Message describes the failure.
	Message string
	// Err is the underlying error.
	Err error
	// Hint is the callee's own word on trying the same call again (a
	// provider's x-should-retry header). It decides whether a retry tries
	// the same callee again (RetriesSame), not the Kind: a fallback moves
	// on, and a client is answered, as Kind and Status say.
	Hint RetryHint
	// Usage is what a model call that failed was billed, as its provider
	// reported it and no delta carried it (Anthropic's message_start
	// announces the input before any output: a stream that fails after it
	// was billed that input). The chat terminal charges it as a delta's
	// usage; it commits nothing (a call that failed before its first
	// delta may still be retried).
	Usage Usage
}

// RetryHint is a callee's word on whether the same call, tried again on the
// same callee, may succeed.
type RetryHint int8

// The hints of CallError.Hint.
const (
	// RetryUnsaid: the callee said nothing; the Kind decides.
	RetryUnsaid RetryHint = iota
	// RetryNo: the same callee is not tried again (x-should-retry: false).
	RetryNo
	// RetryYes: the same callee may be tried again, whatever the Kind
	// (x-should-retry: true).
	RetryYes
)

// RetriesSame reports whether a retry tries a failed call again on the same
// callee: as IsTransient says, unless the *CallError err holds carries a
// Hint: RetryNo never, RetryYes for any failure that Classify leaves a
// failure (not a block, a budget, a call in doubt) and that did not run
// (ErrRan). A fallback to another callee follows IsTransient alone.
func RetriesSame(err error) bool {
	var ce *CallError
	if !errors.As(err, &ce) {
		return IsTransient(err)
	}
	switch ce.Hint {
	case RetryNo:
		return false
	case RetryYes:
		return Classify(err) == ClassFailure && !errors.Is(err, ErrRan)
	}
	return IsTransient(err)
}

// Error returns the message (or the underlying error; else the kind; else
// the HTTP status and its text), prefixed with the layer when a layer raised
// it.
func (e *CallError) Error() string {
	msg := e.Message
	if msg == "" && e.Err != nil {
		msg = e.Err.Error()
	}
	if msg == "" {
		msg = string(e.Kind)
		if msg == "" && e.Status != 0 {
			msg = strings.TrimSpace(strconv.Itoa(e.Status) + " " + http.StatusText(e.Status))
		}
	} else if e.Message != "" && e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Layer != "" {
		return e.Layer + ": " + msg
	}
	return msg
}

// Unwrap returns the underlying error.
func (e *CallError) Unwrap() error { return e.Err }

// Retryable reports whether the failure is transient: IsTransient(e).
func (e *CallError) Retryable() bool { return IsTransient(e) }

// kind returns the error's Kind, else the kind its Status implies, else ""
// (unclassified: the wrapped error decides).
func (e *CallError) kind() ErrorKind {
	if e.Kind != "" {
		return e.Kind
	}
	return statusKind(e.Status)
}

// statusKind classifies an HTTP status: 429 is rate limited, 408 and 504
// time out, 425 and other 5xx are transient, other 4xx permanent; anything
// else (0, 1xx-3xx) is unclassified ("").
func statusKind(s int) ErrorKind {
	switch {
	case s == http.StatusTooManyRequests:
		return KindRateLimited
	case s == http.StatusRequestTimeout || s == http.StatusGatewayTimeout:
		return KindTimeout
	case s == http.StatusTooEarly || s >= 500 && s < 600:
		return KindTransient
	case s >= 400 && s < 500:
		return KindPermanent
	}
	return ""
}

// BreakerOpenError is a call refused by an open circuit breaker. Fallback
// falls over on it; retry does not retry it.
type BreakerOpenError struct {
	// Layer is the retry layer whose breaker is open.
	Layer string
	// Key is what the breaker guards (a model or tool name).
	Key string
	// Until is when the breaker lets a trial call through.
	Until time.Time
}

// Error names the layer and the key whose breaker is open.
func (e *BreakerOpenError) Error() string {
	return fmt.Sprintf("%s: circuit breaker open for %s", e.Layer, e.Key)
}

// Class is what a host worker does with an error.
type Class int

// The classes of Classify.
const (
	// ClassOK is no error.
	ClassOK Class = iota
	// ClassFailure may be retried (redelivered).
	ClassFailure
	// ClassBlocked is a policy violation: final.
	ClassBlocked
	// ClassBudget is a budget ceiling: final.
	ClassBudget
	// ClassInDoubt is a side-effecting call that may or may not have run (an
	// *InDoubtError), or one that ran but whose outcome was not recorded
	// (ErrOutcomeUnrecorded), or an agent turn that failed after such calls
	// of it ran (a *RanCallsError): final, since running it again could
	// repeat its effect.
	ClassInDoubt
)

// String returns "ok", "failure", "blocked", "budget" or "in_doubt".
func (c Class) String() string {
	switch c {
	case ClassOK:
		return "ok"
	case ClassBlocked:
		return "blocked"
	case ClassBudget:
		return "budget"
	case ClassInDoubt:
		return "in_doubt"
	}
	return "failure"
}

// Final reports whether a job that ended with this class must be acknowledged
// rather than redelivered.
func (c Class) Final() bool { return c == ClassBlocked || c == ClassBudget || c == ClassInDoubt }

// Classify returns the class of err: ClassOK for nil, ClassInDoubt for an
// *InDoubtError and for a call that ran but whose record a layer refused
// (refusedRecord), ClassBlocked for a *BlockedError, ClassBudget for a
// *BudgetError (anywhere in the chain) other than a refusal for the calls
// in flight (BudgetError.InFlight: ClassFailure, unless it is in one of
// the cases in doubt that follow), ClassInDoubt for a call that ran to
// its end but whose outcome was not recorded (ErrOutcomeUnrecorded, unless
// the call failed of its own, whose error comes first) and for a call that
// may have run (ErrMayHaveRun) and for an agent turn that failed after
// calls that would repeat an effect ran (a *RanCallsError around an error
// of none of those classes), and ClassFailure for anything else.
func Classify(err error) Class {
	if err == nil {
		return ClassOK
	}
	var d *InDoubtError
	if errors.As(err, &d) || refusedRecord(err) != nil {
		return ClassInDoubt
	}
	var b *BlockedError
	if errors.As(err, &b) {
		return ClassBlocked
	}
	var g *BudgetError
	if errors.As(err, &g) && !g.InFlight() {
		return ClassBudget
	}
	// A refusal for the calls in flight is a failure (the places they
	// hold may come back), unless what it ends may have acted.
	if outcomeUnrecorded(err) || errors.Is(err, ErrMayHaveRun) || ranCalls(err) {
		return ClassInDoubt
	}
	return ClassFailure
}

// ranCalls reports whether err is an agent turn's that failed after calls
// that would repeat an effect ran (a *RanCallsError).
func ranCalls(err error) bool {
	var rc *RanCallsError
	return errors.As(err, &rc)
}

// refusedRecord returns the *CallError of a call that ran but whose
// outcome a layer refused to record (a checkpoint's save refused because
// another process saved the run since, a *BlockedError wrapping a
// *CheckpointConflictError): err is an outcome not recorded
// (outcomeUnrecorded) and the first *BlockedError or *BudgetError of err is
// inside that *CallError, so the refusal is the record's, not the call's,
// which ran. Nil otherwise: a call refused of its own keeps its class.
func refusedRecord(err error) *CallError {
	var ce *CallError
	if !outcomeUnrecorded(err) || !errors.As(err, &ce) {
		return nil
	}
	if inside[*BlockedError](err, ce) || inside[*BudgetError](err, ce) {
		return ce
	}
	return nil
}

// inside reports whether err holds an error of type E and the first one is
// in outer's chain.
func inside[E error](err error, outer *CallError) bool {
	var first, in E
	return errors.As(err, &first) && errors.As(outer.Err, &in) && error(first) == error(in)
}

// outcomeUnrecorded reports whether err is a call's outcome not recorded
// (ErrOutcomeUnrecorded) and the call did not fail of its own: the first
// *CallError of err is the one that carries ErrOutcomeUnrecorded, or err
// has none.
func outcomeUnrecorded(err error) bool {
	if !errors.Is(err, ErrOutcomeUnrecorded) {
		return false
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return errors.Is(ce, ErrOutcomeUnrecorded)
	}
	return true
}

// IsTransient reports whether a failed attempt may succeed when tried again.
// Blocked, budget (but a refusal for the calls in flight,
// BudgetError.InFlight), in-doubt and open-breaker errors, cancellations and the
// error of a call that ran (ErrRan) are not transient;
// a *CallError follows its Kind, else its Status, else the error it wraps; an
// error with a Retryable() bool method follows it; a status code
// (StatusCode() int) is transient for 408, 425, 429 and 5xx; a timeout
// (net.Error or context.DeadlineExceeded) is transient; anything
// unclassified is transient.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if Classify(err) != ClassFailure || errors.Is(err, ErrRan) {
		return false
	}
	var bo *BreakerOpenError
	if errors.As(err, &bo) {
		return false
	}
	var ce *CallError
	if errors.As(err, &ce) {
		if k := ce.kind(); k != "" {
			if k == KindStoreUnavailable && PermanentStoreError(ce.Err) {
				return false
			}
			return k != KindPermanent && k != KindCanceled
		}
		if ce.Err != nil {
			return IsTransient(ce.Err)
		}
		return true
	}
	var r interface{ Retryable() bool }
	if errors.As(err, &r) {
		return r.Retryable()
	}
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		return transientStatus(sc.StatusCode())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return true
}

// permanentSQLClasses are the classes of SQLSTATE codes of a failure a
// PostgreSQL server will answer again to the same statement: data (22), a
// constraint (23), the credentials (28), a database or schema that does
// not exist (3D, 3F), the statement or its privileges (42: a table
// dropped, a grant missing), a check option (44), a limit of the server's
// (54). Not a feature not supported (0A): a statement the driver cached
// fails so once its table changed shape ("cached plan must not change
// result type", a newer build's migration under a replica still running),
// and the driver prepares it anew when asked again.
var permanentSQLClasses = map[string]bool{"22": true, "23": true, "28": true, "3D": true, "3F": true, "42": true, "44": true, "54": true}

// permanentRedisReplies start the error replies of a Redis server that it
// will give again to the same command: credentials refused (NOAUTH,
// WRONGPASS), a command the user may not run (NOPERM), a key of another
// type (WRONGTYPE).
var permanentRedisReplies = []string{"NOAUTH ", "WRONGPASS ", "NOPERM ", "WRONGTYPE "}

// PermanentStoreError reports whether err, a store's failure, holds the
// server's answer that asking again will fail the same way: a PostgreSQL
// error (SQLState() string) of a class of permanentSQLClasses, or a Redis
// error reply (RedisError()) of permanentRedisReplies. A layer's refusal
// for such a failure (StoreRefusal) is not transient: a retry would only
// ask the store again. A failure of the connection, a timeout, a server
// shutting down, a deadlock or a serialization failure are not: they may
// pass.
func PermanentStoreError(err error) bool {
	if err == nil {
		return false
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		if c := pg.SQLState(); len(c) == 5 && permanentSQLClasses[c[:2]] {
			return true
		}
	}
	var re interface {
		error
		RedisError()
	}
	if errors.As(err, &re) {
		msg := re.Error()
		for _, p := range permanentRedisReplies {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
	}
	return false
}

func transientStatus(s int) bool {
	k := statusKind(s)
	return k != "" && k != KindPermanent
}

// RetryAfterOf returns the delay a failure asks for before the next attempt
// (a rate limited *CallError, or any error with a RetryAfter() time.Duration
// method), none for a failure in doubt (ClassInDoubt: a refusal for the
// calls in flight that ended a call that may have acted), which is not
// attempted again.
func RetryAfterOf(err error) (time.Duration, bool) {
	if Classify(err) == ClassInDoubt {
		return 0, false
	}
	var ce *CallError
	if errors.As(err, &ce) && ce.RetryAfter > 0 {
		return ce.RetryAfter, true
	}
	var ra interface{ RetryAfter() time.Duration }
	if errors.As(err, &ra) {
		if d := ra.RetryAfter(); d > 0 {
			return d, true
		}
	}
	return 0, false
}

// KindOf names the kind of a failure for reports: "in_doubt" (an
// *InDoubtError, an outcome not recorded as Classify takes it, a call
// that may have run, or a turn that failed after calls that would repeat
// an effect ran, as Classify takes it),
// "blocked", "budget" ("rate_limited" for a refusal for the calls in
// flight, BudgetError.InFlight, unless it is in doubt as above), a
// "store_unavailable" (ErrStoreUnavailable), a
// *CallError's kind (from its Kind, else its Status), "breaker_open",
// "canceled", "timeout", the kind of a status code (StatusCode() int), or
// "failure"; "" for nil, which is no failure.
func KindOf(err error) string {
	if err == nil {
		return ""
	}
	var d *InDoubtError
	if errors.As(err, &d) || refusedRecord(err) != nil {
		return "in_doubt"
	}
	var b *BlockedError
	if errors.As(err, &b) {
		return "blocked"
	}
	var g *BudgetError
	inFlight := errors.As(err, &g) && g.InFlight()
	if g != nil && !inFlight {
		return "budget"
	}
	if outcomeUnrecorded(err) || errors.Is(err, ErrMayHaveRun) || ranCalls(err) {
		return "in_doubt"
	}
	if inFlight {
		return string(KindRateLimited)
	}
	if errors.Is(err, ErrStoreUnavailable) {
		return "store_unavailable"
	}
	var ce *CallError
	if errors.As(err, &ce) {
		if k := ce.kind(); k != "" {
			return string(k)
		}
	}
	var bo *BreakerOpenError
	if errors.As(err, &bo) {
		return "breaker_open"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		if k := statusKind(sc.StatusCode()); k != "" {
			return string(k)
		}
	}
	return "failure"
}

// LayerOf names the layer an error comes from, when it names one: the
// layer of the error Classify reports first (an *InDoubtError's before a
// *BlockedError's, the *CallError's of a call whose record a layer refused
// before the refusal's), then an open breaker's or a *CallError's.
func LayerOf(err error) string {
	var d *InDoubtError
	if errors.As(err, &d) {
		return d.Layer
	}
	if ce := refusedRecord(err); ce != nil {
		return ce.Layer
	}
	var b *BlockedError
	if errors.As(err, &b) {
		return b.Layer
	}
	var g *BudgetError
	if errors.As(err, &g) {
		return g.Layer
	}
	var bo *BreakerOpenError
	if errors.As(err, &bo) {
		return bo.Layer
	}
	var ce *CallError
	if errors.As(err, &ce) {
		return ce.Layer
	}
	return ""
}
