package clustertest

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, msg string, wait time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return line, err
}

// A link forwards; cut, it resets what it carried and holds new
// connections silent; healed, it forwards new connections again.
func TestLinkCutHeal(t *testing.T) {
	l, err := NewLink(echoServer(t))
	require.NoError(t, err)
	defer l.Close()

	c, err := net.Dial("tcp", l.Addr())
	require.NoError(t, err)
	defer c.Close()
	got, err := roundTrip(c, "one", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "one\n", got)

	l.Cut()
	_, err = roundTrip(c, "two", 5*time.Second)
	require.Error(t, err, "a connection the link carried must break when it is cut")
	var ne net.Error
	require.False(t, errorAs(err, &ne) && ne.Timeout(), "the carried connection is reset, not left hanging: %v", err)

	held, err := net.Dial("tcp", l.Addr())
	require.NoError(t, err, "a cut link still accepts (a black hole, not a refusal)")
	defer held.Close()
	_, err = roundTrip(held, "three", 300*time.Millisecond)
	require.ErrorAs(t, err, &ne)
	require.True(t, ne.Timeout(), "nothing crosses a cut link: %v", err)

	l.Heal()
	c2, err := net.Dial("tcp", l.Addr())
	require.NoError(t, err)
	defer c2.Close()
	got, err = roundTrip(c2, "four", 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "four\n", got)
}

func errorAs(err error, target *net.Error) bool {
	ne, ok := err.(net.Error)
	if ok {
		*target = ne
	}
	return ok
}

func TestListenBelowEphemeral(t *testing.T) {
	ln, err := Listen()
	require.NoError(t, err)
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	require.True(t, port >= 20000 && port < 32000, "port %d", port)
}
