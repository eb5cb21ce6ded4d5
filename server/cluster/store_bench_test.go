package cluster

import (
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	raftwal "github.com/hashicorp/raft-wal"
)

// The log-store comparison behind the choice in docs/ARCHITECTURE.md
// ("Replication"): github.com/hashicorp/raft-wal against
// github.com/hashicorp/raft-boltdb/v2, both fsyncing every StoreLogs, with
// entries sized like a turn's record (40 B to 40 KB) and batches of 1 and
// 16 entries; then a three-node raft on loopback TCP applying 400 B
// entries with 64 in flight, on each store. Run with
//
//	go test ./server/cluster -run '^$' -bench 'StoreLogs$|ClusterApply' -benchtime 2s -count 3
//	go test ./server/cluster -run '^$' -bench 'StoreLogsPaired' -benchtime 2s -count 5
//	go test ./server/cluster -run '^$' -bench 'NodePropose' -benchtime 2s -count 3

type benchStore interface {
	raft.LogStore
	raft.StableStore
	io.Closer
}

var benchStores = []struct {
	name string
	open func(dir string) (benchStore, error)
}{
	{"wal", func(dir string) (benchStore, error) { return raftwal.Open(dir) }},
	{"bolt", func(dir string) (benchStore, error) {
		return raftboltdb.NewBoltStore(filepath.Join(dir, "raft.db"))
	}},
}

func BenchmarkStoreLogs(b *testing.B) {
	for _, st := range benchStores {
		for _, size := range []int{40, 400, 4 << 10, 40 << 10} {
			for _, batch := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/size=%d/batch=%d", st.name, size, batch), func(b *testing.B) {
					s, err := st.open(b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					data := make([]byte, size)
					for i := range data {
						data[i] = byte(i * 7)
					}
					logs := make([]*raft.Log, batch)
					next := uint64(1)
					b.SetBytes(int64(size * batch))
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						for k := range logs {
							logs[k] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data}
							next++
						}
						if err := s.StoreLogs(logs); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkStoreLogsPaired alternates the two stores op by op, so that
// both see the same moment of a shared, noisy disk: its bolt/wal metric is
// the ratio of their mean times in the same run.
func BenchmarkStoreLogsPaired(b *testing.B) {
	for _, size := range []int{40, 400, 4 << 10, 40 << 10} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("size=%d/batch=%d", size, batch), func(b *testing.B) {
				var stores []benchStore
				for _, st := range benchStores {
					s, err := st.open(b.TempDir())
					if err != nil {
						b.Fatal(err)
					}
					defer s.Close()
					stores = append(stores, s)
				}
				data := make([]byte, size)
				logs := make([]*raft.Log, batch)
				next := uint64(1)
				took := make([]time.Duration, len(stores))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for k := range logs {
						logs[k] = &raft.Log{Index: next, Term: 1, Type: raft.LogCommand, Data: data}
						next++
					}
					for j, s := range stores {
						t0 := time.Now()
						if err := s.StoreLogs(logs); err != nil {
							b.Fatal(err)
						}
						took[j] += time.Since(t0)
					}
				}
				for j, st := range benchStores {
					b.ReportMetric(float64(took[j].Microseconds())/float64(b.N), st.name+"-µs/op")
				}
				b.ReportMetric(float64(took[1])/float64(took[0]), "bolt/wal")
			})
		}
	}
}

// nopFSM counts nothing: the benchmark measures the log, not the consumer.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) interface{}         { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, fmt.Errorf("no snapshots") }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

func BenchmarkClusterApply(b *testing.B) {
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			rafts := benchCluster(b, st.open)
			var leader *raft.Raft
			for deadline := time.Now().Add(10 * time.Second); leader == nil; {
				for _, r := range rafts {
					if r.State() == raft.Leader {
						leader = r
					}
				}
				if time.Now().After(deadline) {
					b.Fatal("no leader")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := leader.Barrier(10 * time.Second).Error(); err != nil {
				b.Fatal(err)
			}
			data := make([]byte, 400)
			const inflight = 64
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			var (
				wg     sync.WaitGroup
				failed atomic.Int64
			)
			work := make(chan struct{}, inflight)
			for w := 0; w < inflight; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work { // drain even after an error: the sender must not block
						if err := leader.Apply(data, 5*time.Second).Error(); err != nil {
							failed.Add(1)
						}
					}
				}()
			}
			for i := 0; i < b.N; i++ {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d of %d applies failed (leadership changed?)", n, b.N)
			}
		})
	}
}

func benchCluster(b *testing.B, open func(string) (benchStore, error)) []*raft.Raft {
	var (
		rafts []*raft.Raft
		trans []*raft.NetworkTransport
		conf  raft.Configuration
	)
	for i := 0; i < 3; i++ {
		t, err := raft.NewTCPTransport("127.0.0.1:0", nil, 3, 5*time.Second, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		trans = append(trans, t)
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(fmt.Sprint(i)), Address: t.LocalAddr()})
	}
	for i := 0; i < 3; i++ {
		dir := b.TempDir()
		s, err := open(dir)
		if err != nil {
			b.Fatal(err)
		}
		c := raft.DefaultConfig()
		c.LocalID = raft.ServerID(fmt.Sprint(i))
		c.LogOutput = io.Discard
		if err := raft.BootstrapCluster(c, s, s, raft.NewInmemSnapshotStore(), trans[i], conf); err != nil {
			b.Fatal(err)
		}
		r, err := raft.NewRaft(c, nopFSM{}, s, s, raft.NewInmemSnapshotStore(), trans[i])
		if err != nil {
			b.Fatal(err)
		}
		rafts = append(rafts, r)
		b.Cleanup(func() { r.Shutdown().Error(); trans[i].Close(); s.Close() })
	}
	return rafts
}

// BenchmarkNodePropose is this package end to end: three Nodes on loopback
// (authenticated transport, raft-wal), proposals of 400 B records with up
// to inflight of them waiting, each reported committed. records/entry
// shows the batching of records proposed while an entry is in flight.
func BenchmarkNodePropose(b *testing.B) {
	for _, inflight := range []int{1, 64} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			tc := newCluster(b, 3, func(i int, c *Config) { c.Log = nil })
			l := tc.leader()
			n := tc.nodes[l].n
			rec := make([]byte, 400)
			sem := make(chan struct{}, inflight)
			var (
				failed  atomic.Int64
				entries atomic.Int64
				last    atomic.Uint64
				wg      sync.WaitGroup
			)
			b.SetBytes(int64(len(rec)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				sem <- struct{}{}
				wg.Add(1)
				err := n.Propose(rec, func(idx uint64, err error) {
					if err != nil {
						failed.Add(1)
					} else if last.Swap(idx) != idx {
						entries.Add(1)
					}
					<-sem
					wg.Done()
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			wg.Wait()
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d proposals failed (leadership changed?)", f, b.N)
			}
			b.ReportMetric(float64(b.N)/float64(entries.Load()), "records/entry")
		})
	}
}
