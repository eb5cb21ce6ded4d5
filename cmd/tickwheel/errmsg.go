package main

import (
	"cmp"
	"errors"
	"strings"

	"github.com/tickwheel/tickwheel/client"
	"github.com/tickwheel/tickwheel/protocol"
)

// errText is how the CLI words err after "tickwheel CMD: ": an error reply
// as "code: message" (the command already names the op), and any other
// error without the client's "tickwheel: " prefix (a not_leader reply with
// the leader it names), so no prefix is said
// twice ("tickwheel cancel: not_found: timer not found").
func errText(err error) string {
	var e *client.Error
	if errors.As(err, &e) {
		s := e.Code.String()
		if msg := serverMessage(e.Message); msg != "" {
			s += ": " + msg
		}
		if e.Code == protocol.CodeNotLeader {
			s += " (leader " + cmp.Or(e.Leader, "unknown") + ")"
		}
		return s
	}
	return strings.TrimPrefix(err.Error(), "tickwheel: ")
}

// serverMessage drops the package prefix of an older server's error
// message ("wheel: timer not found"; servers since issue 28 send none): it
// names a part of the server, not something the user did.
func serverMessage(msg string) string {
	for _, p := range []string{"wheel: ", "session: ", "server: "} {
		if rest, ok := strings.CutPrefix(msg, p); ok {
			return rest
		}
	}
	return msg
}
