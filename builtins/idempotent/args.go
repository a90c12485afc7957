package idempotent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentc-dev/agentc/runtime"
)

// argsNote is the message of a record that holds the digest of its call's
// arguments (storedError.Args), for a build of the layer that reads the
// record as the stored error of a call that ran, as builds before the
// digest do: they refuse a duplicate with it rather than return the
// outcome unchecked.
const argsNote = "the outcome was stored with the digest of its call's arguments, which this build cannot compare; a later build replays it"

// argDigests is what a record, or a claim, holds of its call's arguments.
type argDigests struct {
	// Args is the digest of the arguments, those in vary_args left out
	// (argsDigest): the one digest records held before By, and still
	// hold for the builds that read only it.
	Args string `json:"args,omitempty"`
	// By holds the digest of each top-level argument, by its name, every
	// argument included: a call is compared on the arguments vary_args
	// names at the time it is compared, not when it was recorded. Kept
	// when empty (a call without arguments: omitzero), so that the claim
	// of such a call never reads as one holding Args alone.
	By map[string]string `json:"by,omitzero"`
}

// digests returns the digests of c's arguments, made with the layer's
// Digester (keyed with settings.digest_key_env). The layer computes them
// only for calls whose arguments canonicalise.
func (m *Idempotent) digests(c *runtime.ToolCall) argDigests {
	return m.digestsBy(m.digester, c)
}

// digestsBy returns the digests of c's arguments made with d.
func (m *Idempotent) digestsBy(d runtime.Digester, c *runtime.ToolCall) argDigests {
	by := make(map[string]string, len(c.Args))
	for k, v := range c.Args {
		by[k] = digestOf(d, v)
	}
	return argDigests{Args: m.argsDigestBy(d, c), By: by}
}

// digestOf is the digest, made with d, of v's canonical JSON (equal
// numbers alike, as in the arguments' digest). v is a part of arguments
// that canonicalise.
func digestOf(d runtime.Digester, v any) string {
	s, _ := d.Args(v)
	return s
}

// argsDigest returns the one digest of c's arguments that records hold:
// the digest of its canonical arguments (runtime.ToolCall.ArgsDigest),
// those named in vary_args left out.
func (m *Idempotent) argsDigest(c *runtime.ToolCall) string {
	return m.argsDigestBy(m.digester, c)
}

// argsDigestBy is argsDigest made with d.
func (m *Idempotent) argsDigestBy(d runtime.Digester, c *runtime.ToolCall) string {
	if len(m.VaryArgs) == 0 {
		return fullDigest(d, c)
	}
	kept := make(map[string]any, len(c.Args))
	for k, v := range c.Args {
		if !slices.Contains(m.VaryArgs, k) {
			kept[k] = v
		}
	}
	return digestOf(d, kept)
}

// fullDigest is the digest of all c's arguments made with d: the call's
// own (runtime.ToolCall.ArgsDigest) when the pipeline digests as d does.
func fullDigest(d runtime.Digester, c *runtime.ToolCall) string {
	if d.Keyed() == c.Digester().Keyed() {
		return c.ArgsDigest()
	}
	return digestOf(d, c.Args)
}

// recordDigester returns the Digester that made the digests d a record or
// a claim holds: the layer's when they are keyed
// (runtime.KeyedDigestPrefix), the plain one when they were written
// without a digest key (before a deployment set one). A keyed record read
// by a layer without the key matches no call.
func (m *Idempotent) recordDigester(d argDigests) runtime.Digester {
	if keyedDigests(d) {
		return m.digester
	}
	return runtime.Digester{}
}

// keyedDigests reports whether the digests d a record or a claim holds
// were made with a digest key (runtime.KeyedDigestPrefix).
func keyedDigests(d argDigests) bool {
	if d.Args != "" {
		return strings.HasPrefix(d.Args, runtime.KeyedDigestPrefix)
	}
	for _, v := range d.By {
		return strings.HasPrefix(v, runtime.KeyedDigestPrefix)
	}
	return false
}

// verdict is how a call compares with the call whose digests a record or
// a claim holds.
type verdict int

