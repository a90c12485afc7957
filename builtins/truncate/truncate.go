package truncate

import (
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "truncate"

func init() {
	runtime.Register(runtime.Module{
		ID:     ID,
		Stages: []plan.Stage{plan.StageTool},
		Traits: []runtime.Trait{runtime.TraitRewritesMessages},
		Doc:    "trims an over-long tool result",
		New:    func() runtime.Middleware { return &Truncate{MaxChars: 8000} },
	})
}

// Truncate is the truncate layer; its exported fields are its config
// (schemas/truncate.cue).
type Truncate struct {
	// MaxChars is the most characters of a result's text that are kept.
	MaxChars int `json:"max_chars"`
}

// Validate requires a positive max_chars.
func (t *Truncate) Validate() error {
	if t.MaxChars < 1 {
		return fmt.Errorf("max_chars must be at least 1, got %d", t.MaxChars)
	}
	return nil
}

// Marker returns the text appended to a result cut from total to kept
// characters.
func Marker(kept, total int) string {
	return fmt.Sprintf("\n[truncated: kept %d of %d characters]", kept, total)
}

// Apply returns v trimmed to maxChars characters (see the package
// documentation) and whether it was cut.
func Apply(v any, maxChars int) (any, bool) {
	var text string
	switch x := v.(type) {
	case nil:
		return v, false
	case string:
		text = x
	case []byte:
		text = string(x)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return v, false
		}
		text = string(b)
	}
	if len(text) <= maxChars {
		return v, false // fewer bytes than the limit: fewer characters too
	}
	total := utf8.RuneCountInString(text)
	if total <= maxChars {
		return v, false
	}
	cut, n := 0, 0
	for i := range text {
		if n == maxChars {
			cut = i
			break
		}
		n++
	}
	return text[:cut] + Marker(maxChars, total), true
}

// WrapTool implements runtime.ToolWrapper.
func (t *Truncate) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		v, err := next(ctx, c)
		if err != nil {
			return v, err
		}
		out, _ := Apply(v, t.MaxChars)
		return out, nil
	}
}

var _ runtime.ToolWrapper = (*Truncate)(nil)
