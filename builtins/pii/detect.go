package pii

import (
	"fmt"
	"net/netip"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/nyaruka/phonenumbers"
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

// cardLeftOK is leftOK for a card number, which may also start after a slash that follows
// a letter: a URL path segment ("/u/4111111111111111/"). A slash after a digit still
// continues a token (a date, a ratio, a run of numbers).
func cardLeftOK(text string, i int) bool {
	return leftOK(text, i) || text[i-1] == '/' && isAlpha(text[i-2])
}

// cardRightOK is rightOK for a card number, which may also end before a slash or a dot that
// a letter follows: the end of a URL path segment ("/4111111111111111/a.png"), a file's
// extension ("4111111111111111.png"). A dot or a slash before a digit still continues a
// token (an amount, "4111111111111111.25"), and so does a dash before a letter (an id).
func cardRightOK(text string, j int) bool {
	return rightOK(text, j) || (text[j] == '/' || text[j] == '.') && isAlpha(text[j+1])
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
		if isDotRune(r) && s-size > 0 && isAlnum(text[s-size-1]) {
			s -= size // "jane\u2024doe": a dot to the eye, and to a mail client
			continue
		}
		if !isIntlWordRune(r) {
			break
		}
		s -= size
	}
	return s
}

// isDotRune reports whether r is a dot that Unicode's compatibility mapping reads as a full
// stop (NFKC): the one dot leader and the small full stop (the full-width one is folded
// already, foldText).
func isDotRune(r rune) bool { return r == '\u2024' || r == '\uFE52' }

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
		if isDotRune(r) && e > i && isAlnum(text[e-1]) && e+size < len(text) && isAlnum(text[e+size]) {
			e += size // "example\u2024com"
			continue
		}
		if !isIntlWordRune(r) {
			break
		}
		e += size
	}
	return e
}

// dotRunes writes the dots isDotRune takes as full stops.
var dotRunes = strings.NewReplacer("\u2024", ".", "\uFE52", ".")

