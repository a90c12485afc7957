package predicate

import (
	"fmt"
	"math"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// Overload ids of the agentc function library.
const (
	overloadURLHost     = "url_host_string"
	overloadLower       = "lower_string"
	overloadPathClean   = "path_clean_string"
	overloadURLPath     = "url_path_string"
	overloadContainsAny = "contains_any_string_list_string"
	overloadMatchesAny  = "matches_any_string_list_string"
)

// Cost factors, the same as cel-go's for string traversal and regular expressions.
const (
	traversalFactor = 0.1
	regexFactor     = 0.25
)

// libraryOptions declares the agentc functions with their bindings.
func libraryOptions() []cel.EnvOption {
	str := cel.StringType
	strList := cel.ListType(cel.StringType)
	return []cel.EnvOption{
		cel.Function("url_host",
			cel.Overload(overloadURLHost, []*cel.Type{str}, str, cel.UnaryBinding(urlHost))),
		cel.Function("url_path",
			cel.Overload(overloadURLPath, []*cel.Type{str}, str, cel.UnaryBinding(urlPath))),
		cel.Function("lower",
			cel.Overload(overloadLower, []*cel.Type{str}, str, cel.UnaryBinding(lower))),
		cel.Function("path_clean",
			cel.Overload(overloadPathClean, []*cel.Type{str}, str, cel.UnaryBinding(pathClean))),
		cel.Function("contains_any",
			cel.Overload(overloadContainsAny, []*cel.Type{str, strList}, cel.BoolType, cel.BinaryBinding(containsAny))),
		cel.Function("matches_any",
			cel.Overload(overloadMatchesAny, []*cel.Type{str, strList}, cel.BoolType, cel.BinaryBinding(matchesAny))),
		// Bounded redefinitions of functions whose work or result the runtime
		// cost tracker would only charge after they return (same overload ids
		// and signatures: cel-go lets a later declaration replace the binding).
		cel.Function("replace",
			cel.MemberOverload("string_replace_string_string", []*cel.Type{str, str, str}, str,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val { return boundedReplace(args[0], args[1], args[2], -1) })),
			cel.MemberOverload("string_replace_string_string_int", []*cel.Type{str, str, str, cel.IntType}, str,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					n, ok := args[3].(types.Int)
					if !ok {
						return types.MaybeNoSuchOverloadErr(args[3])
					}
					return boundedReplace(args[0], args[1], args[2], int64(n))
				}))),
	}
}

// MaxStringResult bounds the string a replace() may build (8 MiB): a result
// is refused, as an evaluation error, before it is allocated.
const MaxStringResult = 8 << 20

// MaxRegexWork bounds len(text) × len(pattern) for a pattern that is not a
// constant of the predicate (constant patterns are compiled when the program
// is built): matching costs up to that product.
const MaxRegexWork = 1 << 26

// boundedReplace implements replace(old, new[, n]) with the result's size
// computed, and bounded by MaxStringResult, before it is built.
func boundedReplace(sv, oldv, newv ref.Val, n int64) ref.Val {
	str, ok1 := sv.(types.String)
	old, ok2 := oldv.(types.String)
	repl, ok3 := newv.(types.String)
	if !ok1 || !ok2 || !ok3 {
		return types.NoSuchOverloadErr()
	}
	count := int64(strings.Count(string(str), string(old)))
	if n >= 0 && n < count {
		count = n
	}
	if grow := int64(len(repl)) - int64(len(old)); grow > 0 && count > 0 {
		if count > (MaxStringResult-int64(len(str)))/grow {
			return types.NewErr("replace: the result would exceed %d bytes", MaxStringResult)
		}
	}
	return types.String(strings.Replace(string(str), string(old), string(repl), int(max(n, -1))))
}

// checkRegexWork refuses to match text against a pattern from call data when
// the work is above MaxRegexWork.
func checkRegexWork(fn string, text, pattern string) error {
	if len(pattern) > 0 && len(text) > MaxRegexWork/len(pattern) {
		return fmt.Errorf("%s: a %d-byte pattern on a %d-byte text is above the evaluation bound (%d)", fn, len(pattern), len(text), MaxRegexWork)
	}
	return nil
}

