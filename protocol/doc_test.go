package protocol

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vmihailenco/msgpack/v5"
)

// The byte-level examples in docs/PROTOCOL.md are generated from this table
// (PROTOCOL_PRINT_EXAMPLES=1 go test -run TestProtocolDocExamples -v
// ./protocol/ prints them) and checked against it: every example in the doc
// must be exactly the bytes the appenders produce and decode to the values
// here. Each example must also be, byte for byte, the vector of the same
// name in testdata/vectors.json.

type docExample struct {
	name   string
	frame  []byte
	labels []string // names of the top-level elements
	result []string // names of the result array's elements (ok replies)
	check  func(t *testing.T, payload []byte)
}

func reqExample(name string, r Request) docExample {
	labels := []string{"op " + r.Op.String(), "id"}
	for _, f := range opArgs[r.Op] {
		labels = append(labels, fieldNames[f])
	}
	return docExample{name: name, frame: AppendRequest(nil, &r), labels: labels, check: func(t *testing.T, p []byte) {
		var got Request
		require.NoError(t, DecodeRequest(p, &got))
		requireSameRequest(t, r, got)
	}}
}

var okLabels = []string{"kind ok", "id", "result"}

func okExample(name string, frame []byte, result []string, check func(t *testing.T, result []byte)) docExample {
	return docExample{name: name, frame: frame, labels: okLabels, result: result, check: func(t *testing.T, p []byte) {
		var m Message
		require.NoError(t, DecodeMessage(p, &m))
		require.Equal(t, KindOK, m.Kind)
		check(t, m.Result)
	}}
}

func uintsCheck(id uint64, want ...uint64) func(*testing.T, []byte) {
	return func(t *testing.T, result []byte) {
		got, err := DecodeUints(result, nil)
		require.NoError(t, err)
		assert.Equal(t, len(want), len(got))
		if len(want) > 0 {
			assert.Equal(t, want, got)
		}
	}
}

// The doc's values are the vectors' (vectors_test.go).
var (
	docHello = vecHello
	docTimer = vecTimer
	docStats = vecStats
	docFire  = vecFire
)

