package meter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "meter"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageChat, plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitRecords, runtime.TraitCountsTokens, runtime.TraitShortCircuits},
		// Each meter keeps its own ledgers (their keys hold its name): two
		// meters that differ in scope, window or store are two budgets.
		DistinctBy: []string{"scope", "window", "store"},
		Doc:        "records usage and cost and refuses calls once a budget ceiling is reached",
		New: func() runtime.Middleware {
			return &Meter{Scope: "run", OnError: "closed", OnCross: "allow", Lease: runtime.Duration(runtime.DefaultReservationLease)}
		},
	})
}

// Budget holds the ceilings; nil fields are unlimited.
type Budget struct {
	Tokens *int64   `json:"tokens,omitempty"`
	USD    *float64 `json:"usd,omitempty"`
	Calls  *int64   `json:"calls,omitempty"`
}

// Meter is the meter middleware; its exported fields are its config
// (schemas/meter.cue).
type Meter struct {
	Budget *Budget `json:"budget,omitempty"`
	Scope  string  `json:"scope"`
	// Store names the policy store that holds the ledgers; empty keeps
	// them in this process.
	Store string `json:"store,omitempty"`
	// OnError decides what a call that reports absurd usage does: "closed"
	// fails it and charges the ledger to the limit; "open" charges
	// MaxCallTokens for each absurd count and lets it pass.
	OnError string `json:"on_error"`
	// OnCross decides what a model call that would cross the tokens or usd
	// ceiling does: "allow" runs it and charges it in full; "refuse"
	// refuses it before it runs (a *runtime.BudgetError with Estimate set).
	OnCross string `json:"on_cross"`
	// Lease is how long the reservation of a call without a deadline
	// counts when it is never settled (runtime.DefaultReservationLease by
	// default); a call with a deadline holds it until the deadline and
	// leaseGrace after.
	Lease runtime.Duration `json:"lease,omitempty"`
	// Window, when set, starts the ledgers afresh at each window's
	// start: a duration of whole seconds (every span of it from the Unix
	// epoch, in UTC) or "month" (each calendar month in UTC). Empty keeps
	// a tenant's and the process's ledgers for good.
	Window string `json:"window,omitempty"`

	name   string
	prefix string
	win    window
	rates  map[string]plan.Model
	// served holds the names of the models a client serves (the build's
	// models, BuildContext.Models): only those can cost anything.
	served map[string]bool
	// below are the models the fallback and hedge layers inside the meter
	// send a call to in place of the one it names (reachable).
	below []string
	// replaces is set when a fallback or hedge layer inside the meter
	// always sends a call to its own models (replacesModel).
	replaces bool
	// calls is the most model calls the layers inside the meter make for
	// one call (plan.ModelCalls: retry attempts times fallback and hedge
	// models): with on_cross "refuse" a call reserves its estimate that
	// many times.
	calls int
	// bounds are the output bounds of the models, by name (outputBounds).
	bounds map[string]int64
	// format is the response format an output_coerce inside the meter
	// sets on a request without one (responseFormat); nil for none.
	format *runtime.ResponseFormat
	logger *slog.Logger
	clock  runtime.Clock
	// times reads the time a call's window is chosen by: the ledger
	// store's with a window in a store that tells it (storeTime).
	times   storeTime
	budgets runtime.Budgeter
	// shared is set when the ledgers are in a store other processes may
	// share: a run's ledger there is left to expire, never dropped.
	shared bool
	// renewals holds the reservations of the calls in flight (hold).
	renewals renewals
	// resends holds the settlements waiting to be sent again, shared
	// with the other meters of the process on the same ledger store
	// (joinResends); nil with the ledgers in process memory.
	resends *resends
	// left is set once Cleanup has left resends.
	left atomic.Bool
	// lost and unconfirmed count the meter's settlements given up on
	// (resendLost) and those whose outcome the close did not wait for
	// (resendUnconfirmed); open counts those in resends, waiting or
	// being sent, and those the close stopped waiting for, until each
	// ends (Done).
	lost, unconfirmed, open atomic.Int64
	// tally, when set (CountInto), is added each count as well; countMu
	// guards it, and orders its setting with the counts.
	countMu sync.Mutex
	tally   *Tally
	// tenants maps the runs seen to their tenant (scope "key"), until
	// they end.
	tenants sync.Map
	// ephemeral holds the runs seen that cannot continue
	// (runtime.Run.Ephemeral) whose ledgers are in a shared store (scope
	// "run"), until they end: their ledgers are dropped then (Forget).
	ephemeral sync.Map
	// windows maps the runs seen whose ledgers are dropped when they end
	// (scope "run" with a window: in process memory, or of a run that
	// cannot continue) to the keys of the windows they were charged in
	// (*runWindows), until they end (Forget).
	windows sync.Map
}

// runWindows are the window ledgers a run was charged in whose ledgers
// may still be kept: one whose window ended windowKeep ago has expired
// (ttl), unless a settlement sent again since (within
// runtime.SettleMemory, windowKeep) kept it up to windowKeep more; one
// that ended twice windowKeep ago is noted no more, so that a run that
// goes on for long holds a bounded few.
type runWindows struct {
	mu   sync.Mutex
	refs []ledgerRef
}

// add notes ref, once, at now, leaving out the windows expired by then.
func (w *runWindows) add(ref ledgerRef, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.refs); n > 0 && w.refs[n-1].key == ref.key {
		return
	}
	w.refs = slices.DeleteFunc(w.refs, func(r ledgerRef) bool {
		return r.key == ref.key || !now.Before(r.end.Add(2*windowKeep))
	})
	w.refs = append(w.refs, ref)
}

// keys returns the keys of the ledgers noted.
func (w *runWindows) keys() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys := make([]string, len(w.refs))
	for i, r := range w.refs {
		keys[i] = r.key
	}
	return keys
}

// MaxCallTokens is the most tokens of one kind (input, output, cached,
// reasoning) a single call may report. More is absurd usage: a provider or
// proxy bug, or a hostile upstream. No model reads or writes a billion tokens
// in one call.
const MaxCallTokens int64 = 1_000_000_000

// runLedgerTTL is how long a shared ledger of scope "run" outlives its last
// call when the run is never ended.
const runLedgerTTL = 24 * time.Hour

// Provision records the model rates and resolves the ledgers.
func (m *Meter) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.prefix = keyPrefix(b.Stage, m.name)
	w, err := parseWindow(m.Window)
	if err != nil {
		return err
	}
	m.win = w
	m.rates = b.Plan.Models
	m.served = map[string]bool{}
	for name, c := range b.Models() {
		m.served[name] = c != nil
	}
	m.bounds = outputBounds(b.Plan.Models, b.Models())
	inside := b.Plan.Chains.Of(b.Stage)[b.Index+1:]
	m.below = reachable(inside)
	m.replaces = replacesModel(inside)
	m.calls = plan.ModelCalls(inside)
	m.format = responseFormat(inside)
	m.logger = b.Logger
	m.clock = b.Clock()
	m.warnUnpriced(b)
	bg, err := b.Budgeter(m.Store)
	if err != nil {
		return err
	}
	if setting := runtime.Evicts(bg, false); setting != "" {
		return fmt.Errorf("store %q evicts keys under memory pressure (%s): a ledger it evicts starts afresh, and its budget is spent again; set maxmemory-policy noeviction on the server, or keep the ledgers in another store",
			m.Store, setting)
	}
	m.budgets = bg
	m.shared = !runtime.InProcess(bg)
	if m.shared {
		m.resends = joinResends(bg)
	}
	m.times = storeTime{clock: m.clock}
	if sc, ok := bg.(runtime.StoreClock); ok && m.shared && m.win.on() {
		m.times.store = sc
	}
	return nil
}

