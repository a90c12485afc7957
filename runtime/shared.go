package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// The ports of shared state. A store backend offers them (found by type
// assertion, like KV) when it can evaluate them atomically for every process
// that shares it: Redis with Lua scripts, PostgreSQL with single statements.
// The memory backend offers them too, so the builtins have one code path;
// its state is the process's own. A layer whose store lacks a port falls
// back as the port's accessor on BuildContext says.

// LeaseStatus is what Leaser.Acquire found under a key.
type LeaseStatus int

// The statuses of a lease acquisition.
const (
	// LeaseAcquired: the caller holds the lease (LeaseGrant.Token) and runs
	// the call. LeaseGrant.InDoubt says it took over an expired lease.
	LeaseAcquired LeaseStatus = iota
	// LeaseHeld: another holder's lease is live; wait and ask again.
	LeaseHeld
	// LeaseDone: a result is published (LeaseGrant.Result).
	LeaseDone
	// LeaseInDoubt: a holder's lease expired without an outcome, and the
	// caller did not ask to take it over.
	LeaseInDoubt
)

// LeaseGrant is the answer of Leaser.Acquire.
type LeaseGrant struct {
	Status LeaseStatus
	// Token is the fencing token of the caller's lease (LeaseAcquired):
	// it grows with every holder of the key, and Publish, Renew and Release
	// succeed only with the current one.
	Token int64
	// InDoubt is set when the caller took over a lease whose holder stopped
	// without an outcome (LeaseAcquired after a takeover).
	InDoubt bool
	// Result is the published result (LeaseDone).
	Result []byte
	// Note is the note of the claim found held or in doubt (LeaseHeld,
	// LeaseInDoubt); nil when it has none (made without one, or by a build
	// before notes).
	Note []byte
	// Remaining is how long the holder's lease still runs (LeaseHeld).
	Remaining time.Duration
	// Unreadable is why the key's record does not decode (damaged, or
	// written by another build), when that is why it is in doubt
	// (LeaseInDoubt): it may be the claim or the outcome of a call that
	// ran. nil otherwise.
	Unreadable error
}

// Leaser is the idempotency port: a claim on a key held by one caller in any
// process, with a fencing token, and the publication of its one result.
// Implementations must be safe for concurrent use; each method is atomic.
type Leaser interface {
	// Acquire claims key for lease when it is free, or reports its state.
	// A published result is returned (LeaseDone). A key whose holder's
	// lease expired without an outcome is in doubt: with takeover the
	// caller becomes the holder (InDoubt set), else LeaseInDoubt. keep is
	// how long the key's record (claim, in-doubt state, result) lives.
	Acquire(ctx context.Context, key string, lease, keep time.Duration, takeover bool) (LeaseGrant, error)
	// AcquireAs is Acquire by one attempt of a call, named by owner, a
	// nonce the attempt draws once and presents again when it asks again
	// after an Acquire whose answer it never got (a timeout after the
	// store applied it). A pending claim made under owner is the caller's:
	// LeaseAcquired with the claim's token, its lease running from now,
	// even when it had ended (nothing ran under a claim whose token its
	// holder never learned). A claim taken over since belongs to its new
	// holder. An empty owner matches no claim: Acquire.
	//
	// note is kept with a claim the caller makes or takes over (a layer's
	// account of the call, the digest of its arguments), until the key's
	// outcome is published; the note of a claim found held or in doubt is
	// returned (LeaseGrant.Note). With takeover, a claim in doubt is taken
	// over only when its note is note (none and empty alike), or when it
	// has none (made without one, or by a build before notes): the claim
	// then keeps the caller's note. Else the answer is LeaseInDoubt with
	// its note, so that the caller decides, and may ask again with that
	// note to take it over. Acquire passes no note.
	AcquireAs(ctx context.Context, key, owner string, note []byte, lease, keep time.Duration, takeover bool) (LeaseGrant, error)
	// Renew extends the lease of token by lease; false when token no
	// longer holds it.
	Renew(ctx context.Context, key string, token int64, lease time.Duration) (bool, error)
	// Publish stores result as the key's outcome for keep, if token still
	// holds the lease; false when it was fenced out. A repeat by a token
	// that published the key's outcome already (its first answer was
	// lost) is true, and changes nothing.
	Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error)
	// Release drops the claim of token without an outcome (the call failed
	// and may run again); a claim no longer held is left alone.
	Release(ctx context.Context, key string, token int64) error
	// Doubt ends the lease of token now, without an outcome: the call may
	// have had its effect (it panicked, or was cancelled or timed out while
	// it ran). The key is then in doubt at once, as if the lease had
	// expired (Acquire answers LeaseInDoubt, or a takeover), for keep from
	// now; a claim made under an owner nonce is no longer that owner's,
	// and keeps its note. false when token no longer holds the claim
	// (nothing is written).
	Doubt(ctx context.Context, key string, token int64, keep time.Duration) (bool, error)
}

