package predicate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
)

// Limits on predicate source, applied before cel-go sees it.
const (
	// MaxSourceBytes is the longest predicate accepted, in bytes.
	MaxSourceBytes = 4096
	// MaxNestingDepth bounds the parser's recursion, that is how deeply expressions may nest.
	MaxNestingDepth = 48
	// maxNodes bounds the expression nodes after macro expansion.
	maxNodes = 4096
)

// EnvConfig selects the variables a predicate may read.
type EnvConfig struct {
	// Stage and Phase select the variables (docs/language.md, CEL predicates). The zero Phase is Before.
	Stage Stage
	Phase Phase
	// ArgsSchemas are the JSON Schemas of the tools a tool-stage predicate is scoped to. Nil or
	// empty leaves args untyped (map(string, dyn)); several schemas type args with the fields
	// all of them declare with the same type. Only the tool stage accepts schemas.
	ArgsSchemas []json.RawMessage
	// CostLimit bounds the estimated and the runtime cost; zero means DefaultCostLimit.
	CostLimit uint64
	// ValueSchema types the state stage's `value` (the value set, or the element appended) and
	// StateSchema its `state` (an object whose properties are the run's state fields); empty
	// leaves them dyn. Only the state stage accepts them.
	ValueSchema json.RawMessage
	StateSchema json.RawMessage
	// Value makes the expression compute a value of ValueSchema's type (a state `set`
	// transform, evaluated with Program.EvalValue) instead of a bool.
	Value bool
}

// Env is a CEL environment for one stage, phase and set of args schemas. It is immutable and
// safe for concurrent use; NewEnv returns a shared Env for an identical configuration.
type Env struct {
	cfg       EnvConfig
	cel       *cel.Env
	prov      *provider
	argsTyped bool
	hints     map[string]hint
	// valueType and valueConv are the state stage's `value` type and the conversion of a JSON
	// value to it (nil: none needed).
	valueType *types.Type
	valueConv func(any) (any, error)
}

// Config returns the configuration the environment was built from, with defaults applied.
func (e *Env) Config() EnvConfig {
	cfg := e.cfg
	cfg.ArgsSchemas = cloneSchemas(cfg.ArgsSchemas)
	return cfg
}

// ArgsTyped reports whether args is typed from schemas (false: map(string, dyn) or no args).
func (e *Env) ArgsTyped() bool { return e.argsTyped }

var (
	baseOnce sync.Once
	baseEnv  *cel.Env
	baseErr  error
)

// base returns the environment every stage environment extends: the standard library, the
// strings extension, optional values, the agentc functions, their costs and the parser limits.
// Its declarations are validated once and shared by the extensions.
func base() (*cel.Env, error) {
	baseOnce.Do(func() {
		opts := []cel.EnvOption{
			cel.CustomTypeAdapter(typeAdapter),
			cel.ParserRecursionLimit(MaxNestingDepth),
			cel.ParserExpressionSizeLimit(MaxSourceBytes),
			cel.ExpressionNodeLimit(maxNodes),
			cel.CrossTypeNumericComparisons(true),
			cel.DefaultUTCTimeZone(true),
			cel.OptionalTypes(),
			ext.Strings(),
			cel.CostEstimatorOptions(staticCostOptions()...),
			cel.EagerlyValidateDeclarations(true),
		}
		opts = append(opts, libraryOptions()...)
		baseEnv, baseErr = cel.NewEnv(opts...)
	})
	return baseEnv, baseErr
}

// envCache shares environments between identical configurations. It is bounded: when full, an
// arbitrary entry is dropped.
var envCache = struct {
	sync.Mutex
	m map[string]*Env
}{m: map[string]*Env{}}

const maxCachedEnvs = 256

