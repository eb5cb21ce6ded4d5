package session

import (
	"cmp"
	"slices"
)

// sortedKeys returns m's keys in ascending order: maps are walked in key
// order wherever the walk's order can show (snapshots, restarts), so the
// Core stays deterministic.
func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
