package explain

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/agentc-dev/agentc/compiler/vet"
	"github.com/agentc-dev/agentc/dsl"
)

// consequences spells out what the order of a chain means for one call.
func consequences(a *vet.Analysis, stage string, chain []*dsl.Entry) []string {
	var out []string
	out = append(out, executions(a, stage, chain)...)
	out = append(out, cacheHits(a, stage, chain)...)
	out = append(out, auditRecords(a, stage, chain)...)
	out = append(out, ownCalls(a, stage, chain)...)
	out = append(out, reservations(a, stage, chain)...)
	return out
}

// reservations spells out how many times a meter that refuses a call
// crossing its tokens or usd ceiling reserves the call's estimate: once
// for each model call the layers inside it can make, each of which is
// charged (the meter's plan.ModelCalls).
func reservations(a *vet.Analysis, stage string, chain []*dsl.Entry) []string {
	if stage != "chat" {
		return nil
	}
	var out []string
	for _, e := range chain {
		if e.Use != "meter" || e.Fields["on_cross"] != "refuse" || !crossable(e) {
			continue
		}
		if es := reinvokers(a, chain[e.Index+1:], ""); len(es) > 0 {
			n, why := worstCase(a, es)
			out = append(out, fmt.Sprintf("%s reserves each call's estimate %s times, the most model calls it can charge for one call (%s)", e.Ref(), vet.Calls(n), why))
		}
	}
	return out
}

// ownCalls spells out the path of the model calls a layer makes of its own
// (a judge's verdict, a summary): the chain below the layer.
func ownCalls(a *vet.Analysis, stage string, chain []*dsl.Entry) []string {
	if stage != "chat" {
		return nil
	}
	var out []string
	for _, e := range chain {
		if !vet.OwnCaller(e) {
			continue
		}
		what := "verdict"
		if e.Use == "compaction" {
			what = "summary"
		}
		what += " call"
		if model, _ := e.Fields["model"].(string); model != "" {
			what += " (model `" + model + "`)"
		}
		below := append(refs(chain[e.Index+1:]), "the model call")
		line := fmt.Sprintf("%s makes its %s through the chain below it: %s", e.Ref(), what, list(below))
		if e.Index > 0 {
			line += fmt.Sprintf("; %s outside it %s not see it", list(refs(chain[:e.Index])), plural(e.Index, "does", "do"))
		}
		if r := a.OwnCallRerouter(chain, e); r != nil {
			model, _ := e.Fields["model"].(string)
			line += fmt.Sprintf("; %s sends it to its models instead of `%s`", r.Ref(), model)
		}
		// The layers below read their whens on the own call as the runtime
		// does, for the own call's model: one whose when is false for it
		// skips it, one whose when the call decides may see it.
		var pass, skip, decide []string
		meets := map[*dsl.Entry]vet.Meet{}
		for _, b := range chain[e.Index+1:] {
			meets[b] = a.OwnCallMeet(e, b)
			if vet.PassesOwnCalls(b) {
				pass = append(pass, b.Ref())
				continue
			}
			switch meets[b] {
			case vet.Never:
				skip = append(skip, b.Ref())
			case vet.Depends:
				decide = append(decide, b.Ref())
			}
		}
		if len(pass) > 0 {
			line += fmt.Sprintf("; %s %s it through unchecked, its output being the layer's", list(pass), plural(len(pass), "lets", "let"))
		}
		if len(skip) > 0 {
			line += fmt.Sprintf("; the when of %s skips it", list(skip))
		}
		var es []*dsl.Entry
		maybe := false
		for _, r := range reinvokers(a, chain[e.Index+1:], "") {
			switch meets[r] {
			case vet.Never:
				continue
			case vet.Depends:
				maybe = true
			}
			es = append(es, r)
		}
		if len(es) > 0 {
			n, why := worstCase(a, es)
			if maybe {
				line += fmt.Sprintf("; a failing one may reach the model up to %s times (%s), as the when of %s decides", vet.Calls(n), why, list(decide))
			} else {
				line += fmt.Sprintf("; a failing one reaches the model up to %s times (%s)", vet.Calls(n), why)
			}
		}
		out = append(out, line)
	}
	return out
}

// reinvokers returns the re-invoking layers that wrap calls of tool ("" in
// the chat and turn chains, or for an undeclared tool).
func reinvokers(a *vet.Analysis, chain []*dsl.Entry, tool string) []*dsl.Entry {
	var out []*dsl.Entry
	for _, e := range chain {
		if e.Kind != nil && e.Kind.Has("reinvokes") && vet.Attempts(e) > 1 && a.Reaches(e, tool) {
			out = append(out, e)
		}
	}
	return out
}

// worstCase returns the product of the attempts of es (saturated, see
// vet.CallProduct) and its first factors. A fallback or hedge whose models
// one inside it replaces (vet.Analysis.ReroutedInside) counts attempts,
// not models: they go to the inner layer's models.
func worstCase(a *vet.Analysis, es []*dsl.Entry) (int, string) {
	attempts := make([]int, len(es))
	var factors []string
	for i, e := range es {
		k := vet.Attempts(e)
		attempts[i] = k
		unit := "attempts"
		if in := a.ReroutedInside(e); in != nil {
			unit = "attempts rerouted by " + in.Ref()
		} else if e.Use == "fallback" || e.Use == "hedge" {
			unit = "models"
		}
		factors = append(factors, fmt.Sprintf("%s %d %s", e.Ref(), k, unit))
	}
	return vet.CallProduct(attempts...), vet.Factors(factors, "layers")
}