// NewEnv returns the environment for cfg. It fails on an unknown stage or phase, on schemas
// given outside the tool stage, and on a schema that is not valid JSON.
func NewEnv(cfg EnvConfig) (*Env, error) {
	cfg.Phase = cfg.Phase.normalize()
	if err := validateStagePhase(cfg.Stage, cfg.Phase); err != nil {
		return nil, err
	}
	if cfg.CostLimit == 0 {
		cfg.CostLimit = DefaultCostLimit
	}
	if len(cfg.ArgsSchemas) > 0 && cfg.Stage != Tool {
		return nil, fmt.Errorf("args schemas apply to the tool stage only, not %s", cfg.Stage)
	}
	if (len(cfg.ValueSchema) > 0 || len(cfg.StateSchema) > 0 || cfg.Value) && cfg.Stage != State {
		return nil, fmt.Errorf("value and state schemas apply to the state stage only, not %s", cfg.Stage)
	}
	key, err := cacheKey(cfg)
	if err != nil {
		return nil, err
	}
	envCache.Lock()
	e, ok := envCache.m[key]
	envCache.Unlock()
	if ok {
		return e, nil
	}
	e, err = newEnv(cfg)
	if err != nil {
		return nil, err
	}
	envCache.Lock()
	if len(envCache.m) >= maxCachedEnvs {
		for k := range envCache.m {
			delete(envCache.m, k)
			break
		}
	}
	envCache.m[key] = e
	envCache.Unlock()
	return e, nil
}

func cacheKey(cfg EnvConfig) (string, error) {
	var b bytes.Buffer
	b.WriteString(string(cfg.Stage))
	b.WriteByte(0)
	b.WriteString(string(cfg.Phase))
	b.WriteByte(0)
	b.WriteString(strconv.FormatUint(cfg.CostLimit, 10))
	if cfg.Stage == State {
		b.WriteByte(0)
		b.WriteString(strconv.FormatBool(cfg.Value))
		for i, s := range []json.RawMessage{cfg.ValueSchema, cfg.StateSchema} {
			b.WriteByte(0)
			if len(bytes.TrimSpace(s)) == 0 {
				continue
			}
			if err := json.Compact(&b, s); err != nil {
				return "", fmt.Errorf("%s schema: %w", [2]string{"value", "state"}[i], err)
			}
		}
	}
	for i, s := range cfg.ArgsSchemas {
		b.WriteByte(0)
		if len(bytes.TrimSpace(s)) == 0 {
			continue
		}
		if err := json.Compact(&b, s); err != nil {
			return "", fmt.Errorf("args schema %d: %w", i, err)
		}
	}
	return b.String(), nil
}

func newEnv(cfg EnvConfig) (*Env, error) {
	b, err := base()
	if err != nil {
		return nil, fmt.Errorf("build base environment: %w", err)
	}
	reg, err := types.NewRegistry()
	if err != nil {
		return nil, err
	}
	cfg.ArgsSchemas = cloneSchemas(cfg.ArgsSchemas)
	e := &Env{
		cfg:   cfg,
		prov:  &provider{base: reg, objects: map[string]*objectType{}},
		hints: map[string]hint{},
	}
	var opts []cel.EnvOption
	for _, v := range stageVariables(cfg.Stage, cfg.Phase) {
		opts = append(opts, cel.Variable(v.name, v.typ))
		addTypeHints(e.hints, v.name, v.typ, hint{assumed: v.assumed}, 0)
	}
	if cfg.Stage == Tool {
		at, err := buildArgsTypes(cfg.ArgsSchemas)
		if err != nil {
			return nil, err
		}
		if at.root != nil {
			e.argsTyped = true
			e.prov.objects = at.objects
			opts = append(opts, cel.Variable("args", at.root))
			addSchemaHints(e.hints, "args", at.node, 0)
		} else {
			opts = append(opts, cel.Variable("args", types.NewMapType(types.StringType, types.DynType)))
		}
	}
	if cfg.Stage == State {
		so, err := e.stateVariables(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, so...)
	}
	opts = append([]cel.EnvOption{cel.CustomTypeProvider(e.prov)}, opts...)
	ce, err := b.Extend(opts...)
	if err != nil {
		return nil, fmt.Errorf("build %s environment: %w", cfg.Stage, err)
	}
	e.cel = ce
	return e, nil
}

// warmSource exercises the parts of the grammar predicates use most.
const warmSource = `tool.name == 'x' && !has(args.y) || args.z > 1.0 && request.messages.exists(m, m.content.contains('a')) && size([1, 2]) in {'k': 1} ? true : false`

// Warm builds the shared base environment and parses one predicate, so that
// cel-go's parser tables (built on first use, which costs a cold process
// several milliseconds) are ready. It is safe to call concurrently with any
// other function of the package: a compiler runs it in a goroutine while it
// loads a policy, and predicates compiled meanwhile wait for it.
func Warm() {
	env, err := base()
	if err != nil {
		return // NewEnv reports it
	}
	_, _ = env.Parse(warmSource)
}