// RateLimiter is the rate_limit port: the generic cell rate algorithm
// (GCRA) evaluated atomically per key.
type RateLimiter interface {
	// Allow admits one call under key at one call per interval on average
	// with bursts of burst calls. An admitted call may have to wait first
	// (wait > 0, its slot is reserved); a call that would wait longer than
	// maxWait is refused (ok false) without being counted, and wait is then
	// when to come back. The key's state keeps the interval it counts in:
	// a call under another rescales it (RescaleTAT), so a changed rate
	// holds from that call on.
	Allow(ctx context.Context, key string, interval time.Duration, burst int64, maxWait time.Duration) (wait time.Duration, ok bool, err error)
	// ForgetRate drops the state of key (a finished run's bucket).
	ForgetRate(ctx context.Context, key string) error
}

// BudgetLimits are a budget's ceilings; nil fields are unlimited.
type BudgetLimits struct {
	Tokens *int64
	USD    *float64
	Calls  *int64
	// Estimate, when set, is what the call is expected to charge (a meter
	// with on_cross "refuse"). The call is refused with BudgetError.Estimate
	// set when the charged ledger plus the estimates still reserved by the
	// calls in flight plus this estimate would exceed the tokens or usd
	// ceiling; else the estimate is reserved with the call, in the same
	// atomic step, until Settle replaces it with the call's charge. Only its
	// token counts and USD are read.
	Estimate *Ledger
	// Lease is how long an admitted call's reservation (its call and
	// estimate) is held when it is never settled: its process died, or
	// every Settle of it failed. Past it the reservation lapses: it is
	// charged as spent at its hold (one call, its estimate's tokens as
	// input and its estimate's cost), never refunded; a Settle after that
	// charges only what its charge exceeds the hold by. Zero is
	// DefaultReservationLease.
	Lease time.Duration
}

// SettleMemory is how long a store remembers a reservation it settled or
// charged as lapsed: a Settle of the same reservation repeated within it
// (its first reply was lost) charges nothing more.
const SettleMemory = time.Hour

// Hold returns what a reservation with estimate est (nil for none) is
// charged when it lapses unsettled: one call, the estimate's tokens as
// input and its cost.
func Hold(est *Ledger) Ledger {
	h := Ledger{Calls: 1}
	if est != nil {
		h.InputTokens, h.USD = max(est.Tokens(), 0), max(est.USD, 0)
	}
	return h
}

// Beyond returns what charge c adds to a ledger that was already charged
// hold for the same call (its reservation lapsed before it settled): each
// amount of c less what hold covers of it, never below zero. The hold's
// tokens cover c's input tokens first, then its output.
func (c Ledger) Beyond(hold Ledger) Ledger {
	in := min(max(c.InputTokens, 0), hold.InputTokens)
	out := min(max(c.OutputTokens, 0), hold.InputTokens-in)
	return Ledger{InputTokens: max(c.InputTokens-in, 0), OutputTokens: max(c.OutputTokens-out, 0),
		USD: max(c.USD-hold.USD, 0), Calls: max(c.Calls-hold.Calls, 0)}
}

// DefaultReservationLease is how long a reservation counts when its call
// has no deadline and is never settled.
const DefaultReservationLease = 10 * time.Minute

// LeaseOf returns the reservation lease of lim: Lease, or
// DefaultReservationLease when unset.
func (lim BudgetLimits) LeaseOf() time.Duration {
	if lim.Lease > 0 {
		return lim.Lease
	}
	return DefaultReservationLease
}

