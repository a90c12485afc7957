package idempotent

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/agentc-dev/agentc/builtins/internal/lease"
	"github.com/agentc-dev/agentc/internal/jsonnum"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "idempotent"

// DefaultLease is how long a claim on a running call holds without being
// renewed. The holder renews it every third of that while the call runs, so
// the lease bounds how long a crashed holder blocks its duplicates, not how
// long a call may run.
const DefaultLease = 30 * time.Second

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitCaches, runtime.TraitShortCircuits},
		Doc:     "dedupes side-effecting tool calls on tenant, run id (or chosen arguments), tool and canonical arguments",
		New:     New,
	})
}

// New returns an idempotent layer with the schema's defaults (ttl 24h,
// plain_lookup true).
func New() runtime.Middleware {
	return &Idempotent{TTL: runtime.Duration(24 * time.Hour), PlainLookup: true}
}

// Idempotent is the idempotent middleware; its exported fields are its
// config (schemas/idempotent.cue).
type Idempotent struct {
	TTL   runtime.Duration `json:"ttl"`
	Store string           `json:"store,omitempty"`
	// LeaseTTL bounds a claim on a running call that is not renewed (0:
	// DefaultLease).
	LeaseTTL runtime.Duration `json:"lease_ttl,omitempty"`
	// KeyArgs, when set, keys a call on these arguments (and the tool and
	// the tenant) instead of the run and every argument: the same order
	// refunded from two runs is refunded once.
	KeyArgs []string `json:"key_args,omitempty"`
	// VaryArgs, with key_args, names the arguments that may differ between
	// calls under one key: a call is refused when its other arguments
	// differ from those of the call whose outcome the key holds.
	VaryArgs []string `json:"vary_args,omitempty"`
	// PlainLookup, with settings.digest_key_env, looks a call claimed
	// afresh up under its plain key of before too (older); false once the
	// records written without the key have expired saves those two round
	// trips a call.
	PlainLookup bool `json:"plain_lookup"`

	name   string
	leaser runtime.Leaser
	// digester makes the digests and the store keys the layer writes of a
	// call's arguments: keyed with settings.digest_key_env.
	digester runtime.Digester
	clock    runtime.Clock
	logger   *slog.Logger
	// flights collapses concurrent duplicates in this process.
	flights lease.Group
	// owners keeps the owner nonces of claims that went unanswered.
	owners owners
	// republishes are the results waiting to be published again.
	republishes republishes
	// pollMin and pollMax bound the wait between reads of a claim held
	// elsewhere.
	pollMin, pollMax time.Duration
}

// Provision resolves the store.
func (m *Idempotent) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.logger = b.Logger
	m.clock = b.Clock()
	m.digester = b.Digester()
	if m.LeaseTTL <= 0 {
		m.LeaseTTL = runtime.Duration(DefaultLease)
	}
	m.pollMin, m.pollMax = 2*time.Millisecond, 200*time.Millisecond
	l, err := b.Leaser(m.Store)
	if err != nil {
		return err
	}
	if setting := runtime.Evicts(l, false); setting != "" {
		return fmt.Errorf("store %q evicts keys under memory pressure (%s): a claim or a result it evicts lets a duplicate run the call again; set maxmemory-policy noeviction on the server, or keep the idempotency records in another store",
			runtime.StoreName(m.Store), setting)
	}
	m.leaser = l
	return nil
}

// Validate checks the ttl and the key arguments.
func (m *Idempotent) Validate() error {
	if m.TTL <= 0 {
		return errors.New("ttl must be positive")
	}
	for i, a := range m.KeyArgs {
		if a == "" || slices.Contains(m.KeyArgs[:i], a) {
			return fmt.Errorf("key_args: %q is empty or repeated", a)
		}
	}
	if len(m.VaryArgs) > 0 && len(m.KeyArgs) == 0 {
		return errors.New("vary_args needs key_args: without them every argument keys the call, so none can vary under its key")
	}
	for i, a := range m.VaryArgs {
		if a == "" || slices.Contains(m.VaryArgs[:i], a) {
			return fmt.Errorf("vary_args: %q is empty or repeated", a)
		}
		if slices.Contains(m.KeyArgs, a) {
			return fmt.Errorf("vary_args: %q is in key_args: a key argument cannot vary under its key", a)
		}
	}
	return nil
}

