package server

// windowsHandles stands for the fd limit on Windows, which has none for
// sockets: max_connections then defaults to its cap (100000).
const windowsHandles = 1 << 20

// raiseFdLimit reports Windows' absent socket limit as a large one.
func raiseFdLimit() (soft, hard uint64, err error) { return windowsHandles, windowsHandles, nil }
