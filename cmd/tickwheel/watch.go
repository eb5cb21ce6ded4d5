package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/tickwheel/tickwheel/client"
)

const watchHelp = `Each event is a line: the moment its tick stands for (in -zone, default the
local zone), receiver/tid, the firing count, "late D" when it fired D after its
tick (after a downtime, or a server that fell behind: late 3.52s), "last" for its
last firing, and its data; -json gives the tick and lateness in ticks. -n N stops
after N events; -ephemeral binds ephemerally; -ack binds in acknowledged mode
(each event printed is acknowledged; the others come again at the next watch).
When the connection drops (a server restart), watch says "reconnecting…" on
stderr, redials with backoff until the server is back, binds its receivers again,
says "reconnected" and goes on; with -ack no event is lost. When another session
takes over a receiver, watch says so; it exits with status 1 once it has no
receiver left.
`

// watchReconnects is watch's Client option: the Client reconnects (its
// default backoff) when the connection drops, binds the receivers again
// and goes on (acknowledged mode loses nothing), and watch says so on
// stderr, once per loss and once when it is back.
func watchReconnects(stderr io.Writer) client.Option {
	return client.WithConnectionHooks(func(cause error) {
		fmt.Fprintf(stderr, "tickwheel watch: connection lost (%s); reconnecting…\n", errText(cause))
	}, func() { fmt.Fprintln(stderr, "tickwheel watch: reconnected") })
}

// watchCmd binds the receivers and prints their events (watchHelp).
func watchCmd(fs *flag.FlagSet) func(*env) error {
	n := fs.Int("n", 0, "exit after this many events (0 = until interrupted)")
	ephemeral := fs.Bool("ephemeral", false, "bind ephemerally: the receivers' timers are cancelled when watch exits")
	ack := fs.Bool("ack", false, "bind in acknowledged mode: each event printed is acknowledged, the unacknowledged ones come again at the next bind")
	return func(e *env) error {
		ctx, stop := signal.NotifyContext(e.ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		o := &client.BindOptions{Ephemeral: *ephemeral}
		if *ack {
			o.Ack = client.AckAuto
		}
		bound := map[uint64]bool{} // receivers still bound here
		for _, a := range e.args {
			receiver, err := uintArg(a, "receiver")
			if err != nil {
				return err
			}
			if bound[receiver] {
				continue // given twice (9 9, 9 09): bound once
			}
			r, err := e.c.Bind(ctx, receiver, o)
			if err != nil {
				return err
			}
			bound[receiver] = true
			e.printBound(receiver, r, *ack)
		}
		for seen := 0; *n == 0 || seen < *n; seen++ {
			select {
			case <-ctx.Done():
				return nil
			case ev, ok := <-e.c.Events():
				if !ok {
					return errors.New("connection closed")
				}
				e.printEvent(ev)
				if ev.Kind == client.Takeover {
					if delete(bound, ev.Receiver); len(bound) == 0 {
						return fmt.Errorf("receiver %d was taken over by another session: no receiver left to watch", ev.Receiver)
					}
				}
			}
		}
		return nil
	}
}

// printBound prints watch's line for a bound receiver.
func (e *env) printBound(receiver uint64, r client.BindResult, ack bool) {
	v := map[string]any{"bound": receiver, "backlog": r.Pending, "dropped": r.Dropped}
	text := fmt.Sprintf("watching receiver %d (%s, %d dropped)", receiver, count(r.Pending, "waiting event"), r.Dropped)
	if ack {
		v["ack"], v["first_seq"] = true, r.FirstSeq
		text = fmt.Sprintf("watching receiver %d, acknowledged (%d unacknowledged events from seq %d, %d dropped)",
			receiver, r.Pending, r.FirstSeq, r.Dropped)
	}
	e.print(v, text)
}

func (e *env) printEvent(ev client.Event) {
	switch ev.Kind {
	case client.Takeover:
		e.print(map[string]any{"event": "takeover", "receiver": ev.Receiver, "session": ev.NewSession},
			fmt.Sprintf("receiver %d was taken over by session %d", ev.Receiver, ev.NewSession))
		return
	case client.Dropped:
		e.print(map[string]any{"event": "dropped", "receiver": ev.Receiver, "count": ev.Count},
			fmt.Sprintf("receiver %d: %s lost", ev.Receiver, count(ev.Count, "event")))
		return
	}
	times := fmt.Sprintf("%d/%d", ev.Fired, ev.Repeat)
	if ev.Repeat == client.Forever {
		times = fmt.Sprintf("%d/forever", ev.Fired)
	}
	text := fmt.Sprintf("%s  %d/%d  fired %s", e.clk.at(ev.Tick), ev.Receiver, ev.Tid, times)
	if ev.Late > 0 {
		text += "  late " + e.clk.dur(ev.Late)
	}
	if ev.Last {
		text += "  last"
	}
	if len(ev.Data) > 0 {
		text += fmt.Sprintf("  data %q", ev.Data)
	}
	e.print(map[string]any{"event": "fire", "receiver": ev.Receiver, "tid": ev.Tid, "tick": ev.Tick,
		"fired": ev.Fired, "repeat": jsonRepeat(ev.Repeat), "last": ev.Last, "seq": ev.Seq, "late": ev.Late, "data": string(ev.Data)}, text)
}
