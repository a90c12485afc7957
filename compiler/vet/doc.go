// Package vet holds the ordering analysis of a policy and its vet rules, in
// the manner of go/analysis: one rule per file, a package-level *Rule with a
// Name (the rule id), a Doc whose first sentence is the rule's title, and a
// Run function that reports through a Pass. Suite lists every rule.
//
// The rules share one Analysis of the policy. It evaluates every ordering
// constraint, the builtins' (from the embedded schemas) and the policy's own,
// with one checker: a constraint applies to a pair of entries of one chain
// that its outer and inner name, that can wrap the same call (tools:
// scoping and statically false `when` conditions are taken into account)
// and for which its own `when` holds. Rules that are plain orderings are
// therefore data: their Go file only phrases the violation in user terms.
// Rules that need more (reachability of side-effecting tools, products of
// attempts, duplicates) are Go code over the same Analysis.
package vet
