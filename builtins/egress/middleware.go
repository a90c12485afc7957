package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/agentc-dev/agentc/internal/argpath"
	"github.com/agentc-dev/agentc/internal/jsonpointer"
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
		Doc:    "checks the URLs in a tool call's arguments: http/https only, host allowlist, no private or special addresses",
		New:    func() runtime.Middleware { return &Middleware{} },
	})
}

// Middleware is the egress layer; its exported fields are its config
// (schemas/egress.cue).
type Middleware struct {
	// Allow lists the hosts a tool may reach (Config.Allow).
	Allow []string `json:"allow"`
	// ScanArgs checks every URL written out anywhere in a call's
	// arguments as well (nil means true).
	ScanArgs *bool `json:"scan_args,omitempty"`

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
// url_arg has every string it references checked with CheckURL before the
// inner layers run (a name, a JSON pointer such as "/request/url" or
// "/urls/*", or a list of them): any refusal, a referenced argument that is
// missing or not a string, or an object member beside one whose name differs
// from it only in case blocks the call with a *runtime.BlockedError naming
// the layer; a failed name lookup is a transient *runtime.CallError. Every
// call that passes (with or without a url_arg) runs with the guarded client
// on its context (ClientFrom).
func (m *Middleware) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	g := &guarded{checker: m.checker, client: m.client}
	scan := m.ScanArgs == nil || *m.ScanArgs
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		var refs []string
		if c.Tool != nil {
			refs = c.Tool.URLRefs()
		}
		if len(refs) > 0 || scan {
			if err := m.check(ctx, c, refs, scan); err != nil {
				return nil, err
			}
		}
		return next(context.WithValue(ctx, clientKey{}, g), c)
	}
}

// urlText finds the URLs written out in a text: a scheme, "://" and what
// follows up to a space, a quote or an angle bracket. What follows is kept
// whole (a backslash or an "@" included) so that the URL checked is the one
// a lenient parser would read; a URL that does not parse is refused.
var urlText = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^\s"'<>]*`)

// scanURLs appends every URL written out in v (strings and object keys, at
// any depth) as a Value located at its argument.
func scanURLs(v any, at string, out []argpath.Value) []argpath.Value {
	switch x := v.(type) {
	case string:
		for _, u := range urlText.FindAllString(x, -1) {
			out = append(out, argpath.Value{At: at, S: u})
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			loc := at + "/" + jsonpointer.Escape(k)
			out = scanURLs(k, loc, out)
			out = scanURLs(x[k], loc, out)
		}
	case []any:
		for i, e := range x {
			out = scanURLs(e, at+"/"+strconv.Itoa(i), out)
		}
	case []string:
		for i, e := range x {
			out = scanURLs(e, at+"/"+strconv.Itoa(i), out)
		}
	case nil, bool, float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
	default:
		// A Go value of another type (a map[string]string, a struct):
		// scan its JSON form, which is what the tool is sent; one that has
		// none is scanned as its printed form.
		var j any
		if b, err := json.Marshal(x); err == nil && json.Unmarshal(b, &j) == nil {
			return scanURLs(j, at, out)
		}
		return scanURLs(fmt.Sprint(x), at, out)
	}
	return out
}

func (m *Middleware) check(ctx context.Context, c *runtime.ToolCall, refs []string, scan bool) error {
	var urls []argpath.Value
	for _, ref := range refs {
		p, err := argpath.Parse(ref)
		if err != nil {
			return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: url_arg: %v", c.Name, err)}
		}
		vs, err := argpath.Resolve(c.Args, p)
		if err != nil {
			return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: url %v", c.Name, err)}
		}
		urls = append(urls, vs...)
	}
	if scan {
		urls = scanURLs(map[string]any(c.Args), "", urls)
	}
	seen := make(map[string]bool, len(urls))
	for _, u := range urls {
		if seen[u.S] {
			continue
		}
		seen[u.S] = true
		err := m.checker.CheckURL(ctx, u.S)
		if err == nil {
			continue
		}
		var denied *DeniedError
		if errors.As(err, &denied) {
			return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: argument %s: %s denied: %s", c.Name, u.At, denied.URL, denied.Reason)}
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return &runtime.CallError{Kind: runtime.KindTransient, Layer: m.name,
			Message: fmt.Sprintf("tool %s: cannot check %s", c.Name, u.S), Err: err}
	}
	return nil
}

// AdmitTool implements runtime.ToolAdmitter: the check WrapTool makes, of
// the URLs url_arg references and, with scan_args, of every URL written out
// in the arguments (a failed name lookup is its transient error: the call is
// not admitted).
func (m *Middleware) AdmitTool(ctx context.Context, c *runtime.ToolCall) error {
	var refs []string
	if c.Tool != nil {
		refs = c.Tool.URLRefs()
	}
	scan := m.ScanArgs == nil || *m.ScanArgs
	if len(refs) == 0 && !scan {
		return nil
	}
	return m.check(ctx, c, refs, scan)
}

var (
	_ runtime.ToolWrapper  = (*Middleware)(nil)
	_ runtime.ToolAdmitter = (*Middleware)(nil)
)
