package session

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tickwheel/tickwheel/protocol"
	"github.com/tickwheel/tickwheel/wheel"
)

// fatalTB is a testing.TB whose Fatalf panics with its message, so that a
// test can see the replica fail.
type fatalTB struct{ testing.TB }

type fatal string

func (fatalTB) Helper() {}

func (fatalTB) Fatalf(format string, args ...any) { panic(fatal(fmt.Sprintf(format, args...))) }

// replicaFailure runs fn and returns the replica's failure message, or "".
func replicaFailure(fn func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			msg = string(f)
		}
	}()
	fn()
	return ""
}

// TestReplicaCatchesDivergence: the replica, which FuzzCore, TestDeterminism
// and the harness rely on, fails when the live state changes outside the
// Core's inputs, and when a write hands bytes the replay does not make.
func TestReplicaCatchesDivergence(t *testing.T) {
	setup := func() (*Core, *replica, *Session) {
		cfg := Config{AdminToken: testAdminToken}
		w, err := wheel.New(start, wheel.Config{})
		require.NoError(t, err)
		w2, err := wheel.New(start, wheel.Config{})
		require.NoError(t, err)
		c := New(cfg, Limits{}, w, nil, nil)
		rep := newReplica(fatalTB{t}, c, cfg, Limits{}, w2)
		s := c.Open()
		req := protocol.Request{Op: protocol.OpHello, Version: protocol.Version, Token: testAdminToken}
		c.Apply(s, protocol.AppendRequest(nil, &req)[4:])
		req = protocol.Request{Op: protocol.OpBind, Receiver: 4} // not quiet: its writes are recorded
		c.Apply(s, protocol.AppendRequest(nil, &req)[4:])
		req = protocol.Request{Op: protocol.OpAdd, Receiver: 3, Tid: 1, After: 5, Data: []byte("d")}
		c.Apply(s, protocol.AppendRequest(nil, &req)[4:])
		return c, rep, s
	}
	flush := func(c *Core, rep *replica) {
		c.Flush(func(s *Session, out []byte) int { rep.wrote(s, out); return 0 }, nil)
	}

	c, rep, _ := setup()
	flush(c, rep)
	require.Empty(t, replicaFailure(func() { rep.check([]uint64{3}) }), "no divergence")

	c, rep, _ = setup()
	c.receiver(3).dropped++ // not an input
	require.Contains(t, replicaFailure(func() { rep.check([]uint64{3}) }), "dropped 1")

	c, rep, _ = setup()
	require.NoError(t, c.wheel.Cancel(wheel.Key{Receiver: 3, Tid: 1})) // behind the Core's back
	require.Contains(t, replicaFailure(func() { rep.check([]uint64{3}) }), "timer 3/1")

	c, rep, s := setup()
	s.out[len(s.out)-1] ^= 1 // the add's reply, changed before it is written
	require.Contains(t, replicaFailure(func() { flush(c, rep); rep.sync() }), "differs")
}