// boundMatches is a program decorator: a matches() call whose pattern is
// not a constant of the predicate (constant ones are compiled once when the
// program is built) runs boundedMatches, which refuses work above
// MaxRegexWork before it starts.
func boundMatches(i interpreter.InterpretableV2) (interpreter.InterpretableV2, error) {
	call, ok := i.(interpreter.InterpretableCall)
	if !ok || call.Function() != overloads.Matches || len(call.Args()) != 2 {
		return i, nil
	}
	if _, isConst := call.Args()[1].(interpreter.InterpretableConst); isConst {
		return i, nil
	}
	return interpreter.NewCall(call.ID(), call.Function(), call.OverloadID(), call.Args(), func(values ...ref.Val) ref.Val {
		if len(values) != 2 {
			return types.NoSuchOverloadErr()
		}
		return boundedMatches(values[0], values[1])
	}), nil
}

// boundedMatches implements matches() for patterns that are not constants.
func boundedMatches(sv, pv ref.Val) ref.Val {
	s, ok1 := sv.(types.String)
	p, ok2 := pv.(types.String)
	if !ok1 || !ok2 {
		return types.NoSuchOverloadErr()
	}
	if err := checkRegexWork("matches", string(s), string(p)); err != nil {
		return types.WrapErr(err)
	}
	re, err := compileRegex(string(p))
	if err != nil {
		return types.NewErr("matches: %v", err)
	}
	return types.Bool(re.MatchString(string(s)))
}

// urlHost implements url_host: the host of an absolute URL, lower-cased, without port, brackets
// or a trailing dot; "" when the URL has no host; an error when it does not parse. A URL of a
// special scheme (http, https, ws, wss, ftp, file) that net/url reads with no host, or with a
// host another parser would read as a different one, is an error too, as the egress layer
// refuses it: a WHATWG parser (a browser, JavaScript's fetch) reads "http:/evil.com",
// "http:evil.com", "http:///evil.com" and "http:\\evil.com" as URLs to evil.com, and
// "http://2852039166/", "http://169。254。169。254/" and "http://[::ffff:169.254.169.254]/"
// as URLs to 169.254.169.254.
func urlHost(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	_, host, err := parseURL("url_host", string(s))
	if err != nil {
		return err
	}
	return types.String(host)
}

// parseURL parses s as url_host reads it, returning the URL and its host,
// or the evaluation error of fn (url_host, url_path) that refuses it.
func parseURL(fn, s string) (*url.URL, string, ref.Val) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, "", types.NewErr("%s: invalid URL: %v", fn, unwrapURLError(err))
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if !isSpecialScheme(u.Scheme) {
		return u, host, nil
	}
	if u.Scheme != "file" && host == "" || u.Scheme == "file" && fileHostDiffers(s) {
		return nil, "", types.NewErr("%s: %q has no host to net/url, while a browser or fetch reads one in it (%s: not followed by \"//\", a backslash for a slash, or a third slash): refused", fn, clip(s), u.Scheme)
	}
	if host == "" {
		return u, "", nil
	}
	// The host as written: lower-casing makes some letters ASCII (K, the
	// Kelvin sign, is k; İ is i, where a browser reads i and a dot above,
	// another name).
	for _, r := range u.Hostname() {
		if r >= utf8.RuneSelf {
			return nil, "", types.NewErr("%s: host %q is not ASCII, and a browser or fetch maps it to another name (full-width letters and dots to ASCII ones, İ to a name that is not i): refused", fn, clip(u.Hostname()))
		}
	}
	if strings.Contains(host, ":") {
		if a, err := netip.ParseAddr(host); err == nil && a.Is4In6() {
			return nil, "", types.NewErr("%s: host %q is an IPv4 address written as IPv6, which reaches %s: refused", fn, host, a.Unmap())
		}
		return u, host, nil
	}
	if problem := numericHostProblem(host); problem != "" {
		return nil, "", types.NewErr("%s: %s", fn, problem)
	}
	return u, host, nil
}

