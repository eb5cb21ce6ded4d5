package bigmem

import "sync/atomic"

// poison, when set, has Free and the cleanup leave a Mem's memory mapped
// but inaccessible, rather than unmapped: a read or write after either
// then faults at once (the test crashes), where once unmapped the kernel
// may map the same addresses again for the next Map, and a stale pointer
// would read and write someone else's memory without a fault. The address
// space is never given back: for tests only.
var poison atomic.Bool

// SetPoison sets whether memory freed from now on is made inaccessible
// rather than unmapped (see poison), and returns the previous setting. For
// the tests of the packages that use Map; Mapped counts poisoned memory as
// freed.
func SetPoison(on bool) bool { return poison.Swap(on) }
