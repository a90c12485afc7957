package pii

// --- international bank account numbers (ISO 13616) ---

// ibanLengths is the length of the IBANs of each country that issues them, from the SWIFT
// IBAN Registry, Release 101 (December 2025): 89 countries. Territories that use another
// country's IBAN format (French overseas departments, the Channel Islands, Åland...) write
// its country code.
var ibanLengths = map[string]int{
	"AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
	"BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
	"DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
	"GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HN": 28, "HR": 21, "HU": 28,
	"IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
	"LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22,
	"MK": 19, "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23,
	"PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24,
	"SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28,
	"TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}

// Bounds on the length of an IBAN in the registry.
const (
	minIBANChars = 15
	maxIBANChars = 34
)

// findIBANs finds IBANs written compact ("DE89370400440532013000") or printed in groups of
// four ("DE89 3704 0044 0532 0130 00"; a dash may stand for the space, one kind throughout,
// and a line break for it or after a group of the compact form, where the number wraps over
// lines or is handed over as the lines of an array, its line ending in up to four spaces or
// tabs and the next indented as much, wrapEnd), in either case: a registered country code, the check digits, and as many letters and
// digits as that country's IBANs have, which pass the ISO 7064 mod 97-10 check. A look-alike
// of another length, with an unknown country code or a wrong check, is left alone.
func findIBANs(text string, add func(Kind, int, int)) {
	for i := 0; i+minIBANChars <= len(text); i++ {
		if !isAlpha(text[i]) || !isAlpha(text[i+1]) || !isDigit(text[i+2]) || !isDigit(text[i+3]) || !leftOK(text, i) {
			continue
		}
		want := ibanLengths[string([]byte{upper(text[i]), upper(text[i+1])})]
		if want == 0 {
			continue
		}
		var buf [maxIBANChars]byte
		n, j := 0, i
		var sep byte
		for j < len(text) && n < want {
			c := text[j]
			if isAlnum(c) {
				buf[n] = upper(c)
				n, j = n+1, j+1
				continue
			}
			if w := wrapTo(text, j, true); w > 0 && n%4 == 0 {
				// wrapped over lines after a group, the line ending in spaces or tabs and
				// the next indented as a card's may (wrapEnd)
				j = w
				continue
			}
			if (c != ' ' && c != '-') || n%4 != 0 || j+1 >= len(text) || !isAlnum(text[j+1]) || (sep != 0 && c != sep) {
				break
			}
			sep = c
			j++
		}
		if n != want || !rightOK(text, j) || !ibanChecksum(buf[:n]) {
			continue
		}
		add(KindIBAN, i, j)
		i = j - 1
	}
}

func upper(b byte) byte {
	if b >= 'a' && b <= 'z' {
		return b - 'a' + 'A'
	}
	return b
}

// ibanChecksum reports whether iban (upper-case letters and digits) passes the ISO 7064
// mod 97-10 check: moved to the end, the country code and check digits make the number, its
// letters read as 10 to 35, leave 1 divided by 97.
func ibanChecksum(iban []byte) bool {
	r := 0
	for k := range iban {
		c := iban[(k+4)%len(iban)]
		if isDigit(c) {
			r = (r*10 + int(c-'0')) % 97
		} else {
			r = (r*100 + int(c-'A') + 10) % 97
		}
	}
	return r == 1
}