// isSpecialScheme reports the schemes a WHATWG URL parser reads a host
// for even without "//", and whose backslashes it reads as slashes.
func isSpecialScheme(scheme string) bool {
	switch scheme {
	case "http", "https", "ws", "wss", "ftp", "file":
		return true
	}
	return false
}

// fileHostDiffers reports whether a file URL s (which parsed) has a host to a
// WHATWG parser that net/url does not read: one whose scheme is followed by
// two slashes either of which is a backslash ("file:\\host\share",
// "file:/\host").
func fileHostDiffers(s string) bool {
	_, rest, _ := strings.Cut(s, ":")
	slash := func(i int) bool { return len(rest) > i && (rest[i] == '/' || rest[i] == '\\') }
	return slash(0) && slash(1) && !strings.HasPrefix(rest, "//")
}

// numericHostProblem says why host, lower-case ASCII, is refused: its last
// label is a number (decimal, octal with a leading 0, hex with 0x), which
// a browser and inet_aton read as an IPv4 address in any of several
// spellings (2852039166, 0xa9.0xfe.0xa9.0xfe and 0251.254.169.254 are all
// 169.254.169.254), and the host is not the canonical dotted quad.
func numericHostProblem(host string) string {
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	if rest, ok := strings.CutPrefix(last, "0x"); ok {
		last = strings.TrimLeft(rest, "0123456789abcdef")
	} else {
		last = strings.TrimLeft(last, "0123456789")
	}
	if last != "" || labels[len(labels)-1] == "" {
		return ""
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is4() && a.String() == host {
		return ""
	}
	return fmt.Sprintf("numeric host %q is not a dotted quad, and a browser or fetch reads it as an IPv4 address: refused", clip(host))
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	i := 80
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// pathClean implements path_clean: the shortest path naming the same file
// as s, lexically (path.Clean): "." and ".." elements resolved, repeated
// slashes joined ("/srv/data/../../etc/passwd" is "/etc/passwd", "" is ".").
func pathClean(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	return types.String(path.Clean(string(s)))
}

// lower implements lower: Unicode lower-casing.
func lower(v ref.Val) ref.Val {
	s, ok := v.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(v)
	}
	return types.String(strings.ToLower(string(s)))
}

// containsAny implements contains_any: true when s contains any of the substrings, ignoring case.
func containsAny(sv, listv ref.Val) ref.Val {
	s, ok := sv.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(sv)
	}
	list, ok := listv.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(listv)
	}
	hay := strings.ToLower(string(s))
	it := list.Iterator()
	for it.HasNext() == types.True {
		n, ok := it.Next().(types.String)
		if !ok {
			return types.NewErr("contains_any: want a list of strings")
		}
		if strings.Contains(hay, strings.ToLower(string(n))) {
			return types.True
		}
	}
	return types.False
}

// matchesAny implements matches_any: true when s matches any of the RE2 patterns (unanchored,
// like matches()).
func matchesAny(sv, listv ref.Val) ref.Val {
	s, ok := sv.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(sv)
	}
	list, ok := listv.(traits.Lister)
	if !ok {
		return types.MaybeNoSuchOverloadErr(listv)
	}
	it := list.Iterator()
	for it.HasNext() == types.True {
		p, ok := it.Next().(types.String)
		if !ok {
			return types.NewErr("matches_any: want a list of strings")
		}
		if err := checkRegexWork("matches_any", string(s), string(p)); err != nil {
			return types.WrapErr(err)
		}
		re, err := compileRegex(string(p))
		if err != nil {
			return types.NewErr("matches_any: %v", err)
		}
		if re.MatchString(string(s)) {
			return types.True
		}
	}
	return types.False
}