// Key returns the store key of a call keyed on its run (no key_args, no
// idempotency key supplied by the caller): the tool, the tenant, the
// call's idempotency key (derived from the run and the arguments) and the
// arguments' digest (keyed when the pipeline has a digest key: the key
// then holds nothing a reader can digest candidates against). Builds
// before the comparison of arguments under a supplied key keyed such
// calls so too (earlier). The layer computes it only for calls whose
// arguments canonicalise (ToolCall.ArgsDigestErr).
func Key(c *runtime.ToolCall) string {
	return hashKey(runtime.Digester{}, c.Name, c.Meta.Run.Tenant, c.IdempotencyKey(), c.ArgsDigest())
}

// hashKey returns the store key of parts: their SHA-256, or their
// HMAC-SHA256 under d's key, in hex, after keyPrefix.
func hashKey(d runtime.Digester, parts ...string) string {
	h := d.New()
	for _, s := range parts {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return keyPrefix + hex.EncodeToString(h.Sum(nil))
}

// key returns the store key of c: keyed on the key arguments when the
// layer has them (a call lacking one of them is refused), else on the
// idempotency key its caller supplied, else on its run and arguments
// (Key).
func (m *Idempotent) key(c *runtime.ToolCall) (string, error) {
	k, err := m.keyBy(m.digester, c)
	if err != nil {
		return "", err
	}
	if len(m.KeyArgs) > 0 && !c.Meta.IdempotencyKeySupplied() {
		// The key passed downstream is the layer's: the same in every run
		// and process that makes this call (the pipeline gave the call
		// this key before a layer outside, an audit, read it: ToolKey).
		c.Meta.IdempotencyKey = k[len(keyPrefix):]
	}
	return k, nil
}

// keyBy is the store key of c with its arguments digested by d (the
// layer's, or the plain one for a record written before a digest key was
// set: older).
func (m *Idempotent) keyBy(d runtime.Digester, c *runtime.ToolCall) (string, error) {
	if len(m.KeyArgs) == 0 {
		if m.suppliedKey(c) {
			// No argument in it: the same with a digest key or without.
			return hashKey(runtime.Digester{}, "key", c.Name, c.Meta.Run.Tenant, c.Meta.IdempotencyKey), nil
		}
		if !d.Keyed() {
			c = c.PlainForm()
		}
		return Key(c), nil
	}
	// Plain with a digest key or without: a record is found after the
	// key is set, changed or removed (argsKey).
	return m.argsKey(runtime.Digester{}, c)
}

// older returns the key c was stored under before: with a digest key, the
// key of the plain form (a deployment without the key wrote it; for a call
// under a key its caller supplied, the key of builds before the
// comparison of arguments under it; under key_args, the key builds before
// this one hashed with the digest key), and keep false: the layer reads
// that key, and never keeps a claim or writes a record there, which would
// hold what the key hides. Without a digest key, for a call under a
// supplied key, the key of those builds, and keep true (earlier, twin).
// "" when there is none: a key_args record such builds wrote with a digest
// key is not found once the key is removed.
func (m *Idempotent) older(c *runtime.ToolCall) (key string, keep bool) {
	switch {
	case m.digester.Keyed() && !m.PlainLookup:
		return "", false
	case m.digester.Keyed() && m.suppliedKey(c):
		return Key(c.PlainForm()), false
	case m.digester.Keyed() && len(m.KeyArgs) > 0:
		k, err := m.argsKey(m.digester, c)
		if err != nil {
			return "", false
		}
		return k, false
	case m.digester.Keyed():
		k, err := m.keyBy(runtime.Digester{}, c)
		if err != nil {
			return "", false
		}
		return k, false
	case m.suppliedKey(c):
		return Key(c), true
	}
	return "", false
}

// keyPrefix starts every store key of the layer.
const keyPrefix = "agentc/idempotent/"

// ToolKey implements runtime.ToolKeyer: with key_args, the key the layer
// passes downstream for a side-effecting call that carries them.
func (m *Idempotent) ToolKey(c *runtime.ToolCall) (string, bool) {
	if len(m.KeyArgs) == 0 || c.Tool == nil || !c.Tool.SideEffecting {
		return "", false
	}
	k, err := m.argsKey(runtime.Digester{}, c)
	if err != nil {
		return "", false
	}
	return k[len(keyPrefix):], true
}

// argsKey returns the store key of c keyed on the key arguments, hashed
// with d. The layer's key is the plain one (keyBy), so that a record is
// found whether the deployment has a digest key or not, and the key passed
// downstream stays the same across a change of it: a reader of the store
// or of an audit can test a guessed value of the key arguments (an order
// id) against it, not of the other arguments, whose digests are keyed.
// Builds before hashed it with the digest key (older).
func (m *Idempotent) argsKey(d runtime.Digester, c *runtime.ToolCall) (string, error) {
	picked := make([]any, len(m.KeyArgs))
	for i, a := range m.KeyArgs {
		// A null reads as absent, as everywhere else: keyed on it, every
		// call writing null would share one key, and a second refund
		// would get the first one's result without running.
		v, ok := c.Args[a]
		if !ok || v == nil {
			return "", runtime.NotRun(&runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name,
				Message: fmt.Sprintf("argument %q named in key_args is missing or null; the call did not run", a)})
		}
		picked[i] = v
	}
	// Equal numbers key alike (0 and -0, a json.Number 7.0 and 7), as in
	// the arguments' digest.
	b, err := json.Marshal(jsonnum.Canonical(picked))
	if err != nil {
		return "", runtime.NotRun(&runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name,
			Message: "key arguments cannot be canonicalised; the call did not run", Err: err})
	}
	return hashKey(d, "args", c.Name, c.Meta.Run.Tenant, string(b)), nil
}

