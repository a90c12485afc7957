package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// StateEvent is what a background sink is told of one state operation.
type StateEvent struct {
	// Time is when the operation was decided.
	Time time.Time `json:"time"`
	// RunID is the run, Field the field and Op "set" or "append".
	RunID string `json:"run_id"`
	Field string `json:"field"`
	Op    string `json:"op"`
	// Value is the value stored (for a veto, the value refused);
	// "[SECRET]" for a secret field's value that no redact handler
	// rewrote.
	Value any `json:"value"`
	// Denied is set when a handler vetoed the operation; Layer names it
	// and Message says why.
	Denied  bool   `json:"denied,omitempty"`
	Layer   string `json:"layer,omitempty"`
	Message string `json:"message,omitempty"`
}

// StateStats counts the background sinks' queue. Every event is either
// dropped (the queue was full) or delivered to each of its field's sinks;
// a sink that fails counts in Failed.
type StateStats struct {
	// Queued counts the events accepted into the queue, Dropped those that
	// found it full, came after Close, or were still queued at Close.
	Queued  int64 `json:"queued"`
	Dropped int64 `json:"dropped"`
	// Delivered counts the deliveries that succeeded, Failed those that
	// did not (one per sink and event).
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	// Pending is the number of events waiting in the queue.
	Pending int `json:"pending"`
}

// StateStats returns the counters of the state's background queue (zero
// when the policy declares no background sink).
func (pl *Pipeline) StateStats() StateStats {
	if pl.state == nil || pl.state.queue == nil {
		return StateStats{}
	}
	q := pl.state.queue
	return StateStats{Queued: q.queued.Load(), Dropped: q.dropped.Load(), Delivered: q.delivered.Load(),
		Failed: q.failed.Load(), Pending: len(q.ch)}
}

// DrainState waits until the background queue is empty and its last event
// delivered, or ctx ends. A queue held by Deps.StateHold is released first.
// After Close it returns at once: the events Close left are counted as
// dropped.
func (pl *Pipeline) DrainState(ctx context.Context) error {
	if pl.state == nil || pl.state.queue == nil {
		return nil
	}
	q := pl.state.queue
	q.release()
	for {
		if q.inflight.Load() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-q.done: // closed: nothing more is delivered
			return nil
		case <-time.After(time.Millisecond):
		}
	}
}

// stateSink delivers one event.
type stateSink struct {
	kind    string
	deliver func(ctx context.Context, ev StateEvent) error
}

// stateSink resolves a background sink of the plan.
func (pl *Pipeline) stateSink(ctx context.Context, field string, b plan.StateSink) (stateSink, error) {
	switch b.Sink {
	case "log":
		logger := pl.logger.With("field", field)
		return stateSink{kind: b.Sink, deliver: func(ctx context.Context, ev StateEvent) error {
			logger.LogAttrs(ctx, slog.LevelInfo, "agentc state", slog.String("run_id", ev.RunID), slog.String("op", ev.Op),
				slog.Any("value", ev.Value), slog.Bool("denied", ev.Denied), slog.String("message", ev.Message))
			return nil
		}}, nil
	case "audit":
		sink, err := pl.auditSink(ctx, b.Store)
		if err != nil {
			return stateSink{}, err
		}
		return stateSink{kind: b.Sink, deliver: func(ctx context.Context, ev StateEvent) error {
			r := AuditRecord{Time: ev.Time, Layer: "state." + field, Stage: plan.StageState, Tool: field, Phase: PhaseOutcome,
				Decision: DecisionOK, RunID: ev.RunID, Args: map[string]any{"op": ev.Op, "value": ev.Value}}
			if ev.Denied {
				r.Decision, r.ErrorType, r.ErrorMessage = DecisionDenied, "blocked", ev.Message
			}
			return sink.Append(ctx, r)
		}}, nil
	case "webhook":
		url := b.URL
		if url == "" {
			url = os.Getenv(b.URLEnv)
			if url == "" {
				return stateSink{}, fmt.Errorf("webhook: the variable %s is not set", b.URLEnv)
			}
		}
		client := &http.Client{Timeout: 10 * time.Second}
		if pl.deps.HTTPClient != nil {
			c := *pl.deps.HTTPClient
			client = &c
		}
		// A redirect is not followed: net/http turns a POST answered 301,
		// 302 or 303 into a GET without the event, whose 200 would count
		// it delivered, and a 307 or 308 would send the event to wherever
		// the endpoint points. The 3xx is a failed delivery.
		client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		return stateSink{kind: b.Sink, deliver: func(ctx context.Context, ev StateEvent) error {
			body, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode/100 == 3 {
				return fmt.Errorf("webhook answered %s (a redirect, not followed: give the final url)", resp.Status)
			}
			if resp.StatusCode/100 != 2 {
				return fmt.Errorf("webhook answered %s", resp.Status)
			}
			return nil
		}}, nil
	}
	return stateSink{}, fmt.Errorf("unknown sink %q (want log, audit or webhook)", b.Sink)
}

