package filecheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "file_check"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageTool},
		Traits: []runtime.Trait{runtime.TraitGuards, runtime.TraitShortCircuits},
		Doc:    "confines file-path arguments to allowed roots, extensions and sizes",
		New:    func() runtime.Middleware { return &Middleware{} },
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

	name    string
	checker *Checker
}

// Provision builds the checker once; a missing root is an error.
func (m *Middleware) Provision(b *runtime.BuildContext) error {
	m.name = b.Name()
	// Relative roots are relative to the deps' directory (the policy's
	// directory under agentc run and agentc test).
	roots := make([]string, len(m.Roots))
	for i, r := range m.Roots {
		roots[i] = b.Path(r)
	}
	c, err := New(Config{Roots: roots, Extensions: m.Extensions, MaxBytes: m.MaxBytes, MustExist: m.MustExist})
	if err != nil {
		return err
	}
	m.checker = c
	return nil
}

// Validate requires at least one root.
func (m *Middleware) Validate() error {
	if len(m.Roots) == 0 {
		return errors.New("roots: at least one root is required")
	}
	if m.MaxBytes < 0 {
		return fmt.Errorf("max_bytes must not be negative, got %d", m.MaxBytes)
	}
	return nil
}

// WrapTool implements runtime.ToolWrapper. A tool whose declaration has a
// path_arg has that argument checked before the inner layers run: a refusal,
// a missing argument or one that is not a string blocks the call with a
// *runtime.BlockedError naming the layer. On success the inner layers and the
// tool see a copy of the arguments whose path_arg is the resolved real path
// (Checker.Check), which is what the tool should open; the caller's map is
// never modified, and layers outside this one see the original once it
// returns. An I/O failure while resolving is a permanent *runtime.CallError.
// A tool without path_arg passes through.
func (m *Middleware) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		if c.Tool == nil || c.Tool.PathArg == "" {
			return next(ctx, c)
		}
		p, real, err := m.check(c)
		if err != nil {
			return nil, err
		}
		if real == p {
			return next(ctx, c)
		}
		orig := c.Args
		args := maps.Clone(orig)
		args[c.Tool.PathArg] = real
		c.Args = args
		res, err := next(ctx, c)
		c.Args = orig
		return res, err
	}
}

// AdmitTool implements runtime.ToolAdmitter: the path_arg check WrapTool
// makes.
func (m *Middleware) AdmitTool(_ context.Context, c *runtime.ToolCall) error {
	if c.Tool == nil || c.Tool.PathArg == "" {
		return nil
	}
	_, _, err := m.check(c)
	return err
}

// check checks the path_arg of c, returning the path as given and its
// resolved real path, or the refusal.
func (m *Middleware) check(c *runtime.ToolCall) (p, real string, err error) {
	arg := c.Tool.PathArg
	v, ok := c.Args[arg]
	if !ok {
		return "", "", &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: path argument %q is missing", c.Name, arg)}
	}
	p, ok = v.(string)
	if !ok {
		return "", "", &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: path argument %q is not a string", c.Name, arg)}
	}
	if other, ok := caseVariant(c.Args, arg); ok {
		return "", "", &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: argument %q beside path argument %q", c.Name, other, arg)}
	}
	real, err = m.checker.Check(p)
	if err != nil {
		var denied *DeniedError
		if errors.As(err, &denied) {
			return "", "", &runtime.BlockedError{Layer: m.name, Message: fmt.Sprintf("tool %s: %s denied: %s", c.Name, denied.Path, denied.Reason)}
		}
		return "", "", &runtime.CallError{Kind: runtime.KindPermanent, Layer: m.name, Message: fmt.Sprintf("tool %s: cannot check %s", c.Name, p), Err: err}
	}
	return p, real, nil
}

// caseVariant returns an argument other than arg whose name differs from it
// only in case: a tool that decodes its arguments case-insensitively (Go's
// encoding/json does) may read that one instead of the path checked.
func caseVariant(args map[string]any, arg string) (string, bool) {
	for name := range args {
		if name != arg && strings.EqualFold(name, arg) {
			return name, true
		}
	}
	return "", false
}

var _ runtime.ToolWrapper = (*Middleware)(nil)
