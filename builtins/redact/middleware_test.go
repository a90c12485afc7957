package redact_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	_ "github.com/agentc-dev/agentc/builtins/redact"
	"github.com/agentc-dev/agentc/runtime"
	"github.com/agentc-dev/agentc/runtime/plan"
	rt "github.com/agentc-dev/agentc/runtime/runtimetest"
)

const awsKey = "AKIAIOSFODNN7EXAMPLE"

type record struct {
	Name  string `json:"name"`
	Token string `json:"token"`
}

func TestToolResults(t *testing.T) {
	nested := map[string]any{"config": map[string]any{"password": "password=hunter22", "key": awsKey}, "n": 3.0}
	tests := []struct {
		name   string
		config string
		value  any
		check  func(t *testing.T, got any)
	}{
		{"string", `{}`, "key " + awsKey + " found", func(t *testing.T, got any) {
			assert.NotContains(t, got, awsKey)
			assert.Contains(t, got, "[REDACTED:")
		}},
		{"nested map is copied", `{}`, nested, func(t *testing.T, got any) {
			m := got.(map[string]any)["config"].(map[string]any)
			assert.NotContains(t, m["key"], awsKey)
			assert.Equal(t, awsKey, nested["config"].(map[string]any)["key"], "the tool's value is untouched")
		}},
		{"struct via JSON", `{}`, record{Name: "svc", Token: "token=" + "s3cr3tvalue123"}, func(t *testing.T, got any) {
			m, ok := got.(map[string]any)
			require.True(t, ok, "a struct holding a secret comes back in its JSON form")
			assert.NotContains(t, m["token"], "s3cr3tvalue123")
		}},
		// A Go value nested in a map or a list of another type than decoded
		// JSON's is what the agent loop encodes for the model: it is masked.
		{"struct inside a map", `{}`, map[string]any{"svc": record{Name: "svc", Token: "token=" + "s3cr3tvalue123"}}, func(t *testing.T, got any) {
			assert.NotContains(t, fmt.Sprint(got), "s3cr3tvalue123")
		}},
		{"list of structs", `{}`, []record{{Name: "svc", Token: "token=" + "s3cr3tvalue123"}}, func(t *testing.T, got any) {
			assert.NotContains(t, fmt.Sprint(got), "s3cr3tvalue123")
		}},
		{"map of strings in a list", `{}`, []any{map[string]string{"k": awsKey}}, func(t *testing.T, got any) {
			assert.NotContains(t, fmt.Sprint(got), awsKey)
		}},
		{"struct without secret unchanged", `{}`, record{Name: "svc"}, func(t *testing.T, got any) {
			assert.Equal(t, record{Name: "svc"}, got)
		}},
		{"custom pattern", `{"defaults":false,"patterns":["ORDER-\\d+"]}`, "see ORDER-991 and " + awsKey, func(t *testing.T, got any) {
			assert.Equal(t, "see [REDACTED:pattern-0] and "+awsKey, got)
		}},
		{"number untouched", `{}`, 42.0, func(t *testing.T, got any) { assert.Equal(t, 42.0, got) }},
		{"bytes as text", `{}`, []byte("body: key " + awsKey), func(t *testing.T, got any) {
			b, ok := got.([]byte)
			require.True(t, ok, "bytes stay bytes: the agent loop reads them as text")
			assert.NotContains(t, string(b), awsKey)
			assert.Contains(t, string(b), "[REDACTED:")
		}},
		{"raw JSON", `{}`, json.RawMessage(`{"k":"` + awsKey + `"}`), func(t *testing.T, got any) {
			assert.NotContains(t, fmt.Sprint(got), awsKey)
		}},
		{"secret as an object key", `{}`, map[string]any{"sk-live-abcdefghijklmnopqrstuv": 1.0, "ok": map[string]any{awsKey: "x", "sk-proj-abcdefghijklmnopqrstuv": "y"}},
			func(t *testing.T, got any) {
				s := fmt.Sprint(got)
				assert.NotContains(t, s, awsKey)
				assert.NotContains(t, s, "abcdefghijklmnopqrstuv")
				assert.Len(t, got.(map[string]any)["ok"], 2, "two keys masked alike both keep their values")
			}},
		// The numbers of a raw JSON result were decoded to float64 and
		// re-encoded rounded: the client got account 9007199254740992.
		{"raw JSON keeps its numbers", `{}`, json.RawMessage(`{"k":"` + awsKey + `","id":9007199254740993,"rate":0.1000000000000000055511151231257827}`), func(t *testing.T, got any) {
			b, err := json.Marshal(got)
			require.NoError(t, err)
			assert.NotContains(t, string(b), awsKey)
			assert.Contains(t, string(b), `"id":9007199254740993`)
			assert.Contains(t, string(b), `"rate":0.1000000000000000055511151231257827`)
		}},
		{"raw JSON that is not JSON", `{}`, json.RawMessage(`key ` + awsKey), func(t *testing.T, got any) {
			assert.NotContains(t, fmt.Sprintf("%s", got), awsKey)
		}},
		{"number a pattern matches", accountPattern, map[string]any{"account": 123456789.0, "n": 42.0},
			func(t *testing.T, got any) {
				assert.Equal(t, map[string]any{"account": "[REDACTED:pattern-0]", "n": 42.0}, got,
					"an account number sent as a JSON number is masked as it is in a string")
			}},
		{"number result a pattern matches", accountPattern, 123456789.0, func(t *testing.T, got any) {
			assert.Equal(t, "[REDACTED:pattern-0]", got)
		}},
		// An integral number from 1e19 up was not read as its digits: an account of 20 digits
		// a float64 holds (as DecodeArgs decodes it) passed a rule written for it.
		{"number of 20 digits a pattern matches", `{"defaults":false,"patterns":["\\b\\d{20}\\b"]}`,
			map[string]any{"account": 12345678901234567000.0, "n": 1e25}, func(t *testing.T, got any) {
				assert.Equal(t, map[string]any{"account": "[REDACTED:pattern-0]", "n": 1e25}, got)
			}},
		{"number of 20 digits written with an exponent", `{"defaults":false,"patterns":["\\b\\d{20}\\b"]}`,
			json.RawMessage(`{"account":1.2345678901234567e19}`), func(t *testing.T, got any) {
				b, err := json.Marshal(got)
				require.NoError(t, err)
				assert.JSONEq(t, `{"account":"[REDACTED:pattern-0]"}`, string(b))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("redact", tt.config)}})
			tool := rt.NewTool(rt.ToolResult{Value: tt.value})
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
			require.NoError(t, err)
			res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
			require.NoError(t, err)
			tt.check(t, res.Value)
		})
	}
}

