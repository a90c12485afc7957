package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// RateLimitOutsideHedge reports a rate_limit outside a hedge.
var RateLimitOutsideHedge = rateLimitOutsideModels("hedge", `rate_limit sits outside hedge, so one token admits the whole race.

A rate limit outside hedge takes one token per call; the hedge then starts
its next model after its delay, or at once when one fails, and none of those
racers takes a token, so one token admits as many model calls as the hedge
has models, exactly when the first is slow or failing. Put rate_limit inside
hedge, where each racer takes its own token. The rule is the builtin
constraint ratelimit-outside-hedge (schemas/hedge.cue).`,
	"one token admits the whole race")

// RateLimitOutsideFallback reports a rate_limit outside a fallback.
var RateLimitOutsideFallback = rateLimitOutsideModels("fallback", `rate_limit sits outside fallback, so the models it falls over to are called unthrottled.

A rate limit outside fallback takes one token per call; the models fallback
falls over to after the first take none, so one token admits as many model
calls as the fallback has models, exactly when the first is failing. Put
rate_limit inside fallback, where each model's call takes its own token.
The rule is the builtin constraint ratelimit-outside-fallback
(schemas/fallback.cue).`,
	"only the first model takes a token")

// rateLimitOutsideModels is the rule of the builtin constraint
// ratelimit-outside-<use>: a rate_limit outside a layer that calls several
// models for one call (hedge, fallback).
func rateLimitOutsideModels(use, doc, how string) *Rule {
	return warningRule("ratelimit-outside-"+use, doc, func(v *Pair) (dsl.Pos, []dsl.Related, string) {
		limit, outer := v.Inner, v.Outer
		n := Attempts(outer)
		calls, reach := "calls", "reach"
		if n == 2 {
			calls, reach = "call", "reaches"
		}
		return limit.Pos, []dsl.Related{at(outer, "%s (%s models) is here, inside %s", outer.Ref(), count(n), limit.Ref())},
			fmt.Sprintf("%s sits outside %s: %s, so up to %s more model %s per call %s the models unthrottled; move %s inside %s",
				limit.Ref(), outer.Ref(), how, count(n-1), calls, reach, limit.Ref(), outer.Ref())
	})
}
