package predicate

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"golang.org/x/text/unicode/norm"
)

// urlPath implements url_path: the path of a URL as a server routes it,
// from the parse url_host reads (and refused where url_host refuses the
// URL). The path is percent-decoded ("/v1/%61dmin" is "/v1/admin", %2e a
// dot), its dot segments resolved after decoding (RFC 3986 5.2.4:
// "/v1/x/../admin" and "/v1/x/%2e%2e/admin" are "/v1/admin") and its
// repeated slashes joined, as nginx, Go's net/http and Spring route it; a
// backslash is a slash in a URL of a special scheme, as a WHATWG parser
// (a browser, fetch) reads it; the empty path of one is "/". What servers
// read in more than one way is an error: a path whose dot segments
// resolve otherwise where its empty segments are kept (as a WHATWG parser
// and Express keep them: "/v1//../admin"), an encoded slash or backslash
// (%2F, %5C), an encoded percent sign before two hex digits (%252e, read
// as . where decoded twice), a ";" or %3B (Tomcat and Spring drop a path
// parameter from a segment: "/v1/..;/admin" is "/admin" to them, and
// "/v1/..%3B/admin" behind a server that decodes the path), an encoded
// control character (%00, %0A), a segment that ends in a dot or a space
// or holds ":$" (windowsAlias), a backslash in a URL of another scheme or
// of none (a relative one), a decoded path that is not UTF-8, a
// character a server mapping Unicode to ASCII reads as ASCII (U+FF0E, a
// fullwidth dot; U+2215, a division slash; U+FF41, a fullwidth a), and a
// URL without a path of its own (mailto:x).
func urlPath(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	u, _, errv := parseURL("url_path", string(s))
	if errv != nil {
		return errv
	}
	p, err := routedPath(string(s), u)
	if err != "" {
		return types.NewErr("url_path: %q: %s: refused", clip(string(s)), err)
	}
	return types.String(p)
}

