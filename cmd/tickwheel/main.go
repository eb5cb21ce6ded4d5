// Command tickwheel is the tickwheel timer server.
//
// The network service arrives with the service issue; until then this command
// reports what is available and exits non-zero, so nobody mistakes it for a
// running server.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "tickwheel: the network server is not built yet; the timing-wheel engine is in package wheel (go test ./wheel/...)")
	os.Exit(1)
}
