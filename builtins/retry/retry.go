package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "retry"

func init() {
	runtime.Register(runtime.Module{
		ID:         ID,
		Builtin:    true,
		Stages:     []plan.Stage{plan.StageChat, plan.StageTool},
		Traits:     []runtime.Trait{runtime.TraitReinvokes},
		Repeatable: true,
		Doc:        "re-invokes the inner layers on a transient pre-stream failure, with exponential backoff",
		New:        func() runtime.Middleware { return New() },
	})
}

// Config is the retry layer's config (schemas/retry.cue).
type Config struct {
	MaxAttempts    int               `json:"max_attempts"`
	InitialDelay   runtime.Duration  `json:"initial_delay"`
	MaxDelay       runtime.Duration  `json:"max_delay"`
	Multiplier     float64           `json:"multiplier"`
	AttemptTimeout *runtime.Duration `json:"attempt_timeout,omitempty"`
	// IdleTimeout bounds, in the chat stage, the wait for each delta after
	// the first (a stream that stalls once it has begun), timed where the
	// deltas leave the model client.
	IdleTimeout *runtime.Duration `json:"idle_timeout,omitempty"`
	Breaker     *BreakerConfig    `json:"breaker,omitempty"`
}

// BreakerConfig configures the circuit breaker.
type BreakerConfig struct {
	Failures int              `json:"failures"`
	Cooldown runtime.Duration `json:"cooldown"`
}

// Retry is the retry middleware.
type Retry struct {
	Config

	name     string
	timeout  time.Duration
	idle     time.Duration
	breakers *breakers
	clock    runtime.Clock
	logger   *slog.Logger
	// random draws the jitter (nil before Provision: the process's).
	random runtime.Random
}

// New returns a retry layer with the schema's defaults.
func New() *Retry {
	return &Retry{Config: Config{
		MaxAttempts:  plan.DefaultMaxAttempts,
		InitialDelay: runtime.Duration(100 * time.Millisecond),
		MaxDelay:     runtime.Duration(10 * time.Second),
		Multiplier:   2,
	}}
}

// Provision sets up the breakers, one per declared model (chat) or tool
// (tool); undeclared names get theirs on first use.
func (r *Retry) Provision(b *runtime.BuildContext) error {
	r.name = b.Name()
	r.logger = b.Logger
	r.clock = b.Clock()
	r.random = b.Random()
	if r.AttemptTimeout != nil {
		r.timeout = r.AttemptTimeout.D()
	}
	if r.IdleTimeout != nil {
		r.idle = r.IdleTimeout.D()
	}
	if r.Breaker != nil {
		if r.Breaker.Failures == 0 {
			r.Breaker.Failures = 5
		}
		if r.Breaker.Cooldown == 0 {
			r.Breaker.Cooldown = runtime.Duration(30 * time.Second)
		}
		r.breakers = &breakers{threshold: int32(r.Breaker.Failures), cooldown: r.Breaker.Cooldown.D(), clock: r.clock}
		var names []string
		if b.Stage == plan.StageChat {
			for m := range b.Plan.Models {
				names = append(names, m)
			}
		} else {
			for t := range b.Plan.Tools {
				names = append(names, t)
			}
		}
		sort.Strings(names)
		for _, n := range names {
			r.breakers.fixed = append(r.breakers.fixed, keyed{n, &breaker{set: r.breakers}})
		}
	}
	return nil
}

// Validate checks the bounds of the config.
func (r *Retry) Validate() error {
	switch {
	case r.MaxAttempts < 1:
		return fmt.Errorf("max_attempts must be at least 1, got %d", r.MaxAttempts)
	case r.Multiplier < 1:
		return fmt.Errorf("multiplier must be at least 1, got %g", r.Multiplier)
	case r.MaxDelay < r.InitialDelay:
		return fmt.Errorf("max_delay %s is below initial_delay %s", r.MaxDelay.D(), r.InitialDelay.D())
	case r.AttemptTimeout != nil && *r.AttemptTimeout <= 0:
		return errors.New("attempt_timeout must be positive")
	case r.IdleTimeout != nil && *r.IdleTimeout <= 0:
		return errors.New("idle_timeout must be positive")
	}
	return nil
}

var (
	errAttemptTimeout = errors.New("attempt timed out")
	errIdleTimeout    = errors.New("stream stalled")
)