func findEmails(text string, add func(Kind, int, int)) {
	from, last := 0, 0 // last: end of the previous address, where the next may start
	for {
		at := strings.IndexByte(text[from:], '@')
		if at < 0 {
			return
		}
		k := from + at
		from = k + 1
		s := max(emailLocalStart(text, k), last)
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
		if d := text[k+1 : e]; !validEmailDomain(d) && !validEmailDomain(dotRunes.Replace(d)) {
			continue
		}
		add(KindEmail, s, e)
		from, last = e, e
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
	if len(tld) > 4 && strings.EqualFold(tld[:4], "xn--") {
		// an internationalized top-level domain in its ASCII (punycode) form: "xn--p1ai"
		for k := 4; k < len(tld); k++ {
			if !isAlnum(tld[k]) && tld[k] != '-' {
				return false
			}
		}
		return true
	}
	for _, r := range tld {
		if (r < utf8.RuneSelf && !isAlpha(byte(r))) || (r >= utf8.RuneSelf && !unicode.IsLetter(r) && !unicode.IsMark(r)) {
			return false
		}
	}
	return true
}

// --- US social security numbers: AAA-GG-SSSS (dashes, spaces, dots or slashes; an
// underscore between digits reads as a dash), or AAAGGSSSS next to a context word ---

func findSSNs(text string, add func(Kind, int, int)) {
	for i := 0; i+9 <= len(text); i++ {
		if !isDigit(text[i]) || (i > 0 && isDigit(text[i-1])) {
			continue
		}
		end := ssnGroups(text, i)
		if end == 0 && digitsAt(text, i, 9) && (i+9 == len(text) || !isDigit(text[i+9])) && ssnContext(text, i) {
			end = i + 9
		}
		if end == 0 || !leftOK(text, i) || !rightOK(text, end) {
			continue
		}
		var buf [9]byte
		digits := buf[:0]
		for k := i; k < end; k++ {
			if isDigit(text[k]) {
				digits = append(digits, text[k])
			}
		}
		area, group, serial := string(digits[:3]), string(digits[3:5]), string(digits[5:])
		if area == "000" || area == "666" || area[0] == '9' || group == "00" || serial == "0000" {
			continue
		}
		add(KindSSN, i, end)
		i = end - 1
	}
}

// ssnGroups returns the end of a social security number written in its three groups at i,
// joined by one separator (ssnSep), or 0. A line may end after a separator, the number
// wrapping over lines (wrapEnd: "123-45-\n6789").
func ssnGroups(text string, i int) int {
	if !digitsAt(text, i, 3) {
		return 0
	}
	sep, spaced := ssnSep(text, i+3)
	if sep == "" {
		return 0
	}
	j := i + 3 + len(sep)
	if w := wrapEnd(text, j); w > 0 {
		j = w
	}
	if !digitsAt(text, j, 2) || !strings.HasPrefix(text[j+2:], sep) {
		return 0
	}
	if j += 2 + len(sep); wrapEnd(text, j) > 0 {
		j = wrapEnd(text, j)
	}
	if !digitsAt(text, j, 4) || spaced && !ssnContext(text, i) {
		return 0
	}
	return j + 4
}

// ssnSep returns the separator at j that may join the groups of a social security number:
// one byte isSSNSep takes, or a dash with a space either side ("123 - 45 - 6789"); "" if
// none. A slash with a space either side, and a dash or a slash with a space on one side only
// ("123 -45 -6789", "123 / 45 / 6789"), join them too, but are a sum, a ratio or a range as
// often: spaced is then true, and the number is read only after a word naming one
// (ssnContext).
func ssnSep(text string, j int) (sep string, spaced bool) {
	if j >= len(text) || !isSSNSep(text[j]) {
		return "", false
	}
	rest := text[j:]
	switch {
	case strings.HasPrefix(rest, " - "):
		return " - ", false
	case strings.HasPrefix(rest, " / "):
		return " / ", true
	case strings.HasPrefix(rest, " -"), strings.HasPrefix(rest, " /"),
		strings.HasPrefix(rest, "- "), strings.HasPrefix(rest, "/ "):
		return rest[:2], true
	}
	return rest[:1], false
}

// isSSNSep reports whether c may join the three groups of a social security number.
func isSSNSep(c byte) bool { return c == '-' || c == ' ' || c == '.' || c == '/' }

// contextWindow is how far before a candidate a context word may end.
const contextWindow = 32

// ssnWords name a social security number.
var ssnWords = []string{"ssn", "social security", "ss#", "ss no", "soc sec"}

// ssnContext reports whether a word naming a social security number ("SSN", "social
// security", "SS#") ends within contextWindow bytes before i.
func ssnContext(text string, i int) bool { return wordBefore(text, i, ssnWords, false) }

// wordBefore reports whether one of words (lower case) ends within contextWindow bytes
// before i, compared without regard to case, starting a word; whole asks it to end one too
// ("tel" but not "tell").
func wordBefore(text string, i int, words []string, whole bool) bool {
	before := strings.ToLower(text[max(0, i-contextWindow):i])
	for _, w := range words {
		for rest, off := before, 0; ; {
			k := strings.Index(rest, w)
			if k < 0 {
				break
			}
			at, end := off+k, off+k+len(w)
			if (at == 0 || !isAlpha(before[at-1])) && (!whole || end == len(before) || !isAlpha(before[end])) {
				return true
			}
			rest, off = before[end:], end
		}
	}
	return false
}

// --- payment cards ---

// digitGroup is one run of digits inside a candidate card number.
type digitGroup struct{ start, end int }

func (g digitGroup) len() int { return g.end - g.start }

func findCards(text string, add func(Kind, int, int)) {
	var buf [16]digitGroup
	alone, aloneSep := -1, ""
	again := -1 // the start of a colon run's last group, read again (below)
	for i := 0; i < len(text); i++ {
		if !isDigit(text[i]) || (i > 0 && isDigit(text[i-1])) {
			continue
		}
		var groups []digitGroup
		var sep string
		var next int
		if i <= alone {
			// a group of the run before, which the groups after it still hold
			// apart: it is a card's number alone or none (cardGroups)
			next = i
			for next < len(text) && isDigit(text[next]) {
				next++
			}
			groups, sep = append(buf[:0], digitGroup{i, next}), aloneSep
		} else {
			groups, sep, next, alone = cardGroups(buf[:0], text, i)
			aloneSep = sep
		}
		var windows []cardWindow
		if !hexDumpRun(text, groups) && (sep != ":" || colonRunAlone(text, groups)) {
			// joined as a table's columns are, with no word naming a card before them, the
			// groups are read one by one, each as a number alone is ("1001\t4111111111111111\t7")
			alone := columnSep(sep) && !wordBefore(text, groups[0].start, cardWords, false)
			windows = cardWindows(text, groups, sep, alone)
		}
		mixed := mixedCard(text, i)
		if i == again && len(groups) >= 2 && len(windows) == 0 && mixed == 0 {
			// The run from the group read again holds no card: the run after it is read as
			// it reads without it ("12:301 302 4111 11111111 1111" is a time, a number and a
			// card whose groups are of any length, which the run read from "301" is not:
			// stretchEdge). Cards it holds are taken as it reads them, the groups after the
			// group read again being those of a token of colons when it is one
			// ("235:5115054242528519:9102").
			i = groups[1].start - 1
			continue
		}
		lastTaken := false // a card found takes the run's last group
		for _, w := range windows {
			add(KindCard, groups[w.first].start, groups[w.last].end)
			lastTaken = lastTaken || w.last == len(groups)-1
		}
		if mixed > 0 {
			add(KindCard, i, mixed)
		}
		n := len(groups)
		end := groups[n-1].end
		otherSep := n >= 2 && end < len(text) && isCardSep(text[end])
		if otherSep && strings.IndexByte(" -.", text[end]) >= 0 {
			// A card copied out of a form's fields may start at any of the run's last
			// groups, the run ending where its separator changes ("12 4111 1111-1111
			// 1111"): mixedCard reads on past it. It holds five groups at most.
			for k := max(1, n-5); k < n; k++ {
				if !inWindow(windows, k) {
					if m := mixedCard(text, groups[k].start); m > 0 {
						add(KindCard, groups[k].start, m)
						break
					}
				}
			}
		}
		if (sep == ":" || otherSep) && n >= 2 && !lastTaken {
			// The last group of a run that is no card is read again as the start of a run
			// of its own where another separator follows it, or where the run is joined by
			// colons: a number before the card, a label's or a time's ("room 1 ", "1:",
			// "12:30:"), does not hide it ("room 1 4111-1111-1111-1111", "1
			// 4111.1111.1111.1111", "1:4111111111111111", "12:30:4111 1111 1111 1111"), as
			// a word's does not ("id:4111111111111111"). The groups before it are followed
			// by the run's separator, and read from there are the same run.
			next, again = groups[n-1].start, groups[n-1].start
		}
		i = next - 1
	}
}

// mixedCard returns the end of a card number starting at i whose groups are joined by
// single spaces, dashes and dots of more than one kind, as a number copied out of a form's
// fields is ("4111 1111-1111 1111", "4111-1111 1111.1111"), or by single spaces and gaps of
// up to maxCardGap spaces, as one typed with a slip or with a zero-width character between
// two spaces is ("4111  1111 1111 1111"; a gap of spaces with dashes or dots alone is two
// columns: "4111-1111  1111-1111"), a line break standing for one where the number wraps,
// or 0. Joined so, the groups are read as a card only when they are
// laid out as a card is printed, strictly (cardPrinted): a run mixing separators in another
// layout is a date and a time, a version, an id. The longest such number wins.
func mixedCard(text string, i int) int {
	if !cardLeftOK(text, i) {
		return 0
	}
	var groups [8]digitGroup
	n, digits, end, last := 0, 0, 0, 0
	var kinds [4]bool // a single space, a dash, a dot, a gap of spaces met
	for j := i; n < len(groups); {
		s := j
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		groups[n], n = digitGroup{s, j}, n+1
		if digits += j - s; digits > maxCardDigits {
			break
		}
		mixed := kinds[0] && (kinds[1] || kinds[2] || kinds[3]) || kinds[1] && kinds[2]
		if mixed && digits >= minCardDigits && cardPrinted(groups[:n]) && cardRightOK(text, j) && isCard(text[i:j]) {
			end, last = j, n
		}
		k := strings.IndexByte(" -.", text[min(j, len(text)-1)])
		if w := wrapEnd(text, j); w > 0 {
			j = w
		} else if j < len(text) && k == 0 {
			// a single space, or a wider gap of spaces (a typing slip: "4111  1111 1111 1111")
			g := j + 1
			for g < len(text) && text[g] == ' ' && g-j < maxCardGap {
				g++
			}
			kinds[min(g-j-1, 1)*3] = true
			j = g
		} else if j < len(text) && k >= 0 {
			kinds[k] = true
			if j++; k > 0 {
				if w := wrapEnd(text, j); w > 0 {
					j = w // the line ends in a dash or a dot
				}
			}
		} else {
			break
		}
		if j >= len(text) || !isDigit(text[j]) {
			break
		}
	}
	if end > 0 && hexDumpRun(text, groups[:last]) {
		return 0
	}
	return end
}

// cardPrinted reports whether groups of these lengths are a card number as the networks print
// it: groups of four, the last of three to five (4-4-4-4, 4-4-5, 4-4-4-4-3), or 4-6-5 and 4-6-4
// (American Express, Diners Club).
func cardPrinted(groups []digitGroup) bool {
	n := len(groups)
	switch {
	case n < 3:
		return false
	case n == 3 && groups[0].len() == 4 && groups[1].len() == 6:
		return groups[2].len() == 5 || groups[2].len() == 4
	}
	for _, g := range groups[:n-1] {
		if g.len() != 4 {
			return false
		}
	}
	return groups[n-1].len() >= 3 && groups[n-1].len() <= 5
}

// maxCardDigits and minCardDigits bound the length of a card number (ISO/IEC 7812).
const (
	minCardDigits = 12
	maxCardDigits = 19
)

// maxCardGap bounds the spaces or tabs repeated between two groups of a card number.
const maxCardGap = 4

// cardGroups appends to groups the digit runs starting at i that are joined by one repeated
// separator, and returns them with that separator and the offset just past the last one. The
// separator is a space, a dash, a dot, a slash, a colon or a tab (an underscore between
// digits reads as a dash), and spaces or tabs may be repeated, up to maxCardGap: "4111  1111
// 1111  1111" and "4111\t1111\t1111\t1111" are cards; it is the same throughout, so the
// groups of a run joined otherwise ("4111-1111 1111-1111", "4111  1111 1111  1111") are not
// read as one number here (mixedCard reads them when laid out as a card is printed). A line break ("\n" or "\r\n") may stand for the separator, as where a
// card written in groups wraps over lines ("4111 1111\n1111 1111"), the line ending in spaces
// or in the separator (but a colon, which ends a token of colons there) and the next indented (wrapEnd: "4111-1111-\n  1111-1111"); groups joined by line
// breaks alone are a column of numbers, not a card, so a run with no separator ends at its
// first line break. Its lines are read on for a separator as far as a card's digits go, not
// to the column's end: the next call starts at the next line, and a column read to its end
// from each line would cost the square of its length. A run joined by dots or slashes not
// laid out as a card is printed is cut to its first group; alone is then the start of its
// last group of another length than a printed group's, which every run starting at a group
// up to it holds, and which cuts it so too: findCards reads those groups alone rather than
// reading the run again from each (-1 otherwise, and where a line break joins the run).
func cardGroups(groups []digitGroup, text string, i int) (_ []digitGroup, _ string, next, alone int) {
	sep := ""
	wrap := 0 // the groups before the first line break, while no separator is known
	digits := 0
	j := i
	alone, broken, misfit := -1, false, false
	for {
		s := j
		for j < len(text) && isDigit(text[j]) {
			j++
		}
		groups = append(groups, digitGroup{s, j})
		if j-s < 3 || j-s > 7 {
			alone, misfit = s, true // not of a printed group's length (printedLayout)
		}
		if misfit && broken && (sep == "." || sep == "/") {
			// the run is cut below to its groups up to the last line break before its first
			// misfit, and read again from the next: the groups after it are not looked at,
			// and read on to the end of a column ("1.\n1.\n...") from each line, they would
			// cost the square of its length
			break
		}
		if digits += j - s; sep == "" && wrap > 0 && digits > maxCardDigits {
			break
		}
		if w := wrapEnd(text, j); w > 0 {
			if sep == "" && wrap == 0 {
				wrap = len(groups)
			}
			j, broken = w, true
			continue
		}
		if j >= len(text) || !isCardSep(text[j]) {
			break
		}
		if w := wrapEnd(text, j+1); w > 0 && text[j] != ' ' && text[j] != '\t' && text[j] != ':' {
			// the line ends in the separator ("4111-1111-\n1111-1111"); a colon and a line
			// break end a token of colons (colonRunAlone), and groups joined by colons are
			// read as a card on one line only (cardLayout)
			if sep == "" {
				sep = text[j : j+1]
			} else if text[j:j+1] != sep {
				break
			}
			j, broken = w, true
			continue
		}
		k := j + 1
		for c := text[j]; (c == ' ' || c == '\t') && k < len(text) && text[k] == c && k-j < maxCardGap; k++ {
		}
		if k >= len(text) || !isDigit(text[k]) {
			break
		}
		if sep == "" {
			sep = text[j:k]
		} else if text[j:k] != sep {
			break
		}
		j = k
	}
	if sep == "" && wrap > 0 {
		groups = groups[:wrap]
	}
	if (sep == "." || sep == "/") && !printedLayout(groups) {
		// a dot or a slash joins the groups of a card written in groups, not a card to
		// something else: "4111111111111111.25" is an amount. Over lines, the groups up
		// to the last line break before the first misfit are read on their own
		// ("2221.5165.2843.3745\n2": a card, and a number on the next line).
		cut, misfit := 1, len(groups)
		for k, g := range groups {
			if g.len() < 3 || g.len() > 7 {
				misfit = k
				break
			}
		}
		for k := min(misfit, len(groups)-1); broken && k > 1; k-- {
			if gapBreak(text, groups[k-1], groups[k]) {
				cut = k
				break
			}
		}
		groups = groups[:cut]
		if !broken {
			// a run starting at a later group up to the last of alone holds it too
			return groups, sep, groups[0].end, alone
		}
	}
	return groups, sep, groups[len(groups)-1].end, -1
}

// columnSep reports whether sep, joining the groups of a run, is one that sets out the
// columns of a table as well: a tab, a colon or several spaces. Joined so, the groups are
// read as a card only after a word naming one (cardWords): a row of a table of four-digit
// figures is laid out as a card's groups are, and one in ten passes the Luhn check.
func columnSep(sep string) bool { return sep == ":" || len(sep) > 1 || sep == "\t" }

// cardWords name a payment card.
var cardWords = []string{"card", "visa", "mastercard", "amex", "credit", "debit", "cc", "number"}

// isCardSep reports whether c may join the digit groups of a card number.
func isCardSep(c byte) bool {
	return c == ' ' || c == '-' || c == '.' || c == '/' || c == ':' || c == '\t'
}

// colonRunAlone reports whether a run of digit groups joined by colons stands alone, not
// inside a longer token of colons, hex groups and words (a colon and a space or a line break
// after it end it): "2001:db8:4111:1111:1111:1111::1"
// is an IPv6 address, "ORD-4111:1111:..." an id.
func colonRunAlone(text string, groups []digitGroup) bool {
	s, e := groups[0].start, groups[len(groups)-1].end
	if s > 0 {
		if p := text[s-1]; p == ':' || isWord(p) || ((p == '-' || p == '.' || p == '/') && s >= 2 && isAlnum(text[s-2])) {
			return false
		}
	}
	// a colon that ends a label or a sentence ("...:776: ok") continues no token
	return e == len(text) || (text[e] != ':' && rightOK(text, e)) ||
		text[e] == ':' && (e+1 == len(text) || text[e+1] == ' ' || lineBreak(text, e+1) > 0)
}

// wrapEnd returns the offset past a line break at j where the groups of a card wrap over
// lines, with the spaces or tabs its line may end in and the indent of the next, up to
// maxCardGap each ("4111 1111 \n  1111 1111"), when a digit follows it; 0 otherwise.
func wrapEnd(text string, j int) int { return wrapTo(text, j, false) }

// wrapTo is wrapEnd, letters asking for a letter or a digit after the line break rather than
// a digit (an IBAN's groups: findIBANs).
func wrapTo(text string, j int, letters bool) int {
	k := j
	for k < len(text) && k-j < maxCardGap && (text[k] == ' ' || text[k] == '\t') {
		k++
	}
	n := lineBreak(text, k)
	if n == 0 {
		return 0
	}
	k += n
	for e := k; k < len(text) && k-e < maxCardGap && (text[k] == ' ' || text[k] == '\t'); k++ {
	}
	if k < len(text) && (isDigit(text[k]) || letters && isAlpha(text[k])) {
		return k
	}
	return 0
}

// gapBreak reports whether a line break stands between two groups of a run.
func gapBreak(text string, a, b digitGroup) bool {
	return strings.IndexByte(text[a.end:b.start], '\n') >= 0
}

// lineBreak returns the length of the line break at text[j] ("\n" or "\r\n"), or 0.
func lineBreak(text string, j int) int {
	switch {
	case j < len(text) && text[j] == '\n':
		return 1
	case j+1 < len(text) && text[j] == '\r' && text[j+1] == '\n':
		return 2
	}
	return 0
}

// cardWindow is a run of whole groups, first to last inclusive, that reads as a card.
type cardWindow struct{ first, last int }

// cardWindows splits a run of digit groups into the card numbers it holds. Several cards may
// follow one another in one run ("4111111111111111 5555555555554444"), so the run is
// segmented to hold as many cards as possible; among segmentations holding as many, the one
// whose cards span the fewest line breaks, then whose cards more often start as a card is
// printed (cardLead: "380 6568 2192 5547 4949" is a number and a card, not a card and a
// group, however both pass the check), then whose cards hold more digits ("685 34151 1119
// 989345": a number and an American Express card, not a Maestro card and a group), then
// whose first card starts earliest, then is longest, wins (cards one a line are read one a line). Groups outside every card are left
// alone. With alone, each card is one group.
func cardWindows(text string, groups []digitGroup, sep string, alone bool) []cardWindow {
	n := len(groups)
	// count[i] is the most cards groups[i:] hold; take[i] is the last group of the card
	// starting at group i in the best segmentation of groups[i:], or -1 to skip group i.
	// wraps[i] is the number of line breaks inside the cards of that segmentation, and
	// lead[i] the number of its cards that start as a card is printed (cardLead), cover[i]
	// the number of their digits.
	var countBuf, wrapsBuf, leadBuf, coverBuf [17]int
	var takeBuf [16]int
	count, wraps, lead, cover, take := countBuf[:], wrapsBuf[:], leadBuf[:], coverBuf[:], takeBuf[:]
	if n > len(take) {
		count, wraps, lead, cover, take = make([]int, n+1), make([]int, n+1), make([]int, n+1), make([]int, n+1), make([]int, n)
	}
	count[n], wraps[n], lead[n], cover[n] = 0, 0, 0, 0
	for i := n - 1; i >= 0; i-- {
		count[i], wraps[i], lead[i], cover[i], take[i] = count[i+1], wraps[i+1], lead[i+1], cover[i+1], -1
		if i == 0 && !cardLeftOK(text, groups[0].start) {
			continue
		}
		digits, breaks := 0, 0
		for j := i; j < n; j++ {
			digits += groups[j].len()
			if j > i && gapBreak(text, groups[j-1], groups[j]) {
				breaks++
			}
			if digits > maxCardDigits || alone && j > i {
				break
			}
			if digits < minCardDigits || (j == n-1 && !cardRightOK(text, groups[j].end)) {
				continue
			}
			if !cardLayout(text, groups, i, j, sep, breaks) || !isCard(text[groups[i].start:groups[j].end]) ||
				i == j && (pathSegment(text, groups[i].start) || colonNumber(text, groups[i]) && !wordBefore(text, groups[i].start, cardWords, false)) &&
					!pathCard(text[groups[i].start:groups[j].end]) {
				continue
			}
			c, w, l, d := 1+count[j+1], breaks+wraps[j+1], lead[j+1], digits+cover[j+1]
			if cardLead(groups, i, j) {
				l++
			}
			if c != count[i] {
				if c < count[i] {
					continue
				}
			} else if w != wraps[i] {
				if w > wraps[i] {
					continue
				}
			} else if l != lead[i] {
				if l < lead[i] {
					continue
				}
			} else if d < cover[i] {
				continue
			}
			count[i], wraps[i], lead[i], cover[i], take[i] = c, w, l, d, j
		}
	}
	var out []cardWindow
	for i := 0; i < n; {
		if take[i] < 0 {
			i++
			continue
		}
		out = append(out, cardWindow{i, take[i]})
		i = take[i] + 1
	}
	return out
}

// cardLayout reports whether groups[i:j+1], of a run of groups joined by sep with breaks
// line breaks among them, are laid out as a card number is written. Joined by one space, a
// dash, a dot or a slash, or wrapped over lines, any of the run's groups laid out as a card
// is printed (printedLayout) are. The model reads the digits of one number however they are
// grouped, so groups on one line joined by one space or a dash, of any length from 3 digits,
// are one as well when they are all the run holds between its ends and groups of one or two
// digits ("4111 11111111 1111", "41111111-11111111", "room 1 411111111111 1111": a card of
// two text blocks run together), or start with a group of four digits, as a card is printed,
// and make the stretch of such groups they stand in on their line, or all of it but a number
// before them and one after (stretchEdge: "room 101 4111 11111111 1111 123", a room's number
// and a security code). Joined by tabs,
// several spaces or colons, one group alone is, and the whole run when laid out as a card is
// printed ("4111\t1111\t1111\t1111", "4111  1111  1111  1111") after a word naming a card
// (columnSep, in findCards). The numbers of a table are set out so, and rarely make a whole
// row of a card's groups.
func cardLayout(text string, groups []digitGroup, i, j int, sep string, breaks int) bool {
	w := groups[i : j+1]
	plain := len(sep) <= 1 && sep != ":" && sep != "\t"
	if plain && printedLayout(w) {
		return true
	}
	if sep != " " && sep != "-" {
		return (i == j || i == 0 && j == len(groups)-1 && breaks == 0) && printedLayout(w)
	}
	if breaks > 0 {
		return false
	}
	for _, g := range w {
		if g.len() < 3 {
			return false
		}
	}
	if (i == 0 || groups[i-1].len() < 3) && (j == len(groups)-1 || groups[j+1].len() < 3) {
		return true
	}
	return w[0].len() == 4 && stretchEdge(text, groups, i, -1) && stretchEdge(text, groups, j, 1)
}

// stretchEdge reports whether groups[k] is the first (dir -1) or last (dir 1) of the stretch
// of groups of 3 digits or more on one line that it stands in, or the second or the one
// before the last: one number may stand beside a card in groups of any length, read apart.
func stretchEdge(text string, groups []digitGroup, k, dir int) bool {
	// joined reports whether groups[a] and the next group are of one stretch
	joined := func(a int) bool {
		return a >= 0 && a+1 < len(groups) && groups[a].len() >= 3 && groups[a+1].len() >= 3 &&
			!gapBreak(text, groups[a], groups[a+1])
	}
	if dir < 0 {
		return !joined(k-1) || !joined(k-2)
	}
	return !joined(k) || !joined(k+1)
}

// cardLead reports whether the card of groups[i:j+1] starts as a card is printed: with a
// group of four digits, or as one run of digits.
func cardLead(groups []digitGroup, i, j int) bool { return i == j || groups[i].len() == 4 }

// inWindow reports whether group k is one of a card's.
func inWindow(windows []cardWindow, k int) bool {
	for _, w := range windows {
		if k >= w.first && k <= w.last {
			return true
		}
	}
	return false
}

// printedLayout reports whether groups are laid out as a card number is printed: one run of
// digits, or groups of 3 to 7 digits ("4111 1111 1111 1111", "3782 822463 10005"). Runs of
// one- and two-digit groups are byte dumps, dates or counts, not cards.
func printedLayout(groups []digitGroup) bool {
	if len(groups) == 1 {
		return true
	}
	for _, g := range groups {
		if g.len() < 3 || g.len() > 7 {
			return false
		}
	}
	return true
}

// hexDumpRun reports whether the run of digit groups sits inside a hex dump: a neighbouring
// token, joined by the run's separator, is a hexadecimal group of the same width that holds
// a letter ("4865 6c6c 6f20", "de ad 41 11"), or the run follows an offset column
// ("00000010: 4111 1111 ...").
func hexDumpRun(text string, groups []digitGroup) bool {
	first, last := groups[0], groups[len(groups)-1]
	width := first.len()
	if width > 8 {
		return false
	}
	// token before the run
	if s := first.start; s >= 2 && (text[s-1] == ' ' || text[s-1] == '-') {
		e := s - 1
		b := e
		for b > 0 && isHex(text[b-1]) {
			b--
		}
		if tok := text[b:e]; hexWithLetter(tok) && len(tok) == width && leftOK(text, b) {
			return true
		}
		if e >= 1 && text[e-1] == ':' {
			b = e - 1
			for b > 0 && isHex(text[b-1]) {
				b--
			}
			if e-1-b >= 4 && (b == 0 || !isWord(text[b-1])) {
				return true
			}
		}
	}
	// token after the run
	if e := last.end; e+1 < len(text) && (text[e] == ' ' || text[e] == '-') {
		s := e + 1
		k := s
		for k < len(text) && isHex(text[k]) {
			k++
		}
		if tok := text[s:k]; hexWithLetter(tok) && len(tok) == last.len() && (k == len(text) || !isWord(text[k])) {
			return true
		}
	}
	return false
}

// hexWithLetter reports whether tok is hexadecimal and holds a letter a-f.
func hexWithLetter(tok string) bool {
	letter := false
	for i := 0; i < len(tok); i++ {
		if !isHex(tok[i]) {
			return false
		}
		if isAlpha(tok[i]) {
			letter = true
		}
	}
	return tok != "" && letter
}

// cardBrand is one issuer identification number range and the lengths its cards have.
type cardBrand struct {
	lo, hi    int // IIN prefix range, inclusive, compared on the first len(lo) digits
	prefixLen int
	minLen    int
	maxLen    int
}

// wide reports whether b is one of Maestro's ranges of two digits that take any length from
// 12 to 19 (50, 56 to 69): every number of those lengths starting with a 6 is in one. Read
// alone in a URL's path, where numeric ids are, they name no card (pathCard).
func (b cardBrand) wide() bool { return b.prefixLen == 2 && b.minLen == 12 && b.maxLen == 19 }

// cardBrands lists the IIN ranges of the major networks (Visa, Mastercard, American
// Express, Discover, Diners Club, JCB, UnionPay, Maestro, Mir, RuPay, Verve, Troy and a few
// domestic schemes).
var cardBrands = []cardBrand{
	{4, 4, 1, 13, 13},           // Visa: 13, 16 or 19 digits, no other length
	{4, 4, 1, 16, 16},           // Visa
	{4, 4, 1, 19, 19},           // Visa
	{51, 55, 2, 16, 16},         // Mastercard
	{2221, 2720, 4, 16, 16},     // Mastercard 2-series
	{34, 34, 2, 15, 15},         // American Express
	{37, 37, 2, 15, 15},         // American Express
	{6011, 6011, 4, 16, 19},     // Discover
	{644, 649, 3, 16, 19},       // Discover
	{65, 65, 2, 16, 19},         // Discover, RuPay
	{622126, 622925, 6, 16, 19}, // Discover co-branded UnionPay
	{300, 305, 3, 14, 19},       // Diners Club International
	{36, 36, 2, 14, 19},         // Diners Club International
	{38, 39, 2, 14, 19},         // Diners Club
	{3528, 3589, 4, 16, 19},     // JCB
	{2131, 2131, 4, 15, 15},     // JCB, legacy 15-digit range
	{1800, 1800, 4, 15, 15},     // JCB, legacy 15-digit range
	{62, 62, 2, 16, 19},         // UnionPay
	{81, 81, 2, 16, 19},         // UnionPay
	{50, 50, 2, 12, 19},         // Maestro
	{56, 69, 2, 12, 19},         // Maestro
	{2200, 2204, 4, 16, 19},     // Mir
	{60, 60, 2, 16, 16},         // RuPay
	{506099, 506198, 6, 16, 19}, // Verve
	{650002, 650027, 6, 16, 19}, // Verve
	{9792, 9792, 4, 16, 16},     // Troy
	{357111, 357111, 6, 16, 16}, // LankaPay
	{636, 636, 3, 16, 19},       // InterPayment
	{637, 639, 3, 16, 16},       // InstaPayment
	{5019, 5019, 4, 16, 16},     // Dankort
	{4571, 4571, 4, 16, 16},     // Visa/Dankort
	{6759, 6759, 4, 12, 19},     // Maestro UK
	{676770, 676774, 6, 12, 19}, // Maestro UK
	{8600, 8600, 4, 16, 16},     // UzCard
	{9860, 9860, 4, 16, 16},     // Humo
	{6054, 6054, 4, 16, 16},     // BankAxept
}

// pathSegment reports whether the digits at i are a segment of a URL's path: a slash stands
// before them ("/orders/6011000990139424", "/u/4111111111111111/a.png").
func pathSegment(text string, i int) bool { return i > 0 && text[i-1] == '/' }

// colonNumber reports whether the digits of g are joined by a colon to a number before or
// after them: a Kafka record's partition and offset ("orders:3:612345678901"), a time and a
// sequence number, a list's item. Numbers so joined are offsets, counters and ids as often
// as a URL's path holds them, and one alone is read as a card only as there (pathCard): "1:"
// or "12:30:" before a card does not hide it (TestCardAfterANumberAndAColon), while an
// offset of another length does not read as one (TestRandomIDsAfterColons).
func colonNumber(text string, g digitGroup) bool {
	return g.start >= 2 && text[g.start-1] == ':' && isDigit(text[g.start-2]) ||
		g.end+1 < len(text) && text[g.end] == ':' && isDigit(text[g.end+1])
}

// pathCard reports whether s, a run of digits alone in a URL's path segment (pathSegment) or
// joined by a colon to a number (colonNumber) that isCard takes, is read as a card there too.
// Joined by a colon after a word naming a card (cardWords), it is read as anywhere else, at
// every length its network issues ("card 1:4222222222222", a Visa of 13 digits); in a path,
// "/cards/" names a collection of ids as often. A path holds numeric ids (an order's, a user's,
// a file's), of any length, and one that starts with a network's number and has a length it
// issues passes the Luhn check one time in ten: Maestro's ranges alone take every id of 12
// to 19 digits starting with a 6. So a card alone in a path is read at the length nearly
// every card has, 16 digits (15 for American Express), and of a network other than those
// ranges (TestRandomIDsInURLPaths); one written with separators, in its printed groups, is
// read as anywhere else.
func pathCard(s string) bool {
	if len(s) != 16 && !(len(s) == 15 && (strings.HasPrefix(s, "34") || strings.HasPrefix(s, "37"))) {
		return false
	}
	var digits [16]byte
	for i := range len(s) {
		digits[i] = s[i] - '0'
	}
	return brandOf(digits[:len(s)], false)
}

// isCard reports whether s (digits with separators) has the length of a card of the network
// its issuer identification number belongs to, and passes the Luhn check.
func isCard(s string) bool {
	var digits [maxCardDigits]byte
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
	if n < minCardDigits || !brandLength(digits[:n]) {
		return false
	}
	return luhn(digits[:n])
}

// brandLength reports whether digits start with a known IIN and have a length that network
// issues.
func brandLength(digits []byte) bool { return brandOf(digits, true) }

// brandOf reports whether digits start with a known IIN and have a length that network
// issues, a Maestro range that takes any number of a length (cardBrand.wide) only with wide.
func brandOf(digits []byte, wide bool) bool {
	for _, b := range cardBrands {
		if len(digits) < b.minLen || len(digits) > b.maxLen || b.wide() && !wide {
			continue
		}
		p := 0
		for _, d := range digits[:b.prefixLen] {
			p = p*10 + int(d)
		}
		if p >= b.lo && p <= b.hi {
			return true
		}
	}
	return false
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

// phoneFinder finds telephone numbers with libphonenumber's rules (through
// github.com/nyaruka/phonenumbers): a candidate (digits with the punctuation numbers are
// written with) is a phone number when it is in international format (a leading "+", or a
// region's international call prefix) and possible for its country, or when it is a valid
// national number of one of the configured regions. Formatted North American numbers are
// recognised by their layout when a NANP region is configured. Unformatted digit runs are
// left alone (they are as likely to be ids), and so are dates and decimals.
type phoneFinder struct {
	regions []phoneRegion
	nanp    bool // a region of the North American Numbering Plan is configured
}

// phoneRegion is a configured region with what rules out a candidate before it is parsed.
type phoneRegion struct {
	code    string
	trunk   string       // national (trunk) prefix, "" when none
	lengths map[int]bool // possible lengths of its national significant numbers
	screen  *regionScreen
}

// regionScreen rules out, without parsing, a candidate that cannot be a valid national
// number of a region. Parsing a candidate with a region as default (libphonenumber's
// ParseAndKeepRawInput) leaves as national significant number its digits, or what remains
// once the region's own country code, and then a national prefix (with a carrier code), are
// stripped from their start (the national prefix is what the region's
// national_prefix_for_parsing pattern matches there; leading zeros are kept), unless the
// digits start with the region's international call prefix (then the country code is read
// from them) or the region rewrites its national prefix (national_prefix_transform_rule)
// otherwise than by keeping its last group (such a region is not screened). A valid number
// matches the region's general description and that of one of its number types (a length
// and a pattern each), and one read without a national prefix must not be of a format that
// requires it; when none of those readings qualifies, the parse and the validity test can
// only fail. Parsing costs microseconds a region; a hex dump or a table of numbers holds
// thousands of candidates, each tried against every region.
type regionScreen struct {
	idd     *regexp.Regexp // the international call prefix, anchored at the start
	prefix  *regexp.Regexp // the national prefix for parsing, anchored at the start; nil if none
	keep    int            // the group of prefix the national number starts with when it matches (a transform rule "$2"); 0 if none
	cc      string         // the country calling code
	general *descScreen    // what every number of the region matches
	types   []*descScreen  // what a number of each type matches (fixed line, mobile, toll free...)
	formats []formatScreen // the formats of its country code's main region; nil if not screened
}

// formatScreen is a number format: the number it formats starts with its leading digits
// and matches its pattern whole, and prefixed says that the number is written nationally
// with the national prefix (libphonenumber's IsNationalPrefixPresentIfRequired).
type formatScreen struct {
	lead     *descScreen // nil when the format has no leading digits
	pattern  *descScreen
	prefixed bool
}

// needsPrefix reports whether the number format chosen for the national significant
// number nsn requires the national prefix.
func (sc *regionScreen) needsPrefix(nsn string) bool {
	for _, f := range sc.formats {
		if (f.lead == nil || f.lead.startsWith(nsn)) && f.pattern.matches(nsn) {
			return f.prefixed
		}
	}
	return false
}

// descScreen is a number description (libphonenumber's PhoneNumberDesc) as an automaton on
// digits: a national significant number matches it when it has one of its lengths (any,
// when none is given) and its pattern matches the number whole.
type descScreen struct {
	lengths []int32
	next    [][10]int32 // from state 0; -1 is dead
	accept  []bool      // the states where the pattern has matched
}

// matches reports whether the digits s match d.
func (d *descScreen) matches(s string) bool {
	if len(d.lengths) > 0 && !slices.Contains(d.lengths, int32(len(s))) {
		return false
	}
	st := int32(0)
	for i := 0; i < len(s) && st >= 0; i++ {
		st = d.next[st][s[i]-'0']
	}
	return st >= 0 && d.accept[st]
}

// startsWith reports whether the pattern of d matches a prefix of the digits s.
func (d *descScreen) startsWith(s string) bool {
	st := int32(0)
	for i := 0; st >= 0; i++ {
		if d.accept[st] {
			return true
		}
		if i == len(s) {
			return false
		}
		st = d.next[st][s[i]-'0']
	}
	return false
}

// regionScreens holds the screen of each region, nil where none applies.
var regionScreens sync.Map // region code -> *regionScreen

func screenFor(md *phonenumbers.PhoneMetadata) *regionScreen {
	if v, ok := regionScreens.Load(md.GetId()); ok {
		return v.(*regionScreen)
	}
	v, _ := regionScreens.LoadOrStore(md.GetId(), newScreen(md))
	return v.(*regionScreen)
}

func newScreen(md *phonenumbers.PhoneMetadata) *regionScreen {
	if md.GetInternationalPrefix() == "" {
		return nil
	}
	sc := &regionScreen{cc: strconv.Itoa(int(md.GetCountryCode()))}
	if rule := md.GetNationalPrefixTransformRule(); rule != "" {
		// only a rule keeping the last group of the prefix, when it ends the prefix, leaves
		// a suffix of the digits (Brazil's "$2")
		if len(rule) != 2 || rule[0] != '$' || rule[1] < '1' || rule[1] > '9' {
			return nil
		}
		sc.keep = int(rule[1] - '0')
	}
	var err error
	if sc.idd, err = regexp.Compile("^(?:" + md.GetInternationalPrefix() + ")"); err != nil {
		return nil
	}
	if p := md.GetNationalPrefixForParsing(); p != "" {
		if sc.prefix, err = regexp.Compile("^(?:" + p + ")"); err != nil || sc.keep > sc.prefix.NumSubexp() {
			return nil
		}
	}
	if sc.general = newDescScreen(md.GetGeneralDesc().GetNationalNumberPattern(), md.GetGeneralDesc().GetPossibleLength()); sc.general == nil {
		return nil
	}
	for _, d := range []*phonenumbers.PhoneNumberDesc{md.GetFixedLine(), md.GetMobile(), md.GetTollFree(),
		md.GetPremiumRate(), md.GetSharedCost(), md.GetPersonalNumber(), md.GetVoip(), md.GetPager(),
		md.GetUan(), md.GetVoicemail()} {
		if d.GetNationalNumberPattern() == "" {
			continue // matches no number
		}
		t := newDescScreen(d.GetNationalNumberPattern(), d.GetPossibleLength())
		if t == nil {
			return nil
		}
		sc.types = append(sc.types, t)
	}
	sc.formats = newFormatScreens(regionMetadata()[phonenumbers.GetRegionCodeForCountryCode(int(md.GetCountryCode()))])
	return sc
}

// newFormatScreens returns the formats of md, or nil when one cannot be screened.
func newFormatScreens(md *phonenumbers.PhoneMetadata) []formatScreen {
	if md == nil {
		return nil
	}
	var out []formatScreen
	for _, nf := range md.GetNumberFormat() {
		f := formatScreen{pattern: newDescScreen(nf.GetPattern(), nil)}
		if lds := nf.GetLeadingDigitsPattern(); len(lds) > 0 {
			f.lead = newDescScreen(lds[len(lds)-1], nil)
			if f.lead == nil {
				return nil
			}
		}
		if f.pattern == nil {
			return nil
		}
		rule := nf.GetNationalPrefixFormattingRule()
		f.prefixed = rule != "" && !nf.GetNationalPrefixOptionalWhenFormatting() && !phonenumbers.FIRST_GROUP_ONLY_PREFIX_PATTERN.MatchString(rule)
		out = append(out, f)
	}
	return out
}

// newDescScreen builds the automaton of a pattern (a national number pattern, of numbers of
// the given lengths) state by state (a state is the set of states of
// the pattern's program a prefix leaves alive), or returns nil when it needs too many.
func newDescScreen(pattern string, lengths []int32) *descScreen {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil
	}
	for _, in := range prog.Inst {
		if in.Op == syntax.InstEmptyWidth {
			return nil // an assertion (^, $, \b) the automaton does not read
		}
	}
	ds := &descScreen{lengths: lengths}
	ids := map[string]int32{}
	var sets [][]uint32
	state := func(set []uint32) int32 {
		if len(set) == 0 {
			return -1
		}
		slices.Sort(set)
		set = slices.Compact(set)
		var k strings.Builder
		for _, pc := range set {
			k.WriteString(strconv.Itoa(int(pc)))
			k.WriteByte(',')
		}
		if id, ok := ids[k.String()]; ok {
			return id
		}
		id := int32(len(sets))
		ids[k.String()] = id
		sets = append(sets, set)
		ds.next = append(ds.next, [10]int32{})
		ds.accept = append(ds.accept, slices.ContainsFunc(set, func(pc uint32) bool { return prog.Inst[pc].Op == syntax.InstMatch }))
		return id
	}
	state(closure(prog, []uint32{uint32(prog.Start)}))
	for st := 0; st < len(sets); st++ {
		if len(sets) > maxScreenStates {
			return nil
		}
		for d := range 10 {
			to := state(step(prog, sets[st], '0'+rune(d)))
			ds.next[st][d] = to
		}
	}
	return ds
}

// maxScreenStates bounds the automaton of a number description.
const maxScreenStates = 1 << 14

// step returns the states of prog reached from pcs by reading r, with their closure.
func step(prog *syntax.Prog, pcs []uint32, r rune) []uint32 {
	var next []uint32
	for _, pc := range pcs {
		if in := &prog.Inst[pc]; in.Op != syntax.InstMatch && in.MatchRune(r) {
			next = append(next, in.Out)
		}
	}
	return closure(prog, next)
}

// closure returns the states reachable from pcs without reading that read a rune or
// match.
func closure(prog *syntax.Prog, pcs []uint32) []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	for len(pcs) > 0 {
		pc := pcs[len(pcs)-1]
		pcs = pcs[:len(pcs)-1]
		if seen[pc] {
			continue
		}
		seen[pc] = true
		in := &prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			pcs = append(pcs, in.Out, in.Arg)
		case syntax.InstCapture, syntax.InstNop:
			pcs = append(pcs, in.Out)
		case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL, syntax.InstMatch:
			out = append(out, pc)
		}
	}
	return out
}