// StateKeys implements runtime.StateKeyer: for each side-effecting tool the
// layer applies to (the tools of an MCP server by a sample one, named as
// the tool chain sees it), the key of a sample call of it (its key
// arguments, each with a value of its own), in its plain form: a digest
// key set or removed changes no key the layer reads (older).
func (m *Idempotent) StateKeys(at runtime.StateSite) []runtime.StateKey {
	m.name = at.Name()
	var out []runtime.StateKey
	for _, tool := range at.SideEffectingTools() {
		args := map[string]any{}
		for _, a := range m.KeyArgs {
			args[a] = "sample-" + a
		}
		c := &runtime.ToolCall{Name: tool.Name, Args: args, Meta: runtime.Meta{Run: at.Run()}}
		key, err := m.keyBy(runtime.Digester{}, c) // plain: the same with a digest key or without
		if err != nil {
			continue
		}
		out = append(out, runtime.StateKey{Store: runtime.StoreName(m.Store), Key: key, Tool: tool.Label,
			Server: tool.Server, Upstream: tool.Upstream, Repeats: true, Digests: runtime.DigestsReadPlain,
			What: "idempotency records of " + tool.Label,
			Then: "calls of " + tool.Label + " made before the change run again if repeated"})
	}
	return out
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
		key, err := m.key(c)
		if err != nil {
			return nil, err
		}
		if err := m.resumable(ctx, c, key); err != nil {
			return nil, err
		}
		hold, err := m.bind(ctx, c, key)
		if err != nil {
			return nil, err
		}
		if hold != nil {
			defer hold()
		}
		// With key_args, calls of one key with other arguments do not
		// share a flight: each meets the other's record in the store, as
		// across processes, and is refused once that record holds another
		// call's outcome.
		v, err, shared := m.flights.Do(ctx, key+"\x00"+m.argsDigest(c), func() (any, error) {
			var a answer
			v, err := m.settle(ctx, c, key, next, &a)
			return flightOutcome{v: v, answer: a}, err
		})
		out, _ := v.(flightOutcome)
		if shared {
			if err == nil || errors.Is(err, runtime.ErrRan) {
				c.Meta.Deduped, c.Meta.Cached = true, true
			}
			// A resumed call that joined a duplicate is answered as the
			// duplicate's claim answered it: no claim had been made of
			// the key (it never started), or its stored outcome.
			switch out.answer {
			case answerNeverStarted:
				runtime.VouchNeverStarted(ctx)
			case answerReplayed:
				runtime.VouchReplayed(ctx)
			}
		}
		return out.v, err
	}
}

// answer is how the store answered a call's claim, for a resumed call
// that shares the outcome of a duplicate's (runtime.ClaimVoucher).
type answer int

const (
	// answerNone: the call was not answered for (in doubt, a store
	// failure, or a claim in doubt taken again by a retry_safe tool).
	answerNone answer = iota
	// answerNeverStarted: no claim had been made of the key; it was
	// claimed now and the call ran.
	answerNeverStarted
	// answerReplayed: the key's stored outcome answered the call.
	answerReplayed
)

// flightOutcome is what the leader of a flight shares with the duplicates
// in this process that wait for it: its result and how the store answered
// its claim.
type flightOutcome struct {
	v      any
	answer answer
}

