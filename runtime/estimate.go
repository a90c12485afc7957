package runtime

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/gif" // DecodeConfig reads the size of a GIF
	_ "image/jpeg"
	_ "image/png"
	"io"
	"math"
	"strings"
	"unicode/utf8"
)

// MaxImageTokens is the estimate of an image whose size is not known: one
// known only by an http(s) URL, or whose header cannot be read (a format
// other than PNG, JPEG and GIF, a corrupt or truncated image). It is the
// most the image estimate gives any size (see EstimateMessages), so a
// reservation never counts such an image for less than a provider may bill.
const MaxImageTokens = 5000

// The estimate of a document no layer reads (a PDF, PartDocument). A
// provider reads each page as its text and as an image of the page, so a
// page counts DocumentPageTokens. The pages are counted from the PDF's page
// objects ("/Type /Page"), and at least one every DocumentPageBytes of its
// data (page objects packed in compressed streams are not seen); a document
// known only by its URL counts DocumentURLPages pages. It is an estimate,
// not a bound: a page of dense text may cost more.
const (
	DocumentPageTokens = 3000 + MaxImageTokens
	DocumentPageBytes  = 20 << 10
	DocumentURLPages   = 20
)

// documentTokens estimates a PDF document's tokens (see DocumentPageTokens).
func documentTokens(p *ContentPart) int64 {
	data := p.Data
	if rest, ok := DataURL(p.ImageURL); ok {
		_, body, _ := strings.Cut(rest, ",")
		var err error
		if data, err = base64.StdEncoding.DecodeString(body); err != nil {
			data = []byte(body)
		}
	} else if p.ImageURL != "" {
		return DocumentURLPages * DocumentPageTokens
	}
	pages := 0
	for rest := data; ; {
		i := bytes.Index(rest, []byte("/Type"))
		if i < 0 {
			break
		}
		rest = bytes.TrimLeft(rest[i+len("/Type"):], " \t\r\n")
		if bytes.HasPrefix(rest, []byte("/Page")) && !bytes.HasPrefix(rest, []byte("/Pages")) {
			pages++
		}
	}
	pages = max(pages, 1, (len(data)+DocumentPageBytes-1)/DocumentPageBytes)
	return int64(pages) * DocumentPageTokens
}

// RedactedThinkingBytesPerToken is the estimate of a redacted_thinking
// block: a token every this many bytes of its encrypted data (base64, in
// Signature). The model reads the thinking it encrypted back as input, and
// the data is the only measure of it there is: base64 of the encrypted
// text is a third longer than the text, which English makes a token of
// about every four bytes.
const RedactedThinkingBytesPerToken = 4

// redactedThinkingTokens estimates a redacted_thinking block's tokens
// (see RedactedThinkingBytesPerToken).
func redactedThinkingTokens(p *ContentPart) int64 {
	return (int64(len(p.Signature)) + RedactedThinkingBytesPerToken - 1) / RedactedThinkingBytesPerToken
}

// Image token figures of the providers (see imageTokensOf).
const (
	// OpenAI's tiled images: the image fits in 2048 x 2048, then its
	// shortest side in 768, and costs 85 tokens plus 170 a 512-pixel tile.
	openAIFit, openAIShort, openAITile = 2048, 768, 512
	openAIBase, openAIPerTile          = 85, 170
	// OpenAI's patched images (gpt-4.1-mini and -nano, o4-mini): a 32-pixel
	// patch a token, at most 1536, billed times a model's multiplier, 2.46
	// at most (gpt-4.1-nano).
	openAIPatch, openAIMaxPatches, openAIPatchFactor = 32, 1536, 2.46
	// Anthropic: w x h / 750 tokens, and at least a 28-pixel patch a
	// token, after the resize to its native resolution: 2576 pixels on the
	// long edge and 3.75 megapixels at most (Claude Opus 4.7; earlier
	// models resize to 1568 pixels and about 1.15 megapixels, and bill
	// less).
	anthropicLongEdge, anthropicPixels = 2576, 3_750_000
	anthropicPixelsPerToken            = 750
	anthropicPatch                     = 28
)

