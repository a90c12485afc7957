package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// RateLimitOutsideRetry reports a rate_limit outside a retry.
var RateLimitOutsideRetry = &Rule{
	Name:     "order/ratelimit-outside-retry",
	Severity: dsl.Warning,
	Doc: `rate_limit sits outside retry, so retries bypass the rate limit.

A rate limit outside retry takes one token per call; the attempts retry makes
after the first take none, so the model or tool behind it sees more calls
than the limit allows, exactly when it is already failing. Put rate_limit
inside retry. The rule is the builtin constraint ratelimit-outside-retry
(schemas/retry.cue).`,
	Run: func(p *Pass) {
		reportConstraint(p, "ratelimit-outside-retry", func(v *Pair) (dsl.Pos, []dsl.Related, string) {
			limit, retry := v.Inner, v.Outer
			extra := Attempts(retry) - 1
			attempts := "attempts"
			if extra == 1 {
				attempts = "attempt"
			}
			return limit.Pos, []dsl.Related{at(retry, "%s (max_attempts %d) is here, inside %s", retry.Ref(), Attempts(retry), limit.Ref())},
				fmt.Sprintf("%s sits outside %s: only the first attempt takes a token, so up to %s more %s per call reach %s unthrottled; move %s inside %s",
					limit.Ref(), retry.Ref(), count(extra), attempts, callee(retry.Stage), limit.Ref(), retry.Ref())
		})
	},
}
