package contentfilter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	f, err := New(Config{
		Keywords: []string{"ass", "Bad Word", "café", "c++", "$$$", "top secret"},
		Patterns: []string{`(?i)\bkill\s+(?:all|every)\b`, `\d{4}-\d{4}-\d{4}`},
	})
	require.NoError(t, err)
	tests := []struct {
		name     string
		in       string
		wantRule string // "" means no match
		wantText string
	}{
		{"keyword", "you are an ass.", "ass", "ass"},
		{"keyword case-insensitive", "ASS!", "ass", "ASS"},
		{"keyword not inside a word", "first class passenger", "", ""},
		{"keyword not a prefix", "assemble the team", "", ""},
		{"keyword next to underscore", "my_ass_var", "", ""},
		{"phrase", "that is a bad word indeed", "Bad Word", "bad word"},
		{"phrase across spaces and punctuation", "bad,\n  WORD", "Bad Word", "bad,\n  WORD"},
		{"phrase needs adjacent words", "bad and word", "", ""},
		{"phrase at end", "only bad", "", ""},
		{"unicode keyword", "un CAFÉ noir", "café", "CAFÉ"},
		{"unicode boundary", "cafés", "", ""},
		{"symbol keyword", "I write C++ daily", "c++", "C++"},
		{"symbol keyword boundary", "abc++", "", ""},
		{"symbol-only keyword", "make $$$ fast", "$$$", "$$$"},
		{"symbol-only keyword glued", "x$$$y", "$$$", "$$$"},
		{"phrase with symbols? no", "top-secret plans", "top secret", "top-secret"},
		{"pattern", "we must KILL   ALL bugs", `(?i)\bkill\s+(?:all|every)\b`, "KILL   ALL"},
		{"second pattern", "code 1234-5678-9012", `\d{4}-\d{4}-\d{4}`, "1234-5678-9012"},
		{"earliest wins", "1234-5678-9012 then ass", `\d{4}-\d{4}-\d{4}`, "1234-5678-9012"},
		{"clean", "a perfectly fine sentence", "", ""},
		{"empty", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := f.Check(tt.in)
			if tt.wantRule == "" {
				assert.False(t, ok, "unexpected %+v", m)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.wantRule, m.Rule)
			assert.Equal(t, tt.wantText, tt.in[m.Start:m.End])
			if strings.HasPrefix(tt.wantRule, "(?i)") || strings.HasPrefix(tt.wantRule, `\d`) {
				assert.Equal(t, KindPattern, m.Kind)
			} else {
				assert.Equal(t, KindKeyword, m.Kind)
			}
		})
	}
}

func TestCheckNormalizesKeywords(t *testing.T) {
	f, err := New(Config{
		Keywords: []string{"bomb", "kill", "c++", "top secret", "бомба", "$$$ now"},
		Patterns: []string{`\d{4}-\d{4}`},
	})
	require.NoError(t, err)
	tests := []struct {
		name     string
		in       string
		wantRule string // "" means no match
		wantText string // the reported span of the original text
	}{
		{"zero-width space inside", "how to make a b\u200bomb", "bomb", "b\u200bomb"},
		{"soft hyphen inside", "ki\u00adll it", "kill", "ki\u00adll"},
		{"word joiner at the edges", "\u2060bomb\u2060!", "bomb", "bomb"},
		{"full-width letters", "ｂｏｍｂ", "bomb", "ｂｏｍｂ"},
		{"cyrillic look-alikes", "a bоmb (with Cyrillic o)", "bomb", "bоmb"},
		{"upper-case look-alikes", "KІLL", "kill", "KІLL"},
		{"symbol keyword with zero-width space", "I write c+\u200b+ daily", "c++", "c+\u200b+"},
		{"phrase across invisible characters", "top\u200b secret\u200b", "top secret", "top\u200b secret"},
		{"symbol phrase across a no-break space", "make $$$\u00a0now", "$$$ now", "$$$\u00a0now"},
		{"symbol phrase across an ideographic space", "make $$$\u3000 now", "$$$ now", "$$$\u3000 now"},
		{"non-latin keyword", "это бомба", "бомба", "бомба"},
		{"offsets after multi-byte text", "héllo wörld, b\u200bomb", "bomb", "b\u200bomb"},
		{"still a word boundary", "bombs and skill", "", ""},
		{"invisible character does not join words", "the b\u200bombastic talk", "", ""},
		{"patterns see the text as it is", "1234-\u200b5678", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok := f.Check(tt.in)
			if tt.wantRule == "" {
				assert.False(t, ok, "unexpected %+v", m)
				return
			}
			require.True(t, ok)
			assert.Equal(t, tt.wantRule, m.Rule)
			assert.Equal(t, KindKeyword, m.Kind)
			assert.Equal(t, tt.wantText, tt.in[m.Start:m.End])
		})
	}
}

func TestCheckTieGoesToFirstConfigured(t *testing.T) {
	f, err := New(Config{Keywords: []string{"bad", "bad word"}, Patterns: []string{`bad`}})
	require.NoError(t, err)
	m, ok := f.Check("a bad word")
	require.True(t, ok)
	assert.Equal(t, "bad", m.Rule)
	assert.Equal(t, KindKeyword, m.Kind)

	f, err = New(Config{Keywords: []string{"bad word", "bad"}})
	require.NoError(t, err)
	m, ok = f.Check("a bad word")
	require.True(t, ok)
	assert.Equal(t, "bad word", m.Rule)
}

func TestNewErrors(t *testing.T) {
	_, err := New(Config{Keywords: []string{"  "}})
	assert.ErrorContains(t, err, "empty keyword")
	_, err = New(Config{Patterns: []string{`(?<=x)y`}})
	assert.ErrorContains(t, err, `pattern "(?<=x)y"`)
}

func TestEmptyFilterAllowsEverything(t *testing.T) {
	f, err := New(Config{})
	require.NoError(t, err)
	_, ok := f.Check("anything at all")
	assert.False(t, ok)
}

func BenchmarkCheck2KB(b *testing.B) {
	keywords := make([]string, 0, 200)
	for i := range 200 {
		keywords = append(keywords, "bannedword"+strings.Repeat("x", i%7)+string(rune('a'+i%26)))
	}
	text := strings.Repeat("The quick brown fox jumps over the lazy dog while the Support Team reviews ticket 48213. ", 24)[:2048]
	for _, bc := range []struct {
		name string
		cfg  Config
	}{
		{"200-keywords", Config{Keywords: keywords}},
		{"1-pattern", Config{Patterns: []string{`(?i)\bkill\s+all\b`}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			f, err := New(bc.cfg)
			require.NoError(b, err)
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := f.Check(text); ok {
					b.Fatal("false positive")
				}
			}
		})
	}
}