// resumable checks, for a resumed call (runtime.ResumedCall), that the
// layer can answer for it: within its ttl of when its turn recorded it
// (answers), in the store (sameStore) and under the key (key) its turn
// recorded. Otherwise the call is in doubt, without touching the store
// for a claim. Done before the call joins a duplicate in this process, so
// that a resumed call never takes the answer of a claim it could not have
// been answered by, and a duplicate never shares a resumed call's doubt.
func (m *Idempotent) resumable(ctx context.Context, c *runtime.ToolCall, key string) error {
	intent, resumed := runtime.ResumedCall(ctx)
	if !resumed {
		return nil
	}
	byStore := !intent.StoreSince.IsZero()
	if m.ClaimStore() == nil || !byStore && !m.answers(intent.Since) {
		// A resumed call that may have started, which the store cannot
		// answer for: in doubt, without touching the store.
		return &runtime.InDoubtError{Layer: m.name, Tool: c.Name, IdempotencyKey: c.IdempotencyKey()}
	}
	now, err := m.sameStore(ctx, c, intent.Store)
	if err != nil {
		return err
	}
	if byStore && !m.answersAt(intent, now) {
		// By the store's clock, a claim made then could have expired.
		return &runtime.InDoubtError{Layer: m.name, Tool: c.Name, IdempotencyKey: c.IdempotencyKey()}
	}
	if old, _ := m.older(c); key != intent.Key && !(m.digester.Keyed() && old == intent.Key) {
		// Claimed under another key then (key_args, or the tenant,
		// changed since): no claim under this one says nothing. A turn
		// recorded before a digest key was set holds the plain form of
		// the key, which the claim looks up (earlier).
		m.logger.WarnContext(ctx, "idempotent: the resumed call would have been claimed under another key (key_args or the tenant changed since); the call is in doubt",
			"tool", c.Name, "idempotency_key", c.IdempotencyKey())
		return &runtime.InDoubtError{Layer: m.name, Tool: c.Name, IdempotencyKey: c.IdempotencyKey()}
	}
	return nil
}

// settle replays the published result of key, waits for a lease held
// elsewhere, or takes the lease and runs the call. A lease whose holder
// stopped without an outcome is in doubt: a retry-safe tool runs again (with
// the same idempotency key), any other returns an *runtime.InDoubtError.
//
// a records how the store answered the claim, for duplicates that share
// the outcome.
func (m *Idempotent) settle(ctx context.Context, c *runtime.ToolCall, key string, next runtime.ToolHandler, a *answer) (any, error) {
	d := m.pollMin
	_, resumed := runtime.ResumedCall(ctx)
	owner := m.owners.take(key)
	note := m.claimNote(c)
	// retake is the note of a claim in doubt the call may take over: its
	// arguments match the call's, or it has no note (a store that takes
	// such a claim over only without one: the contract before a claim
	// kept its taker's note); asked for once.
	var retake []byte
	retaking := false
	for {
		asked := time.Now() // the lease runs from no earlier than this
		ask := note
		if retaking {
			ask, retaking = retake, false
		}
		g, err := m.leaser.AcquireAs(ctx, key, owner, ask, m.LeaseTTL.D(), m.TTL.D(), c.Tool.RetrySafe)
		if err != nil {
			// The store may have applied the claim: the next attempt
			// presents the same owner and gets it back.
			m.owners.leave(key, owner, m.clock.Now(), max(m.TTL.D(), m.LeaseTTL.D()))
			if ctx.Err() != nil {
				return nil, runtime.NotRun(ctx.Err()) // the call was not started
			}
			return nil, m.storeErr("claim the call", err)
		}
		switch g.Status {
		case runtime.LeaseDone:
			return m.replay(ctx, c, g.Result, a)
		case runtime.LeaseInDoubt:
			if c.Tool.RetrySafe && !bytes.Equal(g.Note, ask) {
				// The store takes a claim in doubt over only for the
				// note it holds: the call's arguments are compared with
				// the claimed call's here, and a call with others is
				// refused rather than run under its key.
				if err := m.retakes(c, g.Note); err != nil {
					return nil, err
				}
				retake, retaking = g.Note, true
				continue
			}
			if g.Unreadable != nil {
				return nil, m.unreadable(ctx, c, key, g.Unreadable)
			}
			return nil, m.inDoubt(ctx, c)
		case runtime.LeaseAcquired:
			l := m.leaser
			if old, keep := m.older(c); old != "" && (!g.InDoubt || !keep) {
				// Keyed so since this build, or since a digest key was
				// set: a record of the call under its key of before
				// answers it. A claim in doubt under the digest key is
				// looked up there too: one in doubt there gave the call
				// that stopped here the idempotency key of before, and
				// its retry must get it again.
				var res []byte
				var wait bool
				l, res, wait, err = m.earlier(ctx, c, key, g.Token, old, keep)
				if err != nil {
					return nil, err
				}
				if res != nil {
					return m.replay(ctx, c, res, a)
				}
				if wait {
					g.Remaining = 0
					break // held there: wait, then ask again
				}
			}
			if !g.InDoubt {
				// No claim was made of the call (since its turn recorded
				// it, for a resumed call): it never started, and runs now
				// under this claim.
				*a = answerNeverStarted
			}
			if resumed && !g.InDoubt {
				runtime.VouchNeverStarted(ctx)
			}
			if g.InDoubt {
				m.logger.WarnContext(ctx, "idempotent: an earlier execution stopped without an outcome; running the retry-safe tool again with the same idempotency key",
					"tool", c.Name, "idempotency_key", c.IdempotencyKey())
			}
			return m.run(ctx, l, c, key, g.Token, asked, next)
		}
		// Held elsewhere: wait, then ask again.
		if err := m.clock.Sleep(ctx, min(d, max(g.Remaining, m.pollMin))); err != nil {
			return nil, runtime.NotRun(err) // it only waited: the call was not started
		}
		d = min(2*d, m.pollMax)
	}
}

