package plan

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkDecode decodes the service example's plan: a valid plan, walked
// once for its repeated keys and its numbers together.
func BenchmarkDecode(b *testing.B) {
	data, err := os.ReadFile("../../examples/service/replicated/plan.json")
	require.NoError(b, err)
	_, err = Decode("plan.json", data)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode("plan.json", data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeProblem decodes a plan whose problem is located by a
// second walk.
func BenchmarkDecodeProblem(b *testing.B) {
	data := []byte(`{"version":1,"policy":"p","tools":{"refund":{"side_effecting":true,"retry_safe":false}},"chains":{"tool":[{"use":"log","tools":["refnud"]}]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode("plan.json", data); err == nil {
			b.Fatal("no problem")
		}
	}
}