// Validate checks the scope.
func (m *Meter) Validate() error {
	if m.Scope != "run" && m.Scope != "global" && m.Scope != "key" {
		return fmt.Errorf(`scope must be "run", "global" or "key", got %q`, m.Scope)
	}
	if m.OnError != "closed" && m.OnError != "open" {
		return fmt.Errorf(`on_error must be "closed" or "open", got %q`, m.OnError)
	}
	if m.OnCross != "allow" && m.OnCross != "refuse" {
		return fmt.Errorf(`on_cross must be "allow" or "refuse", got %q`, m.OnCross)
	}
	if m.Lease <= 0 {
		return fmt.Errorf("lease must be positive, got %s", m.Lease.D())
	}
	_, err := parseWindow(m.Window)
	return err
}

// keyPrefix is the start of the ledger keys of the meter named name in the
// stage's chain.
func keyPrefix(stage plan.Stage, name string) string {
	return "agentc/meter/" + string(stage) + "/" + name + "/"
}

// StateKeys implements runtime.StateKeyer: the ledger of the sample run
// (in the window that starts at the Unix epoch, so that only a change of
// the window itself moves the key).
func (m *Meter) StateKeys(at runtime.StateSite) []runtime.StateKey {
	m.prefix = keyPrefix(at.Stage, at.Name())
	m.win, _ = parseWindow(m.Window)
	return []runtime.StateKey{{Store: m.Store, Key: m.key(at.Run(), time.Unix(0, 0)).key, What: "budget ledgers",
		Then: "what was spent before the change no longer counts against the budget"}}
}

// ledgerRef is the ledger a call is charged to: its key, and the end of
// its window (zero without a window). A call's reservation, renewals and
// settlement all address the ledger of the window it was admitted in.
type ledgerRef struct {
	key string
	end time.Time
}

// key returns the ledger of run at t: its own (scope "run"), its tenant's
// (scope "key": the caller's key) or the process's (scope "global"); with
// a window, that of the window t falls in, whose key holds the window's
// length and start.
func (m *Meter) key(run runtime.Run, t time.Time) ledgerRef {
	var ref ledgerRef
	k := m.prefix
	if m.win.on() {
		var start time.Time
		start, ref.end = m.win.at(t)
		k += "window/" + m.win.label() + "/" + strconv.FormatInt(start.Unix(), 10) + "/"
	}
	switch m.Scope {
	case "global":
		k += "global"
	case "key":
		k += "key/" + run.Tenant
	default:
		k += "run/" + run.ID
	}
	ref.key = k
	return ref
}

// keyOf returns the ledger a call of run is charged to, its window read
// on the store's clock (storeTime), noting the run's tenant (scope "key")
// so that Ledger finds it by the run's id. A store whose time cannot be
// read fails the call closed, as its reservation would.
func (m *Meter) keyOf(ctx context.Context, run runtime.Run) (ledgerRef, error) {
	if m.Scope == "key" && run.ID != "" {
		m.tenants.Store(run.ID, run.Tenant)
	}
	if m.Scope == "run" && m.shared && run.Ephemeral {
		m.ephemeral.Store(run.ID, struct{}{})
	}
	now, err := m.times.now(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ledgerRef{}, runtime.NotRun(ctx.Err()) // before the call: it did not run
		}
		return ledgerRef{}, runtime.StoreRefusal(m.name, "budget store unavailable; the call did not run", err)
	}
	ref := m.key(run, now)
	if m.Scope == "run" && m.win.on() && run.ID != "" && (!m.shared || run.Ephemeral) {
		w, _ := m.windows.LoadOrStore(run.ID, &runWindows{})
		w.(*runWindows).add(ref, now)
	}
	return ref, nil
}

// windowKeep is how long a window's ledger is kept after the window
// ends: a settlement of one of its calls sent again within
// runtime.SettleMemory still finds it.
const windowKeep = runtime.SettleMemory

// ttl is how long an idle ledger ref is kept: a window's until windowKeep
// after the window ends (a run's at most runLedgerTTL after its last
// call); without a window, a run's in a shared store for runLedgerTTL, a
// run's in process memory until the run ends (Forget), a tenant's and the
// process's for good.
func (m *Meter) ttl(ref ledgerRef) time.Duration {
	if ref.end.IsZero() {
		if m.Scope == "run" && m.shared {
			return runLedgerTTL
		}
		return 0
	}
	t := max(ref.end.Sub(m.times.last()), 0) + windowKeep
	if m.Scope == "run" {
		t = min(t, runLedgerTTL)
	}
	return t
}

// Ledger implements runtime.LedgerReader: the ledger a call of the run
// charges (with scope "key", its tenant's; a run not seen yet is the
// tenant "" one's). A ledger the store cannot read is logged and reported
// empty.
func (m *Meter) Ledger(runID string) runtime.Ledger {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	run := runtime.Run{ID: runID}
	if t, ok := m.tenants.Load(runID); ok {
		run.Tenant = t.(string)
	}
	l, err := m.budgets.LedgerOf(ctx, m.key(run, m.times.last()).key)
	if err != nil {
		m.logger.Warn("meter: reading the ledger failed", "error", err)
	}
	return l
}

// Forget drops the ledger of a finished run (scope "run"), with a window
// those of every window the run was charged in; with scope
// "key" it forgets only which tenant the run was, the tenant's ledger
// stays. A ledger in a store other processes may share is kept until it
// expires (runLedgerTTL after the run's last call): the run this process
// saw end, or go idle, may still be running on another replica, and
// dropping its ledger would give it its whole budget again. Only that of a
// run that cannot continue (runtime.Run.Ephemeral: no replica can serve it
// again) is dropped there too.
func (m *Meter) Forget(runID string) {
	if m.Scope == "key" {
		m.tenants.Delete(runID)
	}
	if m.Scope != "run" {
		return
	}
	w, _ := m.windows.LoadAndDelete(runID)
	if _, ended := m.ephemeral.LoadAndDelete(runID); m.shared && !ended {
		return
	}
	keys := []string{m.key(runtime.Run{ID: runID}, m.times.last()).key}
	if w != nil {
		for _, k := range w.(*runWindows).keys() {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		if err := m.budgets.ForgetLedger(context.Background(), k); err != nil {
			m.logger.Warn("meter: dropping the ledger of an ended run failed", "run", runID, "error", err)
		}
	}
}

// EndRun implements runtime.RunEnder: it forgets the run's ledger.
func (m *Meter) EndRun(runID string) { m.Forget(runID) }

// leaseGrace is how long a reservation of a call with a deadline outlives
// it: the time its process takes to settle once the call ended.
const leaseGrace = 30 * time.Second

// lease returns how long the reservation of a call under ctx counts when
// it is never settled: until the call's deadline and leaseGrace after it
// (leaseGrace from now once the deadline has passed), else the meter's
// lease. While the call runs its reservation is renewed (hold).
func (m *Meter) lease(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), 0) + leaseGrace
	}
	if m.Lease > 0 {
		return m.Lease.D()
	}
	return runtime.DefaultReservationLease
}

// inProcessLease is the lease of a reservation in process memory: it holds
// until its call settles. Only a crash could leave it unsettled, and a
// crash takes the memory with it, so it needs neither an end nor renewals
// (which, on a virtual clock, would be timers of their own).
const inProcessLease = 100 * 365 * 24 * time.Hour

