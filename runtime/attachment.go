package runtime

import (
	"bytes"
	"encoding/base64"
	"net/url"
	"strings"
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
	media, data := p.MediaType, p.Data
	charset := ""
	if rest, ok := DataURL(p.ImageURL); ok {
		head, body, ok := strings.Cut(rest, ",")
		if !ok {
			return "", true // no data the layers could find
		}
		params := strings.Split(head, ";")
		media = params[0]
		if isImageType(media) {
			return "", false // an image's bytes, left undecoded
		}
		for _, prm := range params[1:] {
			if k, v, ok := strings.Cut(prm, "="); ok && strings.EqualFold(strings.TrimSpace(k), "charset") {
				charset = strings.ToLower(strings.Trim(strings.TrimSpace(v), `"`))
			}
		}
		if strings.EqualFold(params[len(params)-1], "base64") {
			var err error
			data, err = base64.StdEncoding.DecodeString(strings.TrimSpace(body))
			if err != nil {
				data, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(body), "="))
			}
			if err != nil {
				return "", true
			}
		} else {
			s, err := url.PathUnescape(body)
			if err != nil {
				return "", true
			}
			data = []byte(s)
		}
	} else if p.ImageURL != "" {
		return "", false
	}
	if isImageType(media) || len(data) == 0 {
		return "", false
	}
	switch charset {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
	default:
		return "", true
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "", true
	}
	return string(data), true
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
// model decodes as an image (an SVG is text).
func isImageType(media string) bool {
	media = strings.ToLower(strings.TrimSpace(media))
	return strings.HasPrefix(media, "image/") && media != "image/svg+xml"
}

// DataURL returns what follows the scheme of a data: URL, which a URL
// parser reads in any case ("DATA:") and past surrounding white space.
func DataURL(u string) (string, bool) {
	u = strings.TrimSpace(u)
	if len(u) < 5 || !strings.EqualFold(u[:5], "data:") {
		return "", false
	}
	return u[5:], true
}
