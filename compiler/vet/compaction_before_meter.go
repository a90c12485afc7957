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
