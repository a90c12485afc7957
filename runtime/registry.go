package runtime

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"sync"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// Trait describes a middleware's behaviour to the compiler's vet rules and to
// agentc explain. The values match the traits of schemas/policy.cue.
type Trait string

// The traits.
const (
	TraitReinvokes           Trait = "reinvokes"
	TraitShortCircuits       Trait = "short_circuits"
	TraitRecords             Trait = "records"
	TraitCountsTokens        Trait = "counts_tokens"
	TraitRewritesMessages    Trait = "rewrites_messages"
	TraitGuards              Trait = "guards"
	TraitCaches              Trait = "caches"
	TraitSideEffectSensitive Trait = "side_effect_sensitive"
)

// Middleware is an instance of a module: one layer of one chain. Build
// decodes the layer's config into it (so it is usually a pointer to the
// config struct) and calls the lifecycle methods it implements:
// Provisioner, Validator, and the stage's wrapper (ChatWrapper, ToolWrapper,
// TurnWrapper). Build calls CleanerUpper on a failed build and Pipeline.Close
// calls it on shutdown.
type Middleware any

// ChatHandler runs one chat call. It pushes each delta to yield and stops
// when yield returns false. It returns the stream's error; a consumer stop is
// not an error.
type ChatHandler func(ctx context.Context, c *ChatCall, yield func(Delta) bool) error

// ToolHandler runs one tool call and returns its result.
type ToolHandler func(ctx context.Context, c *ToolCall) (any, error)

// TurnHandler runs one turn and returns its output text.
type TurnHandler func(ctx context.Context, c *TurnCall) (string, error)

// ChatWrapper is a middleware of the chat stage. WrapChat is called once at
// Build with the handler of the inner layers.
type ChatWrapper interface {
	WrapChat(next ChatHandler) ChatHandler
}

// ToolWrapper is a middleware of the tool stage.
type ToolWrapper interface {
	WrapTool(next ToolHandler) ToolHandler
}

// ToolKeyer is implemented by a tool-stage middleware that passes an
// idempotency key of its own downstream, in place of the one the call
// derives from its run (idempotent with key_args: the same in every run
// that makes the call). When the caller supplied no key, the pipeline asks
// the outermost such layer that applies to a call (its `tools` and `when`)
// before any layer runs, and the call carries the key it returns from the
// start: a layer outside it (an audit) records the key the tool gets, and
// a person settling a call in doubt finds it at the tool's provider by
// that key. ToolKey returns false to leave the call's own key: the layer
// keys this call on its run, or does not dedupe it (a read-only tool, a
// key argument missing).
type ToolKeyer interface {
	ToolKey(c *ToolCall) (string, bool)
}

// ToolAdmitter is implemented by a tool-stage middleware whose refusal of
// a call can be decided from the call alone, before anything runs: an allow
// or deny list, an argument check, a predicate over the call. AdmitTool
// returns the refusal WrapTool would return for c (a *BlockedError naming
// the layer), or nil; a layer that would rewrite the call before the tool
// sees it (pii redact) refuses a call it would rewrite, since a proposal is
// relayed as the model made it and runs where no layer reaches it. A layer
// that hands the inner layers arguments of its own making that mean the
// same call (file_check's resolved real paths) sets c.Args to them when it
// admits the call, so that the admitters inside it decide what they would
// decide run here; it sets a copy, never modifying the caller's arguments,
// which are relayed. It must not run the tool, call a model or change any
// state (no budget charged, no token taken, no record written).
// Pipeline.AdmitTool runs these checks over a tool call that is proposed
// but not run here (a gateway relaying a model's tool call to the client
// that executes it).
type ToolAdmitter interface {
	AdmitTool(ctx context.Context, c *ToolCall) error
}

// TurnWrapper is a middleware of the turn stage.
type TurnWrapper interface {
	WrapTurn(next TurnHandler) TurnHandler
}

// Provisioner sets a middleware up after its config is decoded: resolve
// dependencies, compile predicates, open state. It must not start goroutines
// that outlive Cleanup.
type Provisioner interface {
	Provision(b *BuildContext) error
}

// Validator checks a provisioned middleware's config.
type Validator interface {
	Validate() error
}

// CleanerUpper releases what Provision acquired. Cleanup must tolerate a
// middleware whose Provision failed or never ran.
type CleanerUpper interface {
	Cleanup() error
}

// ConcurrentCleaner is a CleanerUpper whose Cleanup waits, within a bound
// of its own, for writes it still sends to its store in the background
// (meter's settlements, idempotent's results), and touches no other
// layer's state: Pipeline.Close runs the Cleanups of all such layers at
// once, before the other layers', so that their waits overlap instead of
// adding up, store after store.
type ConcurrentCleaner interface {
	CleanerUpper
	// CleansUpConcurrently marks the middleware; it does nothing.
	CleansUpConcurrently()
}

// ConfigDecoder is implemented by a middleware that decodes its own config
// instead of the default strict JSON decoding into the middleware value.
type ConfigDecoder interface {
	DecodeConfig(raw []byte) error
}