// reservationLease is the lease a call under ctx reserves with: lease, or
// inProcessLease for a ledger in process memory.
func (m *Meter) reservationLease(ctx context.Context) time.Duration {
	if !m.shared {
		return inProcessLease
	}
	return m.lease(ctx)
}

// renewEvery is how often the meter's renewal timer looks at the calls in
// flight: every third of the meter's lease and at least every third of
// leaseGrace. Each call's reservation is renewed every third of its own
// lease (due), so that two renewals may fail before it lapses: for a call
// with a deadline that extends it only once the call has overrun it.
func (m *Meter) renewEvery() time.Duration {
	return max(min(m.lease(context.Background()), leaseGrace)/3, time.Millisecond)
}

// holding is a call in flight whose reservation the meter renews.
type holding struct {
	ctx     context.Context
	key, id string
	// due is when its reservation is next renewed: a third of its lease
	// after it was reserved or last renewed.
	due time.Time
}

// renewals are the meter's calls in flight and its one renewal timer.
type renewals struct {
	mu    sync.Mutex
	live  map[*holding]struct{}
	armed bool
}

// hold renews the reservation id of the ledger key in a shared store
// (one in process memory needs none: inProcessLease) while the call under
// ctx runs, until the returned release is called (before the call
// settles). One timer on the pipeline's clock serves every call of the
// meter: it is set when a call starts and none is set, and renews the
// reservations of the calls still running when it fires (a call shorter
// than renewEvery costs no renewal, and starting one sets no timer while
// another runs). A renewal that fails is logged and tried again at the
// next tick; a reservation found no longer live (the store was out of
// reach for its whole lease) is logged and no longer renewed: by then it
// has been charged its hold (runtime.BudgetLimits.Lease), and its
// settlement adds what it charges beyond that. Without renewals a call
// that ran longer than its lease (a long stream, a slow tool) would lapse
// while it still ran.
func (m *Meter) hold(ctx context.Context, key, id string) (release func()) {
	if id == "" || !m.shared {
		return func() {}
	}
	h := &holding{ctx: ctx, key: key, id: id, due: m.clock.Now().Add(m.lease(ctx) / 3)}
	r := &m.renewals
	r.mu.Lock()
	if r.live == nil {
		r.live = map[*holding]struct{}{}
	}
	r.live[h] = struct{}{}
	m.armLocked()
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.live, h)
		r.mu.Unlock()
	}
}

// armLocked sets the renewal timer when calls are in flight and none is
// set. m.renewals.mu is held.
func (m *Meter) armLocked() {
	r := &m.renewals
	if r.armed || len(r.live) == 0 {
		return
	}
	r.armed = true
	m.clock.AfterFunc(m.renewEvery(), m.renew)
}

