package predicate_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentc-dev/agentc/runtime/predicate"
)

const refundArgs = `{"type": "object", "required": ["order_id", "amount"], "properties": {
	"order_id": {"type": "string", "maxLength": 64},
	"amount": {"type": "number", "minimum": 0},
	"approved_by": {"type": "string", "maxLength": 64}}}`

// A guard scoped to the refund tool: its args are typed from the tool's schema, so a typo is
// an issue with a column.
func ExampleEnv_Check() {
	env, err := predicate.NewEnv(predicate.EnvConfig{
		Stage:       predicate.Tool,
		ArgsSchemas: []json.RawMessage{json.RawMessage(refundArgs)},
	})
	if err != nil {
		panic(err)
	}
	_, issues := env.Check("args.ammount > 100.0")
	for _, is := range issues {
		fmt.Println(is)
	}
	_, issues = env.Check("args.approved_by == 'bob'")
	for _, is := range issues {
		fmt.Println(is)
	}
	checked, _ := env.Check("args.amount > 100.0 && !has(args.approved_by)")
	fmt.Println(checked.Reads, checked.ReadsUntypedArgs)
	// Output:
	// 1:6: cel/type: undefined field 'ammount'; did you mean 'amount'?
	// 1:6: cel/type: args.approved_by is optional (not in the schema's required list): test has(args.approved_by) first or read args.?approved_by.orValue(...)
	// [args] false
}

// The plan stores a predicate as a Spec; the runtime rebuilds the program at Build.
func ExampleCompileSpec() {
	spec := predicate.Spec{
		Stage:       predicate.Tool,
		Phase:       predicate.Before,
		Source:      "args.amount > 100.0 && !has(args.approved_by)",
		ArgsSchemas: []json.RawMessage{json.RawMessage(refundArgs)},
	}
	prg, err := predicate.CompileSpec(spec)
	if err != nil {
		panic(err)
	}
	var args map[string]any
	_ = json.Unmarshal([]byte(`{"order_id": "A1", "amount": 150}`), &args)
	deny, err := prg.Eval(context.Background(), &predicate.ToolVars{
		Tool: predicate.ToolInfo{Name: "refund", SideEffecting: true},
		Args: args,
	})
	fmt.Println(deny, err)
	// Output:
	// true <nil>
}
