package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// RateLimitOutsideJudge reports a rate_limit outside a judge.
var RateLimitOutsideJudge = rateLimitOutsideOwnCall("judge", "verdict", `rate_limit sits outside judge, so the judge's verdict calls take no token.

A judge's verdict call runs through the chat chain below the judge, as a
call of its own: a rate limit outside the judge takes one token for the
call it judges and none for the verdict, so one token admits two model
calls, and the judge's model is called as often as the reply model,
unthrottled. Put rate_limit inside judge, where the verdict takes a token
of its own (a verdict refused fails as the judge's on_error says), or scope
it with a when on request.model. The rule is the builtin constraint
ratelimit-outside-judge (schemas/judge.cue).`)

// RateLimitOutsideCompaction reports a rate_limit outside a summarizing
// compaction.
var RateLimitOutsideCompaction = rateLimitOutsideOwnCall("compaction", "summary", `rate_limit sits outside a summarizing compaction, so its summary calls take no token.

A compaction with strategy "summarize" writes the summary with a model call
of its own, through the chat chain below it: a rate limit outside the
compaction takes one token for the call and none for the summary, so one
token admits two model calls whenever the transcript is compacted. Put
rate_limit inside compaction, where the summary takes a token of its own (a
summary refused falls back to keep_recent), or scope it with a when on
request.model. The rule is the builtin constraint
ratelimit-outside-compaction (schemas/compaction.cue), whose when selects
strategy "summarize".`)

// rateLimitOutsideOwnCall is the rule of the builtin constraint
// ratelimit-outside-<use>: a rate_limit outside a layer that makes a model
// call of its own (what) about the calls it sees.
func rateLimitOutsideOwnCall(use, what, doc string) *Rule {
	return warningRule("ratelimit-outside-"+use, doc, func(v *Pair) (dsl.Pos, []dsl.Related, string) {
		limit, own := v.Inner, v.Outer
		model, _ := own.Fields["model"].(string)
		return limit.Pos, []dsl.Related{at(own, "%s is here, inside %s", own.Ref(), limit.Ref())},
			fmt.Sprintf("%s sits outside %s: %s's %s calls to %q run below it and take no token, so one token admits two model calls; move %s inside %s",
				limit.Ref(), own.Ref(), own.Ref(), what, model, limit.Ref(), own.Ref())
	})
}
