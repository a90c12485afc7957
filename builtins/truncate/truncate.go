package truncate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
)

// ID is the builtin's id.
const ID = "truncate"

func init() {
	runtime.Register(runtime.Module{
		ID:      ID,
		Builtin: true,
		Stages:  []plan.Stage{plan.StageTool},
		Traits:  []runtime.Trait{runtime.TraitRewritesMessages},
		Doc:     "trims an over-long tool result",
		New:     func() runtime.Middleware { return &Truncate{MaxChars: 8000} },
	})
}

// Truncate is the truncate layer; its exported fields are its config
// (schemas/truncate.cue).
type Truncate struct {
	// MaxChars is the most characters of a result's text that are kept.
	MaxChars int `json:"max_chars"`

	name string
}

// Provision records the layer's name for its errors.
func (t *Truncate) Provision(b *runtime.BuildContext) error {
	t.name = b.Name()
	return nil
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
	return markerHead + strconv.Itoa(kept) + " of " + strconv.Itoa(total) + markerTail
}

// Apply returns v trimmed to maxChars characters (see the package
// documentation) and whether it was cut. A value with no JSON form (a NaN,
// a channel) cannot be measured: Apply returns the encoding's error.
func Apply(v any, maxChars int) (any, bool, error) {
	var text string
	switch x := v.(type) {
	case nil:
		return v, false, nil
	case string:
		text = x
	case []byte:
		text = string(x)
	case json.RawMessage:
		text = string(x) // the agent loop sends raw JSON as it is
	default:
		// The JSON text the model reads: "<" is one character, not the
		// six of json.Marshal's "\u003c".
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, false, err
		}
		text = strings.TrimSuffix(b.String(), "\n")
	}
	if out, cut := cutText(text, maxChars); cut {
		return out, true, nil
	}
	return v, false, nil
}

// markerHead and markerTail frame the marker's counts.
const (
	markerHead = "\n[truncated: kept "
	markerTail = " characters]"
)

// cutBefore reads the marker a truncate layer inside this one appended:
// when text is a kept text followed by its marker, it returns the kept text
// and the length of the text it was cut from. A look-alike (the kept count
// is not the kept text's length, the counts are not numbers, nothing was
// cut) is not a marker.
func cutBefore(text string) (kept string, total int, ok bool) {
	if !strings.HasSuffix(text, markerTail) {
		return "", 0, false
	}
	i := strings.LastIndex(text, markerHead)
	if i < 0 {
		return "", 0, false
	}
	k, m, found := strings.Cut(text[i+len(markerHead):len(text)-len(markerTail)], " of ")
	if !found {
		return "", 0, false
	}
	n, err1 := strconv.Atoi(k)
	total, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || k != strconv.Itoa(n) || m != strconv.Itoa(total) ||
		total <= n || utf8.RuneCountInString(text[:i]) != n {
		return "", 0, false
	}
	return text[:i], total, true
}

// cutText returns text cut to maxChars characters and followed by the
// marker, and whether it was over the limit. A text a layer inside already
// cut (it ends with its marker) is measured without the marker: kept within
// the limit it is left as it is, and cut again its marker reports the
// length of the text first cut, not of the cut text.
func cutText(text string, maxChars int) (string, bool) {
	if len(text) <= maxChars {
		return text, false // fewer bytes than the limit: fewer characters too
	}
	total := 0
	if kept, orig, ok := cutBefore(text); ok {
		if utf8.RuneCountInString(kept) <= maxChars {
			return text, false
		}
		text, total = kept, orig
	} else {
		total = utf8.RuneCountInString(text)
		if total <= maxChars {
			return text, false
		}
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

// cutError is a failed call's error whose text was cut: Error is the cut
// text, and the error it wraps still tells what the failure is (its kind,
// its layer, whether the tool ran).
type cutError struct {
	text string
	err  error
}

func (e *cutError) Error() string { return e.text }
func (e *cutError) Unwrap() error { return e.err }

// WrapTool implements runtime.ToolWrapper.
func (t *Truncate) WrapTool(next runtime.ToolHandler) runtime.ToolHandler {
	return func(ctx context.Context, c *runtime.ToolCall) (any, error) {
		v, err := next(ctx, c)
		if err != nil {
			// The model reads a failure's text as it reads a result.
			if text, cut := cutText(err.Error(), t.MaxChars); cut {
				err = &cutError{text: text, err: err}
			}
			return v, err
		}
		out, _, aerr := Apply(v, t.MaxChars)
		if aerr != nil {
			// Unmeasured, the result would reach the model unbounded: the
			// call fails closed. The tool ran: its effect stands.
			return nil, runtime.Ran(&runtime.CallError{Kind: runtime.KindPermanent, Layer: t.name,
				Message: fmt.Sprintf("tool %s: its result has no JSON form and cannot be bounded: %v", c.Name, aerr)})
		}
		return out, nil
	}
}

var _ runtime.ToolWrapper = (*Truncate)(nil)
