package runtime

import (
	"time"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// SetMemoryKVClock sets the clock of k.
func SetMemoryKVClock(k *MemoryKV, now func() time.Time) { k.now = now }

// MemoryKVLen returns how many entries k holds, expired ones included.
func MemoryKVLen(k *MemoryKV) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

// RunStates returns how many runs pl keeps a run state for.
func RunStates(pl *Pipeline) int {
	pl.states.mu.Lock()
	defer pl.states.mu.Unlock()
	return len(pl.states.m)
}

// UnmaskedSink returns the sink an AuditSink of BuildContext wraps.
func UnmaskedSink(s AuditSink) AuditSink {
	if m, ok := s.(maskingSink); ok {
		return m.AuditSink
	}
	return s
}

// SetMemoryBudgeterClock sets the clock of b.
func SetMemoryBudgeterClock(b *MemoryBudgeter, now func() time.Time) { b.now = now }

// MemoryBudgeterLen returns how many ledgers b holds, expired ones included.
func MemoryBudgeterLen(b *MemoryBudgeter) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.m)
}

// CompileChatPredicate compiles src as a chat predicate of phase before.
func CompileChatPredicate(src string) (*Predicate, error) {
	return compilePredicate(&plan.Plan{}, &plan.Predicate{Stage: plan.StageChat, Source: src}, plan.StageChat)
}

// MemoryBudgeterRemembered returns how many settled or lapsed reservations
// the ledger of key remembers.
func MemoryBudgeterRemembered(b *MemoryBudgeter, key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.m[key]; l != nil {
		return len(l.done)
	}
	return 0
}

// MemoryBudgeterQueueCap returns the room the queues of the ledger of key
// hold, in entries.
func MemoryBudgeterQueueCap(b *MemoryBudgeter, key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.m[key]; l != nil {
		return cap(l.settled.q) + cap(l.lapsed.q)
	}
	return 0
}

// SetMemoryRateLimiterClock sets the clock of r.
func SetMemoryRateLimiterClock(r *MemoryRateLimiter, now func() time.Time) { r.now = now }