// WrapChat implements runtime.ChatWrapper.
func (r *Retry) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		start, before := c.Deltas, c.Usage
		base := c.Request.Messages
		defer func() { c.Request.Messages = base }()
		for attempt := 1; ; attempt++ {
			if attempt > 1 {
				// The attempt run again delivered nothing: what it billed
				// is not the response's usage.
				c.DiscardAttempt(before)
			}
			c.Meta.NextAttempt()
			var br *breaker
			var trial bool
			if r.breakers != nil {
				br = r.breakers.get(c.Request.Model)
				until, isTrial, ok := br.allow()
				if !ok {
					return &runtime.BreakerOpenError{Layer: r.name, Key: c.Request.Model, Until: until}
				}
				trial = isTrial
			}
			_, err := settle(br, trial, func() (struct{}, error) {
				if r.timeout > 0 || r.idle > 0 {
					return struct{}{}, r.chatAttempt(ctx, c, yield, next)
				}
				return struct{}{}, next(ctx, c, yield)
			})
			if err == nil {
				br.success(trial)
				return nil
			}
			if ctx.Err() != nil {
				br.release(trial)
				return err
			}
			transient := runtime.IsTransient(err)
			if transient {
				br.failure(trial)
			} else {
				br.release(trial)
			}
			// The provider's word on trying it again (x-should-retry)
			// decides for the same model; the breaker counts by the kind.
			if c.Deltas > start || !runtime.RetriesSame(err) || c.Stopped || attempt >= r.MaxAttempts || r.asksLonger(err) {
				return err
			}
			if werr := r.wait(ctx, attempt, err); werr != nil {
				return werr
			}
			if fb, ok := runtime.FeedbackOf(err); ok {
				// The next attempt sees the original transcript plus what the
				// failed one has to fix.
				c.Request.Messages = append(base[:len(base):len(base)], runtime.Message{Role: "user", Content: fb})
			} else {
				c.Request.Messages = base
			}
		}
	}
}

// settle runs one attempt admitted by br (nil: no breaker). An attempt that
// does not return (the inner layers or the consumer panicked) says nothing of
// the callee's health: a trial it was admitted as is released before the
// panic goes on, else the breaker would wait forever for the trial's outcome
// and refuse every later call.
func settle[T any](br *breaker, trial bool, attempt func() (T, error)) (v T, err error) {
	returned := false
	defer func() {
		if !returned {
			br.release(trial)
		}
	}()
	v, err = attempt()
	returned = true
	return v, err
}

// chatAttempt runs one attempt whose time to the first delta
// (attempt_timeout) and between two deltas (idle_timeout) is bounded. The
// deltas are timed where they leave the model client (runtime.StreamWatcher),
// so a layer inside that holds them is not a stall, and the time a delta
// spends in the layers above and the consumer is not counted; deltas a
// layer inside makes itself (no model call) are timed where they reach
// this layer.
func (r *Retry) chatAttempt(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool, next runtime.ChatHandler) error {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &stallWatch{clock: r.clock, idle: r.idle, cancel: cancel}
	if r.timeout > 0 {
		w.stop = r.clock.AfterFunc(r.timeout, func() { cancel(errAttemptTimeout) })
	}
	defer w.end()
	err := next(runtime.WithStreamWatcher(actx, w), c, func(d runtime.Delta) bool {
		w.Arrived()
		defer w.Delivered()
		return yield(d)
	})
	if err != nil && ctx.Err() == nil {
		switch context.Cause(actx) {
		case errAttemptTimeout:
			return &runtime.CallError{Kind: runtime.KindTimeout, Layer: r.name,
				Message: fmt.Sprintf("no response within attempt_timeout %s", r.timeout), Err: err}
		case errIdleTimeout:
			return &runtime.CallError{Kind: runtime.KindTimeout, Layer: r.name,
				Message: fmt.Sprintf("the stream stalled: no delta within idle_timeout %s", r.idle), Err: err}
		}
	}
	return err
}

// stallWatch cancels an attempt whose stream goes idle longer than idle
// after a delta. One timer serves the whole stream: a delta only notes its
// time, and the timer, when it fires early, waits again for the rest. The
// bound is paused while a delta is being delivered (busy): the time the
// layers above and the consumer take over it is not the stream's.
type stallWatch struct {
	clock  runtime.Clock
	idle   time.Duration
	cancel context.CancelCauseFunc
	last   atomic.Int64 // the clock's time of the last delta (UnixNano), 0 before the first
	busy   atomic.Int32 // deltas being delivered

	mu    sync.Mutex
	stop  func() bool // the timer armed (attempt_timeout, then idle_timeout), nil when none
	ended bool
}

// Arrived notes a delta and that it is being delivered: the first stops
// attempt_timeout and starts the idle bound.
func (w *stallWatch) Arrived() {
	w.busy.Add(1)
	if w.last.Swap(w.clock.Now().UnixNano()) != 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	if w.idle > 0 && !w.ended {
		w.stop = w.clock.AfterFunc(w.idle, w.fire)
	}
}

