package vet

// OverlapChecks returns how many times a's Overlap has been evaluated.
func OverlapChecks(a *Analysis) int { return a.overlaps }
