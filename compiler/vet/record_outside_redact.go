package vet

import "github.com/agentc-dev/agentc/dsl"

// RecordOutsideRedact reports a log or audit layer with include_args
// outside a pii or redact layer.
var RecordOutsideRedact = warningRule("record-outside-redact",
	`a log or audit with include_args sits outside pii or redact, so it records in clear what they mask.

A call's arguments and transcript pass the layers from the outside in: a pii
layer with action redact, or a redact layer in the chat chain, hands the
layers inside it masked text, and the layers outside it have read the text
in clear. A log or audit layer with include_args outside them writes the
personal data or the secret into its log lines or audit records, although
the policy masks it for the model; a call pii blocks is recorded with it
too. Inside them, it records the masked text. A tool-chain redact masks
tool results, which no record holds, and is not counted there. Nor is a
failed tool call's error text (include_errors): it passes the layers from
the inside out, and a log or audit outside a pii or redact layer masks it
as that layer masks it for the caller before recording it, so it is clean
on either side of them. The rule is
the builtin constraints record-outside-redact (schemas/log.cue,
schemas/audit.cue).`,
	func(v *Pair) (dsl.Pos, []dsl.Related, string) {
		masker, recorder := v.Outer, v.Inner
		what := "what " + masker.Ref() + " masks for the layers inside it"
		if action, _ := masker.Fields["action"].(string); masker.Use == "pii" && action != "redact" {
			// action block (the default) masks nothing: it refuses the
			// call, which the layer outside has recorded.
			what = "the personal data of the calls " + masker.Ref() + " blocks, which never reach the layers inside it"
		}
		return recorder.Pos, []dsl.Related{at(masker, "%s is here, inside %s", masker.Ref(), recorder.Ref())},
			recorder.Ref() + " records the arguments it is given (include_args) and sits outside " + masker.Ref() +
				", so it records in clear " + what + "; move " +
				recorder.Ref() + " inside " + masker.Ref() + ", or leave include_args off"
	})