// Budgeter is the meter port: a ledger per key with reservations. A call is
// reserved before it runs and settled after. The calls ceiling refuses once
// the charged calls plus the live reservations have reached it; the tokens
// and usd ceilings once the charged amount has, and a call with an estimate
// (BudgetLimits.Estimate) once the charged amount plus the live
// reservations' estimates plus its own would cross them. So across every
// process the calls never exceed their ceiling, tokens and cost checked
// with estimates exceed theirs by at most what calls charged beyond their
// estimates, and without estimates by at most what the calls in flight at
// that moment charge. A reservation is live until it is settled or its
// lease ends; its holder renews it while the call runs. One whose lease
// ends unsettled is charged its Hold. Settle is safe to repeat: a
// reservation is settled once, however many times its Settle reaches the
// store within SettleMemory.
type Budgeter interface {
	// Reserve admits a call against the ledger of key under the
	// reservation id (unique within the ledger) or refuses it with a
	// *BudgetError (its Layer empty). ttl > 0 makes an idle ledger expire.
	Reserve(ctx context.Context, key, id string, lim BudgetLimits, ttl time.Duration) (*BudgetError, error)
	// RenewReservation extends the lease of the live reservation id of
	// the ledger of key to lease from now (the store's clock); false when
	// it is no longer live (settled, forgotten, or its lease ended), in
	// which case nothing is written.
	RenewReservation(ctx context.Context, key, id string, lease time.Duration) (bool, error)
	// Settle drops the reservation id and adds charge to the ledger, in
	// one atomic step, once per id: a repeat of the Settle of a
	// reservation settled within SettleMemory adds nothing, and a
	// reservation that lapsed (charged its Hold) adds charge.Beyond its
	// hold. An id the store does not know (its ledger was forgotten, or
	// nothing was reserved under it) charges in full, and is remembered
	// as settled; an empty id charges without being remembered.
	Settle(ctx context.Context, key, id string, charge Ledger, ttl time.Duration) error
	// LedgerOf returns the charged ledger of key (zero when absent), the
	// holds of its lapsed reservations included.
	LedgerOf(ctx context.Context, key string) (Ledger, error)
	// ForgetLedger drops the ledger of key and its reservations.
	ForgetLedger(ctx context.Context, key string) error
}

// EstimateOf returns the estimate's amount of resource ("tokens" or
// "usd"); zero without an estimate.
func (lim BudgetLimits) EstimateOf(resource string) float64 {
	switch {
	case lim.Estimate == nil:
		return 0
	case resource == "tokens":
		return float64(lim.Estimate.Tokens())
	case resource == "usd":
		return lim.Estimate.USD
	}
	return 0
}

// CheckBudget returns the refusal of a call against the charged ledger l
// with the live reservations pending (Calls their number, InputTokens and
// USD the sums of their estimates' tokens and cost) under lim (a crossing
// estimate first, then a ceiling already reached), or nil to admit it.
// Backends that read a ledger and write a reservation in one atomic step
// share its rule. The charged ledger alone is checked first: a call it
// refuses gets that final refusal rather than one for the calls in flight
// (BudgetError.InFlight) that another ceiling would make, as their ending
// would give it no room.
func CheckBudget(l, pending Ledger, lim BudgetLimits) *BudgetError {
	if e := checkBudget(l, Ledger{}, lim); e != nil {
		// What the calls in flight hold is told, as the check with them
		// tells it.
		switch {
		case e.Resource == "calls":
			e.Pending = float64(pending.Calls)
		case e.Estimate > 0 && e.Resource == "tokens":
			e.Pending = float64(pending.Tokens())
		case e.Estimate > 0:
			e.Pending = pending.USD
		}
		return e
	}
	return checkBudget(l, pending, lim)
}

// checkBudget is CheckBudget's check of l with pending.
func checkBudget(l, pending Ledger, lim BudgetLimits) *BudgetError {
	if est := lim.Estimate; est != nil {
		if n := est.Tokens(); lim.Tokens != nil && SaturatingAdd(SaturatingAdd(l.Tokens(), pending.Tokens()), n) > *lim.Tokens {
			return &BudgetError{Resource: "tokens", Spent: float64(l.Tokens()), Limit: float64(*lim.Tokens), Estimate: float64(n),
				Pending: float64(pending.Tokens())}
		}
		if lim.USD != nil && est.USD > 0 && l.USD+pending.USD+est.USD > *lim.USD {
			return &BudgetError{Resource: "usd", Spent: l.USD, Limit: *lim.USD, Estimate: est.USD, Pending: pending.USD}
		}
	}
	switch {
	case lim.Tokens != nil && l.Tokens() >= *lim.Tokens:
		return &BudgetError{Resource: "tokens", Spent: float64(l.Tokens()), Limit: float64(*lim.Tokens)}
	case lim.USD != nil && l.USD >= *lim.USD:
		return &BudgetError{Resource: "usd", Spent: l.USD, Limit: *lim.USD}
	case lim.Calls != nil && l.Calls+pending.Calls >= *lim.Calls:
		return &BudgetError{Resource: "calls", Spent: float64(l.Calls), Limit: float64(*lim.Calls), Pending: float64(pending.Calls)}
	}
	return nil
}

