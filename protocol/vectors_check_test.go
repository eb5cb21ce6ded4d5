package protocol

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors.json from the appenders")

const vectorsPath = "testdata/vectors.json"

// vector is one entry of the file.
type vector struct {
	Name    string  `json:"name"`
	Note    string  `json:"note,omitempty"`
	Hex     string  `json:"hex"`
	Meaning meaning `json:"meaning"`
}

// badVector is a request frame the server refuses: the reply it gets.
type badVector struct {
	Name   string  `json:"name"`
	Hex    string  `json:"hex"`
	Expect meaning `json:"expect"`
}

type vectorFile struct {
	Version   int         `json:"version"`
	Protocol  int         `json:"protocol"`
	About     []string    `json:"about"`
	Requests  []vector    `json:"requests"`
	Replies   []vector    `json:"replies"`
	Events    []vector    `json:"events"`
	Errors    []vector    `json:"errors"`
	Accept    []vector    `json:"accept"`
	Malformed []badVector `json:"malformed"`
}

var vectorsAbout = []string{
	"tickwheel protocol test vectors: docs/PROTOCOL.md says what each field means.",
	"hex is a whole frame: the 4-byte big-endian length, then one msgpack value.",
	"requests: a client's encoder must produce exactly these bytes from meaning (args omitted from the wire are at their default in meaning).",
	"replies, events, errors: what a client's decoder must read from the bytes. An ok reply's result is read by the op of the request it answers (meaning.op).",
	"accept: messages a client must also accept (older or newer servers): decode only.",
	"malformed: request frames the server refuses, after hello: the error code, the id the reply carries, and whether the connection is closed.",
	"Integers above 2^53-1 are decimal strings; data is hex, or null for none; speed is a float64.",
	"version numbers the layout of this file; protocol is the wire protocol version.",
}

func toVector(name, note string, frame []byte, m meaning) vector {
	return vector{Name: name, Note: note, Hex: hex.EncodeToString(frame), Meaning: m}
}

func msgVectors(vs []msgVector) []vector {
	out := make([]vector, 0, len(vs))
	for _, v := range vs {
		out = append(out, toVector(v.name, v.note, v.frame, v.meaning))
	}
	return out
}

// buildVectors makes the file's contents from this package's appenders.
func buildVectors(t *testing.T) vectorFile {
	f := vectorFile{Version: vectorsVersion, Protocol: Version, About: vectorsAbout,
		Replies: msgVectors(replyVectors()), Events: msgVectors(eventVectors()),
		Errors: msgVectors(errorVectors()), Accept: msgVectors(acceptVectors())}
	for _, rv := range requestVectors() {
		f.Requests = append(f.Requests, toVector(rv.name, rv.note, AppendRequest(nil, &rv.r), requestMeaning(&rv.r)))
	}
	f.Malformed = append(f.Malformed,
		badVector{Name: "frame length 0", Hex: "00000000", Expect: meaning{"code": "malformed", "id": 0, "closes": true}},
		badVector{Name: "frame longer than max_frame (65536)", Hex: "00010001", Expect: meaning{"code": "malformed", "id": 0, "closes": true}})
	for _, bad := range malformedRequests {
		p := unhex(t, bad.hex)
		if len(p) == 0 {
			continue // the frame length 0 above
		}
		code := "malformed"
		if errors.Is(bad.want, ErrUnknownOp) {
			code = "unknown_op"
		}
		f.Malformed = append(f.Malformed, badVector{Name: bad.name, Hex: hex.EncodeToString(append(beginFrameOf(len(p)), p...)),
			Expect: meaning{"code": code, "id": juint(bad.id), "closes": code == "malformed"}})
	}
	return f
}

func marshalVectors(t *testing.T, f vectorFile) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(f))
	return buf.Bytes()
}

// TestVectors: testdata/vectors.json is what this package's appenders
// make (with -update it is rewritten), and each vector decodes, with this
// package's decoders, to its meaning.
func TestVectors(t *testing.T) {
	want := marshalVectors(t, buildVectors(t))
	if *update {
		require.NoError(t, os.WriteFile(vectorsPath, want, 0o644))
	}
	got, err := os.ReadFile(vectorsPath)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "testdata/vectors.json is stale: go test ./protocol/ -run TestVectors -update")

	var f vectorFile
	require.NoError(t, json.Unmarshal(got, &f))
	assert.Equal(t, vectorsVersion, f.Version)
	for _, v := range f.Requests {
		t.Run("request/"+v.Name, func(t *testing.T) {
			p := vectorPayload(t, v.Hex)
			var r Request
			require.NoError(t, DecodeRequest(p, &r))
			sameJSON(t, v.Meaning, requestMeaning(&r))
		})
	}
	for _, group := range [][]vector{f.Replies, f.Events, f.Errors, f.Accept} {
		for _, v := range group {
			t.Run("message/"+v.Name, func(t *testing.T) {
				op, _ := v.Meaning["op"].(string)
				m, err := messageMeaning(vectorPayload(t, v.Hex), op)
				require.NoError(t, err)
				sameJSON(t, v.Meaning, m)
			})
		}
	}
	for _, v := range f.Malformed {
		t.Run("malformed/"+v.Name, func(t *testing.T) {
			b, err := hex.DecodeString(v.Hex)
			require.NoError(t, err)
			p, _, err := SplitFrame(b, DefaultMaxFrame)
			if err != nil {
				require.Equal(t, "malformed", v.Expect["code"], "a frame error is malformed")
				return
			}
			var r Request
			err = DecodeRequest(p, &r)
			require.Error(t, err)
			code := "malformed"
			if errors.Is(err, ErrUnknownOp) {
				code = "unknown_op"
			}
			assert.Equal(t, v.Expect["code"], code)
			sameJSON(t, v.Expect["id"], juint(r.ID))
		})
	}
}