// rulesOut reports whether digits (the candidate's digits only) cannot be a valid number of
// the region written nationally nor dialled with its international call prefix.
func (sc *regionScreen) rulesOut(digits string) bool {
	if sc == nil || sc.idd.MatchString(digits) {
		return false
	}
	// where the national significant number may start: the digits, past the country
	// code, and past a national prefix after either (twice after the country code)
	var starts [6]int
	n := 1
	if strings.HasPrefix(digits, sc.cc) {
		starts[n] = len(sc.cc)
		n++
	}
	for range 2 {
		for _, k := range starts[:n] {
			if sc.prefix == nil {
				break
			}
			m := sc.prefix.FindStringSubmatchIndex(digits[k:])
			if m == nil {
				continue
			}
			end := m[1]
			if last := len(m)/2 - 1; sc.keep > 0 && m[2*last] >= 0 {
				// the last group matched: the transform rule applies
				if sc.keep != last || m[2*last+1] != m[1] {
					return false
				}
				end = m[2*last]
			}
			if !slices.Contains(starts[:n], k+end) {
				if n == len(starts) {
					return false
				}
				starts[n] = k + end
				n++
			}
		}
	}
	if sc.formats != nil && !strings.HasPrefix(digits, sc.cc) && (sc.prefix == nil || !sc.prefix.MatchString(digits)) && sc.needsPrefix(digits) {
		// read with the region's country code as default, without a national prefix,
		// in a format written with one
		return true
	}
	for _, k := range starts[:n] {
		if nsn := digits[k:]; sc.general.matches(nsn) && slices.ContainsFunc(sc.types, func(t *descScreen) bool { return t.matches(nsn) }) {
			return false
		}
	}
	return true
}

