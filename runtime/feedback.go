package runtime

import "errors"

// RetryFeedbacker is implemented by failures that a model can correct when it
// is told what went wrong, such as output that does not match a schema. A
// retry layer that re-invokes a chat call after such a failure appends the
// feedback to the transcript of the next attempt as a user message.
type RetryFeedbacker interface {
	error
	// RetryFeedback returns the text that tells the model what to fix.
	RetryFeedback() string
}

// FeedbackOf returns the retry feedback carried by err (anywhere in its
// chain) and whether there is any. An empty feedback counts as none.
func FeedbackOf(err error) (string, bool) {
	var f RetryFeedbacker
	if err == nil || !errors.As(err, &f) {
		return "", false
	}
	s := f.RetryFeedback()
	return s, s != ""
}

// Annotate records v under key on the call's response (ChatResponse.
// Annotations), for layers that report facts about the output to the caller
// (output_coerce in annotate mode records validity and the parsed value under
// its layer name). A later value under the same key replaces the earlier one.
func (c *ChatCall) Annotate(key string, v any) {
	if c.Annotations == nil {
		c.Annotations = map[string]any{}
	}
	c.Annotations[key] = v
}
