package openai

import (
	"bytes"
	"slices"

	fastjson "github.com/segmentio/encoding/json"
)

// decodeFast decodes a chunk of the usual shape in one pass over data,
// without reflection, and reports whether it could. It handles what the
// API sends (the fields chunk reads, the others skipped, null where a
// string or the usage may be absent) and gives up, leaving c to be reset
// and decoded again by decode's decoders, at anything else: a malformed
// chunk, an "error" member, a key repeated or matching a field only
// case-insensitively, a number that is not an int64, a value of another
// JSON type than the field's. A string with escapes or non-ASCII bytes is
// decoded by segmentio's decoder, as the whole chunk was before.
func (c *chunk) decodeFast(data []byte) bool {
	s := scanner{d: data}
	if !s.object(topKeys, func(i int) bool {
		switch i {
		case 0:
			return c.choices(&s)
		case 1:
			return c.usage(&s)
		case 3:
			// The same in every chunk: the last one's string is kept.
			return s.strKeep(&c.SystemFingerprint, c.lastFingerprint)
		}
		return false // error: left to the full decoders
	}) {
		return false
	}
	s.ws()
	return s.i == len(s.d)
}

var (
	topKeys      = []string{"choices", "usage", "error", "system_fingerprint"}
	choiceKeys   = []string{"index", "delta", "finish_reason"}
	deltaKeys    = []string{"content", "refusal", "tool_calls"}
	toolKeys     = []string{"index", "id", "function", "custom"}
	customKeys   = []string{"name", "input"}
	functionKeys = []string{"name", "arguments"}
	usageKeys    = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"}
	cachedKeys   = []string{"cached_tokens"}
	reasonKeys   = []string{"reasoning_tokens"}
)

// match returns the index of key in names, or -1 for a key of none of
// them; false for a key that matches one only case-insensitively (which
// encoding/json would decode into it).
func match(key []byte, names []string) (int, bool) {
	for i, n := range names {
		if string(key) == n {
			return i, true
		}
	}
	for _, n := range names {
		// key is ASCII (member gives up at other keys): a key that folds
		// to n is as long.
		if len(key) == len(n) && bytes.EqualFold(key, []byte(n)) {
			return -1, false
		}
	}
	return -1, true
}

func (c *chunk) choices(s *scanner) bool {
	s.ws()
	if !s.take('[') {
		return false
	}
	for n := 0; ; n++ {
		more, ok := s.element(n)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		k := len(c.Choices)
		c.Choices = slices.Grow(c.Choices, 1)[:k+1]
		ch := &c.Choices[k]
		if !s.object(choiceKeys, func(i int) bool {
			switch i {
			case 0:
				return s.int(&ch.Index)
			case 1:
				return s.object(deltaKeys, func(i int) bool {
					switch i {
					case 0:
						return s.str(&ch.Delta.Content)
					case 1:
						return s.str(&ch.Delta.Refusal)
					}
					if s.null() {
						return true
					}
					return c.toolCalls(s, ch)
				})
			}
			return s.str(&ch.FinishReason)
		}) {
			return false
		}
	}
}

func (c *chunk) toolCalls(s *scanner, ch *chunkChoice) bool {
	s.ws()
	if !s.take('[') {
		return false
	}
	for n := 0; ; n++ {
		more, ok := s.element(n)
		if !ok {
			return false
		}
		if !more {
			if ch.Delta.ToolCalls == nil {
				// An empty array is an empty slice, as encoding/json has it.
				ch.Delta.ToolCalls = slices.Grow(ch.Delta.ToolCalls, 1)[:0]
			}
			return true
		}
		k := len(ch.Delta.ToolCalls)
		ch.Delta.ToolCalls = slices.Grow(ch.Delta.ToolCalls, 1)[:k+1]
		tc := &ch.Delta.ToolCalls[k]
		if !s.object(toolKeys, func(i int) bool {
			switch i {
			case 0:
				return s.int(&tc.Index)
			case 1:
				return s.str(&tc.ID)
			case 3:
				if s.null() {
					return true
				}
				tc.Custom = new(chunkCustom)
				return s.object(customKeys, func(i int) bool {
					if i == 0 {
						return s.str(&tc.Custom.Name)
					}
					return s.str(&tc.Custom.Input)
				})
			}
			return s.object(functionKeys, func(i int) bool {
				if i == 0 {
					return s.str(&tc.Function.Name)
				}
				return s.str(&tc.Function.Arguments)
			})
		}) {
			return false
		}
	}
}

func (c *chunk) usage(s *scanner) bool {
	if s.null() {
		c.Usage = nil
		return true
	}
	c.Usage = new(chunkUsage)
	u := c.Usage
	return s.object(usageKeys, func(i int) bool {
		switch i {
		case 0:
			return s.int((*int64)(&u.PromptTokens))
		case 1:
			return s.int((*int64)(&u.CompletionTokens))
		case 2:
			return s.object(cachedKeys, func(int) bool { return s.int((*int64)(&u.PromptTokensDetails.CachedTokens)) })
		}
		return s.object(reasonKeys, func(int) bool { return s.int((*int64)(&u.CompletionTokensDetails.ReasoningTokens)) })
	})
}