// imageTokens estimates the input tokens of an image part from its size,
// read from the header of its bytes (Data, or a base64 data: URL, read in
// any case as DataURL reads it, which wins as the providers send it): the
// most a provider bills for an image of that size (imageTokensOf). An image whose size cannot be read is
// estimated at MaxImageTokens.
func imageTokens(p *ContentPart) int64 {
	var r io.Reader
	switch {
	case p.ImageURL != "":
		rest, ok := DataURL(p.ImageURL)
		if !ok {
			return MaxImageTokens
		}
		head, body, ok := strings.Cut(rest, ",")
		if !ok || len(head) < len(";base64") || !strings.EqualFold(head[len(head)-len(";base64"):], ";base64") {
			return MaxImageTokens
		}
		// Decoded as it is read: the header is a few bytes at the start,
		// and the rest of the payload is never decoded.
		r = base64.NewDecoder(base64.StdEncoding, strings.NewReader(body))
	case len(p.Data) > 0:
		r = bytes.NewReader(p.Data)
	default:
		return MaxImageTokens
	}
	cfg, _, err := image.DecodeConfig(r)
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return MaxImageTokens
	}
	return imageTokensOf(cfg.Width, cfg.Height)
}

// imageTokensOf returns the most a provider bills for an image of w x h
// pixels: the largest of OpenAI's tiled and patched counts and
// Anthropic's, each after the provider's own resize. It never exceeds
// MaxImageTokens.
func imageTokensOf(w, h int) int64 {
	fw, fh := float64(w), float64(h)

	// OpenAI, tiles.
	tw, th := fit(fw, fh, openAIFit/max(fw, fh))
	tw, th = fit(tw, th, openAIShort/min(tw, th))
	tiled := openAIBase + openAIPerTile*math.Ceil(tw/openAITile)*math.Ceil(th/openAITile)

	// OpenAI, patches.
	patched := math.Ceil(min(math.Ceil(fw/openAIPatch)*math.Ceil(fh/openAIPatch), openAIMaxPatches) * openAIPatchFactor)

	// Anthropic.
	aw, ah := fit(fw, fh, anthropicLongEdge/max(fw, fh))
	aw, ah = fit(aw, ah, math.Sqrt(anthropicPixels/(aw*ah)))
	anthropic := max(math.Ceil(aw*ah/anthropicPixelsPerToken), math.Ceil(aw/anthropicPatch)*math.Ceil(ah/anthropicPatch))

	return min(int64(max(tiled, patched, anthropic)), MaxImageTokens)
}

// fit scales w x h by s when s shrinks it; a provider never enlarges an
// image.
func fit(w, h, s float64) (float64, float64) {
	if s >= 1 {
		return w, h
	}
	return w * s, h * s
}

// EstimateTokens estimates the tokens a provider's tokenizer makes of a
// text, conservatively: at least what OpenAI's BPE tokenizers (cl100k_base,
// o200k_base) make of common text of every class, so a meter never
// charges an abandoned stream, or reserves a call, for much less than the
// provider bills. Counted in quarter tokens (textQuarters): a word of
// ASCII letters a token for its first four letters and a quarter a letter
// after, two quarters after its tenth; a letter that follows one it seldom
// follows in English (commonPairs) a token, as in random strings, which
// the tokenizers cut every two or three letters; letters that do not begin
// a word (after a digit, a case change, or a letter that did not) more, as
// in base64 and hex; a token each three digits of a run, and a quarter
// more, and a token for the space before a number (the tokenizers never
// join the two); a token a punctuation mark; a quarter a space; and a rune
// beyond ASCII by its UTF-8 length and script: a token and a quarter for
// two bytes (Cyrillic, Greek, Arabic, Hebrew), as much for three of CJK
// and Hangul, a token and three quarters for the other scripts of three
// bytes (Devanagari, Thai, Khmer...), three and a half for four (emoji).
// English prose is counted about 1.4 times what those tokenizers make of
// it; Chinese 1.2 (cl100k) to 1.8 (o200k) times.
func EstimateTokens(s string) int64 { return (textQuarters(s) + 3) / 4 }

// Quarter-token costs of textQuarters.
const (
	qWordStart      = 4  // an ASCII letter that begins a word or a hump
	qWordFree       = 3  // lowercase letters after a word's first that cost nothing
	qWordLetter     = 1  // a lowercase letter after those
	qLongWordLetter = 2  // a lowercase letter after a word's tenth
	qLongWord       = 10 // the letters of a word counted at qWordLetter at most
	qRarePair       = 4  // a letter after one it seldom follows (commonPairs)
	qOtherLetter    = 2  // a letter in a hump that does not begin a word, or an uppercase after an uppercase
	qDigitGroup     = 5  // the first digit of each group of three in a run
	qSpaceDigit     = 3  // a space before a digit, beyond qSpace: a token of its own
	qSpace          = 1  // a space, tab or line break
	qPunctuation    = 4  // any other ASCII character
	qTwoByteRune    = 5  // a rune of two UTF-8 bytes
	qThreeByteCJK   = 5  // of three, CJK or Hangul (cjk)
	qThreeByteRune  = 7  // of three, any other script
	qFourByteRune   = 14 // of four
)