func executions(a *vet.Analysis, stage string, chain []*dsl.Entry) []string {
	if stage != "tool" {
		es := reinvokers(a, chain, "")
		once := map[string]string{"chat": "each call reaches the model once", "turn": "each turn runs once"}[stage]
		if len(es) == 0 {
			return []string{once + ": no layer re-invokes it"}
		}
		n, why := worstCase(a, es)
		return []string{fmt.Sprintf("a failing call reaches the model up to %s times (%s)", vet.Calls(n), why)}
	}
	// Tool chain: group the declared tools by their worst case.
	type group struct {
		n     int
		why   string
		tools []string
	}
	var groups []*group
	byWhy := map[string]*group{}
	var notes []string
	names := make([]string, 0, len(a.Policy.Tools))
	for name := range a.Policy.Tools {
		names = append(names, name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		names = []string{""}
	}
	for _, name := range names {
		if name != "" && a.Blocker(name) != nil {
			notes = append(notes, fmt.Sprintf("`%s` is refused by %s before any call runs", name, a.Blocker(name).Ref()))
			continue
		}
		es := reinvokers(a, chain, name)
		n, why := worstCase(a, es)
		g := byWhy[why]
		if g == nil {
			g = &group{n: n, why: why}
			byWhy[why] = g
			groups = append(groups, g)
		}
		if name != "" {
			g.tools = append(g.tools, "`"+name+"`")
		}
		if t := a.Policy.Tools[name]; t != nil && t.SideEffecting && n > 1 {
			if t.RetrySafe {
				notes = append(notes, fmt.Sprintf("`%s` is side-effecting and retry_safe: its idempotency key keeps the repeats from repeating the effect", name))
			} else {
				// As the retry builtin runs it: again only after a failure
				// that proves it did not act (runtime.DidNotRun).
				notes = append(notes, fmt.Sprintf("`%s` is side-effecting and not retry_safe: a failed call of it runs again only when the failure proves it did not act (refused before it ran, an open breaker, a connection refused); a failure after it may have acted is returned without a retry", name))
			}
		}
	}
	var out []string
	for _, g := range groups {
		subject, once := "a failing tool call", "each tool call runs once"
		if len(g.tools) > 0 {
			subject, once = "a failing call of "+list(g.tools), "each call of "+list(g.tools)+" runs once"
		}
		if g.n == 1 {
			out = append(out, once+": no layer re-invokes it")
		} else {
			out = append(out, fmt.Sprintf("%s runs up to %s times (%s)", subject, vet.Calls(g.n), g.why))
		}
	}
	return append(out, notes...)
}

func cacheHits(a *vet.Analysis, stage string, chain []*dsl.Entry) []string {
	var out []string
	for _, c := range chain {
		if c.Kind == nil || !c.Kind.Has("caches") {
			continue
		}
		var skipped []string
		for _, e := range chain[c.Index+1:] {
			if a.Overlap(c, e) {
				skipped = append(skipped, e.Ref())
			}
		}
		skipped = append(skipped, "the "+callees[stage])
		hit := "a hit in " + c.Ref()
		if c.Use == "idempotent" {
			hit = "a replay in " + c.Ref()
		}
		out = append(out, fmt.Sprintf("%s skips %s", hit, list(skipped))+chatCacheCalls(a, stage, c))
	}
	return out
}

// chatCacheCalls says what a chat-chain cache does with the tool calls of
// the model's answers (a replayed call runs again): "" for other caches.
func chatCacheCalls(a *vet.Analysis, stage string, c *dsl.Entry) string {
	if stage != "chat" || (c.Use != "memoize" && c.Use != "semantic_memoize") {
		return ""
	}
	var effects []string
	for name, t := range a.Policy.Tools {
		if t.SideEffecting {
			effects = append(effects, "`"+name+"`")
		}
	}
	slices.Sort(effects)
	which := "a side-effecting tool"
	if len(effects) > 0 {
		which = "a side-effecting tool (" + list(effects) + ")"
	}
	if c.Use == "semantic_memoize" {
		return "; it reuses only answers without tool calls, to conversations without tool calls or results: an answer calling a tool is never stored, and a conversation holding a call or result always reaches the model"
	}
	return "; an answer calling " + which + " or one the policy does not declare is never stored, so the model is asked again; one calling read-only tools is replayed, each call under a new id"
}

func auditRecords(a *vet.Analysis, stage string, chain []*dsl.Entry) []string {
	var out []string
	for _, au := range chain {
		if au.Use != "audit" {
			continue
		}
		trail, _ := au.Fields["trail"].(string)
		var outside, inside []*dsl.Entry
		for _, r := range chain {
			if r.Use != "retry" || !a.Overlap(r, au) {
				continue
			}
			if r.Index < au.Index {
				outside = append(outside, r)
			} else {
				inside = append(inside, r)
			}
		}
		per := map[string]string{"tool": "logical tool call", "turn": "turn", "chat": "model call"}[stage]
		switch {
		case len(outside) > 0:
			n, why := worstCase(a, outside)
			out = append(out, fmt.Sprintf("%s writes one record per attempt: up to %s for one %s (%s); trail: %q", au.Ref(), vet.Calls(n), per, why, trail))
		case len(inside) > 0:
			out = append(out, fmt.Sprintf("%s writes one record per %s: %s inside it re-invokes without new records, and the record notes the attempts; trail: %q", au.Ref(), per, list(refs(inside)), trail))
		default:
			out = append(out, fmt.Sprintf("%s writes one record per %s", au.Ref(), per))
		}
	}
	return out
}

func refs(es []*dsl.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Ref()
	}
	return out
}

// list joins words as "a, b and c".
func list(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