const (
	// same: they match on every argument compared; the record answers
	// the call.
	same verdict = iota
	// differs: they differ in a compared argument (named when the record
	// holds a digest per argument).
	differs
	// unsure: the record holds one digest, which the call does not match,
	// and vary_args names arguments now: the record cannot tell whether
	// only those differ (vary_args changed since it was written) or
	// others too.
	unsure
	// sealed: the record's digests are keyed and the layer has no digest
	// key (removed since it was written): they match no call.
	sealed
	// rekeyed: the record's digests are keyed and differ in a key_args
	// argument, whose value made the store key the call found it under:
	// they were keyed with another digest key (changed since).
	rekeyed
	// differsOrRekeyed: the record's digests are keyed and differ in
	// every argument both calls have: the arguments differ, or the digest
	// key changed since it was written, which cannot be told apart.
	differsOrRekeyed
)

// compare compares c with the call whose digests d a record or a claim
// holds, returning the names of the compared arguments that differ when d
// holds a digest per argument.
//
// With a digest per argument, the arguments compared are those of either
// call that vary_args does not name now. With one digest, taken with the
// vary_args of then (unknown now), the call matches when its digest with
// those vary_args names now left out, or with none left out, is that
// digest (an identical retry always matches). Nothing else is tried: the
// digest cannot tell an argument the recorded call lacked from one
// vary_args named then, and every argument counts, one a tool gains later
// included.
func (m *Idempotent) compare(c *runtime.ToolCall, d argDigests) (verdict, []string) {
	if !m.digester.Keyed() && keyedDigests(d) {
		return sealed, nil
	}
	dg := m.recordDigester(d)
	if d.By != nil {
		mine := m.digestsBy(dg, c).By
		var diff []string
		for _, k := range slices.Sorted(maps.Keys(mergeKeys(mine, d.By))) {
			if !slices.Contains(m.VaryArgs, k) && mine[k] != d.By[k] {
				diff = append(diff, k)
			}
		}
		if len(diff) > 0 {
			return m.keyedDiff(mine, d, diff), diff
		}
		return same, nil
	}
	if d.Args == m.argsDigestBy(dg, c) || d.Args == fullDigest(dg, c) {
		return same, nil
	}
	if len(m.VaryArgs) > 0 {
		return unsure, nil
	}
	return differs, nil
}

// keyedDiff returns the verdict of a call whose digests mine differ in
// diff from the keyed digests d of a record: a key_args argument cannot
// differ but for a digest key changed since (rekeyed); every argument both
// hold differing may be one (differsOrRekeyed).
func (m *Idempotent) keyedDiff(mine map[string]string, d argDigests, diff []string) verdict {
	if !keyedDigests(d) {
		return differs
	}
	both := 0
	for k := range mine {
		if _, ok := d.By[k]; ok {
			both++
		}
	}
	n := 0
	for _, k := range diff {
		_, ok := d.By[k]
		_, ok2 := mine[k]
		if !ok || !ok2 {
			continue
		}
		if slices.Contains(m.KeyArgs, k) {
			return rekeyed
		}
		n++
	}
	if n > 0 && n == both {
		return differsOrRekeyed
	}
	return differs
}

// mergeKeys returns a set of the keys of a and b.
func mergeKeys(a, b map[string]string) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// keyLabel names the key a refusal speaks of.
func (m *Idempotent) keyLabel() string {
	if len(m.KeyArgs) > 0 {
		return "the idempotency key (key_args " + strings.Join(m.KeyArgs, ", ") + ")"
	}
	return "the idempotency key the caller supplied"
}

