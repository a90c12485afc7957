package egress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "egress"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageTool},
		Traits: []runtime.Trait{runtime.TraitGuards},
		Doc:    "checks a tool's URL argument: http/https only, host allowlist, no private or special addresses",
		New:    func() runtime.Middleware { return &Middleware{} },
	})
}

// Middleware is the egress layer; its exported fields are its config
// (schemas/egress.cue).
type Middleware struct {
	// Allow lists the hosts a tool may reach (Config.Allow).
	Allow []string `json:"allow"`

	name    string
	checker *Checker
	client  *http.Client
}

// Provision builds the checker and the guarded HTTP client once; they look
// host names up with the pipeline's resolver (runtime.Deps.Resolver).
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	c, err := New(Config{Allow: m.Allow, Resolver: b.Resolver()})
	if err != nil {
		return fmt.Errorf("allow: %w", err)
	}
	m.checker = c
	m.client = HTTPClient(c)
	return nil
}

// Validate requires the allow list (an empty list permits no host; write
// "*" to rely on the address checks alone).
func (m *Middleware) Validate() error {
	if m.Allow == nil {
		return errors.New(`allow is required (write ["*"] to allow any public host)`)
	}
	return nil
}

// Checker returns the layer's checker (nil before Provision).
func (m *Middleware) Checker() *Checker { return m.checker }

type clientKey struct{}

// guarded is what the layer puts on a tool call's context.
type guarded struct {
	checker *Checker
	client  *http.Client
}

// ClientFrom returns the guarded HTTP client of the innermost egress layer the
// tool call passed, for tools that fetch URLs: it re-checks every request and
// redirect against that layer's policy and dials only addresses that the
// policy allows (which also stops DNS rebinding). It reports false when no
// egress layer applied to the call; a tool should then refuse to fetch, or
// use a client of its own making.
func ClientFrom(ctx context.Context) (*http.Client, bool) {
	g, ok := ctx.Value(clientKey{}).(*guarded)
	if !ok {
		return nil, false
	}
	return g.client, true
}

// CheckerFrom returns the checker of the innermost egress layer the tool call
// passed, for tools that connect by other means than HTTP (use Dialer with
// it).
func CheckerFrom(ctx context.Context) (*Checker, bool) {
	g, ok := ctx.Value(clientKey{}).(*guarded)
	if !ok {
		return nil, false
	}
	return g.checker, true
}

// WrapTool implements runtime.ToolWrapper. A tool whose declaration has a
// url_arg has that argument checked with CheckURL before the inner layers run:
// a refusal, a missing argument or one that is not a string blocks the call
// with a *runtime.BlockedError naming the layer; a failed name lookup is a
// transient *runtime.CallError. Every call that passes (with or without a
// url_arg) runs with the guarded client on its context (ClientFrom).
func (m *Middleware) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	g := &guarded{checker: m.checker, client: m.client}
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if c.Tool != nil && c.Tool.URLArg != "" {
			if err := m.check(ctx, c); err != nil {
				return nil, err
			}
		}
		return next(context.WithValue(ctx, clientKey{}, g), c)
	}
}

func (m *Middleware) check(ctx context.Context, c *runtime.ToolCall) error {
	arg := c.Tool.URLArg
	v, ok := c.Args[arg]
	if !ok {
		return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: url argument %q is missing", c.Name, arg)}
	}
	raw, ok := v.(string)
	if !ok {
		return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: url argument %q is not a string", c.Name, arg)}
	}
	for name := range c.Args {
		// A tool that decodes its arguments case-insensitively (Go's
		// encoding/json does) may read "URL" instead of the "url" checked.
		if name != arg && strings.EqualFold(name, arg) {
			return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: argument %q beside url argument %q", c.Name, name, arg)}
		}
	}
	err := m.checker.CheckURL(ctx, raw)
	if err == nil {
		return nil
	}
	var denied *DeniedError
	if errors.As(err, &denied) {
		return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: %s denied: %s", c.Name, denied.URL, denied.Reason)}
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return &runtime.CallError{Kind: runtime.KindTransient, Layer: m.name,
		Message: fmt.Sprintf("tool %s: cannot check %s", c.Name, raw), Err: err}
}

// AdmitTool implements runtime.ToolAdmitter: the url_arg check WrapTool
// makes (a failed name lookup is its transient error: the call is not
// admitted).
func (m *Middleware) AdmitTool(ctx context.Context, c *runtime.ToolCall) error {
	if c.Tool == nil || c.Tool.URLArg == "" {
		return nil
	}
	return m.check(ctx, c)
}

var (
	_ runtime.ToolWrapper  = (*Middleware)(nil)
	_ runtime.ToolAdmitter = (*Middleware)(nil)
)
