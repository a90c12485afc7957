package vet

import "github.com/agentc-dev/agentc/dsl"

// RedactOutsideTruncate reports a redact outside a truncate in the tool
// chain.
var RedactOutsideTruncate = &Rule{
	Name:     "order/redact-outside-truncate",
	Severity: dsl.Error,
	Doc: `redact sits outside truncate in the tool chain, so a secret the cut splits reaches the model.

A tool result passes the layers from the inside out: truncate inside redact
cuts the result to max_chars first, and redact then reads the cut text. A
secret the cut splits ("aws_key=AKIAIOSFODNN7EX", the rest cut off) no longer
matches its pattern, so it is not masked, and its first characters, most of
the key, reach the model. With truncate outside redact, redact masks the whole
result and truncate cuts the masked text. The rule is the builtin constraint
redact-outside-truncate (schemas/truncate.cue).`,
	Run: func(p *Pass) {
		reportConstraint(p, "redact-outside-truncate", func(v *Pair) (dsl.Pos, []dsl.Related, string) {
			truncate, redact := v.Outer, v.Inner
			return redact.Pos, []dsl.Related{at(truncate, "%s is here, inside %s", truncate.Ref(), redact.Ref())},
				redact.Ref() + " sits outside " + truncate.Ref() + ": it reads the result " + truncate.Ref() +
					" has already cut, so a secret the cut splits no longer matches and its first characters reach the model; move " +
					redact.Ref() + " inside " + truncate.Ref()
		})
	},
}