func docExamples() []docExample {
	return []docExample{
		reqExample("hello", Request{Op: OpHello, ID: 1, Version: 1, Name: "game-1", Token: "secret"}),
		reqExample("bind", Request{Op: OpBind, ID: 2, Receiver: 42, Ephemeral: false}),
		reqExample("unbind", Request{Op: OpUnbind, ID: 3, Receiver: 42}),
		reqExample("add", Request{Op: OpAdd, ID: 4, Receiver: 42, Tid: 7, After: 30, Repeat: 3, Data: []byte("hi")}),
		reqExample("add-at", Request{Op: OpAdd, ID: 5, Receiver: 42, Tid: 8, At: 100000, Every: 500, Replace: true}),
		reqExample("cancel", Request{Op: OpCancel, ID: 6, Receiver: 42, Tid: 7}),
		reqExample("get", Request{Op: OpGet, ID: 7, Receiver: 42, Tid: 7}),
		reqExample("list", Request{Op: OpList, ID: 8, Receiver: 42, FromTid: 0, Limit: 1}),
		reqExample("cancel_all", Request{Op: OpCancelAll, ID: 9, Receiver: 42}),
		reqExample("pause", Request{Op: OpPause, ID: 10, Receiver: 42, Tid: 7}),
		reqExample("resume", Request{Op: OpResume, ID: 11, Receiver: 42, Tid: 7}),
		reqExample("ping", Request{Op: OpPing, ID: 12}),
		reqExample("bind-ack", Request{Op: OpBind, ID: 18, Receiver: 42, Ack: true}),
		reqExample("ack", Request{Op: OpAck, ID: 19, Receiver: 42, Seq: 5}),
		reqExample("fast_forward", Request{Op: OpFastForward, ID: 13, Ticks: 8640000}),
		reqExample("freeze", Request{Op: OpFreeze, ID: 14}),
		reqExample("resume_sync", Request{Op: OpResumeSync, ID: 15}),
		reqExample("set_speed", Request{Op: OpSetSpeed, ID: 16, Speed: 2.5}),
		reqExample("stats", Request{Op: OpStats, ID: 17}),

		okExample("ok-hello", AppendHelloOK(nil, 1, &docHello),
			[]string{"session", "now", "tick_ns", "server_version", "limits"}, func(t *testing.T, r []byte) {
				var h Hello
				require.NoError(t, DecodeHello(r, &h))
				assert.Equal(t, docHello, h)
			}),
		okExample("ok-bind", AppendOK(nil, 2, 0, 0, 1), []string{"delivered", "dropped", "first_seq"}, uintsCheck(2, 0, 0, 1)),
		okExample("ok-bind-ack", AppendOK(nil, 18, 3, 0, 4), []string{"delivered", "dropped", "first_seq"}, uintsCheck(18, 3, 0, 4)),
		okExample("ok-add", AppendOK(nil, 4, 1030), []string{"due"}, uintsCheck(4, 1030)),
		okExample("ok-empty", AppendOK(nil, 6), nil, uintsCheck(6)),
		okExample("ok-get", AppendTimerOK(nil, 7, &docTimer), []string{"timer"}, func(t *testing.T, r []byte) {
			var tm Timer
			require.NoError(t, DecodeTimer(r, &tm))
			assert.Equal(t, docTimer, tm)
		}),
		okExample("ok-list", AppendListOK(nil, 8, []Timer{docTimer}, 8), []string{"timers", "next"}, func(t *testing.T, r []byte) {
			ts, next, err := DecodeListPage(r, nil)
			require.NoError(t, err)
			assert.Equal(t, []Timer{docTimer}, ts)
			assert.Equal(t, uint64(8), next)
		}),
		okExample("ok-fast_forward", AppendOK(nil, 13, 8641000, 0), []string{"now", "fired"}, uintsCheck(13, 8641000, 0)),
		okExample("ok-stats", AppendStatsOK(nil, 17, &docStats), []string{"stats"}, func(t *testing.T, r []byte) {
			var s Stats
			require.NoError(t, DecodeStats(r, &s))
			assert.Equal(t, docStats, s)
		}),
		{name: "error", frame: AppendError(nil, 6, CodeNotFound, errorTexts[CodeNotFound]),
			labels: []string{"kind error", "id", "code not_found", "message"}, check: func(t *testing.T, p []byte) {
				var m Message
				require.NoError(t, DecodeMessage(p, &m))
				assert.Equal(t, Message{Kind: KindError, ID: 6, Code: CodeNotFound, Text: "timer not found"}, m)
			}},
		{name: "error-not_leader", frame: AppendNotLeader(nil, 1, errorTexts[CodeNotLeader], vecLeader),
			labels: []string{"kind error", "id", "code not_leader", "message", "leader"}, check: func(t *testing.T, p []byte) {
				var m Message
				require.NoError(t, DecodeMessage(p, &m))
				assert.Equal(t, Message{Kind: KindError, ID: 1, Code: CodeNotLeader, Text: errorTexts[CodeNotLeader], Leader: vecLeader}, m)
			}},
		{name: "fire", frame: AppendFire(nil, &docFire),
			labels: []string{"kind fire", "receiver", "tid", "tick", "fired", "repeat", "last", "data", "seq", "late"}, check: func(t *testing.T, p []byte) {
				var m Message
				require.NoError(t, DecodeMessage(p, &m))
				assert.Equal(t, Message{Kind: KindFire, Fire: docFire}, m)
			}},
		{name: "takeover", frame: AppendTakeover(nil, 42, 9),
			labels: []string{"kind takeover", "receiver", "session"}, check: func(t *testing.T, p []byte) {
				var m Message
				require.NoError(t, DecodeMessage(p, &m))
				assert.Equal(t, Message{Kind: KindTakeover, Receiver: 42, Session: 9}, m)
			}},
		{name: "dropped", frame: AppendDropped(nil, 42, 11, 17),
			labels: []string{"kind dropped", "receiver", "first_seq", "last_seq"}, check: func(t *testing.T, p []byte) {
				var m Message
				require.NoError(t, DecodeMessage(p, &m))
				assert.Equal(t, Message{Kind: KindDropped, Receiver: 42, First: 11, Last: 17}, m)
			}},
	}
}

// parseDocExamples returns the hex examples of a markdown file: fenced
// blocks tagged hex whose first line is "# example: NAME". In a block, text
// from # to the end of a line is a comment; the rest is hex byte pairs.
func parseDocExamples(t *testing.T, path string) map[string][]byte {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	out := map[string][]byte{}
	var name string
	var buf []byte
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.TrimSpace(line) == "```hex":
			in, name, buf = true, "", nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			require.NotEmpty(t, name, "hex block without '# example: NAME'")
			_, dup := out[name]
			require.False(t, dup, "example %s twice", name)
			out[name] = buf
		case in:
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), "# example: "); ok && name == "" {
				name = strings.TrimSpace(n)
				continue
			}
			code, _, _ := strings.Cut(line, "#")
			for _, tok := range strings.Fields(code) {
				b, err := hex.DecodeString(tok)
				require.NoError(t, err, "example %s: %q", name, line)
				buf = append(buf, b...)
			}
		}
	}
	require.NoError(t, sc.Err())
	return out
}