// replay answers c with the stored outcome res of its key, refusing it
// when res is the outcome of a call with other arguments (matching), and
// records in a that the store answered it.
func (m *Idempotent) replay(ctx context.Context, c *runtime.ToolCall, res []byte, a *answer) (any, error) {
	res, err := m.matching(c, res)
	if err != nil {
		return nil, err
	}
	// A resumed call that ran before: its stored outcome answers it.
	*a = answerReplayed
	runtime.VouchReplayed(ctx)
	if err, ok := m.storedErr(res); ok {
		c.Meta.Deduped, c.Meta.Cached = true, true
		return nil, err
	}
	var out any
	if err := jsonnum.Decode(res, &out); err != nil {
		return nil, &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name,
			Message: "the stored result of this call does not decode; the call did not run again", Err: err}
	}
	c.Meta.Deduped, c.Meta.Cached = true, true
	return out, nil
}

// VouchesFor implements runtime.ClaimVoucher: the layer answers for the
// resumed calls of a side-effecting tool when its store is shared by every
// process (runtime.SharedLeaser).
func (m *Idempotent) VouchesFor(tool *runtime.ToolInfo) bool {
	_, shared := m.leaser.(runtime.SharedLeaser)
	return shared && tool.SideEffecting
}

// ClaimStore implements runtime.ClaimVoucher: the layer's store, when it is
// shared by every process.
func (m *Idempotent) ClaimStore() runtime.SharedLeaser {
	l, _ := m.leaser.(runtime.SharedLeaser)
	return l
}

// sameStore checks, for a resumed call, that the layer's store is the one
// its turn recorded it would be claimed in (recorded, its identity): a
// store flushed since, a schema dropped and created again, or another
// database or server the layer is pointed at now has another identity, and
// its lack of a claim says nothing. The call is then in doubt; a store that
// cannot be read fails as a claim would. It returns the store's time, read
// with its identity when the store tells it (runtime.StoreClock; else
// zero).
func (m *Idempotent) sameStore(ctx context.Context, c *runtime.ToolCall, recorded string) (time.Time, error) {
	id, now, err := runtime.StoreIdentity(ctx, m.ClaimStore())
	if err != nil {
		if ctx.Err() != nil {
			return time.Time{}, runtime.NotRun(ctx.Err()) // the call was not started
		}
		return time.Time{}, m.storeErr("read the store's identity", err)
	}
	if id == recorded {
		return now, nil
	}
	m.logger.WarnContext(ctx, "idempotent: the store is not the one the resumed call would have been claimed in (flushed, dropped and created again, or another one since); the call is in doubt",
		"tool", c.Name, "idempotency_key", c.IdempotencyKey(), "recorded_store", recorded, "store", id)
	return time.Time{}, &runtime.InDoubtError{Layer: m.name, Tool: c.Name, IdempotencyKey: c.IdempotencyKey()}
}

// ClaimKey implements runtime.ClaimVoucher: the key the layer claims c
// under.
func (m *Idempotent) ClaimKey(c *runtime.ToolCall) (string, error) {
	if _, err := c.ArgsDigestErr(); err != nil {
		return "", err
	}
	return m.key(c)
}

