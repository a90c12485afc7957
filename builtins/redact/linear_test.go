package redact

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/internal/cputime"
	"github.com/agentc-dev/agentc/runtime"
)

// TestReadingsOfJSONStayLinear: the readings of keys with their values (one level down,
// written twice, a name and its value), of JSON held in strings and of a value cut over
// strings cost, in a tool's JSON result sent as text and in a tool call's arguments, time
// proportional to the length of the JSON: four times as much takes under eight times as
// long. Objects nested in objects (`{"password": {"password": ...}}`) took a time that grew
// with the square of their depth (52 KB nested 4,000 deep took two seconds): each object was
// written back and then checked again by the one around it.
func TestReadingsOfJSONStayLinear(t *testing.T) {
	r := newRedactor(t, Config{})
	records := func(n int, rec func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = rec(i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	shapes := map[string]func(n int) string{
		"objects nested under a key word": func(n int) string {
			return strings.Repeat(`{"password":`, 2*n) + `"hunter22x"` + strings.Repeat("}", 2*n)
		},
		"arrays nested": func(n int) string {
			return strings.Repeat(`[`, n) + `"password=hunter22x"` + strings.Repeat("]", n)
		},
		"keys under key words": func(n int) string {
			return records(n, func(i int) string { return `{"api_key":{"old":"Zq81mNb` + strconv.Itoa(i) + `","n":3}}` })
		},
		"a key written twice": func(n int) string {
			return records(1, func(int) string {
				return "{" + strings.Repeat(`"password":"hunter22x",`, n) + `"a":"b"}`
			})
		},
		"names and values": func(n int) string {
			return records(n, func(i int) string { return `{"name":"DB_PASSWORD","value":"hunter` + strconv.Itoa(i) + `"}` })
		},
		"JSON in strings": func(n int) string {
			return records(n, func(i int) string {
				b, _ := json.Marshal(`{"password":"hun` + strconv.Itoa(i) + `"}`)
				return string(b)
			})
		},
		"a key cut over strings": func(n int) string {
			return records(n, func(i int) string { return `"x","password=hun","ter2` + strconv.Itoa(i) + `"` })
		},
	}
	for name, shape := range shapes {
		for path, read := range map[string]func(t *testing.T, text string){
			"text": func(t *testing.T, text string) {
				tr := mask.Transcript{Mask: r.Redact, Find: r.items}
				_, changed := tr.Message("", &runtime.Message{Role: "tool", ToolCallID: "c1", Content: text})
				assert.True(t, changed, "nothing masked")
			},
			"arguments": func(t *testing.T, text string) {
				_, changed := mask.Args(json.RawMessage(text), r.Redact, r.items)
				assert.True(t, changed, "nothing masked")
			},
		} {
			t.Run(name+"/"+path, func(t *testing.T) {
				small, large := shape(500), shape(2000)
				require.True(t, json.Valid([]byte(large)))
				run := func(text string) time.Duration {
					best := time.Duration(1 << 62)
					for range 3 {
						best = min(best, cputime.Of(func() { read(t, text) }))
					}
					return best
				}
				run(small) // warm up
				var a, b time.Duration
				for range 3 {
					if a, b = run(small), run(large); b < 8*a+20*time.Millisecond {
						break
					}
				}
				assert.Less(t, b, 8*a+20*time.Millisecond, "%d bytes took %v, %d bytes %v", len(small), a, len(large), b)
			})
		}
	}
}
