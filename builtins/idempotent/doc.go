// Package idempotent implements the idempotent builtin (stage tool): a
// side-effecting tool call runs at most once per logical call, and a
// duplicate replays the stored result.
//
// Scope: only calls to side-effecting tools are deduped: tools declared
// side_effecting, and tools whose effects nothing declares (a tool the plan
// does not declare that settings.allow_undeclared_tools lets run, an MCP
// tool without readOnlyHint), which the runtime takes as side-effecting. A
// call to a read-only tool passes through to the inner layers untouched (no
// key, no store access), so that a tool polled twice returns a fresh result
// each time.
//
// Key: the tool name, the run's tenant (runtime.Run.Tenant), the call's
// idempotency key (ToolCall.IdempotencyKey: derived from the run id, the
// tool and the canonical arguments) and the arguments' digest, hashed
// with SHA-256 (with settings.digest_key_env the digest, and so the
// derived key, is keyed: below). An idempotency key the caller supplied (the key of a
// redelivered job, an Idempotency-Key header) names one call, as a payment
// API's does: the key is then the tool, the tenant and that key, and the
// layer compares the arguments of a call that reuses it with those of the
// call it names, as with key_args (below): other arguments are refused,
// never run under it nor answered with the other call's outcome. Builds
// before keyed such a call on the digest too: a call claimed afresh under
// a supplied key also claims its key of then, without a takeover (two
// round trips more). An outcome there answers it (and is stored under the
// new key), a claim held there is waited for, and one in doubt leaves the
// call in doubt unless its tool is retry_safe; a free one is held with the
// call's claim (renewed, published, released or ended in doubt with it),
// so that a replica of an earlier build finds the call claimed, then its
// outcome with the arguments' digest (below), which a build that reads
// the digest replays and one before it refuses a duplicate with, and never
// runs it again. With key_args the key is the tool, the tenant and the named
// arguments only, so the same order refunded from two runs is refunded once;
// the layer then passes that key downstream as the call's idempotency key
// when the caller supplied none, and the call carries it from the pipeline's
// entry on (runtime.ToolKeyer), so that an audit outside the layer records
// the key the tool gets, and an *runtime.InDoubtError names it, for a
// person to look the call up by at the tool's provider. A key the caller
// supplied still names one call under key_args: the layer holds it (a
// record of its own, claimed before the call is and kept for ttl from the
// call's outcome, as the call's record is) for the
// key_args values of the first call that presents it, and refuses
// (blocked) a call that reuses it with other values, on any replica; the
// same order under two keys is still refunded once. That costs a call
// under a supplied key two round trips more. The layer's state lives in the store named
// by `store` (the default store when unset); a shared store (redis,
// postgres, sqlite) dedupes across processes.
//
// With key_args (or a supplied key), calls that differ in their other
// arguments share a key.
// The layer stores, with a call's outcome, the digest of each of its
// top-level arguments (of its canonical JSON, as runtime.ToolCall.ArgsDigest
// reads the arguments: without settings.digest_key_env a plain SHA-256,
// which keeps no argument's text but gives an argument of few possible
// values, a PIN or an amount, to anyone who reads the store and digests
// the candidates; keyed with it, below), and a later call under
// the key that differs in an
// argument vary_args does not name is refused, without running, with a
// *runtime.BlockedError naming the layer and the arguments that differ
// ("the idempotency key (key_args ...) was used earlier by a call with
// different arguments (amount)"), never the values: a client that sends
// another amount under an order refunded earlier must not believe that
// amount was refunded. vary_args is read when a call is compared, not when
// it was recorded: changing it between deployments applies to the records
// written before, and an identical retry is answered. Records written
// before the digest per argument hold one digest of the arguments, those
// named in the vary_args of then left out: a call whose digest, with the
// arguments vary_args names now left out or with none left out, is that
// digest is answered (an identical retry, unless vary_args lost a name
// since). Any other is refused, a call that adds an argument the recorded
// call lacked included, since the digest cannot tell an argument absent
// then from one vary_args named then: a record written while vary_args
// named an argument it names no longer refuses even an identical retry,
// until the record expires. When vary_args names arguments now, the
// refusal does not say the arguments differ, since the record cannot tell
// whether only those do ("... cannot tell whether only arguments vary_args
// (note) names now differ"). A
// call with other arguments does not share the flight of a duplicate
// running in this process (step 1): it meets its claim in the store, as a
// duplicate in another process does. A claim held is waited for as
// before; one in doubt is taken over by a retry_safe tool only for the
// arguments of the call that made it (step 6). A record without a digest
// (written before it was stored, or of a call keyed on its run, whose key
// holds the arguments' digest) is replayed to any call of its key. The digest and the outcome are stored inside the
// form of a stored error (step 5), so that a build that does not read the
// digest refuses a duplicate rather than replay the outcome unchecked.
//
// Digest key: with settings.digest_key_env (runtime.BuildContext.Digester)
// every digest the layer writes of a call's arguments is an HMAC-SHA256
// under the key, written "hmac-sha256:HEX" (the digests of a record and of
// a claim's note), and so is the store key of a call keyed on its run
// (its idempotency key and digest are keyed). A reader of the store (or of
// an audit trail, which holds the idempotency key) can no longer test
// candidates against them. A key the caller supplied holds no argument and
// is the same either way. So is the key of key_args, which the layer also
// passes downstream as the call's idempotency key: a plain SHA-256 of the
// tool, the tenant and the key arguments, so that the call's record is
// found whether the deployment has the digest key or not, and the tool
// gets the same key across a change of it. A reader can test a guessed
// value of the key arguments (an order id) against it, not of the others:
// name in key_args what identifies the call, not a secret. Builds before
// this one hashed it with the digest key. Records
// written without the key are still read: a call claimed afresh under its
// keyed key first looks up its key of before (the plain form; for a
// supplied key, that of builds before the comparison of arguments under
// it, earlier; under key_args, the keyed key of builds before this one),
// as a supplied key's earlier record is looked up: an
// outcome there answers it (compared, under key_args or a supplied key,
// with the plain digests that record holds, which their form tells apart:
// an identical retry is answered, other arguments refused) and is stored
// under the keyed key; a claim held there is waited for; one in doubt
// leaves the call in doubt (its *runtime.InDoubtError, on a later retry
// too, names the idempotency key the call was given before the switch)
// unless its tool is retry_safe, when it runs again with that key, by
// which the tool tells the retry from a new call. A retry_safe call that
// may have run and failed before the switch (a timeout, a cancellation, a
// panic: step 4) left its claim in doubt too, so its retry is given the
// idempotency key of before (and so is each retry after one that stopped
// so after the switch: a claim in doubt under the keyed key is looked up
// under the plain key too); one that failed without running left none,
// and its retry gets the keyed key (under key_args, the same key). (A
// build before this one released the claim of a retry_safe call that may
// have run: such a call, retried after the switch, gets the keyed key,
// which a tool that dedupes on it has not seen, but under key_args.) A free plain key
// is released at once: the layer never writes one, so a replica still
// without the key does not see a call a replica with it runs (set the key
// on every replica at once, or stop the ones without it first). A resumed
// agent turn recorded before the switch, with the plain key, is answered
// through that lookup. That lookup is a claim and a release more, two round
// trips to the store for each new call (4 against 2, measured on Redis),
// for as long as plain_lookup is true (the default): set it false once ttl
// has passed since every replica had the key, and records of before still
// unexpired are no longer read (a call they answered, keyed on its run,
// runs again if retried; the record of a call under key_args or a supplied
// key is under the same key either way, but for a key_args record a build
// before this one wrote with the key). Removing the key, or changing it, leaves the
// records written with it unread: calls keyed on their run run again if
// retried (their store key holds the keyed digest). A call under key_args
// or a supplied key finds its record, whose key holds nothing keyed, and
// is refused without running: its keyed digests cannot be compared with
// the call's arguments ("... whose arguments' digests are keyed with
// settings.digest_key_env, which this deployment does not have"; with
// another key, under key_args, "... keyed with another
// settings.digest_key_env key (changed since)", and under a supplied key,
// whose digests may also differ for other arguments, "... with different
// arguments (amount, order_id), or whose arguments' digests are keyed
// with another settings.digest_key_env key (changed since)" when every
// argument differs). A key_args record a build before this one wrote with
// the key is under its keyed key, which is not found without it (or with
// another): such a call runs again if retried.
// Keep a key until its records expire (ttl), or accept that.
//
// A side-effecting call whose arguments cannot be canonicalised (a NaN or
// infinite number, a channel: runtime.ToolCall.ArgsDigestErr) has no key
// that tells it apart from another such call: it is refused, without
// running, with a permanent *runtime.CallError naming the layer ("arguments
// cannot be canonicalised").
//
// Protocol, per call (docs/state.md states the contract across processes):
//
//  1. In process, concurrent duplicates are collapsed: the first call leads,
//     the others wait for it and share its outcome (the result, or its
//     error). Followers that shared a result, or the error of a call that
//     ran (step 5), are reported deduped.
//  2. The leader asks the store's runtime.Leaser for the key, in one round
//     trip. A published result is replayed (with key_args, only to a call
//     whose arguments match those of the call that made it; decoded from its JSON, numbers
//     as runtime.DecodeArgs decodes them: an integer above 2^53 is the
//     int64 the call returned, not a float64 neighbour): the inner layers do not run,
//     Meta.Deduped and Meta.Cached are set (an audit layer outside records
//     "deduped"; meters do not charge it).
//  3. A lease held by another caller (in any process) is waited for,
//     polling with a growing interval and honouring the call's context,
//     until it holds a result or is released (the other call failed). A
//     duplicate whose context ends while it waits (here, or for a leader in
//     this process, step 1) fails with the context's error marked
//     runtime.NotRun: it never started the call, so an audit outside does
//     not record it in doubt and a meter does not charge it.
//  4. A free key is leased for lease_ttl with a fencing token, and the
//     leader runs the inner layers, renewing the lease every third of
//     lease_ttl. On success the result is published for `ttl` (only while
//     the token still holds the lease; a publish the store failed is sent
//     again in the background, renewing the claim, until it is stored or
//     the claim is gone or held by another; at most 256 results of a layer
//     wait so at once, and one beyond that is logged and left to expire
//     into doubt); on failure the lease is released,
//     so a failure is never stored and the next duplicate runs the tool
//     again (a call that ran is another matter: step 5). A call that panics instead of returning, or fails because its
//     context was cancelled while it ran (unless its error proves it was
//     never sent, runtime.DidNotRun: an MCP call cancelled while it
//     waited for its server's tools to be listed again), or fails with a timeout
//     (runtime.KindOf "timeout": its own deadline, an upstream's 504), or
//     fails in a way that leaves its outcome unknown (runtime.MayHaveRun,
//     runtime.ErrOutcomeUnrecorded), may have made its effect first: its
//     claim is ended in doubt at once under its token
//     (runtime.Leaser.Doubt), so that a duplicate, in any process, fails
//     in doubt (step 6) without waiting out lease_ttl, and the key stays
//     in doubt for `ttl`; a retry_safe tool's duplicate takes the claim
//     over and runs again under the same idempotency key (step 6), which
//     tells the tool it is a retry even across the switch to a digest key
//     (a released claim would leave nothing to carry that key). When the store
//     cannot record that, the failure is logged and the lease left to
//     expire into doubt, as if its process had crashed. A leader whose
//     lease could not be renewed (no renewal confirmed by a sixth of
//     lease_ttl before the lease may end, or one that found it taken over)
//     is stopped: its call's context ends, so that the call ends before
//     another process can take the claim over. A call that fails so is handled as a cancelled one (unless its
//     error proves it never ran): its claim is ended in doubt, and its
//     error is marked runtime.MayHaveRun, a retry_safe tool's too (it had
//     the call and may have made its effect: a meter outside charges it;
//     its duplicate takes the claim over and runs under the same
//     idempotency key). A result it returns all the same is published
//     only while its token still holds the lease. A lease granted so late
//     that it may lapse already (a slow store answered after most of
//     lease_ttl), or a call whose context ended before the inner layers
//     could start, does not start them: the lease is released and the call
//     fails as not run (runtime.DidNotRun; a late grant with an error
//     marked runtime.ErrStoreUnavailable, which a retry may try again), so
//     that the next duplicate runs the tool rather than find it in doubt.
//  5. A call that ran but whose result cannot be used fails with an error
//     marked runtime.Ran (runtime.ErrRan): a result an inner layer blocked
//     (a guard of phase "after" inside this layer), a result an
//     output_coerce inside this layer refused as off its result_schema, a
//     result an MCP upstream sent over the gateway's limit. Its effect
//     stands, so that error is
//     published as the call's outcome, like a result: a duplicate, in any
//     process, gets a permanent *runtime.CallError naming the layer ("the
//     call ran earlier but its result could not be used; it does not run
//     again") wrapping the stored error (a *runtime.BlockedError again when
//     a guard blocked the result), marked runtime.Ran, deduped, without
//     running the tool. A successful result that does not encode as JSON is
//     returned to its caller, and its duplicates get such an error ("the
//     result does not encode as JSON, so it was not stored").
//  6. A lease that expired without an outcome (its holder crashed after
//     claiming the call), or that its holder ended in doubt (step 4), is in
//     doubt: the tool may or may not have run. A
//     retry_safe tool runs again, taking over the lease with a new token
//     and the same idempotency key, which it passes downstream, when its
//     arguments are those of the call that made the claim: with key_args,
//     or under a key the caller supplied, the claim keeps the call's
//     digests as its note (runtime.Leaser
//     AcquireAs), the store takes a claim over only for its note, and a
//     call whose arguments differ (vary_args aside) is refused, without
//     running, with a *runtime.BlockedError naming the layer and the
//     arguments ("... is claimed by a call that stopped without an
//     outcome (in doubt), with different arguments (amount)"), the claim
//     left in doubt. A claim without a note (made by a build before them)
//     is taken over as before, and keeps the digests of the call that
//     took it from then on; one whose note does not decode is not: the
//     call fails in doubt (*runtime.InDoubtError, Reason
//     runtime.InDoubtNoteUnreadable, saying the note is unreadable). Any other
//     tool fails with a *runtime.InDoubtError, which runtime.Classify
//     reports as final (ClassInDoubt), and stays in doubt for `ttl`.
//
// Resumed agent turns: a turn resumed from a checkpoint (docs/checkpoints.md)
// may hold a call to a side-effecting tool, not retry_safe, without a
// result: its worker stopped after the model asked for it. When this layer
// covers the tool and its store is redis or postgres (runtime.SharedLeaser),
// the turn runs that call through the tool chain instead of ending in
// doubt, and the layer answers for it: no claim of the key in the store
// means the call never started (the turn recorded it before any claim, and
// a claim made since would still be kept), so it is claimed and runs now;
// a published result is replayed; a claim held or in doubt ends the turn
// in doubt (*runtime.InDoubtError naming the layer). When `ttl` less
// runtime.StoreClockMargin (a second) has passed since the turn recorded
// the call, by the store's own clock (runtime.StoreClock: the turn
// recorded the store's time with its identity, and the layer reads it
// again with the identity), a claim could have expired: the call is in
// doubt. The clocks of the processes that recorded and resume the turn
// play no part. A turn recorded without the store's time (an earlier
// build, a store that does not tell it) is judged by its process's clock:
// past `ttl` less runtime.ResumeClockSkew (a minute) by the resuming
// process's clock, the call is in doubt without asking the store. The turn recorded, with the call, the identity
// of the store it would be claimed in (runtime.SharedLeaser.StoreID): a
// store that has another identity now (flushed, dropped and created again,
// or another database, prefix, schema or server the layer points at since)
// never saw the claim, and the call is in doubt. A memory store (lost with
// its process) or a sqlite file (one host's) cannot tell, and the call
// stays in doubt as before. These checks come before step 1: a resumed
// call that passes them and finds a duplicate of its key running in this
// process is answered as the duplicate's claim was (a claim made where
// none was: it never started; a published outcome: replayed) and shares
// its outcome, an error included.
//
// Store failures before the call fail closed: the call does not run and
// returns a *runtime.CallError naming the layer (unclassified, so a retry
// outside may try again). Each attempt claims the key under an owner nonce;
// when the claim's answer is lost (a timeout after the store applied it),
// the layer keeps the nonce, and the next attempt of the key in this
// process presents it and gets the claim back, instead of finding it held
// and then in doubt though the call never ran. A failure to publish the result after a
// successful call (or of the error of a call that ran) is logged and the
// result (or error) returned; the key is then in doubt once the lease
// expires, so a duplicate never silently runs a tool
// that is not retry_safe twice.
package idempotent
