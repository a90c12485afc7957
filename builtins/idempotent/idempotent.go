package idempotent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "idempotent"

// DefaultLease is how long a claim on a running call holds.
const DefaultLease = 5 * time.Minute

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageTool},
		Traits: []runtime.Trait{runtime.TraitCaches, runtime.TraitShortCircuits},
		Doc:    "dedupes side-effecting tool calls on run id, tool and canonical arguments",
		New:    New,
	})
}

// New returns an idempotent layer with the schema's default ttl (24h).
func New() runtime.Middleware {
	return &Idempotent{TTL: runtime.Duration(24 * time.Hour)}
}

// Idempotent is the idempotent middleware; its exported fields are its
// config (schemas/idempotent.cue).
type Idempotent struct {
	TTL   runtime.Duration `json:"ttl"`
	Store string           `json:"store,omitempty"`

	// Lease bounds a claim on a running call (0: DefaultLease): a claim
	// left by a crashed process blocks duplicates until it expires, and a
	// call running longer than the lease may run twice.
	Lease runtime.Duration `json:"lease,omitempty"`

	name    string
	kv      runtime.KV
	logger  *slog.Logger
	mu      sync.Mutex
	flights map[string]*flight
	// poll is the first and longest wait between reads of a claim held
	// elsewhere.
	pollMin, pollMax time.Duration
}

// flight is a call in progress in this process.
type flight struct {
	done chan struct{}
	v    any
	err  error
	// abandoned is set when the leader's own context ended: followers do
	// not share that error, they try again.
	abandoned bool
}

// record is the stored state of a key.
type record struct {
	// State is "pending" (claimed, running) or "done".
	State  string          `json:"state"`
	Result json.RawMessage `json:"result,omitempty"`
}

var pending = []byte(`{"state":"pending"}`)

// Provision resolves the store.
func (m *Idempotent) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.logger = b.Logger
	m.flights = map[string]*flight{}
	if m.Lease <= 0 {
		m.Lease = runtime.Duration(DefaultLease)
	}
	m.pollMin, m.pollMax = 2*time.Millisecond, 200*time.Millisecond
	kv, err := b.KV(m.Store)
	if err != nil {
		return err
	}
	m.kv = kv
	return nil
}

// Validate checks the ttl.
func (m *Idempotent) Validate() error {
	if m.TTL <= 0 {
		return errors.New("ttl must be positive")
	}
	return nil
}

// Key returns the store key of a call. The layer computes it only for calls
// whose arguments canonicalise (ToolCall.ArgsDigestErr).
func Key(c *runtime.ToolCall) string {
	h := sha256.New()
	for _, s := range []string{c.Name, c.IdempotencyKey(), c.ArgsDigest()} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "agentc/idempotent/" + hex.EncodeToString(h.Sum(nil))
}

// WrapTool implements runtime.ToolWrapper.
func (m *Idempotent) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		// Only side-effecting calls are deduped: replaying a read-only tool
		// (a status poll) would return a stale result.
		if c.Tool == nil || !c.Tool.SideEffecting {
			return next(ctx, c)
		}
		// Calls whose arguments have no canonical form cannot be told apart:
		// refused rather than deduped against each other.
		if _, err := c.ArgsDigestErr(); err != nil {
			return nil, &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name,
				Message: "arguments cannot be canonicalised; the call did not run", Err: err}
		}
		key := Key(c)
		for {
			m.mu.Lock()
			f, running := m.flights[key]
			if !running {
				f = &flight{done: make(chan struct{})}
				m.flights[key] = f
				m.mu.Unlock()
				return m.lead(ctx, c, key, f, next)
			}
			m.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if f.abandoned {
				continue
			}
			if f.err == nil {
				c.Meta.Deduped, c.Meta.Cached = true, true
			}
			return f.v, f.err
		}
	}
}

