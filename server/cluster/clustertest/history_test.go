package clustertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/anishathalye/porcupine"
)

// op is an operation of a hand-written history.
func op(client int, k Kind, tid uint64, o Outcome, call, ret int64) porcupine.Operation {
	if o == Unknown {
		ret = math.MaxInt64
	}
	return porcupine.Operation{ClientId: client, Input: input{k, Key{1, tid}}, Output: o, Call: call, Return: ret}
}

// The model accepts what a linearizable store may answer and refuses a
// lost acknowledged add, a cancelled timer that comes back, and a stale
// read.
func TestModel(t *testing.T) {
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"add, get", []porcupine.Operation{op(0, Add, 1, OK, 0, 1), op(1, Get, 1, OK, 2, 3)}, porcupine.Ok},
		{"lost add", []porcupine.Operation{op(0, Add, 1, OK, 0, 1), op(1, Get, 1, NotFound, 2, 3)}, porcupine.Illegal},
		{"add twice", []porcupine.Operation{op(0, Add, 1, OK, 0, 1), op(1, Add, 1, OK, 2, 3)}, porcupine.Illegal},
		{"exists", []porcupine.Operation{op(0, Add, 1, OK, 0, 1), op(1, Add, 1, Exists, 2, 3)}, porcupine.Ok},
		{"cancelled comes back", []porcupine.Operation{op(0, Add, 1, OK, 0, 1), op(0, Cancel, 1, OK, 2, 3),
			op(1, Get, 1, OK, 4, 5)}, porcupine.Illegal},
		{"concurrent get", []porcupine.Operation{op(0, Add, 1, OK, 0, 10), op(1, Get, 1, NotFound, 2, 3),
			op(2, Get, 1, OK, 4, 5)}, porcupine.Ok},
		{"stale read", []porcupine.Operation{op(0, Add, 1, OK, 0, 10), op(1, Get, 1, OK, 2, 3),
			op(2, Get, 1, NotFound, 4, 5)}, porcupine.Illegal},
		{"unknown add applied late", []porcupine.Operation{op(0, Add, 1, Unknown, 0, 0), op(1, Get, 1, NotFound, 2, 3),
			op(1, Get, 1, OK, 4, 5)}, porcupine.Ok},
		{"unknown add never applied", []porcupine.Operation{op(0, Add, 1, Unknown, 0, 0), op(1, Get, 1, NotFound, 2, 3)}, porcupine.Ok},
		{"unknown cancel", []porcupine.Operation{op(0, Add, 1, OK, 0, 1), op(0, Cancel, 1, Unknown, 2, 0),
			op(1, Get, 1, OK, 4, 5), op(1, Get, 1, NotFound, 6, 7)}, porcupine.Ok},
		{"unknown cancel, then back", []porcupine.Operation{op(0, Add, 1, OK, 0, 1), op(0, Cancel, 1, Unknown, 2, 0),
			op(1, Get, 1, NotFound, 4, 5), op(1, Get, 1, OK, 6, 7)}, porcupine.Illegal},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(Model, c.ops); (got && c.want != porcupine.Ok) || (!got && c.want != porcupine.Illegal) {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.want)
		}
	}
}

// History records outcomes, drops unknown gets, and Check describes the
// operations of an illegal key.
func TestHistoryCheck(t *testing.T) {
	h := NewHistory()
	h.Begin(0, Add, Key{1, 1}).End(OK)
	h.Begin(1, Get, Key{1, 2}).End(Unknown)
	h.Begin(1, Add, Key{1, 2}).End(OK)
	if res, _ := h.Check(0); res != porcupine.Ok {
		t.Fatalf("check %v, want ok", res)
	}
	h.Begin(1, Get, Key{1, 1}).End(NotFound)
	res, desc := h.Check(0)
	if res != porcupine.Illegal || desc == "" {
		t.Fatalf("check %v (%q), want illegal and a description", res, desc)
	}
	if h.Len() != 3 || h.Counts()[Unknown] != 1 {
		t.Fatalf("len %d, counts %v", h.Len(), h.Counts())
	}
	t.Log(desc)
}

// OutcomeOf: nil is ok; the sentinels given, wrapped or not, are their
// definite answers; any other error is unknown.
func TestOutcomeOf(t *testing.T) {
	exists, notFound := errors.New("exists"), errors.New("not found")
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, OK},
		{exists, Exists},
		{fmt.Errorf("add 1/2: %w", exists), Exists},
		{notFound, NotFound},
		{fmt.Errorf("cancel: %w", notFound), NotFound},
		{errors.New("not_leader"), Unknown},
		{context.DeadlineExceeded, Unknown},
	} {
		if got := OutcomeOf(tc.err, exists, notFound); got != tc.want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
