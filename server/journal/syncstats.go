package journal

import "time"

// SyncBuckets are the upper bounds of Stats.SyncCounts: the durations of
// the log's fsyncs (the loop's and the background syncer's).
var SyncBuckets = [...]time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 250 * time.Microsecond,
	500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second}

// SyncCounts counts fsyncs by duration: SyncCounts[i] took at most
// SyncBuckets[i] and more than SyncBuckets[i-1]; the last entry counts
// those above every bound.
type SyncCounts [len(SyncBuckets) + 1]uint64

// noteSync counts one fsync of duration d. The caller holds smu.
func (j *Journal) noteSync(d time.Duration) {
	j.lastSync = d
	j.syncs++
	j.syncSum += d
	i := 0
	for i < len(SyncBuckets) && d > SyncBuckets[i] {
		i++
	}
	j.syncHist[i]++
}
