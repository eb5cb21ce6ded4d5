package server

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// niceOf returns the nice value of thread tid of this process (field 19
// of /proc/self/task/TID/stat), or -100 when it is gone.
func niceOf(t *testing.T, tid string) int {
	b, err := os.ReadFile(filepath.Join("/proc/self/task", tid, "stat"))
	if err != nil {
		return -100
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // (the name may hold spaces)
	n, err := strconv.Atoi(fields[16])                            // field 19 of the whole line
	require.NoError(t, err)
	return n
}

// TestLowerPriorityIsTheGoroutinesThreadOnly: the snapshot encoder's
// goroutine runs at snapshot.nice (its thread's nice value), and once it
// returns no thread of the process is left at that value, so no other
// goroutine (the event loop) ever runs at it. (Had it run on the main
// thread, the runtime parks that thread for good instead of ending it:
// nothing runs there either.)
func TestLowerPriorityIsTheGoroutinesThreadOnly(t *testing.T) {
	got := make(chan int)
	go func() {
		require.NoError(t, lowerPriority(17))
		got <- niceOf(t, strconv.Itoa(unix.Gettid()))
	}()
	assert.Equal(t, 17, <-got, "the goroutine's thread")
	deadline := time.Now().Add(5 * time.Second)
	for {
		tids, err := os.ReadDir("/proc/self/task")
		require.NoError(t, err)
		var low []string
		for _, d := range tids {
			if d.Name() != strconv.Itoa(os.Getpid()) && niceOf(t, d.Name()) == 17 {
				low = append(low, d.Name())
			}
		}
		if len(low) == 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "threads still at nice 17: %v", low)
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, lowerPriority(0), "0: nothing to do")
}
