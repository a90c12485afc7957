package openai

import (
	"bytes"

	"encoding/json"
	fastjson "github.com/segmentio/encoding/json"
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
		// The shapes decodeFast reads, and those it leaves to the others.
		`{"choices":[{"index":0,"delta":{"tool_calls":[]}}],"usage":null}`,
		`{"choices":[{"index":01,"delta":{}}]}`,
		`{"choices":[{"index":-0,"delta":{"content":null,"refusal":"no"},"finish_reason":null}]}`,
		`{"x":{"a":[1,-2.5e+3,true,false,null,"s\u00e9\n",{}],"b":[]},"choices":[{"index":0,"delta":{"content":"a"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"a","content":"b"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"n","arguments":"{\"a\":1}"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","type":"custom","custom":{"name":"apply_patch","input":"*** Begin"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"custom":{"input":"\n*** End"}},{"index":1,"custom":null}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"custom":{"input":1}}]}}]}`,
		`{"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":4}}}`,
		`{"Usage":{"prompt_tokens":1}}`, `{"usage":{"prompt_tokens":1}} x`, `{"x":"\q"}`, `{"x":01}`, `{"x":1.}`, `{"x":tru}`,
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

// TestChunkDecodeFast: the chunks the API sends, text, tool calls and
// usage, are decoded in one pass (decodeFast), not by the general decoders.
func TestChunkDecodeFast(t *testing.T) {
	n := 0
	for _, data := range ssetest.EventData(t) {
		if string(data) == "[DONE]" || bytes.Contains(data, []byte(`"error"`)) {
			continue
		}
		var c chunk
		if !c.decodeFast(data) {
			t.Errorf("not decoded in one pass: %s", data)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("only %d chunks in testdata", n)
	}
}

func BenchmarkChunkDecode(b *testing.B) {
	data := []byte(`{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741569952,"model":"gpt-4.1-mini-2025-04-14","service_tier":"default","system_fingerprint":"fp_6ec83003ad","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null}`)
	var c chunk
	b.Run("one pass", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			c.reset()
			if !c.decodeFast(data) {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("segmentio", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			c.reset()
			if err := fastjson.Unmarshal(data, &c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
