package mask

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentc-dev/agentc/runtime"
)

// The fields of a chat call that no model reads but that its provider
// receives (or, Metadata, that a model client is handed): the end user's
// id, the stop sequences and the prompt cache key. A layer that masks the
// transcript reads them too, or a card number or a key a client put there
// would reach the provider.

// endUserField names Metadata's user_id: the end user's id, OpenAI's user
// and Anthropic's metadata.user_id.
const endUserField = "the end user's id (user, metadata.user_id)"

// Field is a field of a chat call no model reads: Name names it in a
// refusal, Text is its value. Fixed, set for the fields masking would
// change the meaning of, says how: an end user's id masked would make every
// end user whose id masks alike one to the provider's abuse monitoring, a
// stop sequence masked would stop the answer at another text.
type Field struct {
	Name  string
	Text  string
	Fixed string
	// Meta is set for a metadata value; its key is in Name.
	Meta bool
}

// Why masking would change a field (Field.Fixed), and what to send instead.
const (
	fixedID   = "an id masked would make every end user whose id masks alike one user to the provider's abuse monitoring: send an id that holds none (a digest of it)"
	fixedStop = "a stop sequence masked would stop the answer at another text: leave it out"
)

// Fields yields the fields of req no model reads that hold text, in a fixed
// order: the end user's id, the safety identifier, the stop sequences, the
// prompt cache key, and the metadata's other values by key.
func Fields(req *runtime.ChatRequest) func(yield func(Field) bool) {
	return func(yield func(Field) bool) {
		if id := req.Metadata["user_id"]; id != "" && !yield(Field{Name: endUserField, Text: id, Fixed: fixedID}) {
			return
		}
		if id := req.SafetyIdentifier; id != "" && !yield(Field{Name: "the safety identifier (safety_identifier)", Text: id, Fixed: fixedID}) {
			return
		}
		for i, s := range req.Stop {
			if s != "" && !yield(Field{Name: fmt.Sprintf("stop sequence %d (stop, stop_sequences)", i), Text: s, Fixed: fixedStop}) {
				return
			}
		}
		if req.PromptCacheKey != "" && !yield(Field{Name: "the prompt cache key (prompt_cache_key)", Text: req.PromptCacheKey}) {
			return
		}
		if len(req.Metadata) == 0 || len(req.Metadata) == 1 && req.Metadata["user_id"] != "" {
			return
		}
		for _, k := range slices.Sorted(maps.Keys(req.Metadata)) {
			if v := req.Metadata[k]; k != "user_id" && v != "" && !yield(Field{Name: fmt.Sprintf("metadata %q", k), Text: v, Meta: true}) {
				return
			}
		}
	}
}

// HasFields reports whether req may have a field Fields yields, without
// making the iterator: a layer reads the fields of a call that has some,
// and a call without allocates nothing.
func HasFields(req *runtime.ChatRequest) bool {
	return len(req.Metadata) > 0 || req.SafetyIdentifier != "" || len(req.Stop) > 0 || req.PromptCacheKey != ""
}

// RefuseFields returns the refusal of layer for the first field of req no
// model reads whose meaning masking would change (Field.Fixed) and that
// holds what t.Mask masks, nil when none does; a field found clean is
// recorded for the run. finding says what the layer finds ("personal
// data"), with the labels t.Find gives the items; the refusal names the
// field, never its text.
func (t Transcript) RefuseFields(run string, req *runtime.ChatRequest, layer, finding string) error {
	if !HasFields(req) {
		return nil
	}
	for f := range Fields(req) {
		if f.Fixed == "" {
			continue
		}
		if _, masked := t.text(run, f.Text); masked {
			return &runtime.BlockedError{Layer: layer, Message: fmt.Sprintf(
				"%s holds %s%s, which the model's provider receives: %s", f.Name, finding, t.labels(f.Text), f.Fixed)}
		}
	}
	return nil
}

// BlockFields returns the refusal of layer for the first field of req no
// model reads that holds what t.Mask masks (any field: a layer that refuses
// rather than masks), nil when none does, as RefuseFields words it for a
// message ("contains personal data (card)").
func (t Transcript) BlockFields(run string, req *runtime.ChatRequest, layer, finding string) error {
	if !HasFields(req) {
		return nil
	}
	for f := range Fields(req) {
		if _, masked := t.text(run, f.Text); masked {
			name := f.Name
			if f.Meta {
				name, _ = t.Mask(name)
			}
			return &runtime.BlockedError{Layer: layer, Message: fmt.Sprintf("%s contains %s%s", name, finding, t.labels(f.Text))}
		}
	}
	return nil
}

// MaskFields returns req's prompt cache key and metadata with their text
// masked (the metadata's values other than the end user's id, which
// RefuseFields reads), and whether anything was; without a change they are
// req's own. req is never modified. Masked, the cache key sends the request
// to another cache and changes no answer.
func (t Transcript) MaskFields(run string, req *runtime.ChatRequest) (key string, metadata map[string]string, masked bool) {
	key, metadata = req.PromptCacheKey, req.Metadata
	if red, ok := t.text(run, key); ok {
		key, masked = red, true
	}
	cloned := false
	for k, v := range req.Metadata {
		if k == "user_id" {
			continue
		}
		red, ok := t.text(run, v)
		if !ok {
			continue
		}
		if !cloned {
			metadata, cloned = maps.Clone(req.Metadata), true
		}
		metadata[k], masked = red, true
	}
	return key, metadata, masked
}

// labels returns the labels of the items t.Find finds in s, as
// " (card, email)", or "" when it finds none that has one.
func (t Transcript) labels(s string) string {
	if t.Find == nil {
		return ""
	}
	var ls []string
	for _, it := range t.Find(s) {
		if it.Label != "" && !slices.Contains(ls, it.Label) {
			ls = append(ls, it.Label)
		}
	}
	if len(ls) == 0 {
		return ""
	}
	return " (" + strings.Join(ls, ", ") + ")"
}