// regexCache holds compiled patterns of matches_any, bounded in entries and
// in pattern bytes (compiled size grows with the pattern): patterns longer
// than maxCachedRegexLen, and any pattern once the cache holds
// maxCachedRegexes entries or maxCachedRegexBytes of pattern text, are
// compiled on each call and dropped after it. Patterns written in a policy
// are short; long or ever-new ones come from call data.
var (
	regexCache          sync.Map // string -> *regexp.Regexp
	regexCacheEntries   atomic.Int64
	regexCacheBytes     atomic.Int64
	maxCachedRegexes    int64 = 1024
	maxCachedRegexLen         = 1024
	maxCachedRegexBytes int64 = 256 << 10
)

func compileRegex(p string) (*regexp.Regexp, error) {
	if re, ok := regexCache.Load(p); ok {
		return re.(*regexp.Regexp), nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	if len(p) > maxCachedRegexLen {
		return re, nil
	}
	// Reserve room first, so concurrent misses never overshoot the bounds.
	entries, bytes := regexCacheEntries.Add(1), regexCacheBytes.Add(int64(len(p)))
	if entries > maxCachedRegexes || bytes > maxCachedRegexBytes {
		regexCacheEntries.Add(-1)
		regexCacheBytes.Add(-int64(len(p)))
		return re, nil
	}
	if _, loaded := regexCache.LoadOrStore(p, re); loaded {
		regexCacheEntries.Add(-1)
		regexCacheBytes.Add(-int64(len(p)))
	}
	return re, nil
}

// The overloads of the strings extension that cost O(n) in their string
// (linear) and O(n*m) in the string and the searched substring (search), for
// both the static estimate and the runtime tracker.
var (
	linearStringOverloads = []string{"string_lower_ascii", "string_upper_ascii", "string_trim", "string_reverse",
		"string_char_at_int", "string_substring_int", "string_substring_int_int"}
	searchStringOverloads = []string{"string_index_of_string", "string_index_of_string_int",
		"string_last_index_of_string", "string_last_index_of_string_int"}
)

// staticCostOptions registers the cost estimates of the agentc functions and of the O(n)
// functions of the strings extension, which cel-go would otherwise count as 1.
func staticCostOptions() []checker.CostOption {
	linear := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		var s checker.SizeEstimate
		switch {
		case target != nil:
			s = strSize(est, *target)
		case len(args) > 0:
			s = strSize(est, args[0])
		default:
			return nil
		}
		return &checker.CallEstimate{
			CostEstimate: s.MultiplyByCostFactor(traversalFactor).Add(checker.FixedCostEstimate(1)),
			ResultSize:   &s,
		}
	}
	// search: O(n*m) like contains().
	search := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if target == nil || len(args) == 0 {
			return nil
		}
		s := strSize(est, *target).MultiplyByCostFactor(traversalFactor)
		sub := strSize(est, args[0]).MultiplyByCostFactor(traversalFactor)
		return &checker.CallEstimate{CostEstimate: s.Multiply(sub).Add(checker.FixedCostEstimate(1))}
	}
	replace := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if target == nil || len(args) < 2 {
			return nil
		}
		s := strSize(est, *target)
		from := strSize(est, args[0])
		to := strSize(est, args[1])
		result := checker.SizeEstimate{Min: 0, Max: satMul(s.Max, max(to.Max, 1))}
		c := s.MultiplyByCostFactor(traversalFactor).Multiply(from.MultiplyByCostFactor(traversalFactor)).
			Add(result.MultiplyByCostFactor(traversalFactor))
		return &checker.CallEstimate{CostEstimate: c, ResultSize: &result}
	}
	split := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if target == nil || len(args) == 0 {
			return nil
		}
		s := strSize(est, *target)
		sep := strSize(est, args[0])
		result := checker.SizeEstimate{Min: 0, Max: satAdd(s.Max, 1)}
		c := s.MultiplyByCostFactor(traversalFactor).Multiply(sep.MultiplyByCostFactor(traversalFactor)).
			Add(result.MultiplyByCostFactor(1))
		return &checker.CallEstimate{CostEstimate: c, ResultSize: &result}
	}
	join := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if target == nil {
			return nil
		}
		n := sizeOf(*target)
		elem := elemStringSize(est, *target)
		total := checker.SizeEstimate{Min: 0, Max: satMul(n.Max, elem.Max)}
		return &checker.CallEstimate{CostEstimate: total.MultiplyByCostFactor(traversalFactor).Add(checker.FixedCostEstimate(1)), ResultSize: &total}
	}
	containsAnyCost := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if len(args) != 2 {
			return nil
		}
		s := strSize(est, args[0])
		needles := listStringTotal(est, args[1])
		lowerCost := s.MultiplyByCostFactor(traversalFactor).Add(needles.MultiplyByCostFactor(traversalFactor))
		scan := s.MultiplyByCostFactor(traversalFactor).Multiply(needles.MultiplyByCostFactor(traversalFactor))
		return &checker.CallEstimate{CostEstimate: lowerCost.Add(scan).Add(checker.FixedCostEstimate(1))}
	}
	matchesAnyCost := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if len(args) != 2 {
			return nil
		}
		s := strSize(est, args[0]).Add(checker.FixedSizeEstimate(1)).MultiplyByCostFactor(traversalFactor)
		patterns := listStringTotal(est, args[1]).MultiplyByCostFactor(regexFactor)
		return &checker.CallEstimate{CostEstimate: s.Multiply(patterns).Add(checker.FixedCostEstimate(1))}
	}
	// The standard string functions, re-estimated so that a dyn operand counts as a string of
	// the assumed size instead of an unbounded one (formulas as in cel-go).
	containsCost := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if target == nil || len(args) != 1 {
			return nil
		}
		s := strSize(est, *target).MultiplyByCostFactor(traversalFactor)
		sub := strSize(est, args[0]).MultiplyByCostFactor(traversalFactor)
		return &checker.CallEstimate{CostEstimate: s.Multiply(sub)}
	}
	matchesCost := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		var str, re checker.AstNode
		switch {
		case target != nil && len(args) == 1:
			str, re = *target, args[0]
		case target == nil && len(args) == 2:
			str, re = args[0], args[1]
		default:
			return nil
		}
		s := strSize(est, str).Add(checker.FixedSizeEstimate(1)).MultiplyByCostFactor(traversalFactor)
		r := strSize(est, re).MultiplyByCostFactor(regexFactor)
		return &checker.CallEstimate{CostEstimate: s.Multiply(r)}
	}
	affixCost := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if len(args) != 1 {
			return nil
		}
		return &checker.CallEstimate{CostEstimate: strSize(est, args[0]).MultiplyByCostFactor(traversalFactor)}
	}
	concatCost := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if len(args) != 2 {
			return nil
		}
		size := strSize(est, args[0]).Add(strSize(est, args[1]))
		return &checker.CallEstimate{CostEstimate: size.MultiplyByCostFactor(traversalFactor), ResultSize: &size}
	}
	// equality: O(min(n, m)) in the sizes of its operands, as cel-go counts it, but an operand
	// of unknown size (a dyn value: run.meta.x, untyped args) counts as the assumed string size
	// for the lenient estimate, where cel-go's own would call the comparison of two of them
	// (args.from == run.meta.?home.orValue('')) unbounded.
	equality := func(est checker.CostEstimator, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
		if len(args) != 2 {
			return nil
		}
		l, r := strSize(est, args[0]), strSize(est, args[1])
		smallest := min(l.Max, r.Max)
		var lo uint64
		if smallest > 0 {
			lo = 1
		}
		return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: lo, Max: smallest}.MultiplyByCostFactor(traversalFactor)}
	}
	opts := []checker.CostOption{
		checker.OverloadCostEstimate(overloads.Equals, equality),
		checker.OverloadCostEstimate(overloads.NotEquals, equality),
		checker.OverloadCostEstimate(overloads.ContainsString, containsCost),
		checker.OverloadCostEstimate(overloads.MatchesString, matchesCost),
		checker.OverloadCostEstimate(overloads.Matches, matchesCost),
		checker.OverloadCostEstimate(overloads.StartsWithString, affixCost),
		checker.OverloadCostEstimate(overloads.EndsWithString, affixCost),
		checker.OverloadCostEstimate(overloads.AddString, concatCost),
		checker.OverloadCostEstimate(overloadURLHost, linear),
		checker.OverloadCostEstimate(overloadURLPath, linear),
		checker.OverloadCostEstimate(overloadLower, linear),
		checker.OverloadCostEstimate(overloadPathClean, linear),
		checker.OverloadCostEstimate(overloadContainsAny, containsAnyCost),
		checker.OverloadCostEstimate(overloadMatchesAny, matchesAnyCost),
	}
	for _, id := range linearStringOverloads {
		opts = append(opts, checker.OverloadCostEstimate(id, linear))
	}
	for _, id := range searchStringOverloads {
		opts = append(opts, checker.OverloadCostEstimate(id, search))
	}
	opts = append(opts,
		checker.OverloadCostEstimate("string_replace_string_string", replace),
		checker.OverloadCostEstimate("string_replace_string_string_int", replace),
		checker.OverloadCostEstimate("string_split_string", split),
		checker.OverloadCostEstimate("string_split_string_int", split),
		checker.OverloadCostEstimate("list_join", join),
		checker.OverloadCostEstimate("list_join_string", join),
	)
	return opts
}

