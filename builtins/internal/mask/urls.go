package mask

import (
	"fmt"
	"iter"
	"net/url"
	"strings"

	"github.com/agentc-dev/agentc/builtins/internal/scanned"
	"github.com/agentc-dev/agentc/runtime"
)

// PartURL is the URL a part of a message locates that the model's provider
// fetches, from a host the client chose: no model reads it as text, but
// the provider and that host receive it whole, its query included.
type PartURL struct {
	// Msg is the index of the message.
	Msg int
	// What is the part's kind: "image" or "document".
	What string
	URL  string
}

// PartURLs yields the URLs of the parts of msgs that the provider
// receives: an image's or a document's URL, which it fetches, and of a
// data: URL its head, "data:" and the media type with its parameters
// (";name=..."), which reach it as written (or the media type alone); the
// data after the comma the layers read as the text it holds
// (runtime.ContentPart.Attachment), not again as a URL. The messages of
// role "system" are left out unless system is true.
func PartURLs(msgs []runtime.Message, system bool) iter.Seq[PartURL] {
	return func(yield func(PartURL) bool) {
		for i := range msgs {
			if msgs[i].Role == "system" && !system && !scanned.IsGrounding(&msgs[i]) {
				continue
			}
			for _, p := range msgs[i].Parts {
				if p.ImageURL == "" || p.Type != runtime.PartImage && p.Type != runtime.PartDocument {
					continue
				}
				u := p.ImageURL
				if c, data := runtime.CanonicalDataURL(u); data {
					u, _, _ = strings.Cut(c, ",")
				}
				if !yield(PartURL{Msg: i, What: p.Type, URL: u}) {
					return
				}
			}
		}
	}
}

// URLText is the text a layer reads of u, its host left out (the address
// the provider fetches from, no data of the client's: an image server's
// IP address is not personal data): u as written, then, one a line, u as
// the host reads it where that differs: its percent escapes decoded
// ("john.doe%40example.com"), and a "+" of its query read as a space too
// ("4111+1111+1111+1111"). Each line starts with the URL's scheme, so no
// item runs from one into the next.
func URLText(u string) string {
	u = withoutHost(u)
	readings := []string{u}
	add := func(s string, err error) {
		for _, r := range readings {
			if err != nil || r == s {
				return
			}
		}
		readings = append(readings, s)
	}
	add(url.PathUnescape(u))
	if base, query, ok := strings.Cut(u, "?"); ok {
		add(url.PathUnescape(base + "?" + strings.ReplaceAll(query, "+", " ")))
	}
	return strings.Join(readings, "\n")
}

// withoutHost returns u without the host and port of its authority (what
// follows "//" up to the path, the query or the fragment), its user
// information kept, and the backslashes of its path as slashes: a URL
// parser reads an http(s) URL so. u is returned as it is without an
// authority.
func withoutHost(u string) string {
	_, rest, ok := strings.Cut(u, "//")
	if !ok {
		return u
	}
	end := strings.IndexAny(rest, "/\\?#")
	if end < 0 {
		end = len(rest)
	}
	user := ""
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		user = rest[:at+1]
	}
	path, query := rest[end:], ""
	if q := strings.IndexAny(path, "?#"); q >= 0 {
		path, query = path[:q], path[q:]
	}
	return u[:len(u)-len(rest)] + user + strings.ReplaceAll(path, `\`, "/") + query
}

// RefuseURLs returns the refusal of layer for the first URL of the parts of
// msgs (PartURLs, with t.System) whose text (URLText) holds what t.Mask
// masks, nil when none does; a URL found clean is recorded for the run. A
// URL is not masked: masked, it would locate another resource, which the
// provider would fetch, failing the call or reading another image. With
// block the refusal is worded as BlockFields words one ("message 0 image
// URL contains personal data (card)"), else as RefuseFields does, saying
// why the URL is not masked. It names the message, never the URL.
func (t Transcript) RefuseURLs(run string, msgs []runtime.Message, layer, finding string, block bool) error {
	for u := range PartURLs(msgs, t.System) {
		text := URLText(u.URL)
		if _, masked := t.text(run, text); !masked {
			continue
		}
		name := fmt.Sprintf("message %d %s URL", u.Msg, u.What)
		if block {
			return &runtime.BlockedError{Layer: layer, Message: fmt.Sprintf("%s contains %s%s", name, finding, t.labels(text))}
		}
		return &runtime.BlockedError{Layer: layer, Message: fmt.Sprintf(
			"%s holds %s%s, which the model's provider fetches: %s", name, finding, t.labels(text), fixedURL)}
	}
	return nil
}

// fixedURL says why a URL is not masked (Field.Fixed), and what to send
// instead.
const fixedURL = "a URL masked would locate another resource: send the data itself, or a URL that holds none"