// renew renews the reservations of the calls in flight and sets the timer
// again while calls remain.
func (m *Meter) renew() {
	r := &m.renewals
	r.mu.Lock()
	r.armed = false
	now := m.clock.Now()
	calls := make([]*holding, 0, len(r.live))
	for h := range r.live {
		if !now.Before(h.due) {
			calls = append(calls, h)
		}
	}
	r.mu.Unlock()
	for _, h := range calls {
		lease := m.lease(h.ctx)
		ok, err := m.budgets.RenewReservation(context.WithoutCancel(h.ctx), h.key, h.id, lease)
		r.mu.Lock()
		h.due = now.Add(lease / 3)
		if _, running := r.live[h]; running {
			switch {
			case err != nil:
				m.logger.WarnContext(h.ctx, "meter: renewing the call's reservation failed", "error", err)
			case !ok:
				delete(r.live, h)
				m.logger.WarnContext(h.ctx, "meter: the call's reservation lapsed while it ran; it was charged its hold, and the call's own charge beyond it is added when it settles")
			}
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	m.armLocked()
	r.mu.Unlock()
}

// reserve admits a call or refuses it with a *runtime.BudgetError, in one
// atomic step of the ledger store (runtime.Budgeter): a call whose estimate
// (est, nil for none) added to the charged ledger and the estimates of the
// calls in flight would cross the tokens or usd ceiling is refused; the
// tokens and usd ceilings refuse once the charged amount has reached them;
// the calls ceiling refuses once the charged calls plus the calls admitted
// and still running have reached it. An admitted call is reserved, with
// its estimate, until settle or until its lease ends; it returns the
// reservation's id ("" when nothing was reserved: without a budget there
// is nothing to reserve). A store failure fails closed; the reservation,
// which the store may have made all the same (only its answer was lost),
// is released in the background (retrySettle), or else would be charged
// its hold when its lease ends.
func (m *Meter) reserve(ctx context.Context, at ledgerRef, est *runtime.Ledger) (string, error) {
	b := m.Budget
	if b == nil {
		return "", nil
	}
	if n, full := m.resends.full(); full {
		// The store has not taken the settlements of n calls: one more
		// call would add one it may not keep.
		return "", runtime.StoreRefusal(m.name, "budget store unavailable; the call did not run",
			fmt.Errorf("%d settlements wait to be sent again to the ledger store, the most the process keeps", n))
	}
	id := newID()
	refusal, err := m.budgets.Reserve(ctx, at.key, id, runtime.BudgetLimits{Tokens: b.Tokens, USD: b.USD, Calls: b.Calls, Estimate: est,
		Lease: m.reservationLease(ctx)}, m.ttl(at))
	if err != nil {
		m.retrySettle(context.WithoutCancel(ctx), at, id, true, runtime.Ledger{}, m.clock.Now().Add(settleRetryFor), 0)
		if ctx.Err() != nil {
			return "", runtime.NotRun(ctx.Err()) // before the call: it did not run
		}
		return "", runtime.StoreRefusal(m.name, "budget store unavailable; the call did not run", err)
	}
	if refusal != nil {
		if refusal.InFlight() {
			refusal.Held = enclosingHold(ctx, at.key, refusal.Resource)
		}
		refusal.Layer, refusal.Scope = m.name, m.Scope
		if m.shared {
			refusal.Lease = m.lease(context.Background())
		}
		if m.win.on() {
			refusal.Window, refusal.Resets = m.Window, at.end
		}
		return "", refusal
	}
	return id, nil
}

// enclosing is a reservation a call holds while the calls it makes run
// (a tool call whose tool makes tool calls of its own, or runs an agent
// turn that does): in a context, with those of the calls around it.
type enclosing struct {
	up  *enclosing
	key string // the ledger's key
	est runtime.Ledger
}

type enclosingKey struct{}

// withHold returns ctx for the inner layers of a call reserved in the
// ledger key with estimate est (nil for none).
func withHold(ctx context.Context, key string, est *runtime.Ledger) context.Context {
	e := &enclosing{key: key}
	if est != nil {
		e.est = *est
	}
	e.up, _ = ctx.Value(enclosingKey{}).(*enclosing)
	return context.WithValue(ctx, enclosingKey{}, e)
}

// enclosingHold returns what the calls ctx runs within hold in the ledger
// key of resource (runtime.BudgetError.Held): a place each for "calls",
// their estimates for "tokens" and "usd".
func enclosingHold(ctx context.Context, key, resource string) float64 {
	var n float64
	for e, _ := ctx.Value(enclosingKey{}).(*enclosing); e != nil; e = e.up {
		if e.key != key {
			continue
		}
		switch resource {
		case "calls":
			n++
		case "tokens":
			n += float64(e.est.Tokens())
		case "usd":
			n += e.est.USD
		}
	}
	return n
}

// newID returns a reservation id: random, so unique within a ledger.
func newID() string { return strconv.FormatUint(rand.Uint64(), 36) }

// settleRetryFor is how long a settlement the store did not acknowledge
// is sent again: half of runtime.SettleMemory, within which the store
// recognises each repeat (of one it settled, or of a reservation it
// charged as lapsed meanwhile) and charges the call once. An outage of
// the store shorter than that loses no charge of the calls it caught in
// flight.
const settleRetryFor = runtime.SettleMemory / 2

// settleBackoff is the wait before a settlement is sent again the first
// time; it doubles with each failure, up to settleBackoffMax.
const (
	settleBackoff    = 100 * time.Millisecond
	settleBackoffMax = 10 * time.Second
)

// settle drops a call's reservation (id, when reserved) and charges it
// (when charge): usage u at cost usd and one call, in one step. A charge
// without a reservation (no budget) in a shared store gets an id of its
// own, so that it too can be sent again safely. A store failure is logged
// and the settlement sent again in the background (retrySettle); the
// caller does not wait for it.
func (m *Meter) settle(ctx context.Context, at ledgerRef, id string, charge bool, u runtime.Usage, usd float64) {
	if id == "" && !charge {
		return
	}
	var c runtime.Ledger
	if charge {
		c = runtime.Ledger{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, USD: usd, Calls: 1}
	}
	reserved := id != ""
	if !reserved && m.shared {
		id = newID()
	}
	ctx = context.WithoutCancel(ctx)
	if err := m.budgets.Settle(ctx, at.key, id, c, m.ttl(at)); err != nil {
		m.logger.WarnContext(ctx, "meter: settling the call in the ledger store failed; sending it again", "error", err)
		m.retrySettle(ctx, at, id, reserved, c, m.clock.Now().Add(settleRetryFor), settleBackoff)
	}
}

// retrySettle sends the settlement of reservation id (charge c; reserved
// is false for a charge without a reservation) after wait, and again with
// a doubling wait (settleBackoff up to settleBackoffMax) while it fails,
// until the deadline until. The store settles a reservation once, however
// many of these reach it (the answer of one may be what was lost). When
// every attempt failed the reservation is left to lapse: the store
// charges it its hold (one call, and the call's estimate with on_cross
// "refuse") when its lease ends, so the calls ceiling holds and the
// tokens and usd ceilings miss only what the call charged beyond its
// estimate. A settlement past the maxResends waiting on the store is
// given up at once (resendLost: logged and counted); a meter with a
// budget admits no call meanwhile (reserve).
func (m *Meter) retrySettle(ctx context.Context, at ledgerRef, id string, reserved bool, c runtime.Ledger, until time.Time, wait time.Duration) {
	if !m.shared || id == "" {
		return // process memory does not fail
	}
	r := &resend{m: m, ctx: ctx, at: at, id: id, reserved: reserved, charge: c}
	// Counted open before it is added: the close may take it at once.
	m.open.Add(1)
	switch n, ok := m.resends.add(r); {
	case n > 0:
		m.resendLost(r, fmt.Errorf("%d settlements already wait to be sent again to the ledger store, the most the process keeps", n))
		r.ended()
		return
	case !ok:
		m.resendLost(r, errors.New("the meter was closed"))
		r.ended()
		return
	}
	m.resendAfter(r, until, wait)
}

// resendAfter sends r again after wait, and again with a doubling wait
// while it fails, until the deadline until (retrySettle). While it is
// being sent r stays in the resends, marked as sending, so that the
// Cleanup of the store's last meter waits for it rather than let the
// process exit with its outcome unknown. At most maxResending settlements
// of a store are sent at once: one that falls due while as many are being
// sent waits wait again, its attempt not made (it is not a failure), so
// that an outage of the store holds that many round trips at a time, not
// one per settlement waiting.
func (m *Meter) resendAfter(r *resend, until time.Time, wait time.Duration) {
	m.clock.AfterFunc(wait, func() {
		switch m.resends.start(r) {
		case resendTaken:
			return // Cleanup sent it, or gave it up
		case resendBusy:
			if m.clock.Now().Add(max(wait, settleBackoff)).After(until) {
				if m.resends.drop(r) {
					m.resendLost(r, fmt.Errorf("%d settlements were being sent again to the ledger store until its deadline", maxResending))
					r.ended()
					m.resends.recorded()
				}
				return
			}
			m.resendAfter(r, until, max(wait, settleBackoff))
			return
		}
		err := m.budgets.Settle(r.ctx, r.at.key, r.id, r.charge, m.ttl(r.at))
		next := min(max(2*wait, settleBackoff), settleBackoffMax)
		again := err != nil && !m.clock.Now().Add(next).After(until)
		held, queued := m.resends.end(r, again)
		if queued {
			m.resendAfter(r, until, next)
			return
		}
		switch {
		case !held: // the close stopped waiting for it
			m.resendEndedLate(r, err)
		case err != nil:
			m.resendLost(r, err)
		}
		r.ended()
		if held {
			m.resends.recorded()
		}
	})
}

// LostSettlements returns how many settlements of the meter's calls it
// gave up on: the store did not take them within settleRetryFor, or by
// the close of the last pipeline using it, or maxResends others were
// waiting already. Each was logged with its charge. A meter counts its
// own (a host that builds several pipelines sums theirs, CountInto), and
// goes on counting after its pipeline closed while a later pipeline on
// the same store sends its settlements again (Done), or a call still
// running at the close settles.
func (m *Meter) LostSettlements() int64 { return m.lost.Load() }

// UnconfirmedSettlements returns how many settlements of the meter's
// calls were still being sent when the close of the last pipeline using
// their store stopped waiting for them: each was logged with its charge,
// and may have reached the store. One whose send then fails (while the
// process still runs) is counted lost too; one that lands is logged so.
func (m *Meter) UnconfirmedSettlements() int64 { return m.unconfirmed.Load() }

// Done reports whether the meter was cleaned up and none of its
// settlements waits or is being sent: its counts (LostSettlements,
// UnconfirmedSettlements) change no more, unless a call that was still
// running when its pipeline closed (Pipeline.Close does not wait for the
// calls in flight) settles afterwards. A host that sums the counts of the
// meters it built has them added as they happen (CountInto) rather than
// reading a meter until it is done.
func (m *Meter) Done() bool {
	return m.resends == nil || m.left.Load() && m.open.Load() == 0
}

// Tally sums the settlement counts of the meters counted into it
// (CountInto): a host that builds pipelines again and again (a reload)
// keeps one Tally, not the meters. Its counts never go down.
type Tally struct{ lost, unconfirmed atomic.Int64 }

// Lost returns the sum of the meters' LostSettlements.
func (t *Tally) Lost() int64 { return t.lost.Load() }

// Unconfirmed returns the sum of the meters' UnconfirmedSettlements.
func (t *Tally) Unconfirmed() int64 { return t.unconfirmed.Load() }

// CountInto adds the meter's counts so far to t, and each later one as it
// is made, whenever that is (after the meter's close too). Given another
// Tally later, the meter counts into that one instead (its counts so far
// added to it as well).
func (m *Meter) CountInto(t *Tally) {
	m.countMu.Lock()
	defer m.countMu.Unlock()
	t.lost.Add(m.lost.Load())
	t.unconfirmed.Add(m.unconfirmed.Load())
	m.tally = t
}

// count adds one to n, the meter's lost or unconfirmed count, and to
// the same count of its tally (CountInto); it returns the meter's.
func (m *Meter) count(n *atomic.Int64, ofTally func(*Tally) *atomic.Int64) int64 {
	m.countMu.Lock()
	defer m.countMu.Unlock()
	if m.tally != nil {
		ofTally(m.tally).Add(1)
	}
	return n.Add(1)
}

// resendLost logs and counts a settlement given up on.
func (m *Meter) resendLost(r *resend, err error) {
	lost := m.count(&m.lost, func(t *Tally) *atomic.Int64 { return &t.lost })
	then := "the call's reservation is charged its hold when its lease ends"
	if !r.reserved {
		then = "the call's charge is lost"
	}
	m.logger.ErrorContext(r.ctx, "meter: the ledger store stayed out of reach; "+then,
		"error", err, "charge_usd", r.charge.USD, "charge_tokens", r.charge.Tokens(), "lost_settlements", lost)
}

// resendUnconfirmed logs and counts a settlement still being sent when
// the close stopped waiting for it: its outcome is not known.
func (m *Meter) resendUnconfirmed(r *resend, err error) {
	n := m.count(&m.unconfirmed, func(t *Tally) *atomic.Int64 { return &t.unconfirmed })
	m.logger.WarnContext(r.ctx, "meter: the close stopped waiting for a settlement being sent to the ledger store; it is unconfirmed: the store may have taken it",
		"error", err, "charge_usd", r.charge.USD, "charge_tokens", r.charge.Tokens(), "unconfirmed_settlements", n)
}

// resendEndedLate records the outcome of a settlement the close had
// stopped waiting for (resendUnconfirmed): lost when its send failed.
func (m *Meter) resendEndedLate(r *resend, err error) {
	if err != nil {
		m.resendLost(r, err)
		return
	}
	m.logger.InfoContext(r.ctx, "meter: an unconfirmed settlement reached the ledger store after the close",
		"charge_usd", r.charge.USD, "charge_tokens", r.charge.Tokens())
}

// resend is a settlement waiting to be sent again (retrySettle).
type resend struct {
	m        *Meter // whose settlement it is
	ctx      context.Context
	at       ledgerRef
	id       string
	reserved bool // id is the call's reservation's
	charge   runtime.Ledger
	// sending is set while a timer sends it (resendAfter); resends.mu
	// guards it.
	sending bool
}

// ended counts r out of its meter's open settlements: its outcome is
// final (settled, or counted).
func (r *resend) ended() { r.m.open.Add(-1) }

// maxResends is the most settlements waiting to be sent again a ledger
// store holds for the process: an outage of the store under load would
// otherwise grow them (and their timers) without bound. Past it a
// settlement is given up at once (logged with its charge, counted in
// LostSettlements), and a meter with a budget on the store refuses calls
// before they run, as it does when the store fails, until fewer wait.
var maxResends = 10_000

// maxResending is the most settlements of one ledger store sent at once:
// by the resends' timers, and by the Cleanup of its last meter.
const maxResending = 32

// resends holds the settlements waiting to be sent again on one ledger
// store, for every meter of the process that uses it (joinResends): the
// meters of the pipelines a reload replaces and those of their successor
// share it, so that a settlement of a replaced pipeline is sent again
// for the whole of settleRetryFor while a pipeline of the process still
// holds the store (the host's store pool keeps it open across versions).
// The Cleanup of its last meter sends what still waits once more before
// the store closes, instead of leaving timers to fire against a closed
// store.
type resends struct {
	mu     sync.Mutex
	key    any // its key in resendsByStore; nil when not there
	users  int
	closed bool
	// pending holds the settlements waiting, and those being sent
	// (resend.sending); sending counts the latter.
	pending map[*resend]struct{}
	sending int
	// recording counts the settlements taken out of pending (end, drop)
	// whose outcome their sender has yet to log and count (recorded).
	recording int
	// drained is closed once the resends are closed and none is pending
	// any more, nor being recorded (Cleanup waits for it); nil before the
	// close.
	drained chan struct{}
}

// resendsByStore holds the resends of each ledger store in use, by the
// store's budget port.
var resendsByStore = struct {
	mu sync.Mutex
	by map[any]*resends
}{by: map[any]*resends{}}

// joinResends returns the resends of the ledger store bg, counting one
// more meter using it (leave). A port that cannot be told apart from
// another (not comparable) gets its own.
func joinResends(bg runtime.Budgeter) *resends {
	if bg == nil || !reflect.TypeOf(bg).Comparable() {
		return &resends{users: 1}
	}
	s := &resendsByStore
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.by[bg]
	if q == nil {
		q = &resends{key: bg}
		s.by[bg] = q
	}
	q.mu.Lock()
	q.users++
	q.mu.Unlock()
	return q
}

// leave counts one meter fewer using the store; the last one closes q and
// gets what was waiting, to send it once more (Cleanup), and the channel
// closed once the settlements being sent at that moment have ended (each
// settled, or logged as lost). Any other gets nothing: the settlements go
// on being sent again.
func (q *resends) leave() ([]*resend, <-chan struct{}) {
	s := &resendsByStore
	s.mu.Lock()
	defer s.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.users--; q.users > 0 {
		return nil, nil
	}
	if q.key != nil && s.by[q.key] == q {
		delete(s.by, q.key)
	}
	q.closed = true
	q.drained = make(chan struct{})
	out := make([]*resend, 0, len(q.pending))
	for r := range q.pending {
		if !r.sending {
			out = append(out, r)
			delete(q.pending, r)
		}
	}
	q.drainedLocked()
	return out, q.drained
}

// drainedLocked closes q.drained once q is closed and nothing is pending
// or being recorded. q.mu is held.
func (q *resends) drainedLocked() {
	if q.closed && len(q.pending) == 0 && q.recording == 0 && q.drained != nil {
		select {
		case <-q.drained:
		default:
			close(q.drained)
		}
	}
}

// full reports whether maxResends settlements wait (n of them); false
// for nil resends (ledgers in process memory).
func (q *resends) full() (n int, full bool) {
	if q == nil {
		return 0, false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending), !q.closed && len(q.pending) >= maxResends
}

// add registers r; ok false once the last meter of the store is closed,
// n the settlements waiting when maxResends of them are (r is not added).
func (q *resends) add(r *resend) (n int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return 0, false
	}
	if len(q.pending) >= maxResends {
		return len(q.pending), false
	}
	if q.pending == nil {
		q.pending = map[*resend]struct{}{}
	}
	q.pending[r] = struct{}{}
	return 0, true
}

// What start makes of a resend falling due.
const (
	resendStarted = iota // it is being sent
	resendTaken          // Cleanup took it first
	resendBusy           // maxResending others are being sent
)

// start marks r as being sent (resendStarted), unless Cleanup took it
// first or maxResending others are being sent.
func (q *resends) start(r *resend) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.pending[r]; !ok || r.sending {
		return resendTaken
	}
	if q.sending >= maxResending {
		return resendBusy
	}
	r.sending = true
	q.sending++
	return resendStarted
}