func TestChatOutputSplitAcrossDeltas(t *testing.T) {
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1234567890abcdef\nQWERTYUIOPasdfghjkl\n-----END RSA PRIVATE KEY-----\n"
	tests := []struct {
		name   string
		deltas []string
		secret []string
	}{
		{"key split mid-token", []string{"your key is AKIAIOSF", "ODNN7EXAMPLE", " ok\nnext line"}, []string{awsKey, "AKIAIOSF"}},
		{"pem block over deltas", append([]string{"here:\n"}, strings.SplitAfter(pem, "\n")...), []string{"MIIEowIBAAKCAQEA1234567890abcdef", "QWERTYUIOP"}},
		{"no trailing newline", []string{"token=abcdef", "123456"}, []string{"abcdef123456"}},
		{"value on the next line", []string{"password:\n", "hunter2xx\nbye\n"}, []string{"hunter2xx"}},
		{"value after blank lines", []string{"api_key:\n\n", "zzzzsecretzzzz\n"}, []string{"zzzzsecretzzzz"}},
		{"basic credentials on the next line", []string{"Authorization: Basic\n", "dXNlcjpwYXNzd29yZA==\n"}, []string{"dXNlcjpwYXNzd29yZA=="}},
		{"bearer token on the next line", []string{"Bearer\n", "abcdefghijklmnopqrstu\n"}, []string{"abcdefghijklmnopqrstu"}},
		{"no-break space before the next line", []string{"Bearer\u00a0\n", "abcdefghijklmnopqrstu\n"}, []string{"abcdefghijklmnopqrstu"}},
		{"escaped key split mid-token", []string{"key sk%2Dproj-abcdefghij", "klmnopqrstuvwx and more\n"}, []string{"proj-abcdefghijklmnopqrstuvwx"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", "")}})
			model := rt.NewModel(rt.Response{Deltas: tt.deltas, Usage: runtime.Usage{InputTokens: 5, OutputTokens: 7}})
			pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
			require.NoError(t, err)
			var got []string
			resp, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
				got = append(got, d.Text)
				return true
			})
			require.NoError(t, err)
			text := strings.Join(got, "")
			for _, s := range tt.secret {
				for _, piece := range got {
					assert.NotContains(t, piece, s)
				}
				assert.NotContains(t, text, s)
			}
			assert.Contains(t, text, "[REDACTED:")
			assert.Equal(t, len(got), resp.Deltas, "Deltas counts what got past the layer")
			assert.Equal(t, int64(7), resp.Usage.OutputTokens)
		})
	}
}

