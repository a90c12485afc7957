// Package crossproc holds the tests that prove the guarantees of the shared
// store kinds (redis, postgres) across processes: the test binary re-executes
// itself as worker processes that share one server, and the parent checks
// what they did together (one execution of an idempotent call, one inner
// execution of a single-flight memoize miss, a rate limit and a budget kept
// by all of them, an audit trail that survives kill -9, a store outage that
// fails closed), the SQLite audit sink under kill -9, and an agent turn
// killed midway and resumed by another process from its SQLite checkpoints
// (no refund made twice, the one cut short in doubt).
//
// A worker still running after two minutes, or near the test's deadline,
// is stuck: its goroutines are dumped (SIGQUIT), it is killed and the test
// fails with its output. A worker whose test process is gone (its stdin
// ends) exits, so none outlives the test or holds its output open.
//
// Measured under kill -9: 200 kills on PostgreSQL, 4,902 acknowledged
// calls, none without its outcome row (44 s; 20 kills by default,
// AGENTC_XPROC_AUDIT_RUNS sets more); 220 kills on SQLite, 2,958
// acknowledged calls, none without its outcome record, integrity_check ok
// (CI runs 30). It has no exported API.
package crossproc