// sizeOf is the size estimate of a node: computed from the expression or the estimator, else
// unknown.
func sizeOf(n checker.AstNode) checker.SizeEstimate {
	if s := n.ComputedSize(); s != nil {
		return *s
	}
	return checker.UnknownSizeEstimate()
}

// strSize is the size estimate of a string operand. An operand of unknown size (a dyn value, a
// computed string) counts as the assumed string size for the lenient estimator; the strict one
// keeps it unknown.
func strSize(est checker.CostEstimator, n checker.AstNode) checker.SizeEstimate {
	if s := n.ComputedSize(); s != nil {
		return *s
	}
	if ce, ok := est.(*costEstimator); ok && !ce.strict {
		return *assumedString
	}
	return checker.UnknownSizeEstimate()
}

// listStringTotal estimates the summed length of the strings of a list argument: exact for a
// list literal of string constants, else count times the assumed element size.
func listStringTotal(est checker.CostEstimator, n checker.AstNode) checker.SizeEstimate {
	if lits, ok := constStringList(n.Expr()); ok {
		var total uint64
		for _, s := range lits {
			total += uint64(utf8.RuneCountInString(s))
		}
		return checker.FixedSizeEstimate(total)
	}
	count := sizeOf(n)
	elem := elemStringSize(est, n)
	return checker.SizeEstimate{Min: 0, Max: satMul(count.Max, elem.Max)}
}