// scanner reads a JSON document known to be valid.
type scanner struct {
	d []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.d) {
		switch s.d[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// take consumes c, the next byte.
func (s *scanner) take(c byte) bool {
	if s.i < len(s.d) && s.d[s.i] == c {
		s.i++
		return true
	}
	return false
}

// null consumes a null, if the next value is one.
func (s *scanner) null() bool {
	s.ws()
	if bytes.HasPrefix(s.d[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// member reads the key of an object's member n (after its '{'), up to its
// value; more is false at the object's end.
func (s *scanner) member(n int) (key []byte, more, ok bool) {
	s.ws()
	if s.take('}') {
		return nil, false, true
	}
	if n > 0 {
		if !s.take(',') {
			return nil, false, false
		}
		s.ws()
	}
	if !s.take('"') {
		return nil, false, false
	}
	start := s.i
	for s.i < len(s.d) && s.d[s.i] != '"' {
		if c := s.d[s.i]; c == '\\' || c >= 0x80 || c < 0x20 {
			return nil, false, false // a key that needs decoding, or invalid
		}
		s.i++
	}
	key = s.d[start:s.i]
	s.i++
	s.ws()
	if !s.take(':') {
		return nil, false, false
	}
	return key, true, true
}

// element moves to an array's element n (after its '['); more is false at
// the array's end.
func (s *scanner) element(n int) (more, ok bool) {
	s.ws()
	if s.take(']') {
		return false, true
	}
	if n > 0 && !s.take(',') {
		return false, false
	}
	return true, true
}

// object reads an object whose members named in names it passes to field
// (by index), skipping the others.
func (s *scanner) object(names []string, field func(int) bool) bool {
	s.ws()
	if !s.take('{') {
		return false
	}
	var seen uint8
	for n := 0; ; n++ {
		key, more, ok := s.member(n)
		if !ok {
			return false
		}
		if !more {
			return true
		}
		i, ok := match(key, names)
		if !ok || i >= 0 && seen&(1<<i) != 0 {
			return false
		}
		if i < 0 {
			ok = s.skip()
		} else {
			seen |= 1 << i
			ok = field(i)
		}
		if !ok {
			return false
		}
	}
}

// str reads a string, or a null that leaves dst as it is.
func (s *scanner) str(dst *string) bool { return s.strKeep(dst, "") }

// strKeep reads a string as str does, setting dst to prev, without
// allocating, when the string is prev.
func (s *scanner) strKeep(dst *string, prev string) bool {
	if s.null() {
		return true
	}
	start := s.i
	if !s.take('"') {
		return false
	}
	plain := true
	for {
		if s.i >= len(s.d) {
			return false
		}
		c := s.d[s.i]
		if c == '"' {
			break
		}
		if c == '\\' || c >= 0x80 || c < 0x20 {
			plain = false
		}
		if c == '\\' {
			s.i++
		}
		s.i++
	}
	s.i++
	if plain {
		if b := s.d[start+1 : s.i-1]; prev != "" && string(b) == prev {
			*dst = prev
		} else {
			*dst = string(b)
		}
		return true
	}
	return fastjson.Unmarshal(s.d[start:s.i], dst) == nil
}

// int reads an integer that fits an int64.
func (s *scanner) int(dst *int64) bool {
	s.ws()
	neg := s.take('-')
	start := s.i
	var n uint64
	for s.i < len(s.d) && s.d[s.i] >= '0' && s.d[s.i] <= '9' {
		if n > (1<<63)/10 {
			return false
		}
		n = n*10 + uint64(s.d[s.i]-'0')
		s.i++
	}
	if s.i == start || s.d[start] == '0' && s.i > start+1 || s.i < len(s.d) && (s.d[s.i] == '.' || s.d[s.i] == 'e' || s.d[s.i] == 'E') {
		return false
	}
	switch {
	case neg && n <= 1<<63:
		*dst = -int64(n)
	case !neg && n < 1<<63:
		*dst = int64(n)
	default:
		return false
	}
	return true
}

// maxSkipDepth bounds the nesting skip follows (encoding/json refuses
// documents nested 10,000 deep).
const maxSkipDepth = 1000

// skip skips a value, and reports whether it is valid JSON.
func (s *scanner) skip() bool { return s.skipValue(0) }

func (s *scanner) skipValue(depth int) bool {
	s.ws()
	if s.i >= len(s.d) {
		return false
	}
	switch c := s.d[s.i]; {
	case c == '"':
		return s.skipString()
	case c == '{':
		if depth >= maxSkipDepth {
			return false
		}
		s.i++
		for n := 0; ; n++ {
			s.ws()
			if s.take('}') {
				return true
			}
			if n > 0 {
				if !s.take(',') {
					return false
				}
				s.ws()
			}
			if s.i >= len(s.d) || s.d[s.i] != '"' || !s.skipString() {
				return false
			}
			s.ws()
			if !s.take(':') || !s.skipValue(depth+1) {
				return false
			}
		}
	case c == '[':
		if depth >= maxSkipDepth {
			return false
		}
		s.i++
		for n := 0; ; n++ {
			s.ws()
			if s.take(']') {
				return true
			}
			if n > 0 && !s.take(',') {
				return false
			}
			if !s.skipValue(depth + 1) {
				return false
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	default:
		return s.skipNumber()
	}
}

func (s *scanner) literal(lit string) bool {
	if bytes.HasPrefix(s.d[s.i:], []byte(lit)) {
		s.i += len(lit)
		return true
	}
	return false
}

// skipString skips a string, at its opening quote.
func (s *scanner) skipString() bool {
	s.i++
	for s.i < len(s.d) {
		c := s.d[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			s.i++
			if s.i >= len(s.d) {
				return false
			}
			switch s.d[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if s.i+4 >= len(s.d) {
					return false
				}
				for _, h := range s.d[s.i+1 : s.i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				s.i += 4
			default:
				return false
			}
		}
		s.i++
	}
	return false
}

// skipNumber skips a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) skipNumber() bool {
	s.take('-')
	digits := func() int {
		n := 0
		for s.i < len(s.d) && s.d[s.i] >= '0' && s.d[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.take('0') {
		// no more digits
	} else if digits() == 0 {
		return false
	}
	if s.take('.') && digits() == 0 {
		return false
	}
	if s.take('e') || s.take('E') {
		if !s.take('+') {
			s.take('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
