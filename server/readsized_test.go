package server

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// TestReadSized: start-up reads the snapshot into one buffer of the file's
// size, one allocation (io.ReadAll, used before, grew its buffer a quarter
// at a time: 29 allocations and copies for these 4 MiB, about 70 for the
// 1.8 GB snapshot of 100M timers), and gets every byte whatever the size it
// was told, read in small pieces or not; a read error is returned.
func TestReadSized(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	for _, size := range []int64{int64(len(data)), 0, -1, 100, int64(len(data)) - 1, int64(len(data)) + 1, 3 * int64(len(data))} {
		got, err := readSized(bytes.NewReader(data), size)
		require.NoError(t, err, "size %d", size)
		require.Equal(t, data, got, "size %d", size)
		got, err = readSized(iotest.HalfReader(bytes.NewReader(data)), size)
		require.NoError(t, err, "size %d, half reads", size)
		require.Equal(t, data, got, "size %d, half reads", size)
	}
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := readSized(bytes.NewReader(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, 2.0, "allocations reading a snapshot of the size told") // the buffer (and the reader)
	boom := errors.New("disk on fire")
	_, err := readSized(io.MultiReader(bytes.NewReader(data[:1000]), iotest.ErrReader(boom)), int64(len(data)))
	require.ErrorIs(t, err, boom)
}