// drop removes r, not being sent; false when Cleanup took it first.
// When true the caller records its loss, then calls recorded.
func (q *resends) drop(r *resend) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.pending[r]; !ok || r.sending {
		return false
	}
	delete(q.pending, r)
	q.recording++
	return true
}

// end ends the sending of r: with again it waits for the next (queued),
// unless the resends were closed meanwhile; else it is dropped, and the
// caller records its outcome, then calls recorded. held is false when
// Cleanup gave r up (and logged it) while it was being sent.
func (q *resends) end(r *resend, again bool) (held, queued bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, held = q.pending[r]; !held {
		return false, false
	}
	r.sending = false
	q.sending--
	if again && !q.closed {
		return true, true
	}
	delete(q.pending, r)
	q.recording++
	return true, false
}

// recorded notes that the outcome of a settlement drop or end took out
// of q is logged and counted: the close that waits for q's settlements
// returns only then, so that the process never ends with a loss neither
// logged nor counted.
func (q *resends) recorded() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.recording--
	q.drainedLocked()
}

// abandon drops and returns what is still pending once Cleanup stops
// waiting: the settlements still being sent at its deadline.
func (q *resends) abandon() []*resend {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]*resend, 0, len(q.pending))
	for r := range q.pending {
		out = append(out, r)
	}
	q.pending, q.sending = nil, 0
	return out
}

