// Package egress holds the URL and address checks behind the egress builtin.
//
// A Checker is built once from a Config and is safe for concurrent use. CheckURL vets a URL
// before a tool fetches it: the scheme must be http or https, userinfo is refused, the host
// must be on the allowlist, and every address the host resolves to must be a public unicast
// address (private, loopback, link-local, multicast, documentation, benchmarking, CGNAT,
// cloud metadata and other special ranges are refused, including IPv4 addresses embedded in
// IPv4-mapped, NAT64 and 6to4 IPv6 addresses). Numeric host spellings that some resolvers
// map to an address (2130706433, 0x7f000001, 0177.0.0.1, 127.1, 0) and non-ASCII hosts are
// refused before any lookup. Config.AllowPrivate (the layer's allow_private) exempts the
// internal networks a deployment deliberately reaches, never a cloud metadata address.
//
// A URL check alone cannot stop DNS rebinding: the name may resolve to another address when
// the connection is made. Dialer returns a net.Dialer whose ControlContext re-checks the
// address actually being connected to, and HTTPClient returns an http.Client that re-checks
// every request and every redirect and dials only through that guarded dialer.
//
// Refusals are reported as *DeniedError; use errors.As to tell a refusal from a lookup
// failure.
//
// The egress builtin (Middleware, stage tool) applies a Checker built once from the layer's
// `allow` list: a tool whose declaration has a url_arg has every URL it references checked
// before the inner layers run. A reference is a top-level argument name ("url"), a JSON pointer
// into the arguments ("/request/url", "/urls/*", "/links/*/href", where "*" is every element
// of an array), or a list of them. Any refused URL, a referenced argument that is missing, null
// or not a string, a value on the way that is not the object or array the pointer goes
// through, or an object member beside a referenced one whose name differs from it only in case
// (which a tool decoding case-insensitively may read instead) blocks the call with a
// *runtime.BlockedError naming the layer; a failed lookup is a transient failure.
//
// With scan_args (on by default) the layer also checks every URL written out anywhere in a
// call's arguments, for every tool, with or without url_arg: any "scheme://" in a string or an
// object key, at any depth, taken up to a space, a quote or an angle bracket, and any http,
// https, ws, wss, ftp or file scheme followed by a colon and no "//" ("https:\\host/",
// "http:/host", "http:host"), which a WHATWG URL parser (JavaScript's fetch) reads as a URL
// to that host: such a URL has no host to net/url and refuses the call. Such a parser also
// drops every tab and line break from a URL, so a value holding one is checked as well with
// them removed (and its ends trimmed) when what is left holds no space: "http:\t//10.0.0.8/"
// and "https://allowed.example\n@10.0.0.8/" are refused as the URLs a fetch would request,
// while prose that breaks a line after a URL is read as written. A model that
// puts the metadata endpoint in a "callback", a "q" or a header the tool happens to fetch is
// held to the same policy, and a URL that is not http or https refuses the call. What it cannot
// see is a destination without a scheme ("169.254.169.254/latest", "//host/x") or one a tool
// assembles from pieces: declare such arguments with url_arg, and have the tool fetch with
// ClientFrom. scan_args false leaves the arguments url_arg does not name to the tool. With scan_args
// false, a call of a tool the layer's tools: names that declares no url_arg (an MCP tool the
// policy does not declare, one an upstream added after the load) is refused: the layer was
// scoped to it to check its URLs and would check none. Every call that passes runs with the layer's guarded client on its
// context: tools that fetch should use ClientFrom(ctx) (or CheckerFrom with Dialer for other
// protocols) so that the connect-time checks apply to what they actually dial.
package egress
