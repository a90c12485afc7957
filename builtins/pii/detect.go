package pii

import (
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"
)

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
func isAlpha(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }
func isAlnum(b byte) bool { return isDigit(b) || isAlpha(b) }
func isWord(b byte) bool  { return isAlnum(b) || b == '_' }
func isHex(b byte) bool   { return isDigit(b) || ((b|0x20) >= 'a' && (b|0x20) <= 'f') }

// leftOK reports whether an item may start at i: it must not continue a word, nor a dotted,
// dashed or slashed token ("v1.2.3.4", "ORD-4111...", "id/123").
func leftOK(text string, i int) bool {
	if i == 0 {
		return true
	}
	p := text[i-1]
	if isWord(p) {
		return false
	}
	if (p == '.' || p == '-' || p == '/') && i >= 2 && isAlnum(text[i-2]) {
		return false
	}
	return true
}

// rightOK reports whether an item may end at j (exclusive): the same rule, mirrored, so that
// "1.2.3.4.5", "555-123-4567-89" and "4111...1111.5" are not cut short into a match.
func rightOK(text string, j int) bool {
	if j >= len(text) {
		return true
	}
	n := text[j]
	if isWord(n) {
		return false
	}
	if (n == '.' || n == '-' || n == '/') && j+1 < len(text) && isAlnum(text[j+1]) {
		return false
	}
	return true
}

// digitsAt reports whether text has exactly n digits at i (more digits may follow; callers
// check the byte after).
func digitsAt(text string, i, n int) bool {
	if i+n > len(text) {
		return false
	}
	for k := i; k < i+n; k++ {
		if !isDigit(text[k]) {
			return false
		}
	}
	return true
}

// --- email ---

// Addresses are scanned by rune: internationalized local parts and domain labels (RFC 6531,
// IDN) may hold letters, marks and digits beyond ASCII.

func isLocalChar(b byte) bool {
	return isAlnum(b) || b == '.' || b == '_' || b == '%' || b == '+' || b == '-'
}

func isDomainChar(b byte) bool { return isAlnum(b) || b == '.' || b == '-' }

// isIntlWordRune reports whether a non-ASCII rune may appear in an internationalized address.
func isIntlWordRune(r rune) bool {
	return r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r))
}

// emailLocalStart returns where the local part ending at k begins.
func emailLocalStart(text string, k int) int {
	s := k
	for s > 0 {
		if b := text[s-1]; b < utf8.RuneSelf {
			if !isLocalChar(b) {
				break
			}
			s--
			continue
		}
		r, size := utf8.DecodeLastRuneInString(text[:s])
		if !isIntlWordRune(r) {
			break
		}
		s -= size
	}
	return s
}

// emailDomainEnd returns where the domain starting at i ends.
func emailDomainEnd(text string, i int) int {
	e := i
	for e < len(text) {
		if b := text[e]; b < utf8.RuneSelf {
			if !isDomainChar(b) {
				break
			}
			e++
			continue
		}
		r, size := utf8.DecodeRuneInString(text[e:])
		if !isIntlWordRune(r) {
			break
		}
		e += size
	}
	return e
}

func findEmails(text string, add func(Kind, int, int)) {
	from := 0
	for {
		at := strings.IndexByte(text[from:], '@')
		if at < 0 {
			return
		}
		k := from + at
		from = k + 1
		s := emailLocalStart(text, k)
		for s < k && text[s] == '.' {
			s++
		}
		if s == k || k-s > 64 || text[k-1] == '.' {
			continue
		}
		e := emailDomainEnd(text, k+1)
		for e > k+1 && (text[e-1] == '.' || text[e-1] == '-') {
			e--
		}
		if !validEmailDomain(text[k+1 : e]) {
			continue
		}
		add(KindEmail, s, e)
		from = e
	}
}