func TestChatFailureDropsHeldText(t *testing.T) {
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", "")}})
	model := rt.NewModel(rt.Response{Deltas: []string{"token=abc", "def"}, Err: rt.Transient("down"), FailAfter: 1})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	text, resp, err := rt.Collect(context.Background(), pl, runtime.ChatRequest{Model: "primary"}, 0)
	require.Error(t, err)
	assert.Empty(t, text)
	assert.Zero(t, resp.Deltas, "nothing was released: still a pre-stream failure")
}

func TestConfigErrors(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("redact", `{"patterns":["(x"]}`)}})
	_, err := runtime.Build(context.Background(), p, runtime.Deps{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "patterns[0]")
}

// recordingModel records the transcript each call received.
type recordingModel struct{ seen [][]runtime.Message }

func (m *recordingModel) Stream(_ context.Context, req *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
	m.seen = append(m.seen, append([]runtime.Message(nil), req.Messages...))
	yield(runtime.Delta{Text: "ok"})
	return nil
}

// TestChatTranscript: a secret in the transcript a caller sends (a gateway client
// supplies its own tool results) is masked before the model reads it.
func TestChatTranscript(t *testing.T) {
	model := &recordingModel{}
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", "")}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	msgs := []runtime.Message{
		{Role: "system", Content: "use key " + awsKey},
		{Role: "user", Content: "my password=hunter22x"},
		{Role: "assistant", Content: "calling", ToolCalls: []runtime.ToolUse{
			{ID: "c0", Name: "login", Arguments: json.RawMessage(`{"token":"ghp_abcdefghijklmnopqrstuvwxyz0123456789","` + awsKey + `":1}`)}}},
		{Role: "tool", ToolCallID: "c0", Content: `{"aws":"` + awsKey + `"}`},
		{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c0", Text: "key " + awsKey}}},
		{Role: "user", Content: "thanks", Parts: []runtime.ContentPart{{Type: runtime.PartImage,
			ImageURL: "data:text/plain;base64," + base64.StdEncoding.EncodeToString([]byte("key "+awsKey))}}},
	}
	orig, err := json.Marshal(msgs)
	require.NoError(t, err)
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	sent, err := json.Marshal(model.seen[0])
	require.NoError(t, err)
	assert.Equal(t, runtime.PartText, model.seen[0][5].Parts[0].Type, "text carried in place of an image goes on as text")
	for _, secret := range []string{awsKey, "hunter22x", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"} {
		assert.NotContains(t, string(sent), secret)
	}
	var args map[string]any
	require.NoError(t, json.Unmarshal(model.seen[0][2].ToolCalls[0].Arguments, &args), "masked arguments stay valid JSON")
	assert.Len(t, args, 2)
	assert.Equal(t, "thanks", model.seen[0][5].Content)
	after, err := json.Marshal(msgs)
	require.NoError(t, err)
	assert.Equal(t, string(orig), string(after), "the caller's messages are untouched")
}

// accountPattern masks nine-digit account numbers.
const accountPattern = `{"defaults":false,"patterns":["\\b\\d{9}\\b"]}`

// TestChatNumbersInToolCallArguments: a number of an earlier tool call's
// arguments, or of one the model streams, that a pattern matches is masked
// as it is in a string (pii does the same for a card sent as a number).
func TestChatNumbersInToolCallArguments(t *testing.T) {
	model := &recordingModel{}
	p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", accountPattern)}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	require.NoError(t, err)
	msgs := []runtime.Message{
		{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c0", Name: "refund",
			Arguments: json.RawMessage(`{"account":123456789,"cents":1250}`)}}},
		{Role: "tool", ToolCallID: "c0", Content: "done"},
	}
	_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
	require.NoError(t, err)
	require.Len(t, model.seen, 1)
	assert.JSONEq(t, `{"account":"[REDACTED:pattern-0]","cents":1250}`, string(model.seen[0][0].ToolCalls[0].Arguments))
	assert.JSONEq(t, `{"account":123456789,"cents":1250}`, string(msgs[0].ToolCalls[0].Arguments), "the caller's message is untouched")

	streamed := rt.NewModel(rt.Response{Stream: []runtime.Delta{
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, ID: "c1", Name: "refund", Arguments: `{"account":1234`}}},
		{ToolCalls: []runtime.ToolCallDelta{{Index: 0, Arguments: `56789}`}}, FinishReason: runtime.FinishToolCalls},
	}})
	pl = rt.Build(t, p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": streamed}})
	var calls runtime.ToolCallBuilder
	_, err = pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
		calls.Add(&d)
		return true
	})
	require.NoError(t, err)
	require.Len(t, calls.ToolCalls(), 1)
	assert.JSONEq(t, `{"account":"[REDACTED:pattern-0]"}`, string(calls.ToolCalls()[0].Arguments))
}

