package vet

import "github.com/agentc-dev/agentc/dsl"

// CacheInsideRedact reports a memoize or idempotent layer inside a pii or
// redact layer.
var CacheInsideRedact = warningRule("cache-inside-redact",
	`a cache inside pii or redact stores in clear the results they mask on their way out.

A tool's result and the model's output pass the layers from the inside out:
a pii layer masks the personal data in them (action redact) or refuses them
(action block), a redact layer masks the secrets, for the layers outside it
and the caller. A memoize or idempotent layer inside them
stores what it is handed before they mask it: its store (a sqlite, redis or
postgres table, which an operator, a backup or another replica reads)
keeps the personal data or the secret in clear, although no caller is ever
shown it; a replay is masked again on its way out. Outside them it stores
what they masked (idempotent stores a result pii refuses as the call's
error), and the digests of the arguments as the caller wrote them (plain
SHA-256s, which give away an argument of few possible values to whoever
reads the store: docs/state.md, "idempotent: at most one execution per
logical call"). A pii layer with output: false leaves the model's output alone,
so a chat cache inside it is not reported. pii checks nothing but the call
and its result, so order/guard-inside-cache leaves it inside memoize and
idempotent, which answer only the call they keyed. semantic_memoize is left
out: a near-duplicate hit answers a call pii has not read, and its index
embeds the text pii would mask, so pii sits outside it
(order/guard-inside-cache). The rule is the builtin constraints
cache-inside-redact (schemas/idempotent.cue, memoize.cue).`,
	func(v *Pair) (dsl.Pos, []dsl.Related, string) {
		cache, masker := v.Outer, v.Inner
		what, how := "the results of the tools", "before "+masker.Ref()+" masks them, in clear"
		if action, _ := masker.Fields["action"].(string); masker.Use == "pii" && action != "redact" {
			// action block (the default) masks nothing: it refuses the
			// result, which the cache inside it has stored.
			how = "before " + masker.Ref() + " checks them, in clear, those " + masker.Ref() + " refuses too"
		}
		if cache.Stage == "chat" {
			what, how = "the model's output", "before "+masker.Ref()+" masks it, in clear"
		}
		return cache.Pos, []dsl.Related{at(masker, "%s is here, outside %s", masker.Ref(), cache.Ref())},
			cache.Ref() + " sits inside " + masker.Ref() + ", so it stores " + what + " " + how +
				"; move " + masker.Ref() + " inside " + cache.Ref()
	})