// answers reports whether the store can say that a resumed call recorded at
// since never started: its store is shared, and a claim made since then
// would still be kept (ttl, less runtime.ResumeClockSkew for the clocks of
// the processes and the store).
func (m *Idempotent) answers(since time.Time) bool {
	_, shared := m.leaser.(runtime.SharedLeaser)
	return shared && m.clock.Now().Add(runtime.ResumeClockSkew).Before(since.Add(m.TTL.D()))
}

// answersAt is answers read on the store's own clock: the call was
// recorded at intent.StoreSince by it, and it reads now (zero: the store
// no longer tells its time, and answers decides). The clocks of the
// processes that recorded and resume the turn play no part.
func (m *Idempotent) answersAt(intent runtime.ResumedIntent, now time.Time) bool {
	if now.IsZero() {
		return m.answers(intent.Since)
	}
	return now.Add(runtime.StoreClockMargin).Before(intent.StoreSince.Add(m.TTL.D()))
}

// run executes the call under the lease token, asked for at asked,
// renewing the lease while it runs, and publishes its result (or releases
// the lease on failure; on a panic, or a cancellation or timeout while it
// ran, it is ended in doubt, which a retry_safe tool's retry takes over). A call
// whose lease may lapse (no renewal confirmed in time) is stopped: its
// context ends, since another process may then take the claim over.
func (m *Idempotent) run(ctx context.Context, l runtime.Leaser, c *runtime.ToolCall, key string, token int64, asked time.Time, next runtime.ToolHandler) (any, error) {
	wctx := context.WithoutCancel(ctx)
	hold := lease.Renew(ctx, l, key, token, m.LeaseTTL.D(), asked, m.logger, "idempotent", "tool", c.Name)
	done := false
	defer func() {
		hold.Stop()
		if done {
			return
		}
		// The call panicked: it may have made its effect first, as when
		// its process crashes. Its claim is ended in doubt, so that a
		// duplicate finds the call in doubt at once instead of running it
		// again; a retry_safe tool's takes the claim over and runs again
		// under the same idempotency key (as a build with a digest key
		// does with a claim of a build without).
		m.doubt(wctx, l, c, key, token, "panicked")
	}()
	if hold.Context().Err() != nil {
		// The claim came too late to keep (it may lapse already: a slow
		// store), or the caller gave up meanwhile: the tool is not
		// started, and the claim is released, not left in doubt.
		done = true
		hold.Stop()
		return nil, m.notStarted(ctx, wctx, l, c, key, token, hold.Lapsed())
	}
	v, err := next(hold.Context(), c)
	done = true
	hold.Stop()
	if err != nil && hold.Lapsed() && !errors.Is(err, runtime.ErrRan) {
		err = m.lapsed(wctx, l, c, key, token, err)
		return v, err
	}
	if errors.Is(err, runtime.ErrRan) {
		// The call ran but its result is unusable: the error is its
		// outcome, stored so that a duplicate gets it without running the
		// tool again.
		m.publish(ctx, l, c, key, token, storeErr(err))
		return v, err
	}
	if err != nil && (ctx.Err() != nil && !runtime.DidNotRun(err) || runtime.KindOf(err) == string(runtime.KindTimeout) ||
		runtime.Classify(err) == runtime.ClassInDoubt) {
		// Cancelled (unless its error proves the call was never sent:
		// runtime.DidNotRun), or timed out, while the tool ran (its own deadline,
		// an upstream's 504), or failed in a way that leaves its outcome
		// unknown (runtime.MayHaveRun: an MCP upstream's connection lost
		// after the call was sent; runtime.ErrOutcomeUnrecorded: it ran and
		// an audit inside could not record it): like a panic, it may have made its
		// effect before it stopped. The claim is ended in doubt, so that a
		// duplicate finds the call in doubt at once instead of running it
		// again. A retry_safe tool's too: a retry takes it over and runs
		// under the idempotency key the tool got, by which it tells the
		// retry apart, even once a digest key is set (a released claim
		// would leave nothing under the plain key, and the retry would get
		// the keyed idempotency key, new to the tool).
		m.doubt(wctx, l, c, key, token, "was cancelled, timed out, lost or left unrecorded while it ran", "error", err)
		return v, err
	}
	if err != nil {
		if rerr := l.Release(wctx, key, token); rerr != nil {
			m.logger.WarnContext(ctx, "idempotent: releasing the claim of a failed call failed; the call is in doubt once its lease expires",
				"tool", c.Name, "error", rerr)
		}
		return v, err
	}
	res, merr := json.Marshal(v)
	if merr != nil {
		// The caller gets the result; a duplicate cannot, so it gets an
		// error instead of running the tool again.
		m.logger.WarnContext(ctx, "idempotent: result does not encode as JSON; a duplicate gets an error instead of the result",
			"tool", c.Name, "error", merr)
		res = storeErr(fmt.Errorf("the result does not encode as JSON, so it was not stored: %w", merr))
	}
	m.publish(ctx, l, c, key, token, res)
	return v, nil
}

