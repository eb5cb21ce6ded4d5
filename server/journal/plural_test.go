package journal

import (
	"strings"
	"testing"
)

// What a damaged log loses is worded in the singular for one record:
// "lose record 5", not "(1 records, ...)".
func TestLostRecordsWording(t *testing.T) {
	one := (&CorruptError{File: "f", Reason: "bad", LostFrom: 5, LostTo: 5, LostBytes: 40}).Error()
	if !strings.Contains(one, "lose record 5 (40 bytes)") || strings.Contains(one, "1 records") {
		t.Errorf("one record lost: %s", one)
	}
	two := (&CorruptError{File: "f", Reason: "bad", LostFrom: 5, LostTo: 6, LostBytes: 80}).Error()
	if !strings.Contains(two, "lose records 5 to 6 (2 records, 80 bytes)") {
		t.Errorf("two records lost: %s", two)
	}
	tail := (&TailError{File: "TAIL", LogLast: 4, Tail: Tail{Durable: 5}}).Error()
	if !strings.Contains(tail, "record 5 (at least) is missing") || strings.Contains(tail, "1 records") {
		t.Errorf("one record missing: %s", tail)
	}
	tail = (&TailError{File: "TAIL", LogLast: 4, Tail: Tail{Durable: 7}}).Error()
	if !strings.Contains(tail, "records 5 to 7 (3 records, at least) are missing") {
		t.Errorf("three records missing: %s", tail)
	}
}