// refusal is the error of a call refused because the call whose digests
// a record (or a claim: claimed) holds differs from it (compare).
func (m *Idempotent) refusal(v verdict, diff []string, claimed bool) error {
	earlier := "was used earlier by a call"
	tail := "; this call did not run, and the earlier call's outcome is not returned"
	if claimed {
		earlier = "is claimed by a call that stopped without an outcome (in doubt),"
		tail = "; this call did not run in its place"
	}
	var msg string
	switch {
	case v == sealed:
		msg = fmt.Sprintf("%s %s whose arguments' digests are keyed with settings.digest_key_env, which this deployment does not have (removed since): they cannot be compared with this call's arguments%s",
			m.keyLabel(), earlier, tail)
	case v == rekeyed:
		msg = fmt.Sprintf("%s %s whose arguments' digests are keyed with another settings.digest_key_env key (changed since): they cannot be compared with this call's arguments%s",
			m.keyLabel(), earlier, tail)
	case v == differsOrRekeyed:
		msg = fmt.Sprintf("%s %s with different arguments (%s), or whose arguments' digests are keyed with another settings.digest_key_env key (changed since), which cannot be told apart%s",
			m.keyLabel(), earlier, strings.Join(diff, ", "), tail)
	case v == unsure:
		msg = fmt.Sprintf("%s %s whose arguments this call does not match: its record holds one digest of them, taken with the vary_args of then, and cannot tell whether only arguments vary_args (%s) names now differ%s (a call with the earlier call's arguments gets it)",
			m.keyLabel(), earlier, strings.Join(m.VaryArgs, ", "), tail)
	case len(diff) > 0:
		msg = fmt.Sprintf("%s %s with different arguments (%s)%s", m.keyLabel(), earlier, strings.Join(diff, ", "), tail)
	default:
		msg = fmt.Sprintf("%s %s with different arguments%s", m.keyLabel(), earlier, tail)
	}
	return &runtime.BlockedError{Layer: m.name, Message: msg}
}

// claimNote is the note the layer keeps with a claim of c when it
// compares arguments under its key (compares): c's digests, so that a call
// with other arguments never takes the claim over once it is in doubt
// (retakes). nil when the key holds every argument's digest.
func (m *Idempotent) claimNote(c *runtime.ToolCall) []byte {
	if !m.compares(c) {
		return nil
	}
	b, _ := json.Marshal(m.digests(c)) // strings only: cannot fail
	return b
}

// retakes checks that c may take over a claim in doubt whose note is
// note: one made by a call with c's arguments (compare), or without a
// note (by a build before notes, or without key_args), which is taken over
// as before. A note that does not decode leaves the call in doubt, saying
// so (runtime.InDoubtNoteUnreadable).
func (m *Idempotent) retakes(c *runtime.ToolCall, note []byte) error {
	if len(note) == 0 {
		return nil
	}
	var d argDigests
	err := json.Unmarshal(note, &d)
	if err == nil && d.Args == "" && d.By == nil {
		err = errors.New("it holds no digest")
	}
	if err != nil {
		return &runtime.InDoubtError{Layer: m.name, Tool: c.Name, IdempotencyKey: c.IdempotencyKey(), Reason: runtime.InDoubtNoteUnreadable, Unreadable: err}
	}
	if v, diff := m.compare(c, d); v != same {
		return m.refusal(v, diff, true)
	}
	return nil
}

// compares reports whether c's key may be used by calls with other
// arguments, which the layer then compares with c's (its record and its
// claim hold c's digests): with key_args, or under an idempotency key the
// caller supplied (suppliedKey). A key derived from the run holds the
// arguments' digest.
func (m *Idempotent) compares(c *runtime.ToolCall) bool {
	return len(m.KeyArgs) > 0 || m.suppliedKey(c)
}

// suppliedKey reports whether c, without key_args, is keyed on the
// idempotency key its caller supplied (runtime.Meta.IdempotencyKeySupplied):
// the key names one call, as a payment API's does, and a call that reuses
// it with other arguments is refused, never run under it nor answered
// with the other call's outcome.
func (m *Idempotent) suppliedKey(c *runtime.ToolCall) bool {
	return len(m.KeyArgs) == 0 && c.Meta.IdempotencyKeySupplied()
}

