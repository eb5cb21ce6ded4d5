package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tickwheel/tickwheel/operator"
)

// clusterCheck runs cluster check: the leader marks its log; with httpAddrs
// (the nodes' operator addresses, comma-separated) it then waits for each
// node's digest of its state at the mark and compares them.
func clusterCheck(e *env, httpAddrs string) error {
	k, err := e.c.ClusterCheck(e.ctx)
	if err != nil {
		return err
	}
	if httpAddrs == "" {
		if e.json {
			e.print(struct {
				Check uint64 `json:"check"`
			}{k.Check}, "")
			return nil
		}
		fmt.Fprintf(e.stdout, "check       %d (each node's digest for it is on its status page: all must be equal)\n", k.Check)
		return nil
	}
	addrs := strings.Split(httpAddrs, ",")
	got := make([]operator.StateCheck, len(addrs))
	errs := make([]error, len(addrs))
	hc := &http.Client{Timeout: 2 * time.Second}
	for pending := len(addrs); pending > 0; {
		pending = 0
		for i, a := range addrs {
			if got[i].ID == k.Check {
				continue
			}
			var sc operator.StateCheck
			if sc, errs[i] = operator.FetchStateCheck(e.ctx, hc, strings.TrimSpace(a)); errs[i] == nil && sc.ID == k.Check {
				got[i] = sc
				continue
			}
			pending++
		}
		if pending == 0 {
			break
		}
		select {
		case <-e.ctx.Done():
			return checkMissing(k.Check, addrs, got, errs)
		case <-time.After(50 * time.Millisecond):
		}
	}
	agree := true
	for _, sc := range got[1:] {
		agree = agree && sc.Agrees(got[0])
	}
	if e.json {
		nodes := make([]any, len(addrs))
		for i, sc := range got {
			nodes[i] = struct {
				HTTP   string `json:"http"`
				Digest string `json:"digest"`
				Timers int    `json:"timers"`
			}{addrs[i], fmt.Sprintf("%016x", sc.Digest), sc.Timers}
		}
		e.print(struct {
			Check uint64 `json:"check"`
			Agree bool   `json:"agree"`
			Nodes []any  `json:"nodes"`
		}{k.Check, agree, nodes}, "")
	} else {
		fmt.Fprintf(e.stdout, "check       %d\n", k.Check)
		for i, sc := range got {
			fmt.Fprintf(e.stdout, "  %-21s %016x  %d timers\n", addrs[i], sc.Digest, sc.Timers)
		}
	}
	if !agree {
		return errors.New("cluster check: the nodes' states differ: a node whose digest differs from the others has diverged (see docs/OPERATIONS.md)")
	}
	if !e.json {
		fmt.Fprintln(e.stdout, "agree       yes")
	}
	return nil
}

// checkMissing is the error of a check some nodes did not report in time.
func checkMissing(id uint64, addrs []string, got []operator.StateCheck, errs []error) error {
	var b strings.Builder
	fmt.Fprintf(&b, "cluster check %d: no digest within -timeout from", id)
	for i, a := range addrs {
		if got[i].ID != id {
			fmt.Fprintf(&b, " %s", a)
			if errs[i] != nil {
				fmt.Fprintf(&b, " (%v)", errs[i])
			}
		}
	}
	return errors.New(b.String())
}
