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
// plan (whatever the layout of the file), exitProblems when they differ or
// the file is not a plan, exitUsage when it cannot be read.
func checkPlan(env *cliEnv, file, policy string, built *plan.Plan) int {
	deployed, err := plan.Load(file)
	if err != nil {
		var pe *plan.Error
		if errors.As(err, &pe) {
			fmt.Fprintf(env.stderr, "agentc: %v\n", pe)
			return exitProblems
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

// shortJSON renders v as JSON, cut to 60 bytes.
func shortJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
