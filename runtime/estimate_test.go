package runtime

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentc-dev/agentc/runtime/plan"
)

// The declared tools a request offers carry their schemas in compact JSON:
// a plan loaded from the indented file agentc build writes offers, and is
// estimated for, the same bytes as the compiled policy.
func TestDeclaredToolsAreCompact(t *testing.T) {
	indented := json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\n    \"note\": {\"type\": \"string\", \"description\": \"a b  c\"}\n  }\n}")
	compact := `{"type":"object","properties":{"note":{"type":"string","description":"a b  c"}}}`
	defs := DeclaredTools(&plan.Plan{Tools: map[string]plan.Tool{"note": {Description: "take a note", Args: indented}, "any": {}}})
	require.Len(t, defs, 2)
	assert.Equal(t, `{"type":"object"}`, string(defs[0].Parameters), "a tool without args takes any object")
	assert.Equal(t, compact, string(defs[1].Parameters))
	req := &ChatRequest{Messages: []Message{{Role: "user", Content: "hi"}}, Tools: defs[1:]}
	assert.Equal(t, EstimateMessages(req.Messages)+EstimateTokens("note")+EstimateTokens("take a note")+EstimateTokens(compact), EstimateRequest(req))
}

// A structured tool result reaches the model as JSON without HTML
// escaping: "<" as it is, as truncate measures it.
func TestResultTextKeepsMarkup(t *testing.T) {
	s, err := resultText(map[string]any{"html": "<b>A & B</b>"})
	assert.NoError(t, err)
	assert.Equal(t, `{"html":"<b>A & B</b>"}`, s)
	_, err = resultText(map[string]any{"bad": func() {}})
	assert.Error(t, err)
}

// pngHeader returns the first bytes of a PNG of w x h pixels: its
// signature and IHDR chunk, all DecodeConfig reads.
func pngHeader(w, h int) []byte {
	b := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR")
	b = binary.BigEndian.AppendUint32(b, uint32(w))
	b = binary.BigEndian.AppendUint32(b, uint32(h))
	b = append(b, 8, 2, 0, 0, 0) // 8-bit RGB
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[12:]))
}

// An image is estimated from its size, the most a provider bills for it:
// a small one OpenAI's one tile, a large one Anthropic's resize to 3.75
// megapixels, whatever its encoding; one whose size is unknown the most.
func TestImageIsEstimatedFromItsSize(t *testing.T) {
	var jpg, gf bytes.Buffer
	require.NoError(t, jpeg.Encode(&jpg, image.NewGray(image.Rect(0, 0, 1000, 1000)), nil))
	require.NoError(t, gif.Encode(&gf, image.NewPaletted(image.Rect(0, 0, 1000, 1000), color.Palette{color.Black}), nil))
	b64 := base64.StdEncoding.EncodeToString
	for _, c := range []struct {
		name string
		part ContentPart
		want int64
	}{
		{"small png", ContentPart{Data: pngHeader(100, 100)}, 85 + 170},
		// OpenAI's patched count: 32 x 32 patches times 2.46.
		{"jpeg", ContentPart{Data: jpg.Bytes()}, 2520},
		{"gif data url", ContentPart{ImageURL: "data:image/gif;base64," + b64(gf.Bytes())}, 2520},
		{"square 2048", ContentPart{Data: pngHeader(2048, 2048)}, 5000},
		// Tall: OpenAI's 1536 patches at most, times 2.46.
		{"tall", ContentPart{Data: pngHeader(100, 20000)}, 3779},
		{"data url wins over data", ContentPart{ImageURL: "data:image/png;base64," + b64(pngHeader(100, 100)), Data: pngHeader(4000, 4000)}, 255},
		// Only the header is decoded: the rest of the payload is never read.
		{"header of a long data url", ContentPart{ImageURL: "data:image/png;base64," + b64(pngHeader(100, 100)) + strings.Repeat("%", 1<<20)}, 255},
		{"http url", ContentPart{ImageURL: "https://example.com/a.png"}, MaxImageTokens},
		{"not base64", ContentPart{ImageURL: "data:image/png,%89PNG"}, MaxImageTokens},
		{"truncated", ContentPart{Data: pngHeader(100, 100)[:20]}, MaxImageTokens},
		{"other format", ContentPart{MediaType: "image/webp", Data: []byte("RIFF\x00\x00\x00\x00WEBPVP8 ")}, MaxImageTokens},
		{"empty", ContentPart{}, MaxImageTokens},
	} {
		c.part.Type = PartImage
		text := EstimateMessages([]Message{{Role: "user"}})
		assert.Equal(t, text+c.want, EstimateMessages([]Message{{Role: "user", Parts: []ContentPart{c.part}}}), c.name)
	}
}

// No size is estimated above MaxImageTokens, nor below what either
// provider bills for it.
func TestImageEstimateBounds(t *testing.T) {
	for _, wh := range [][2]int{{1, 1}, {512, 512}, {768, 2048}, {1092, 1092}, {784, 1568}, {2576, 1456}, {1456, 2576}, {8000, 8000}, {1, 8000}, {1 << 30, 1 << 30}} {
		n := imageTokensOf(wh[0], wh[1])
		assert.LessOrEqual(t, n, int64(MaxImageTokens), wh)
		assert.GreaterOrEqual(t, n, int64(min(wh[0]*wh[1], 1_150_000)/750), "older Claude models", wh)
	}
	assert.Equal(t, int64(MaxImageTokens), imageTokensOf(2576, 1456), "Anthropic's largest")
}

// BenchmarkEstimateMessages estimates a transcript of text, with and
// without an image given by its bytes.
func BenchmarkEstimateMessages(b *testing.B) {
	text := []Message{{Role: "system", Content: strings.Repeat("be brief ", 40)}, {Role: "user", Content: "hello", Parts: []ContentPart{{Type: PartText, Text: "more"}}},
		{Role: "assistant", ToolCalls: []ToolUse{{ID: "a", Name: "search", Arguments: json.RawMessage(`{"q":"go"}`)}}}, {Role: "tool", Content: "result"}}
	b.Run("text", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			EstimateMessages(text)
		}
	})
	img := append(text[:len(text):len(text)], Message{Role: "user", Parts: []ContentPart{{Type: PartImage, ImageURL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngHeader(1024, 768)) + strings.Repeat("A", 1<<20)}}})
	b.Run("data url image", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			EstimateMessages(img)
		}
	})
}