// GCRA computes one decision of the generic cell rate algorithm: tat is the
// key's theoretical arrival time (zero when new), now the clock. It returns
// the new tat to store (unchanged when refused), the wait and whether the
// call is admitted. Backends that evaluate it in a script or a statement
// implement the same arithmetic.
func GCRA(tat, now time.Time, interval time.Duration, burst int64, maxWait time.Duration) (newTAT time.Time, wait time.Duration, ok bool) {
	if tat.Before(now) {
		tat = now
	}
	tolerance := time.Duration(burst-1) * interval
	wait = tat.Add(-tolerance).Sub(now)
	if wait < 0 {
		wait = 0
	}
	if wait > maxWait {
		return tat, wait - maxWait, false
	}
	return tat.Add(interval), wait, true
}

// RescaleTAT carries a theoretical arrival time kept under the interval
// from over to the interval to: what is left of it past now is a number
// of calls taken (and reserved) times from, and becomes the same number
// times to, rounded up. A bucket whose policy changed (a reload, or a
// replica started with another) thus gives the calls it owes the new rate
// at once: a raised rate does not keep callers waiting for the old
// intervals, a lowered one lets no burst of the old rate through. from 0
// (not recorded) or equal to to, or a tat not after now, is kept.
func RescaleTAT(tat, now time.Time, from, to time.Duration) time.Time {
	if from <= 0 || to <= 0 || from == to || !tat.After(now) {
		return tat
	}
	owed := uint64(tat.Sub(now))
	hi, lo := bits.Mul64(owed, uint64(to))
	if hi >= uint64(from) {
		return now.Add(time.Duration(math.MaxInt64))
	}
	q, rem := bits.Div64(hi, lo, uint64(from))
	if rem != 0 {
		q++
	}
	if q > math.MaxInt64 {
		q = math.MaxInt64
	}
	return now.Add(time.Duration(q))
}

// IntervalMicros is a rate limiter's interval in whole microseconds, rounded
// up and at least 1, for a store that keeps its times in microseconds
// (redis, postgres). Rounded down, 1000.999 µs would count as 1000 and let
// one call in a thousand more through than the limit, and 1.9 µs as 1
// nearly twice as many.
func IntervalMicros(interval time.Duration) int64 {
	us := interval / time.Microsecond
	if interval%time.Microsecond != 0 {
		us++
	}
	return max(int64(us), 1)
}

// MemoryRateLimiter is an in-process RateLimiter, safe for concurrent use.
// Each bucket keeps the interval it was last used with, and is rescaled
// (RescaleTAT) when a call comes with another. It keeps too the time of its
// clock it was last written at: a clock stepped back since (a host's
// injected clock set back, a VM restored) moves the bucket's theoretical
// arrival time back by as much, so that the bucket owes what it owed, not
// the step as well.
type MemoryRateLimiter struct {
	mu   sync.Mutex
	tats map[string]memBucket
	now  func() time.Time
}

// memBucket is a MemoryRateLimiter's state of one key.
type memBucket struct {
	tat      time.Time
	interval time.Duration
	// at is the clock's time the bucket was last written at.
	at time.Time
}

// NewMemoryRateLimiter returns an empty MemoryRateLimiter.
func NewMemoryRateLimiter() *MemoryRateLimiter {
	return &MemoryRateLimiter{tats: map[string]memBucket{}, now: time.Now}
}

// Allow implements RateLimiter.
func (r *MemoryRateLimiter) Allow(_ context.Context, key string, interval time.Duration, burst int64, maxWait time.Duration) (time.Duration, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	b, had := r.tats[key]
	tat := b.tat
	if back := b.at.Sub(now); had && back > 0 {
		tat = tat.Add(-back)
	}
	tat = RescaleTAT(tat, now, b.interval, interval)
	tat, wait, ok := GCRA(tat, now, interval, burst, maxWait)
	if ok || (had && (b.interval != interval || !tat.Equal(b.tat))) {
		r.tats[key] = memBucket{tat, interval, now}
		if len(r.tats) > minSweep*16 {
			for k, b := range r.tats {
				if !b.tat.After(now) {
					delete(r.tats, k)
				}
			}
		}
	}
	return wait, ok, nil
}

// ForgetRate implements RateLimiter.
func (r *MemoryRateLimiter) ForgetRate(_ context.Context, key string) error {
	r.mu.Lock()
	delete(r.tats, key)
	r.mu.Unlock()
	return nil
}

// MemoryBudgeter is an in-process Budgeter, safe for concurrent use. A
// ledger written with a ttl expires when it has been idle for it (a new
// ledger starts under its key, as in a shared store), and expired ledgers
// are swept once the map has doubled since the last sweep; one written
// without is kept until ForgetLedger drops it. Its reservations' leases and
// its ledgers' expiry follow its clock.
type MemoryBudgeter struct {
	mu      sync.Mutex
	m       map[string]*memLedger
	now     func() time.Time
	sweepAt int
}

