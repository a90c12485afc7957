package vet

import (
	"fmt"

	"github.com/agentc-dev/agentc/dsl"
)

// UnmeteredClassifier reports a security layer whose classifier asks a
// chat model, in a policy whose chat chain holds a meter with a tokens or
// usd ceiling or a rate_limit: the classifier's calls go to the model's
// client outside the chain, so neither counts them.
var UnmeteredClassifier = &Rule{
	Name:     "guard/unmetered-classifier",
	Severity: dsl.Warning,
	Doc: `a security layer's chat classifier, whose calls go straight to its model's client: no meter's ceiling counts them, no rate_limit throttles them.

A security classifier of kind "chat" asks its model about each text the
signatures and families let through (one request per text not yet seen in
the run) through the model's client, outside the chat chain: no layer of
the chain applies to its calls. Where the chat chain holds a meter with a
tokens or usd ceiling, or a rate_limit, the policy reads as bounding what
is spent on models and how fast they are called, and the classifier's
calls are beside both: its model's tokens and cost are in no ledger and
under no ceiling, its requests take no token. A warning at the classifier's
model, naming the meters and rate limits; bound the classifier where its
model is served (a gateway with its own budget), or use kind "text". A
meter with only a calls ceiling counts the calls it admits, not the
classifier's, and is not named.`,
	Run: func(p *Pass) {
		var bounds []string
		var rel []dsl.Related
		for _, e := range p.Policy.Chains["chat"] {
			switch e.Use {
			case "meter":
				if _, hasTokens, _, hasUSD := meterCeilings(e); !hasTokens && !hasUSD {
					continue
				}
			case "rate_limit":
			default:
				continue
			}
			bounds = append(bounds, e.Ref())
			rel = append(rel, dsl.Related{Pos: e.UsePos, Message: e.Ref() + " is here"})
		}
		if len(bounds) == 0 {
			return
		}
		for _, stage := range []string{"chat", "turn"} {
			for _, e := range p.Policy.Chains[stage] {
				if e.Use != "security" {
					continue
				}
				c, _ := e.Fields["classifier"].(map[string]any)
				model, _ := c["model"].(string)
				if kind, _ := c["kind"].(string); kind != "chat" || model == "" {
					continue
				}
				p.Report(dsl.Diagnostic{Pos: e.FieldPos("classifier.model"), Related: rel,
					Message: fmt.Sprintf("%s's classifier asks model `%s` through its client, outside the chat chain: %s neither count nor throttle its calls, one per text the rules let through; bound the classifier where its model is served, or use kind \"text\"",
						e.Ref(), model, andList(bounds))})
			}
		}
	},
}