// cleanupSettleTimeout bounds the last attempt Cleanup makes to send the
// settlements still waiting, and its wait for those being sent, all of
// them together (a variable for the tests).
var cleanupSettleTimeout = 2 * time.Second

// cleanupWaits is called as the Cleanup of a store's last meter starts to
// wait for the settlements being sent (a hook for the tests).
var cleanupWaits = func() {}

// Cleanup implements runtime.CleanerUpper. While another meter of the
// process uses the same ledger store (the next version of the policy, after
// a reload), the settlements still waiting go on being sent again
// (retrySettle) and the store stays open for them. The last meter of the
// store sends them once more, maxResending at a time, and waits for those
// a timer is sending at that moment, within cleanupSettleTimeout, before
// the pipeline closes its stores. One that fails then, or whose turn to be
// sent comes only after the deadline, is given up and logged with its
// charge (its reservation is charged its hold when its lease ends); one
// still being sent at the deadline is unconfirmed (resendUnconfirmed):
// it may yet reach the store.
func (m *Meter) Cleanup() error {
	if m.resends == nil || !m.left.CompareAndSwap(false, true) {
		return nil
	}
	pending, drained := m.resends.leave()
	if drained == nil {
		return nil
	}
	deadline := time.Now().Add(cleanupSettleTimeout)
	var sends errgroup.Group
	sends.SetLimit(maxResending)
	for _, r := range pending {
		sends.Go(func() error {
			ctx, cancel := context.WithDeadline(r.ctx, deadline)
			defer cancel()
			defer r.ended()
			if ctx.Err() != nil {
				// Its turn came after the deadline: never sent.
				r.m.resendLost(r, errors.New("the close's wait ended before the settlement could be sent once more"))
				return nil
			}
			switch err := r.m.budgets.Settle(ctx, r.at.key, r.id, r.charge, r.m.ttl(r.at)); {
			case err != nil && ctx.Err() != nil:
				// Cut short by the deadline: it may have reached the store.
				r.m.resendUnconfirmed(r, err)
			case err != nil:
				r.m.resendLost(r, err)
			}
			return nil
		})
	}
	_ = sends.Wait() // each reports its own failure
	cleanupWaits()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-drained:
	case <-t.C:
		// Those still being sent end on their own: counted lost then
		// if they fail (resendEndedLate).
		for _, r := range m.resends.abandon() {
			r.m.resendUnconfirmed(r, errors.New("the process closed the store while the settlement was being sent again"))
		}
	}
	return nil
}

// CleansUpConcurrently implements runtime.ConcurrentCleaner: the close
// waits for the meters of every ledger store at once, within the one
// cleanupSettleTimeout, rather than store after store.
func (m *Meter) CleansUpConcurrently() {}

// Cost returns the cost in US dollars of usage on model at the plan's rates
// (zero for an undeclared model). Cached input tokens are priced at the
// model's usd_per_mtok_cached when it declares one, else as input.
func (m *Meter) Cost(model string, u runtime.Usage) float64 {
	return Cost(m.rates[model], u)
}

// Cost returns the cost in US dollars of usage at the rates of r: the
// input tokens read from the prompt cache at usd_per_mtok_cached, those
// written to one-hour cache entries at usd_per_mtok_cache_write_1h and the
// other writes at usd_per_mtok_cache_write, when r declares them (a
// one-hour write without its own price at the other writes' price), the
// rest of the input at usd_per_mtok_in. A call whose input tokens are
// above the threshold of r's long-context tier is priced, whole, at the
// tier's rates (plan.Model.Rates).
func Cost(r plan.Model, u runtime.Usage) float64 {
	input := max(u.InputTokens, 0)
	r = r.Rates(input)
	in := float64(u.InputTokens) * r.USDPerMTokIn
	cached := min(max(u.CachedInputTokens, 0), input)
	if r.USDPerMTokCached != nil {
		in += float64(cached) * (*r.USDPerMTokCached - r.USDPerMTokIn)
	}
	written := min(max(u.CacheWriteInputTokens, 0), input-cached)
	hour := min(max(u.CacheWrite1hInputTokens, 0), written)
	write := r.USDPerMTokIn
	if r.USDPerMTokCacheWrite != nil {
		write = *r.USDPerMTokCacheWrite
	}
	write1h := write
	if r.USDPerMTokCacheWrite1h != nil {
		write1h = *r.USDPerMTokCacheWrite1h
	}
	in += float64(written-hour)*(write-r.USDPerMTokIn) + float64(hour)*(write1h-r.USDPerMTokIn)
	return (in + float64(u.OutputTokens)*r.USDPerMTokOut) / 1e6
}

// WrapChat implements runtime.ChatWrapper.
func (m *Meter) WrapChat(next runtime.ChatHandler) runtime.ChatHandler {
	return func(ctx context.Context, c *runtime.ChatCall, yield func(runtime.Delta) bool) error {
		if err := m.unpricedModel(c); err != nil {
			return err
		}
		if err := m.unpricedBeta(c); err != nil {
			return err
		}
		l, err := m.keyOf(ctx, c.Meta.Run)
		if err != nil {
			return err
		}
		est := m.estimate(c)
		reserved, err := m.reserve(ctx, l, est)
		if err != nil {
			return err
		}
		release := m.hold(ctx, l.key, reserved)
		settled := false
		defer func() {
			if !settled { // next panicked: release the reservation
				release()
				m.settle(ctx, l, reserved, false, runtime.Usage{}, 0)
			}
		}()
		start, u0, d0, n0 := c.Deltas, c.Usage, c.Discarded, len(c.Charges)
		inner := ctx
		if reserved != "" {
			inner = withHold(ctx, l.key, est)
		}
		err = next(inner, c, yield)
		release()
		settled = true
		charges := c.Charges[min(n0, len(c.Charges)):]
		if len(charges) == 0 && (c.Meta.Cached || err != nil && c.Deltas == start && c.Usage == u0 && c.Discarded == d0) {
			// A cached hit, or a failure before anything was billed: not
			// charged. A charge inside says otherwise, whatever the usage:
			// an inner meter's for absurd usage may be dollars and no token
			// (the tokens ceiling reached).
			m.settle(ctx, l, reserved, false, runtime.Usage{}, 0)
			return err
		}
		var u runtime.Usage
		if c.Meta.Cached {
			// Served from a cache inside the meter after model calls were
			// made for it (a hedge's racer that lost to the hit, a retry's
			// attempt before it): those are billed, the hit's replayed
			// usage is not.
			for _, ch := range charges {
				u.Add(ch.Usage)
			}
		} else {
			u = c.Usage.Sub(u0)
			u.Add(c.Discarded.Sub(d0))
		}
		model := c.Served
		if model == "" {
			model = c.Request.Model
		}
		if bad := absurd(u); bad != "" {
			return m.absurdUsage(ctx, l, reserved, c, charged{usage: u0, discarded: d0, charges: n0}, model, u, bad, err)
		}
		m.settle(ctx, l, reserved, true, u, m.price(charges, u, model))
		return err
	}
}

