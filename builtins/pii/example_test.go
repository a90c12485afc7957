package pii_test

import (
	"fmt"

	"github.com/agentc-dev/agentc/builtins/pii"
)

func ExampleScanner_Redact() {
	s, err := pii.New(pii.Config{})
	if err != nil {
		panic(err)
	}
	out, n := s.Redact("Reach me at jane@example.com or (415) 555-2671; order 1234567890123456.")
	fmt.Println(out, n)
	// Output: Reach me at [REDACTED:email] or [REDACTED:phone]; order 1234567890123456. 2
}
