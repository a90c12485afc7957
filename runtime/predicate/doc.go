// Package predicate compiles and evaluates the CEL predicates of agentc policies: guard deny and
// require expressions, chain-entry when conditions and the admit predicate.
//
// The compiler uses it at vet time (NewEnv, Env.Check) and the runtime at Build time
// (CompileSpec). It depends on cel-go only: never on CUE, dsl, compiler or the runtime package.
//
// # Environments and variables
//
// NewEnv builds the environment of one stage and phase (docs/language.md). Every variable is a
// closed object type served by a custom types.Provider (no protobuf), so a misspelt field such as
// request.modle is a cel/type issue with a column:
//
//	stage  phase   variables
//	chat   before  run, request {model, messages, max_tokens, tools, params}, messages list(message)
//	chat   after   the above plus response {text, model, usage, tool_calls, finish_reason, refusal}
//	tool   before  run, tool {name, side_effecting, retry_safe, url_arg, path_arg}, args
//	tool   after   the above plus result (dyn)
//	turn   before  run, input {text}, session {id, meta}
//	turn   after   the above plus output {text}, status (string)
//	admit  -       item {id, content, source, score, metadata}
//
// run is {id, agent, meta}; a message is {role, content, name, tool_call_id, tool_calls}, its
// content the text of its content, of its text and tool_result parts and that its image
// parts carry in place of an image (runtime.ContentPart.HeldText), adjacent text parts run
// together as the model reads them (runtime.Message.RunsOn), its tool_calls an
// assistant message's calls, list({id, name, args}) as response.tool_calls; meta and metadata
// are map(string, dyn). request.tools is list({name, description}); request.params is
// {temperature double, top_p double, stop list(string), seed int, tool_choice string,
// response_format string (the format's type), metadata map(string, string)}, where has() on
// temperature, top_p and seed is true when the request sets them, even to zero.
// response.usage is {input_tokens, output_tokens, cached_input_tokens, cache_write_input_tokens,
// cache_write_1h_input_tokens, reasoning_tokens}, the cached and cache-write counts the parts of
// input_tokens read from and written to the provider's prompt cache (Anthropic's
// cache_creation_input_tokens), cache_write_1h_input_tokens the part of the writes to one-hour
// cache entries (Anthropic's cache_creation.ephemeral_1h_input_tokens);
// response.tool_calls is list({id, name, args}), args the call's JSON arguments decoded at
// access as map(string, dyn) (arguments that are not an object are an evaluation error);
// response.finish_reason is a string; response.refusal is true when the text is the model's
// refusal to answer (OpenAI's refusal, Anthropic's refusal explanation). has() on a field of these types is true when the field holds a non-zero
// value, as for proto3 scalars. The Go values come from the activations ChatVars, ToolVars,
// TurnVars and AdmitVars, which resolve names without allocating.
//
// # Typed args
//
// EnvConfig.ArgsSchemas holds the JSON Schemas (draft 2020-12 subset) of the tools a tool-stage
// predicate is scoped to. The root must be an object with properties; each property becomes a
// field: "string" (or an enum/const of strings) is string, "integer" is int, "number" is
// double, "boolean" is bool, "array" is list(T) of its items, an object with properties is a
// nested object type (named agentc.args.<path>, e.g. agentc.args.shipping), an object without
// properties is map(string, T) of its additionalProperties; a type list of one type plus "null",
// OpenAPI 3.0's nullable: true, and an anyOf or oneOf whose other branches are {"type": "null"}
// (pydantic's Optional[X]) are that type, nullable; an enum or const without a type is typed by
// its values (strings a string, integers an int, numbers a double, booleans a bool; a null
// among them makes it nullable), and a number whose enum lists only integers is an int; a
// tuple (prefixItems, or items as a list) is list(dyn). A node holding a $ref to a place in the
// same schema ("#/$defs/addr", "#/definitions/Addr", "#/properties/ship") is typed as the
// schema it references (a recursive definition to the depth bound, and 10,000 nodes at most
// through references); its own keywords, the $ref and each allOf branch all hold (pydantic's
// {"allOf": [{"$ref": ...}], "description": ...}): their objects' fields are merged, required
// where any requires them; an integer that is a number is an int; kinds that exclude each other
// are dyn, and so is an object combined with anything that types nothing it can see (another
// document's $ref). anyOf and oneOf hold one branch: objects get the fields of every branch
// (typed where the branches agree, dyn where not), required only where every branch requires
// them, so a field one branch of a discriminated union lacks needs has(); branches of different
// kinds are dyn. Anything else (no type, several types) is dyn. Nesting deeper than 16 levels
// is dyn. In a list, a scalar the schema lets be null is dyn, so that l[0] == null checks; a
// map's values are typed as they are, since a null value reads as absent.
//
// Several schemas are intersected: args gets the fields every schema declares with the same
// type (recursively for nested objects and lists); a field is required only where every schema
// requires it. If any schema types nothing (no schema, no properties), args is untyped.
//
// Rules of typed args:
//
//   - Closed types. A field that is not declared under properties is a cel/type issue, whatever
//     additionalProperties says. Read an undeclared field deliberately with dyn(args).field.
//   - Optional fields need a presence test. Reading a field that the schema does not list in
//     required (or that is nullable) is a cel/type issue unless a presence test guards it:
//     has(args.x) in the same conjunction (has(args.x) && args.x > 1), its negation in the same
//     disjunction (!has(args.x) || args.x > 1), or the condition of a ternary
//     (has(args.x) ? args.x : 0). The optional syntax args.?x.orValue(d) needs no test. This
//     turns the runtime "no such key" error of a missing argument into a vet error. A layer's
//     predicates run only where its when holds, so what the when proves present (its
//     Checked.PresentIfTrue, given to CheckGiven and carried in Spec.Given) needs no test.
//   - A JSON null reads as absent, in args, in every object inside it and in a map's values, typed
//     or not (and so in run.meta, session.meta, item.metadata, a tool result and a tool call's
//     args): has() is false, an optional read (args.?x, m[?'k']) is empty and orValue gives its
//     default, 'k' in m is false, size and iteration skip it, and a plain read is a "no such
//     key" error. Only a list keeps its nulls, as elements. Comparing a typed scalar field with
//     null (args.note == null) is a cel/type issue whose message names the test to write
//     instead (!has(args.note)); so is comparing with null a variable of the stage or an object
//     field of one (args, request.params), which is always there.
//   - Numbers arrive as float64, int64 or json.Number (the runtime decodes arguments to float64,
//     and to int64 an integer a float64 cannot hold exactly, such as 9007199254740993). A field
//     typed int is converted to int when it is read (an integral float64, an int64 or json.Number;
//     a fraction is an evaluation error), a double field to double; lists and maps of numbers are
//     converted the same way. Conversion happens at access, so arguments a predicate does not
//     read cost nothing, and the caller's map is never modified. Inside dyn values, an int64 reads as
//     int and a json.Number as double, or as int where only an int holds it (9007199254740993),
//     as the runtime decodes arguments. A number is never read as a neighbour: a json.Number
//     neither holds exactly (0.1000000000000000055511151231257827, 1e400) read in a dyn value or
//     as a double, 9007199254740993.0 read as an int, and an int64 read as a double where a
//     double does not hold it, are evaluation errors. An int and a double compare (==, !=, <,
//     <=, >, >=, and a list's elements for in) as the numbers they are: CEL rounds the int to a double first, so an int
//     9007199254740993 would equal the double 9007199254740992 (exactComparison); so do the elements of two lists
//     and the values of two maps under == and !=. string() writes a double in plain decimal form (1000000, not CEL's
//     1e+06; 0.0000001; -0 as 0), and double() of an int, a uint or a decimal string a double does not hold exactly
//     is an evaluation error (exactConversion).
//
// Without schemas args is map(string, dyn): nothing is checked, and Checked.ReadsUntypedArgs
// tells the compiler to warn with cel/untyped-args.
//
// Ordering comparisons accept int and double together (args.amount > 100); equality and
// arithmetic do not (write args.amount == 100.0 and args.amount + 1.0).
//
// # Functions
//
// Besides the CEL standard library, optional values (x.?f, optional.of) and cel-go's strings
// extension (charAt, indexOf, lastIndexOf, lowerAscii, upperAscii, replace, split, substring,
// trim, join, reverse, format, strings.quote), environments declare:
//
//	url_host(string) -> string
//	    the host of a URL, lower-cased, without port, IPv6 brackets or trailing dot; "" when the
//	    text has no host (e.g. no scheme); an evaluation error when it does not parse. A URL of
//	    a special scheme (http, https, ws, wss, ftp, file) is also an error, as the egress layer
//	    refuses it, where a WHATWG parser (a browser, JavaScript's fetch) reads a host that
//	    net/url does not: "http:/evil.com", "http:evil.com", "http:///evil.com" and
//	    "http:\\evil.com" are URLs to evil.com to it and hostless to net/url, and
//	    "http://2852039166/" (any numeric host but a dotted quad), "http://169。254。169。254/"
//	    (any host not ASCII) and "http://[::ffff:169.254.169.254]/" are URLs to
//	    169.254.169.254. The error applies the layer's on_error, so a guard reading the host
//	    blocks the call.
//	    Cost: 1 + 0.1 per character.
//	url_path(string) -> string
//	    the path of a URL as a server routes it, from the parse url_host reads, and an
//	    evaluation error wherever url_host is one. The path is percent-decoded
//	    ("/v1/%61dmin" is "/v1/admin"; the result may hold any character decoded but "/",
//	    ";" and those below, and keeps "é" and "日"), its dot segments resolved after
//	    decoding (RFC 3986 5.2.4: "/v1/x/../admin" and
//	    "/v1/x/%2e%2e/admin" are "/v1/admin"; "/v1/admin/.." is "/v1/"), and its repeated
//	    slashes joined ("/v1//admin" is "/v1/admin"), as nginx, Go's net/http and Spring route
//	    it; the query and fragment are left out. In a URL of a special scheme a backslash is a
//	    slash, as a WHATWG parser (a browser, fetch) reads it, and the empty path is "/"; in a
//	    URL of another scheme, or of none (a relative one, which a parser resolves against a
//	    base of any scheme), a backslash is an error. What
//	    servers read in more than one way is an error: dot segments that resolve otherwise
//	    where the empty segments are kept, as a WHATWG parser and Express keep them
//	    ("/v1/x//../admin"); an encoded slash or backslash (%2F, %5C); an encoded percent sign
//	    before two hex digits ("%252e" or "%25%32%65", a dot where decoded twice); a ";", or %3B, which a
//	    server in front decodes to one (Tomcat and Spring drop a path parameter from each
//	    segment, so "/v1/..;/admin" is "/admin" to them); an encoded control character (%00,
//	    %0A); a segment that ends in a dot or a space, or holds ":$", which a Windows server
//	    (IIS) reads as another name ("/admin./", "/admin%20/" and "/x/..%20/" are "/admin/"
//	    and "/" to it, "/admin::$DATA" is "/admin", an NTFS stream), so "/wiki/D.C." is an
//	    error too; a decoded path that is not UTF-8; a character that a server mapping Unicode to
//	    ASCII (NFKC, a best-fit code page) reads as ASCII (U+FF0E FULLWIDTH FULL STOP is ".",
//	    U+2215 DIVISION SLASH "/", U+FF41 FULLWIDTH LATIN SMALL LETTER A "a"); a URL with no
//	    hierarchical path ("mailto:x"). The letters keep their case: for a server that routes
//	    paths ignoring it, test lower(url_path(...)). A prefix test of a URL argument belongs
//	    on it and url_host: url_host(args.url) == 'api.example.com' &&
//	    url_path(args.url).startsWith('/v1/admin').
//	    Cost: 1 + 0.1 per character.
//	lower(string) -> string
//	    Unicode lower-casing. Cost: 1 + 0.1 per character.
//	path_clean(string) -> string
//	    the path with "." and ".." elements resolved and repeated slashes joined, lexically
//	    (Go's path.Clean): "/srv/data/../../etc/passwd" is "/etc/passwd", "" is ".". A prefix
//	    test of a path argument belongs on it: path_clean(args.path).startsWith('/srv/data/').
//	    It does not follow symbolic links; file_check resolves the real path.
//	    Cost: 1 + 0.1 per character.
//	contains_any(string, list(string)) -> bool
//	    true when the string contains any of the substrings, ignoring case; an empty substring
//	    matches. Cost: 1 + 0.1*(len(s)+len(subs)) + (0.1*len(s))*(0.1*len(subs)).
//	matches_any(string, list(string)) -> bool
//	    true when the string matches any of the RE2 patterns (unanchored, like matches()).
//	    Patterns in a list literal are validated at check time; others at evaluation, where an
//	    invalid one is an error. Compiled patterns are cached. Cost: 1 + (0.1*(len(s)+1)) *
//	    (0.25*len(patterns)).
//
// The O(n) functions of the strings extension get size-proportional costs too (cel-go would
// count them as 1). A constant pattern of matches() is validated at check time as well.
//
// Two functions could do unbounded work inside one call, before the cost tracker charges it:
// replace() computes the size of its result first and fails when it would exceed
// MaxStringResult (8 MiB); matches() and matches_any() with a pattern that is not a constant
// fail when len(text) × len(pattern) exceeds MaxRegexWork (2^26). Both are evaluation errors,
// which a guard's on_error turns into a block (closed) or a pass (open).
//
// # Check
//
// Env.Check reports issues with rule ids cel/syntax (parse errors, text limits, invalid regular
// expressions), cel/type (undeclared references, undefined fields, no matching overload, unguarded
// optional fields), cel/not-bool (the result type is not bool; dyn is not bool either) and
// cel/cost. Positions are 1-based lines and byte columns plus byte offsets into the source.
//
// Limits: a predicate is at most MaxSourceBytes (4 KiB) of valid UTF-8, nests at most
// MaxNestingDepth levels and expands to at most 4096 nodes; a panic inside cel-go is reported as
// an issue, never propagated.
//
// # Cost
//
// Check estimates the cost with cel-go's estimator. Sizes come from the schema (maxLength,
// maxItems, maxProperties, the longest enum value); where nothing is declared it assumes
// DefaultStringSize characters per string (DefaultContentSize for a message's content, so that
// the transcript assumed is the 4 MiB the gateway admits by default), DefaultListSize elements
// per list (messages included) and DefaultMapSize entries per meta map. A dyn value
// (run.meta.x, result, untyped args) used as a string counts as DefaultStringSize; iterating over one is unbounded. An
// unbounded estimate (a comprehension over a dyn value) or one above the limit
// (EnvConfig.CostLimit, default DefaultCostLimit = 1,000,000) is a cel/cost issue naming the
// estimate and the sizes it assumed, placed at the offending range when there is one.
//
// The assumed sizes are not trusted at runtime. Check also estimates the cost knowing no input
// size at all; when that estimate is within the limit (the refund guard, comparisons of fields
// with constants) the program runs without the runtime cost tracker. Otherwise evaluation runs
// under cel.CostLimit with the same limit and stops with ErrCostLimit.
//
// # Programs and plans
//
// Env.Program (or Env.Compile) turns a Checked predicate into a Program, safe for concurrent use;
// Program.Eval returns the boolean or an *EvalError (a missing key, an exceeded cost, ...) and
// leaves fail-open or fail-closed to the caller. The plan stores a predicate as a Spec (stage,
// phase, source, args schemas); CompileSpec rebuilds the environment and the program from it.
package predicate