func validEmailDomain(d string) bool {
	if len(d) < 4 || len(d) > 253 {
		return false
	}
	dots := 0
	for rest := d; ; {
		l, tail, more := strings.Cut(rest, ".")
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		if !more {
			break
		}
		dots++
		rest = tail
	}
	if dots == 0 {
		return false
	}
	tld := d[strings.LastIndexByte(d, '.')+1:]
	if utf8.RuneCountInString(tld) < 2 {
		return false
	}
	for _, r := range tld {
		if (r < utf8.RuneSelf && !isAlpha(byte(r))) || (r >= utf8.RuneSelf && !unicode.IsLetter(r) && !unicode.IsMark(r)) {
			return false
		}
	}
	return true
}

// --- US social security numbers: AAA-GG-SSSS (dashes or spaces) ---

func findSSNs(text string, add func(Kind, int, int)) {
	for i := 0; i+11 <= len(text); i++ {
		if !isDigit(text[i]) || (i > 0 && isDigit(text[i-1])) {
			continue
		}
		sep := text[i+3]
		if (sep != '-' && sep != ' ') || text[i+6] != sep ||
			!digitsAt(text, i, 3) || !digitsAt(text, i+4, 2) || !digitsAt(text, i+7, 4) {
			continue
		}
		if !leftOK(text, i) || !rightOK(text, i+11) {
			continue
		}
		area, group, serial := text[i:i+3], text[i+4:i+6], text[i+7:i+11]
		if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
			continue
		}
		add(KindSSN, i, i+11)
		i += 10
	}
}

// --- payment cards ---

// digitGroup is one run of digits inside a candidate card number.
type digitGroup struct{ start, end int }

func findCards(text string, add func(Kind, int, int)) {
	var buf [maxCardGroups]digitGroup
	for i := 0; i < len(text); i++ {
		if !isDigit(text[i]) || (i > 0 && isDigit(text[i-1])) {
			continue
		}
		groups, next := cardGroups(buf[:0], text, i)
		if s, e, ok := bestCardWindow(text, groups); ok {
			add(KindCard, s, e)
		}
		i = next - 1
	}
}

// maxCardGroups bounds the digit runs examined as one candidate.
const maxCardGroups = 12

// cardGroups appends to groups the digit runs starting at i that are joined by one repeated
// separator (a space or a dash), and returns them with the offset just past the last one.
func cardGroups(groups []digitGroup, text string, i int) ([]digitGroup, int) {
	var sep byte
	j := i
	for {
		s := j
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		groups = append(groups, digitGroup{s, j})
		if j+1 >= len(text) || !isDigit(text[j+1]) || len(groups) == maxCardGroups {
			return groups, j
		}
		c := text[j]
		if c != ' ' && c != '-' {
			return groups, j
		}
		if sep == 0 {
			sep = c
		} else if c != sep {
			return groups, j
		}
		j++
	}
}

// bestCardWindow finds the earliest, then longest, run of whole groups that reads as a card.
func bestCardWindow(text string, groups []digitGroup) (int, int, bool) {
	for a := range groups {
		if a == 0 && !leftOK(text, groups[a].start) {
			continue
		}
		best := -1
		n := 0
		for b := a; b < len(groups); b++ {
			n += groups[b].end - groups[b].start
			if n > 19 {
				break
			}
			if n >= 13 && (b+1 < len(groups) || rightOK(text, groups[b].end)) && isCard(text[groups[a].start:groups[b].end]) {
				best = b
			}
		}
		if best >= 0 {
			return groups[a].start, groups[best].end, true
		}
	}
	return 0, 0, false
}

// isCard reports whether s (digits with separators) starts like a payment card (major
// industry identifier 2 to 6) and passes the Luhn check.
func isCard(s string) bool {
	var digits [19]byte
	n := 0
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			if n == len(digits) {
				return false
			}
			digits[n] = s[i] - '0'
			n++
		}
	}
	if n < 13 || digits[0] < 2 || digits[0] > 6 {
		return false
	}
	return luhn(digits[:n])
}

// luhn reports whether the digits pass the Luhn checksum.
func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i])
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// --- phones ---

func findPhones(text string, add func(Kind, int, int)) {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '+' && c != '(' && !isDigit(c) {
			continue
		}
		if i > 0 && (isDigit(text[i-1]) || text[i-1] == '+') {
			continue
		}
		if !leftOK(text, i) {
			continue
		}
		end := 0
		if c == '+' {
			end = internationalPhone(text, i)
		}
		if e := northAmericanPhone(text, i); e > end {
			end = e
		}
		if end > 0 {
			add(KindPhone, i, end)
			i = end - 1
		}
	}
}

