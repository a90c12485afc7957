package filecheck_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/agentc-dev/agentc/builtins/filecheck"
)

func ExampleChecker_Check() {
	root, err := os.MkdirTemp("", "filecheck-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)

	c, err := filecheck.New(filecheck.Config{Roots: []string{root}, Extensions: []string{"md"}})
	if err != nil {
		panic(err)
	}
	for _, p := range []string{"notes/today.md", "../etc/passwd", "run.sh"} {
		_, err := c.Check(p)
		var denied *filecheck.DeniedError
		if errors.As(err, &denied) {
			fmt.Println(p, "->", denied.Reason)
		} else {
			fmt.Println(p, "-> ok")
		}
	}
	// Output:
	// notes/today.md -> ok
	// ../etc/passwd -> path escapes the allowed roots
	// run.sh -> extension ".sh" not allowed
}
