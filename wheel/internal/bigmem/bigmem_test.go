package bigmem

import (
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// A Mem is aligned to a huge page, zeroed, writable, counted in Mapped
// while mapped, and no longer once freed; Free twice, or of nil, is a no-op.
func TestMapAlignedZeroedCounted(t *testing.T) {
	before := Mapped()
	m := Map(3 << 20) // rounded up to 4 MiB
	if m == nil {
		t.Skip("nothing can be mapped outside the heap here")
	}
	b := m.Bytes()
	require.Len(t, b, 4<<20)
	require.Zero(t, uintptr(unsafe.Pointer(&b[0]))%HugePage, "aligned to a huge page")
	require.Equal(t, before+4<<20, Mapped())
	for i := 0; i < len(b); i += 4096 {
		require.Zero(t, b[i])
		b[i] = byte(i)
	}
	m.Free()
	m.Free()
	(*Mem)(nil).Free()
	require.Equal(t, before, Mapped())
	require.Nil(t, m.Bytes())
}

// A Mem that becomes unreachable is unmapped by its cleanup.
func TestMapUnreachableIsUnmapped(t *testing.T) {
	before := Mapped()
	m := Map(HugePage)
	if m == nil {
		t.Skip("nothing can be mapped outside the heap here")
	}
	m.Bytes()[0] = 1
	m = nil
	deadline := time.Now().Add(10 * time.Second)
	for Mapped() != before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	require.Equal(t, before, Mapped(), "the cleanup unmapped it")
}

// Where the kernel has transparent huge pages and allows them on request,
// a written Mem is backed by them (the reason for the package).
func TestMapAsksForHugePages(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("no transparent huge pages here")
	}
	m := Map(8 << 20)
	require.NotNil(t, m)
	defer m.Free()
	b := m.Bytes()
	for i := range b {
		b[i] = 1
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	start := uintptr(unsafe.Pointer(&b[0]))
	huge, found := hugeKiB(string(smaps), start)
	require.True(t, found, "the mapping is in smaps")
	require.Positive(t, huge, "backed by huge pages (the kernel's setting: %s)", strings.TrimSpace(string(mode)))
}

// Populate backs a Mem with RAM without changing what it holds, and
// refuses a freed Mem or a range past its end.
func TestPopulate(t *testing.T) {
	m := Map(4 << 20)
	if m == nil {
		t.Skip("nothing can be mapped outside the heap here")
	}
	b := m.Bytes()
	b[5] = 7
	if !m.Populate(0, 4<<20) {
		t.Skip("the kernel cannot populate (before Linux 5.14)")
	}
	require.Equal(t, byte(7), b[5], "contents unchanged")
	require.Zero(t, b[3<<20])
	smaps, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	rss, found := smapsField(string(smaps), uintptr(unsafe.Pointer(&b[0])), "Rss:")
	require.True(t, found)
	require.GreaterOrEqual(t, rss, 4<<10, "KiB resident: all of it")
	require.False(t, m.Populate(2<<20, 4<<20), "past the end")
	m.Free()
	require.False(t, m.Populate(0, 1<<20), "freed")
}

// With poison set, a freed Mem's memory faults when read (instead of
// being unmapped, where a later Map may take its addresses), and Mapped
// no longer counts it.
func TestPoisonFreedFaults(t *testing.T) {
	before := Mapped()
	m := Map(HugePage)
	if m == nil {
		t.Skip("nothing can be mapped outside the heap here")
	}
	defer SetPoison(SetPoison(true))
	b := m.Bytes()
	b[0] = 1
	m.Free()
	require.Equal(t, before, Mapped())
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var got byte
	require.Panics(t, func() { got = b[0] }, "a read of freed memory faults")
	require.Zero(t, got)
}
