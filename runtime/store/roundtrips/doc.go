// Package roundtrips counts the round trips each stateful layer makes to a
// shared store on its hot path, and measures what a call costs on each
// store kind. The test opens the redis and postgres stores over a dialer
// that counts, on every connection, each request the client sends after it
// has read an answer (one round trip, however many commands a pipeline or a
// script holds), and asserts the count: one round trip for an idempotent
// replay, a memoize hit, a rate limit check and an audit record; one before
// and one after the call for a budget. The benchmarks report the same count
// per operation beside the time. It has no exported API.
package roundtrips