// Delivered notes that a delta was delivered: the wait for the next starts.
func (w *stallWatch) Delivered() {
	w.last.Store(w.clock.Now().UnixNano())
	w.busy.Add(-1)
}

// fire ends the attempt when no delta came within idle of the last and none
// is being delivered, else waits for the rest.
func (w *stallWatch) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return
	}
	wait := w.idle
	if w.busy.Load() == 0 {
		wait -= w.clock.Now().Sub(time.Unix(0, w.last.Load()))
	}
	if wait > 0 {
		w.stop = w.clock.AfterFunc(wait, w.fire)
		return
	}
	w.cancel(errIdleTimeout)
}

// end stops the timer armed.
func (w *stallWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
	if w.stop != nil {
		w.stop()
	}
}

// WrapTool implements runtime.ToolWrapper.
func (r *Retry) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		for attempt := 1; ; attempt++ {
			c.Meta.Attempts = attempt
			var br *breaker
			var trial bool
			if r.breakers != nil {
				br = r.breakers.get(c.Name)
				until, isTrial, ok := br.allow()
				if !ok {
					return nil, &runtime.BreakerOpenError{Layer: r.name, Key: c.Name, Until: until}
				}
				trial = isTrial
			}
			v, err := settle(br, trial, func() (any, error) {
				if r.timeout > 0 {
					return r.toolAttempt(ctx, c, next)
				}
				return next(ctx, c)
			})
			if err == nil {
				br.success(trial)
				return v, nil
			}
			if ctx.Err() != nil {
				br.release(trial)
				return v, err
			}
			transient := runtime.IsTransient(err)
			if transient {
				br.failure(trial)
			} else {
				br.release(trial)
			}
			if !runtime.RetriesSame(err) || attempt >= r.MaxAttempts || r.asksLonger(err) {
				return v, err
			}
			if why := r.unsafeAgain(c, err); why != "" {
				if r.logger != nil {
					r.logger.WarnContext(ctx, "retry: a failed tool call is not run again: "+why, "tool", c.Name, "attempt", attempt, "error", err)
				}
				return v, &notRetried{err: err, why: r.name + " did not run the call again: " + why}
			}
			if werr := r.wait(ctx, attempt, err); werr != nil {
				return nil, werr
			}
		}
	}
}

// unsafeAgain returns why running the failed call c again could repeat its
// effect, or "" when it cannot: the tool is side-effecting and not
// retry_safe (as declared, or because nothing declares its effects), and
// its failure does not prove that it did not run (runtime.DidNotRun). vet
// reports such a retry for a declared tool (order/retry-side-effect); this
// holds for a plan that was not vetted, an undeclared tool and an MCP tool.
// A call whose tool started a call that would repeat an effect, through an
// agent turn it ran or of its own (runtime.ToolCall.Delegated), is taken as
// side-effecting and not retry_safe, whatever its tool declares: run again,
// it would run that turn, or make that call, anew.
func (r *Retry) unsafeAgain(c *runtime.ToolCall, err error) string {
	t := c.Tool
	if t == nil || runtime.DidNotRun(err) {
		return ""
	}
	if c.Delegated() {
		return fmt.Sprintf("tool %q ran a call that would repeat an effect (through an agent turn it ran or of its own), and the failure does not prove it did not act", c.Name)
	}
	if !t.SideEffecting || t.RetrySafe {
		return ""
	}
	what := "is side-effecting and not retry_safe"
	if !t.Declared {
		what = "has effects no declaration states (taken as side-effecting and not retry_safe)"
	}
	return fmt.Sprintf("tool %q %s, and the failure does not prove it did not act", c.Name, what)
}

// notRetried is the failure of a call a retry did not run again: err, with
// why in its message.
type notRetried struct {
	err error
	why string
}

func (e *notRetried) Error() string { return e.err.Error() + " (" + e.why + ")" }
func (e *notRetried) Unwrap() error { return e.err }

func (r *Retry) toolAttempt(ctx context.Context, c *runtime.ToolCall, next runtime.ToolHandler) (any, error) {
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := r.clock.AfterFunc(r.timeout, func() { cancel(errAttemptTimeout) })
	defer stop()
	v, err := next(actx, c)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
		// A tool that was running when its attempt ran out of time may
		// have acted: in doubt, as when the caller cancels it.
		return v, c.Interrupted(&runtime.CallError{Kind: runtime.KindTimeout, Layer: r.name,
			Message: fmt.Sprintf("no result within attempt_timeout %s", r.timeout), Err: err})
	}
	return v, err
}