// commonPairs[a] holds, as bits, the letters that commonly follow the letter
// a inside English words: the letter pairs that make 98% of the pairs in
// English prompts and documentation. The tokenizers' vocabularies are made
// of such text, so a word whose letters pair otherwise (random strings,
// keys, consonant runs) is cut into tokens of two or three letters.
var commonPairs = func() (t [26]uint32) {
	for i, next := range [26]string{
		"bcdfgiklmnprstuvwy", "aeiloruy", "acehiklorstuy", "adegilorsu", "acdefgilmnopqrstvwxy",
		"aefilortu", "aehinoprsu", "aeiortuy", "abcdefgklmnoprstvz", "e",
		"eins", "adefilostuwy", "abeimopsuy", "acdefgiklnopstuvy", "abcdefgiklmnoprstuvw",
		"aehiloprstu", "u", "acdegiklmnoprstuvy", "acehikopstuwy", "aceghiloprstuwy",
		"abcdegilmnprst", "aeio", "aehinor", "apt", "eiopst", "e",
	} {
		for _, c := range next {
			t[i] |= 1 << (c - 'a')
		}
	}
	return t
}()

// rarePair reports whether the letter b seldom follows the letter a in
// English words, whatever their case. A letter repeated is not: the
// tokenizers hold runs of one letter.
func rarePair(a, b byte) bool {
	a, b = a|0x20, b|0x20
	return a != b && commonPairs[a-'a']&(1<<(b-'a')) == 0
}

// cjk reports whether r, a rune of three UTF-8 bytes, is of the CJK or
// Hangul blocks (or a fullwidth form), which the tokenizers' vocabularies
// hold many of.
func cjk(r rune) bool {
	return r >= 0x3000 && r <= 0x9fff || r >= 0xac00 && r <= 0xd7af || r >= 0xf900 && r <= 0xfaff || r >= 0xff00 && r <= 0xffef
}

// textQuarters returns the estimate of s in quarter tokens (see
// EstimateTokens); any non-empty text is more than zero.
func textQuarters(s string) int64 {
	var (
		q       int64
		prev    byte = ' ' // the previous byte; utf8.RuneSelf after a rune beyond ASCII
		digits  int        // the length of the run of digits so far
		free    int        // the free letters left in the word
		word    bool       // the hump began a word: after a space, punctuation or the start
		letters int        // the length of the run of ASCII letters so far
	)
	for i := 0; i < len(s); {
		b := s[i]
		if b >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			switch {
			case n <= 2: // 1: an invalid byte
				q += qTwoByteRune
			case n == 3 && cjk(r):
				q += qThreeByteCJK
			case n == 3:
				q += qThreeByteRune
			default:
				q += qFourByteRune
			}
			i += n
			prev, digits, letters = utf8.RuneSelf, 0, 0
			continue
		}
		switch {
		case isDigit(b):
			if digits%3 == 0 {
				q += qDigitGroup
			}
			if prev == ' ' || prev == '\t' || prev == '\n' || prev == '\r' {
				q += qSpaceDigit
			}
			digits++
		case b >= 'a' && b <= 'z':
			switch {
			case !isLetter(prev):
				q += qWordStart
				free, word = qWordFree, !isDigit(prev) && prev < utf8.RuneSelf
			case rarePair(prev, b):
				q += qRarePair
				free = 0
			case word && free > 0:
				free--
			case word && letters < qLongWord:
				q += qWordLetter
			case word:
				q += qLongWordLetter
			default:
				q += qOtherLetter
			}
		case b >= 'A' && b <= 'Z':
			if prev >= 'A' && prev <= 'Z' {
				if rarePair(prev, b) {
					q += qRarePair
				} else {
					q += qOtherLetter
				}
			} else {
				q += qWordStart
			}
			free, word = qWordFree, !isLetter(prev) && !isDigit(prev) && prev < utf8.RuneSelf
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			q += qSpace
		default:
			q += qPunctuation
		}
		if !isDigit(b) {
			digits = 0
		}
		if isLetter(b) {
			letters++
		} else {
			letters = 0
		}
		prev = b
		i++
	}
	return q
}

func isDigit(b byte) bool  { return b >= '0' && b <= '9' }
func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }
