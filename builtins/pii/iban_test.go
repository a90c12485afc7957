package pii

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFindIBAN(t *testing.T) {
	s := newScanner(t, KindIBAN) // the tails of some look-alikes are phone numbers
	for _, tt := range []struct {
		name, in string
		want     []string
	}{
		{"printed", "IBAN DE89 3704 0044 0532 0130 00, BIC COBADEFFXXX", []string{"iban:DE89 3704 0044 0532 0130 00"}},
		{"compact", "pay to GB29NWBK60161331926819.", []string{"iban:GB29NWBK60161331926819"}},
		{"lower case", "my iban is gb42nawi04454264788619", []string{"iban:gb42nawi04454264788619"}},
		{"shortest", "NO9386011117947", []string{"iban:NO9386011117947"}},
		{"longest", "RU0204452560040702810412345678901", []string{"iban:RU0204452560040702810412345678901"}},
		{"letters in the account", "MT84 MALT 0110 0001 2345 MTLC AST0 01S", []string{"iban:MT84 MALT 0110 0001 2345 MTLC AST0 01S"}},
		{"dashes", "FR14-2004-1010-0505-0001-3M02-606", []string{"iban:FR14-2004-1010-0505-0001-3M02-606"}},
		{"no-break spaces", "BE68\u00a05390\u00a00754\u00a07034", []string{"iban:BE68\u00a05390\u00a00754\u00a07034"}},
		{"two in a row", "DE89370400440532013000 GB29NWBK60161331926819", []string{"iban:DE89370400440532013000", "iban:GB29NWBK60161331926819"}},
		{"bad checksum", "DE88 3704 0044 0532 0130 00", []string{}},
		{"one digit short", "DE89 3704 0044 0532 0130 0", []string{}},
		{"one character too many", "GB29NWBK603161331926819", []string{}},
		{"runs on", "DE89370400440532013000X", []string{}},
		{"unknown country", "ZZ89370400440532013000", []string{}},
		{"not a country with ibans", "US64SVBKUS6S3300958879", []string{}},
		{"glued to a word", "xDE89370400440532013000", []string{}},
		{"groups not of four", "DE8 93704 0044 0532 0130 00", []string{}},
		{"mixed separators", "DE89 3704-0044 0532 0130 00", []string{}},
		{"wrapped after a group", "IBAN DE89 3704 0044\n0532 0130 00", []string{"iban:DE89 3704 0044\n0532 0130 00"}},
		{"compact, wrapped", "GB29NWBK6016\r\n1331926819", []string{"iban:GB29NWBK6016\r\n1331926819"}},
		{"wrapped after a space", "IBAN DE89 3704 0044 \n0532 0130 00", []string{"iban:DE89 3704 0044 \n0532 0130 00"}},
		{"wrapped, next line indented", "IBAN DE89 3704\n    0044 0532 0130 00", []string{"iban:DE89 3704\n    0044 0532 0130 00"}},
		{"wrapped after a tab and indented", "GB29 NWBK\t\r\n\t6016 1331 9268 19", []string{"iban:GB29 NWBK\t\r\n\t6016 1331 9268 19"}},
		{"wrapped with a wide gap", "DE89 3704 0044      \n0532 0130 00", []string{}},
		{"wrapped inside a group", "DE89 37\n04 0044 0532 0130 00", []string{}},
		{"two line breaks", "DE89 3704 0044\n\n0532 0130 00", []string{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, found(tt.in, s.Find(tt.in)))
		})
	}
	out, n := newScanner(t).Redact("refund to DE89 3704 0044 0532 0130 00 today")
	assert.Equal(t, "refund to [REDACTED:iban] today", out)
	assert.Equal(t, 1, n)
}

func TestIBANLengths(t *testing.T) {
	assert.Len(t, ibanLengths, 89)
	for cc, n := range ibanLengths {
		assert.True(t, n >= minIBANChars && n <= maxIBANChars, cc)
	}
}