// Module describes a middleware kind: the builtins and custom middlewares
// register one each under a unique id.
type Module struct {
	// ID is the `use` value of chain entries.
	ID string
	// Stages lists the stages the middleware supports ("chat", "tool",
	// "turn"). New's value must implement the wrapper of each.
	Stages []plan.Stage
	// Traits describe the middleware's behaviour to vet rules.
	Traits []Trait
	// Builtin marks agentc's own middlewares (the builtins packages),
	// whose traits say all they may do to a call. A host's middleware
	// leaves it false: its traits say how vet orders it, not all it does
	// (a quota of its own may refuse any call), so agentc serve answers a
	// token count behind it with an estimate rather than asking the
	// model's provider.
	Builtin bool
	// Repeatable modules may appear more than once in a chain.
	Repeatable bool
	// DistinctBy lists config fields (their JSON names) that tell apart
	// two layers of a module that is not repeatable: layers of one chain
	// that differ in any of them keep separate state, and vet does not
	// report them as duplicates (order/duplicate).
	DistinctBy []string
	// Doc is a one-line description.
	Doc string
	// ConfigSchema is the CUE source of the config struct body (the fields
	// without braces), used by agentc vet to check entries of custom
	// middlewares. Empty: the middleware takes no config fields.
	ConfigSchema string
	// Constraints are the ordering rules the middleware ships, checked by
	// agentc vet like the builtins' (docs/rules.md).
	Constraints []Constraint
	// New returns a new, unconfigured instance. It has no side effects.
	New func() Middleware
}

// Constraint is an ordering rule between two layers of one chain: outer must
// sit outside (at a lower index than) inner. A violation is reported as rule
// order/<ID>.
type Constraint struct {
	// ID names the rule.
	ID string
	// Stage restricts the rule to one chain ("" applies to all).
	Stage plan.Stage
	// Outer and Inner name module ids or entry names.
	Outer, Inner string
	// When is an optional CEL condition over the two entries' configs
	// (`outer`, `inner`).
	When string
	// Severity is "error" or "warning" ("" means error).
	Severity string
	// Why is shown to the user when the rule is violated.
	Why string
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Module{}
	idPattern  = regexp.MustCompile(`^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$`)
)

// Register adds a module to the registry. It panics when the id is invalid or
// taken, a stage is unknown, New is nil, or New's value does not implement the
// wrapper of every declared stage: registration happens in init() and such a
// mistake is a programming error.
func Register(m Module) {
	if err := checkModule(m); err != nil {
		panic("runtime.Register: " + err.Error())
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[m.ID]; dup {
		panic(fmt.Sprintf("runtime.Register: module %q already registered", m.ID))
	}
	m.Stages = slices.Clone(m.Stages)
	m.Traits = slices.Clone(m.Traits)
	m.Constraints = slices.Clone(m.Constraints)
	registry[m.ID] = m
}

func checkModule(m Module) error {
	if !idPattern.MatchString(m.ID) {
		return fmt.Errorf("invalid module id %q", m.ID)
	}
	if m.New == nil {
		return fmt.Errorf("module %q: New is nil", m.ID)
	}
	if len(m.Stages) == 0 {
		return fmt.Errorf("module %q: no stages", m.ID)
	}
	for _, c := range m.Constraints {
		if c.ID == "" || c.Outer == "" || c.Inner == "" || c.Why == "" {
			return fmt.Errorf("module %q: constraint %q needs id, outer, inner and why", m.ID, c.ID)
		}
		if c.Severity != "" && c.Severity != "error" && c.Severity != "warning" {
			return fmt.Errorf("module %q: constraint %q: severity %q is not error or warning", m.ID, c.ID, c.Severity)
		}
	}
	inst := m.New()
	for _, s := range m.Stages {
		var ok bool
		switch s {
		case plan.StageChat:
			_, ok = inst.(ChatWrapper)
		case plan.StageTool:
			_, ok = inst.(ToolWrapper)
		case plan.StageTurn:
			_, ok = inst.(TurnWrapper)
		default:
			return fmt.Errorf("module %q: unknown stage %q", m.ID, s)
		}
		if !ok {
			return fmt.Errorf("module %q: %T does not implement the %s stage wrapper", m.ID, inst, s)
		}
	}
	return nil
}

// LookupModule returns the module registered under id.
func LookupModule(id string) (Module, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	m, ok := registry[id]
	return m, ok
}

// Modules returns the registered modules sorted by id.
func Modules() []Module {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]Module, 0, len(registry))
	for _, m := range registry {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// moduleIDs returns the registered modules' ids, sorted.
func moduleIDs() []string {
	var out []string
	for _, m := range Modules() {
		out = append(out, m.ID)
	}
	return out
}

// Supports reports whether the module supports stage s.
func (m Module) Supports(s plan.Stage) bool { return slices.Contains(m.Stages, s) }

// HasTrait reports whether the module declares trait t.
func (m Module) HasTrait(t Trait) bool { return slices.Contains(m.Traits, t) }