// regionMetadata indexes libphonenumber's territory metadata by region, loaded once.
var regionMetadata = sync.OnceValue(func() map[string]*phonenumbers.PhoneMetadata {
	out := map[string]*phonenumbers.PhoneMetadata{}
	coll, err := phonenumbers.MetadataCollection()
	if err != nil {
		return out
	}
	for _, md := range coll.GetMetadata() {
		out[md.GetId()] = md
	}
	return out
})

// possible reports whether a national number of n digits may be a number of the region,
// with or without its trunk prefix.
func (r *phoneRegion) possible(raw string, n int) bool {
	if r.lengths == nil || r.lengths[n] {
		return true
	}
	return r.trunk != "" && strings.HasPrefix(strings.TrimLeft(raw, "("), r.trunk) && r.lengths[n-len(r.trunk)]
}

// DefaultRegions are the regions whose national phone formats are recognised when a Config
// names none.
var DefaultRegions = []string{"US", "CA", "GB", "IE", "DE", "FR", "ES", "IT", "NL", "BE", "CH", "AT", "IN", "AU", "BR"}

// regionAliases are codes that are not ISO 3166-1 alpha-2 but are often
// written for one, with the code meant.
var regionAliases = map[string]string{"UK": "GB", "EL": "GR"}

// CheckRegions reports the first of regions that names no region with phone
// numbering metadata: "UK" is not a region code ("GB" is), and a phone
// number of such a region would never be recognised as national.
func CheckRegions(regions []string) error {
	supported := phonenumbers.GetSupportedRegions()
	for i, r := range regions {
		u := strings.ToUpper(r)
		if supported[u] {
			continue
		}
		if meant, ok := regionAliases[u]; ok {
			return fmt.Errorf("regions[%d] %q is not an ISO 3166-1 alpha-2 region code: write %q", i, r, meant)
		}
		return fmt.Errorf("regions[%d] %q is not an ISO 3166-1 alpha-2 region code with a phone numbering plan (such as \"US\", \"GB\" or \"DE\")", i, r)
	}
	return nil
}

