package redact_test

import (
	"fmt"

	"github.com/agentc-dev/agentc/builtins/redact"
)

func ExampleRedactor_Redact() {
	r, err := redact.New(redact.Config{
		Patterns: []redact.Pattern{{ID: "ticket-pin", Regex: `PIN:(?P<secret>\d{4})`}},
	})
	if err != nil {
		panic(err)
	}
	out, n := r.Redact("db=postgres://app:hunter2@db:5432/x PIN:1234 password=s3cret")
	fmt.Println(out)
	fmt.Println(n)
	// Output:
	// db=postgres://app:[REDACTED:url-credentials]@db:5432/x PIN:[REDACTED:ticket-pin] password=[REDACTED:password-assignment]
	// 3
}
