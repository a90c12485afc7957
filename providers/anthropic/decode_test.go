package anthropic

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/agentc-dev/agentc/internal/ssetest"
)

// FuzzEventDecode holds the fast event decoding to encoding/json's: the
// same fields for any input, a mistyped field read as zero with the rest
// decoded, and an error exactly where encoding/json reports a malformed
// event.
func FuzzEventDecode(f *testing.F) {
	for _, data := range ssetest.EventData(f) {
		f.Add(data)
	}
	for _, s := range []string{
		`{"type":"content_block_delta","index":"x","delta":{"type":"text_delta","text":5},"usage":{"output_tokens":3}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":"7","input_tokens":2}}`,
		`{"type":"message_delta","delta":{"stop_reason":"refusal","stop_details":{"type":"refusal","category":null,"explanation":7}}}`,
		`{"type":"message_delta","delta":{"stop_details":"refusal"},"usage":{"output_tokens":3}}`,
		`{"TYPE":"content_block_start","Content_Block":{"type":"tool_use","id":"t","name":"n"}}`,
		`{"type":"ping"} trailing`, `null`, `[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	type plain event
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast event
		var std plain
		errFast := json.Unmarshal(data, &fast)
		errStd := json.Unmarshal(data, &std)
		if _, ok := errStd.(*json.UnmarshalTypeError); ok {
			errStd = nil // read as zero, as the SDK's decoding does
		}
		if (errFast == nil) != (errStd == nil) {
			t.Fatalf("%q: fast error %v, encoding/json error %v", data, errFast, errStd)
		}
		if errStd == nil && !reflect.DeepEqual(plain(fast), std) {
			t.Fatalf("%q:\nfast %+v\nstd  %+v", data, fast, std)
		}
	})
}