// earlier looks for the outcome of c, claimed afresh under key (token),
// that was stored under the key c had before (old: older): a build before
// the comparison of arguments under a supplied key keyed such a call on
// its arguments' digest too (Key), and a deployment without a digest key
// wrote the plain form of every key. A call retried across the upgrade, or
// across the setting of the key, must not run again. It claims old
// without a takeover, as any claim. Free, the claim is kept while c runs
// when keep (l: twin), so that a replica of the earlier build meets c
// there, as c would meet it; else (a plain key, which the layer never
// writes once it has a digest key) it is released at once. An outcome
// there is published under key (with c's digests, so that other
// arguments are refused from then on) and returned; a claim held there
// (a replica of the earlier build runs the call) releases key, and wait
// asks the caller to ask again later; a claim in doubt there leaves c in
// doubt (key too, under its note), unless its tool is retry_safe, when it
// runs under key with the same idempotency key.
func (m *Idempotent) earlier(ctx context.Context, c *runtime.ToolCall, key string, token int64, old string, keep bool) (l runtime.Leaser, res []byte, wait bool, err error) {
	wctx := context.WithoutCancel(ctx)
	owner := m.owners.take(old)
	g, err := m.leaser.AcquireAs(ctx, old, owner, nil, m.LeaseTTL.D(), m.TTL.D(), false)
	if err != nil {
		m.owners.leave(old, owner, m.clock.Now(), max(m.TTL.D(), m.LeaseTTL.D()))
		m.release(wctx, c, key, token)
		if ctx.Err() != nil {
			return nil, nil, false, runtime.NotRun(ctx.Err()) // the call was not started
		}
		return nil, nil, false, m.storeErr("look up the call's record under its key of before", err)
	}
	switch g.Status {
	case runtime.LeaseAcquired:
		if !keep {
			m.release(wctx, c, old, g.Token)
			return m.leaser, nil, false, nil
		}
		return &twin{Leaser: m.leaser, old: old, token: g.Token}, nil, false, nil
	case runtime.LeaseDone:
		// The record there may be this build's (twin), holding the
		// call's digests: its outcome is published under key, never the
		// record itself, which would be wrapped twice.
		res, err := m.matching(c, g.Result)
		if err != nil {
			m.release(wctx, c, key, token)
			return nil, nil, false, err
		}
		m.publish(ctx, m.leaser, c, key, token, res)
		return nil, res, false, nil
	case runtime.LeaseHeld:
		m.release(wctx, c, key, token)
		return nil, nil, true, nil
	}
	// In doubt under its key of before: the call ran then with the
	// idempotency key it had then, by which the tool tells a retry from a
	// new call and a person looks the call up.
	m.givenBefore(c, old, keep)
	if c.Tool.RetrySafe {
		return m.leaser, nil, false, nil
	}
	m.doubt(wctx, m.leaser, c, key, token, "was claimed under its key of before (by an earlier build, or without the digest key) and is in doubt there")
	if g.Unreadable != nil {
		return nil, nil, false, m.unreadable(ctx, c, old, g.Unreadable)
	}
	return nil, nil, false, &runtime.InDoubtError{Layer: m.name, Tool: c.Name, IdempotencyKey: c.IdempotencyKey()}
}

// unreadable logs that the record of c under key does not decode (why)
// and returns the error of c, in doubt for it.
func (m *Idempotent) unreadable(ctx context.Context, c *runtime.ToolCall, key string, why error) error {
	m.logger.WarnContext(ctx, "idempotent: the call's idempotency record is unreadable; the call is in doubt and does not run",
		"tool", c.Name, "store", runtime.StoreName(m.Store), "key", key, "error", why)
	return &runtime.InDoubtError{Layer: m.name, Tool: c.Name, IdempotencyKey: c.IdempotencyKey(), Unreadable: why}
}

// givenBefore gives c the idempotency key a call claimed under old (its key
// of before: older, keep) was given: a supplied key is the same; under
// key_args, the key of the builds that hashed it with the digest key; else
// the key derived from its run and its arguments' plain digest.
func (m *Idempotent) givenBefore(c *runtime.ToolCall, old string, keep bool) {
	switch {
	case keep || c.Meta.IdempotencyKeySupplied():
	case len(m.KeyArgs) > 0:
		c.Meta.IdempotencyKey = old[len(keyPrefix):]
	default:
		c.Meta.IdempotencyKey = c.PlainForm().IdempotencyKey()
	}
}

// inDoubt is the error of c, found in doubt under its key. With a digest
// key, the claim there may be one the layer ended in doubt because the
// call was in doubt under its key of before (earlier): in doubt there
// too, the call ran under that key, and the error names the idempotency
// key it was given then (givenBefore), and one whose record there does
// not decode says so. That look is one round trip, made only for a call
// in doubt.
func (m *Idempotent) inDoubt(ctx context.Context, c *runtime.ToolCall) error {
	if old, keep := m.older(c); old != "" && !keep {
		g, err := m.leaser.Acquire(ctx, old, m.LeaseTTL.D(), m.TTL.D(), false)
		switch {
		case err != nil:
		case g.Status == runtime.LeaseInDoubt:
			m.givenBefore(c, old, keep)
			if g.Unreadable != nil {
				return m.unreadable(ctx, c, old, g.Unreadable)
			}
		case g.Status == runtime.LeaseAcquired:
			m.release(context.WithoutCancel(ctx), c, old, g.Token)
		}
	}
	return &runtime.InDoubtError{Layer: m.name, Tool: c.Name, IdempotencyKey: c.IdempotencyKey()}
}

