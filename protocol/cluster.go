package protocol

// Cluster is the result of the admin cluster op, every sub-command: the
// answering node's (the leader's) raft state and the cluster's members
// after the change, sent as [map] with string keys role, leader, term,
// commit_index, applied_index and members, an array of maps with keys id,
// raft_addr and voter; the reply to check has the key check too.
type Cluster struct {
	Role, Leader                    string // as in Stats
	Term, CommitIndex, AppliedIndex uint64
	Members                         []ClusterMember
	// Check is the id of the state check a check sub-command marked (0
	// for the other sub-commands).
	Check uint64
}

// ClusterMember is one server in the raft configuration.
type ClusterMember struct {
	ID, RaftAddr string
	Voter        bool // a voter (false: a non-voting member)
}

// AppendClusterOK appends the reply to a cluster op: [0, id, [cluster]].
func AppendClusterOK(b []byte, id uint64, c *Cluster) []byte {
	b, start := appendOKHead(b, id)
	keys := 6
	if c.Check != 0 {
		keys++
	}
	b = appendMap(append(b, 0x91), keys)
	b = appendStr(appendStr(b, "role"), c.Role)
	b = appendStr(appendStr(b, "leader"), c.Leader)
	b = appendUint(appendStr(b, "term"), c.Term)
	b = appendUint(appendStr(b, "commit_index"), c.CommitIndex)
	b = appendUint(appendStr(b, "applied_index"), c.AppliedIndex)
	b = appendArray(appendStr(b, "members"), len(c.Members))
	for _, m := range c.Members {
		b = appendMap(b, 3)
		b = appendStr(appendStr(b, "id"), m.ID)
		b = appendStr(appendStr(b, "raft_addr"), m.RaftAddr)
		b = appendBool(appendStr(b, "voter"), m.Voter)
	}
	if c.Check != 0 {
		b = appendUint(appendStr(b, "check"), c.Check)
	}
	return endFrame(b, start)
}

// DecodeCluster decodes the result of a cluster op, [cluster], into c,
// which is reset first. Unknown keys are ignored; missing ones read as
// zero.
func DecodeCluster(result []byte, c *Cluster) error {
	*c = Cluster{}
	d := dec{rd: reader{b: result}, what: "cluster result"}
	n := d.array("result", 1)
	d.mapEntries("cluster", func(key []byte) bool {
		switch string(key) {
		case "role":
			c.Role = d.str("role")
		case "leader":
			c.Leader = d.str("leader")
		case "term":
			c.Term = d.uint("term")
		case "commit_index":
			c.CommitIndex = d.uint("commit_index")
		case "applied_index":
			c.AppliedIndex = d.uint("applied_index")
		case "check":
			c.Check = d.uint("check")
		case "members":
			k := d.array("members", 0)
			for range k {
				if d.err != nil {
					break
				}
				var m ClusterMember
				d.member(&m)
				c.Members = append(c.Members, m)
			}
		default:
			return false
		}
		return true
	})
	d.skip(n-1, 0)
	return d.end()
}

// member reads one member map (at depth 3).
func (d *dec) member(m *ClusterMember) {
	n := d.mapLen("member")
	for range n {
		if d.err != nil {
			return
		}
		switch d.str("member key") {
		case "id":
			m.ID = d.str("id")
		case "raft_addr":
			m.RaftAddr = d.str("raft_addr")
		case "voter":
			m.Voter = d.boolean("voter")
		default:
			if p := d.rd.skip(4); p != pOK {
				d.fail("member value", p, wantAny)
			}
		}
	}
}
