package hedge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "hedge"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat},
		Traits:  []runtime.Trait{runtime.TraitReinvokes},
		Doc:     "races backup models after a delay; the first to deliver (or, with win first_success, to succeed) wins and the rest are cancelled; a racer blocked, refused by a budget or in doubt ends the race",
		New:     func() runtime.Middleware { return &Hedge{Delay: runtime.Duration(2 * time.Second), Win: WinFirstDelta} },
	})
}

// The values of Hedge.Win.
const (
	// WinFirstDelta commits to the first racer that delivers a delta.
	WinFirstDelta = "first_delta"
	// WinFirstSuccess commits to the first racer that finishes without an
	// error; the racers' deltas are held until one does.
	WinFirstSuccess = "first_success"
)

// Hedge is the hedge middleware; its fields are its config
// (schemas/hedge.cue).
type Hedge struct {
	// Models race in order.
	Models []string `json:"models"`
	// Delay is the wait before the next model starts.
	Delay runtime.Duration `json:"delay"`
	// Win is when a racer wins: WinFirstDelta (its first delta) or
	// WinFirstSuccess (its successful end; its deltas are held until then).
	Win string `json:"win"`

	clock runtime.Clock
}

// Provision takes the pipeline's clock, which times the delays.
func (h *Hedge) Provision(b *runtime.BuildContext) error {
	h.clock = b.Clock()
	return nil
}

// delayTimer fires on its channel once the hedge delay has elapsed on the
// pipeline's clock.
type delayTimer struct {
	c     chan struct{}
	clock runtime.Clock
	d     time.Duration
	stop  func() bool
}

func (h *Hedge) newTimer() *delayTimer {
	t := &delayTimer{c: make(chan struct{}, 1), clock: h.clock, d: h.Delay.D()}
	if t.clock == nil {
		t.clock = runtime.RealClock{}
	}
	t.reset()
	return t
}

// reset stops the timer, drops a fire not yet received and arms it again.
func (t *delayTimer) reset() {
	if t.stop != nil {
		t.stop()
	}
	select {
	case <-t.c:
	default:
	}
	t.stop = t.clock.AfterFunc(t.d, func() {
		select {
		case t.c <- struct{}{}:
		default:
		}
	})
}

// Validate requires two models.
func (h *Hedge) Validate() error {
	if len(h.Models) < 2 {
		return fmt.Errorf("models must name at least two models, got %d", len(h.Models))
	}
	if h.Delay < 0 {
		return errors.New("delay must not be negative")
	}
	if h.Win != WinFirstDelta && h.Win != WinFirstSuccess {
		return fmt.Errorf("win must be %q or %q, got %q", WinFirstDelta, WinFirstSuccess, h.Win)
	}
	return nil
}

type event struct {
	idx   int
	delta runtime.Delta
	done  bool
	// arrived reports that the racer's model client yielded its first
	// delta (first_delta): one the layers below hold (a tool call's
	// fragments, held until the answer ends) wins the race as it arrives.
	arrived bool
	err     error
	// panicked reports that the racer's inner layers panicked with value
	// panic (a done event).
	panicked bool
	panic    any
}

// arrival tells the race of the first delta a racer's model client
// yields (runtime.StreamWatcher).
type arrival struct {
	seen atomic.Bool
	tell func()
}

func (a *arrival) Arrived() {
	if a.seen.CompareAndSwap(false, true) {
		a.tell()
	}
}

func (*arrival) Delivered() {}

type racer struct {
	call   *runtime.ChatCall
	cancel context.CancelFunc
	ack    chan bool
	// notes holds the racer's request id and model until it wins: the
	// caller's notes name the answer it got, not a loser's request.
	notes *runtime.HeldNotes
}

// WrapChat implements runtime.ChatWrapper.
func (h *Hedge) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		return h.race(ctx, c, yield, next)
	}
}

