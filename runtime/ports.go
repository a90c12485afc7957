package runtime

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// AuditDecision is the decision an audit record states.
type AuditDecision string

// The audit decisions.
const (
	DecisionOK      AuditDecision = "ok"
	DecisionFailed  AuditDecision = "failed"
	DecisionDenied  AuditDecision = "denied"
	DecisionDeduped AuditDecision = "deduped"
	// DecisionInDoubt is a call that may have had its effect with its
	// outcome unknown (an *InDoubtError), or that ran to its end but whose
	// outcome an inner layer could not record (ErrOutcomeUnrecorded):
	// Classify's ClassInDoubt. Records written before this decision existed
	// state "failed" with error_type "in_doubt".
	DecisionInDoubt AuditDecision = "in_doubt"
	// DecisionRan is a call that ran (its effect, if it has one, happened)
	// but whose result could not be used, so the caller got an error
	// (ErrRan): a result too large to relay, or one a guard after the call
	// blocked. A duplicate an idempotent layer answers with that stored
	// error is "deduped".
	DecisionRan AuditDecision = "ran"
)

// AuditPhase says whether a record was written before the call (intent) or
// after it (outcome).
type AuditPhase string

// The audit phases.
const (
	PhaseIntent  AuditPhase = "intent"
	PhaseOutcome AuditPhase = "outcome"
)