// internationalPhone matches "+" and 8 to 15 digits in groups joined by single spaces, dashes
// or dots, with at most one parenthesized group; it returns the end offset or 0.
func internationalPhone(text string, i int) int {
	j := i + 1
	if j >= len(text) || !isDigit(text[j]) {
		return 0
	}
	digits, end, dots := 0, 0, 0
	inParen, usedParen, afterSep := false, false, false
	for j < len(text) {
		c := text[j]
		switch {
		case isDigit(c):
			digits++
			end = j + 1
			afterSep = false
		case (c == ' ' || c == '-' || c == '.') && !afterSep && j+1 < len(text) && (isDigit(text[j+1]) || text[j+1] == '('):
			if c == '.' {
				dots++
			}
			afterSep = true
		case c == '(' && !usedParen && j+1 < len(text) && isDigit(text[j+1]):
			inParen, usedParen, afterSep = true, true, true
		case c == ')' && inParen && isDigit(text[j-1]):
			inParen = false
			end = j + 1
			afterSep = false
		default:
			j = len(text)
			continue
		}
		if digits > 15 {
			return 0
		}
		j++
	}
	if digits < 8 || dots == 1 {
		return 0
	}
	return phoneEnd(text, end)
}

// northAmericanPhone matches formatted NANP numbers: an optional "+1" or "1" country code,
// then "(AAA) EEE-LLLL", "AAA-EEE-LLLL", "AAA.EEE.LLLL" or "AAA EEE LLLL", and an optional
// extension. The area code must not start with 0 or 1; the exchange may start with any digit
// (555-123-4567 is written as a phone number). Unformatted digit runs are left alone (they are
// as likely to be ids). It returns the end offset or 0.
func northAmericanPhone(text string, i int) int {
	j := i
	if strings.HasPrefix(text[j:], "+1") {
		j += 2
		if j < len(text) && isPhoneSep(text[j]) {
			j++
		}
	} else if strings.HasPrefix(text[j:], "1") && j+1 < len(text) && isPhoneSep(text[j+1]) {
		j += 2
	}
	var area byte
	switch {
	case j < len(text) && text[j] == '(':
		if !digitsAt(text, j+1, 3) || j+4 >= len(text) || text[j+4] != ')' {
			return 0
		}
		area = text[j+1]
		j += 5
		if j < len(text) && (text[j] == ' ' || text[j] == '-') {
			j++
		}
	case digitsAt(text, j, 3) && j+3 < len(text) && isPhoneSep(text[j+3]):
		area = text[j]
		j += 4
	default:
		return 0
	}
	if !digitsAt(text, j, 3) || j+3 >= len(text) || !isPhoneSep(text[j+3]) || !digitsAt(text, j+4, 4) {
		return 0
	}
	if area < '2' {
		return 0
	}
	return phoneEnd(text, j+8)
}

func isPhoneSep(b byte) bool { return b == ' ' || b == '-' || b == '.' }

// phoneEnd returns where a phone number whose digits end at end finishes: past an extension
// ("x123", " ext. 12") when one follows, else at end; 0 when the number runs on into a word
// or a longer token.
func phoneEnd(text string, end int) int {
	if e := extensionEnd(text, end); e > 0 && rightOK(text, e) {
		return e
	}
	if !rightOK(text, end) {
		return 0
	}
	return end
}

// maxExtensionDigits bounds the digits of a phone extension.
const maxExtensionDigits = 6

// extensionEnd matches an extension at i: an optional space, "x", "ext" or "extension" (any
// case; "ext" may take a dot), an optional space and 1 to 6 digits. It returns the end offset
// or 0.
func extensionEnd(text string, i int) int {
	j := i
	if j < len(text) && text[j] == ' ' {
		j++
	}
	switch rest := text[j:]; {
	case len(rest) >= 9 && strings.EqualFold(rest[:9], "extension"):
		j += 9
	case len(rest) >= 3 && strings.EqualFold(rest[:3], "ext"):
		j += 3
		if j < len(text) && text[j] == '.' {
			j++
		}
	case len(rest) >= 1 && (rest[0] == 'x' || rest[0] == 'X'):
		j++
	default:
		return 0
	}
	if j < len(text) && text[j] == ' ' {
		j++
	}
	s := j
	for j < len(text) && isDigit(text[j]) && j-s < maxExtensionDigits {
		j++
	}
	if j == s {
		return 0
	}
	return j
}

