package bigmem

import (
	"strconv"
	"strings"
)

// hugeKiB returns AnonHugePages of the smaps entry that holds addr.
func hugeKiB(smaps string, addr uintptr) (kib int, found bool) {
	return smapsField(smaps, addr, "AnonHugePages:")
}

// smapsField returns the field (in KiB) of the smaps entry that holds addr.
func smapsField(smaps string, addr uintptr, field string) (kib int, found bool) {
	in := false
	for _, line := range strings.Split(smaps, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && len(f) >= 5 {
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = uint64(addr) >= l && uint64(addr) < h
				continue
			}
		}
		if in && f[0] == field {
			n, _ := strconv.Atoi(f[1])
			return n, true
		}
	}
	return 0, false
}