// TestVectorsCoverage: the vectors hold every op, every error code, every
// message kind and every reply shape.
func TestVectorsCoverage(t *testing.T) {
	f := buildVectors(t)
	ops := map[string]bool{}
	for _, v := range f.Requests {
		ops[v.Meaning["op"].(string)] = true
	}
	replies := map[string]bool{}
	for _, v := range f.Replies {
		replies[v.Meaning["op"].(string)] = true
	}
	for o := range Op(len(opNames)) {
		if o.Valid() {
			assert.True(t, ops[o.String()], "no request vector for %s", o)
		}
	}
	for _, shape := range []Op{OpHello, OpBind, OpAdd, OpCancel, OpGet, OpList, OpListGroup, OpCancelAll, OpPauseAll, OpPing, OpFastForward, OpStats, OpCluster} {
		assert.True(t, replies[shape.String()], "no reply vector for %s", shape)
	}
	codes := map[any]bool{}
	for _, v := range f.Errors {
		codes[v.Meaning["code_name"]] = true
	}
	for c := Code(1); int(c) < len(codeNames); c++ {
		if codeNames[c] == "" {
			continue
		}
		assert.True(t, codes[c.String()], "no error vector for %s", c)
	}
	kinds := map[any]bool{}
	for _, v := range f.Events {
		kinds[v.Meaning["kind"]] = true
	}
	for _, k := range []string{"fire", "takeover", "dropped"} {
		assert.True(t, kinds[k], "no event vector of kind %s", k)
	}
}

// loadVectors reads the file, for other tests (the doc check).
func loadVectors(t *testing.T) map[string]string {
	b, err := os.ReadFile(vectorsPath)
	require.NoError(t, err)
	var f vectorFile
	require.NoError(t, json.Unmarshal(b, &f))
	out := map[string]string{}
	for _, group := range [][]vector{f.Requests, f.Replies, f.Events, f.Errors, f.Accept} {
		for _, v := range group {
			out[v.Name] = v.Hex
		}
	}
	return out
}

func vectorPayload(t *testing.T, h string) []byte {
	b, err := hex.DecodeString(h)
	require.NoError(t, err)
	p, n, err := SplitFrame(b, 1<<30)
	require.NoError(t, err)
	require.Equal(t, len(b), n, "one frame per vector")
	return p
}

func sameJSON(t *testing.T, want, got any) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	assert.JSONEq(t, string(w), string(g))
}

// messageMeaning decodes a server message with this package's decoders;
// op names the request an ok reply answers.
func messageMeaning(p []byte, op string) (meaning, error) {
	var m Message
	if err := DecodeMessage(p, &m); err != nil {
		return nil, err
	}
	switch m.Kind {
	case KindOK:
		return okResultMeaning(m.ID, op, m.Result)
	case KindError:
		return errorMeaning(m.ID, m.Code, m.Text, m.Leader), nil
	case KindFire:
		return fireMeaning(&m.Fire), nil
	case KindTakeover:
		return meaning{"kind": "takeover", "receiver": juint(m.Receiver), "session": juint(m.Session)}, nil
	case KindDropped:
		return meaning{"kind": "dropped", "receiver": juint(m.Receiver), "first_seq": juint(m.First), "last_seq": juint(m.Last)}, nil
	}
	return meaning{"kind": "unknown", "kind_code": int(m.Kind)}, nil
}

func okResultMeaning(id uint64, name string, result []byte) (meaning, error) {
	var op Op
	for o := range Op(len(opNames)) {
		if o.Valid() && o.String() == name {
			op = o
		}
	}
	var res meaning
	switch op {
	case OpHello:
		var h Hello
		if err := DecodeHello(result, &h); err != nil {
			return nil, err
		}
		res = meaning{"session": juint(h.Session), "now": juint(h.Now), "tick_ns": juint(h.TickNs),
			"server_version": h.ServerVersion, "limits": limitsMeaning(&h.Limits)}
	case OpGet:
		var tm Timer
		if err := DecodeTimer(result, &tm); err != nil {
			return nil, err
		}
		res = meaning{"timer": timerMeaning(&tm)}
	case OpList:
		ts, next, err := DecodeListPage(result, nil)
		if err != nil {
			return nil, err
		}
		timers := []any{}
		for i := range ts {
			timers = append(timers, timerMeaning(&ts[i]))
		}
		res = meaning{"timers": timers, "next": juint(next)}
	case OpListGroup:
		ts, nr, nt, err := DecodeListGroupPage(result, nil)
		if err != nil {
			return nil, err
		}
		timers := []any{}
		for i := range ts {
			timers = append(timers, timerMeaning(&ts[i]))
		}
		res = meaning{"timers": timers, "next_receiver": juint(nr), "next_tid": juint(nt)}
	case OpStats:
		var s Stats
		if err := DecodeStats(result, &s); err != nil {
			return nil, err
		}
		res = meaning{"stats": statsMeaning(&s)}
	case OpCluster:
		var c Cluster
		if err := DecodeCluster(result, &c); err != nil {
			return nil, err
		}
		res = meaning{"cluster": clusterMeaning(&c)}
	default:
		names, ok := uintResults[op]
		if !ok {
			return nil, fmt.Errorf("no result shape for op %q", name)
		}
		vals, err := DecodeUints(result, nil)
		if err != nil {
			return nil, err
		}
		res = meaning{}
		for i, n := range names {
			v := uint64(0)
			if i < len(vals) {
				v = vals[i]
			}
			res[n] = juint(v)
		}
	}
	return okMeaning(id, op, res), nil
}
