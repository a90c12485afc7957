// Package outerpii masks, in the text a recording layer of the tool chain
// (audit, log) writes of a failed call's error, the personal data the pii
// layers and the secrets the redact layers outside it mask in that error on
// the way out: the layer records the error as the caller reads it, never
// the text pii or redact keep from the caller.
package outerpii

import (
	"github.com/agentc-dev/agentc/builtins/pii"
	"github.com/agentc-dev/agentc/builtins/redact"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// Masker returns a function that masks text as the pii and redact layers
// outside the layer b builds mask a failed tool call's error (each with its
// own kinds and regions, or patterns, outermost last, as the error passes
// them), or nil when no such layer sits outside it or the layer is not in
// the tool chain.
func Masker(b *runtime.BuildContext) (func(string) string, error) {
	if b.Stage != plan.StageTool {
		return nil, nil
	}
	var masks []func(string) string
	for _, l := range b.Outer() {
		switch m := l.Middleware.(type) {
		case *pii.Middleware:
			s, err := pii.New(pii.Config{Kinds: kinds(m.Kinds), Regions: m.Regions})
			if err != nil {
				return nil, err
			}
			masks = append(masks, func(text string) string {
				red, _ := s.Redact(text)
				return red
			})
		case *redact.Middleware:
			masks = append(masks, m.MaskText)
		}
	}
	if len(masks) == 0 {
		return nil, nil
	}
	return func(text string) string {
		for i := len(masks) - 1; i >= 0; i-- {
			text = masks[i](text)
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
