package plan

import "encoding/json"

// DefaultMaxAttempts is a retry layer's max_attempts when its config does
// not set one.
const DefaultMaxAttempts = 3

// MaxCalls bounds CallProduct: a larger product of attempts saturates at
// MaxCalls+1.
const MaxCalls = 1_000_000

// Attempts returns the most times one call through a layer of use invokes
// what it wraps: maxAttempts for a retry, one per model (models of them)
// for fallback and hedge, 1 for every other layer. The compiler's
// reports (agentc vet, agentc explain) and the runtime's meter share it.
func Attempts(use string, maxAttempts, models int) int {
	switch use {
	case "retry":
		return maxAttempts
	case "fallback", "hedge":
		if models > 0 {
			return models
		}
	}
	return 1
}

// Attempts returns the most times one call through l invokes what it
// wraps (Attempts of its config).
func (l Layer) Attempts() int {
	if l.Use != "retry" && l.Use != "fallback" && l.Use != "hedge" {
		return 1
	}
	cfg := struct {
		MaxAttempts *int     `json:"max_attempts"`
		Models      []string `json:"models"`
	}{}
	if len(l.Config) > 0 && json.Unmarshal(l.Config, &cfg) != nil {
		return 1 // a config the layer itself refuses at Build
	}
	n := DefaultMaxAttempts
	if cfg.MaxAttempts != nil {
		n = *cfg.MaxAttempts
	}
	return Attempts(l.Use, n, len(cfg.Models))
}

// CallProduct returns the product of attempts, the calls a failing call
// can make through layers that re-invoke it, saturated at MaxCalls+1 so
// that it never overflows. An attempt count below 1 counts as 1.
func CallProduct(attempts ...int) int {
	n := 1
	for _, k := range attempts {
		if k < 1 {
			k = 1
		}
		if n > MaxCalls/k {
			return MaxCalls + 1
		}
		n *= k
	}
	return n
}

// ModelCalls returns the most model calls one call through chain (the
// layers inside a layer, outermost first) makes: the product of the
// attempts of its retry, fallback and hedge layers, each counted whatever
// its when decides (CallProduct).
func ModelCalls(chain []Layer) int {
	n := 1
	for _, l := range chain {
		n = CallProduct(n, l.Attempts())
	}
	return n
}
