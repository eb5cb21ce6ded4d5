//go:build !unix

package main

// processRuns reports whether process pid exists: here it is not checked.
func processRuns(int) bool { return true }
