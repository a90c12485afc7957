package vet

import "github.com/agentc-dev/agentc/dsl"

// CoerceOutsideRetry reports an output_coerce outside a retry.
var CoerceOutsideRetry = &Rule{
	Name:     "order/coerce-outside-retry",
	Severity: dsl.Warning,
	Doc: `output_coerce sits outside retry, so coercion failures are never retried.

A retry outside output_coerce reflects a coercion error (the output does not
match its JSON Schema) back to the model with the field diagnostics and asks
again. With output_coerce outside retry, the error is raised after retry has
returned, so the model never gets a second chance. The rule is the builtin
constraint coerce-outside-retry (schemas/retry.cue).`,
	Run: func(p *Pass) {
		reportConstraint(p, "coerce-outside-retry", func(v *Pair) (dsl.Pos, []dsl.Related, string) {
			coerce, retry := v.Inner, v.Outer
			return coerce.Pos, []dsl.Related{at(retry, "%s is here, inside %s", retry.Ref(), coerce.Ref())},
				coerce.Ref() + " sits outside " + retry.Ref() + ": a coercion failure is raised after " + retry.Ref() +
					" has returned, so it is never retried and the model never sees the field diagnostics; move " + coerce.Ref() + " inside " + retry.Ref()
		})
	},
}
