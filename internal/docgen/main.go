// Command docgen writes the documentation pages generated from the code:
// docs/language.md (the policy language reference) and docs/rules.md (every
// diagnostic rule). Run it from anywhere inside the repository:
//
//	go run ./internal/docgen          # rewrite the pages
//	go run ./internal/docgen -check   # exit 1, naming them, if they are stale
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/agentc-dev/agentc/internal/docgen/gen"
)

func main() {
	check := flag.Bool("check", false, "report stale pages and exit 1, without writing")
	flag.Parse()
	os.Exit(run(*check))
}

func run(check bool) int {
	root, err := gen.Root(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		return 2
	}
	if check {
		stale, err := gen.Stale(root)
		if err != nil {
			fmt.Fprintln(os.Stderr, "docgen:", err)
			return 2
		}
		for _, p := range stale {
			fmt.Fprintf(os.Stderr, "docgen: %s is stale: run %s\n", p, gen.Command)
		}
		if len(stale) > 0 {
			return 1
		}
		return 0
	}
	wrote, err := gen.Write(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		return 2
	}
	for _, p := range wrote {
		fmt.Println("wrote", p)
	}
	return 0
}
