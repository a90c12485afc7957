package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/agentc-dev/agentc/compiler"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
	"github.com/agentc-dev/agentc/runtime/plan"
)

func encodePlan(c *compiler.Compilation) ([]byte, error) { return plan.Encode(c.Plan) }

// maxPlanDifferences bounds the differences build -check lists.
const maxPlanDifferences = 20

// checkPlan compares the plan in file with built, the plan of policy, and
// reports each difference by JSON pointer: exitOK when they are the same
// plan (whatever the layout of the file), exitProblems when they differ,
// exitUsage when the file cannot be read or does not load as a plan (as
// vet -baseline).
func checkPlan(env *cliEnv, file, policy string, built *plan.Plan) int {
	deployed, err := plan.Load(file)
	if err != nil {
		var pe *plan.Error
		if errors.As(err, &pe) {
			fmt.Fprintf(env.stderr, "agentc: %v\n", pe)
			return exitUsage
		}
		return fail(env, "build -check: %v", err)
	}
	a, err := planTree(deployed)
	if err != nil {
		return fail(env, "build -check: %v", err)
	}
	b, err := planTree(built)
	if err != nil {
		return fail(env, "build -check: %v", err)
	}
	var diffs []string
	diffTrees("", a, b, file, &diffs)
	if len(diffs) == 0 {
		return exitOK
	}
	fmt.Fprintf(env.stderr, "agentc: %s is not the plan of %s:\n", file, policy)
	for i, d := range diffs {
		if i == maxPlanDifferences {
			fmt.Fprintf(env.stderr, "\tand %d more\n", len(diffs)-i)
			break
		}
		fmt.Fprintf(env.stderr, "\t%s\n", d)
	}
	return exitProblems
}

// planTree returns p as a JSON tree (objects, arrays, json.Number...).
func planTree(p *plan.Plan) (any, error) {
	b, err := plan.Encode(p)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var v any
	return v, dec.Decode(&v)
}

// diffTrees appends to out each place where the deployed tree a differs
// from the built tree b: a value changed, or a member or element only in
// one of them.
func diffTrees(ptr string, a, b any, file string, out *[]string) {
	loc := ptr
	if loc == "" {
		loc = "/"
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := slices.Collect(maps.Keys(x))
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := ptr + "/" + jsonpointer.Escape(k)
			xv, inA := x[k]
			yv, inB := y[k]
			switch {
			case !inB:
				*out = append(*out, p+": only in "+file)
			case !inA:
				*out = append(*out, p+": only in the build")
			default:
				diffTrees(p, xv, yv, file, out)
			}
		}
		return
	case []any:
		y, ok := b.([]any)
		if !ok {
			break
		}
		if isChain(ptr) && diffLayers(ptr, x, y, file, out) {
			return
		}
		for i := range max(len(x), len(y)) {
			p := ptr + "/" + strconv.Itoa(i)
			switch {
			case i >= len(y):
				*out = append(*out, p+": only in "+file)
			case i >= len(x):
				*out = append(*out, p+": only in the build")
			default:
				diffTrees(p, x[i], y[i], file, out)
			}
		}
		return
	case json.Number:
		// 2 and 2.0 are one number.
		if y, ok := b.(json.Number); ok {
			fx, errx := x.Float64()
			fy, erry := y.Float64()
			if x == y || errx == nil && erry == nil && fx == fy {
				return
			}
		}
	default:
		if reflect.DeepEqual(a, b) {
			return
		}
	}
	*out = append(*out, fmt.Sprintf("%s: %s in %s, %s in the build", loc, shortJSON(a), file, shortJSON(b)))
}

// isChain reports whether ptr is the pointer of a chain's layers
// (/chains/STAGE).
func isChain(ptr string) bool {
	rest, ok := strings.CutPrefix(ptr, "/chains/")
	return ok && rest != "" && !strings.Contains(rest, "/")
}

// layerID is the identity of a layer of a chain, its kind and name (its
// kind when unnamed), and how messages name it; ok is false for an element
// that is not a layer.
func layerID(v any) (id, label string, ok bool) {
	l, isObj := v.(map[string]any)
	if !isObj {
		return "", "", false
	}
	use, isStr := l["use"].(string)
	if !isStr || use == "" {
		return "", "", false
	}
	name, _ := l["name"].(string)
	if name == "" || name == use {
		return use + "\x00" + use, use, true
	}
	return use + "\x00" + name, name + " (" + use + ")", true
}

// diffLayers appends the differences between the layers x of a chain in
// file and y in the build, pairing them by identity (layerID) rather than
// place: a layer of one only is named at its place there, a layer of both
// is compared at its place in the build, and the order of the layers of
// both, when it differs, is named once at the chain. It returns false,
// appending nothing, when an element is not a layer or two have one
// identity (the loader refuses such a plan; compared by place).
func diffLayers(ptr string, x, y []any, file string, out *[]string) bool {
	index := func(ls []any) (map[string]int, []string, bool) {
		at, labels := map[string]int{}, make([]string, len(ls))
		for i, v := range ls {
			id, label, ok := layerID(v)
			if _, dup := at[id]; !ok || dup {
				return nil, nil, false
			}
			at[id], labels[i] = i, label
		}
		return at, labels, true
	}
	inX, labelsX, okX := index(x)
	inY, labelsY, okY := index(y)
	if !okX || !okY {
		return false
	}
	var orderX, orderY []string
	for i, v := range x {
		if id, _, _ := layerID(v); hasID(inY, id) {
			orderX = append(orderX, labelsX[i])
		}
	}
	for j, v := range y {
		if id, _, _ := layerID(v); hasID(inX, id) {
			orderY = append(orderY, labelsY[j])
		}
	}
	if !slices.Equal(orderX, orderY) {
		*out = append(*out, fmt.Sprintf("%s: layers in the order %s in %s, %s in the build",
			ptr, strings.Join(labelsX, ", "), file, strings.Join(labelsY, ", ")))
	}
	for j, v := range y {
		id, _, _ := layerID(v)
		p := ptr + "/" + strconv.Itoa(j)
		if i, ok := inX[id]; ok {
			diffTrees(p, x[i], v, file, out)
		} else {
			*out = append(*out, fmt.Sprintf("%s: layer %s only in the build", p, labelsY[j]))
		}
	}
	for i, v := range x {
		if id, _, _ := layerID(v); !hasID(inY, id) {
			*out = append(*out, fmt.Sprintf("%s/%d: layer %s only in %s", ptr, i, labelsX[i], file))
		}
	}
	return true
}

func hasID(at map[string]int, id string) bool {
	_, ok := at[id]
	return ok
}

// shortJSON renders v as JSON, cut to 60 bytes.
func shortJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
