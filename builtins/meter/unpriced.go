package meter

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// replacesModel reports whether a fallback or hedge layer of chain (the
// layers inside a meter) sends every call to its own models in place of
// the one the call names: one without a when does.
func replacesModel(chain []plan.Layer) bool {
	for _, l := range chain {
		if (l.Use == "fallback" || l.Use == "hedge") && l.When == nil {
			return true
		}
	}
	return false
}

// unpricedModel refuses, with a usd ceiling, a call that can reach from
// the meter (the model it names, unless a layer inside always replaces
// it, and the models of the fallback and hedge layers inside) a model the
// plan does not declare, one whose client the host gave in
// runtime.Deps.Models (a name no client serves is left to the terminal to
// report): the meter has no price for it, and would count its
// spend as nothing, so the ceiling would never stop its calls. The call
// is refused before it is reserved, a permanent *runtime.CallError naming
// the model; the model is not called and nothing is charged. A tokens or
// calls ceiling needs no price and counts such a call as any other.
func (m *Meter) unpricedModel(c *runtime.ChatCall) error {
	if m.Budget == nil || m.Budget.USD == nil {
		return nil
	}
	if !m.replaces {
		if err := m.unpriced(c.Request.Model); err != nil {
			return err
		}
	}
	for _, name := range m.below {
		if err := m.unpriced(name); err != nil {
			return err
		}
	}
	return nil
}

// unpriced returns the refusal of a call that reaches model when the plan
// does not declare it and a client serves it, else nil. A name no client
// serves (a typo) reaches no model and costs nothing: the terminal reports
// it, naming the nearest model, as under a meter without a usd ceiling.
func (m *Meter) unpriced(model string) error {
	if _, ok := m.rates[model]; ok || !m.served[model] {
		return nil
	}
	return &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name, Message: fmt.Sprintf(
		"model %q, which the call can reach, has no price: the policy does not declare it, and the meter counts budget.usd at the prices of the models it declares, so its calls would cost nothing and the ceiling would never stop them; declare it in the policy's models with its prices (usd_per_mtok_in, usd_per_mtok_out; 0 for a model that is free), or scope the meter's when to the declared models",
		model)}
}

// warnUnpriced logs, at build, each model the host gives a client for
// (runtime.Deps.Models) that the plan does not declare, when the meter
// has a usd ceiling and acts on every call that names it (it has no when,
// and no fallback or hedge inside replaces the model): each such call is
// refused (unpricedModel).
func (m *Meter) warnUnpriced(b *runtime.BuildContext) {
	if m.Budget == nil || m.Budget.USD == nil || m.replaces || b.Layer.When != nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(b.Models())) {
		if _, ok := m.rates[name]; !ok {
			m.logger.Warn("meter: a model the policy does not declare has no price, so the meter's budget.usd refuses each of its calls; declare it in the policy's models with its prices, or scope the meter's when to the declared models",
				"model", name)
		}
	}
}