// stateEvent queues the event of an operation for the field's sinks. A
// secret field's value reaches them only when clean (the handlers left none
// of the secret in clear); otherwise they see secretMark. The secrets of
// the run (its secret fields' values, its secret_result tools' results) are
// masked in the value and the denial message as the audit trail masks them,
// here, when the event is queued: a sink that delivers it after the run
// ended (its secrets forgotten) sends no secret either.
func (pl *Pipeline) stateEvent(runID string, f *stateField, op string, v any, clean bool, veto *BlockedError) {
	if len(f.sinks) == 0 || pl.state.queue == nil {
		return
	}
	taint := pl.runTaint(runID)
	if f.secret && !clean {
		v = secretMark
	} else if len(taint) > 0 {
		v = maskTaint(cloneJSON(v), taint)
	} else {
		v = cloneJSON(v)
	}
	ev := StateEvent{Time: pl.now(), RunID: runID, Field: f.name, Op: op, Value: v}
	if veto != nil {
		ev.Denied, ev.Layer, ev.Message = true, veto.Layer, maskText(veto.Message, taint)
	}
	pl.state.queue.push(queued{ev: ev, sinks: f.sinks})
}

// now reads the pipeline's clock.
func (pl *Pipeline) now() time.Time {
	if pl.deps.Clock != nil {
		return pl.deps.Clock.Now()
	}
	return time.Now()
}

type queued struct {
	ev    StateEvent
	sinks []stateSink
}

// stateQueue is the bounded queue of the background sinks and the one
// goroutine that delivers from it; close stops it.
type stateQueue struct {
	ch     chan queued
	logger *slog.Logger
	hold   <-chan struct{}
	// released closes when DrainState releases a held queue.
	released    chan struct{}
	releaseOnce sync.Once
	ctx         context.Context
	cancel      context.CancelFunc
	done        chan struct{}
	dropWarned  sync.Once
	// mu orders push against close: pushes hold it shared, close
	// exclusively to set closed, so no event enters the queue after close
	// counted what was left in it.
	mu     sync.RWMutex
	closed bool

	queued, dropped, delivered, failed atomic.Int64
	// inflight counts the events queued and not yet delivered.
	inflight atomic.Int64
}

func newStateQueue(size int, logger *slog.Logger, hold <-chan struct{}) *stateQueue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &stateQueue{ch: make(chan queued, size), logger: logger, hold: hold, released: make(chan struct{}),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go q.run()
	return q
}

// push queues an event without blocking; a full or closed queue drops it.
func (q *stateQueue) push(e queued) {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		q.dropped.Add(1)
		return
	}
	// inflight counts the event before the worker can take it, so that
	// DrainState never sees it delivered before it was counted.
	q.inflight.Add(1)
	select {
	case q.ch <- e:
		q.queued.Add(1)
	default:
		q.inflight.Add(-1)
		q.dropped.Add(1)
		q.dropWarned.Do(func() {
			q.logger.Warn("state background queue is full; events are dropped (counted in StateStats.Dropped)", "capacity", cap(q.ch))
		})
	}
}

func (q *stateQueue) release() { q.releaseOnce.Do(func() { close(q.released) }) }

func (q *stateQueue) run() {
	defer close(q.done)
	if q.hold != nil {
		select {
		case <-q.hold:
		case <-q.released:
		case <-q.ctx.Done():
			return
		}
	}
	for {
		select {
		case <-q.ctx.Done():
			return
		case e := <-q.ch:
			for _, s := range e.sinks {
				if err := s.deliver(q.ctx, e.ev); err != nil {
					q.failed.Add(1)
					q.logger.Warn("state background sink failed", "sink", s.kind, "field", e.ev.Field, "error", err)
				} else {
					q.delivered.Add(1)
				}
			}
			q.inflight.Add(-1)
		}
	}
}

// close stops the worker; events still queued are not delivered and are
// counted as dropped, as is any event pushed after.
func (q *stateQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.cancel()
	<-q.done
	for {
		select {
		case <-q.ch:
			q.dropped.Add(1)
			q.inflight.Add(-1)
		default:
			return
		}
	}
}