func newPhoneFinder(regions []string) (*phoneFinder, error) {
	if len(regions) == 0 {
		regions = DefaultRegions
	}
	if err := CheckRegions(regions); err != nil {
		return nil, fmt.Errorf("pii: %w", err)
	}
	f := &phoneFinder{}
	for _, r := range regions {
		r = strings.ToUpper(r)
		reg := phoneRegion{code: r}
		if md := regionMetadata()[r]; md != nil {
			reg.trunk = md.GetNationalPrefix()
			reg.screen = screenFor(md)
			if ls := md.GetGeneralDesc().GetPossibleLength(); len(ls) > 0 {
				reg.lengths = map[int]bool{}
				for _, l := range ls {
					reg.lengths[int(l)] = true
				}
			}
		}
		f.regions = append(f.regions, reg)
		if phonenumbers.GetCountryCodeForRegion(r) == 1 {
			f.nanp = true
		}
	}
	return f, nil
}

// Bounds on the digits of a phone number (E.164 allows at most 15).
const (
	minNationalDigits      = 7
	minInternationalDigits = 8
	maxPhoneDigits         = 15
)

// phoneMemo holds whether a national candidate (its text) is a number of a configured
// region, which depends on that text alone.
type phoneMemo map[string]bool

func (f *phoneFinder) find(text string, memo phoneMemo, add func(Kind, int, int)) {
	last := -1 // end of the previous number: a "+" right after it starts the next one
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c != '+' && c != '(' && !isDigit(c) {
			continue
		}
		if !(c == '+' && i == last) {
			if i > 0 && (isDigit(text[i-1]) || text[i-1] == '+') {
				continue
			}
			if !leftOK(text, i) {
				continue
			}
		}
		if end := f.match(text, i, memo); end > 0 {
			add(KindPhone, i, end)
			i, last = end-1, end
		}
	}
}