// routedPath returns the path of u, parsed from s, as urlPath reads it, or
// why it refuses it.
func routedPath(s string, u *url.URL) (string, string) {
	if u.Opaque != "" {
		return "", "it has no path a server routes (no \"/\" after the scheme)"
	}
	raw := rawPath(s, u)
	if un, err := url.PathUnescape(raw); err != nil || un != u.Path {
		// Not a path net/url reads the same as written.
		return "", "its path is not read the same way by every parser"
	}
	special := isSpecialScheme(u.Scheme)
	if special {
		raw = strings.ReplaceAll(raw, `\`, "/")
	} else if strings.Contains(raw, `\`) {
		return "", "its path holds a backslash, a slash to a WHATWG parser where the URL's scheme is http, https, ws, wss, ftp or file (or a relative one is resolved against such a URL) and to a Windows server, a character of a name elsewhere"
	}
	if strings.Contains(raw, ";") {
		return "", "its path holds a \";\", a path parameter that Tomcat and Spring drop from a segment (\"..;\" is \"..\" to them)"
	}
	segs := strings.Split(raw, "/")
	for i, seg := range segs {
		for j := strings.IndexByte(seg, '%'); j >= 0; j = strings.IndexByte(seg, '%') {
			c := unhex(seg[j+1])<<4 | unhex(seg[j+2])
			switch {
			case c == ';':
				return "", "its path holds an encoded \";\" (%3B), a path parameter to Tomcat and Spring behind a server that decodes the path (\"..%3B\" is \"..\" to them)"
			case c == '/' || c == '\\':
				return "", "its path holds an encoded slash or backslash (%2F, %5C), which one server reads as a separator and another as part of a name"
			case c < 0x20 || c == 0x7f:
				return "", "its path holds an encoded control character, at which some servers end the path"
			}
			seg = seg[j+3:]
		}
		dec, _ := url.PathUnescape(segs[i])
		if hexEscape(dec) {
			// %252e, or %25%32%65: decoded once, an escape still.
			return "", "its path holds an encoded percent sign before two hex digits (%25), read as another character where decoded twice"
		}
		if !utf8.ValidString(dec) {
			return "", "its decoded path is not UTF-8"
		}
		if r, like, ok := asciiLookalike(dec); ok {
			return "", fmt.Sprintf("its path holds %U, which a server that maps Unicode to ASCII (NFKC, a best-fit code page) reads as %q", r, like)
		}
		if why := windowsAlias(dec); why != "" {
			return "", why
		}
		segs[i] = dec
	}
	abs := strings.HasPrefix(raw, "/")
	if abs {
		segs = segs[1:]
	}
	joined := resolveDots(segs, false)
	if kept := resolveDots(segs, true); joinSlashes("/"+kept) != "/"+joined {
		return "", "its dot segments resolve otherwise where its empty segments (\"//\") are kept, as a WHATWG parser and some servers keep them"
	}
	if abs || special && joined == "" {
		return "/" + joined, ""
	}
	return joined, ""
}

// rawPath returns the path of u as s writes it, escapes and all: what
// follows the scheme and the authority, up to the query or fragment, as
// url.Parse cuts s.
func rawPath(s string, u *url.URL) string {
	rest, _, _ := strings.Cut(s, "#")
	if u.Scheme != "" {
		rest = rest[len(u.Scheme)+1:]
	}
	rest, _, _ = strings.Cut(rest, "?")
	if strings.HasPrefix(rest, "//") && (u.Scheme != "" || !strings.HasPrefix(rest, "///")) {
		i := strings.IndexByte(rest[2:], '/')
		if i < 0 {
			return ""
		}
		rest = rest[2+i:]
	}
	return rest
}

// windowsAlias says why a Windows server (IIS, a file share) reads the
// decoded segment seg as another name, or "": one that ends in a dot or
// a space, which Windows drops ("admin." and "admin " are admin, ".. "
// is ..), and one holding ":$", which names an NTFS stream of a file or a
// directory ("admin::$DATA" is admin's content, "admin:$i30:$INDEX_ALLOCATION"
// the directory admin).
func windowsAlias(seg string) string {
	if seg != "." && seg != ".." && (strings.HasSuffix(seg, ".") || strings.HasSuffix(seg, " ")) {
		return fmt.Sprintf("its path holds a segment that ends in a dot or a space (%q), which a Windows server drops (\"admin.\" and \"admin \" are admin to it, \".. \" is ..)", clip(seg))
	}
	if strings.Contains(seg, ":$") {
		return fmt.Sprintf("its path holds \":$\" (%q), an NTFS stream to a Windows server (\"admin::$DATA\" is admin)", clip(seg))
	}
	return ""
}

// resolveDots returns the segments of a path, decoded, with its dot
// segments removed (RFC 3986 5.2.4) and joined with "/": a "." is
// dropped, a ".." drops the segment before it, and one of them last
// leaves a trailing slash. Empty segments are kept where keep is set, and
// dropped otherwise (but for a last one, the trailing slash).
func resolveDots(segs []string, keep bool) string {
	var out []string
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s == ".":
		case s == "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case s == "" && !keep && !last:
			continue
		default:
			out = append(out, s)
			continue
		}
		if last {
			out = append(out, "")
		}
	}
	return strings.Join(out, "/")
}

// joinSlashes joins the repeated slashes of p.
func joinSlashes(p string) string {
	for strings.Contains(p, "//") {
		p = strings.ReplaceAll(p, "//", "/")
	}
	return p
}

// asciiLookalike returns the first rune of s, decoded, that is not ASCII
// and that a server mapping Unicode to ASCII reads as ASCII, with what it
// reads: one whose compatibility form (NFKC) holds an ASCII character
// (U+FF0E FULLWIDTH FULL STOP is ".", U+2025 TWO DOT LEADER "..", U+FF41
// FULLWIDTH LATIN SMALL LETTER A "a"), or a slash a best-fit code page
// maps to "/" or "\\" (U+2215 DIVISION SLASH, U+2044 FRACTION SLASH).
func asciiLookalike(s string) (rune, string, bool) {
	for _, r := range s {
		if r < utf8.RuneSelf {
			continue
		}
		switch r {
		case '\u2215', '\u2044', '\u29f8':
			return r, "/", true
		case '\u2216', '\u29f9':
			return r, `\`, true
		}
		k := norm.NFKC.String(string(r))
		for _, c := range k {
			if c < utf8.RuneSelf {
				return r, k, true
			}
		}
	}
	return 0, "", false
}

// hexEscape reports whether s holds a "%" before two hex digits.
func hexEscape(s string) bool {
	for i := strings.IndexByte(s, '%'); i >= 0; i = strings.IndexByte(s, '%') {
		if len(s) >= i+3 && ishex(s[i+1]) && ishex(s[i+2]) {
			return true
		}
		s = s[i+1:]
	}
	return false
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}
