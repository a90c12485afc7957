package egress_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentc-dev/agentc/builtins/egress"
)

func ExampleChecker_CheckURL() {
	c, err := egress.New(egress.Config{Allow: []string{"api.example.com", "*.cdn.example.com"}})
	if err != nil {
		panic(err)
	}
	for _, raw := range []string{"http://2130706433/", "ftp://api.example.com/", "https://evil.example.net/"} {
		err := c.CheckURL(context.Background(), raw)
		var denied *egress.DeniedError
		if errors.As(err, &denied) {
			fmt.Println(denied.Reason)
		}
	}
	// Output:
	// ambiguous numeric host 2130706433
	// scheme "ftp" not allowed
	// host evil.example.net port 443 not allowed
}