type memLedger struct {
	Ledger
	// expires is when the ledger expires (zero: never).
	expires time.Time
	// res are the reservations not settled yet, by id.
	res map[string]memReservation
	// done are the reservations settled or lapsed in the last
	// SettleMemory, by id.
	done map[string]memDone
	// settled and lapsed list done's entries of each kind as they were
	// made, so oldest first: forgetting looks only at those due, not at
	// every entry (an entry replaced or dropped since is passed over).
	settled, lapsed dueQueue
	// peak is the most entries done has held since it was last made
	// anew: a map keeps the room of its peak, given back by a new map.
	peak int
}

type memReservation struct {
	est   Ledger
	until time.Time
}

// memDone is a reservation settled (hold zero) or lapsed and charged its
// hold, remembered until forget.
type memDone struct {
	hold   Ledger
	forget time.Time
}

// memDue is an entry of done made at some time, due to be forgotten at
// forget.
type memDue struct {
	id     string
	forget time.Time
}

// dueQueue holds entries of done in the order they were made, from head.
type dueQueue struct {
	q    []memDue
	head int
}

// forget drops from done the entries of q due at now that done still
// holds as they were queued. Once most of q is forgotten the rest moves to
// its start, or to a smaller array when it fills under a quarter of q's
// room (after a burst), which is given back.
func (q *dueQueue) forget(done map[string]memDone, now time.Time) {
	for q.head < len(q.q) && !q.q[q.head].forget.After(now) {
		e := q.q[q.head]
		if d, ok := done[e.id]; ok && d.forget.Equal(e.forget) {
			delete(done, e.id)
		}
		q.q[q.head] = memDue{}
		q.head++
	}
	if q.head > 64 && q.head > len(q.q)/2 {
		rest := q.q[q.head:]
		if len(rest) < cap(q.q)/4 {
			q.q = append(make([]memDue, 0, 2*len(rest)), rest...)
		} else {
			q.q = append(q.q[:0], rest...)
		}
		q.head = 0
	}
}

// memSettleMemory is how long a MemoryBudgeter remembers a reservation
// settled in time (SettleMemory for one that lapsed): in process, no reply
// of a Settle is lost on the way, so a repeat comes at once if at all, and
// an hour of settled calls (millions at a gateway's rate) would be held in
// memory for nothing.
const memSettleMemory = time.Minute

// NewMemoryBudgeter returns an empty MemoryBudgeter.
func NewMemoryBudgeter() *MemoryBudgeter {
	return &MemoryBudgeter{m: map[string]*memLedger{}, now: time.Now, sweepAt: minSweep}
}

// live returns the ledger of key unless it is absent or has expired at
// now (then it is dropped).
func (b *MemoryBudgeter) live(key string, now time.Time) *memLedger {
	l := b.m[key]
	if l != nil && !l.expires.IsZero() && !now.Before(l.expires) {
		delete(b.m, key)
		return nil
	}
	return l
}

// get returns the live ledger of key, a new one when there is none; adding
// one sweeps the expired ledgers once the map has doubled since the last
// sweep.
func (b *MemoryBudgeter) get(key string, now time.Time) *memLedger {
	l := b.live(key, now)
	if l == nil {
		l = &memLedger{res: map[string]memReservation{}, done: map[string]memDone{}}
		b.m[key] = l
		if len(b.m) >= b.sweepAt {
			for k := range b.m {
				b.live(k, now)
			}
			b.sweepAt = max(2*len(b.m), minSweep)
		}
	}
	return l
}

// keep sets when l expires: ttl from now, never when ttl is not positive.
func (l *memLedger) keep(now time.Time, ttl time.Duration) {
	l.expires = time.Time{}
	if ttl > 0 {
		l.expires = now.Add(ttl)
	}
}

// charge adds c to l.
func (l *memLedger) charge(c Ledger) {
	l.InputTokens = SaturatingAdd(l.InputTokens, c.InputTokens)
	l.OutputTokens = SaturatingAdd(l.OutputTokens, c.OutputTokens)
	if c.USD > 0 && !math.IsInf(c.USD, 0) {
		l.USD += c.USD
	} else if math.IsInf(c.USD, 1) {
		l.USD = math.MaxFloat64
	}
	l.Calls = SaturatingAdd(l.Calls, c.Calls)
}

