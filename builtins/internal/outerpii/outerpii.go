// Package outerpii masks, in the text a recording layer of the tool chain
// (audit, log) writes of a failed call's error, the personal data the pii
// layers outside it mask in that error on the way out: the layer records
// the error as the caller reads it, never the text pii keeps from the
// caller.
package outerpii

import (
	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Masker returns a function that masks text as the pii layers outside the
// layer b builds mask a failed tool call's error (each with its own kinds
// and regions, outermost last, as the error passes them), or nil when no
// pii layer sits outside it or the layer is not in the tool chain.
func Masker(b *runtime.BuildContext) (func(string) string, error) {
	if b.Stage != plan.StageTool {
		return nil, nil
	}
	var scanners []*pii.Scanner
	for _, l := range b.Outer() {
		m, ok := l.Middleware.(*pii.Middleware)
		if !ok {
			continue
		}
		s, err := pii.New(pii.Config{Kinds: kinds(m.Kinds), Regions: m.Regions})
		if err != nil {
			return nil, err
		}
		scanners = append(scanners, s)
	}
	if len(scanners) == 0 {
		return nil, nil
	}
	return func(text string) string {
		for i := len(scanners) - 1; i >= 0; i-- {
			text, _ = scanners[i].Redact(text)
		}
		return text
	}, nil
}

// kinds returns the scanner kinds of a pii layer's kinds setting ("ip"
// stands for both address families).
func kinds(names []string) []pii.Kind {
	var ks []pii.Kind
	for _, k := range names {
		if k == "ip" {
			ks = append(ks, pii.KindIPv4, pii.KindIPv6)
			continue
		}
		ks = append(ks, pii.Kind(k))
	}
	return ks
}
