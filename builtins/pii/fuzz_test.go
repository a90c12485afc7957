package pii

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentc-dev/agentc/builtins/internal/mask"
	"github.com/agentc-dev/agentc/builtins/internal/textnorm/textnormtest"
	"github.com/agentc-dev/agentc/runtime"
)

// FuzzRedact: no value the scanner detects survives Redact, and Redact is
// stable (redacting its output changes nothing).
func FuzzRedact(f *testing.F) {
	for _, s := range []string{
		"mail jane.doe@example.com or call +1 415 555 2671",
		"4111111111111111 4111111111111111",
		"cards: 4111 1111 1111 1111 5555 5555 5555 4444",
		"ssn 123-45-6789, 123.45.6789, SSN 123456789",
		"iban DE89 3704 0044 0532 0130 00", "ip 192.168.1.1 and 2001:db8::1",
		"user@xn--bcher-kva.example", "dump 41 11 11 11 11 11 11 11", "",
		"+44 20 7946 0958 / 020 7946 0958", "a@b.c@d.e", "4111-1111-1111-1111",
		"٤١١١ ١١١١ ١١١١ ١١١١", "फोन +१ ४१५ ५५५ २६७१", "4\u200b1\u200c1\u200d1\u2060\ufeff1\u00ad111111111111",
		"41\u034f11\ufe0f111111111111 jane\ufe6bexample.com", "4111\u00a01111\u20091111\u202f1111",
		"4111.1111.1111.1111 4111/1111/1111/1111 4111_1111_1111_1111 123/45/6789 123_45_6789",
		"q=jane%40example.com&c=4111%201111%201111%201111&x=%E0%A5%AA%zz",
		"jane&#64;example&period;com 4111&nbsp;1111&nbsp;1111&nbsp;1111 &#x34;111111111111111 &am",
		`{"to":"jane\u0040example.com","n":"\ud835\udfd2111111111111111\ud835"}`,
		"jаne@exаmple.com", "4111111111111111.25 %4", "DE89 3704 0044 0532 0130 00 gb42nawi04454264788619",
		"jane%2540example.com 4111%25201111%25201111%25201111 jane&amp;#64;example.com", `{\"to\":\"jane\\u0040example.com\"}`,
		textnormtest.Dump("card 4111111111111111 exp 12/29\n", 2, ": ", true), textnormtest.Dump("mail jane.doe@example.com", 1, "  ", true),
		"00000000 31 31 31 31\n00000004 31 31 31 31\n*\n00000010",
		"4111  1111 1111 1111 4111 \u200b 1111 1111 1111 call 415-555-\n2671 ssn 123 - 45 - 6789 jane\u2024doe@example\ufe52com",
	} {
		f.Add(s)
	}
	s, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if !utf8.ValidString(text) {
			return
		}
		found := s.Find(text)
		out, n := s.Redact(text)
		if len(found) > 0 && n == 0 {
			t.Fatalf("found %d items in %q but redacted none", len(found), text)
		}
		// A detected value survives when the scanner still finds it in the
		// output (the same digits elsewhere, not a value, do not count).
		values := map[string]bool{}
		for _, m := range found {
			values[text[m.Start:m.End]] = true
		}
		for _, m := range s.Find(out) {
			if v := out[m.Start:m.End]; values[v] || strings.Contains(v, "[REDACTED:") {
				t.Fatalf("%s %q survives Redact: %q -> %q", m.Kind, v, text, out)
			}
		}
		if again, n2 := s.Redact(out); n2 != 0 || again != out {
			t.Fatalf("redacting the redacted text changed it: %q -> %q (%d)", out, again, n2)
		}
	})
}

// FuzzObjectText: a tool message holding a JSON object whose string values (the input cut
// at each "|") are written out of the order of their keys, a number now and then between
// two, reaches the model from "redact" holding nothing "block" refuses: no value read as a
// text, nor one cut across its values as they are written.
func FuzzObjectText(f *testing.F) {
	for _, s := range []string{"4111 1111|1111 1111", "card 4111 11|11 1111 1111", "jane.doe|@example.com",
		"x|4111111111|111111", "415-555-8720|)222|222222|222222/", "+|44 20 7|946| 1|728.|#|31|77770|02)10.47",
		"IBAN GB29 NWBK 6016|1331 9268 19", "a|b", "", "|"} {
		f.Add(s)
	}
	s, err := New(Config{})
	if err != nil {
		f.Fatal(err)
	}
	tr := mask.Transcript{Mask: s.Redact, Find: s.items}
	f.Fuzz(func(t *testing.T, in string) {
		if !utf8.ValidString(in) {
			return
		}
		var b strings.Builder
		b.WriteString("{")
		for i, v := range strings.Split(in, "|") {
			if i > 0 {
				b.WriteString(", ")
			}
			if v == "#" {
				fmt.Fprintf(&b, `"num%d": 7`, i)
				continue
			}
			q, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, `"%c%d": %s`, 'z'-rune(i%26), i, q)
		}
		b.WriteString("}")
		msg := runtime.Message{Role: "tool", ToolCallID: "c1", Content: b.String()}
		out, _ := tr.Message("", &msg)
		if ms := s.Find(out.Content); len(ms) > 0 {
			t.Fatalf("%s reaches the model as %s, which holds %v", msg.Content, out.Content, ms)
		}
		if it, split := mask.SplitInJSON(out.Content, s.items); split {
			t.Fatalf("%s reaches the model as %s, which holds %s cut across its values", msg.Content, out.Content, it.Label)
		}
	})
}
