package filecheck

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/internal/argpath"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "file_check"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitGuards, runtime.TraitShortCircuits},
		Doc:     "confines file-path arguments to allowed roots, extensions and sizes",
		New:     func() runtime.Middleware { return &Middleware{} },
	})
}

// Middleware is the file_check layer; its exported fields are its config
// (schemas/file_check.cue).
type Middleware struct {
	// Roots are the directories paths must stay inside (relative roots are
	// resolved at Build against runtime.Deps.Dir, else the process's
	// working directory).
	Roots []string `json:"roots"`
	// Extensions allowed (".go"); empty allows any.
	Extensions []string `json:"extensions,omitempty"`
	// MaxBytes refuses larger existing files (0: no limit).
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// MustExist refuses paths that do not exist.
	MustExist bool `json:"must_exist"`
	// AllowHardLinks admits regular files with more than one name (Config.AllowHardLinks).
	AllowHardLinks bool `json:"allow_hard_links"`

	name    string
	checker *Checker
	// scoped are the tools the layer's tools: names (Layer.Tools).
	scoped []string
}

// Provision builds the checker once; a missing root is an error.
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	m.scoped = b.Layer.Tools
	// Relative roots are relative to the deps' directory (the policy's
	// directory under agentc run and agentc test).
	roots := make([]string, len(m.Roots))
	for i, r := range m.Roots {
		roots[i] = b.Path(r)
	}
	c, err := New(Config{Roots: roots, Extensions: m.Extensions, MaxBytes: m.MaxBytes, MustExist: m.MustExist, AllowHardLinks: m.AllowHardLinks})
	if err != nil {
		return err
	}
	m.checker = c
	return nil
}

// Validate requires at least one root, none of them beginning with "~".
func (m *Middleware) Validate() error {
	if len(m.Roots) == 0 {
		return errors.New("roots: at least one root is required")
	}
	for i, r := range m.Roots {
		// No shell expands it: "~/work" names a directory "~" beside the
		// policy, and Build fails when it does not exist.
		if strings.HasPrefix(r, "~") {
			return fmt.Errorf("roots[%d]: %q: a leading ~ is not expanded; write the home directory's path", i, r)
		}
	}
	if m.MaxBytes < 0 {
		return fmt.Errorf("max_bytes must not be negative, got %d", m.MaxBytes)
	}
	return nil
}

// WrapTool implements runtime.ToolWrapper. A tool whose declaration has a
// path_arg has every string it references checked before the inner layers
// run (a name, a JSON pointer such as "/files/*/path", or a list of them):
// any refusal, a referenced argument that is missing or not a string, or an
// object member beside one whose name differs from it only in case blocks the
// call with a *runtime.BlockedError naming the layer. On success the inner
// layers and the tool see a copy of the arguments in which each path is the
// resolved real path (Checker.Check), which is what the tool should open; the
// caller's arguments are never modified, and layers outside this one see the
// original once it returns. An I/O failure while resolving is a permanent
// *runtime.CallError. A tool without path_arg passes through, unless the
// layer's tools: names it (unchecked).
func (m *Middleware) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if err := m.unchecked(c); err != nil {
			return nil, err
		}
		if c.Tool == nil {
			return next(ctx, c)
		}
		args, changed, err := m.check(c, false)
		if err != nil {
			return nil, err
		}
		if !changed {
			return next(ctx, c)
		}
		orig := c.Args
		c.Args = args
		res, err := next(ctx, c)
		c.Args = orig
		return res, err
	}
}

// AdmitTool implements runtime.ToolAdmitter: the path_arg check WrapTool
// makes, over a call that is proposed, not run here: a gateway relays it to
// the client, which runs the tool on the path as the model wrote it. A path
// that is not absolute is refused, since the client reads it against its
// own working directory (or as a URL: "file:///etc/shadow"), not against
// the first root the check reads it from. An admitted call's c.Args become
// the copy with each resolved real path, as WrapTool hands the inner
// layers: the admitters inside this layer (a tool_policy arg_patterns
// entry, a guard reading the path) decide on the real path the client
// opens, not on one spelling of it. The caller's arguments, which the
// gateway relays, are not modified.
func (m *Middleware) AdmitTool(_ context.Context, c *runtime.ToolCall) error {
	if err := m.unchecked(c); err != nil {
		return err
	}
	if c.Tool == nil {
		return nil
	}
	args, changed, err := m.check(c, true)
	if err == nil && changed {
		c.Args = args
	}
	return err
}

// unchecked refuses a call of a tool the layer's tools: names that
// declares no path_arg: the layer was meant to check its paths and cannot
// tell which argument holds one (an MCP tool the policy does not declare,
// one that appeared upstream after the load), so the call would pass
// unchecked.
func (m *Middleware) unchecked(c *runtime.ToolCall) error {
	if !slices.Contains(m.scoped, c.Name) || c.Tool != nil && len(c.Tool.PathRefs()) > 0 {
		return nil
	}
	return &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf(
		"tool %s declares no path_arg: the layer is scoped to it (tools:) but cannot tell which argument holds a path, so the call is refused; declare its path_arg in the policy's tools: (agentc mcp-tools prints one for an MCP tool), or remove it from the layer's tools:", c.Name)}
}

// check checks every path the path_arg references of c reach. It returns
// the arguments with each path replaced by its resolved real path (a copy;
// c.Args when no path changed, reported by changed), or the refusal. A
// proposed call's paths must be absolute (AdmitTool).
func (m *Middleware) check(c *runtime.ToolCall, proposed bool) (args map[string]any, changed bool, err error) {
	args = c.Args
	var paths []argpath.Value
	for _, ref := range c.Tool.PathRefs() {
		p, err := argpath.Parse(ref)
		if err != nil {
			return nil, false, &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: path_arg: %v", c.Name, err)}
		}
		vs, err := argpath.Resolve(c.Args, p)
		if err != nil {
			return nil, false, &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: path %v", c.Name, err)}
		}
		paths = append(paths, vs...)
	}
	for _, v := range paths {
		if proposed && !filepath.IsAbs(v.S) {
			return nil, false, &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: argument %s: the path %q is not absolute: the client that runs a proposed call reads it against its own directory, not against the root %s", c.Name, v.At, v.S, m.checker.lexRoots[0])}
		}
		real, err := m.checker.Check(v.S)
		if err != nil {
			var denied *DeniedError
			if errors.As(err, &denied) {
				return nil, false, &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: argument %s: %s denied: %s", c.Name, v.At, denied.Path, denied.Reason)}
			}
			return nil, false, &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name, Message: fmt.Sprintf("tool %s: cannot check %s", c.Name, v.S), Err: err}
		}
		if real != v.S {
			args, changed = argpath.Replace(args, v, real), true
		}
	}
	return args, changed, nil
}

var _ runtime.ToolWrapper = (*Middleware)(nil)
