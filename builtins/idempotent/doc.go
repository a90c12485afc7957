// Package idempotent implements the idempotent builtin (stage tool): a
// side-effecting tool call runs at most once per logical call, and a
// duplicate replays the stored result.
//
// Scope: only calls to tools declared side_effecting are deduped. A call to
// a read-only tool, or to a tool the plan does not declare, passes through
// to the inner layers untouched (no key, no store access), so that a tool
// polled twice returns a fresh result each time.
//
// Key: the tool name, the call's idempotency key (ToolCall.IdempotencyKey:
// derived from the run id, the tool and the canonical arguments, unless the
// caller supplied one, for example the key of a redelivered job) and the
// arguments' digest, hashed with SHA-256. The layer's state lives in the
// key-value store named by `store` (the default store when unset); a shared
// store (sqlite, or a networked KV) dedupes across processes.
//
// A side-effecting call whose arguments cannot be canonicalised (a NaN or
// infinite number, a channel: runtime.ToolCall.ArgsDigestErr) has no key
// that tells it apart from another such call: it is refused, without
// running, with a permanent *runtime.CallError naming the layer ("arguments
// cannot be canonicalised").
//
// Protocol, per call:
//
//  1. In process, concurrent duplicates are collapsed: the first call leads,
//     the others wait for it and share its outcome (the result, or its
//     error). Followers that shared a result are reported deduped.
//  2. The leader reads the key. A stored result is replayed: the inner
//     layers do not run, Meta.Deduped and Meta.Cached are set (a scenario
//     step shows "deduped": true; an audit layer outside records
//     "deduped"; meters do not charge it). The replayed value is the JSON
//     decoding of the result.
//  3. Otherwise the leader claims the key with KV.SetIfAbsent (a pending
//     record with a lease of Lease, five minutes by default). A claim held
//     by another process is waited for (polling the key, honouring the
//     call's context) until it holds a result, which is replayed, or
//     disappears (the other call failed), and the claim is tried again. A
//     claim left by a crashed process blocks duplicates until its lease
//     expires; a call running longer than the lease may run twice.
//  4. The leader runs the inner layers. On success the result is stored
//     with the layer's `ttl`; on failure the claim is deleted, so a failure
//     is never stored and the next duplicate runs the tool again. A result
//     that does not encode as JSON is returned but not stored (logged).
//
// Store failures before the call fail closed: the call does not run and
// returns a *runtime.CallError naming the layer (unclassified, so a retry
// outside may try again). A failure to store the result after a successful
// call is logged and the result returned; the pending claim is deleted when
// possible, else it expires with its lease.
package idempotent