// match returns the end of the phone number starting at i, or 0.
func (f *phoneFinder) match(text string, i int, memo phoneMemo) int {
	if f.nanp {
		// the North American layout is decided by the North American rules
		if e := northAmericanPhone(text, i); e != 0 {
			return max(e, 0)
		}
	}
	e, wrapped := f.matchCandidate(text, i, memo, true)
	if e == 0 && wrapped {
		// the next line does not go on with the number: it ends at the line's end
		// ("0100 000." then "0A0")
		e, _ = f.matchCandidate(text, i, memo, false)
	}
	return e
}

// matchCandidate is match but for the North American layout: the end of the phone number
// phoneCandidate reads at i (wrap: over a line ending in a dash or a dot), or 0, and whether
// the candidate wraps so.
func (f *phoneFinder) matchCandidate(text string, i int, memo phoneMemo, wrap bool) (int, bool) {
	end, digits, ok, wrapped := phoneCandidate(text, i, wrap)
	e := f.checkCandidate(text, i, end, digits, ok, memo)
	return e, wrapped
}

// checkCandidate returns the end of the phone number that a candidate of phoneCandidate
// (end, digits, ok) at i is, or 0.
func (f *phoneFinder) checkCandidate(text string, i, end, digits int, ok bool, memo phoneMemo) int {
	if !ok {
		return bareContextPhone(text, i)
	}
	e := phoneEnd(text, end)
	if e == 0 {
		return 0
	}
	raw := text[i:end]
	if text[i] == '+' {
		if digits < minInternationalDigits {
			return 0
		}
		if !possibleInternational(raw) {
			return 0
		}
		return e
	}
	if digits < minNationalDigits {
		return 0
	}
	if ssnShaped(raw) || isDateLike(datePrefix(raw)) {
		return 0
	}
	if q, ok := dottedQuad(raw, 0); ok && q == len(raw) {
		return 0 // an IPv4 address
	}
	valid, seen := memo[raw]
	if !seen {
		valid = f.national(raw, digits)
		memo[raw] = valid
	}
	if valid {
		return e
	}
	if phoneContext(text, i, e) && possibleAnywhere(raw, digits) {
		return e
	}
	return 0
}