// twin is the layer's store as a call keyed on a supplied key sees it
// while it also holds, under token, the claim of its key of an earlier
// build (old; earlier): what the call does to its claim (renew, publish,
// release, end in doubt) is done to that one too. A replica of the
// earlier build finds the call claimed while it runs, then its outcome
// with the arguments' digests (which a build that reads the digest
// replays, and one before it refuses a duplicate with: argsNote), or in
// doubt. A renewal holds only when both claims are renewed.
type twin struct {
	runtime.Leaser
	old   string
	token int64
}

// Renew implements runtime.Leaser.
func (t *twin) Renew(ctx context.Context, key string, token int64, lease time.Duration) (bool, error) {
	ok, err := t.Leaser.Renew(ctx, key, token, lease)
	if err != nil || !ok {
		return ok, err
	}
	return t.Leaser.Renew(ctx, t.old, t.token, lease)
}

// Publish implements runtime.Leaser. A result stored under key but not
// under old is stored (true), with an *earlierKeyError.
func (t *twin) Publish(ctx context.Context, key string, token int64, result []byte, keep time.Duration) (bool, error) {
	ok, err := t.Leaser.Publish(ctx, key, token, result, keep)
	if err != nil || !ok {
		return ok, err
	}
	if ok, err := t.Leaser.Publish(ctx, t.old, t.token, result, keep); err != nil || !ok {
		if err == nil {
			err = errors.New("the claim there was lost (it outlived lease_ttl without renewal)")
		}
		return true, &earlierKeyError{err}
	}
	return true, nil
}

// earlierKeyError is the failure to store a result under the key of an
// earlier build (twin) once it was stored under the call's own key.
type earlierKeyError struct{ err error }

func (e *earlierKeyError) Error() string { return e.err.Error() }
func (e *earlierKeyError) Unwrap() error { return e.err }

// Release implements runtime.Leaser.
func (t *twin) Release(ctx context.Context, key string, token int64) error {
	return errors.Join(t.Leaser.Release(ctx, key, token), t.Leaser.Release(ctx, t.old, t.token))
}

// Doubt implements runtime.Leaser.
func (t *twin) Doubt(ctx context.Context, key string, token int64, keep time.Duration) (bool, error) {
	ok, err := t.Leaser.Doubt(ctx, key, token, keep)
	if err != nil || !ok {
		return ok, err
	}
	return t.Leaser.Doubt(ctx, t.old, t.token, keep)
}

// release drops the claim (key, token) of c, which did not run, logging a
// failure: the key is then in doubt once its lease expires.
func (m *Idempotent) release(ctx context.Context, c *runtime.ToolCall, key string, token int64) {
	if err := m.leaser.Release(ctx, key, token); err != nil {
		m.logger.WarnContext(ctx, "idempotent: releasing a claim of a call that did not run failed; its key is in doubt once its lease expires",
			"tool", c.Name, "error", err)
	}
}

// matching returns the outcome of the record res, refusing c when the
// record holds the digests of other arguments than c's (compare): the key
// was used by another call, and its outcome is not c's. A record without
// a digest is the outcome alone.
func (m *Idempotent) matching(c *runtime.ToolCall, res []byte) ([]byte, error) {
	if !bytes.HasPrefix(res, []byte(errMark)) {
		return res, nil
	}
	var w struct {
		Ran storedError `json:"!ran"`
	}
	if err := json.Unmarshal(res, &w); err != nil || w.Ran.Args == "" && w.Ran.ArgsBy == nil {
		// A stored error: storedErr reads it.
		return res, nil
	}
	if len(w.Ran.Outcome) == 0 {
		return nil, &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name,
			Message: "the stored record of this call holds no outcome; the call did not run again"}
	}
	if v, diff := m.compare(c, argDigests{Args: w.Ran.Args, By: w.Ran.ArgsBy}); v != same {
		return nil, m.refusal(v, diff, false)
	}
	return w.Ran.Outcome, nil
}
