package predicate

import (
	"strings"

	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
)

// DefaultCostLimit is the cost limit of an environment whose EnvConfig leaves CostLimit at zero.
// It is in cel-go cost units (about one unit per simple operation, 0.1 per character scanned).
const DefaultCostLimit uint64 = 1_000_000

// hint is the size knowledge about one variable path: a bound declared by a schema or a size
// assumed for the lenient estimate.
type hint struct {
	declared *checker.SizeEstimate
	assumed  *checker.SizeEstimate
}

// costEstimator implements checker.CostEstimator over the size hints of an environment. The
// lenient estimator (strict false) uses declared and assumed sizes and decides cel/cost; the
// strict one knows no input size at all, so a bounded strict estimate holds for any input and
// lets the program skip the runtime cost tracker.
type costEstimator struct {
	hints  map[string]hint
	strict bool
}

// EstimateSize implements checker.CostEstimator.
func (c *costEstimator) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if s := c.sizeOfPath(n.Path()); s != nil {
		return s
	}
	// Values of fixed size, whatever the input: type values, null, and the fixed objects.
	t := n.Type()
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case types.TypeKind, types.NullTypeKind:
		return &unitSize
	case types.StructKind:
		if o, ok := fixedObjects[t.TypeName()]; ok {
			return &checker.SizeEstimate{Min: 0, Max: uint64(len(o.names))}
		}
	}
	return nil
}

var unitSize = checker.FixedSizeEstimate(1)

// EstimateCallCost implements checker.CostEstimator; function costs come from the overload
// estimators registered on the environment.
func (c *costEstimator) EstimateCallCost(function, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return nil
}

func (c *costEstimator) sizeOfPath(path []string) *checker.SizeEstimate {
	if c.strict || len(path) == 0 {
		return nil
	}
	h, ok := c.hints[strings.Join(path, ".")]
	if !ok {
		return nil
	}
	if h.declared != nil {
		return h.declared
	}
	return h.assumed
}

// addTypeHints records the assumed sizes reachable from a variable of a fixed type.
func addTypeHints(hints map[string]hint, path string, t *types.Type, h hint, depth int) {
	if depth > 8 {
		return
	}
	switch t.Kind() {
	case types.StringKind:
		if h.assumed == nil {
			h.assumed = assumedString
		}
		hints[path] = h
	case types.ListKind:
		if h.assumed == nil {
			h.assumed = assumedList
		}
		hints[path] = h
		addTypeHints(hints, path+".@items", t.Parameters()[0], hint{}, depth+1)
	case types.MapKind:
		if h.assumed == nil {
			h.assumed = assumedMap
		}
		hints[path] = h
		addTypeHints(hints, path+".@keys", t.Parameters()[0], hint{}, depth+1)
		addTypeHints(hints, path+".@values", t.Parameters()[1], hint{}, depth+1)
	case types.StructKind:
		o, ok := fixedObjects[t.TypeName()]
		if !ok {
			return
		}
		// An object compares field by field: its size is its field count.
		hints[path] = hint{declared: &checker.SizeEstimate{Min: 0, Max: uint64(len(o.names))}}
		for _, name := range o.names {
			f := o.fields[name]
			addTypeHints(hints, path+"."+name, f.ft.Type, hint{declared: f.declared, assumed: f.assumed}, depth+1)
		}
	}
}

// addSchemaHints records the declared and assumed sizes of the args paths.
func addSchemaHints(hints map[string]hint, path string, n *schemaNode, depth int) {
	if n == nil || depth > maxSchemaDepth+1 {
		return
	}
	var h hint
	if n.bound >= 0 {
		h.declared = &checker.SizeEstimate{Min: 0, Max: uint64(n.bound)}
	}
	switch n.kind {
	case kindString:
		h.assumed = assumedString
		hints[path] = h
	case kindList:
		h.assumed = assumedList
		hints[path] = h
		addSchemaHints(hints, path+".@items", n.elem, depth+1)
	case kindMap:
		h.assumed = assumedMap
		hints[path] = h
		hints[path+".@keys"] = hint{assumed: assumedString}
		addSchemaHints(hints, path+".@values", n.elem, depth+1)
	case kindObject:
		hints[path] = hint{declared: &checker.SizeEstimate{Min: 0, Max: uint64(len(n.props))}}
		for name, c := range n.props {
			addSchemaHints(hints, path+"."+name, c, depth+1)
		}
	}
}