// lapse charges the reservations of l whose lease has ended their hold
// and forgets the reservations settled memSettleMemory ago and those
// lapsed SettleMemory ago.
func (l *memLedger) lapse(now time.Time) {
	l.settled.forget(l.done, now)
	l.lapsed.forget(l.done, now)
	if l.peak > 1024 && len(l.done) < l.peak/4 {
		done := make(map[string]memDone, len(l.done))
		for id, d := range l.done {
			done[id] = d
		}
		l.done = done
		l.peak = len(l.done)
	}
	for id, r := range l.res {
		if !r.until.After(now) {
			delete(l.res, id)
			hold := Hold(&r.est)
			l.charge(hold)
			d := memDone{hold: hold, forget: now.Add(SettleMemory)}
			l.done[id] = d
			l.lapsed.q = append(l.lapsed.q, memDue{id: id, forget: d.forget})
		}
	}
	l.peak = max(l.peak, len(l.done))
}

// pending lapses the reservations of l whose lease has ended and returns
// the live ones' count and estimates.
func (l *memLedger) pending(now time.Time) Ledger {
	l.lapse(now)
	var p Ledger
	for _, r := range l.res {
		p.Calls++
		p.InputTokens = SaturatingAdd(p.InputTokens, r.est.Tokens())
		p.USD += r.est.USD
	}
	return p
}

// Reserve implements Budgeter.
func (b *MemoryBudgeter) Reserve(_ context.Context, key, id string, lim BudgetLimits, ttl time.Duration) (*BudgetError, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	l := b.get(key, now)
	if e := CheckBudget(l.Ledger, l.pending(now), lim); e != nil {
		return e, nil
	}
	l.keep(now, ttl)
	r := memReservation{until: now.Add(lim.LeaseOf())}
	if est := lim.Estimate; est != nil {
		r.est = Ledger{InputTokens: max(est.Tokens(), 0), USD: max(est.USD, 0)}
	}
	l.res[id] = r
	delete(l.done, id)
	return nil, nil
}

// RenewReservation implements Budgeter.
func (b *MemoryBudgeter) RenewReservation(_ context.Context, key, id string, lease time.Duration) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	l := b.live(key, now)
	if l == nil {
		return false, nil
	}
	r, ok := l.res[id]
	if !ok || !r.until.After(now) {
		return false, nil
	}
	r.until = now.Add(lease)
	l.res[id] = r
	return true, nil
}

// Settle implements Budgeter.
func (b *MemoryBudgeter) Settle(_ context.Context, key, id string, c Ledger, ttl time.Duration) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	l := b.get(key, now)
	l.keep(now, ttl)
	l.lapse(now)
	if id != "" {
		d, seen := l.done[id]
		switch {
		case seen && d.hold == (Ledger{}):
			return nil // settled already
		case seen:
			c = c.Beyond(d.hold) // lapsed: its hold is charged
		}
		delete(l.res, id)
		forget := now.Add(memSettleMemory)
		l.done[id] = memDone{forget: forget}
		l.settled.q = append(l.settled.q, memDue{id: id, forget: forget})
		l.peak = max(l.peak, len(l.done))
	}
	l.charge(c)
	return nil
}

// LedgerOf implements Budgeter.
func (b *MemoryBudgeter) LedgerOf(_ context.Context, key string) (Ledger, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if l := b.live(key, now); l != nil {
		l.lapse(now)
		return l.Ledger, nil
	}
	return Ledger{}, nil
}

// ForgetLedger implements Budgeter.
func (b *MemoryBudgeter) ForgetLedger(_ context.Context, key string) error {
	b.mu.Lock()
	delete(b.m, key)
	b.mu.Unlock()
	return nil
}

// KVLeaser is the Leaser of a store that offers only KV (SQLite, a KV given
// in Deps): a JSON record per key, claimed with SetIfAbsent. Acquiring a
// free key and taking over an expired lease are atomic (each is one
// SetIfAbsent: a takeover first claims a marker named after the expired
// token); a record that does not decode is in doubt, and a takeover
// replaces it. Publish claims the same marker before it writes the
// outcome, so that a takeover and the holder's outcome never overwrite
// each other: the first to claim it ends the claim (a holder that dies
// between the two leaves the claim held until its record expires). Renew
// and Release read the record and then write it, so a holder fenced out
// in the instant between the two can still overwrite its successor. Backends with scripts or transactions implement Leaser
// natively instead.
type KVLeaser struct {
	KV   KV
	now  func() time.Time
	last atomic.Int64
}

// token returns a fencing token above after and every token this leaser
// issued: the clock in nanoseconds, so tokens also grow across processes
// and restarts.
func (l *KVLeaser) token(after int64) int64 {
	for {
		last := l.last.Load()
		t := max(l.now().UnixNano(), last+1, after+1)
		if l.last.CompareAndSwap(last, t) {
			return t
		}
	}
}

// NewKVLeaser returns the Leaser over kv.
func NewKVLeaser(kv KV) *KVLeaser { return &KVLeaser{KV: kv, now: time.Now} }

// leaseRecord is the KVLeaser record of a key.
type leaseRecord struct {
	// State is "pending" (claimed) or "done".
	State string `json:"state"`
	// Token is the holder's fencing token.
	Token int64 `json:"token,omitempty"`
	// Until is when the holder's lease ends (Unix nanoseconds).
	Until int64 `json:"until,omitempty"`
	// Keep is how long the record lives (nanoseconds), kept for Renew.
	Keep int64 `json:"keep,omitempty"`
	// Owner is the nonce of the attempt that made the claim (AcquireAs).
	Owner string `json:"owner,omitempty"`
	// Note is the claim's note (AcquireAs).
	Note   []byte          `json:"note,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
}

func (l *KVLeaser) read(ctx context.Context, key string) (leaseRecord, bool, error) {
	b, ok, err := l.KV.Get(ctx, key)
	if err != nil || !ok {
		return leaseRecord{}, false, err
	}
	var r leaseRecord
	err = json.Unmarshal(b, &r)
	if err == nil && r.State != "pending" && r.State != "done" {
		err = fmt.Errorf("state %q is neither pending nor done", r.State)
	}
	if err != nil {
		return leaseRecord{}, true, fmt.Errorf("lease record of %s does not decode: %w", key, err)
	}
	return r, true, nil
}

// claimLife is how long a claim record lives: keep, but never less than
// its lease, so a claim that outlives keep while renewed is not dropped
// and claimed again (0: forever).
func claimLife(lease, keep time.Duration) time.Duration {
	if keep <= 0 {
		return 0
	}
	return max(keep, lease)
}

func (l *KVLeaser) claim(token int64, lease, keep time.Duration, owner string, note []byte) []byte {
	b, _ := json.Marshal(leaseRecord{State: "pending", Token: token, Until: l.now().Add(lease).UnixNano(), Keep: int64(keep), Owner: owner, Note: note})
	return b
}

// Acquire implements Leaser.
func (l *KVLeaser) Acquire(ctx context.Context, key string, lease, keep time.Duration, takeover bool) (LeaseGrant, error) {
	return l.AcquireAs(ctx, key, "", nil, lease, keep, takeover)
}

// AcquireAs implements Leaser. Finding its own claim is a read and then a
// write, like Renew.
func (l *KVLeaser) AcquireAs(ctx context.Context, key, owner string, note []byte, lease, keep time.Duration, takeover bool) (LeaseGrant, error) {
	for {
		r, found, err := l.read(ctx, key)
		if err != nil {
			if !found {
				return LeaseGrant{}, err
			}
			// A record that does not decode (written by another build, or
			// damaged) may be the claim of a call that ran: in doubt, as
			// an expired claim is, until it expires. A takeover replaces
			// it.
			if !takeover {
				return LeaseGrant{Status: LeaseInDoubt, Unreadable: errors.Unwrap(err)}, nil
			}
			if err := l.KV.Delete(ctx, key); err != nil {
				return LeaseGrant{}, err
			}
			tok := l.token(0)
			ok, err := l.KV.SetIfAbsent(ctx, key, l.claim(tok, lease, keep, owner, note), claimLife(lease, keep))
			if err != nil {
				return LeaseGrant{}, err
			}
			if ok {
				return LeaseGrant{Status: LeaseAcquired, Token: tok, InDoubt: true}, nil
			}
			continue
		}
		if !found {
			tok := l.token(0)
			ok, err := l.KV.SetIfAbsent(ctx, key, l.claim(tok, lease, keep, owner, note), claimLife(lease, keep))
			if err != nil {
				return LeaseGrant{}, err
			}
			if ok {
				return LeaseGrant{Status: LeaseAcquired, Token: tok}, nil
			}
			continue
		}
		if r.State == "done" {
			return LeaseGrant{Status: LeaseDone, Result: r.Result}, nil
		}
		if owner != "" && r.Owner == owner {
			if err := l.KV.Set(ctx, key, l.claim(r.Token, lease, keep, owner, r.Note), claimLife(lease, keep)); err != nil {
				return LeaseGrant{}, err
			}
			return LeaseGrant{Status: LeaseAcquired, Token: r.Token}, nil
		}
		if rem := time.Unix(0, r.Until).Sub(l.now()); rem > 0 {
			return LeaseGrant{Status: LeaseHeld, Remaining: rem, Note: r.Note}, nil
		}
		if !takeover || len(r.Note) > 0 && !bytes.Equal(r.Note, note) {
			return LeaseGrant{Status: LeaseInDoubt, Note: r.Note}, nil
		}
		marker := takeoverMarker(key, r.Token)
		won, err := l.KV.SetIfAbsent(ctx, marker, nil, keep)
		if err != nil {
			return LeaseGrant{}, err
		}
		if !won {
			// Another caller (another replica) won the race to take the
			// claim over, or its holder is publishing its outcome: its
			// claim, or the outcome, is answered as any found is (held,
			// with its note). Until it is written the claim is held,
			// with r's note, which is the note a takeover of r claims
			// with when r has one.
			now, found, err := l.read(ctx, key)
			if err != nil && !found {
				return LeaseGrant{}, err
			}
			if err == nil && now.State == "pending" && now.Token == r.Token {
				return LeaseGrant{Status: LeaseHeld, Remaining: lease, Note: r.Note}, nil
			}
			continue
		}
		tok := l.token(r.Token)
		if err := l.KV.Set(ctx, key, l.claim(tok, lease, keep, owner, note), claimLife(lease, keep)); err != nil {
			return LeaseGrant{}, err
		}
		return LeaseGrant{Status: LeaseAcquired, Token: tok, InDoubt: true}, nil
	}
}

// takeoverMarker is the key whose claim (SetIfAbsent) ends the claim of
// key under token: by a takeover (an empty value) or by its holder's
// Publish (publishMark). Whichever claims it first is the only one that
// writes over the claim, so that neither overwrites the other.
func takeoverMarker(key string, token int64) string {
	return fmt.Sprintf("%s#takeover#%d", key, token)
}

// publishMark is the value of a takeover marker its holder's Publish
// claimed.
var publishMark = []byte("publish")

// held reads key and reports whether token holds its lease, and the
// record.
func (l *KVLeaser) held(ctx context.Context, key string, token int64) (bool, leaseRecord, error) {
	r, found, err := l.read(ctx, key)
	if err != nil && found {
		return false, r, nil
	}
	if err != nil {
		return false, r, err
	}
	return found && r.State == "pending" && r.Token == token, r, nil
}

// Renew implements Leaser.
func (l *KVLeaser) Renew(ctx context.Context, key string, token int64, lease time.Duration) (bool, error) {
	ok, r, err := l.held(ctx, key, token)
	if err != nil || !ok {
		return false, err
	}
	keep := time.Duration(r.Keep)
	return true, l.KV.Set(ctx, key, l.claim(token, lease, keep, r.Owner, r.Note), claimLife(lease, keep))
}

// Publish implements Leaser.
func (l *KVLeaser) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	ok, r, err := l.held(ctx, key, token)
	if err != nil {
		return false, err
	}
	if !ok {
		// Published by this token already: a repeat whose first answer
		// was lost.
		return r.State == "done" && r.Token == token && token != 0, nil
	}
	// The claim is ended by its outcome or by a takeover, whichever first
	// claims the marker a takeover claims: a replica taking it over
	// writes its claim unconditionally once it holds the marker, which
	// would overwrite an outcome written since it read the claim.
	marker := takeoverMarker(key, token)
	won, err := l.KV.SetIfAbsent(ctx, marker, publishMark, keep)
	if err != nil {
		return false, err
	}
	if !won {
		// Ours when an earlier Publish of this token claimed it and did
		// not get to write (an error, a lost answer); else a replica took
		// the claim over: fenced out.
		v, found, err := l.KV.Get(ctx, marker)
		if err != nil {
			return false, err
		}
		if !found || !bytes.Equal(v, publishMark) {
			return false, nil
		}
	}
	b, err := json.Marshal(leaseRecord{State: "done", Token: token, Result: result})
	if err != nil {
		return false, err
	}
	return true, l.KV.Set(ctx, key, b, keep)
}

// Doubt implements Leaser: the claim stays, its lease ended (Until 0, so
// that it has ended for every process whatever its clock) and its owner
// cleared.
func (l *KVLeaser) Doubt(ctx context.Context, key string, token int64, keep time.Duration) (bool, error) {
	ok, r, err := l.held(ctx, key, token)
	if err != nil || !ok {
		return false, err
	}
	b, _ := json.Marshal(leaseRecord{State: "pending", Token: token, Keep: int64(keep), Note: r.Note}) // cannot fail
	return true, l.KV.Set(ctx, key, b, claimLife(0, keep))
}

// Release implements Leaser.
func (l *KVLeaser) Release(ctx context.Context, key string, token int64) error {
	ok, _, err := l.held(ctx, key, token)
	if err != nil || !ok {
		return err
	}
	return l.KV.Delete(ctx, key)
}

var (
	_ Leaser      = (*KVLeaser)(nil)
	_ RateLimiter = (*MemoryRateLimiter)(nil)
	_ Budgeter    = (*MemoryBudgeter)(nil)
)