// asksLonger reports whether the callee that failed with err asks for a
// wait (Retry-After) longer than max_delay: an attempt after max_delay
// would come before it said one could succeed (a rate_limit in reject mode
// inside refuses it again), so the failure is returned at once, its
// Retry-After kept for the caller.
func (r *Retry) asksLonger(err error) bool {
	ra, ok := runtime.RetryAfterOf(err)
	return ok && ra > r.MaxDelay.D()
}

// Delay returns the wait before the attempt after attempt (1-based) failed
// with err: the callee's Retry-After capped by max_delay (the layer does not
// try again after a longer one), else a full-jitter exponential delay.
func (r *Retry) Delay(attempt int, err error) time.Duration {
	maxDelay := r.MaxDelay.D()
	if ra, ok := runtime.RetryAfterOf(err); ok {
		return min(ra, maxDelay)
	}
	ceil := float64(r.InitialDelay.D())
	for i := 1; i < attempt && ceil < float64(maxDelay); i++ {
		ceil *= r.Multiplier
	}
	c := min(time.Duration(ceil), maxDelay)
	if c <= 0 {
		return 0
	}
	if r.random == nil {
		return rand.N(c + 1)
	}
	return time.Duration(r.random.Int64N(int64(c) + 1))
}

func (r *Retry) wait(ctx context.Context, attempt int, err error) error {
	return r.clock.Sleep(ctx, r.Delay(attempt, err))
}

// breakers holds one breaker per key. fixed is read-only after Provision;
// other keys live in dyn.
type breakers struct {
	threshold int32
	cooldown  time.Duration
	clock     runtime.Clock
	fixed     []keyed
	dyn       sync.Map
}

type keyed struct {
	key string
	b   *breaker
}

func (bs *breakers) get(key string) *breaker {
	// A linear scan beats hashing for the few models or tools of a plan.
	for i := range bs.fixed {
		if bs.fixed[i].key == key {
			return bs.fixed[i].b
		}
	}
	if b, ok := bs.dyn.Load(key); ok {
		return b.(*breaker)
	}
	b, _ := bs.dyn.LoadOrStore(key, &breaker{set: bs})
	return b.(*breaker)
}

// breaker is a consecutive-failures circuit breaker. Closed: openUntil is 0.
// Open: calls are refused until openUntil; then one trial call is admitted
// (trial set) and its outcome alone closes or reopens the breaker. Each
// attempt knows whether it was admitted as the trial (allow's second
// result) and passes that to its outcome: an attempt admitted before the
// breaker opened, ending during someone else's trial, neither ends that
// trial nor closes or reopens the breaker, so at most one trial is ever in
// flight and only its outcome decides.
type breaker struct {
	set       *breakers
	failures  atomic.Int32
	openUntil atomic.Int64
	trial     atomic.Bool
}

// allow reports whether a call may proceed, whether it is the breaker's
// trial, and, when refused, until when.
func (b *breaker) allow() (until time.Time, trial, ok bool) {
	u := b.openUntil.Load()
	if u == 0 {
		return time.Time{}, false, true
	}
	if b.set.clock.Now().UnixNano() < u {
		return time.Unix(0, u), false, false
	}
	if b.trial.CompareAndSwap(false, true) {
		return time.Time{}, true, true
	}
	return time.Unix(0, u), false, false
}

// success records a call that succeeded. The trial's success closes the
// breaker; another call's resets the count of consecutive failures of a
// closed breaker and leaves an open one to its trial.
func (b *breaker) success(trial bool) {
	if b == nil {
		return
	}
	if trial {
		b.failures.Store(0)
		b.openUntil.Store(0)
		b.trial.Store(false)
		return
	}
	if b.openUntil.Load() == 0 && b.failures.Load() != 0 {
		b.failures.Store(0)
	}
}

// failure records a transient failure. The trial's reopens the breaker for
// the cooldown; another call's counts towards the threshold of a closed
// breaker and leaves an open one to its trial.
func (b *breaker) failure(trial bool) {
	if b == nil {
		return
	}
	if trial {
		b.failures.Add(1)
		b.openUntil.Store(b.set.clock.Now().Add(b.set.cooldown).UnixNano())
		b.trial.Store(false)
		return
	}
	if b.openUntil.Load() != 0 {
		return
	}
	if n := b.failures.Add(1); n >= b.set.threshold {
		b.openUntil.CompareAndSwap(0, b.set.clock.Now().Add(b.set.cooldown).UnixNano())
	}
}

// release ends a trial whose outcome says nothing about the callee's health
// (a permanent error, a cancellation, a panic): the next call may try again.
// Only the trial's own attempt releases it.
func (b *breaker) release(trial bool) {
	if b == nil || !trial {
		return
	}
	b.trial.Store(false)
}

var (
	_ runtime.ChatWrapper = (*Retry)(nil)
	_ runtime.ToolWrapper = (*Retry)(nil)
)