// elemStringSize is the size of the string elements of a list node: the estimator's answer for
// the element path, else the assumed string size (unknown for the strict estimator).
func elemStringSize(est checker.CostEstimator, n checker.AstNode) checker.SizeEstimate {
	if ce, ok := est.(*costEstimator); ok {
		if path := n.Path(); len(path) > 0 {
			if s := ce.sizeOfPath(append(path[:len(path):len(path)], "@items")); s != nil {
				return *s
			}
		}
		if !ce.strict {
			return *assumedString
		}
	}
	return checker.UnknownSizeEstimate()
}

// constStringList returns the elements of a list literal made only of string constants.
func constStringList(e ast.Expr) ([]string, bool) {
	if e == nil || e.Kind() != ast.ListKind {
		return nil, false
	}
	elems := e.AsList().Elements()
	out := make([]string, 0, len(elems))
	for _, el := range elems {
		if el.Kind() != ast.LiteralKind {
			return nil, false
		}
		s, ok := el.AsLiteral().(types.String)
		if !ok {
			return nil, false
		}
		out = append(out, string(s))
	}
	return out, true
}

func satMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// runtimeCostOptions registers the actual cost of the same functions for the runtime tracker.
func runtimeCostOptions() []interpreter.CostTrackerOption {
	size := func(v ref.Val) uint64 {
		if s, ok := v.(traits.Sizer); ok {
			if n, ok := s.Size().(types.Int); ok && n > 0 {
				return uint64(n)
			}
		}
		return 0
	}
	ceil := func(f float64) *uint64 {
		c := uint64(math.Ceil(f))
		return &c
	}
	linear := func(args []ref.Val, _ ref.Val) *uint64 {
		if len(args) == 0 {
			return nil
		}
		return ceil(1 + float64(size(args[0]))*traversalFactor)
	}
	search := func(args []ref.Val, _ ref.Val) *uint64 {
		if len(args) < 2 {
			return nil
		}
		return ceil(1 + float64(size(args[0]))*traversalFactor*float64(size(args[1]))*traversalFactor)
	}
	listTotal := func(v ref.Val) float64 {
		l, ok := v.(traits.Lister)
		if !ok {
			return 0
		}
		var total float64
		it := l.Iterator()
		for it.HasNext() == types.True {
			total += float64(size(it.Next()))
		}
		return total
	}
	containsAnyCost := func(args []ref.Val, _ ref.Val) *uint64 {
		if len(args) != 2 {
			return nil
		}
		s, n := float64(size(args[0])), listTotal(args[1])
		return ceil(1 + (s+n)*traversalFactor + s*traversalFactor*n*traversalFactor)
	}
	matchesAnyCost := func(args []ref.Val, _ ref.Val) *uint64 {
		if len(args) != 2 {
			return nil
		}
		s, n := float64(size(args[0])+1), listTotal(args[1])
		return ceil(1 + s*traversalFactor*n*regexFactor)
	}
	replace := func(args []ref.Val, result ref.Val) *uint64 {
		if len(args) < 3 {
			return nil
		}
		return ceil(float64(size(args[0]))*traversalFactor*float64(size(args[1]))*traversalFactor +
			float64(size(result))*traversalFactor)
	}
	split := func(args []ref.Val, result ref.Val) *uint64 {
		if len(args) < 2 {
			return nil
		}
		return ceil(float64(size(args[0]))*traversalFactor*float64(size(args[1]))*traversalFactor +
			float64(size(result)))
	}
	join := func(args []ref.Val, result ref.Val) *uint64 {
		return ceil(1 + float64(size(result))*traversalFactor)
	}
	opts := []interpreter.CostTrackerOption{
		interpreter.OverloadCostTracker(overloadURLHost, linear),
		interpreter.OverloadCostTracker(overloadURLPath, linear),
		interpreter.OverloadCostTracker(overloadLower, linear),
		interpreter.OverloadCostTracker(overloadPathClean, linear),
		interpreter.OverloadCostTracker(overloadContainsAny, containsAnyCost),
		interpreter.OverloadCostTracker(overloadMatchesAny, matchesAnyCost),
		interpreter.OverloadCostTracker("string_replace_string_string", replace),
		interpreter.OverloadCostTracker("string_replace_string_string_int", replace),
		interpreter.OverloadCostTracker("string_split_string", split),
		interpreter.OverloadCostTracker("string_split_string_int", split),
		interpreter.OverloadCostTracker("list_join", join),
		interpreter.OverloadCostTracker("list_join_string", join),
	}
	for _, id := range linearStringOverloads {
		opts = append(opts, interpreter.OverloadCostTracker(id, linear))
	}
	for _, id := range searchStringOverloads {
		opts = append(opts, interpreter.OverloadCostTracker(id, search))
	}
	return opts
}

// validateRegexes reports the first pattern of a constant list that is not valid RE2.
func validateRegexes(patterns []string) (string, error) {
	for _, p := range patterns {
		if _, err := regexp.Compile(p); err != nil {
			return p, err
		}
	}
	return "", nil
}

var _ = fmt.Sprintf
