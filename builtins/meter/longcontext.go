package meter

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// The names of Anthropic's beta features that bill a request over
// LongContextThreshold input tokens at a premium (twice the input price,
// one and a half times the output price) open with longContextBeta.
const (
	longContextBeta = "context-1m-"
	// LongContextThreshold is the input above which the context-1m beta
	// bills the premium.
	LongContextThreshold = 200_000
)

// LongContextBeta returns the first of betas that is a context-1m beta
// (its name read whatever its case, as the provider may read it), or "".
func LongContextBeta(betas []string) string {
	i := slices.IndexFunc(betas, func(b string) bool {
		return len(b) >= len(longContextBeta) && strings.EqualFold(b[:len(longContextBeta)], longContextBeta)
	})
	if i < 0 {
		return ""
	}
	return betas[i]
}

// UnpricedLongContext says why the meter would price a call of model m
// with the context-1m beta below its bill ("declares no long_context
// tier"), or returns "" when m declares a tier from LongContextThreshold
// input tokens or below, or the openai provider serves it, which refuses
// any beta feature before the request is sent and is never billed for one.
func UnpricedLongContext(m plan.Model) string {
	switch {
	case m.Provider == "openai":
		return ""
	case m.LongContext == nil:
		return "declares no long_context tier"
	case m.LongContext.AboveInputTokens > LongContextThreshold:
		return fmt.Sprintf("has its long_context tier only above %d input tokens", m.LongContext.AboveInputTokens)
	}
	return ""
}

// unpricedBeta refuses a call that asks for the context-1m beta while a
// model it can reach from the meter (the one it names, those of the
// fallback and hedge layers inside) would be billed a premium the meter
// does not price (UnpricedLongContext).
func (m *Meter) unpricedBeta(c *runtime.ChatCall) error {
	beta := LongContextBeta(c.Request.Betas)
	if beta == "" {
		return nil
	}
	for _, name := range append([]string{c.Request.Model}, m.below...) {
		if lacks := UnpricedLongContext(m.rates[name]); lacks != "" {
			return &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name, Message: fmt.Sprintf(
				"the %s beta bills a request over %d input tokens at a premium the meter counts only for a model that declares it, and model %s, which the call can reach, %s, so a budget could be overspent; declare the model's long_context tier or remove the beta",
				beta, LongContextThreshold, name, lacks)}
		}
	}
	return nil
}