// national reports whether raw, a candidate of the given number of digits without a
// leading "+", is a valid number of a configured region, or a possible number dialled with
// one's international call prefix.
func (f *phoneFinder) national(raw string, digits int) bool {
	ds := digitsOnly(raw)
	for k := range f.regions {
		reg := &f.regions[k]
		idd := raw[0] == '0' && len(raw) > 1 && (raw[1] == '0' || raw[1] == '1')
		if !idd && !reg.possible(raw, digits) || reg.screen.rulesOut(ds) {
			continue
		}
		r := reg.code
		n, err := phonenumbers.ParseAndKeepRawInput(raw, r)
		if err != nil {
			continue
		}
		if int(n.GetCountryCode()) != phonenumbers.GetCountryCodeForRegion(r) {
			// dialled with the region's international call prefix ("00 44 ...", "001-253-...")
			if digits >= minInternationalDigits && phonenumbers.IsPossibleNumber(n) {
				return true
			}
			continue
		}
		// written nationally, a number keeps the trunk prefix where the region's
		// formats require it ("030 901820" in Germany, "(11) 4706-6184" in Brazil)
		if phonenumbers.IsValidNumberForRegion(n, r) && phonenumbers.IsNationalPrefixPresentIfRequired(n) {
			return true
		}
	}
	return false
}

// digitsOnly returns the ASCII digits of s.
func digitsOnly(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if isDigit(s[i]) {
			b = append(b, s[i])
		}
	}
	return string(b)
}

// phoneWords name a telephone number. A formatted number of a region that is not
// configured is still a phone number when one of them stands just before it ("Phone:
// 60-56-85-91", "call me on 9472 7916", "Meu telefone é 280930640") or right after it
// ("416 60 039 fax"). The list is the context of presidio's phone recognizer without its
// generic "number", the words for fax and messaging numbers, and the words for a telephone
// of the languages written in Latin script that libphonenumber's regions speak most.
var phoneWords = []string{
	"phone", "phones", "telephone", "tel", "mobile", "cell", "cellphone", "fax", "call", "calling", "whatsapp", "sms",
	"telefon", "telefone", "telefono", "teléfono", "téléphone", "tél", "telefoon", "telf", "tfno", "tlf", "tfn",
	"handy", "mobil", "mobiel", "móvil", "movil", "celular", "cellulare", "portable", "fone", "natel",
}

// phoneWordsUnspaced name a telephone number in scripts that do not set words apart with
// spaces (Chinese, Japanese) or whose letters the ASCII word test does not see (Korean,
// Cyrillic, Greek, Devanagari, Arabic): they count wherever they stand in the window
// before a number ("我的电话号是280930640").
var phoneWordsUnspaced = []string{
	"电话", "電話", "手机", "手機", "传真", "傳真", "携帯", "전화", "팩스", "휴대폰",
	"телефон", "факс", "τηλέφωνο", "τηλ.", "फोन", "फ़ोन", "दूरभाष", "هاتف", "جوال",
}

// phoneWordBefore reports whether a phone word ends within contextWindow bytes before i.
func phoneWordBefore(text string, i int) bool {
	if wordBefore(text, i, phoneWords, true) {
		return true
	}
	before := text[max(0, i-contextWindow):i]
	for k := 0; k < len(before); k++ {
		if before[k] >= utf8.RuneSelf {
			before = strings.ToLower(before)
			for _, w := range phoneWordsUnspaced {
				if strings.Contains(before, w) {
					return true
				}
			}
			return false
		}
	}
	return false
}

// phoneContext reports whether a phone word ends within contextWindow bytes before the
// candidate at [i, end), or is the first word after it.
func phoneContext(text string, i, end int) bool {
	if phoneWordBefore(text, i) {
		return true
	}
	j := end
	for j < len(text) && (text[j] == ' ' || text[j] == '-' || text[j] == '(' || text[j] == '\t') {
		j++
	}
	k := j
	for k < len(text) && isAlpha(text[k]) {
		k++
	}
	return k > j && slices.Contains(phoneWords, strings.ToLower(text[j:k]))
}

// bareContextPhone matches an unformatted run of 8 to 15 digits at i that a phone word
// precedes ("Fax: 9498777106"); without the word such a run is as likely an id. It returns
// the end offset or 0.
func bareContextPhone(text string, i int) int {
	j := i
	for j < len(text) && isDigit(text[j]) {
		j++
	}
	if n := j - i; n < minInternationalDigits || n > maxPhoneDigits || !phoneWordBefore(text, i) {
		return 0
	}
	return phoneEnd(text, j)
}

// possibleAnywhere reports whether a nationally written candidate of n digits has a length
// that national numbers of some region have, with or without a trunk prefix "0" (E.164
// numbers have 4 to 15 digits; the shortest national numbers in use have 5).
func possibleAnywhere(raw string, n int) bool {
	if raw[0] == '0' {
		n--
	}
	return n >= minNationalDigits-1 && n <= maxPhoneDigits-1
}

// phoneCandidate scans digits and the punctuation phone numbers are written with from i (a
// "+", "(" or digit): single spaces, dashes, dots and slashes between digit groups, and one
// parenthesized group ("(415) 555-2671", "+41 (0)69 979 80 58"). It returns the offset past
// the last digit or ")", the number of digits, and whether the text reads as a formatted
// number: it holds a separator, parentheses or a leading "+", and is not a decimal; and
// whether a line ending in a dash or a dot joins two of its groups, which wrap allows.
func phoneCandidate(text string, i int, wrap bool) (int, int, bool, bool) {
	j := i
	plus := text[j] == '+'
	if plus {
		j++
		if j >= len(text) || !isDigit(text[j]) {
			return 0, 0, false, false
		}
	}
	wrapped := false
	digits, end, seps, dots := 0, 0, 0, 0
	var sep byte // the separator between groups besides spaces: one kind per number
	// cut is the candidate before the first separator spaced out ("0176 / 1234567"), which
	// it falls back to when the digits after it make too many (two numbers joined by " - ")
	var cut struct{ end, digits, seps, dots int }
	inParen, usedParen, afterSep := false, false, false
loop:
	for ; j < len(text) && digits <= maxPhoneDigits; j++ {
		c := text[j]
		switch {
		case isDigit(c):
			digits++
			end = j + 1
			afterSep = false
		case (c == ' ' || c == '\n' || c == '\r') && !afterSep && j > i:
			if k, wide := phoneGap(text, j); wide {
				// a line break or several spaces: it joins the groups, but does not
				// make the candidate a formatted number by itself
				if k >= len(text) || !(isDigit(text[k]) || text[k] == '(') {
					break loop
				}
				if cut.end == 0 {
					cut.end, cut.digits, cut.seps, cut.dots = end, digits, seps, dots
				}
				afterSep = true
				j = k - 1
				continue
			}
			if c != ' ' {
				break loop
			}
			fallthrough
		case (c == '-' || c == '.' || c == '/') && !afterSep && j > i:
			k, kind := phoneSeparator(text, j, wrap)
			wrapped = wrapped || strings.IndexByte(text[j:k], '\n') >= 0
			if k >= len(text) || !(isDigit(text[k]) || text[k] == '(') {
				break loop
			}
			if kind != ' ' {
				if sep == 0 {
					sep = kind
				} else if kind != sep {
					break loop
				}
			}
			if k-j > 1 && cut.end == 0 {
				cut.end, cut.digits, cut.seps, cut.dots = end, digits, seps, dots
			}
			seps++
			if kind == '.' {
				dots++
			}
			afterSep = true
			j = k - 1
		case c == '(' && !usedParen && j+1 < len(text) && isDigit(text[j+1]):
			inParen, usedParen, afterSep = true, true, true
			seps++
		case c == ')' && inParen && isDigit(text[j-1]):
			inParen = false
			end = j + 1
			afterSep = false
			if k, _ := phoneGap(text, j+1); k > j+1 && text[j+1] != '.' && k < len(text) && isDigit(text[k]) {
				j = k - 1
				afterSep = true
			}
		default:
			break loop
		}
	}
	if inParen && end > 0 && text[end-1] != ')' {
		// an opening parenthesis never closed: the number ends before it
		return 0, 0, false, wrapped
	}
	if digits > maxPhoneDigits && cut.end > 0 {
		end, digits, seps, dots = cut.end, cut.digits, cut.seps, cut.dots
	}
	if digits > maxPhoneDigits || end == 0 || (!plus && seps == 0) || (dots == 1 && seps == 1) {
		return 0, 0, false, wrapped
	}
	return end, digits, true, wrapped
}

