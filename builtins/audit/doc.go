// Package audit implements the audit builtin (stages tool and turn): one
// durable record per invocation of the layer, failures included, with a
// record of intent written before the call.
//
// Each invocation writes two runtime.AuditRecord values to the sink named by
// `sink` (the default sink when unset; see runtime.BuildContext.AuditSink):
//
//   - intent (Phase "intent"), before the inner layers run: time, layer,
//     stage, tool, run id, idempotency key, the attempt number in progress
//     and the digest of the canonical arguments (a turn's: of its input;
//     runtime.ToolCall.ArgsDigest: a plain SHA-256, or with
//     settings.digest_key_env an HMAC-SHA256 under the key, below). A tool call whose arguments cannot be canonicalised (a NaN or
//     infinite number: runtime.ToolCall.ArgsDigestErr) has an empty digest,
//     and its intent record's error message notes why ("arguments cannot be
//     canonicalised: ..."). If the intent cannot be written the call does not run: the
//     layer fails closed with a *runtime.CallError naming it (unclassified,
//     so a retry outside may try again), and follows it with an outcome
//     (decision "failed", error_type "store_unavailable", message "audit
//     intent reported not written (the store failed; it may have written it
//     all the same); the call did not run"): a store may have written the
//     intent though its answer was lost (a connection cut after the
//     commit). That outcome is written once, as the call fails; a store
//     still failing loses it too, and one that never wrote the intent holds
//     an outcome without one. A crash during the call leaves an intent
//     without an outcome; so does an intent reported not written whose
//     follow-up was lost too, which a reconciler tells apart only by the
//     caller's error ("audit intent not written; the call did not run") or,
//     with an idempotent layer inside audit and within its ttl, by the lack
//     of a claim of the idempotency key in its store (a call that crashed
//     while it ran leaves its claim, in doubt).
//   - outcome (Phase "outcome"), after the call: the decision, the error's
//     kind (runtime.KindOf) and message (below), the attempts from the call's meta
//     (the count of the innermost retry that ran: with trail "logical" the
//     retry inside the layer, so the logical call's total), and the
//     duration. Decisions: "ok"; "deduped" when an idempotent layer inside
//     replayed a stored result (Meta.Deduped); "denied" when an inner layer
//     blocked the call or a budget refused it (not a refusal for the calls
//     in flight alone, runtime.BudgetError.InFlight, which may pass when
//     sent again: "failed", kind rate_limited, as a rate_limit's refusal
//     is); "in_doubt" when the call may
//     have had its effect with its outcome unknown (a *runtime.InDoubtError
//     from an idempotent layer inside, a resumed agent turn's call, or an
//     inner audit layer's outcome not written, a side-effecting tool not
//     declared retry_safe that failed with a timeout, its own deadline or
//     an upstream's 504, which the runtime marks runtime.MayHaveRun:
//     runtime.ClassInDoubt; or such a tool that panicked, or failed while
//     its call was cancelled (with an error that does not prove it never
//     ran, runtime.DidNotRun), having perhaps made its effect before it
//     stopped, as idempotent treats it), for a person to settle with the
//     idempotency key; "ran" when the call ran, its effect standing, but
//     its result could not be used and the caller got an error marked
//     runtime.Ran (a guard of phase "after" blocked the result, an MCP
//     upstream's result was over the gateway's limit), where "failed" or
//     "denied" would read as "did not happen" (a duplicate an idempotent
//     layer inside answers with the stored error is "deduped"); "failed"
//     otherwise (a panic is recorded, then
//     re-raised). An in-doubt outcome's message begins "the call may have
//     made its effect before it stopped (KIND): " with the kind the failure
//     had (canceled, timeout; failure for a panic). Records written by earlier
//     versions state "failed" with error type "in_doubt" for such a call.
//     The outcome is written even when the call's context has ended.
//
// If the outcome cannot be written, the call returns an error too, a
// permanent *runtime.CallError naming the layer (joined to the call's own
// error when it failed): the caller learns that its trail is incomplete. The
// call itself has run; the error is permanent so that no retry outside runs
// it again for the sake of the record, and it wraps
// runtime.ErrOutcomeUnrecorded, with which an agent turn (RunAgent) ends
// instead of telling the model the tool failed, and which runtime.Classify
// reports as in doubt when the call succeeded (final: a worker does not
// redeliver it); a call that failed is classified by its own error.
//
// Raw arguments (a tool's args; a turn's input and session id) are stored
// only with include_args: true; by default the digest alone lets an auditor
// match a record to a known call without keeping the arguments' text.
// Without settings.digest_key_env the digest is a plain SHA-256 (64 hex
// digits), unkeyed and unsalted: it hides arguments no one can guess, not
// a short or guessable one (a PIN, an amount, an account number of a known
// form, an e-mail address among the customers'), which anyone who reads
// the trail recovers by digesting the candidates until one matches. With
// the setting, the digest is "hmac-sha256:" and the hex HMAC-SHA256 of the
// canonical arguments under the key the variable holds (a turn's idempotency
// key, derived from its input, is keyed too, as a tool call's is derived
// from its keyed digest): a reader without the key cannot test candidates,
// and an auditor with it matches a record to a known call by computing
// runtime.NewDigester(key).Args(args) (a turn's: .Text(input)) and
// comparing it with args_digest. Records written before the setting keep
// their plain digests, which the prefix tells apart. The same holds for a
// failed call's error text, which a tool may fill with its arguments
// ("card 4111111111111111 declined", "no such user ann@example.com"): it
// is stored only with include_errors: true. By default an outcome's error
// message reads `layer "bank"; text withheld, sha256 HEX` (`...
// hmac-sha256 HEX` with a digest key: Digester.Text of the text): the layer
// the error names (runtime.LayerOf; left out when it names none), preceded
// by "panic; " for a panic, and the digest of the error's text, which
// matches the error the caller got; with the error type (its kind) and the
// decision, that says what failed and where
// without keeping the text. Every sink (memory, SQLite, Redis, PostgreSQL,
// a host's) receives the record so. In either case a secret the run holds
// is written as "[SECRET]" (a secret number as the call carries it: an
// integer above 2^53 is looked for, and the other arguments are recorded,
// as the int64 they are, not as a float64 neighbour).
//
// The arguments recorded, and digested, are those the layer receives: a
// pii layer with action "redact" outside audit has masked them already; one
// inside it has not, and with include_args the intent record holds the
// personal data in clear, as it does for a call a pii layer inside then
// blocks (recorded "denied"). A call a layer outside audit blocks reaches no
// audit layer and has no record. A failed call's error text goes the other
// way, from the inside out: a pii layer masks it for the caller (with
// either action), so one inside audit has masked it already, and for each
// pii layer outside it audit masks the text itself as that layer will
// (its kinds and regions), as it does for each tool-chain redact layer
// outside it (its patterns), which masks the secrets in the text for the
// caller, before recording it (include_errors) or
// digesting it: the record holds, or digests, the text the caller reads.
// A policy whose trail must hold no personal data puts pii outside audit,
// or leaves include_args off (vet warns of one with include_args outside
// pii: order/record-outside-redact); the error text is clean either way.
//
// trail states the ordering the user intends, and agentc vet holds the chain
// to it (order/audit-trail): "logical" (the default) puts retry inside audit
// and yields one record per logical call; "attempts" puts audit inside
// retry and yields one record per attempt. The layer itself behaves the
// same either way.
package audit