// --- IP addresses ---

func findIPv4s(text string, add func(Kind, int, int)) {
	for i := 0; i+7 <= len(text); i++ {
		if !isDigit(text[i]) || (i > 0 && (isDigit(text[i-1]) || text[i-1] == '.')) {
			continue
		}
		end, ok := dottedQuad(text, i)
		if !ok {
			continue
		}
		if e := cidrEnd(text, end); e > 0 && rightOK(text, e) {
			end = e
		}
		if leftOK(text, i) && rightOK(text, end) {
			add(KindIPv4, i, end)
		}
		i = end - 1
	}
}

// cidrEnd matches a CIDR prefix length at i ("/0" to "/32", no leading zero) and returns the
// end offset, or 0.
func cidrEnd(text string, i int) int {
	if i >= len(text) || text[i] != '/' || !digitsAt(text, i+1, 1) {
		return 0
	}
	j := i + 1
	v := 0
	for j < len(text) && isDigit(text[j]) && j-i <= 2 {
		v = v*10 + int(text[j]-'0')
		j++
	}
	if v > 32 || (j-i == 3 && text[i+1] == '0') {
		return 0
	}
	return j
}

// dottedQuad parses four decimal octets (0-255, no leading zeros) at i.
func dottedQuad(text string, i int) (int, bool) {
	j := i
	for part := 0; part < 4; part++ {
		if part > 0 {
			if j >= len(text) || text[j] != '.' {
				return j, false
			}
			j++
		}
		s := j
		v := 0
		for j < len(text) && isDigit(text[j]) && j-s < 4 {
			v = v*10 + int(text[j]-'0')
			j++
		}
		n := j - s
		if n == 0 || n > 3 || v > 255 || (n > 1 && text[s] == '0') {
			return j, false
		}
	}
	return j, true
}

func findIPv6s(text string, add func(Kind, int, int)) {
	from := 0
	for {
		c := strings.IndexByte(text[from:], ':')
		if c < 0 {
			return
		}
		k := from + c
		s := k
		for s > 0 && (isHex(text[s-1]) || text[s-1] == ':') {
			s--
		}
		e := k
		for e < len(text) && (isHex(text[e]) || text[e] == ':' || text[e] == '.') {
			e++
		}
		from = e
		for e > s && text[e-1] == '.' {
			e--
		}
		if e-s >= 2 && text[e-1] == ':' && text[e-2] != ':' {
			e--
		}
		if e-s >= 2 && text[s] == ':' && text[s+1] != ':' {
			s++
		}
		if e <= s || !leftOK(text, s) || !rightOK(text, e) {
			continue
		}
		if looksLikeIPv6(text[s:e]) {
			add(KindIPv6, s, e)
		}
	}
}

// looksLikeIPv6 parses cand and refuses forms that are more often something else: "::",
// "::1"-style single groups and all-decimal short forms such as clock times.
func looksLikeIPv6(cand string) bool {
	if strings.Count(cand, ":") < 2 {
		return false
	}
	addr, err := netip.ParseAddr(cand)
	if err != nil || !addr.Is6() {
		return false
	}
	groups, longest := 0, 0
	hexLetter, dotted := false, strings.Contains(cand, ".")
	for rest := cand; rest != ""; {
		g, tail, _ := strings.Cut(rest, ":")
		rest = tail
		if g == "" {
			continue
		}
		groups++
		longest = max(longest, len(g))
		for k := 0; k < len(g); k++ {
			if isAlpha(g[k]) {
				hexLetter = true
			}
		}
	}
	switch {
	case groups < 2:
		return false
	case hexLetter, dotted, groups >= 4:
		return true
	default:
		return longest >= 3
	}
}
