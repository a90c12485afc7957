package compiler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/dsl"
	"github.com/agentc-dev/agentc/internal/textdist"
	"github.com/agentc-dev/agentc/runtime/predicate"
)

// ruleUncheckedKey is the warning for an admit predicate that reads a
// metadata key without testing it first.
const ruleUncheckedKey = "cel/unchecked-key"

// checkMetadataKeys warns about each read of item.metadata.KEY in an admit
// predicate that no presence test guards: for an item without the key the
// read fails, and the item is refused unless the rest of the predicate
// decides it (the other side of an || that is true, of an && that is
// false).
func (c *Compilation) checkMetadataKeys(x *dsl.Expr, checked *predicate.Checked) {
	var seen []string
	for _, r := range checked.KeyReads {
		if r.Map != "item.metadata" || r.Tested || slices.Contains(seen, r.Key) {
			continue
		}
		seen = append(seen, r.Key)
		c.report(dsl.Warnf(x.PosAt(r.Offset), ruleUncheckedKey,
			"an item without metadata key %q is refused unless the rest of the predicate decides it: reading the key fails, and admit fails closed; test it first (!has(item.metadata.%s) || ...) or read item.metadata.?%s.orValue(...)",
			r.Key, r.Key, r.Key))
	}
}

// checkUndeclaredArgs reports, for a tool-stage predicate of an entry not
// scoped to tools (args untyped), each argument it reads, untested, that no
// declared tool's schema has. Such a read fails on every call (a guard then
// blocks every call): it is a typo. A read that a presence test guards
// (has(args.x) && args.x ...) cannot fail and is left alone. Nothing is said
// when a tool may send arguments no schema lists: a declared tool whose
// schema is not closed (no properties, additionalProperties not false,
// patternProperties, a composition), undeclared tools allowed, or MCP
// servers' tools. It reports whether it found one.
func (c *Compilation) checkUndeclaredArgs(x *dsl.Expr, checked *predicate.Checked) bool {
	p := c.Policy
	if len(p.Tools) == 0 || p.AllowUndeclaredTools || len(p.MCPServers) > 0 {
		return false
	}
	var declared []string
	for _, name := range sortedNames(p.Tools) {
		props, ok := p.Tools[name].ClosedArgNames()
		if !ok {
			return false
		}
		for _, prop := range props {
			if !slices.Contains(declared, prop) {
				declared = append(declared, prop)
			}
		}
	}
	var found []string
	for _, r := range checked.KeyReads {
		if r.Map != "args" || r.Tested || slices.Contains(declared, r.Key) || slices.Contains(found, r.Key) {
			continue
		}
		found = append(found, r.Key)
		msg := fmt.Sprintf("undefined field '%s': no declared tool's args schema has it (tools: %s)", r.Key, nameList(sortedNames(p.Tools)))
		if best := textdist.Closest(r.Key, declared); best != "" {
			msg += fmt.Sprintf("; did you mean '%s'?", best)
		}
		c.report(dsl.Errorf(x.PosAt(r.Offset), predicate.RuleType, "%s", msg))
	}
	return len(found) > 0
}

// maxListed is the most names a message lists.
const maxListed = 5

// nameList joins names with commas, the first few only: "a, b, c, d, e
// and 7 more".
func nameList(names []string) string {
	if len(names) <= maxListed {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:maxListed], ", "), len(names)-maxListed)
}