// A result with no JSON form cannot be checked for secrets: the call fails
// (permanently, marked as having run) instead of handing it on unchecked.
func TestToolResultWithoutJSONFormFails(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Named("secrets", rt.Layer("redact", `{}`))}})
	tool := rt.NewTool(rt.ToolResult{Value: map[string]any{"svc": struct {
		Token string
		Score float64
	}{"token=s3cr3tvalue123", math.NaN()}}})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)
	res, err := pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "secrets", ce.Layer)
	assert.Equal(t, runtime.KindPermanent, ce.Kind)
	assert.Contains(t, ce.Message, "cannot be checked for secrets")
	assert.NotContains(t, err.Error(), "s3cr3tvalue123")
	assert.Nil(t, res.Value)
}

// A failed call's error text is read by the model as a result is (an MCP
// upstream's error result becomes one): its secrets are masked, and the
// error still tells what the failure is.
func TestToolErrorTextIsMasked(t *testing.T) {
	p := rt.Plan(plan.Chains{Tool: []plan.Layer{rt.Layer("redact", `{}`)}})
	failure := runtime.Ran(&runtime.CallError{Kind: runtime.KindPermanent, Layer: "upstream", Message: "failed with key " + awsKey})
	tool := rt.NewTool(rt.ToolResult{Err: failure}, rt.ToolResult{Err: errors.New("plain failure")})
	pl, err := runtime.Build(context.Background(), p, runtime.Deps{Tools: map[string]runtime.ToolFunc{"t": tool.Func()}})
	require.NoError(t, err)

	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), awsKey)
	assert.Contains(t, err.Error(), "failed with key [REDACTED:aws-access-key-id]")
	var ce *runtime.CallError
	require.ErrorAs(t, err, &ce, "the masked error unwraps to the failure")
	assert.Equal(t, runtime.KindPermanent, ce.Kind)
	assert.ErrorIs(t, err, runtime.ErrRan)
	assert.Equal(t, "upstream", runtime.LayerOf(err))

	_, err = pl.Tool(context.Background(), runtime.ToolRequest{Name: "t"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "plain failure", "an error without a secret is left as it is")
}

// A secret whose base64 the model wraps over two lines of its output is held until the run
// ends and read whole.
func TestOutputEncodingWrappedOverLines(t *testing.T) {
	enc := base64.StdEncoding.EncodeToString([]byte("the key is " + awsKey + " keep it"))
	for _, deltas := range [][]runtime.Delta{
		{{Text: "here:\n" + enc[:16] + "\n" + enc[16:] + "\n\nbye\n"}},
		{{Text: "here:\n" + enc[:16] + "\n"}, {Text: enc[16:] + "\n\nbye\n"}},
		{{Text: "here:\n" + enc[:32] + "\r\n"}, {Text: enc[32:40]}, {Text: enc[40:] + " ok\n\nbye\n"}},
	} {
		got, _ := streamThrough(t, deltas)
		assert.Contains(t, got, "[REDACTED:")
		assert.NotContains(t, got, enc[:16])
		assert.NotContains(t, got, enc[20:])
		assert.True(t, strings.HasPrefix(got, "here:\n"))
		assert.True(t, strings.HasSuffix(got, "\n\nbye\n"))
	}
}

// BenchmarkStreamedDump1MB streams a hex dump of text, 1 MB of it (xxd's layout, about
// 15,400 lines), through a redact layer a line a delta: the dump is held until it ends.
func BenchmarkStreamedDump1MB(b *testing.B) {
	var deltas []runtime.Delta
	for line := range strings.Lines(textnormtest.ProseDump(1<<20) + "done\n") {
		deltas = append(deltas, runtime.Delta{Text: line})
	}
	benchStream(b, "", deltas)
}

// BenchmarkStreamedProse256KB streams 256 KB of prose (about 3,700 lines, some ending in a
// key word, "Bearer" or "password:" with the value on the next line) through a redact
// layer 8 bytes a delta, with the default rules and with configured patterns that match
// over line breaks too.
func BenchmarkStreamedProse256KB(b *testing.B) {
	lines := []string{"the quick brown fox jumps over the lazy dog, and then", "it said the token", "= hunter22x, then Bearer",
		"abcdefghijklmnopqrstu was sent", "and the account number:", "12345678 was read out. password:", "hunter22x again"}
	var text strings.Builder
	for i := 0; text.Len() < 256<<10; i++ {
		text.WriteString(lines[i%len(lines)] + "\n")
	}
	var deltas []runtime.Delta
	for s := text.String(); s != ""; {
		k := min(8, len(s))
		deltas = append(deltas, runtime.Delta{Text: s[:k]})
		s = s[k:]
	}
	for name, config := range map[string]string{
		"defaults": "",
		"patterns": `{"patterns": ["ACCT-\\s*[0-9]{6}", "(?i)account number:\\s*[0-9]{8}", "tok_[a-z]+"]}`,
	} {
		b.Run(name, func(b *testing.B) { benchStream(b, config, deltas) })
	}
}

