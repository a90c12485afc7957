package runtime

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Attachment reports what an image part carries in place of an image: data
// (a data: URL's, or Data) whose media type is not an image's
// ("data:text/plain;base64,..."; an SVG image is text too), which a model or
// an OpenAI-compatible server that accepts such a part reads as text. text
// is that data when the layers can read it as the model would: UTF-8 (with
// no other charset named) and free of NUL bytes. carried reports such data
// (text or not); an http(s) URL, an image's own bytes and empty data carry
// none. Data carried that is not text (Latin-1, UTF-16, a malformed data:
// URL) is read by no layer: Unread refuses it.
func (p ContentPart) Attachment() (text string, carried bool) {
	if p.Type != PartImage {
		return "", false
	}
	media, data, utf := p.MediaType, p.Data, true
	if rest, ok := DataURL(p.ImageURL); ok {
		d, ok := parseDataURL(rest)
		if !ok {
			return "", true // no data the layers could find
		}
		if isImageType(d.media) {
			return "", false // an image's bytes, left undecoded
		}
		if data, ok = d.decode(); !ok {
			return "", true // data parsers may read otherwise
		}
		media, utf = d.media, d.utf8
	} else if p.ImageURL != "" {
		return "", false
	}
	if isImageType(media) || len(data) == 0 {
		return "", false
	}
	if !utf || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "", true
	}
	return string(data), true
}

// dataURL is a data: URL read as a URL parser reads it (the WHATWG data:
// URL processor, which browsers and the HTTP clients modelled on them
// follow): its media type, whether no parameter names a charset other
// than UTF-8 (or its subset, ASCII), and its data, to decode.
type dataURL struct {
	media string
	utf8  bool
	// b64 is set when the data is base64, bad when the URL is one whose
	// reading parsers may differ on (a base64 marker in any form but the
	// last parameter written ";base64": ";base64 " and "; base64" are
	// base64 data to the WHATWG processor, the base64 text itself to a
	// parser that splits the parameters).
	b64, bad bool
	body     string
}

// parseDataURL reads the head of rest, what follows a data: URL's scheme
// (DataURL); ok is false without a comma. A parser removes the tabs and
// line breaks of a URL wherever they are, and they are removed here too,
// so that the layers read the text the model is given ("ig\nnore" is
// "ignore" to the model).
func parseDataURL(rest string) (d dataURL, ok bool) {
	head, body, found := strings.Cut(rest, ",")
	if !found {
		return d, false
	}
	params := strings.Split(dropURLBreaks(head), ";")
	d.media, d.utf8, d.body = strings.TrimSpace(params[0]), true, body
	for i, prm := range params[1:] {
		if strings.EqualFold(strings.TrimSpace(prm), "base64") {
			d.b64 = true
			d.bad = d.bad || i != len(params)-2 || !strings.EqualFold(prm, "base64")
			continue
		}
		if k, v, ok := strings.Cut(prm, "="); ok && strings.EqualFold(strings.TrimSpace(k), "charset") {
			switch strings.ToLower(strings.Trim(strings.TrimSpace(v), `"`)) {
			case "utf-8", "utf8", "us-ascii", "ascii":
			default:
				d.utf8 = false
			}
		}
	}
	return d, true
}

// decode returns the URL's data as a parser reads it, its tabs and line
// breaks removed, and a base64 body's white space too (a forgiving base64
// decoder skips it); ok is false for data parsers may read otherwise
// (dataURL.bad), base64 data that does not decode and a malformed
// percent escape.
func (d dataURL) decode() (data []byte, ok bool) {
	if d.bad {
		return nil, false
	}
	body := dropURLBreaks(d.body)
	if d.b64 {
		body = dropBase64Spaces(body)
		data, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			data, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(body, "="))
		}
		return data, err == nil
	}
	s, err := url.PathUnescape(body)
	return []byte(s), err == nil
}

// dropBase64Spaces returns base64 data without the spaces and form feeds
// a forgiving base64 decoder skips (its tabs and line breaks are dropped
// with the URL's: dropURLBreaks).
func dropBase64Spaces(s string) string {
	if !strings.ContainsAny(s, " \f") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\f' {
			return -1
		}
		return r
	}, s)
}

