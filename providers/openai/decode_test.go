package openai

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentc-dev/agentc/internal/ssetest"
)

// FuzzChunkDecode holds the fast chunk decoding to encoding/json's: the
// same fields for any input, and an error exactly where encoding/json
// reports one (of the same kind: a mistyped field is read as zero, a
// malformed chunk fails the stream).
func FuzzChunkDecode(f *testing.F) {
	for _, data := range ssetest.EventData(f) {
		f.Add(data)
	}
	for _, s := range []string{
		`{"choices":[{"index":"x","delta":{"content":5,"refusal":"r"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3}}`,
		`{"choices":{"index":0},"usage":{"prompt_tokens":3}}`,
		`{"choices":[{"index":0,"delta":{"content":"x"}}]} trailing`,
		`{"Choices":[{"INDEX":0,"Delta":{"Content":"case"}}]}`,
		`{"choices":[{"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}],"choices":[{"delta":{"content":"dup"}}]}`,
		`{"choices":[{"delta":{"content":"\ud800 \u00e9 \"q\""}}],"usage":{"prompt_tokens":1e2}}`,
		"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}",
		`{"error":{"message":"overloaded"}}`,
		`{"usage":{"prompt_tokens":-0,"completion_tokens":9223372036854775808}}`,
		`null`, `[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast, std chunk
		// A reused chunk, as consume reuses one, must not carry over.
		fast.Choices = append(fast.Choices, std.Choices...)
		_ = fast.decode([]byte(`{"choices":[{"index":3,"delta":{"content":"old"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1},"error":{}}`))
		errFast := fast.decode(data)
		errStd := json.Unmarshal(data, &std)
		if (errFast == nil) != (errStd == nil) {
			t.Fatalf("%q: fast error %v, encoding/json error %v", data, errFast, errStd)
		}
		if reflect.TypeOf(errFast) != reflect.TypeOf(errStd) {
			t.Fatalf("%q: fast error %T, encoding/json error %T", data, errFast, errStd)
		}
		if errStd != nil {
			if _, ok := errStd.(*json.UnmarshalTypeError); !ok {
				return // the stream fails: what was decoded is not read
			}
		}
		if len(fast.Choices) == 0 && len(std.Choices) == 0 {
			fast.Choices, std.Choices = nil, nil
		}
		if !reflect.DeepEqual(fast, std) {
			t.Fatalf("%q:\nfast %+v\nstd  %+v", data, fast, std)
		}
	})
}
