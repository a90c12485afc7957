package vet

import "github.com/agentc-dev/agentc/dsl"

// CompactionBeforeMeter reports a meter outside compaction.
var CompactionBeforeMeter = &Rule{
	Name:     "order/compaction-before-meter",
	Severity: dsl.Error,
	Doc: `meter sits outside compaction in the chat chain.

Compaction bounds the transcript before the model sees it; a meter outside it
counts and budgets the whole transcript, tokens the model never sees, so
budgets trip early and cost reports are wrong. The rule is the builtin
constraint compaction-before-meter (schemas/meter.cue).`,
	Run: func(p *Pass) {
		reportConstraint(p, "compaction-before-meter", func(v *Pair) (dsl.Pos, []dsl.Related, string) {
			meter, compaction := v.Inner, v.Outer
			return meter.Pos, []dsl.Related{at(compaction, "%s is here, inside %s", compaction.Ref(), meter.Ref())},
				meter.Ref() + " sits outside " + compaction.Ref() + ": it would count and budget the whole transcript, tokens the model never sees once " +
					compaction.Ref() + " has bounded it; move " + meter.Ref() + " inside " + compaction.Ref()
		})
	},
}

// CompactionBeforeMaxTokens reports a max_tokens outside compaction.
var CompactionBeforeMaxTokens = &Rule{
	Name:     "order/compaction-before-max-tokens",
	Severity: dsl.Warning,
	Doc: `max_tokens sits outside compaction in the chat chain.

max_tokens refuses a call whose estimated input is over its limit, before
the model runs. Outside compaction it measures the transcript before
compaction has bounded it: a long conversation that compaction would cut to
a size the model reads is refused instead, and the limit reads as a bound
on what the model gets while it bounds what the caller sends. Put max_tokens
inside compaction to bound the model's input; keep it outside only to
refuse oversized transcripts before a summarizing compaction spends a model
call on them. The rule is the builtin constraint compaction-before-max-tokens
(schemas/max_tokens.cue).`,
	Run: func(p *Pass) {
		reportConstraint(p, "compaction-before-max-tokens", func(v *Pair) (dsl.Pos, []dsl.Related, string) {
			limit, compaction := v.Inner, v.Outer
			return limit.Pos, []dsl.Related{at(compaction, "%s is here, inside %s", compaction.Ref(), limit.Ref())},
				limit.Ref() + " sits outside " + compaction.Ref() + ": it measures the whole transcript, before " + compaction.Ref() +
					" bounds it, so it refuses calls the model could read once compacted; move " + limit.Ref() + " inside " + compaction.Ref()
		})
	},
}