func (h *Hedge) race(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool, next runtime.ChatHandler) error {
	hctx, cancelAll := context.WithCancel(ctx)
	events := make(chan event)
	// quit is closed when race returns, normally or because the consumer's
	// yield panicked: from then on no racer waits to send an event or for an
	// ack, and the racers are cancelled and awaited before race returns.
	quit := make(chan struct{})
	var wg sync.WaitGroup
	defer func() {
		close(quit)
		cancelAll()
		wg.Wait()
	}()
	var racers []*racer
	// held are the deltas of each racer not yet committed (first_success).
	var held [][]runtime.Delta
	holding := h.Win == WinFirstSuccess
	// upcoming is the index in h.Models of the next model to start; refused
	// holds the models whose provider refused the call
	// (runtime.ErrProviderRefused), which would refuse it again: a model
	// listed again after its refusal is skipped.
	upcoming := 0
	refused := map[string]bool{}
	due := func() bool {
		for upcoming < len(h.Models) && refused[h.Models[upcoming]] {
			upcoming++
		}
		return upcoming < len(h.Models)
	}
	start := func() {
		i := len(racers)
		model := h.Models[upcoming]
		upcoming++
		rctx, cancel := context.WithCancel(hctx)
		rctx, notes := runtime.HoldUpstreamNotes(rctx)
		if !holding {
			rctx = runtime.WithStreamWatcher(rctx, &arrival{tell: func() {
				select {
				case events <- event{idx: i, arrived: true}:
				case <-rctx.Done():
				case <-quit:
				}
			}})
		}
		rc := c.Clone()
		rc.Request.Model = model
		r := &racer{call: rc, cancel: cancel, ack: make(chan bool), notes: notes}
		racers = append(racers, r)
		held = append(held, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Deferred before the send below, so it runs after it: a
			// racer's context ends only once the loop has its end.
			defer cancel()
			ev := event{idx: i, done: true}
			defer func() {
				// A panic of the inner layers is delivered to the caller's
				// goroutine, which re-panics with it.
				if p := recover(); p != nil {
					ev.panicked, ev.panic = true, p
				}
				// The loop receives until every racer has reported done.
				select {
				case events <- ev:
				case <-quit:
				}
			}()
			ev.err = next(rctx, rc, func(d runtime.Delta) bool {
				select {
				case events <- event{idx: i, delta: d}:
				case <-rctx.Done():
					return false
				case <-quit:
					return false
				}
				select {
				case ok := <-r.ack:
					return ok
				case <-quit:
					return false
				}
			})
		}()
	}

	timer := h.newTimer()
	defer func() { timer.stop() }()
	start()
	running := 1
	winner := -1
	stopped := false
	var result, lastErr error
	panicked := false
	var panicValue any
	// final is the blocked, budget or in-doubt error of a racer that ended
	// the race before a winner: no model is started after it and no racer
	// still running can win.
	var final error
	cancelOthers := func(keep int) {
		for j, r := range racers {
			if j != keep {
				r.cancel()
			}
		}
	}
	// win makes racer i the winner.
	win := func(i int) {
		winner = i
		racers[i].notes.Commit()
		cancelOthers(i)
	}
	for running > 0 {
		select {
		case <-timer.c:
			if winner < 0 && !panicked && final == nil && due() && ctx.Err() == nil {
				start()
				running++
				if due() {
					timer.reset()
				}
			}
		case ev := <-events:
			r := racers[ev.idx]
			if ev.arrived {
				if winner < 0 && !panicked && final == nil {
					win(ev.idx)
				}
				continue
			}
			if ev.done {
				running--
				if ev.panicked && !panicked {
					// Stop the race; the panic is raised once every racer
					// has returned.
					panicked, panicValue = true, ev.panic
					cancelOthers(-1)
				}
				if panicked {
					continue
				}
				switch {
				case ev.idx == winner:
					result = ev.err
					c.Adopt(r.call)
				case winner >= 0 || final != nil:
					// A loser finished after being cancelled.
					c.Discard(r.call)
				case ev.err != nil && runtime.Classify(ev.err) != runtime.ClassFailure:
					// A block, a budget's refusal or a call in doubt is the
					// policy's answer to this request, not a model's
					// failure: another model's answer must not bypass it,
					// nor spend past the budget. The race ends with it, as
					// fallback stops on it.
					final = ev.err
					held[ev.idx] = nil
					c.Discard(r.call)
					cancelOthers(-1)
				case ev.err == nil:
					// Finished without a delta (or, holding, the first to
					// finish at all): the success wins, and its held deltas
					// are forwarded in order.
					win(ev.idx)
					for _, d := range held[ev.idx] {
						if stopped = !c.Emit(yield, d); stopped {
							break
						}
					}
					held = nil
					c.Adopt(r.call)
					result = nil
				default:
					// A failure before any delta (or, holding, before the
					// end), transient or permanent, does not end the race
					// while another model may still succeed: record it,
					// drop what it delivered and start the next model at once.
					lastErr = ev.err
					held[ev.idx] = nil
					c.Discard(r.call)
					if errors.Is(ev.err, runtime.ErrProviderRefused) {
						refused[r.call.Request.Model] = true
					}
					if ctx.Err() == nil && due() {
						start()
						running++
						if due() {
							timer.reset()
						}
					}
				}
				continue
			}
			if holding {
				keep := winner < 0 && !panicked && final == nil
				if keep {
					held[ev.idx] = append(held[ev.idx], ev.delta)
				}
				r.ack <- keep
				continue
			}
			if winner < 0 && !panicked && final == nil {
				win(ev.idx)
			}
			if ev.idx != winner || stopped || panicked || final != nil {
				r.ack <- false
				continue
			}
			ok := c.Emit(yield, ev.delta)
			stopped = !ok
			r.ack <- ok
		}
	}
	wg.Wait()
	if winner < 0 {
		// No answer: the notes name the requests made, the last last.
		for _, r := range racers {
			r.notes.Commit()
		}
	}
	if panicked {
		panic(panicValue)
	}
	switch {
	case winner >= 0:
		return result
	case final != nil:
		return final
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return lastErr
}