// benchStream streams deltas through a redact layer with config.
func benchStream(b *testing.B, config string, deltas []runtime.Delta) {
	model := runtime.ModelFunc(func(_ context.Context, _ *runtime.ChatRequest, yield func(runtime.Delta) bool) error {
		for _, d := range deltas {
			if !yield(d) {
				break
			}
		}
		return nil
	})
	pl := rt.Build(b, rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", config)}}),
		runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		n := 0
		_, err := pl.Stream(context.Background(), runtime.ChatRequest{Model: "primary"}, func(d runtime.Delta) bool {
			n += len(d.Text)
			return true
		})
		require.NoError(b, err)
		require.Positive(b, n)
	}
}

// A key written as bytes of hex with separators wrapped over lines of the output (a byte
// array in source, od -An's lines) is held until the bytes end and read whole, as in a text.
func TestOutputHexWrappedOverLines(t *testing.T) {
	for _, lines := range [][]string{
		{"key = [0x41, 0x4b, 0x49, 0x41,\n", "  0x49, 0x4f, 0x53, 0x46, 0x4f, 0x44, 0x4e, 0x4e,\n", "  0x37, 0x45, 0x58, 0x41, 0x4d, 0x50, 0x4c, 0x45]\n", "bye\n"},
		{"$ od -An -tx1 key\n", " 41 4b 49 41 49 4f 53 46\n", " 4f 44 4e 4e 37 45 58 41\n", " 4d 50 4c 45 0a\n", "bye\n"},
	} {
		var deltas []runtime.Delta
		for _, l := range lines {
			deltas = append(deltas, runtime.Delta{Text: l})
		}
		got, _ := streamThrough(t, deltas)
		assert.Contains(t, got, "[REDACTED:aws-access-key-id]")
		assert.NotContains(t, got, "0x4f, 0x44")
		assert.NotContains(t, got, "4f 44")
		assert.True(t, strings.HasPrefix(got, lines[0][:5]))
		assert.True(t, strings.HasSuffix(got, "bye\n"))
	}
}

// TestChatResultAttachmentMarkers: a text attachment a tool returned is
// masked in its result and written back as one base64 data: URL, whatever
// the case of its base64 marker or a line break a URL parser drops inside
// it: the model, and any layer after, read the masked text from it.
func TestChatResultAttachmentMarkers(t *testing.T) {
	body := base64.StdEncoding.EncodeToString([]byte("key " + awsKey))
	for _, head := range []string{"text/plain;base64", "text/plain;BASE64", "text/plain;charset=utf-8;Base64", "text/plain;base\n64"} {
		model := &recordingModel{}
		p := rt.Plan(plan.Chains{Chat: []plan.Layer{rt.Layer("redact", "")}})
		pl, err := runtime.Build(context.Background(), p, runtime.Deps{Models: map[string]runtime.ModelClient{"primary": model}})
		require.NoError(t, err)
		msgs := []runtime.Message{
			{Role: "assistant", ToolCalls: []runtime.ToolUse{{ID: "c0", Name: "read", Arguments: json.RawMessage(`{}`)}}},
			{Role: "user", Parts: []runtime.ContentPart{{Type: runtime.PartToolResult, ToolCallID: "c0", Text: "file"},
				{Type: runtime.PartImage, ToolCallID: "c0", ImageURL: "data:" + head + "," + body}}},
		}
		_, err = pl.Complete(context.Background(), runtime.ChatRequest{Model: "primary", Messages: msgs})
		require.NoError(t, err, head)
		require.Len(t, model.seen, 1)
		att := model.seen[0][1].Parts[1]
		assert.Equal(t, runtime.PartImage, att.Type, "%q: it stays in its result", head)
		assert.Equal(t, 1, strings.Count(strings.ToLower(att.ImageURL), "base64,"), "%q: %s", head, att.ImageURL)
		text, isText := att.Attachment()
		assert.True(t, isText, head)
		assert.Contains(t, text, "[REDACTED", head)
		assert.NotContains(t, text, awsKey, head)
		require.NoError(t, pl.Close())
	}
}