// notStarted releases the claim (key, token) of a call that was not
// started, because its lease may have lapsed already (lapsed) or ctx ended
// before it could start, and returns its error, which proves it did not run
// (runtime.DidNotRun): a store failure (lease.ErrLapsed, which a retry may
// try again), or the caller's cancellation.
func (m *Idempotent) notStarted(ctx, wctx context.Context, l runtime.Leaser, c *runtime.ToolCall, key string, token int64, lapsed bool) error {
	if rerr := l.Release(wctx, key, token); rerr != nil {
		m.logger.WarnContext(wctx, "idempotent: releasing the claim of a call not started failed; the call is in doubt once its lease expires",
			"tool", c.Name, "error", rerr)
	}
	if !lapsed {
		return runtime.NotRun(context.Cause(ctx))
	}
	return runtime.StoreRefusal(m.name, "the call was not started, as its claim was granted too late to keep", lease.ErrLapsed)
}

// lapsed ends the claim of a call that failed after its lease may have
// lapsed (stopped by it, as a rule): the call may have made its effect, so
// as for a cancellation, its claim is ended in doubt (a retry_safe tool's
// retry takes it over), under its token (a claim taken over since is
// left alone); one whose error proves it never ran is released. Unless its
// error proves it never ran, the error returned is in doubt
// (runtime.MayHaveRun), a retry_safe tool's too: the call may have run.
func (m *Idempotent) lapsed(ctx context.Context, l runtime.Leaser, c *runtime.ToolCall, key string, token int64, err error) error {
	switch {
	case runtime.DidNotRun(err):
		if rerr := l.Release(ctx, key, token); rerr != nil {
			m.logger.WarnContext(ctx, "idempotent: releasing the claim of a stopped call failed; the call is in doubt once its lease expires",
				"tool", c.Name, "error", rerr)
		}
	default:
		m.doubt(ctx, l, c, key, token, "was stopped as its lease could not be renewed", "error", err)
	}
	if runtime.DidNotRun(err) {
		return err
	}
	// A retry_safe tool's call too: it had the call, and may have made its
	// effect (a meter outside charges it); a duplicate takes the claim
	// over and runs under the same idempotency key.
	return &runtime.CallError{Layer: m.name, Message: "the call was stopped, as its claim could not be kept; it may have run",
		Err: runtime.MayHaveRun(fmt.Errorf("%w (the tool returned: %w)", lease.ErrLapsed, err))}
}

// doubt ends the claim of key under token in doubt, for ttl: the call
// (which what describes) may have had its effect, so a duplicate, in any
// process, fails in doubt at once. When the store cannot record it, the
// claim is left to expire into doubt, as if this process had crashed.
func (m *Idempotent) doubt(ctx context.Context, l runtime.Leaser, c *runtime.ToolCall, key string, token int64, what string, attrs ...any) {
	attrs = append([]any{"tool", c.Name, "idempotency_key", c.IdempotencyKey()}, attrs...)
	ok, err := l.Doubt(ctx, key, token, m.TTL.D())
	switch {
	case err != nil:
		m.logger.WarnContext(ctx, "idempotent: the call "+what+"; recording it in doubt failed, so its key is in doubt once its lease expires",
			append(attrs, "store_error", err)...)
	case !ok:
		m.logger.WarnContext(ctx, "idempotent: the call "+what+"; "+lease.Lost, attrs...)
	default:
		m.logger.WarnContext(ctx, "idempotent: the call "+what+"; its key is in doubt", attrs...)
	}
}

