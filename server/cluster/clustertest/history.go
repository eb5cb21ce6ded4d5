package clustertest

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability check of issue 25: clients record every add, cancel
// and get they make of timers that do not fire during the run (a long
// after), with when they sent it and when its answer came, and the
// history is checked with porcupine against a sequential model: a map of
// timer keys to present/absent.

// Kind is an operation of the history.
type Kind uint8

const (
	Add    Kind = iota // add without replace: ok if absent (now present), exists if present
	Cancel             // ok if present (now absent), not_found if absent
	Get                // ok if present, not_found if absent
)

func (k Kind) String() string {
	return [...]string{"add", "cancel", "get"}[k]
}

// Outcome is what the client learnt of an operation.
type Outcome uint8

const (
	OK       Outcome = iota
	Exists           // the add found the timer
	NotFound         // the cancel or get found none
	// Unknown: no answer (a timeout, a lost connection) or one that does
	// not say whether the change was made (not_leader, unavailable from a
	// node that led when it was sent). The operation may take effect at
	// any time after its call, or never.
	Unknown
)

func (o Outcome) String() string {
	return [...]string{"ok", "exists", "not_found", "unknown"}[o]
}

// OutcomeOf is what err, a client call's error, says of the operation: OK
// when nil; Exists or NotFound when it is (errors.Is) exists or notFound,
// the client's sentinels of those answers (client.ErrExists,
// client.ErrNotFound), which are definite; Unknown for anything else
// (not_leader, unavailable, a timeout, a lost connection), which does not
// say whether a change was made. The sentinels are passed in because this
// package imports nothing of tickwheel's (the client's own tests import
// it).
func OutcomeOf(err, exists, notFound error) Outcome {
	switch {
	case err == nil:
		return OK
	case errors.Is(err, exists):
		return Exists
	case errors.Is(err, notFound):
		return NotFound
	}
	return Unknown
}

// Key names a timer.
type Key struct{ Receiver, Tid uint64 }

type input struct {
	Kind Kind
	Key  Key
}

// History records the operations of concurrent clients. Safe for
// concurrent use.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	count [4]int // by outcome
}

// NewHistory starts an empty history; times are counted from now.
func NewHistory() *History { return &History{start: time.Now()} }

// Call is an operation in flight; End records it.
type Call struct {
	h      *History
	client int
	in     input
	at     int64
}

// Begin notes that client sends an operation now (call it just before
// sending).
func (h *History) Begin(client int, k Kind, key Key) *Call {
	return &Call{h: h, client: client, in: input{k, key}, at: int64(time.Since(h.start))}
}

// End records the operation's outcome (call it just after the answer, or
// the error, arrived). A get of unknown outcome is dropped: a read that
// returned nothing constrains nothing. Any other unknown one may take
// effect at any time after its call: it is recorded without a return
// (returning after every other operation).
func (c *Call) End(o Outcome) {
	ret := int64(time.Since(c.h.start))
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	c.h.count[o]++
	if o == Unknown {
		if c.in.Kind == Get {
			return
		}
		ret = math.MaxInt64
	}
	c.h.ops = append(c.h.ops, porcupine.Operation{ClientId: c.client, Input: c.in, Call: c.at, Output: o, Return: ret})
}

// Counts is how many operations ended with each outcome.
func (h *History) Counts() map[Outcome]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return map[Outcome]int{OK: h.count[OK], Exists: h.count[Exists], NotFound: h.count[NotFound], Unknown: h.count[Unknown]}
}

// Len is the number of operations recorded (unknown gets left out).
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// Model is the sequential specification: each timer key is present or
// absent, every key starts absent. The history is partitioned by key
// (operations on different timers are independent), which keeps the
// check fast.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[Key][]porcupine.Operation{}
		var keys []Key
		for _, op := range history {
			k := op.Input.(input).Key
			if _, ok := by[k]; !ok {
				keys = append(keys, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return false },
	Step: func(state, in, out any) (bool, any) {
		present, op, o := state.(bool), in.(input), out.(Outcome)
		switch op.Kind {
		case Add:
			switch o {
			case OK:
				return !present, true
			case Exists:
				return present, present
			case Unknown: // took effect here (if it did not, it is linearized last)
				return true, true
			}
		case Cancel:
			switch o {
			case OK:
				return present, false
			case NotFound:
				return !present, present
			case Unknown:
				return true, false
			}
		case Get:
			switch o {
			case OK:
				return present, present
			case NotFound:
				return !present, present
			}
		}
		return false, state
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(in, out any) string {
		op := in.(input)
		return fmt.Sprintf("%v(%d/%d) -> %v", op.Kind, op.Key.Receiver, op.Key.Tid, out.(Outcome))
	},
	DescribeState: func(s any) string {
		if s.(bool) {
			return "present"
		}
		return "absent"
	},
}

// Check checks the history against Model within timeout. It returns
// porcupine.Ok, porcupine.Illegal (with a description of the smallest
// non-linearizable key's operations) or porcupine.Unknown (timed out).
func (h *History) Check(timeout time.Duration) (porcupine.CheckResult, string) {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	res, info := porcupine.CheckOperationsVerbose(Model, ops, timeout)
	if res != porcupine.Illegal {
		return res, ""
	}
	return res, describeIllegal(ops, info)
}

// describeIllegal describes, for each key porcupine could not linearize,
// the shortest prefix of its operations (in call order) that is already
// not linearizable: its last operation is the one no order explains; the
// operations before it are listed from the last definite answers before
// that operation's call, with every unknown one still pending.
func describeIllegal(ops []porcupine.Operation, _ porcupine.LinearizationInfo) string {
	var b strings.Builder
	for _, part := range Model.Partition(ops) {
		if porcupine.CheckOperations(Model, part) {
			continue
		}
		part = slices.Clone(part)
		slices.SortStableFunc(part, func(x, y porcupine.Operation) int { return cmp.Compare(x.Call, y.Call) })
		n := sort.Search(len(part), func(n int) bool { return !porcupine.CheckOperations(Model, part[:n+1]) }) + 1
		part = part[:n]
		from := max(0, n-20)
		fmt.Fprintf(&b, "key %v: %d operations, the last one cannot be linearized:\n", part[0].Input.(input).Key, n)
		for i, op := range part {
			if i < from && op.Return != math.MaxInt64 {
				continue
			}
			ret := "never"
			if op.Return != math.MaxInt64 {
				ret = time.Duration(op.Return).String()
			}
			fmt.Fprintf(&b, "  client %d %s: called %v, returned %s\n", op.ClientId, Model.DescribeOperation(op.Input, op.Output),
				time.Duration(op.Call), ret)
		}
	}
	return b.String()
}

// Since is the time since the history began (the times it reports are
// counted from there).
func (h *History) Since() time.Duration { return time.Since(h.start) }
