package session

import (
	"math"

	"github.com/tickwheel/tickwheel/wheel"
)

// addFrom is wheel.AddFrom until the wheel has it (temporary).
func addFrom(w *wheel.Wheel, k wheel.Key, spec wheel.Spec, now uint64) (uint64, error) {
	now = max(now, w.Now())
	first := spec.At
	switch {
	case spec.At != 0 && spec.At <= now:
		return 0, wheel.ErrPast
	case spec.At == 0 && spec.After == 0:
		return 0, wheel.ErrZeroAfter
	case spec.At == 0 && spec.After > math.MaxUint64-now:
		return 0, wheel.ErrOverflow
	case spec.At == 0:
		first = now + spec.After
	}
	if spec.Every == 0 {
		spec.Every = first - now
	}
	spec.At, spec.After = first, 0
	return first, w.Add(k, spec)
}