// phoneSeparator reads the separator between two digit groups at j: a space, a dash, a dot
// or a slash, and a dash or a slash may have a space on either side or both ("0176 /
// 12345678", "+49 176- 12345678", "010 - 123 45 67"); a line may end in a dash or a dot, the
// next (indented or not, wrapEnd) going on with the number. It returns the offset past it and its
// kind (the dash, dot or slash, else a space).
func phoneSeparator(text string, j int, wrap bool) (int, byte) {
	k := j
	if text[k] == ' ' {
		k++
		if k+1 < len(text) && (text[k] == '-' || text[k] == '/') {
			k++
			if text[k] == ' ' {
				k++
			}
			return k, text[j+1]
		}
		return k, ' '
	}
	kind := text[k]
	k++
	if w := wrapEnd(text, k); w > 0 && wrap && kind != '/' {
		return w, kind // the line ends in the dash or the dot ("+44 20 7946-\n0958")
	}
	if kind != '.' && k+1 < len(text) && text[k] == ' ' && isDigit(text[k+1]) {
		k++
	}
	return k, kind
}

// possibleInternational reports whether raw ("+" and digits with punctuation) starts with a
// country calling code and has a length that country's numbers may have (libphonenumber's
// possible-number test, without the cost of a full parse). A trunk prefix in parentheses
// ("+41 (0)69 ...") is not counted.
func possibleInternational(raw string) bool {
	var ds []byte
	for i := 0; i < len(raw); i++ {
		if isDigit(raw[i]) {
			ds = append(ds, raw[i])
		}
	}
	n := len(ds)
	if strings.Contains(raw, "(0)") {
		n--
	}
	md := regionMetadata()
	for l := 1; l <= 3 && l < n; l++ {
		code, _ := strconv.Atoi(string(ds[:l]))
		for _, r := range phonenumbers.GetRegionCodesForCountryCode(code) {
			m := md[r]
			if m == nil {
				continue
			}
			ls := m.GetGeneralDesc().GetPossibleLength()
			if len(ls) == 0 || slices.Contains(ls, int32(n-l)) {
				return true
			}
		}
	}
	return false
}

// ssnShaped reports whether s is laid out as a US social security number (3-2-4 digits).
func ssnShaped(s string) bool {
	return len(s) == 11 && isSSNSep(s[3]) && s[6] == s[3] &&
		digitsAt(s, 0, 3) && digitsAt(s, 4, 2) && digitsAt(s, 7, 4)
}

// datePrefix returns the first three groups of s joined by its first separator ("2023-11-02"
// of "2023-11-02 12"), or s.
func datePrefix(s string) string {
	k := strings.IndexAny(s, "-./ ")
	if k < 0 {
		return s
	}
	sep := s[k]
	n := 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == sep:
			n++
			if n == 3 {
				return s[:i]
			}
		case n == 2 && !isDigit(s[i]):
			return s[:i]
		}
	}
	return s
}

// isDateLike reports whether s is a date written with one repeated separator: year, month
// and day in either order ("2024-01-15", "15.01.2024", "01/15/2024").
func isDateLike(s string) bool {
	var parts []string
	for _, sep := range "-./ " {
		if strings.ContainsRune(s, sep) {
			parts = strings.Split(s, string(sep))
			break
		}
	}
	if len(parts) != 3 {
		return false
	}
	var n [3]int
	for k, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || len(p) > 4 {
			return false
		}
		n[k] = v
	}
	dayMonth := func(a, b int) bool {
		return (a >= 1 && a <= 31 && b >= 1 && b <= 12) || (a >= 1 && a <= 12 && b >= 1 && b <= 31)
	}
	switch {
	case len(parts[0]) == 4:
		return n[0] >= 1900 && n[0] <= 2100 && dayMonth(n[1], n[2])
	case len(parts[2]) == 4 || len(parts[2]) == 2:
		return len(parts[0]) <= 2 && len(parts[1]) <= 2 && dayMonth(n[0], n[1])
	}
	return false
}

// northAmericanPhone matches formatted NANP numbers: an optional "+1" or "1" country code,
// then "(AAA) EEE-LLLL", "AAA-EEE-LLLL", "AAA.EEE.LLLL" or "AAA EEE LLLL", and an optional
// extension. The area code must not start with 0 or 1 (without a country code, a "1" is
// refused outright with -1; a "0" may be another region's trunk prefix); the exchange may start with any digit
// (555-123-4567 is written as a phone number). It returns the end offset or 0.
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
	prefixed := j > i
	var area byte
	plain := false // a group joined by a separator of its own, or the area code in parentheses
	switch {
	case j < len(text) && text[j] == '(':
		if !digitsAt(text, j+1, 3) || j+4 >= len(text) || text[j+4] != ')' {
			return 0
		}
		area = text[j+1]
		j += 5
		if k, _ := phoneGap(text, j); k > j && text[j] != '.' {
			j = k
		}
		plain = true
	case digitsAt(text, j, 3):
		k, wide := phoneGap(text, j+3)
		if k == 0 {
			return 0
		}
		area = text[j]
		j, plain = k, !wide
	default:
		return 0
	}
	if !digitsAt(text, j, 3) {
		return 0
	}
	k, wide := phoneGap(text, j+3)
	if k == 0 || (wide && !plain) || !digitsAt(text, k, 4) {
		return 0
	}
	j = k - 4
	switch {
	case area == '1' && !prefixed:
		// "123-456-7890" is no number here, nor in a region whose numbers may start so
		return -1
	case area < '2':
		return 0
	}
	return phoneEnd(text, j+8)
}

func isPhoneSep(b byte) bool { return b == ' ' || b == '-' || b == '.' }

// maxGapSpaces bounds the spaces of a wide gap between a phone number's groups.
const maxGapSpaces = 4

// phoneGap reads the gap between two groups of a North American number at j: a separator
// (isPhoneSep), or a wide one, a line break ("\n", "\r\n") or two to maxGapSpaces spaces,
// as where a number wraps over lines or is set out in a layout ("(415)\n555-2671",
// "(415)  555-2671"). A line may also end in a dash or a dot, the next line (indented or
// not, wrapEnd) going on with the number ("415-555-\n2671"): that gap is the separator. It returns the offset past it, 0 when there is none, and whether it is
// wide. Groups joined by wide gaps alone are a column or a table of numbers, not a phone
// number: a candidate needs a separator of its own besides.
func phoneGap(text string, j int) (int, bool) {
	if n := lineBreak(text, j); n > 0 {
		return j + n, true
	}
	if j >= len(text) || !isPhoneSep(text[j]) {
		return 0, false
	}
	if w := wrapEnd(text, j+1); w > 0 && text[j] != ' ' {
		return w, false // the line ends in the separator ("415-555-\n2671")
	}
	k := j + 1
	for k < len(text) && text[k] == ' ' && text[j] == ' ' && k-j < maxGapSpaces {
		k++
	}
	return k, k-j > 1
}

// phoneEnd returns where a phone number whose digits end at end finishes: past an extension
// ("x123", " ext. 12") when one follows, else at end; 0 when the number runs on into a word
// or a longer token.
func phoneEnd(text string, end int) int {
	if e := extensionEnd(text, end); e > 0 && phoneRightOK(text, e) {
		return e
	}
	if !phoneRightOK(text, end) {
		return 0
	}
	return end
}

// phoneRightOK is rightOK, except that a dash may join a number to a word ("-Fax").
func phoneRightOK(text string, j int) bool {
	if j+1 < len(text) && text[j] == '-' && isAlpha(text[j+1]) {
		return true
	}
	return rightOK(text, j)
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