// lead runs the call as the process's leader for key and publishes the
// outcome to the followers.
func (m *Idempotent) lead(ctx context.Context, c *runtime.ToolCall, key string, f *flight, next runtime.ToolHandler) (v any, err error) {
	returned := false
	defer func() {
		f.v, f.err = v, err
		// A leader that panicked or whose own context ended has no outcome
		// to share: the followers try again.
		f.abandoned = !returned || (err != nil && ctx.Err() != nil)
		m.mu.Lock()
		delete(m.flights, key)
		m.mu.Unlock()
		close(f.done)
	}()
	v, err = m.settle(ctx, c, key, next)
	returned = true
	return v, err
}

// settle replays the stored result of key, waits for a claim held elsewhere,
// or claims the call and runs it.
func (m *Idempotent) settle(ctx context.Context, c *runtime.ToolCall, key string, next runtime.ToolHandler) (any, error) {
	for {
		rec, found, err := m.read(ctx, key)
		if err != nil {
			return nil, err
		}
		if found && rec.State == "done" {
			var out any
			if err := json.Unmarshal(rec.Result, &out); err == nil {
				c.Meta.Deduped, c.Meta.Cached = true, true
				return out, nil
			}
			m.logger.WarnContext(ctx, "idempotent: stored result does not decode; running the call again", "tool", c.Name)
			if err := m.kv.Delete(ctx, key); err != nil {
				return nil, m.storeErr("clear a corrupt record", err)
			}
			continue
		}
		if found {
			if err := m.waitClaim(ctx, key); err != nil {
				return nil, err
			}
			continue
		}
		claimed, err := m.kv.SetIfAbsent(ctx, key, pending, m.Lease.D())
		if err != nil {
			return nil, m.storeErr("claim the call", err)
		}
		if claimed {
			return m.run(ctx, c, key, next)
		}
	}
}

// run executes the claimed call and stores its result.
func (m *Idempotent) run(ctx context.Context, c *runtime.ToolCall, key string, next runtime.ToolHandler) (any, error) {
	done := false
	defer func() {
		if !done { // the call panicked: release the claim
			_ = m.kv.Delete(context.WithoutCancel(ctx), key)
		}
	}()
	v, err := next(ctx, c)
	done = true
	wctx := context.WithoutCancel(ctx)
	if err != nil {
		if derr := m.kv.Delete(wctx, key); derr != nil {
			m.logger.WarnContext(ctx, "idempotent: releasing the claim of a failed call failed; it expires with its lease",
				"tool", c.Name, "error", derr)
		}
		return v, err
	}
	res, merr := json.Marshal(v)
	if merr == nil {
		var b []byte
		b, merr = json.Marshal(record{State: "done", Result: res})
		if merr == nil {
			if serr := m.kv.Set(wctx, key, b, m.TTL.D()); serr != nil {
				m.logger.WarnContext(ctx, "idempotent: storing the result failed; a duplicate will run again",
					"tool", c.Name, "error", serr)
				_ = m.kv.Delete(wctx, key)
			}
			return v, nil
		}
	}
	m.logger.WarnContext(ctx, "idempotent: result does not encode as JSON; not stored", "tool", c.Name, "error", merr)
	_ = m.kv.Delete(wctx, key)
	return v, nil
}

func (m *Idempotent) read(ctx context.Context, key string) (record, bool, error) {
	b, found, err := m.kv.Get(ctx, key)
	if err != nil {
		return record{}, false, m.storeErr("read the call's state", err)
	}
	if !found {
		return record{}, false, nil
	}
	var rec record
	if err := json.Unmarshal(b, &rec); err != nil || (rec.State != "done" && rec.State != "pending") {
		rec = record{State: "done"} // undecodable: handled as a corrupt result
	}
	return rec, true, nil
}

// waitClaim waits until the pending claim on key changes (a result, or no
// claim), polling with a growing interval, or ctx ends.
func (m *Idempotent) waitClaim(ctx context.Context, key string) error {
	d := m.pollMin
	for {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		rec, found, err := m.read(ctx, key)
		if err != nil {
			return err
		}
		if !found || rec.State != "pending" {
			return nil
		}
		d = min(2*d, m.pollMax)
	}
}

func (m *Idempotent) storeErr(what string, err error) error {
	return &runtime.CallError{Layer: m.name, Message: fmt.Sprintf("idempotency store: cannot %s; the call did not run", what), Err: err}
}

var _ runtime.ToolWrapper = (*Idempotent)(nil)
