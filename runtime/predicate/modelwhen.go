package predicate

import (
	"context"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
)

// A chat-stage when read before any call: the one fact known of a call is
// the model it names, so the when is evaluated with request.model bound
// and everything else (the messages, the run, the other request fields)
// unknown. It then holds for every call of the model, for none, or depends
// on the call.

var modelWhen struct {
	once     sync.Once
	env      *cel.Env
	err      error
	unknowns []*cel.AttributePatternType
}

// ModelEnv returns the environment ModelWhen evaluates in: the chat
// stage's variables, all dyn, with the parser limits of the runtime's
// predicates.
func ModelEnv() (*cel.Env, error) {
	modelWhen.once.Do(func() {
		opts := []cel.EnvOption{
			cel.ParserRecursionLimit(MaxNestingDepth),
			cel.ParserExpressionSizeLimit(MaxSourceBytes),
			cel.ExpressionNodeLimit(maxNodes),
			// A when may read optionally (run.?meta), as the runtime's
			// predicates may: without it such a when would not parse here.
			cel.OptionalTypes(),
		}
		for _, v := range Variables(Chat) {
			opts = append(opts, cel.Variable(v.Name, cel.DynType))
			if v.Name != "request" {
				modelWhen.unknowns = append(modelWhen.unknowns, cel.AttributePattern(v.Name))
			}
		}
		fields, _ := ObjectFields("agentc.request")
		for _, f := range fields {
			if f.Name != "model" {
				modelWhen.unknowns = append(modelWhen.unknowns, cel.AttributePattern("request").QualString(f.Name))
			}
		}
		modelWhen.env, modelWhen.err = cel.NewEnv(opts...)
	})
	return modelWhen.env, modelWhen.err
}

// ModelWhen evaluates the chat-stage when src for a call of model ("" for
// a model not known either), the rest of the call unknown. known is false
// when the result depends on more than the model, or src does not compile
// or evaluate within DefaultCostLimit.
func ModelWhen(src, model string) (value, known bool) {
	env, err := ModelEnv()
	if err != nil {
		return false, false
	}
	checked, iss := env.Compile(src)
	if iss.Err() != nil || !checked.OutputType().IsAssignableType(cel.BoolType) {
		return false, false
	}
	return ModelWhenChecked(env, checked, model)
}

// ModelWhenChecked is ModelWhen for a when already checked in ModelEnv's
// environment.
func ModelWhenChecked(env *cel.Env, checked *cel.Ast, model string) (value, known bool) {
	prg, err := env.Program(checked, cel.EvalOptions(cel.OptPartialEval), cel.CostLimit(DefaultCostLimit), cel.InterruptCheckFrequency(64))
	if err != nil {
		return false, false
	}
	vars := map[string]any{}
	unknowns := modelWhen.unknowns
	if model != "" {
		vars["request"] = map[string]any{"model": model}
	} else {
		unknowns = append(append([]*cel.AttributePatternType{}, unknowns...), cel.AttributePattern("request"))
	}
	act, err := cel.PartialVars(vars, unknowns...)
	if err != nil {
		return false, false
	}
	// The cost limit bounds the evaluation; the deadline backs it up.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	out, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		return false, false
	}
	b, ok := out.Value().(bool)
	return b, ok
}