func TestProtocolDocExamples(t *testing.T) {
	examples := docExamples()
	if os.Getenv("PROTOCOL_PRINT_EXAMPLES") != "" {
		for _, ex := range examples {
			fmt.Println(annotate(ex))
		}
	}
	doc := parseDocExamples(t, "../docs/PROTOCOL.md")
	vectors := loadVectors(t)
	for name, b := range doc {
		assert.Equal(t, vectors[name], hex.EncodeToString(b), "docs/PROTOCOL.md example %s is not the vector of that name", name)
	}
	seen := map[string]bool{}
	for _, ex := range examples {
		seen[ex.name] = true
		t.Run(ex.name, func(t *testing.T) {
			got, ok := doc[ex.name]
			require.True(t, ok, "docs/PROTOCOL.md lacks example %s", ex.name)
			assert.Equal(t, hex.EncodeToString(ex.frame), hex.EncodeToString(got), "the doc's bytes differ from the appender's")
			p, n, err := SplitFrame(got, DefaultMaxFrame)
			require.NoError(t, err)
			require.Equal(t, len(got), n, "one frame per example")
			ex.check(t, p)
		})
	}
	for name := range doc {
		assert.True(t, seen[name], "docs/PROTOCOL.md example %s is not checked", name)
	}
}

// annotate renders an example as a commented hex block.
func annotate(ex docExample) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "```hex\n# example: %s\n", ex.name)
	line := func(b []byte, comment string) {
		for i := 0; i < len(b) || i == 0; i += 12 {
			chunk := b[i:min(i+12, len(b))]
			h := strings.TrimSpace(fmt.Sprintf("% x", chunk))
			if i == 0 && comment != "" {
				fmt.Fprintf(&sb, "%-35s # %s\n", h, comment)
			} else {
				fmt.Fprintf(&sb, "%s\n", h)
			}
		}
	}
	line(ex.frame[:HeaderSize], fmt.Sprintf("length %d", len(ex.frame)-HeaderSize))
	rd := reader{b: ex.frame[HeaderSize:]}
	n, _ := rd.arrayLen()
	line(rd.b[:rd.i], fmt.Sprintf("array of %d", n))
	for i := range n {
		start := rd.i
		if ex.labels[i] == "result" {
			rn, _ := rd.arrayLen()
			line(rd.b[start:rd.i], fmt.Sprintf("result: array of %d", rn))
			for j := range rn {
				annotateValue(&rd, ex.result[j], line)
			}
			continue
		}
		annotateValue(&rd, ex.labels[i], line)
	}
	sb.WriteString("```")
	return sb.String()
}

func annotateValue(rd *reader, label string, line func([]byte, string)) {
	start := rd.i
	switch label {
	case "limits", "stats":
		n, _ := rd.mapLen()
		line(rd.b[start:rd.i], fmt.Sprintf("%s: map of %d", label, n))
		for range n {
			ks := rd.i
			key, _ := rd.bytes(false)
			line(rd.b[ks:rd.i], fmt.Sprintf("key %q", key))
			vs := rd.i
			_ = rd.skip(2)
			line(rd.b[vs:rd.i], fmt.Sprintf("%s: %s", key, describe(rd.b[vs:rd.i])))
		}
	case "timers":
		n, _ := rd.arrayLen()
		line(rd.b[start:rd.i], fmt.Sprintf("timers: array of %d", n))
		for range n {
			annotateValue(rd, "timer", line)
		}
	case "timer":
		n, _ := rd.arrayLen()
		line(rd.b[start:rd.i], fmt.Sprintf("timer: array of %d", n))
		for _, l := range []string{"receiver", "tid", "due", "remaining", "every", "fired", "repeat", "paused", "data"} {
			annotateValue(rd, l, line)
		}
	default:
		_ = rd.skip(1)
		line(rd.b[start:rd.i], label+": "+describe(rd.b[start:rd.i]))
	}
}

// describe renders one msgpack value of our own for a comment.
func describe(b []byte) string {
	var v any
	if err := msgpack.Unmarshal(b, &v); err != nil {
		return "?"
	}
	switch x := v.(type) {
	case nil:
		return "nil"
	case string:
		return fmt.Sprintf("str %q", x)
	case []byte:
		return fmt.Sprintf("bin %q", x)
	case []any:
		return fmt.Sprintf("array of %d", len(x))
	case float32, float64:
		return fmt.Sprintf("float64 %v", x)
	}
	return fmt.Sprint(v)
}
