package vet

import "github.com/agentc-dev/agentc/dsl"

// GuardInsideCache reports a guarding layer inside memoize,
// semantic_memoize or idempotent.
var GuardInsideCache = &Rule{
	Name:     "order/guard-inside-cache",
	Severity: dsl.Warning,
	Doc: `a guard inside memoize, semantic_memoize or idempotent is skipped on a hit.

On a cache hit (or an idempotent replay) the layers inside the cache do not
run: the stored answer is served as it is. A layer that checks calls before
they run (any builtin with the guards trait: guard, egress, tool_policy,
security, ...) never sees that call, so a check that depends on
more than the cache key (the run, the agent, the time, a policy changed since
the answer was stored) is bypassed. Put such checks outside caches. Checks of
the output alone (output_coerce, judge, a guard with phase: "after") may sit
inside a cache: an output they refuse is an error, never stored as an answer,
so every stored answer has passed them for the call that stored it
(idempotent stores a tool result a guard blocked as the call's error: the
tool ran, so a duplicate gets the block again instead of running it). A hit
is served to any caller whose call has the same key, without running them:
one whose when, deny or require reads the caller (run.meta, run.id,
request.params.metadata) where the cache does not key on it decided for
another caller, an error (order/caller-check-inside-cache). pii is left out for memoize and
idempotent: it checks nothing but the call and its result, which the cache
keys and stores, and inside such a cache it masks what the cache stores
(order/cache-inside-redact); it stays outside semantic_memoize, whose
near-duplicate hit answers a call pii has not read and whose index embeds the
text pii would mask. The rule
is the builtin
constraints guard-inside-cache (schemas/memoize.cue, semantic_memoize.cue,
idempotent.cue); a when on the guard's constraint leaves "after" guards out.`,
	Run: func(p *Pass) {
		reportConstraint(p, "guard-inside-cache", func(v *Pair) (dsl.Pos, []dsl.Related, string) {
			guard, cache := v.Outer, v.Inner
			hit := "a cache hit is served"
			switch cache.Use {
			case "semantic_memoize":
				hit = "a near-duplicate hit is served"
			case "idempotent":
				hit = "a replayed call is answered from the stored result"
			}
			return guard.Pos, []dsl.Related{at(cache, "%s is here, outside %s", cache.Ref(), guard.Ref())},
				guard.Ref() + " sits inside " + cache.Ref() + ": " + hit + " without running " + guard.Ref() + "; move " + guard.Ref() + " outside " + cache.Ref()
		})
	},
}