// AuditRecord is one audit trail entry.
type AuditRecord struct {
	// Time is when the record was made.
	Time time.Time `json:"time"`
	// Layer names the audit layer that wrote it.
	Layer string `json:"layer,omitempty"`
	// Stage is "tool" or "turn".
	Stage string `json:"stage,omitempty"`
	// Tool is the tool called (tool stage).
	Tool string `json:"tool,omitempty"`
	// Phase is intent (before the call) or outcome (after it).
	Phase AuditPhase `json:"phase"`
	// Decision is the outcome (empty for an intent record).
	Decision AuditDecision `json:"decision,omitempty"`
	// ErrorType is the failure's kind (KindOf), ErrorMessage its text.
	ErrorType    string `json:"error_type,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
	// Attempts is the attempt count from the call's meta.
	Attempts int `json:"attempts,omitempty"`
	// RunID is the run the call belongs to.
	RunID string `json:"run_id,omitempty"`
	// IdempotencyKey is the call's idempotency key.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Duration is how long the call took (outcome records).
	Duration time.Duration `json:"duration,omitempty"`
	// ArgsDigest is the digest of the canonical arguments (a turn's: of
	// its input): their hex SHA-256, or with settings.digest_key_env
	// KeyedDigestPrefix and their hex HMAC-SHA256 under the key
	// (Digester).
	ArgsDigest string `json:"args_digest,omitempty"`
	// Args holds the raw arguments when the layer includes them.
	Args map[string]any `json:"args,omitempty"`
}

// UnmarshalJSON decodes a record as encoding/json does, but its Args as
// DecodeArgs does: a stored call's integer above 2^53 reads back as the
// int64 the call carried, not as a float64 neighbour of it.
func (r *AuditRecord) UnmarshalJSON(b []byte) error {
	type plain AuditRecord
	v := struct {
		*plain
		Args json.RawMessage `json:"args,omitempty"`
	}{plain: (*plain)(r)}
	r.Args = nil
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	if len(v.Args) == 0 || string(v.Args) == "null" {
		return nil
	}
	return DecodeArgs(v.Args, &r.Args)
}

// AuditSink stores audit records durably. Append must be safe for concurrent
// use; an error fails the call that the record describes only if the audit
// layer says so.
type AuditSink interface {
	Append(ctx context.Context, r AuditRecord) error
}

// DefaultMemoryAuditMax is the number of records a MemoryAudit keeps when
// its Max is unset.
const DefaultMemoryAuditMax = 10_000

// MemoryAudit is an in-memory AuditSink, safe for concurrent use. It is not
// durable: it keeps the last Max records (DefaultMemoryAuditMax when Max
// is 0 or less) and drops the oldest beyond them, counting them (Dropped),
// so that a long-running process does not grow without bound (a record
// holding its arguments under include_args may be large). The zero value
// is ready to use.
type MemoryAudit struct {
	// Max bounds the records kept; set it before the first Append.
	Max int

	mu      sync.Mutex
	records []AuditRecord
	// next is the index of the oldest record once the ring is full.
	next    int
	dropped int64
}

// Append stores r, dropping the oldest record when Max are kept.
func (m *MemoryAudit) Append(_ context.Context, r AuditRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	limit := m.Max
	if limit <= 0 {
		limit = DefaultMemoryAuditMax
	}
	if len(m.records) < limit {
		m.records = append(m.records, r)
		return nil
	}
	m.records[m.next] = r
	m.next = (m.next + 1) % len(m.records)
	m.dropped++
	return nil
}

// Records returns a copy of the records kept, in append order.
func (m *MemoryAudit) Records() []AuditRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append(slices.Clone(m.records[m.next:]), m.records[:m.next]...)
}

// Dropped returns the number of records dropped to keep within Max.
func (m *MemoryAudit) Dropped() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

// KV is the key-value port of stateful layers (memoize, idempotent). Values
// are opaque bytes; a TTL of zero means no expiry. Implementations must be
// safe for concurrent use.
type KV interface {
	// Get returns the value of key and whether it exists (and has not
	// expired).
	Get(ctx context.Context, key string) ([]byte, bool, error)
	// Set stores value under key.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// SetIfAbsent stores value only if key is absent, and reports whether it
	// did.
	SetIfAbsent(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// Delete removes key; a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// MemoryKV is an in-memory KV, safe for concurrent use. Expired entries are
// dropped when read or overwritten, and by a sweep of the whole map each time
// a write finds it has doubled since the last sweep (amortised constant cost
// per write), so that keys written once and never read again do not
// accumulate.
type MemoryKV struct {
	mu  sync.Mutex
	m   map[string]kvEntry
	now func() time.Time
	// sweepAt is the size at which the next write sweeps expired entries.
	sweepAt int
}

// minSweep is the smallest size at which a MemoryKV sweeps.
const minSweep = 64

type kvEntry struct {
	v   []byte
	exp time.Time
}

// NewMemoryKV returns an empty MemoryKV.
func NewMemoryKV() *MemoryKV {
	return &MemoryKV{m: map[string]kvEntry{}, now: time.Now, sweepAt: minSweep}
}

// put stores e under key and sweeps expired entries once the map has doubled
// since the last sweep. The caller holds k.mu.
func (k *MemoryKV) put(key string, e kvEntry) {
	k.m[key] = e
	if len(k.m) < k.sweepAt {
		return
	}
	now := k.now()
	for kk, ee := range k.m {
		if !ee.exp.IsZero() && !now.Before(ee.exp) {
			delete(k.m, kk)
		}
	}
	k.sweepAt = max(2*len(k.m), minSweep)
}

func (k *MemoryKV) live(key string) (kvEntry, bool) {
	e, ok := k.m[key]
	if ok && !e.exp.IsZero() && !k.now().Before(e.exp) {
		delete(k.m, key)
		return kvEntry{}, false
	}
	return e, ok
}

func (k *MemoryKV) entry(value []byte, ttl time.Duration) kvEntry {
	e := kvEntry{v: slices.Clone(value)}
	if ttl > 0 {
		e.exp = k.now().Add(ttl)
	}
	return e
}

// Get implements KV.
func (k *MemoryKV) Get(_ context.Context, key string) ([]byte, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.live(key)
	if !ok {
		return nil, false, nil
	}
	return slices.Clone(e.v), true, nil
}

// Set implements KV.
func (k *MemoryKV) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	k.mu.Lock()
	k.put(key, k.entry(value, ttl))
	k.mu.Unlock()
	return nil
}

// SetIfAbsent implements KV.
func (k *MemoryKV) SetIfAbsent(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.live(key); ok {
		return false, nil
	}
	k.put(key, k.entry(value, ttl))
	return true, nil
}

// Delete implements KV.
func (k *MemoryKV) Delete(_ context.Context, key string) error {
	k.mu.Lock()
	delete(k.m, key)
	k.mu.Unlock()
	return nil
}

var (
	_ KV        = (*MemoryKV)(nil)
	_ AuditSink = (*MemoryAudit)(nil)
)