// publish stores res as the outcome of key under token. When the store
// fails, the result is sent again in the background while the claim is
// held (republish), so that a duplicate gets it instead of finding the
// call in doubt once the lease expires. With key_args the
// outcome is stored after the digest of the call's arguments (argsMark).
func (m *Idempotent) publish(ctx context.Context, l runtime.Leaser, c *runtime.ToolCall, key string, token int64, res []byte) {
	if m.compares(c) {
		d := m.digests(c)
		res = record(storedError{Message: argsNote, Args: d.Args, ArgsBy: d.By, Outcome: res})
	}
	ok, perr := l.Publish(context.WithoutCancel(ctx), key, token, res, m.TTL.D())
	var earlier *earlierKeyError
	switch {
	case errors.As(perr, &earlier):
		m.earlierKeyFailed(ctx, c, earlier)
	case perr != nil:
		m.logger.WarnContext(ctx, "idempotent: storing the result failed; sending it again while the call's claim is held",
			"tool", c.Name, "idempotency_key", c.IdempotencyKey(), "error", perr)
		m.republish(ctx, l, c, key, token, res)
	case !ok:
		m.logger.WarnContext(ctx, "idempotent: "+lease.Lost+" while the call ran; the result is not stored",
			"tool", c.Name, "idempotency_key", c.IdempotencyKey())
	}
}

// earlierKeyFailed logs a result stored under the call's key but not
// under the key an earlier build looks it up by (twin).
func (m *Idempotent) earlierKeyFailed(ctx context.Context, c *runtime.ToolCall, earlier *earlierKeyError) {
	m.logger.WarnContext(ctx, "idempotent: the result is stored, but not under the key an earlier build looks the call up by; a replica of an earlier build finds the call in doubt there once the lease expires, one of this build gets the result",
		"tool", c.Name, "error", earlier.err)
}

// errMark starts a stored outcome that is an error rather than a result:
// a JSON object whose key spells "!" as an escape, which encoding/json
// never writes, so no stored result starts with it. It is valid JSON, as
// every store's outcome must be.
const errMark = `{"\u0021ran":`

// storedError is the stored form of the error of a call that ran but whose
// result is unusable.
type storedError struct {
	// Message is the error's text.
	Message string `json:"message"`
	// BlockedBy and Block are the layer and message of the
	// *runtime.BlockedError in it, if any (a guard blocked the result).
	BlockedBy string `json:"blocked_by,omitempty"`
	Block     string `json:"block,omitempty"`
	// Args, ArgsBy and Outcome, when set, make the record not an error
	// but the outcome (a result, or a stored error) of a call whose
	// arguments had the digests Args and ArgsBy (argDigests): key_args, or
	// a key the caller supplied, keys calls that differ in their other
	// arguments alike. Message is then argsNote, for builds that do not
	// read them. Records written before ArgsBy hold Args alone; ArgsBy is
	// written even when empty (a call without arguments: omitzero), so
	// that such a record never reads as one of them.
	Args    string            `json:"args,omitempty"`
	ArgsBy  map[string]string `json:"args_by,omitzero"`
	Outcome json.RawMessage   `json:"outcome,omitempty"`
}

// storeErr encodes err as a stored outcome.
func storeErr(err error) []byte {
	se := storedError{Message: err.Error()}
	var b *runtime.BlockedError
	if errors.As(err, &b) {
		se.BlockedBy, se.Block = b.Layer, b.Message
	}
	return record(se)
}

// record encodes se as a stored outcome. Its Outcome is valid JSON, an
// outcome the layer encoded.
func record(se storedError) []byte {
	res, _ := json.Marshal(se) // strings and valid JSON only: cannot fail
	return append(append([]byte(errMark), res...), '}')
}

// storedErr decodes a stored outcome that is an error: a permanent
// *runtime.CallError naming the layer, marked runtime.Ran, wrapping the
// stored error (a *runtime.BlockedError when a guard blocked the result, so
// that it is classified blocked again).
func (m *Idempotent) storedErr(res []byte) (error, bool) {
	if !bytes.HasPrefix(res, []byte(errMark)) {
		return nil, false
	}
	var w struct {
		Ran storedError `json:"!ran"`
	}
	se := &w.Ran
	var inner error
	if err := json.Unmarshal(res, &w); err != nil {
		inner = fmt.Errorf("the stored error does not decode: %w", err)
	} else if se.BlockedBy != "" {
		inner = &runtime.BlockedError{Layer: se.BlockedBy, Message: se.Block}
	} else {
		inner = errors.New(se.Message)
	}
	return runtime.Ran(&runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name,
		Message: "the call ran earlier but its result could not be used; it does not run again", Err: inner}), true
}

func (m *Idempotent) storeErr(what string, err error) error {
	return runtime.StoreRefusal(m.name, fmt.Sprintf("idempotency store: cannot %s; the call did not run", what), err)
}

var (
	_ runtime.ToolWrapper  = (*Idempotent)(nil)
	_ runtime.ClaimVoucher = (*Idempotent)(nil)
	_ runtime.ToolKeyer    = (*Idempotent)(nil)
	_ runtime.CleanerUpper = (*Idempotent)(nil)
)