// dropURLBreaks returns s without its tabs and line breaks, which a URL
// parser removes wherever they are.
func dropURLBreaks(s string) string {
	if !strings.ContainsAny(s, "\t\n\r") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		return r
	}, s)
}

// HeldText returns the text the part holds that the layers read, as the
// model reads it: a text or tool_result part's Text, or the text an image
// part carries in place of an image (Attachment); "" for a part that holds
// none (an image's own bytes or URL, a PDF, a thinking block). A guard's
// m.content reads what it returns for each part.
func (p ContentPart) HeldText() string {
	switch p.Type {
	case PartText, PartToolResult:
		return p.Text
	case PartImage:
		text, _ := p.Attachment()
		return text
	}
	return ""
}

// Unread reports whether the part holds content no layer reads as text: a
// PDF (PartDocument), or data an image part carries in place of an image
// that is not text (Attachment).
func (p ContentPart) Unread() bool {
	if p.Type == PartDocument {
		return true
	}
	text, carried := p.Attachment()
	return carried && text == ""
}

// isImageType reports whether media is an image's media type whose bytes a
// model decodes as an image (an SVG is text): "image/" and a subtype of
// token characters, in any case, with no parameter. A type a MIME parser
// cannot read ("image/png x") is text/plain to a data: URL's parser, and
// is not an image here either.
func isImageType(media string) bool {
	media = strings.TrimSpace(media)
	if len(media) <= len("image/") || !strings.EqualFold(media[:len("image/")], "image/") || strings.EqualFold(media, "image/svg+xml") {
		return false
	}
	for i := len("image/"); i < len(media); i++ {
		if !isTokenByte(media[i]) {
			return false
		}
	}
	return true
}

// isTokenByte reports whether c may be in an HTTP token (RFC 9110), as a
// media type's subtype is.
func isTokenByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// DataURL returns what follows the scheme of a data: URL, which a URL
// parser reads in any case ("DATA:"), past the control characters and
// white space around the URL, and with tabs and line breaks anywhere in it
// removed ("da\tta:"); those in what it returns are left to the caller
// (parseDataURL removes them).
func DataURL(u string) (string, bool) {
	u = strings.TrimFunc(u, isURLSpace)
	const scheme = "data:"
	i := 0
	for k := 0; k < len(scheme); k++ {
		for i < len(u) && (u[i] == '\t' || u[i] == '\n' || u[i] == '\r') {
			i++
		}
		if i == len(u) || u[i]|0x20 != scheme[k]|0x20 {
			return "", false
		}
		i++
	}
	return u[i:], true
}

// isURLSpace reports whether a URL parser strips r from the ends of a URL
// (a C0 control or a space), or a Unicode space (which none does: such a
// URL is read as data here, and fails to parse upstream).
func isURLSpace(r rune) bool {
	return r <= ' ' || unicode.IsSpace(r)
}

// CanonicalDataURL returns u, a data: URL (DataURL), as a provider is sent
// it: "data:" in lower case, without the white space around it and the
// tabs and line breaks in it, which a URL parser drops; ok is false for a
// URL that is not a data: URL.
func CanonicalDataURL(u string) (string, bool) {
	rest, ok := DataURL(u)
	if !ok {
		return "", false
	}
	return "data:" + dropURLBreaks(rest), true
}

// DataSource returns u, a data: URL (DataURL), as a base64 source (the
// Messages API's): its media type without parameters, and its data in
// base64, read as Attachment reads it (a plain URL's text percent-decoded
// and encoded; a malformed escape left as written); ok is false for a URL
// that is not a data: URL.
func DataSource(u string) (media, data string, ok bool) {
	rest, ok := DataURL(u)
	if !ok {
		return "", "", false
	}
	d, found := parseDataURL(rest)
	if !found {
		return strings.TrimSpace(dropURLBreaks(rest)), "", true
	}
	body := dropURLBreaks(d.body)
	if d.b64 {
		return d.media, dropBase64Spaces(body), true
	}
	if s, err := url.PathUnescape(body); err == nil {
		body = s
	}
	return d.media, base64.StdEncoding.EncodeToString([]byte(body)), true
}