// price returns the cost of u, the usage of a call: each model call's
// charge at its own model's rates (a fallback's failed primary, a hedge's
// losing racer), a meter's charge for absurd usage at what that meter
// charged (runtime.Charge.Metered), and what no charge accounts for
// (usage a layer added itself) at the rates of model, the one that served.
func (m *Meter) price(charges []runtime.Charge, u runtime.Usage, model string) float64 {
	var usd float64
	rest := u
	for _, ch := range charges {
		if ch.Metered {
			// What a meter inside charged for absurd usage: its dollars
			// are not the tokens at the model's rates.
			usd += ch.USD
		} else {
			usd += m.Cost(ch.Model, ch.Usage)
		}
		rest = rest.Sub(ch.Usage)
	}
	rest = runtime.Usage{InputTokens: max(rest.InputTokens, 0), OutputTokens: max(rest.OutputTokens, 0),
		CachedInputTokens: max(rest.CachedInputTokens, 0), ReasoningTokens: max(rest.ReasoningTokens, 0),
		CacheWriteInputTokens: max(rest.CacheWriteInputTokens, 0), CacheWrite1hInputTokens: max(rest.CacheWrite1hInputTokens, 0)}
	if rest != (runtime.Usage{}) {
		usd += m.Cost(model, rest)
	}
	return usd
}

// Estimate returns the usage a model call is expected to charge at most:
// the request's max_tokens as output (zero when unset: the model's default
// cannot be known) and runtime.EstimateInput of the whole request as
// input: its messages, the tools it offers and its response format's
// schema, all of which the provider bills, estimated as written to the
// prompt cache when a breakpoint marks one (a write costs more than
// input).
func Estimate(req *runtime.ChatRequest) runtime.Usage {
	u := runtime.EstimateInput(req)
	u.OutputTokens = int64(max(req.MaxTokens, 0))
	return u
}

// estimate returns, with on_cross "refuse" and a tokens or usd ceiling,
// the call's estimate for the reservation to check against the charged
// ledger and the estimates reserved by the calls in flight, and to
// reserve in turn; else nil. It covers every model call the layers inside
// the meter may make for the call (m.calls: each attempt of a retry, each
// model of a fallback or a hedge, which are charged each), each at
// Estimate priced at the rates of the dearest of the requested model and
// those the layers inside may call instead.
func (m *Meter) estimate(c *runtime.ChatCall) *runtime.Ledger {
	b := m.Budget
	if m.OnCross != "refuse" || b == nil || (b.Tokens == nil && b.USD == nil) {
		return nil
	}
	req := &c.Request
	if req.ResponseFormat == nil && m.format != nil && !c.Own() {
		// Estimated as sent, with the format a layer inside sets on any
		// call but a layer's own (a judge's verdict, a summary).
		sent := *req
		sent.ResponseFormat = m.format
		req = &sent
	}
	est := Estimate(req)
	usd, out := m.estimateAt(c.Request.Model, est, c.Request.MaxTokens > 0)
	for _, model := range m.below {
		u, o := m.estimateAt(model, est, c.Request.MaxTokens > 0)
		usd, out = max(usd, u), max(out, o)
	}
	est.OutputTokens = out
	n := int64(max(m.calls, 1))
	return &runtime.Ledger{InputTokens: timesCalls(est.InputTokens, n), OutputTokens: timesCalls(est.OutputTokens, n), USD: usd * float64(n)}
}

// estimateAt returns the cost of est on model, and its output: the
// request's max_tokens when bounded, else the bound the model's client
// sends with a request that sets none (outputBounds; none: no output is
// estimated).
func (m *Meter) estimateAt(model string, est runtime.Usage, bounded bool) (float64, int64) {
	if !bounded {
		est.OutputTokens = m.bounds[model]
	}
	return m.Cost(model, est), est.OutputTokens
}

// outputBounds returns the max_tokens the client of each model sends with
// a request that sets none: what the client says (runtime.OutputBounder:
// a Claude model's sends 4096 unless the plan declares a bound), else
// the bound the plan declares (models.<name>.max_tokens).
func outputBounds(models map[string]plan.Model, clients map[string]runtime.ModelClient) map[string]int64 {
	out := make(map[string]int64, len(models))
	for name, r := range models {
		n := max(r.MaxTokens, 0)
		if b, ok := clients[name].(runtime.OutputBounder); ok {
			n = max(b.DefaultMaxTokens(), 0)
		}
		if n > 0 {
			out[name] = int64(n)
		}
	}
	return out
}

// timesCalls returns tokens times n (at least 1), stopping at the largest
// int64 instead of wrapping around.
func timesCalls(tokens, n int64) int64 {
	if tokens > 0 && tokens > math.MaxInt64/n {
		return math.MaxInt64
	}
	return tokens * n
}

// reachable lists the models the fallback and hedge layers of chain (the
// layers inside a meter) may send a call to in place of the model it
// names: a layer's when decides on each call, so each counts.
func reachable(chain []plan.Layer) []string {
	var out []string
	for _, l := range chain {
		if l.Use != "fallback" && l.Use != "hedge" {
			continue
		}
		var cfg struct {
			Models []string `json:"models"`
		}
		if json.Unmarshal(l.Config, &cfg) == nil {
			out = append(out, cfg.Models...)
		}
	}
	return out
}

// responseFormat returns the response format an output_coerce of chain
// (the layers inside a meter) with set_response_format sets on a request
// without one, for Estimate to count as the provider bills it: its name
// and its schema as configured (never shorter than the compact schema it
// sends); nil without one.
func responseFormat(chain []plan.Layer) *runtime.ResponseFormat {
	for _, l := range chain {
		if l.Use != "output_coerce" {
			continue
		}
		var cfg struct {
			Schema json.RawMessage `json:"schema"`
			Set    bool            `json:"set_response_format"`
		}
		if json.Unmarshal(l.Config, &cfg) == nil && cfg.Set {
			name := l.Name
			if name == "" {
				name = l.Use
			}
			return &runtime.ResponseFormat{Type: runtime.FormatJSONSchema, Name: name, Schema: cfg.Schema}
		}
	}
	return nil
}

// absurd names the first count of u that is negative or above
// MaxCallTokens, or returns "". A count of math.MaxInt64 was reported
// negative or beyond int64 (runtime.Usage.Add, wire.Count), not as that
// number: it is named so.
func absurd(u runtime.Usage) string {
	for _, f := range []struct {
		name string
		n    int64
	}{{"input_tokens", u.InputTokens}, {"output_tokens", u.OutputTokens},
		{"cached_input_tokens", u.CachedInputTokens}, {"reasoning_tokens", u.ReasoningTokens},
		{"cache_write_input_tokens", u.CacheWriteInputTokens}, {"cache_write_1h_input_tokens", u.CacheWrite1hInputTokens}} {
		switch {
		case f.n == math.MaxInt64:
			return f.name + " negative or beyond 2^63-1"
		case f.n < 0 || f.n > MaxCallTokens:
			return fmt.Sprintf("%s %d", f.name, f.n)
		}
	}
	return ""
}

