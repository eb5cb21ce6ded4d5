//go:build !linux

package loadtest

func setFileSizeLimit(int, uint64) (uint64, error) { return 0, errNoDiskFull }
