package session

import "strings"

// internalPrefixes are the Go package prefixes of the errors the Core may
// put in an error reply (its own, the wheel's, the wire decoder's, and
// those the server passes in): words of the implementation, not of the
// service, which error replies leave out.
var internalPrefixes = []string{"wheel: ", "session: ", "protocol: ", "journal: ", "server: ", "msgpack: "}

// plainText returns an error's text for an error reply: msg without the Go
// package prefixes of the errors it wraps, at its start or after ": ",
// "; " or "(" ("wheel: timer already exists" → "timer already exists";
// "protocol: malformed message: add: ..." → "malformed message: add: ...").
// The rest is kept as it is.
func plainText(msg string) string {
	for _, p := range internalPrefixes {
		if !strings.Contains(msg, p) {
			continue
		}
		for strings.HasPrefix(msg, p) {
			msg = msg[len(p):]
		}
		for _, before := range []string{": ", "; ", "("} {
			for strings.Contains(msg, before+p) {
				msg = strings.ReplaceAll(msg, before+p, before)
			}
		}
	}
	return msg
}