// Capped returns u, a call's usage, as a meter with on_error "open"
// charges it when it is absurd: each negative count or count above
// MaxCallTokens at MaxCallTokens (the parts of a count, its cached and
// reasoning tokens, at most the count). Usage with no absurd count is
// returned as it is. What no meter settled is counted so by a host's
// metrics.
func Capped(u runtime.Usage) runtime.Usage {
	if absurd(u) == "" {
		return u
	}
	return capped(u)
}

func capped(u runtime.Usage) runtime.Usage {
	clamp := func(n int64) int64 {
		if n < 0 || n > MaxCallTokens {
			return MaxCallTokens
		}
		return n
	}
	return runtime.Usage{InputTokens: clamp(u.InputTokens), OutputTokens: clamp(u.OutputTokens),
		CachedInputTokens:       min(clamp(u.CachedInputTokens), clamp(u.InputTokens)),
		CacheWriteInputTokens:   min(clamp(u.CacheWriteInputTokens), clamp(u.InputTokens)),
		CacheWrite1hInputTokens: min(clamp(u.CacheWrite1hInputTokens), clamp(u.CacheWriteInputTokens), clamp(u.InputTokens)),
		ReasoningTokens:         min(clamp(u.ReasoningTokens), clamp(u.OutputTokens))}
}

// charged is where a call stood when the meter passed it on: its usage,
// what it had discarded and its number of charges.
type charged struct {
	usage, discarded runtime.Usage
	charges          int
}

// absurdUsage settles c, a call whose usage u is absurd. Each absurd count
// is charged as MaxCallTokens (a negative one as well: usage is never
// credited back). Closed: the ledger is charged up to its ceilings (what
// brings it to each ceiling, nothing where it is there already; a resource
// without a ceiling as open charges it), so no further call of the ledger
// is admitted, and the call fails with a machinery error. Open: the
// clamped usage is charged, logged, and the call's own outcome stands.
// Either way the call reports what was charged (its usage and one metered
// charge, runtime.Charge.Metered), which the layers above it and a host's
// metrics read, not the absurd report.
func (m *Meter) absurdUsage(ctx context.Context, at ledgerRef, reserved string, c *runtime.ChatCall, before charged, model string, u runtime.Usage, bad string, callErr error) error {
	u = capped(u)
	usd := m.Cost(model, u)
	report := func() {
		c.Usage = before.usage
		c.Usage.Add(u)
		c.Discarded = before.discarded
		c.Charges = append(c.Charges[:min(before.charges, len(c.Charges))], runtime.Charge{Model: model, Usage: u, Metered: true, USD: usd})
	}
	if m.OnError == "open" {
		m.logger.WarnContext(ctx, "meter: the model reported absurd usage; charged at the per-call cap", "model", model, "usage", bad)
		m.settle(ctx, at, reserved, true, u, usd)
		report()
		return callErr
	}
	if b := m.Budget; b != nil && (b.Tokens != nil || b.USD != nil) {
		// What brings the ledger to each ceiling; unread, the ceiling
		// itself, which brings it there at least. Read whether or not the
		// caller is still there, as the settlement is made.
		spent, err := m.budgets.LedgerOf(context.WithoutCancel(ctx), at.key)
		if err != nil {
			spent = runtime.Ledger{}
		}
		if b.Tokens != nil {
			u = runtime.Usage{InputTokens: max(*b.Tokens-spent.Tokens(), 0)}
		}
		if b.USD != nil {
			usd = max(*b.USD-spent.USD, 0)
		}
	}
	m.settle(ctx, at, reserved, true, u, usd)
	report()
	m.logger.ErrorContext(ctx, "meter: the model reported absurd usage; the call fails and the ledger is charged to its ceiling", "model", model, "usage", bad)
	return &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name,
		Message: fmt.Sprintf("model %s reported absurd usage (%s; at most %d per call)", model, bad, MaxCallTokens)}
}

// WrapTool implements runtime.ToolWrapper.
func (m *Meter) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		l, err := m.keyOf(ctx, c.Meta.Run)
		if err != nil {
			return nil, err
		}
		// A retry_safe call is charged once: a layer outside the meter
		// (retry) that runs it again after it was charged (it timed out
		// while it ran) runs the same call, which the tool dedupes by its
		// idempotency key, so it makes its effect once at most. The
		// attempts after the charge are neither reserved nor charged, and
		// the ceiling the first one reached does not refuse them.
		once := c.Tool != nil && c.Tool.SideEffecting && c.Tool.RetrySafe
		if once && c.Seen(m) {
			return next(ctx, c)
		}
		charge := func(ran bool) bool {
			if ran && once {
				c.FirstSeen(m)
			}
			return ran
		}
		reserved, err := m.reserve(ctx, l, nil)
		if err != nil {
			return nil, err
		}
		release := m.hold(ctx, l.key, reserved)
		settled := false
		ended := ctx.Err() != nil // the tool is never started then
		defer func() {
			if !settled {
				// next panicked: a side-effecting tool may have made its
				// effect (idempotent leaves its key in doubt), and is
				// charged; any other call's reservation is released.
				release()
				m.settle(ctx, l, reserved, charge(!ended && c.Tool != nil && c.Tool.SideEffecting), runtime.Usage{}, 0)
			}
		}()
		inner := ctx
		if reserved != "" {
			inner = withHold(ctx, l.key, nil)
		}
		v, err := next(inner, c)
		release()
		settled = true
		m.settle(ctx, l, reserved, charge(toolRan(ctx, c, err, ended)), runtime.Usage{}, 0)
		return v, err
	}
}

// toolRan reports whether a tool call that returned err is charged: it
// returned without error, or it ran and its result could not be used
// (runtime.ErrRan), or it may have made its effect: its outcome is unknown
// (runtime.ErrMayHaveRun, runtime.ErrOutcomeUnrecorded), or it is a
// side-effecting tool that was cancelled or timed out while it ran (as is
// one that panicked, see WrapTool), retry_safe or not: retry_safe makes a
// retry of the same call safe, not a new call free. Otherwise a client
// cancelling each call once the tool had it would make effects without
// end under a calls ceiling. A call served from a cache or a stored
// outcome (Meta.Cached), a duplicate in doubt (its first execution is the
// one that may have run), a call proved not to have run and one whose
// context had ended before it began (ended) are not charged.
func toolRan(ctx context.Context, c *runtime.ToolCall, err error, ended bool) bool {
	if c.Meta.Cached {
		return false
	}
	if err == nil || errors.Is(err, runtime.ErrRan) || errors.Is(err, runtime.ErrMayHaveRun) || errors.Is(err, runtime.ErrOutcomeUnrecorded) {
		return true
	}
	var dup *runtime.InDoubtError
	if ended || errors.As(err, &dup) || runtime.DidNotRun(err) || c.Tool == nil || !c.Tool.SideEffecting {
		return false
	}
	return runtime.Classify(err) == runtime.ClassFailure && (ctx.Err() != nil || runtime.KindOf(err) == string(runtime.KindTimeout))
}

var (
	_ runtime.CleanerUpper = (*Meter)(nil)
	_ runtime.LedgerReader = (*Meter)(nil)
	_ runtime.RunEnder     = (*Meter)(nil)
	_ runtime.ChatWrapper  = (*Meter)(nil)
	_ runtime.ToolWrapper  = (*Meter)(nil)
)
